package report_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
)

// TestBatchOpenStatus: a stage whose manifest records an open batch job is
// waiting while the batch directory has that job open, whether or not a
// process holds the run's lock (`augment batch poll -wait` waits on it);
// once the job was taken in by a run that stopped before writing the
// manifest again, the record is stale and the stage is partial.
func TestBatchOpenStatus(t *testing.T) {
	out := runPipeline(t, demo)
	dir := stageDirs(t, out)[1]
	var name string
	editManifest(t, out, dir, func(m *manifests.Stage) {
		name = m.Name
		m.LLM = json.RawMessage(`{"requests": 4, "batch": {"rounds": 1, "jobs": 1, "open": 1, "requests": 4, "max_rounds": 3}}`)
		m.Shards = m.Shards[:0] // its records wait for the job's answers
	})
	if err := os.MkdirAll(filepath.Join(out, "batch"), 0o755); err != nil {
		t.Fatal(err)
	}
	setJob := func(state string) {
		t.Helper()
		st := fmt.Sprintf(`{"version": 1, "seq": 1, "stages": {%q: {"epoch": 1, "rounds": 1}},
"jobs": [{"id": "j-0001", "stage": %q, "epoch": 1, "round": 1, "provider": "files", "state": %q, "requests": 4}]}`, name, name, state)
		if err := os.WriteFile(filepath.Join(out, "batch", "state.json"), []byte(st), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when, want string) {
		t.Helper()
		got, status := statuses(t, out)
		if got[dir] != want {
			t.Errorf("%s: report says %s is %s, want %s", when, dir, got[dir], want)
		}
		for _, line := range strings.Split(status, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), dir+" ") && !strings.HasSuffix(line, " "+want) {
				t.Errorf("%s: status: %q, want %s", when, line, want)
			}
		}
		run, err := report.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		stats, err := run.Stats()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		stats.Print(&b)
		if waiting := strings.Contains(b.String(), "waiting for 1 open batch job"); waiting != (want == report.StatusWaiting) {
			t.Errorf("%s: stats says waiting %t:\n%s", when, waiting, b.String())
		}
	}
	setJob("submitted")
	check("job open, no process", report.StatusWaiting)

	lock, err := os.Open(filepath.Join(out, filepath.FromSlash(report.LockFile)))
	if err != nil {
		t.Fatal(err)
	}
	if held, err := flock.Exclusive(lock); err != nil || held {
		t.Fatalf("lock: held %v, %v", held, err)
	}
	check("job open, a poll holds the lock", report.StatusWaiting)
	lock.Close()

	setJob("done")
	check("job taken in, manifest not written again", report.StatusPartial)
}
