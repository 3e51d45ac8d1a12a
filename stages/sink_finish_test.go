package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
)

// TestSinkFinishAfterKill: a run killed after an export's shards were
// recorded and before its Finish leaves no dataset_info.json or
// train_lora.yaml; the next run must not skip the export as up to date but
// run its Finish (no shard again), ending with a clean run's bytes. The same
// goes for a Finish file lost later.
func TestSinkFinishAfterKill(t *testing.T) {
	clean := demoPipeline(t, demoStages)
	runPipeline(t, clean)
	cleanOut := filepath.Join(filepath.Dir(clean), "out")
	cleanM, err := manifests.Read[manifests.Stage](filepath.Join(cleanOut, "02-export", "manifest.json"))
	if err != nil || cleanM == nil || len(cleanM.Files) == 0 {
		t.Fatalf("clean export manifest %+v, %v: want Finish files", cleanM, err)
	}

	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	root, err := atomicfs.OpenRoot(out)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	same := func(step string) {
		t.Helper()
		sameAsClean(t, step, cleanOut, out)
		if got, want := len(tree(t, out)), len(tree(t, cleanOut)); got != want {
			t.Errorf("%s: %d files, a clean run has %d", step, got, want)
		}
		m, err := manifests.Read[manifests.Stage](filepath.Join(out, "02-export", "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Finished.IsZero() || !slices.Equal(m.Files, cleanM.Files) || !slices.Equal(m.Notes, cleanM.Notes) ||
			!slices.Equal(m.FinishNotes, cleanM.FinishNotes) || fmt.Sprint(m.Totals) != fmt.Sprint(cleanM.Totals) {
			t.Errorf("%s: export manifest: finished %v, files %q, notes %q, finish notes %q, totals %v;\nwant as a clean run's: files %q, notes %q, finish notes %q, totals %v",
				step, m.Finished, m.Files, m.Notes, m.FinishNotes, m.Totals, cleanM.Files, cleanM.Notes, cleanM.FinishNotes, cleanM.Totals)
		}
	}
	rerun := func(step string) {
		t.Helper()
		p, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		check := checkSays(t, p)
		if !strings.Contains(check, "02 export (export): would finish (6 shards up to date;") {
			t.Errorf("%s: check says\n%s\nwant the export would finish", step, check)
		}
		rep := runPipeline(t, path)
		for _, s := range rep.Stages {
			if s.Ran != 0 {
				t.Errorf("%s: %s ran %d shards, want 0 (only the export's Finish is missing)", step, s.Dir, s.Ran)
			}
		}
		same(step)
	}

	// The manifest as the run's last save before Finish leaves it: every
	// shard recorded, no Finish notes or files, not finished.
	m, err := atomicfs.ReadJSON[manifests.Stage](root, "02-export/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if err := os.Remove(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	m.Notes = slices.DeleteFunc(m.Notes, func(n string) bool { return slices.Contains(m.FinishNotes, n) })
	m.Files, m.FinishNotes, m.Finished = nil, nil, time.Time{}
	if err := root.WriteJSON("02-export/manifest.json", m); err != nil {
		t.Fatal(err)
	}
	rerun("killed before Finish")

	// A Finish file lost after a finished run.
	if err := os.Remove(filepath.Join(out, "02-export", TrainLoRAFile)); err != nil {
		t.Fatal(err)
	}
	rerun("train_lora.yaml lost")
}

// sameAsClean reports each file of a clean run's output dir cleanOut that
// out lacks or holds with other bytes, manifests and the HTML report aside.
func sameAsClean(t *testing.T, step, cleanOut, out string) {
	t.Helper()
	want, got := tree(t, cleanOut), tree(t, out)
	for name, sum := range want {
		if !strings.HasSuffix(name, "manifest.json") && name != report.HTMLFile && got[name] != sum {
			t.Errorf("%s: %s differs from a clean run's (or is missing)", step, name)
		}
	}
}

// TestSinkFinishAfterGroupFailed: a sink inside a group whose shards are
// all recorded, closed with the error of a later stage of its group, never
// ran its Finish; its manifest must not say finished, so that the next run
// runs Finish (no shard again) instead of skipping the sink as up to date.
func TestSinkFinishAfterGroupFailed(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	want, err := manifests.Read[manifests.Stage](filepath.Join(out, "02-export", "manifest.json"))
	if err != nil || want == nil || len(want.Files) == 0 {
		t.Fatalf("export manifest %+v, %v: want Finish files", want, err)
	}
	for _, f := range want.Files {
		if err := os.Remove(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(out, "02-export", "manifest.json")); err != nil {
		t.Fatal(err)
	}

	// The export's pass alone: every shard through runChain, then closed
	// as runGroup closes it when a stage after it failed.
	r, sp, inputs := openExportPass(t, path)
	if sp.upToDate {
		t.Fatal("the export's pass is up to date")
	}
	ctx := context.Background()
	g := &group{passes: []*pass{sp}, lastSave: time.Now()}
	for _, in := range inputs {
		if err := r.runChain(ctx, g, in.name, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.synced(); err != nil {
		t.Fatal(err)
	}
	later := fmt.Errorf("stage after export: failed")
	if err := r.closePass(ctx, sp, later); err != later {
		t.Fatalf("closePass: %v, want the group's error", err)
	}
	r.Close()
	m, err := manifests.Read[manifests.Stage](filepath.Join(out, "02-export", "manifest.json"))
	if err != nil || m == nil {
		t.Fatalf("export manifest: %v", err)
	}
	if len(m.Shards) != len(inputs) || !m.Finished.IsZero() {
		t.Fatalf("export manifest records %d of %d shards, finished %v: want all, not finished", len(m.Shards), len(inputs), m.Finished)
	}

	rep := runPipeline(t, path)
	for _, s := range rep.Stages {
		if s.Ran != 0 {
			t.Errorf("%s ran %d shards, want 0 (only the export's Finish is missing)", s.Dir, s.Ran)
		}
	}
	m, err = manifests.Read[manifests.Stage](filepath.Join(out, "02-export", "manifest.json"))
	if err != nil || m == nil {
		t.Fatalf("export manifest: %v", err)
	}
	if m.Finished.IsZero() || !slices.Equal(m.Files, want.Files) {
		t.Errorf("after the rerun: finished %v, files %q; want finished, files %q", m.Finished, m.Files, want.Files)
	}
	for _, f := range want.Files {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("after the rerun: %v", err)
		}
	}
}

// openExportPass opens, for the demo pipeline at path (stages sample, then
// export) whose sample is up to date, the export's pass as runGroup would,
// and lists its input shards. The caller closes the Runner.
func openExportPass(t *testing.T, path string) (*Runner, *pass, []shardInput) {
	t.Helper()
	r, err := newRunner(t, path)
	if err != nil {
		t.Fatal(err)
	}
	runs := r.plan()
	ctx := context.Background()
	if _, err := r.ingest(ctx, runs[0]); err != nil { // up to date; it finds the tool library
		t.Fatal(err)
	}
	sample, err := manifests.Read[manifests.Stage](filepath.Join(filepath.Dir(path), "out", runs[1].rel, "manifest.json"))
	if err != nil || sample == nil {
		t.Fatalf("sample manifest: %v", err)
	}
	var inputs []shardInput
	for _, s := range sample.Shards {
		if ref, ok := parquetOf(s); ok {
			inputs = append(inputs, shardInput{name: s.Name, ref: ref})
		}
	}
	env, st, err := r.buildStage(runs[2])
	if err != nil {
		t.Fatal(err)
	}
	sp, err := r.openPass(ctx, runs[2], env, st, inputs)
	if err != nil || sp.sink == nil {
		t.Fatalf("open export pass: sink %v, %v", sp != nil && sp.sink != nil, err)
	}
	return r, sp, inputs
}

// A note belongs to the shard it was said of: when a changed dump makes
// the export redo a shard, the note its old version gave goes with it, and
// the stage ends with a clean run's notes and card. So does a manifest
// written before shards kept their notes, once a shard is redone.
func TestNotesFollowTheirShards(t *testing.T) {
	orig, err := os.ReadFile("../testdata/demo/dumps/glaive.json")
	if err != nil {
		t.Fatal(err)
	}
	// The first dialogue ends with a user turn: the export cuts it and
	// says so.
	trailing := bytes.Replace(orig, []byte(`normal range. <|endoftext|>\n\n\n"`), []byte(`normal range. <|endoftext|>\n\n\nUSER: Thanks!\n\n\n"`), 1)
	if bytes.Equal(trailing, orig) {
		t.Fatal("the demo's first glaive dialogue changed; the test no longer adds a trailing user turn")
	}
	const note = "trailing user or tool turns after the last assistant turn are cut (they have no target)"
	pipeline := func(dump []byte) (path, out string) {
		return dumpPipeline(t, map[string][]byte{"glaive": dump}, "  - export: {}\n")
	}
	exportManifest := func(out string) *manifests.Stage {
		m, err := manifests.Read[manifests.Stage](filepath.Join(out, "01-export", "manifest.json"))
		if err != nil || m == nil {
			t.Fatalf("export manifest: %v", err)
		}
		return m
	}
	cleanPath, cleanOut := pipeline(orig)
	runPipeline(t, cleanPath)
	clean := exportManifest(cleanOut)
	if slices.Contains(clean.Notes, note) {
		t.Fatalf("the clean run notes %q; the test needs a dump without trailing turns", note)
	}

	path, out := pipeline(trailing)
	runPipeline(t, path)
	m := exportManifest(out)
	if !slices.Contains(m.Notes, note) || !slices.Contains(m.Shards[0].Notes, note) || len(m.Shards[1].Notes) > 0 {
		t.Fatalf("notes %q, by shard %q, %q: want the trailing-turn note on the first shard only", m.Notes, m.Shards[0].Notes, m.Shards[1].Notes)
	}
	same := func(step string) {
		t.Helper()
		sameAsClean(t, step, cleanOut, out)
		if m := exportManifest(out); !slices.Equal(m.Notes, clean.Notes) {
			t.Errorf("%s: notes %q, a clean run's %q", step, m.Notes, clean.Notes)
		}
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "glaive.json"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	runPipeline(t, path)
	same("dump changed back")

	// The manifest as a build before shard notes wrote it, with the
	// trailing-turn note on no shard; then a change to a dialogue of the
	// last shard only: every shard is redone, so the first keeps its note.
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "glaive.json"), trailing, 0o644); err != nil {
		t.Fatal(err)
	}
	runPipeline(t, path)
	m = exportManifest(out)
	for i := range m.Shards {
		m.Shards[i].Notes = nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "01-export", "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	last := bytes.Replace(trailing, []byte("I can only calculate a BMI"), []byte("I can only work out a BMI"), 1)
	if bytes.Equal(last, trailing) {
		t.Fatal("the demo's last glaive dialogue changed; the test no longer edits it")
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "glaive.json"), last, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := runPipeline(t, path)
	m = exportManifest(out)
	if !slices.Contains(m.Notes, note) || !slices.Contains(m.Shards[0].Notes, note) {
		t.Errorf("manifest without shard notes, last shard changed: notes %q, first shard's %q; want the trailing-turn note kept", m.Notes, m.Shards[0].Notes)
	}
	for _, s := range rep.Stages {
		if s.Dir == "01-export" && s.Ran != len(m.Shards) {
			t.Errorf("export ran %d of %d shards, want all", s.Ran, len(m.Shards))
		}
	}
}
