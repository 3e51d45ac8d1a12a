package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// chainStages is a pipeline whose stages form groups: deterministic and
// offline-teacher stages, a sink inside a group (its input passes
// through), and a Planner that starts a new group.
const chainStages = `  - meta_tool: {}
  - decision_tokens: {}
  - negatives: {target: token}
  - verify: {checks: [roles, calls_resolved, args_schema, meta_tool_shape]}
  - export: {}
  - name: reason
    reason: {}
  - dedup: {}
  - name: export_inline
    export: {style: inline, surface: llama3, allow_offline: true, dataset: inline}
`

// TestGroupMatchesStagesAlone runs the same pipeline with consecutive
// stages grouped (records handed on in memory) and with every stage alone
// (each reading its input shards back): every file has the same bytes,
// manifests up to their timings.
func TestGroupMatchesStagesAlone(t *testing.T) {
	grouped := demoPipeline(t, chainStages)
	alone := demoPipeline(t, chainStages)
	repG := runPipeline(t, grouped)
	fuseGroups = false
	repA := runPipeline(t, alone)
	fuseGroups = true
	if len(repG.Stages) != len(repA.Stages) {
		t.Fatalf("grouped run reported %d stages, alone %d", len(repG.Stages), len(repA.Stages))
	}
	for i, s := range repG.Stages {
		if a := repA.Stages[i]; s.Ran != a.Ran || s.Skipped != a.Skipped || s.Counts.In != a.Counts.In || s.Counts.Out != a.Counts.Out {
			t.Errorf("%s: grouped ran %d skipped %d in %d out %d; alone %d %d %d %d", s.Dir,
				s.Ran, s.Skipped, s.Counts.In, s.Counts.Out, a.Ran, a.Skipped, a.Counts.In, a.Counts.Out)
		}
	}
	sameOutputs(t, filepath.Join(filepath.Dir(grouped), "out"), filepath.Join(filepath.Dir(alone), "out"), true)
}

// sameOutputs compares two run directories: every file byte for byte,
// manifests without their timings and, unless accounting, without their
// teacher accounting (nor the dataset cards, which show it).
func sameOutputs(t *testing.T, a, b string, accounting bool) {
	t.Helper()
	ta, tb := tree(t, a), tree(t, b)
	if len(ta) != len(tb) {
		t.Errorf("runs wrote %d and %d files", len(ta), len(tb))
	}
	for name, sum := range ta {
		switch {
		case name == report.HTMLFile:
		case !accounting && filepath.Base(name) == report.CardFile:
		case strings.HasSuffix(name, "manifest.json"):
			if ma, mb := untimed(t, filepath.Join(a, name), accounting), untimed(t, filepath.Join(b, name), accounting); ma != mb {
				t.Errorf("%s differs:\n%s\n%s", name, ma, mb)
			}
		case tb[name] != sum:
			t.Errorf("%s differs", name)
		}
	}
}

// untimed returns a manifest's JSON without the fields that hold times
// and, unless accounting, without the teacher's accounting.
func untimed(t *testing.T, path string, accounting bool) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"started", "finished", "seconds"} {
				delete(v, k)
			}
			if !accounting {
				delete(v, "llm")
			}
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}

// cancelOn is a log handler that cancels a run at its n-th "shard done"
// line of stage (for ingest, its n-th "source done").
type cancelOn struct {
	stage  string
	n      *atomic.Int64
	cancel context.CancelFunc
}

func (h cancelOn) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOn) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "shard done" && rec.Message != "source done" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "stage" && a.Value.String() == h.stage && h.n.Add(-1) == 0 {
			h.cancel()
		}
		return true
	})
	return nil
}
func (h cancelOn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cancelOn) WithGroup(string) slog.Handler      { return h }

// TestGroupKilledResumesToCleanRun stops a grouped run in the middle of
// its groups, checks that no manifest records a shard whose input the
// stage before does not record, and resumes it to the bytes of a clean run.
func TestGroupKilledResumesToCleanRun(t *testing.T) {
	killedResumesToCleanRun(t, chainStages, []killAt{{"negatives", 1}, {"verify", 3}, {"export", 2}, {"export_inline", 1}})
}

