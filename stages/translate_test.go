package stages

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTranslateWithoutCountStreams: translate without count draws each
// record on its own (ratio), so it is no Planner: it runs on ingest's
// records as they are parsed (ingest: {keep: false}) and on those of a
// stage before it that keeps no shards, with the exports' bytes of a run
// that keeps every shard. With count it chooses from its whole input, and
// both are refused, naming translate.
func TestTranslateWithoutCountStreams(t *testing.T) {
	for _, c := range []struct{ stages, refused string }{
		{"  - translate: {mode: convert}\n  - export: {}\n" + ingestNotKept, ""},
		{"  - translate: {mode: convert, ratio: 0.5}\n  - export: {}\n" + ingestNotKept, ""},
		{"  - {decision_tokens: {}, keep: false}\n  - translate: {mode: convert}\n  - export: {}\n", ""},
		{"  - translate: {mode: convert, count: 2}\n  - export: {}\n" + ingestNotKept,
			`ingest: keep: false, but the stage "translate" reads its whole input before it starts`},
		{"  - {decision_tokens: {}, keep: false}\n  - translate: {mode: convert, count: 2}\n  - export: {}\n",
			`stage "decision_tokens": keep: false, but the stage "translate" after it reads its whole input before it starts`},
	} {
		p, err := Load(demoPipeline(t, c.stages))
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRunner(p, Options{Version: "test"})
		var cfg *ConfigError
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("stages:\n%s→ %v, want no config error", c.stages, err)
		case c.refused != "" && (!errors.As(err, &cfg) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("stages:\n%s→ %v, want a config error with %q", c.stages, err, c.refused)
		}
		if err == nil {
			r.Close()
		}
	}

	// The demo's zh dump (three Simplified-Chinese dialogues, one
	// English) beside glaive's: ratio 0.5 draws some of them.
	zhPipeline := func(stages string) string {
		dumps, err := filepath.Abs("../testdata/demo/dumps")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "pipeline.yaml")
		y := "seed: 7\noutput: {dir: out, shard_size: 2, jsonl: true}\nsources:\n" +
			"  - {name: zh, path: " + dumps + "/zh.jsonl, format: sharegpt}\n" +
			"  - {name: glaive, path: " + dumps + "/glaive.json, format: glaive}\nstages:\n" + stages
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kept := zhPipeline("  - decision_tokens: {}\n  - translate: {mode: convert, ratio: 0.5, keep: both}\n" +
		"  - verify: {checks: [roles]}\n  - export: {}\n  - negatives: {}\n")
	dropped := zhPipeline("  - {decision_tokens: {}, keep: false}\n  - translate: {mode: convert, ratio: 0.5, keep: both}\n" +
		"  - {verify: {checks: [roles]}, keep: false}\n  - export: {}\n  - negatives: {}\n" + ingestNotKept)
	runPipeline(t, kept)
	rep := runPipeline(t, dropped)
	outK, outD := filepath.Join(filepath.Dir(kept), "out"), filepath.Join(filepath.Dir(dropped), "out")
	sameAsKeptIn(t, outK, outD, []string{"00-ingest", "01-decision_tokens", "03-verify"})
	for _, s := range rep.Stages {
		if s.Dir == "02-translate" && (s.Ran == 0 || s.Counts.Added == 0 || s.Counts.Added >= 3) {
			t.Errorf("translate ran %d shards and added %d records: want every shard, and some of the 3 Simplified-Chinese records drawn (ratio 0.5, keep: both)", s.Ran, s.Counts.Added)
		}
	}
	if _, err := os.Stat(filepath.Join(outD, "02-translate", planFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("translate without count wrote %s (%v): it has no plan", planFile, err)
	}
	rerunDoesNothing(t, dropped, outD)
}

// TestTranslateOldRatioPlanKept: translate without count was a Planner
// whose plan, read from nothing, was "ratio=<ratio>", part of its shards'
// keys. An output dir made then stays up to date: a rerun redoes nothing.
func TestTranslateOldRatioPlanKept(t *testing.T) {
	path := demoPipeline(t, "  - translate: {mode: convert}\n  - export: {}\n")
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	// What the earlier version recorded: the plan, in every shard's key,
	// and the (empty) plan file, named in the manifest.
	m := readManifest(t, out, "01-translate")
	if m.Plan != "" {
		t.Fatalf("translate recorded the plan %q, want none", m.Plan)
	}
	in := readManifest(t, out, "00-ingest")
	m.Plan = "ratio=1"
	for i, s := range m.Shards {
		src, ok := in.Shard(s.Name)
		ref, ok2 := parquetOf(src)
		if !ok || !ok2 {
			t.Fatalf("ingest has no shard %s", s.Name)
		}
		m.Shards[i].Key = shardKey(m.ConfigHash, "plan="+m.Plan, ref)
	}
	plan := encodePlan(planHeader{Type: "translate", Digest: m.Plan}, nil)
	if err := os.WriteFile(filepath.Join(out, "01-translate", planFile), plan, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Files = []string{"01-translate/" + planFile}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "01-translate", "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rerunDoesNothing(t, path, out)
}
