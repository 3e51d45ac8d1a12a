package stages

import (
	"context"
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
		want, got := tree(t, cleanOut), tree(t, out)
		for name, sum := range want {
			if !strings.HasSuffix(name, "manifest.json") && name != report.HTMLFile && got[name] != sum {
				t.Errorf("%s: %s differs from a clean run's (or is missing)", step, name)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d files, a clean run has %d", step, len(got), len(want))
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
		var check strings.Builder
		if err := Check(context.Background(), p, Options{}, &check); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(check.String(), "02 export (export): would finish (6 shards up to date;") {
			t.Errorf("%s: check says\n%s\nwant the export would finish", step, check.String())
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