// A killAt stops a run at the n-th shard stage records.
type killAt struct {
	stage string
	n     int64
}

// killedResumesToCleanRun stops a run of stages at each of kills in turn,
// checks that no manifest records a shard whose input the stage before
// does not record, and resumes the run to the files of a clean run.
func killedResumesToCleanRun(t *testing.T, stages string, kills []killAt) {
	for _, at := range kills {
		t.Run(fmt.Sprintf("%s-%d", at.stage, at.n), func(t *testing.T) {
			clean := demoPipeline(t, stages)
			killed := demoPipeline(t, stages)
			runPipeline(t, clean)

			p, err := Load(killed)
			if err != nil {
				t.Fatal(err)
			}
			stopRun(t, p, at)
			out := filepath.Join(filepath.Dir(killed), "out")
			stageOrder(t, out)
			runPipeline(t, killed)
			// A resumed run's teacher accounting covers its own requests.
			sameOutputs(t, filepath.Join(filepath.Dir(clean), "out"), out, false)
		})
	}
}

// stopRun runs p and stops it as at says (cancelOn): the run must end
// with context.Canceled.
func stopRun(t *testing.T, p *Pipeline, at killAt) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &atomic.Int64{}
	n.Store(at.n)
	r, err := NewRunner(p, Options{Version: "test", Log: slog.New(cancelOn{stage: at.stage, n: n, cancel: cancel})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(ctx)
	r.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v, want context.Canceled", err)
	}
}

// stageOrder checks, for each stage directory of a run in order, that every
// shard its manifest records has its input recorded by the stage before.
func stageOrder(t *testing.T, out string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "[0-9][0-9]-*"))
	slices.Sort(dirs)
	var prev *manifests.Stage
	for _, d := range dirs {
		m, err := manifests.Read[manifests.Stage](filepath.Join(d, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			prev = nil
			continue
		}
		if prev != nil && prev.Type != "export" { // a sink's input passes through: compare with what it read
			for _, s := range m.Shards {
				ps, ok := prev.Shard(s.Name)
				if !ok {
					t.Errorf("%s records shard %s, which %s does not", m.Name, s.Name, prev.Name)
					continue
				}
				if ref, ok := parquetOf(ps); !ok || len(s.Inputs) != 1 || s.Inputs[0] != ref {
					t.Errorf("%s shard %s: input %v is not %s's output", m.Name, s.Name, s.Inputs, prev.Name)
				}
			}
		}
		if m.Type != "export" {
			prev = m
		}
	}
}

