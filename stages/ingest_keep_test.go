package stages

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
)

// ingestKeepStages keeps no shards of ingest and of the stages of the
// first group but its export, and no shards of dedup, the Planner that
// starts the second group, after which meta_tool reads the tool library.
const ingestKeepStages = `  - {decision_tokens: {}, keep: false}
  - {negatives: {target: token}, keep: false}
  - {verify: {checks: [roles, calls_resolved, args_schema]}, keep: false}
  - export: {}
  - name: reason
    reason: {}
  - {dedup: {}, keep: false}
  - meta_tool: {}
  - name: export_inline
    export: {style: inline, surface: llama3, allow_offline: true, dataset: inline}
`

// ingestNotKept is the pipeline line that makes ingest keep no shards.
const ingestNotKept = "ingest: {keep: false}\n"

// bothIngests runs test as the subtests "ingest kept" and "ingest not
// kept", given the pipeline line of each ("" or ingestNotKept).
func bothIngests(t *testing.T, test func(t *testing.T, ingest string)) {
	t.Helper()
	for _, ingest := range []string{"", ingestNotKept} {
		name := "ingest kept"
		if ingest != "" {
			name = "ingest not kept"
		}
		t.Run(name, func(t *testing.T) { test(t, ingest) })
	}
}

// ingestDroppedDirs are the stage directories of ingestKeepStages with
// ingestNotKept that keep no shards.
var ingestDroppedDirs = []string{"00-ingest", "01-decision_tokens", "02-negatives", "03-verify", "06-dedup"}

// TestIngestKeepFalseSameOutputs runs ingestKeepStages with ingest keeping
// no shards beside the same stages with ingest keeping them: every file
// but the manifests, the report and config.yaml is the same bytes (the
// exports, their dataset cards and report partials included), ingest's
// manifest names each shard as not kept, no manifest records a shard whose
// input the stage before does not record, and a rerun does nothing.
func TestIngestKeepFalseSameOutputs(t *testing.T) {
	kept := demoPipeline(t, ingestKeepStages)
	dropped := demoPipeline(t, ingestKeepStages+ingestNotKept)
	runPipeline(t, kept)
	runPipeline(t, dropped)
	outK, outD := filepath.Join(filepath.Dir(kept), "out"), filepath.Join(filepath.Dir(dropped), "out")
	sameAsKeptIn(t, outK, outD, ingestDroppedDirs)
	m := readManifest(t, outD, "00-ingest")
	if len(m.Shards) < 3 {
		t.Fatalf("ingest recorded %d shards, want one per shard_size rows of each source", len(m.Shards))
	}
	sums := map[string]string{}
	for _, s := range m.Shards {
		ref, ok := parquetOf(s)
		if !ok || !ref.NotKept {
			t.Errorf("ingest shard %s: no output named as not kept: %+v", s.Name, s.Outputs)
			continue
		}
		// The hash stands for the shard's records, in the next stage's key.
		if other, dup := sums[ref.SHA256]; ref.SHA256 == "" || dup {
			t.Errorf("ingest shard %s: not-kept hash %q (also shard %q's)", s.Name, ref.SHA256, other)
		}
		sums[ref.SHA256] = s.Name
	}
	if km := readManifest(t, outK, "00-ingest"); fmt.Sprint(shardNames(km)) != fmt.Sprint(shardNames(m)) || km.Totals.Out != m.Totals.Out {
		t.Errorf("ingest recorded shards %v (%d records); keeping its shards %v (%d)", shardNames(m), m.Totals.Out, shardNames(km), km.Totals.Out)
	}
	// The manifests of the first group list the shards in ingest's order,
	// though they were made as ingest parsed them.
	if dm := readManifest(t, outD, "01-decision_tokens"); fmt.Sprint(shardNames(dm)) != fmt.Sprint(shardNames(m)) {
		t.Errorf("decision_tokens recorded shards %v, ingest %v", shardNames(dm), shardNames(m))
	}
	stageOrder(t, outD)
	rerunDoesNothing(t, dropped, outD)
}

