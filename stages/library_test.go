package stages

import (
	"bytes"
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
		return dumpPipeline(t, map[string][]byte{"toolace": nil, "glaive": nil, "xlam": xlam}, stages)
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
