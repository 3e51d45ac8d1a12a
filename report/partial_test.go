package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages"
)

// sampleRun writes a pipeline over n xlam records (the demo dump's rows,
// each copy's query marked with its number) in a fresh directory: an
// export for glm4, which rejects the parallel calls of half of them, and a
// plain one, after decision_tokens. It returns the pipeline file.
func sampleRun(t testing.TB, n int) string {
	t.Helper()
	raw, err := os.ReadFile("../testdata/demo/dumps/xlam.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	dump := make([]map[string]any, n)
	for i := range dump {
		row := map[string]any{}
		for k, v := range rows[i%len(rows)] {
			row[k] = v
		}
		row["id"] = i
		row["query"] = fmt.Sprintf("(copy %d) %s", i, row["query"])
		dump[i] = row
	}
	dir := t.TempDir()
	data, err := json.Marshal(dump)
	if err != nil {
		t.Fatal(err)
	}
	pipeline := "seed: 3\noutput: {dir: out, shard_size: 1000}\nsources:\n  - {name: xlam, path: xlam.json, format: xlam}\n" +
		"stages:\n  - decision_tokens: {}\n  - {name: glm4, export: {template: glm4}}\n  - {name: plain, export: {}}\n"
	if err := os.WriteFile(filepath.Join(dir, "xlam.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "p.yaml")
}

// rerun runs the pipeline file, with the settings sets, and returns its
// report.
func rerun(t testing.TB, path string, sets ...string) *stages.Report {
	t.Helper()
	p, err := stages.Load(path, sets...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := stages.NewRunner(p, stages.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// sameDist fails unless got and want hold the same counts, token summary
// and token lengths.
func sameDist(t *testing.T, what string, got, want *report.Dist) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s: from the partials\n%s\nread from the records\n%s", what, g, w)
	}
	if !reflect.DeepEqual(got.TokenHist(), want.TokenHist()) {
		t.Errorf("%s: token lengths differ", what)
	}
}

// inputs are the Parquet shards an export read.
func inputs(s *report.Stage) []manifests.FileRef {
	var refs []manifests.FileRef
	for _, sh := range s.Manifest.Shards {
		refs = append(refs, sh.Inputs...)
	}
	return refs
}

// checkDists checks the distributions the report gives out (merged from
// the partials) against the records themselves, read with the run's token
// sample (rows: the records ingest handed on), and returns the cards and
// the final records' distribution as JSON.
func checkDists(t *testing.T, out string, rows int64) map[string]string {
	t.Helper()
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for i := range run.Stages {
		s := &run.Stages[i]
		if !s.Sink() {
			continue
		}
		d, err := run.ExportDist(s)
		if err != nil {
			t.Fatal(err)
		}
		skip, err := run.RejectedIDs(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := run.ScanDist(inputs(s), skip, rows)
		if err != nil {
			t.Fatal(err)
		}
		sameDist(t, s.Dir, d, want)
		if d.Records != s.Totals().Out {
			t.Errorf("%s: %d records in the partials, %d written", s.Dir, d.Records, s.Totals().Out)
		}
		card, err := run.Card(i)
		if err != nil {
			t.Fatal(err)
		}
		got[s.Dir] = string(card)
	}
	fs := run.Final()
	d, err := run.FinalDist(fs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := run.ScanDist(fs.Parquet(), nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	sameDist(t, "final "+fs.Dir, d, want)
	b, _ := json.Marshal(d)
	got["final"] = string(b)
	return got
}

// hasPartials fails unless every shard of every export lists its partial
// and the file is there (else the report would read the records instead).
func hasPartials(t *testing.T, out string) {
	t.Helper()
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range run.Stages {
		if !s.Sink() {
			continue
		}
		for _, sh := range s.Manifest.Shards {
			want := s.Dir + "/" + report.PartialFile(sh.Name)
			found := false
			for _, o := range sh.Outputs {
				found = found || o.Path == want
			}
			if _, err := os.Stat(filepath.Join(out, want)); !found || err != nil {
				t.Errorf("%s: shard %s has no partial (listed %v, %v)", s.Dir, sh.Name, found, err)
			}
		}
	}
}

// TestPartialsEqualScan: the distributions the report merges from the
// export's partials equal those read from the records with the same token
// sample — after the run, after a rerun that redoes nothing, after a rerun
// that redoes one shard (nothing lost or counted twice) — and the report
// does not read the records to give them; a run dir without partials (an
// older augment's) is read from the records, with the same cards.
func TestPartialsEqualScan(t *testing.T) {
	const n = 6000 // more than the token sample, so the sample is one
	path := sampleRun(t, n)
	out := filepath.Join(filepath.Dir(path), "out")
	rerun(t, path)
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	rows := run.Stages[0].Totals().Out
	hasPartials(t, out)
	first := checkDists(t, out, rows)
	var fd report.Dist
	json.Unmarshal([]byte(first["final"]), &fd)
	if fd.Records != n || fd.Tokens.Count < 4000 || fd.Tokens.Count > 6000 {
		t.Errorf("final: %d records, %d token counts: want %d records and a sample of about 5000", fd.Records, fd.Tokens.Count, n)
	}
	glm4 := run.Stages[2]
	if glm4.Name != "glm4" || glm4.Totals().Out != n/2 || manifests.Sum(glm4.Totals().Rejected) != n/2 {
		t.Fatalf("glm4 export: %+v", glm4.Totals())
	}
	for _, dir := range []string{"02-glm4", "03-plain"} {
		b, err := os.ReadFile(filepath.Join(out, dir, report.CardFile))
		if err != nil || string(b) != first[dir] {
			t.Errorf("%s: the card the run wrote differs from the report's (%v)", dir, err)
		}
	}

	// The report reads the partials, not the records: with the final
	// shards moved away it gives the same.
	fs := run.Final()
	for _, ref := range fs.Parquet() {
		if err := os.Rename(filepath.Join(out, ref.Path), filepath.Join(out, ref.Path+".away")); err != nil {
			t.Fatal(err)
		}
	}
	run2, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	d, err := run2.FinalDist(run2.Final())
	if err != nil {
		t.Fatalf("the report read the records: %v", err)
	}
	if b, _ := json.Marshal(d); string(b) != first["final"] {
		t.Errorf("final distributions differ without the records")
	}
	for i, s := range run2.Stages {
		if s.Sink() {
			if card, err := run2.Card(i); err != nil || string(card) != first[s.Dir] {
				t.Errorf("%s: card without the records: %v", s.Dir, err)
			}
		}
	}
	for _, ref := range fs.Parquet() {
		if err := os.Rename(filepath.Join(out, ref.Path+".away"), filepath.Join(out, ref.Path)); err != nil {
			t.Fatal(err)
		}
	}

	// A rerun redoes nothing and keeps every partial.
	rep := rerun(t, path)
	for _, s := range rep.Stages {
		if s.Ran != 0 {
			t.Errorf("rerun ran %d shards of %s", s.Ran, s.Dir)
		}
	}
	hasPartials(t, out)
	if again := checkDists(t, out, rows); !reflect.DeepEqual(again, first) {
		t.Errorf("rerun: report differs")
	}

	// One shard of each export redone: its partial replaces the old one.
	for _, f := range []string{"02-glm4/augment_glm4/part-xlam-00002.jsonl", "03-plain/dist-xlam-00004.json"} {
		if err := os.Remove(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	rep = rerun(t, path)
	for _, s := range rep.Stages[2:] {
		if s.Ran != 1 {
			t.Errorf("%s: ran %d shards, want the one whose file was removed", s.Dir, s.Ran)
		}
	}
	hasPartials(t, out)
	if again := checkDists(t, out, rows); !reflect.DeepEqual(again, first) {
		t.Errorf("rerun with a shard redone: report differs")
	}

	// A run dir an older augment wrote has no partials: the report reads
	// the records (the sample then drawn for the rows read, here the same).
	for _, s := range run.Stages[2:] {
		mpath := filepath.Join(out, s.Dir, "manifest.json")
		m, err := manifests.Read[manifests.Stage](mpath)
		if err != nil {
			t.Fatal(err)
		}
		for i, sh := range m.Shards {
			var keep []manifests.FileRef
			for _, o := range sh.Outputs {
				if strings.HasPrefix(filepath.Base(o.Path), "dist-") {
					os.Remove(filepath.Join(out, o.Path))
				} else {
					keep = append(keep, o)
				}
			}
			m.Shards[i].Outputs = keep
		}
		if err := writeJSON(mpath, m); err != nil {
			t.Fatal(err)
		}
	}
	if old := checkDists(t, out, rows); !reflect.DeepEqual(old, first) {
		t.Errorf("without partials: report differs")
	}
}
