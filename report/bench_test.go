package report_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

// benchRun runs decision_tokens and an export over 5,000 glaive records
// made from the demo dump's rows (each copy's texts marked with its number,
// so no two records are the same) and returns the run directory.
func benchRun(b *testing.B) string {
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
	rerun(b, filepath.Join(dir, "p.yaml"))
	return filepath.Join(dir, "out")
}

// BenchmarkStats reads the distributions of a run's final stage as
// `augment stats` and the end-of-run report do: merged from the export's
// partials (the records are not read); MB/s are of the final stage's
// Parquet shards, the records the report describes.
func BenchmarkStats(b *testing.B) {
	out := benchRun(b)
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

// BenchmarkFinalDist compares the two ways to the final records'
// distributions, each with the token counts of a fresh run (nothing
// remembered between rounds): scan reads the final stage's shards again
// after the run (an older run dir, and every run before partials); partials
// counts each shard's records while they are in memory, writes its partial
// file, and merges the partials as the report does. MB/s are of the final
// stage's Parquet shards.
func BenchmarkFinalDist(b *testing.B) {
	out := benchRun(b)
	run, err := report.Load(out)
	if err != nil {
		b.Fatal(err)
	}
	fs := run.Final()
	rows := run.Stages[0].Totals().Out
	var size int64
	var shards [][]*record.Record
	for _, ref := range fs.Parquet() {
		size += ref.Bytes
		recs, err := shard.Read(filepath.Join(out, ref.Path))
		if err != nil {
			b.Fatal(err)
		}
		shards = append(shards, recs)
	}
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			run, err := report.Load(out)
			if err != nil {
				b.Fatal(err)
			}
			if d, err := run.ScanDist(fs.Parquet(), nil, rows); err != nil || d.Records != 5000 {
				b.Fatal(d.Records, err)
			}
		}
	})
	b.Run("partials", func(b *testing.B) {
		root, err := atomicfs.OpenRoot(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer root.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			var memo verify.TokenMemo
			for i, recs := range shards {
				p := report.NewPartial(rows, &memo)
				for _, r := range recs {
					p.AddWritten(r)
				}
				if _, err := p.Write(root, fmt.Sprintf("dist-%d.json", i)); err != nil {
					b.Fatal(err)
				}
			}
			run, err := report.Load(out)
			if err != nil {
				b.Fatal(err)
			}
			if d, err := run.FinalDist(run.Final()); err != nil || d.Records != 5000 {
				b.Fatal(d.Records, err)
			}
		}
	})
}

// BenchmarkPartialAdd is the partials' count of each record an export
// writes, without the token sample (the run's rows are set so high that no
// record is in it): the per-record share of the report's work. An op is one
// pass over the final stage's 5,000 records.
func BenchmarkPartialAdd(b *testing.B) {
	out := benchRun(b)
	run, err := report.Load(out)
	if err != nil {
		b.Fatal(err)
	}
	var recs []*record.Record
	for _, ref := range run.Final().Parquet() {
		rs, err := shard.Read(filepath.Join(out, ref.Path))
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rs...)
	}
	b.ReportAllocs()
	for b.Loop() {
		p := report.NewPartial(1<<50, nil)
		for _, r := range recs {
			p.AddWritten(r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
