package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages"
)

// BenchmarkStats reads the distributions of a run's final stage as the
// end-of-run report does (decoding its shards, counting the token sample),
// on a run of 5,000 glaive records made from the demo dump's rows (each
// copy's texts marked with its number, so no two records are the same);
// MB/s are of the stage's Parquet shards. The token counts of texts and
// pieces stay remembered between rounds, as in one process's report and
// cards.
func BenchmarkStats(b *testing.B) {
	raw, err := os.ReadFile("../testdata/demo/dumps/glaive.json")
	if err != nil {
		b.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(raw, &rows); err != nil {
		b.Fatal(err)
	}
	var dump []map[string]any
	for i := 0; len(dump) < 6000; i++ {
		row := map[string]any{}
		for k, v := range rows[i%len(rows)] {
			if s, ok := v.(string); ok && k == "chat" {
				v = strings.Replace(s, "USER: ", fmt.Sprintf("USER: (copy %d) ", i), 1)
			}
			row[k] = v
		}
		dump = append(dump, row)
	}
	dir := b.TempDir()
	data, err := json.Marshal(dump)
	if err != nil {
		b.Fatal(err)
	}
	pipeline := "seed: 1\noutput: {dir: out, shard_size: 1000}\nsources:\n  - {name: glaive, path: glaive.json, format: glaive}\n" +
		"stages:\n  - decision_tokens: {}\n  - export: {format: jsonl}\n"
	if err := os.WriteFile(filepath.Join(dir, "glaive.json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(pipeline), 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := stages.Load(filepath.Join(dir, "p.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	r, err := stages.NewRunner(p, stages.Options{Version: "test"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	r.Close()
	out := filepath.Join(dir, "out")
	run, err := report.Load(out)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, ref := range run.Final().Parquet() {
		size += ref.Bytes
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		run, err := report.Load(out)
		if err != nil {
			b.Fatal(err)
		}
		st, err := run.Stats()
		if err != nil {
			b.Fatal(err)
		}
		if st.Records.Records != 5000 { // one demo row in six is rejected (its arguments are not JSON)
			b.Fatalf("%d records in %s: %+v", st.Records.Records, st.Final, st.Stages)
		}
	}
}
