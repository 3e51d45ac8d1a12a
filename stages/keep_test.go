package stages

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// keepStages is chainStages with keep: false on every stage that may drop
// its shards: several in a row, one before a sink (the export then reads
// them in memory), and a Planner (dedup).
const keepStages = `  - {meta_tool: {}, keep: false}
  - {decision_tokens: {}, keep: false}
  - {negatives: {target: token}, keep: false}
  - {verify: {checks: [roles, calls_resolved, args_schema, meta_tool_shape]}, keep: false}
  - export: {}
  - name: reason
    reason: {}
  - {dedup: {}, keep: false}
  - name: export_inline
    export: {style: inline, surface: llama3, allow_offline: true, dataset: inline}
`

// droppedDirs are keepStages' stage directories that keep no shards.
var droppedDirs = []string{"01-meta_tool", "02-decision_tokens", "03-negatives", "04-verify", "07-dedup"}

// sameAsKept checks a run of keepStages against a run of the same stages
// that keeps every shard: every file the same bytes, except the Parquet
// shards of the stages that keep none (absent), the manifests (which name
// them as not kept) and what hashes the pipeline file (the report and the
// dataset cards).
func sameAsKept(t *testing.T, kept, dropped string) {
	t.Helper()
	sameAsKeptIn(t, kept, dropped, droppedDirs)
}

// sameAsKeptIn is sameAsKept for the stage directories droppedDirs that
// keep no shards.
func sameAsKeptIn(t *testing.T, kept, dropped string, droppedDirs []string) {
	t.Helper()
	tk, td := tree(t, kept), tree(t, dropped)
	for name, sum := range tk {
		dir, base := filepath.Split(name)
		isDropped := false
		for _, d := range droppedDirs {
			isDropped = isDropped || filepath.Clean(dir) == d
		}
		switch {
		case isDropped && strings.HasPrefix(base, "part-"): // the Parquet shard and its JSONL twin
			if _, ok := td[name]; ok {
				t.Errorf("%s: written by a stage with keep: false", name)
			}
		case base == "manifest.json", base == report.HTMLFile, base == report.CardFile, base == "config.yaml":
		case td[name] != sum:
			t.Errorf("%s differs from the run that keeps every shard", name)
		}
		delete(td, name)
	}
	for name := range td {
		if base := filepath.Base(name); base != "manifest.json" && base != report.HTMLFile && base != report.CardFile && base != "config.yaml" {
			t.Errorf("%s: only in the run with keep: false", name)
		}
	}
}

// TestKeepFalseSameOutputs runs a pipeline with keep: false on several
// stages beside the same pipeline keeping every shard: the exports and
// every kept file are the same bytes, the manifests still balance and name
// each dropped shard as not kept, and a rerun does nothing.
func TestKeepFalseSameOutputs(t *testing.T) {
	kept := demoPipeline(t, chainStages)
	dropped := demoPipeline(t, keepStages)
	runPipeline(t, kept)
	runPipeline(t, dropped)
	outK, outD := filepath.Join(filepath.Dir(kept), "out"), filepath.Join(filepath.Dir(dropped), "out")
	sameAsKept(t, outK, outD)
	for _, d := range droppedDirs {
		m := readManifest(t, outD, d)
		if err := m.Totals.Balanced(); err != nil {
			t.Errorf("%s: %v", d, err)
		}
		for _, s := range m.Shards {
			if !notKept(s) {
				t.Errorf("%s shard %s: no output named as not kept: %+v", d, s.Name, s.Outputs)
			}
		}
		if km := readManifest(t, outK, d); km.Totals.Out != m.Totals.Out || km.Totals.In != m.Totals.In {
			t.Errorf("%s: counts in %d out %d; keeping every shard %d, %d", d, m.Totals.In, m.Totals.Out, km.Totals.In, km.Totals.Out)
		}
	}
	stageOrder(t, outD)
	rerunDoesNothing(t, dropped, outD)
}

