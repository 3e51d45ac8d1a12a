package stages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// demoPipeline writes a pipeline over the bundled demo dumps into a temp dir
// and returns its path. stages is the YAML of the stages list.
func demoPipeline(t *testing.T, stages string) string {
	t.Helper()
	dumps, err := filepath.Abs("../testdata/demo/dumps")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	y := fmt.Sprintf(`seed: 7
output: {dir: out, shard_size: 3, jsonl: true}
sources:
  - {name: toolace, path: %[1]s/toolace.json, format: toolace}
  - {name: glaive, path: %[1]s/glaive.json, format: glaive}
  - {name: xlam, path: %[1]s/xlam.json, format: xlam}
stages:
%s`, dumps, stages)
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dumpPipeline writes, in a new folder, the demo dumps named in dumps (a
// source name → its bytes, the demo's own when nil) and a pipeline over
// them, in the demo's source order, two records a shard, with stages. It
// returns the pipeline's path and its output dir: a test edits a dump in
// that folder and runs again.
func dumpPipeline(t *testing.T, dumps map[string][]byte, stages string) (path, out string) {
	t.Helper()
	dir := t.TempDir()
	var y strings.Builder
	y.WriteString("seed: 7\noutput: {dir: out, shard_size: 2, jsonl: true}\nsources:\n")
	for _, name := range []string{"toolace", "glaive", "xlam"} {
		b, ok := dumps[name]
		if !ok {
			continue
		}
		if b == nil {
			var err error
			if b, err = os.ReadFile(filepath.Join("../testdata/demo/dumps", name+".json")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&y, "  - {name: %[1]s, path: %[1]s.json, format: %[1]s}\n", name)
	}
	y.WriteString("stages:\n" + stages)
	path = filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, filepath.Join(dir, "out")
}

func runPipeline(t *testing.T, path string) *Report {
	t.Helper()
	return runPipelineTB(t, path)
}

// tryPipeline runs the pipeline at path and returns the run's error.
func tryPipeline(tb testing.TB, path string) (*Report, error) {
	tb.Helper()
	p, err := Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := NewRunner(p, Options{Version: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	return r.Run(context.Background())
}

// rerunDoesNothing runs the pipeline at path, whose output dir is out,
// again: no shard runs and no byte changes.
func rerunDoesNothing(t *testing.T, path, out string) {
	t.Helper()
	before := tree(t, out)
	for _, s := range runPipeline(t, path).Stages {
		if s.Ran != 0 {
			t.Errorf("rerun: %s ran %d shards, want 0", s.Dir, s.Ran)
		}
	}
	if after := tree(t, out); fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("rerun changed files:\nbefore %v\nafter  %v", before, after)
	}
}

// tree hashes every file under dir except the request cache.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if strings.HasPrefix(rel, "cache") || strings.HasPrefix(rel, ".augment") { // the cache; the lock and marker
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const demoStages = `  - sample:
      quotas:
        - {source: glaive, category: chat, n: 1}
        - {source: glaive}
        - {source: toolace}
        - {source: xlam, n: 3}
  - export: {}
`

func TestRunConservesAndResumes(t *testing.T) {
	path := demoPipeline(t, demoStages)
	rep := runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")

	// Every shard of every stage conserves records.
	for _, s := range rep.Stages {
		m, err := manifests.Read[manifests.Stage](filepath.Join(out, s.Dir, "manifest.json"))
		if err != nil || m == nil {
			t.Fatalf("%s: manifest: %v", s.Dir, err)
		}
		var total manifests.Counts
		for _, sh := range m.Shards {
			if err := sh.Balanced(); err != nil {
				t.Errorf("%s shard %s: %v", s.Dir, sh.Name, err)
			}
			total.Add(sh.Counts)
		}
		if total.In != m.Totals.In || total.Out != m.Totals.Out {
			t.Errorf("%s: totals %+v do not add up to its shards %+v", s.Dir, m.Totals, total)
		}
		if s.Ran == 0 {
			t.Errorf("%s: first run ran no shard", s.Dir)
		}
	}
	// The sample stage keeps 1 of the 3 glaive chats, the other glaive
	// records, all toolace records and 3 of 4 xlam records.
	sample := rep.Stages[1]
	if got := sample.Counts.Filtered["quota_full"]; got != 3 {
		t.Errorf("sample filtered %d as quota_full, want 3 (two glaive chats, one xlam)", got)
	}

	rerunDoesNothing(t, path, out)
	before := tree(t, out)

	// A lost output file reruns its shard only.
	victim := filepath.Join(out, "01-sample", "part-toolace-00000.parquet")
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	rep3 := runPipeline(t, path)
	if got := rep3.Stages[1].Ran; got != 1 {
		t.Errorf("after losing one shard, sample ran %d shards, want 1", got)
	}
	if got := rep3.Stages[2].Ran; got != 0 {
		t.Errorf("after losing one sample shard (same bytes rewritten), export ran %d shards, want 0", got)
	}
	after3 := tree(t, out)
	for name, sum := range before {
		if !strings.HasSuffix(name, "manifest.json") && name != report.HTMLFile && after3[name] != sum {
			t.Errorf("rewriting a lost shard changed %s", name)
		}
	}
}

func TestRunConfigChangeRerunsThatStageOnly(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	b, _ := os.ReadFile(path)
	changed := strings.Replace(string(b), "  - export: {}", "  - export: {style: inline, surface: llama3}", 1)
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := runPipeline(t, path)
	for _, s := range rep.Stages {
		want := 0
		if s.Type == "export" {
			want = s.Ran + s.Skipped
			if want == 0 {
				t.Fatal("export has no shards")
			}
		}
		if s.Ran != want {
			t.Errorf("%s ran %d shards, want %d", s.Dir, s.Ran, want)
		}
	}
}

func TestRunDeterministic(t *testing.T) {
	a := demoPipeline(t, demoStages)
	b := demoPipeline(t, demoStages)
	runPipeline(t, a)
	runPipeline(t, b)
	ta := tree(t, filepath.Join(filepath.Dir(a), "out"))
	tb := tree(t, filepath.Join(filepath.Dir(b), "out"))
	for name, sum := range ta {
		if strings.HasSuffix(name, "manifest.json") || name == report.HTMLFile {
			continue // holds timings
		}
		if tb[name] != sum {
			t.Errorf("%s differs between two runs of the same pipeline", name)
		}
	}
	if len(ta) != len(tb) {
		t.Errorf("runs wrote %d and %d files", len(ta), len(tb))
	}
}

// TestShardsReadByArrow reads every Parquet shard of a run with Arrow, a
// reader independent of the parquet-go writer, and compares row counts and
// IDs with parquet-go's reading.
func TestShardsReadByArrow(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	shards, _ := filepath.Glob(filepath.Join(out, "*", "part-*.parquet"))
	if len(shards) < 5 {
		t.Fatalf("found %d shards", len(shards))
	}
	for _, p := range shards {
		recs, err := shard.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := file.OpenParquetFile(p, false)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if tbl.NumRows() != int64(len(recs)) {
			t.Errorf("%s: arrow reads %d rows, parquet-go %d", p, tbl.NumRows(), len(recs))
		}
		sch := tbl.Schema()
		for _, col := range []string{"tools", "messages", "tags", "lineage"} {
			f, ok := sch.FieldsByName(col)
			if !ok || !strings.HasPrefix(f[0].Type.String(), "list<list: struct<") {
				t.Errorf("%s: column %s is not a list of structs: %v", p, col, f)
			}
		}
		tbl.Release()
		rdr.Close()
	}
}

// A pipeline with verify rejects the records it must, and its manifest
// counts each reason, each check and each problem kind.
func TestRunVerifyCountsInManifest(t *testing.T) {
	dir := t.TempDir()
	tool := `[{"name": "is_prime", "description": "Check primality.", "parameters": {"n": {"description": "The integer", "type": "int"}}}]`
	rows := fmt.Sprintf(`[
{"id": 0, "query": "Is 7 prime?", "answers": "[{\"name\": \"is_prime\", \"arguments\": {\"n\": 7}}]", "tools": %[1]q},
{"id": 1, "query": "Is it prime?", "answers": "[{\"name\": \"is_prime\", \"arguments\": {}}]", "tools": %[1]q},
{"id": 2, "query": "Is seven prime?", "answers": "[{\"name\": \"is_prime\", \"arguments\": {\"n\": \"seven\"}}]", "tools": %[1]q}
]`, tool)
	os.WriteFile(filepath.Join(dir, "x.json"), []byte(rows), 0o644)
	path := filepath.Join(dir, "pipeline.yaml")
	os.WriteFile(path, []byte("sources: [{name: x, path: x.json, format: xlam}]\nstages:\n  - verify: {checks: [roles, args_schema]}\n"), 0o644)
	runPipeline(t, path)
	m, err := manifests.Read[manifests.Stage](filepath.Join(dir, "out", "01-verify", "manifest.json"))
	if err != nil || m == nil {
		t.Fatal(err)
	}
	c := m.Totals
	if c.In != 3 || c.Out != 1 || c.Rejected["verify:args_schema"] != 2 {
		t.Errorf("counts %+v, want 3 in, 1 out, 2 rejected as verify:args_schema", c)
	}
	if c.Counters["check.args_schema"] != 2 || c.Counters["kind.param_missing"] != 1 || c.Counters["kind.wrong_type"] != 1 {
		t.Errorf("counters %v", c.Counters)
	}
}

func readManifest(t *testing.T, out, stage string) *manifests.Stage {
	t.Helper()
	m, err := manifests.Read[manifests.Stage](filepath.Join(out, stage, "manifest.json"))
	if err != nil || m == nil {
		t.Fatalf("%s: manifest %v", stage, err)
	}
	return m
}

// skip: true keeps a stage in the file but passes its input on: the next
// stage reads the stage before it, and no directory is made for it.
func TestRunSkipStage(t *testing.T) {
	path := demoPipeline(t, "  - sample: {quotas: [{source: xlam}]}\n  - name: never\n    skip: true\n    sample: {quotas: [{source: glaive}]}\n  - export: {}\n")
	rep := runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	if _, err := os.Stat(filepath.Join(out, "02-never")); !os.IsNotExist(err) {
		t.Errorf("a skipped stage got a directory: %v", err)
	}
	last := rep.Stages[len(rep.Stages)-1]
	if last.Type != "export" || last.Counts.In != 4 || last.Counts.Out != 4 {
		t.Errorf("export after a skipped stage: %+v, want the 4 xlam records of the sample", last)
	}
}

// A source's fraction keeps rows by a seeded draw per row: the same rows for
// the same seed, counted as filtered, whatever the shard size.
func TestRunSourceFraction(t *testing.T) {
	kept := func(shardSize int, seed int) []string {
		path := demoPipeline(t, "  - export: {}\n")
		b, _ := os.ReadFile(path)
		y := strings.Replace(string(b), "format: toolace}", "format: toolace, fraction: 0.5}", 1)
		y = strings.Replace(y, "seed: 7", fmt.Sprintf("seed: %d", seed), 1)
		y = strings.Replace(y, "shard_size: 3", fmt.Sprintf("shard_size: %d", shardSize), 1)
		os.WriteFile(path, []byte(y), 0o644)
		runPipeline(t, path)
		m := readManifest(t, filepath.Join(filepath.Dir(path), "out"), "00-ingest")
		var ids []string
		for _, sh := range m.Shards {
			if !strings.HasPrefix(sh.Name, "toolace-") {
				continue
			}
			for _, o := range sh.Outputs {
				if strings.HasSuffix(o.Path, ".parquet") {
					recs, err := shard.Read(filepath.Join(filepath.Dir(path), "out", o.Path))
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range recs {
						ids = append(ids, r.ID)
					}
				}
			}
		}
		if f := m.Totals.Filtered["fraction"]; f == 0 || f+int64(len(ids))+manifests.Sum(m.Totals.Rejected) < 5 {
			t.Errorf("fraction filtered %d, kept %d: the 5 toolace rows are not all accounted for", f, len(ids))
		}
		return ids
	}
	a, b := kept(3, 7), kept(50, 7)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("shard size changed the rows kept: %v vs %v", a, b)
	}
}

// The sample stage keeps the same records whatever the shard size.
func TestRunSampleIndependentOfShards(t *testing.T) {
	ids := func(shardSize string) []string {
		path := demoPipeline(t, demoStages)
		b, _ := os.ReadFile(path)
		os.WriteFile(path, []byte(strings.Replace(string(b), "shard_size: 3", "shard_size: "+shardSize, 1)), 0o644)
		runPipeline(t, path)
		files, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "out", "01-sample", "part-*.parquet"))
		var out []string
		for _, f := range files {
			recs, err := shard.Read(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				out = append(out, r.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	if a, b := ids("2"), ids("100"); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("sample kept %v with shards of 2, %v with shards of 100", a, b)
	}
}

// The sample stage counts what each quota kept (quota.<index>), and a
// quota that matches no record (a typo: single-call for single_call) is a
// warning that names the categories seen.
func TestSampleQuotaCounts(t *testing.T) {
	path := demoPipeline(t, "  - sample: {quotas: [{source: glaive, n: 2}, {source: xlam, category: single-call, n: 5}, {source: toolace}]}\n")
	_, log, err := llmrunRun(t, path)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, filepath.Join(filepath.Dir(path), "out"), "01-sample")
	if c := m.Totals.Counters; c["quota.0"] != 2 || c["quota.1"] != 0 || c["quota.2"] != m.Totals.Out-2 {
		t.Errorf("counters %v, out %d", c, m.Totals.Out)
	}
	if !regexp.MustCompile(`level=WARN msg="a sample quota matched no record.*quota=1 source=xlam category=single-call categories_seen=".*single_call`).MatchString(log) {
		t.Errorf("no warning for quota 1:\n%s", log)
	}
}

// A planner's manifest times its whole stage, the read of its whole input
// for the plan included: the plan file is written after the stage started
// (the read took 37 s of a run in no manifest's seconds). The input is large
// enough that its read takes longer than a file time's granularity (a clock
// tick: the plan's mtime may be up to one tick earlier than the write).
func TestPlannerTimeIsTheStages(t *testing.T) {
	b, err := os.ReadFile("../testdata/demo/dumps/xlam.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	for i := range 20000 {
		row := maps.Clone(rows[i%len(rows)])
		row["id"] = i
		line, _ := json.Marshal(row)
		dump.Write(append(line, '\n'))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xlam.jsonl"), dump.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pipeline.yaml")
	y := "seed: 7\noutput: {dir: out, shard_size: 5000}\nsources:\n  - {name: xlam, path: xlam.jsonl, format: xlam}\nstages:\n  - sample: {quotas: [{}]}\n"
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	runPipeline(t, path)
	out := filepath.Join(dir, "out")
	m := readManifest(t, out, "01-sample")
	fi, err := os.Stat(filepath.Join(out, "01-sample", "plan.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Started.After(fi.ModTime()) {
		t.Errorf("the stage started at %s, after its plan was written at %s", m.Started.Format(time.RFC3339Nano), fi.ModTime().Format(time.RFC3339Nano))
	}
}

// An export that no record reaches says so in its notes (and a WARN): the
// run succeeds, but there is nothing to train on.
func TestEmptyExportSaysSo(t *testing.T) {
	path := demoPipeline(t, "  - sample: {quotas: [{category: none_such}]}\n  - export: {}\n")
	runPipeline(t, path)
	m := readManifest(t, filepath.Join(filepath.Dir(path), "out"), "02-export")
	if m.Totals.Out != 0 || !slices.ContainsFunc(m.Notes, func(n string) bool { return strings.HasPrefix(n, "empty export: no sample reached it") }) {
		t.Errorf("out %d, notes %q", m.Totals.Out, m.Notes)
	}
}

// output.jsonl turned on for a finished run writes every stage's mirrors,
// and turned off removes them, as a fresh run would have them.
func TestJSONLToggle(t *testing.T) {
	path := demoPipeline(t, "  - sample: {quotas: [{}]}\n  - decision_tokens: {}\n  - export: {}\n")
	out := filepath.Join(filepath.Dir(path), "out")
	set := func(on bool) {
		b, _ := os.ReadFile(path)
		y := strings.Replace(string(b), "jsonl: true", "jsonl: "+strconv.FormatBool(on), 1)
		y = strings.Replace(y, "jsonl: "+strconv.FormatBool(!on), "jsonl: "+strconv.FormatBool(on), 1)
		os.WriteFile(path, []byte(y), 0o644)
		runPipeline(t, path)
	}
	mirrors := func(stage string) int {
		m, _ := filepath.Glob(filepath.Join(out, stage, "part-*.jsonl"))
		return len(m)
	}
	for _, on := range []bool{false, true, false} {
		set(on)
		for _, stage := range []string{"00-ingest", "01-sample", "02-decision_tokens"} {
			if n := mirrors(stage); (n > 0) != on {
				t.Errorf("jsonl %v: %s has %d mirrors", on, stage, n)
			}
		}
	}
}

// Outputs of an earlier run that the current one does not list are removed:
// shards of another shard size, and the directory of a stage no longer in
// the pipeline.
func TestRunRemovesStaleOutputs(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	b, _ := os.ReadFile(path)
	y := strings.Replace(string(b), "shard_size: 3", "shard_size: 100", 1)
	y = y[:strings.Index(y, "  - export: {}")] // drop the export stage
	os.WriteFile(path, []byte(y), 0o644)
	runPipeline(t, path)
	for _, stage := range []string{"00-ingest", "01-sample"} {
		m := readManifest(t, out, stage)
		listed := map[string]bool{"manifest.json": true}
		for _, f := range m.Files { // a planner's plan.bin
			listed[filepath.Base(f)] = true
		}
		for _, sh := range m.Shards {
			for _, o := range sh.Outputs {
				listed[filepath.Base(o.Path)] = true
			}
		}
		files, _ := os.ReadDir(filepath.Join(out, stage))
		for _, f := range files {
			if !listed[f.Name()] {
				t.Errorf("%s: %s is left from the earlier run", stage, f.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(out, "02-export")); !os.IsNotExist(err) {
		t.Errorf("the removed stage's directory is still there: %v", err)
	}
}

// A changed dump is ingested again; an unchanged one is not.
func TestRunChangedDumpReingests(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.ReadFile("../testdata/demo/dumps/xlam.json")
	os.WriteFile(filepath.Join(dir, "x.json"), src, 0o644)
	os.WriteFile(filepath.Join(dir, "g.json"), []byte("[]"), 0o644)
	path := filepath.Join(dir, "pipeline.yaml")
	os.WriteFile(path, []byte("sources:\n  - {name: x, path: x.json, format: xlam}\n  - {name: g, path: g.json, format: glaive}\nstages:\n  - export: {}\n"), 0o644)
	runPipeline(t, path)
	var rows []json.RawMessage
	json.Unmarshal(src, &rows)
	b, _ := json.Marshal(rows[:2])
	os.WriteFile(filepath.Join(dir, "x.json"), b, 0o644)
	rep := runPipeline(t, path)
	if ing := rep.Stages[0]; ing.Ran != 1 || ing.Skipped != 1 || ing.Counts.In != 2 {
		t.Errorf("ingest after one dump changed: %+v, want its one shard redone (2 rows) and the other skipped", ing)
	}
}

// panicStage panics on one record.
type panicStage struct{}

func (panicStage) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	if r.ID == "boom" {
		panic("bug")
	}
	return []*record.Record{r}, nil
}

// A stage that panics on a record rejects that record (internal_error)
// instead of taking the run down.
func TestSafeProcessTurnsPanicsIntoRejects(t *testing.T) {
	_, err := safeProcess(context.Background(), panicStage{}, &record.Record{ID: "boom"}, false)
	if reason, ok := contract.ReasonOf(err); !ok || reason != "internal_error" {
		t.Errorf("panic gave %v, want an internal_error reject", err)
	}
	if out, err := safeProcess(context.Background(), panicStage{}, &record.Record{ID: "ok"}, false); err != nil || len(out) != 1 {
		t.Errorf("a normal record: %v %v", out, err)
	}
}

// Without a terminal, progress is written as plain lines at an interval.
func TestProgressPlainLines(t *testing.T) {
	defer func(d time.Duration) { logEvery = d }(logEvery)
	logEvery = 10 * time.Millisecond
	var buf syncBuffer
	r := &Runner{o: Options{Progress: &buf}}
	p := r.newProgress("reason", 100, nil)
	p.add(40)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && buf.String() == ""; {
		time.Sleep(5 * time.Millisecond)
	}
	p.done()
	if !strings.Contains(buf.String(), `progress stage="reason" records=40/100`) {
		t.Errorf("progress output %q", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the progress goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Pooled shard results come back empty at the length asked for, whatever
// the shard before them held (a record or an error kept from it would be
// another shard's outcome).
func TestShardResultsEmpty(t *testing.T) {
	rec := &record.Record{ID: "r"}
	for _, n := range []int{5, 3, 8, 0, 5} {
		res := takeShardResults(n)
		if len(res.outs) != n || len(res.errs) != n || len(res.unfit) != n {
			t.Fatalf("lengths %d, %d, %d, want %d", len(res.outs), len(res.errs), len(res.unfit), n)
		}
		for i := range n {
			if res.outs[i] != nil || res.errs[i] != nil || res.unfit[i] != nil {
				t.Fatalf("n=%d: entry %d holds an earlier shard's outcome", n, i)
			}
			res.outs[i], res.errs[i], res.unfit[i] = []*record.Record{rec}, fmt.Errorf("x"), map[int]checkFail{0: {}}
		}
		res.release()
	}
}
