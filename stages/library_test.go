package stages

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The tool library reaches, and is fingerprinted for, only the stages that
// read it: an edit of one record's tools changes the library, and a stage
// that does not read it redoes only the shard holding that record (ingest
// makes the edited dump's shards again, and the others come out the same),
// while meta_tool (a reader) redoes every shard. Either way the run ends
// with a clean run's bytes.
func TestToolLibraryOnlyInItsReadersKeys(t *testing.T) {
	orig, err := os.ReadFile("../testdata/demo/dumps/xlam.json")
	if err != nil {
		t.Fatal(err)
	}
	// A tool no dump has, beside the first record's.
	edited := bytes.Replace(orig, []byte(`"tools": "[`), []byte(`"tools": "[{\"name\": \"count_sheep\", \"description\": \"Counts sheep.\", \"parameters\": {}}, `), 1)
	if bytes.Equal(edited, orig) {
		t.Fatal("the demo's xlam dump changed; the test no longer adds a tool")
	}
	pipeline := func(xlam []byte, stages string) (path, out string) {
		dir := t.TempDir()
		for _, name := range []string{"toolace.json", "glaive.json"} {
			b, err := os.ReadFile(filepath.Join("../testdata/demo/dumps", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "xlam.json"), xlam, 0o644); err != nil {
			t.Fatal(err)
		}
		y := fmt.Sprintf("seed: 7\noutput: {dir: out, shard_size: 2, jsonl: true}\nsources:\n"+
			"  - {name: toolace, path: toolace.json, format: toolace}\n  - {name: glaive, path: glaive.json, format: glaive}\n"+
			"  - {name: xlam, path: xlam.json, format: xlam}\nstages:\n%s", stages)
		path = filepath.Join(dir, "pipeline.yaml")
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return path, filepath.Join(dir, "out")
	}
	ran := func(rep *Report, typ string) (ran, skipped int) {
		for _, s := range rep.Stages {
			if s.Type == typ {
				return s.Ran, s.Skipped
			}
		}
		t.Fatalf("no %s stage in the report", typ)
		return 0, 0
	}
	for _, tc := range []struct {
		name, stages string
		typ          string // the stage whose shards are counted
		reads        bool   // it reads the library
	}{
		{"decision_tokens", "  - decision_tokens: {}\n  - export: {}\n", "decision_tokens", false},
		{"meta_tool", "  - meta_tool: {}\n  - export: {}\n", "meta_tool", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanPath, cleanOut := pipeline(edited, tc.stages)
			runPipeline(t, cleanPath)

			path, out := pipeline(orig, tc.stages)
			rep := runPipeline(t, path)
			all, _ := ran(rep, tc.typ)
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "xlam.json"), edited, 0o644); err != nil {
				t.Fatal(err)
			}
			rep = runPipeline(t, path)
			got, skipped := ran(rep, tc.typ)
			want := 1 // the shard of the edited record
			if tc.reads {
				want = all
			}
			if got != want || got+skipped != all || all < 3 {
				t.Errorf("after the xlam edit %s ran %d shards and skipped %d of %d: want %d run", tc.typ, got, skipped, all, want)
			}
			sameAsClean(t, "xlam edited", cleanOut, out)
		})
	}
}