// TestIngestKeepFalseLaterStageChanged changes the export of the first
// group: the dumps are read again (ingest kept nothing to read them from)
// and decision_tokens' shards made again in memory, but only the export
// runs, ingest's files stay the same bytes, and the outputs are those of a
// run that keeps every shard.
func TestIngestKeepFalseLaterStageChanged(t *testing.T) {
	kept := demoPipeline(t, ingestKeepStages)
	dropped := demoPipeline(t, ingestKeepStages+ingestNotKept)
	runPipeline(t, dropped)
	for _, path := range []string{kept, dropped} {
		b, _ := os.ReadFile(path)
		changed := strings.Replace(string(b), "  - export: {}", "  - export: {style: inline, surface: llama3, allow_offline: true}", 1)
		if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outD := filepath.Join(filepath.Dir(dropped), "out")
	before := tree(t, outD)
	for _, s := range runPipeline(t, dropped).Stages {
		if s.Type == "export" && s.Dir == "04-export" {
			if s.Ran == 0 {
				t.Errorf("%s ran no shard; its settings changed", s.Dir)
			}
		} else if s.Ran != 0 {
			t.Errorf("%s ran %d shards, want none", s.Dir, s.Ran)
		}
	}
	after := tree(t, outD)
	for name, sum := range before {
		if strings.HasPrefix(name, "00-ingest/") && after[name] != sum && !strings.HasSuffix(name, "manifest.json") {
			t.Errorf("%s changed: a dump read again for the stages after ingest gives the same files", name)
		}
	}
	runPipeline(t, kept)
	sameAsKeptIn(t, filepath.Join(filepath.Dir(kept), "out"), outD, ingestDroppedDirs)
	stageOrder(t, outD)
}

// TestIngestKeepFalseDumpChanged changes one of three dumps: only its
// shards are made again, at every stage; the other sources are neither
// read nor made again, and the outputs are those of a run that keeps every
// shard over the changed dumps.
func TestIngestKeepFalseDumpChanged(t *testing.T) {
	const stages = "  - {decision_tokens: {}, keep: false}\n  - export: {}\n"
	dumps := map[string][]byte{"toolace": nil, "glaive": nil, "xlam": nil}
	kept, outK := dumpPipeline(t, dumps, stages)
	dropped, outD := dumpPipeline(t, dumps, stages+ingestNotKept)
	runPipeline(t, dropped)
	for _, path := range []string{kept, dropped} {
		// Drop the array's first element: every shard of glaive changes.
		editRows(t, path, "glaive", 2, func(rows []json.RawMessage) []json.RawMessage { return rows[1:] })
	}
	glaive := 0
	for _, s := range readManifest(t, outD, "00-ingest").Shards {
		if strings.HasPrefix(s.Name, "glaive-") {
			glaive++
		}
	}
	rep := runPipeline(t, dropped)
	for _, s := range rep.Stages {
		// The changed dump has one row less: as many shards or one less.
		if s.Ran < glaive-1 || s.Ran > glaive || s.Skipped == 0 {
			t.Errorf("%s ran %d shards and skipped %d; want glaive's %d (or one less) made again, the others skipped", s.Dir, s.Ran, s.Skipped, glaive)
		}
	}
	runPipeline(t, kept)
	sameAsKeptIn(t, outK, outD, []string{"00-ingest", "01-decision_tokens"})
	stageOrder(t, outD)
	rerunDoesNothing(t, dropped, outD)
}

// TestIngestKeepFalseKilledResumes stops runs whose ingest keeps no
// shards while ingest still reads the dumps (after the first of three)
// and in the middle of the groups, and resumes each to the files of a
// clean run.
func TestIngestKeepFalseKilledResumes(t *testing.T) {
	killedResumesToCleanRun(t, ingestKeepStages+ingestNotKept,
		[]killAt{{"ingest", 1}, {"ingest", 2}, {"decision_tokens", 1}, {"export", 2}, {"meta_tool", 1}})
}

// TestIngestKeepFalseRefused lists the places ingest: {keep: false} cannot
// go: where its records would go nowhere, before a stage that reads its
// whole input first (through an export too), and before a stage of the
// first group that reads the tool library.
func TestIngestKeepFalseRefused(t *testing.T) {
	for _, c := range []struct{ stages, want string }{
		{"  - {name: only, decision_tokens: {}, skip: true}\n", "ingest: keep: false, but no stage runs after ingest"},
		{"  - dedup: {}\n  - export: {}\n", `ingest: keep: false, but the stage "dedup" reads its whole input before it starts`},
		{"  - export: {}\n  - sample: {quotas: [{n: 3}]}\n", `ingest: keep: false, but the stage "sample" reads its whole input before it starts`},
		{"  - decision_tokens: {}\n  - meta_tool: {}\n  - export: {}\n", `ingest: keep: false, but the stage "meta_tool" runs on ingest's records as they are parsed and reads the tool library`},
		{"  - tool_dc: {}\n  - export: {}\n", `the stage "tool_dc" runs on ingest's records as they are parsed and reads the tool library`},
	} {
		configRefused(t, c.stages+ingestNotKept, c.want)
	}
	// A Planner first is refused for itself only: the library reader
	// after it runs once ingest has ended.
	p, err := Load(demoPipeline(t, "  - dedup: {}\n  - meta_tool: {}\n"+ingestNotKept))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = NewRunner(p, Options{Version: "test"}); err == nil || strings.Contains(err.Error(), "tool library") {
		t.Errorf("dedup then meta_tool: %v, want dedup refused, not meta_tool", err)
	}
	// After a Planner, the library is there: allowed.
	p, err = Load(demoPipeline(t, "  - decision_tokens: {}\n  - dedup: {}\n  - meta_tool: {}\n"+ingestNotKept))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(p, Options{Version: "test"})
	if err != nil {
		t.Fatalf("meta_tool after dedup: %v", err)
	}
	r.Close()
}

// TestIngestKeepFalseSample runs an export over two dumps of more rows
// than the report's token sample, with ingest's shards kept and not: the
// export's report partials, counted before ingest knew how many records it
// hands on, are the same bytes (narrowed to the sample a kept run draws).
// Then one dump and the export change: the other dump's export shards,
// made again while the changed dump is read, wait for its count too.
func TestIngestKeepFalseSample(t *testing.T) {
	rows := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, "%s\n", oaRow(fmt.Sprintf("question %d %s", i, strings.Repeat("x", i%37))))
		}
		return b.String()
	}
	dirs := map[string]string{}
	for _, extra := range []string{"", ingestNotKept} {
		dir := t.TempDir()
		for name, dump := range map[string]string{"a.jsonl": rows(0, 7000), "b.jsonl": rows(7000, 5000)} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(dump), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		y := "seed: 1\noutput: {dir: out, shard_size: 2000}\nsources:\n  - {name: a, path: a.jsonl, format: openai}\n" +
			"  - {name: b, path: b.jsonl, format: openai}\nstages:\n  - export: {}\n" + extra
		if err := os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs[extra] = dir
	}
	same := func(round string, want int) {
		kept, dropped := tree(t, filepath.Join(dirs[""], "out")), tree(t, filepath.Join(dirs[ingestNotKept], "out"))
		n := 0
		for name, sum := range kept {
			if strings.HasPrefix(filepath.Base(name), "dist-") {
				n++
				if dropped[name] != sum {
					t.Errorf("%s: %s differs from the run that keeps ingest's shards", round, name)
				}
			}
		}
		if n != want {
			t.Errorf("%s: %d report partials, want %d", round, n, want)
		}
		if kept["01-export/"+report.CardFile] != dropped["01-export/"+report.CardFile] {
			t.Errorf("%s: the dataset cards differ", round)
		}
	}
	for _, dir := range dirs {
		runPipeline(t, filepath.Join(dir, "pipeline.yaml"))
	}
	same("first run", 4+3)
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(rows(7000, 4000)), 0o644); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "pipeline.yaml")
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), "export: {}", "export: {dataset: other}", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		runPipeline(t, path)
	}
	same("dump b and the export changed", 4+2)
}

