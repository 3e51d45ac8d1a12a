package stages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/report"
)

// unlistedFiles returns the files of the stage directory stage of out
// that its manifest does not name as a file on disk: a not-kept shard's
// path names none.
func unlistedFiles(t *testing.T, out, stage string) []string {
	t.Helper()
	m := readManifest(t, out, stage)
	listed := map[string]bool{stage + "/" + manifestFile: true}
	for _, f := range m.Files {
		listed[f] = true
	}
	for _, sh := range m.Shards {
		for _, o := range sh.Outputs {
			if !o.NotKept {
				listed[o.Path] = true
			}
		}
	}
	var left []string
	err := filepath.WalkDir(filepath.Join(out, stage), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		rel = filepath.ToSlash(rel)
		if !listed[rel] && filepath.Base(rel) != report.CardFile {
			left = append(left, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// editFile replaces old with new in the file at path, which must hold it.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNotKeptShardLeavesNoStaleFile turns ingest, then a stage, to keep:
// false where their shards are made again: the Parquet shards the earlier
// run kept at the same paths go with the manifest entries that named them
// (a not-kept shard's path names no file), so that reading the stage's
// folder never reads an earlier run's records.
func TestNotKeptShardLeavesNoStaleFile(t *testing.T) {
	path, out := dumpPipeline(t, map[string][]byte{"glaive": nil}, "  - decision_tokens: {}\n  - export: {}\n")
	runPipeline(t, path)
	// The dump loses its last rows: glaive's first shards are made again
	// (not kept), its last are gone.
	editRows(t, path, "glaive", 6, func(rows []json.RawMessage) []json.RawMessage { return rows[:4] })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(ingestNotKept)
	f.Close()
	runPipeline(t, path)
	m := readManifest(t, out, "00-ingest")
	if len(m.Shards) != 2 || !notKept(m.Shards[0]) {
		t.Fatalf("ingest recorded %d shards (the first not kept: %v), want 2 not kept", len(m.Shards), len(m.Shards) > 0 && notKept(m.Shards[0]))
	}
	for _, stage := range []string{"00-ingest", "01-decision_tokens"} {
		if left := unlistedFiles(t, out, stage); len(left) > 0 {
			t.Errorf("ingest turned to keep: false over a changed dump: %s holds files its manifest does not name: %v", stage, left)
		}
	}
	// A stage turned to keep: false whose shards are made again.
	editFile(t, path, "  - decision_tokens: {}", `  - {decision_tokens: {answer_token: "<|a|>"}, keep: false}`)
	editFile(t, path, ingestNotKept, "")
	runPipeline(t, path)
	if m := readManifest(t, out, "01-decision_tokens"); len(m.Shards) != 2 || !notKept(m.Shards[0]) {
		t.Fatalf("decision_tokens recorded %d shards, want 2 not kept", len(m.Shards))
	}
	for _, stage := range []string{"00-ingest", "01-decision_tokens", "02-export"} {
		if left := unlistedFiles(t, out, stage); len(left) > 0 {
			t.Errorf("decision_tokens turned to keep: false: %s holds files its manifest does not name: %v", stage, left)
		}
	}
	rerunDoesNothing(t, path, out)
	// A stale shard an earlier augment left at a not-kept shard's path
	// (it deleted none there) goes at the next run, whose stages are up
	// to date.
	stale := filepath.Join(out, "00-ingest", "part-glaive-00000.parquet")
	if err := os.Link(stale, filepath.Join(out, "01-decision_tokens", "part-glaive-00000.parquet")); err != nil {
		t.Fatal(err)
	}
	runPipeline(t, path)
	if left := unlistedFiles(t, out, "01-decision_tokens"); len(left) > 0 {
		t.Errorf("an up-to-date stage kept a stale file at a not-kept shard's path: %v", left)
	}
}

// removedSourceStages has, after its first group, a Planner whose quota
// takes records of every source (a removed source's records leave room
// for others') and a second export.
const removedSourceStages = `  - decision_tokens: {}
  - export: {}
  - sample: {quotas: [{n: 6}]}
  - {name: ex2, export: {}}
`

// TestRemovedSourceAsFreshRun removes a source from pipeline.yaml while
// no stage has other work: every stage drops the source's shards and
// their files, its totals follow, and the outputs (exports, dataset cards,
// report partials) are the bytes of a fresh run over the other sources.
func TestRemovedSourceAsFreshRun(t *testing.T) {
	bothIngests(t, func(t *testing.T, ingest string) {
		path, out := dumpPipeline(t, map[string][]byte{"toolace": nil, "glaive": nil, "xlam": nil}, removedSourceStages+ingest)
		runPipeline(t, path)
		editFile(t, path, "  - {name: xlam, path: xlam.json, format: xlam}\n", "")
		runPipeline(t, path)
		freshPath, freshOut := dumpPipeline(t, map[string][]byte{"toolace": nil, "glaive": nil}, removedSourceStages+ingest)
		runPipeline(t, freshPath)
		sameAsFreshRun(t, out, freshOut)
		for _, sr := range []string{"00-ingest", "01-decision_tokens", "02-export", "03-sample", "04-ex2"} {
			m, fm := readManifest(t, out, sr), readManifest(t, freshOut, sr)
			if g, w := shardNames(m), shardNames(fm); len(g) != len(w) || m.Totals.In != fm.Totals.In || m.Totals.Out != fm.Totals.Out {
				t.Errorf("%s records %d shards, in %d, out %d; a fresh run %d, %d, %d", sr, len(g), m.Totals.In, m.Totals.Out, len(w), fm.Totals.In, fm.Totals.Out)
			}
			if strings.Join(m.Notes, "\n") != strings.Join(fm.Notes, "\n") {
				t.Errorf("%s notes %q; a fresh run's %q", sr, m.Notes, fm.Notes)
			}
		}
		stageOrder(t, out)
		rerunDoesNothing(t, path, out)
	})
}

// Changing decision_tokens' tokens remakes the inline export's samples
// that name them, also those of shards whose records decision_tokens
// passes on unchanged (xlam's: no text-answer turn), so the output is a
// fresh run's.
func TestDecisionTokensChangeRemakesExport(t *testing.T) {
	const stages = "  - decision_tokens: {}\n  - name: ex\n    export: {style: inline, surface: decision}\n"
	const changed = "  - decision_tokens: {answer_token: '<|ans|>'}\n  - name: ex\n    export: {style: inline, surface: decision}\n"
	dumps := map[string][]byte{"glaive": nil, "xlam": nil}
	path, out := dumpPipeline(t, dumps, stages)
	runPipeline(t, path)
	editFile(t, path, stages, changed)
	runPipeline(t, path)
	freshPath, freshOut := dumpPipeline(t, dumps, changed)
	runPipeline(t, freshPath)
	sameAsFreshRun(t, out, freshOut)
	rerunDoesNothing(t, path, out)
}

// sameAsFreshRun checks that the run dir out holds the files of the fresh
// run's dir, with the same bytes, and no other (manifests, report.html and
// config.yaml aside: they hold times and paths).
func sameAsFreshRun(t *testing.T, out, freshOut string) {
	t.Helper()
	got, want := tree(t, out), tree(t, freshOut)
	for name, sum := range want {
		switch base := filepath.Base(name); {
		case base == "manifest.json", base == report.HTMLFile, base == "config.yaml":
		case got[name] != sum:
			t.Errorf("%s differs from a fresh run's", name)
		}
		delete(got, name)
	}
	for name := range got {
		t.Errorf("%s: not in a fresh run", name)
	}
}

// A rerun that asks the teacher nothing (it only drops the shards of
// rows gone from a dump, or remakes shards that need no request) keeps the
// LLM stage's teacher accounting of the shards it keeps, so the dataset
// card still says an offline stand-in wrote them, as a fresh run's does.
func TestRerunWithoutRequestsKeepsAccounting(t *testing.T) {
	const stages = "  - reason: {style: mediatek}\n  - name: ex\n    export: {style: inline, surface: decision, allow_offline: true}\n"
	const warning = "Teacher: offline stand-in"
	path, out := dumpPipeline(t, map[string][]byte{"glaive": nil, "xlam": nil}, stages)
	editFile(t, path, "seed: 7\n", "seed: 7\nteacher: {provider: offline}\n")
	runPipeline(t, path)
	first := readManifest(t, out, "01-reason").LLM
	if len(first) == 0 {
		t.Fatal("01-reason: no llm accounting after the first run")
	}
	editRows(t, path, "glaive", 3, func(rows []json.RawMessage) []json.RawMessage { return rows[:len(rows)-2] })
	for _, s := range runPipeline(t, path).Stages {
		if s.Name == "reason" && s.LLM != nil {
			t.Fatalf("the rerun asked the teacher %d times: not the case this test is of", s.LLM.Requests)
		}
	}
	if got := readManifest(t, out, "01-reason").LLM; string(got) != string(first) {
		t.Errorf("01-reason llm after a rerun that asked nothing:\n%s\nwant the earlier run's\n%s", got, first)
	}
	card, err := os.ReadFile(filepath.Join(out, "02-ex", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(card), warning) {
		t.Errorf("the card after the rerun lacks %q", warning)
	}
	rerunDoesNothing(t, path, out)
}