// BenchmarkGroupedChain runs ingest → meta_tool → decision_tokens → negatives →
// export over the demo dumps repeated to about 24,000 records, with the
// stages grouped and alone; cpu-ms/op is the process's user+sys time (the
// fair figure on a shared machine).
func BenchmarkGroupedChain(b *testing.B) {
	dumps, err := filepath.Abs("../testdata/demo/dumps")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	var sources strings.Builder
	for _, f := range []string{"glaive", "toolace", "xlam"} {
		raw, err := os.ReadFile(filepath.Join(dumps, f+".json"))
		if err != nil {
			b.Fatal(err)
		}
		var rows []json.RawMessage
		if err := json.Unmarshal(raw, &rows); err != nil {
			b.Fatal(err)
		}
		var many []json.RawMessage
		for len(many) < 8000 {
			many = append(many, rows...)
		}
		out, _ := json.Marshal(many)
		if err := os.WriteFile(filepath.Join(dir, f+".json"), out, 0o644); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&sources, "  - {name: %s, path: %s.json, format: %s}\n", f, f, f)
	}
	for _, grouped := range []bool{true, false} {
		name := map[bool]string{true: "grouped", false: "alone"}[grouped]
		b.Run(name, func(b *testing.B) {
			fuseGroups = grouped
			defer func() { fuseGroups = true }()
			var cpu time.Duration
			for i := 0; b.Loop(); i++ {
				y := fmt.Sprintf("seed: 1\noutput: {dir: out-%s-%d, shard_size: 2000}\nsources:\n%sstages:\n"+
					"  - meta_tool: {}\n  - decision_tokens: {}\n  - negatives: {target: token}\n  - export: {format: jsonl}\n",
					name, i, sources.String())
				path := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", name, i))
				if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
					b.Fatal(err)
				}
				p, err := Load(path)
				if err != nil {
					b.Fatal(err)
				}
				r, err := NewRunner(p, Options{Version: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				before := cputime.Process()
				_, err = r.Run(context.Background())
				cpu += cputime.Process() - before
				r.Close()
				if err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(filepath.Join(dir, fmt.Sprintf("out-%s-%d", name, i)))
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// handOnStage passes "same" on as it came (the same pointer) and "bad" as
// a copy whose system text is not UTF-8.
type handOnStage struct{}

func (handOnStage) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	if r.ID == "bad" {
		c := r.Clone()
		c.System = "bad \xff"
		return []*record.Record{c}, nil
	}
	return []*record.Record{r}, nil
}

// A record a stage changes is checked even when its shard came in memory
// from a pass that checked it (checked = true): text a later stage made
// unwritable is rejected with shard.Check's reason, not written. Only a
// record handed back unchanged skips the check, and only when it came
// checked: the same unwritable record read from a shard is rejected.
func TestProcessShardChecksChangedRecords(t *testing.T) {
	unwritable := &record.Record{ID: "same", System: "same \xff"}
	for _, c := range []struct {
		checked  bool
		kept     []string
		rejected string
	}{
		{checked: true, kept: []string{"same"}, rejected: "bad"},
		{checked: false, kept: nil, rejected: "same bad"},
	} {
		p := &pass{sr: stageRun{name: "s"}, st: handOnStage{}, prog: &progress{}}
		recs := []*record.Record{unwritable, {ID: "bad"}}
		o, err := (&Runner{}).processShard(context.Background(), p, "00000", recs, c.checked)
		if err != nil {
			t.Fatal(err)
		}
		var kept, rejected []string
		for _, r := range o.kept {
			kept = append(kept, r.ID)
		}
		for _, rj := range o.rejects {
			if rj.Reason != shard.ReasonInvalidUTF8 {
				t.Errorf("checked=%v: %s rejected as %s, want %s", c.checked, rj.ID, rj.Reason, shard.ReasonInvalidUTF8)
			}
			rejected = append(rejected, rj.ID)
		}
		if !slices.Equal(kept, c.kept) || strings.Join(rejected, " ") != c.rejected {
			t.Errorf("checked=%v: kept %v, rejected %v; want %v and %s", c.checked, kept, rejected, c.kept, c.rejected)
		}
	}
}

// stopStage stops the run at every record whose ID starts with "stop";
// "stop-slow" stops only after the others in flight have.
type stopStage struct{}

func (stopStage) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	if r.ID == "stop-slow" {
		time.Sleep(20 * time.Millisecond)
	}
	if strings.HasPrefix(r.ID, "stop") {
		return nil, errors.New("no way on")
	}
	return []*record.Record{r}, nil
}

// A stage without a concurrency of its own names the first record in shard
// order that stops the run, whichever stopped first in time (a run named
// xlam:0 or xlam:1 by chance under load).
func TestProcessShardNamesTheFirstStop(t *testing.T) {
	recs := []*record.Record{{ID: "a"}, {ID: "stop-slow"}, {ID: "stop-1"}, {ID: "b"}, {ID: "stop-2"}}
	for range 5 {
		p := &pass{sr: stageRun{name: "s"}, st: stopStage{}, prog: &progress{}}
		_, err := (&Runner{}).processShard(context.Background(), p, "00000", recs, true)
		if err == nil || err.Error() != "record stop-slow: no way on" {
			t.Fatalf("err = %v, want the stop of record stop-slow", err)
		}
	}
}

// Records read back from a shard count as checked only when this process
// wrote that shard with that content (checkedShard): not a shard another
// process wrote (a new Runner), nor one whose recorded hash differs.
func TestCheckedShard(t *testing.T) {
	_, root := tempRoot(t)
	if err := root.MkdirAll("01-s"); err != nil {
		t.Fatal(err)
	}
	r := &Runner{p: &Pipeline{Output: Output{ShardSize: 10, RowGroupRows: 10}}}
	o := &shardOut{sh: manifests.Shard{Name: "00000"}}
	o.sh.In = 1
	o.keep(&record.Record{ID: "a", Messages: []record.Message{{Role: record.RoleUser, Content: "hi"}}})
	sh, err := r.writeShard(context.Background(), stageRun{name: "s", out: root.Sub("01-s")}, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	ref := sh.Outputs[0]
	if !strings.HasSuffix(ref.Path, ".parquet") || !r.checkedShard(ref) {
		t.Fatalf("the shard this runner wrote (%+v) does not count as checked", ref)
	}
	other := ref
	other.SHA256 = strings.Repeat("0", 64)
	if r.checkedShard(other) {
		t.Error("a shard with another hash counts as checked")
	}
	if (&Runner{}).checkedShard(ref) {
		t.Error("a shard another runner wrote counts as checked")
	}
}

// TestGroupFailedWriteLeavesNoUnnamedFiles: the writes of a shard's stages
// run side by side, and when one fails, the later stages' files of that
// shard, written but never committed, are removed: every file left in a
// stage directory is one its manifest names (as its own, or as an earlier
// run's still to delete), and none has the bytes of an uncommitted write.
func TestGroupFailedWriteLeavesNoUnnamedFiles(t *testing.T) {
	path := demoPipeline(t, "  - meta_tool: {}\n  - decision_tokens: {}\n  - negatives: {target: token}\n  - export: {}\n")
	out := filepath.Join(filepath.Dir(path), "out")
	runPipeline(t, path)
	later := []string{"02-decision_tokens", "03-negatives", "04-export"}
	before := map[string]map[string]string{}
	for _, dir := range later {
		before[dir] = tree(t, filepath.Join(out, dir))
	}
	// A directory where meta_tool's shard goes: its rename fails. Another
	// seed makes every stage redo every shard, the later stages at once
	// (no earlier output can match).
	part := filepath.Join(out, "01-meta_tool", "part-glaive-00001.parquet")
	if err := os.Remove(part); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(part, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path, "seed=8")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(p, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "glaive-00001") {
		t.Fatalf("run: %v, want meta_tool's write of glaive-00001 to fail", err)
	}
	for _, dir := range later {
		m := readManifest(t, out, dir)
		named := owned(m)
		for _, f := range m.Superseded {
			named[f] = true
		}
		for name, sum := range tree(t, filepath.Join(out, dir)) {
			rel := dir + "/" + filepath.ToSlash(name)
			if name != manifestFile && !named[rel] {
				t.Errorf("%s is on disk, its manifest does not name it", rel)
			}
			if strings.Contains(name, "glaive-00001") && sum != before[dir][name] {
				t.Errorf("%s holds the bytes of a write whose input failed", rel)
			}
		}
		if _, ok := m.Shard("glaive-00001"); ok {
			t.Errorf("%s records glaive-00001, whose input was not written", dir)
		}
	}
}

// passStage passes records whose ID starts with "pass" (passer) and
// makes a copy of any other; its Process refuses records it passes.
type passStage struct{}

func (passStage) passes(r *record.Record) bool { return strings.HasPrefix(r.ID, "pass") }

func (s passStage) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	if s.passes(r) {
		return nil, errors.New("Process called for a record the stage passes")
	}
	c := *r
	return []*record.Record{&c}, nil
}

// The runner keeps a record a passer passes as it came, without calling
// Process, in shard order with the records Process made.
func TestProcessShardPasses(t *testing.T) {
	recs := []*record.Record{{ID: "pass-1"}, {ID: "copy-1"}, {ID: "pass-2"}, {ID: "pass-3"}, {ID: "copy-2"}}
	p := &pass{sr: stageRun{name: "s"}, st: passStage{}, prog: &progress{}}
	o, err := (&Runner{}).processShard(context.Background(), p, "00000", recs, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.kept) != len(recs) {
		t.Fatalf("kept %d records, want %d", len(o.kept), len(recs))
	}
	for i, r := range o.kept {
		if r.ID != recs[i].ID || (r == recs[i]) != strings.HasPrefix(r.ID, "pass") {
			t.Errorf("kept[%d] = %s (the input itself: %v)", i, r.ID, r == recs[i])
		}
	}
}