// TestKeepFalseLaterStageChanged changes the stages after stages that keep
// no shards (the second after a Planner, dedup): they make their shards
// again in memory, without recording or writing anything, and the changed
// stages' outputs are those of a run that keeps every shard.
func TestKeepFalseLaterStageChanged(t *testing.T) {
	kept := demoPipeline(t, chainStages)
	dropped := demoPipeline(t, keepStages)
	runPipeline(t, dropped)
	for _, path := range []string{kept, dropped} {
		b, _ := os.ReadFile(path)
		changed := strings.Replace(string(b), "  - export: {}", "  - export: {style: inline, surface: llama3, allow_offline: true}", 1)
		// The export after dedup, a Planner that keeps no shards: dedup
		// makes its shards again with its saved plan.
		changed = strings.Replace(changed, "surface: llama3, allow_offline: true, dataset: inline}", "surface: decision, allow_offline: true, dataset: inline}", 1)
		if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outD := filepath.Join(filepath.Dir(dropped), "out")
	before := tree(t, outD)
	rep := runPipeline(t, dropped)
	for _, s := range rep.Stages {
		if s.Type == "export" {
			if s.Ran == 0 {
				t.Errorf("%s ran no shard; its settings changed", s.Dir)
			}
			continue
		}
		if s.Ran != 0 {
			t.Errorf("%s ran %d shards, want none", s.Dir, s.Ran)
		}
	}
	after := tree(t, outD)
	for _, d := range droppedDirs {
		for name, sum := range before {
			if strings.HasPrefix(name, d+"/") && after[name] != sum && !strings.HasSuffix(name, "manifest.json") {
				t.Errorf("%s changed: a stage made again for the next one writes nothing", name)
			}
		}
	}
	runPipeline(t, kept)
	sameAsKept(t, filepath.Join(filepath.Dir(kept), "out"), outD)
}

// TestKeepTurnedOn reruns a pipeline whose stages kept no shards with
// every shard kept: the stages make them again, and the run is the one
// that always kept them.
func TestKeepTurnedOn(t *testing.T) {
	kept := demoPipeline(t, chainStages)
	path := demoPipeline(t, keepStages)
	runPipeline(t, path)
	b, _ := os.ReadFile(kept)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := runPipeline(t, path)
	for _, s := range rep.Stages {
		for _, d := range droppedDirs {
			if s.Dir == d && s.Ran == 0 {
				t.Errorf("%s ran no shard: its shards were not kept", s.Dir)
			}
		}
	}
	runPipeline(t, kept)
	// The exports' manifests name their inputs by the kept shards now.
	sameOutputs(t, filepath.Join(filepath.Dir(kept), "out"), filepath.Join(filepath.Dir(path), "out"), true)
}

// TestKeepFalseKilledResumes stops a run with keep: false in the middle of
// its groups and resumes it to the files of a clean run.
func TestKeepFalseKilledResumes(t *testing.T) {
	killedResumesToCleanRun(t, keepStages, []killAt{{"decision_tokens", 1}, {"verify", 2}, {"export", 2}, {"export_inline", 1}})
}

// TestKeepFalseCountsChecked makes a dropped shard again after its
// manifest's counts were edited: the run stops, naming the stage, instead
// of handing on records the next stage's key does not stand for.
func TestKeepFalseCountsChecked(t *testing.T) {
	path := demoPipeline(t, keepStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	mpath := filepath.Join(out, "03-negatives", "manifest.json")
	m, err := manifests.Read[manifests.Stage](mpath)
	if err != nil {
		t.Fatal(err)
	}
	m.Shards[0].Out++
	m.Shards[0].Added++
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	changed := strings.Replace(string(b), "  - export: {}", "  - export: {style: inline, surface: llama3, allow_offline: true}", 1)
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = tryPipeline(t, path)
	if err == nil || !strings.Contains(err.Error(), "stage negatives") || !strings.Contains(err.Error(), "other counts than its manifest records") {
		t.Fatalf("run after the counts were edited: %v, want the negatives stage's counts refused", err)
	}
}

// TestKeepFalseRefused lists the places keep: false cannot go.
func TestKeepFalseRefused(t *testing.T) {
	for _, c := range []struct{ stages, want string }{
		{"  - decision_tokens: {}\n  - {negatives: {}, keep: false}\n", `stage "negatives": keep: false on the last stage that runs`},
		{"  - {negatives: {}, keep: false}\n  - {name: last, decision_tokens: {}, skip: true}\n", `stage "negatives": keep: false on the last stage that runs`},
		{"  - {export: {}, keep: false}\n  - decision_tokens: {}\n", `stage "export": keep: false on an export`},
		{"  - {decision_tokens: {}, keep: false}\n  - dedup: {}\n", `stage "decision_tokens": keep: false, but the stage "dedup" after it reads its whole input`},
		{"  - {decision_tokens: {}, keep: false}\n  - export: {}\n  - sample: {quotas: [{n: 3}]}\n", `stage "decision_tokens": keep: false, but the stage "sample" after it reads its whole input`},
	} {
		configRefused(t, c.stages, c.want)
	}
}

// configRefused fails t unless NewRunner refuses the demo pipeline with
// these stages with a config error that says want.
func configRefused(t *testing.T, stages, want string) {
	t.Helper()
	p, err := Load(demoPipeline(t, stages))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewRunner(p, Options{Version: "test"})
	if ce := (*ConfigError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
		t.Errorf("stages:\n%s→ %v, want a config error with %q", stages, err, want)
	}
}

// TestKeepFalseLLMStageNotPaidTwice runs a teacher stage with keep: false
// against the fake server, then changes the export after it: the stage
// makes its shards again from the request cache, sending nothing.
func TestKeepFalseLLMStageNotPaidTwice(t *testing.T) {
	fake, url := llmrunFake(t, fakellm.Config{Script: llmrunScript})
	path := llmrunPipeline(t, llmrunRows(30), 10, []llm.Endpoint{{BaseURL: url + "/v1", MaxInFlight: 4}}, "")
	b, _ := os.ReadFile(path)
	y := strings.Replace(string(b), "  - reason: {style: meta_tool}", "  - {reason: {style: meta_tool}, keep: false}", 1)
	if y == string(b) {
		t.Fatal("the pipeline has no reason stage to change")
	}
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, log, err := llmrunRun(t, path); err != nil {
		t.Fatalf("first run: %v\n%s", err, log)
	}
	sent := fake.Counters().Chat
	if sent == 0 {
		t.Fatal("the reason stage sent no request")
	}
	y = strings.Replace(y, "export: {dataset: e2e}", "export: {dataset: e2e, style: inline, surface: llama3}", 1)
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, log, err := llmrunRun(t, path)
	if err != nil {
		t.Fatalf("run with the export changed: %v\n%s", err, log)
	}
	if got := fake.Counters().Chat; got != sent {
		t.Errorf("the teacher got %d requests in all, %d in the first run: a shard made again paid for answers", got, sent)
	}
	for _, s := range rep.Stages {
		if s.Type == "export" && s.Ran == 0 {
			t.Errorf("the export ran no shard; its settings changed")
		}
		if s.Type == "reason" && s.Ran != 0 {
			t.Errorf("reason ran %d shards, want none (made again in memory only)", s.Ran)
		}
	}
}