// TestShardSampleRows: the estimate of a source's records from one shard.
func TestShardSampleRows(t *testing.T) {
	for _, c := range []struct {
		name           string
		src            Source
		size, rowBytes int64
		in, out        int64
		want           int64
	}{
		{"a tenth of the dump", Source{}, 10_000, 1000, 100, 100, 800},
		{"rejects count out", Source{}, 10_000, 1000, 100, 50, 400},
		{"never below the shard's records", Source{}, 1000, 1000, 100, 100, 100},
		{"a limit caps it", Source{Limit: 300}, 10_000, 1000, 100, 50, 150},
		{"no row bytes", Source{}, 10_000, 0, 0, 0, 0},
		{"size unknown", Source{}, -1, 1000, 100, 90, 90},
	} {
		sh := manifests.Shard{Counts: manifests.Counts{In: c.in, Out: c.out}}
		if got := shardSampleRows(c.src, c.size, sh, c.rowBytes); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestIngestKeepFalseSampleRemade makes an export shard again in a rerun
// (its file removed) over a dump whose first shard's rows are short, so
// that the shard's estimate of the dump's records (shardSampleRows)
// exceeds them and its report partial keeps the smaller sample: the
// shard made again has the same partial, and the dataset card the same
// bytes, as the run that made it while ingest read the dump; with the
// export right after ingest and after a stage that keeps its shards.
func TestIngestKeepFalseSampleRemade(t *testing.T) {
	var b strings.Builder
	for i := range 8000 {
		text := fmt.Sprintf("question %d", i)
		if i >= 2000 {
			text += strings.Repeat(" x", 1000)
		}
		fmt.Fprintf(&b, "%s\n", oaRow(text))
	}
	for _, stages := range []string{"  - export: {}\n", "  - decision_tokens: {}\n  - export: {}\n"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		y := "seed: 1\noutput: {dir: out, shard_size: 2000}\nsources:\n  - {name: a, path: a.jsonl, format: openai}\nstages:\n" +
			stages + ingestNotKept
		path := filepath.Join(dir, "pipeline.yaml")
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		runPipeline(t, path)
		out := filepath.Join(dir, "out")
		exp := "01-export"
		if strings.Contains(stages, "decision_tokens") {
			exp = "02-export"
		}
		m := readManifest(t, out, exp)
		var part string
		for _, o := range m.Shards[0].Outputs {
			if strings.HasSuffix(o.Path, ".jsonl") && !strings.Contains(filepath.Base(o.Path), "rejects-") {
				part = o.Path
			}
		}
		if part == "" {
			t.Fatalf("%s: no records file among shard %s's outputs %+v", exp, m.Shards[0].Name, m.Shards[0].Outputs)
		}
		before := tree(t, out)
		if err := os.Remove(filepath.Join(out, part)); err != nil {
			t.Fatal(err)
		}
		rep := runPipeline(t, path)
		if ran := rep.Stages[len(rep.Stages)-1].Ran; ran != 1 {
			t.Fatalf("stages:\n%s→ the rerun made %d export shards, want 1", stages, ran)
		}
		after := tree(t, out)
		for name, sum := range before {
			if base := filepath.Base(name); base == manifestFile || base == "report.html" { // the stage's seconds
				continue
			}
			if after[name] != sum {
				t.Errorf("stages:\n%s→ %s differs once the export's shard %s is made again", stages, name, m.Shards[0].Name)
			}
		}
	}
}

// TestIngestKeepFalseCheckBatchMode: a batch-mode run keeps ingest's
// shards whatever ingest: {keep: false} says, so augment check, after a
// run that kept none, says that ingest would read the dump again (the run
// would: the shards it needs are not on disk), and does not say that
// ingest keeps no shards.
func TestIngestKeepFalseCheckBatchMode(t *testing.T) {
	path := demoPipeline(t, "  - decision_tokens: {}\n  - export: {}\n"+ingestNotKept)
	runPipeline(t, path)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := checkSays(t, p)
	if !strings.Contains(out, "would be skipped") || !strings.Contains(out, "ingest keeps no Parquet shards") {
		t.Fatalf("online: check says\n%s\nwant the sources up to date and ingest keeping no shards", out)
	}
	p.Teacher = llm.Config{Provider: "openai", Model: "m", Mode: llm.ModeBatch, Batch: llm.BatchConfig{Provider: llm.BatchFiles}}
	out = checkSays(t, p)
	if strings.Contains(out, "would be skipped") || strings.Contains(out, "ingest keeps no Parquet shards") {
		t.Errorf("batch mode: check says\n%s\nwant the sources ingested again, their shards kept", out)
	}
}

// TestIngestKeepFalseProgressGrows: a shard ingest hands on as it reads
// a dump read anew joins the pass's inputs after its progress started
// (pass.add): it counts towards what the progress lines count up to.
func TestIngestKeepFalseProgressGrows(t *testing.T) {
	defer func(d time.Duration) { logEvery = d }(logEvery)
	logEvery = 10 * time.Millisecond
	var buf syncBuffer
	r := &Runner{o: Options{Progress: &buf}}
	p := &pass{at: map[string]int{}, todo: map[string]string{}, m: &manifests.Stage{}, prog: r.newProgress("decision_tokens", 0, nil)}
	p.add("a-00000", 40)
	p.prog.add(40)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(buf.String(), "records=40/"); {
		time.Sleep(5 * time.Millisecond)
	}
	p.prog.done()
	if !strings.Contains(buf.String(), `progress stage="decision_tokens" records=40/40`) {
		t.Errorf("progress output %q, want 40 of 40 records", buf.String())
	}
}

// TestIngestKeepFalsePartialStops: a dump read in part, without
// allow_partial, stops a run whose ingest keeps no shards before any stage
// records a shard, as it stops one that keeps them: in the run that reads
// it, and in the next, where ingest is up to date and its stages are not.
func TestIngestKeepFalsePartialStops(t *testing.T) {
	dir := t.TempDir()
	var rows []string
	for i := range 6 {
		rows = append(rows, oaRow(fmt.Sprintf("row %d", i)))
	}
	dump := "[" + strings.Join(rows[:3], ",") + "," + rows[3][:25]
	if err := os.WriteFile(filepath.Join(dir, "dump.json"), []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	y := "seed: 1\noutput: {dir: out, shard_size: 2}\nsources:\n  - {name: src, path: dump.json, format: openai}\n" +
		"stages:\n  - {decision_tokens: {}, keep: false}\n  - export: {}\n" + ingestNotKept
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		rep, err := tryPipeline(t, path)
		if pe := (*PartialError)(nil); !errors.As(err, &pe) {
			t.Fatalf("run %d: error %v, want a PartialError", run, err)
		}
		// The second run stops before reading: its summary shows what
		// ingest recorded, skipped, as a run keeping ingest's shards does.
		if ing := rep.Stages[0]; run == 2 && (ing.Skipped != 2 || ing.Counts.In != 3 || ing.Counts.Out != 3) {
			t.Errorf("run 2: ingest reported skipped %d, in %d, out %d; want 2 shards skipped, 3 rows in and out", ing.Skipped, ing.Counts.In, ing.Counts.Out)
		}
		for _, stage := range []string{"01-decision_tokens", "02-export"} {
			if b, err := os.ReadFile(filepath.Join(dir, "out", stage, manifestFile)); err == nil {
				var m manifests.Stage
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				if len(m.Shards) > 0 {
					t.Errorf("run %d: %s recorded %d shards of a dump read in part without allow_partial", run, stage, len(m.Shards))
				}
			}
		}
	}
}
