package stages

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

const planStages = `  - sample:
      quotas:
        - {source: glaive, category: chat, n: 1}
        - {source: glaive}
        - {source: toolace}
        - {source: xlam, n: 3}
  - dedup: {fields: [tools]}
  - response_schema: {}
  - export: {}
`

// planStageDirs are the planner stages of planStages.
var planStageDirs = []string{"01-sample", "02-dedup", "03-response_schema"}

// runLogged runs the pipeline at path and returns its log.
func runLogged(t *testing.T, path string) string {
	t.Helper()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	r, err := NewRunner(p, Options{Version: "test", Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	return buf.String()
}

// planLines counts the log's "plan computed" and "plan loaded" lines per
// stage name.
func planLines(log string) (computed, loaded map[string]int) {
	computed, loaded = map[string]int{}, map[string]int{}
	for line := range strings.Lines(log) {
		_, stage, _ := strings.Cut(line, " stage=")
		stage, _, _ = strings.Cut(stage, " ")
		switch {
		case strings.Contains(line, `msg="plan computed"`):
			computed[stage]++
		case strings.Contains(line, `msg="plan loaded"`):
			loaded[stage]++
		}
	}
	return computed, loaded
}

// TestPlanSavedAndReused: a run saves each planner's plan in its stage
// directory, named in the manifest; a resumed run that has shards to redo
// loads the plans instead of reading the whole input again, with the same
// bytes; a damaged plan file is made again.
func TestPlanSavedAndReused(t *testing.T) {
	path := demoPipeline(t, planStages)
	out := filepath.Join(filepath.Dir(path), "out")
	computed, loaded := planLines(runLogged(t, path))
	if fmt.Sprint(computed) != "map[dedup:1 response_schema:1 sample:1]" || len(loaded) != 0 {
		t.Fatalf("first run: computed %v, loaded %v; want each plan computed once", computed, loaded)
	}
	for _, dir := range planStageDirs {
		m := readManifest(t, out, dir)
		if !slices.Contains(m.Files, dir+"/"+planFile) || m.Plan == "" {
			t.Errorf("%s: manifest Files %v and plan %q: want the plan file named", dir, m.Files, m.Plan)
		}
		b, err := os.ReadFile(filepath.Join(out, dir, planFile))
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := decodePlan(b)
		if err != nil || h.Digest != m.Plan {
			t.Errorf("%s: plan file %+v, %v; manifest plan %s", dir, h, err, m.Plan)
		}
	}
	if m := readManifest(t, out, "02-dedup"); manifests.Sum(m.Totals.Rejected) == 0 {
		t.Errorf("dedup removed nothing (%+v): the test wants a plan with decisions", m.Totals)
	}
	before := tree(t, out)

	// Lose one output shard of each planner stage: each stage has work
	// to do and needs its plan, which it loads.
	lose := func() {
		for _, dir := range planStageDirs {
			m := readManifest(t, out, dir)
			if err := os.Remove(filepath.Join(out, m.Shards[0].Outputs[0].Path)); err != nil {
				t.Fatal(err)
			}
		}
	}
	lose()
	computed, loaded = planLines(runLogged(t, path))
	if len(computed) != 0 || fmt.Sprint(loaded) != "map[dedup:1 response_schema:1 sample:1]" {
		t.Errorf("resumed run: computed %v, loaded %v; want every plan loaded", computed, loaded)
	}
	sameTree(t, before, tree(t, out))

	// A damaged plan file is not used: that stage plans again.
	victim := filepath.Join(out, "02-dedup", planFile)
	b, _ := os.ReadFile(victim)
	b[len(b)/2] ^= 1
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lose()
	computed, loaded = planLines(runLogged(t, path))
	if fmt.Sprint(computed) != "map[dedup:1]" || fmt.Sprint(loaded) != "map[response_schema:1 sample:1]" {
		t.Errorf("damaged dedup plan: computed %v, loaded %v", computed, loaded)
	}
	sameTree(t, before, tree(t, out))

	// Removing the planner stage removes its plan file with its shards.
	b, _ = os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(b, []byte("  - response_schema: {}\n"), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	runLogged(t, path)
	if _, err := os.Stat(filepath.Join(out, "03-response_schema")); !os.IsNotExist(err) {
		t.Errorf("the removed stage's directory is left: %v", err)
	}
}

// sameTree compares two tree results, manifests aside (timings).
func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	for name, sum := range want {
		if !strings.HasSuffix(name, "manifest.json") && name != "report.html" && got[name] != sum {
			t.Errorf("%s changed or is missing", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is new", name)
		}
	}
}

// TestPlanLoadedActsAsPlanned: for every planner stage, a stage loaded from
// the saved plan processes each input record as the planned one does, and
// saves the same bytes again.
func TestPlanLoadedActsAsPlanned(t *testing.T) {
	path := demoPipeline(t, planStages+"  - translate: {mode: convert, count: 2}\n")
	out := filepath.Join(filepath.Dir(path), "out")
	runLogged(t, path)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, dir := range append(planStageDirs, "05-translate") {
		spec := &p.Stages[[]int{0, 1, 2, 4}[i]]
		_, cfg := spec.config()
		build := func() interface {
			PlanSaver
			Stage
		} {
			st, err := cfg.build(&Env{Stage: spec.Name, Seed: p.Seed, Dir: p.Dir()})
			if err != nil {
				t.Fatal(err)
			}
			return st.(interface {
				PlanSaver
				Stage
			})
		}
		// The stage's input: the previous stage's outputs.
		prev := readManifest(t, out, []string{"00-ingest", "01-sample", "02-dedup", "04-export"}[i])
		var recs []*record.Record
		for _, s := range prev.Shards {
			for _, o := range s.Outputs {
				if strings.HasSuffix(o.Path, ".parquet") {
					rs, err := shard.Read(filepath.Join(out, o.Path))
					if err != nil {
						t.Fatal(err)
					}
					recs = append(recs, rs...)
				}
			}
		}
		planned := build()
		digest, err := planned.Plan(t.Context(), func(yield func(*record.Record) error) error {
			for _, r := range recs {
				if err := yield(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		file, err := os.ReadFile(filepath.Join(out, dir, planFile))
		if err != nil {
			t.Fatal(err)
		}
		h, payload, err := decodePlan(file)
		if err != nil || h.Digest != digest {
			t.Fatalf("%s: %v, digest %s, want %s", dir, err, h.Digest, digest)
		}
		loaded := build()
		if err := loaded.LoadPlan(bytes.NewReader(payload)); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var again bytes.Buffer
		if err := loaded.SavePlan(&again); err != nil || !bytes.Equal(again.Bytes(), payload) {
			t.Errorf("%s: saved again %d bytes (%v), want the %d loaded", dir, again.Len(), err, len(payload))
		}
		for _, r := range recs {
			a, errA := planned.Process(t.Context(), r)
			b, errB := loaded.Process(t.Context(), r)
			if fmt.Sprint(errA) != fmt.Sprint(errB) || len(a) != len(b) {
				t.Fatalf("%s %s: planned gives %d records, %v; loaded %d, %v", dir, r.ID, len(a), errA, len(b), errB)
			}
			for j := range a {
				if fmt.Sprintf("%+v", *a[j]) != fmt.Sprintf("%+v", *b[j]) {
					t.Fatalf("%s %s: records differ", dir, r.ID)
				}
			}
		}
	}
}

// TestPlanKey: the key changes with the settings and with any input shard.
func TestPlanKey(t *testing.T) {
	in := []shardInput{{name: "a-00000", ref: manifests.FileRef{Path: "00-ingest/a.parquet", SHA256: "11"}}}
	k := planKey("fp", in)
	other := []shardInput{{name: "a-00000", ref: manifests.FileRef{Path: "00-ingest/a.parquet", SHA256: "12"}}}
	if k == planKey("fp2", in) || k == planKey("fp", other) || k == planKey("fp", append(in, other...)) || k != planKey("fp", in) {
		t.Error("plan key does not follow settings and inputs")
	}
}

// planSavers are stages whose LoadPlan the fuzz target feeds.
func planSavers(t testing.TB) []PlanSaver {
	d := &DedupConfig{}
	d.defaults()
	dst, err := d.build(&Env{Stage: "dedup", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return []PlanSaver{dst.(PlanSaver), &sampler{cfg: &SampleConfig{Quotas: []Quota{{N: 1}}}}, &responseSchemas{}}
}

// FuzzPlanFile: a plan file (or a bare payload) of any bytes is either
// refused or loads into a plan that saves and loads again to the same
// bytes; nothing panics.
func FuzzPlanFile(f *testing.F) {
	var p planWriter
	p.uint(1)
	p.u64(7)
	p.str("keeper")
	p.uint(2)
	p.uint(1)
	p.u64(9)
	p.uint(0)
	p.uint(201)
	p.uint(1)
	p.u64(3)
	f.Add(encodePlan(planHeader{Type: "dedup", Key: "k", Digest: "d"}, p.b))
	var s planWriter
	s.uint(2)
	s.str("a")
	s.str("b")
	f.Add(encodePlan(planHeader{Type: "sample", Key: "k", Digest: "d"}, s.b))
	f.Add([]byte(planMagic + "{}\nsha256 00\n"))
	f.Add(p.b)
	f.Add(s.b)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, payload, err := decodePlan(b)
		if err != nil {
			payload = b // the checksum stops random bytes; feed them to the loaders as they are
		}
		for _, ps := range planSavers(t) {
			if ps.LoadPlan(bytes.NewReader(payload)) != nil {
				continue
			}
			var once, twice bytes.Buffer
			if err := ps.SavePlan(&once); err != nil {
				t.Fatalf("%T: loaded but cannot save: %v", ps, err)
			}
			if err := ps.LoadPlan(bytes.NewReader(once.Bytes())); err != nil {
				t.Fatalf("%T: cannot load its own plan: %v", ps, err)
			}
			if err := ps.SavePlan(&twice); err != nil || !bytes.Equal(once.Bytes(), twice.Bytes()) {
				t.Fatalf("%T: save, load, save differ", ps)
			}
		}
	})
}

// TestScanShardsInOrder: reading several shards at once yields what
// reading them one after the other does, in the same order; a damaged
// shard's error, a yield error and a cancelled context stop the scan.
func TestScanShardsInOrder(t *testing.T) {
	dir := t.TempDir()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var paths, want []string
	for s, n := range []int{3, 0, 700, 1, 513, 256, 40} {
		var recs []*record.Record
		for i := range n {
			id := fmt.Sprintf("s%d-%d", s, i)
			recs = append(recs, &record.Record{ID: id, Source: "x", Messages: []record.Message{{Role: "user", Content: id}}})
			want = append(want, id)
		}
		name := fmt.Sprintf("part-%d.parquet", s)
		if _, err := shard.Write(root, name, recs, shard.Options{RowGroupRows: 100}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Join(dir, name))
	}
	for _, ahead := range []int{1, 2, 3, 8} {
		var got []string
		err := scanShards(t.Context(), paths, ahead, func(r *record.Record) error {
			got = append(got, r.ID)
			return nil
		})
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ahead %d: %d records (%v), want %d in order", ahead, len(got), err, len(want))
		}
	}
	stop := fmt.Errorf("enough")
	n := 0
	if err := scanShards(t.Context(), paths, 3, func(*record.Record) error {
		if n++; n == 800 {
			return stop
		}
		return nil
	}); err != stop || n != 800 {
		t.Errorf("yield error: got %v after %d records", err, n)
	}
	bad := slices.Clone(paths)
	bad[3] = filepath.Join(dir, "missing.parquet")
	n = 0
	if err := scanShards(t.Context(), bad, 3, func(*record.Record) error { n++; return nil }); err == nil || n != 703 {
		t.Errorf("missing shard: %v after %d records, want an error after the 703 before it", err, n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := scanShards(ctx, paths, 3, func(*record.Record) error { return nil }); err == nil {
		t.Error("a cancelled scan returned no error")
	}
}

// BenchmarkPlanScan times a plan's scan alone: 100,000 generated records in
// 20 shards, read one shard at a time (ahead-1) and planReadAhead at once,
// the sub-benchmarks run in turn under the same load. It reports records/s
// and records per CPU-second.
func BenchmarkPlanScan(b *testing.B) {
	dir := b.TempDir()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	var paths []string
	var cur []*record.Record
	flush := func() {
		name := fmt.Sprintf("part-%05d.parquet", len(paths))
		if _, err := shard.Write(root, name, cur, shard.Options{}); err != nil {
			b.Fatal(err)
		}
		paths, cur = append(paths, filepath.Join(dir, name)), nil
	}
	const n = 100_000
	dedupStream(n, nil, nil)(func(r *record.Record) error {
		if cur = append(cur, r); len(cur) == n/20 {
			flush()
		}
		return nil
	})
	for _, ahead := range []int{1, planReadAhead()} {
		b.Run(fmt.Sprintf("ahead-%d", ahead), func(b *testing.B) {
			for b.Loop() {
				start, cpu0 := time.Now(), cputime.Process()
				got := 0
				if err := scanShards(context.Background(), paths, ahead, func(*record.Record) error { got++; return nil }); err != nil || got != n {
					b.Fatal(err, got)
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
				b.ReportMetric(float64(n)/(cputime.Process()-cpu0).Seconds(), "records/cpu-s")
			}
		})
	}
}
