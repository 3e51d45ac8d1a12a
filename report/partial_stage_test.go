package report_test

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages"
)

// editManifest rewrites the manifest of the stage dir of run out with fn.
func editManifest(t *testing.T, out, dir string, fn func(*manifests.Stage)) {
	t.Helper()
	path := filepath.Join(out, dir, "manifest.json")
	m, err := manifests.Read[manifests.Stage](path)
	if err != nil || m == nil {
		t.Fatalf("%s: %v", path, err)
	}
	fn(m)
	if err := writeJSON(path, m); err != nil {
		t.Fatal(err)
	}
}

// dropShard removes the shard name from a manifest, as a run that stopped
// before the stage did it leaves it (finished all the same).
func dropShard(name string) func(*manifests.Stage) {
	return func(m *manifests.Stage) {
		m.Shards = slices.DeleteFunc(m.Shards, func(s manifests.Shard) bool { return s.Name == name })
	}
}

// statuses are the stage statuses of report.Load and those stages.Status
// prints, by stage dir.
func statuses(t *testing.T, out string) (map[string]string, string) {
	t.Helper()
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range run.Stages {
		got[s.Dir] = s.Status
	}
	sts, err := stages.Status(out)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	stages.PrintStatus(&b, sts)
	return got, b.String()
}

// TestPartialStages: a stage whose manifest has a finish time but does not
// cover every shard of its input (a failed or interrupted run finishes the
// stages it stops) is partial, as is every stage after it; show says the
// record's shard was not done there rather than calling it filtered.
func TestPartialStages(t *testing.T) {
	out := runPipeline(t, demo)
	got, status := statuses(t, out)
	for dir, s := range got {
		if s != report.StatusDone {
			t.Errorf("a whole run: %s is %s", dir, s)
		}
	}
	if strings.Contains(status, "partial") {
		t.Errorf("a whole run: status says partial:\n%s", status)
	}

	// A run that stopped before any stage after ingest did xlam-00000.
	for _, dir := range stageDirs(t, out)[1:] {
		editManifest(t, out, dir, dropShard("xlam-00000"))
	}
	got, status = statuses(t, out)
	if got["00-ingest"] != report.StatusDone {
		t.Errorf("00-ingest: %s", got["00-ingest"])
	}
	for _, dir := range stageDirs(t, out)[1:] {
		if got[dir] != report.StatusPartial {
			t.Errorf("%s: %s, want partial", dir, got[dir])
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(status), "\n")[2:] {
		if !strings.HasSuffix(line, " partial") {
			t.Errorf("status: %q, want partial", line)
		}
	}
	run, _ := report.Load(out)
	j, err := run.Journey("xlam:0")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	report.PrintJourney(&b, j)
	if want := "01-sample      not processed (shard xlam-00000: the run stopped before this stage did it; rerun to resume)\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("journey of xlam:0 ends\n%s\nwant it to end\n%s", b.String(), want)
	}
	st, err := run.Stats()
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	st.Print(&b)
	for _, want := range []string{"run " + out + ": 1 of 8 stages done;", "records of 05-verify: 8 (of the shards it did: it is partial)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("stats lack %q:\n%s", want, b.String())
		}
	}
	h, err := run.HTML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 of 8 stages done; partial (", `class="l status-partial">partial<`} {
		if !bytes.Contains(h, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}

	// Interrupted later: reason finished with no shard at all (as a
	// Ctrl-C leaves it); a record reason never saw says so.
	out = runPipeline(t, demo)
	editManifest(t, out, "04-reason", func(m *manifests.Stage) { m.Shards, m.Totals = nil, manifests.Counts{} })
	got, status = statuses(t, out)
	for dir, want := range map[string]string{"03-noise": report.StatusDone, "04-reason": report.StatusPartial,
		"05-verify": report.StatusPartial, "07-sharegpt": report.StatusPartial} {
		if got[dir] != want {
			t.Errorf("%s: %s, want %s", dir, got[dir], want)
		}
	}
	if !regexp.MustCompile(`(?m)^ *04-reason +0/5 .* partial$`).MatchString(status) {
		t.Errorf("status:\n%s", status)
	}
	run, _ = report.Load(out)
	if j, err = run.Journey("toolace:1"); err != nil {
		t.Fatal(err)
	}
	if s := j.Steps[4]; s.Stage != "04-reason" || s.Status != report.StepNotProcessed || s.Shard != "toolace-00000" {
		t.Errorf("toolace:1 at reason: %+v", s)
	}

	// An export whose input shard was rewritten since it read it.
	out = runPipeline(t, demo)
	editManifest(t, out, "06-mt_llama", func(m *manifests.Stage) { m.Shards[0].Inputs[0].SHA256 = strings.Repeat("0", 64) })
	if got, _ = statuses(t, out); got["06-mt_llama"] != report.StatusPartial || got["07-sharegpt"] != report.StatusDone {
		t.Errorf("an export whose input changed: 06 %s, 07 %s", got["06-mt_llama"], got["07-sharegpt"])
	}
}
