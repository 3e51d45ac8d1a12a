package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
)

// sampleRecords is what a run's report counts the tokens of: tokenSample
// final records of one dataset. The rows are the shared data's derived
// dumps of format (en and zh, as the bench harness generates its dumps
// from; $AUGMENT_SHARED_DATA or the repository's sibling shared/data), or
// the demo dump when those are absent; record k is row k modulo their
// number with its first user text marked with k, as in the harness's
// dumps: records of one dataset share tool lists, system prompts and most
// texts, and no two are identical.
func sampleRecords(tb testing.TB, format string) (recs []*record.Record, source string) {
	const tokenSample = 5000
	var rows []*record.Record
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	for _, lang := range []string{"en", "zh"} {
		prefix := format
		if format == "glaive" {
			prefix = "glaive_v2"
		}
		name := filepath.Join(dir, "derived", prefix+"_format_glaive_toolcall_"+lang+"_demo.json")
		if _, err := os.Stat(name); err != nil {
			rows = nil
			break
		}
		rows = append(rows, parseDump(tb, name, format)...)
		source = "shared data"
	}
	if rows == nil {
		rows, source = parseDump(tb, filepath.Join("..", "testdata", "demo", "dumps", format+".json"), format), "demo dump"
	}
	recs = make([]*record.Record, 0, tokenSample)
	for k := range tokenSample {
		r := rows[k%len(rows)].Clone()
		for i, m := range r.Messages {
			if m.Role == record.RoleUser {
				r.Messages[i].Content += fmt.Sprintf(" (#%d)", k)
				break
			}
		}
		recs = append(recs, r)
	}
	return recs, source
}

// parseDump reads the records of a dump of format; rows the reader
// rejects are left out (they are no final records).
func parseDump(tb testing.TB, name, format string) []*record.Record {
	data, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	var recs []*record.Record
	sc := formats.NewScanner(bytes.NewReader(data))
	for {
		row, i, err := sc.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		if r, err := formats.Parse(format, format, i, row); err == nil {
			recs = append(recs, r)
		}
	}
	if len(recs) == 0 {
		tb.Fatalf("no records in %s", name)
	}
	return recs
}

// BenchmarkRecordTokensSample counts a report's token sample (see
// sampleRecords) through TokenMemo.RecordTokens, as the run's report does;
// one op is the whole sample. "cold" is a run's work: no piece remembered,
// a new memo; "run" remembers the pieces from the op before (a run's
// steady state after its first records); "warm" keeps the memo too (every
// text seen before). Reported per record: wall and CPU µs.
func BenchmarkRecordTokensSample(b *testing.B) {
	Tokens("warm up")
	for _, format := range []string{"glaive", "toolace", "xlam"} {
		recs, source := sampleRecords(b, format)
		b.Logf("%s: %d records from the %s", format, len(recs), source)
		for _, mode := range []string{"cold", "run", "warm"} {
			b.Run(format+"/"+mode, func(b *testing.B) {
				memo := new(TokenMemo)
				for _, r := range recs {
					memo.RecordTokens(r)
				}
				start, cpu0 := time.Now(), cputime.Process()
				for b.Loop() {
					switch mode {
					case "cold":
						forgetPieces()
						memo = new(TokenMemo)
					case "run":
						memo = new(TokenMemo)
					}
					for _, r := range recs {
						memo.RecordTokens(r)
					}
				}
				per := float64(b.N * len(recs))
				b.ReportMetric(float64(time.Since(start).Microseconds())/per, "µs/record")
				b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/per, "cpu-µs/record")
			})
		}
	}
}

// forgetPieces empties the remembered piece (and segment) counts.
func forgetPieces() {
	pieceCounts.Lock()
	pieceCounts.m, pieceCounts.small, pieceCounts.longBytes = nil, strTable{}, 0
	pieceCounts.Unlock()
	segmentCounts.Lock()
	segmentCounts.m, segmentCounts.bytes = nil, 0
	segmentCounts.Unlock()
}

// BenchmarkRecordTokensDrawn is BenchmarkRecordTokensSample's "run" mode on
// records whose tool lists are drawn from the sample's tools, five each,
// as meta_tool lists them (its hard records list the invoked tools and
// distractors from the run's library): lists rarely repeat, their tools
// do.
func BenchmarkRecordTokensDrawn(b *testing.B) {
	Tokens("warm up")
	for _, format := range []string{"glaive", "xlam"} {
		recs, _ := sampleRecords(b, format)
		var lib []record.Tool
		for _, r := range recs[:500] {
			lib = append(lib, r.Tools...)
		}
		for k, r := range recs {
			r.Tools = nil
			for j := range 5 {
				r.Tools = append(r.Tools, lib[(k*31+j*977)%len(lib)])
			}
		}
		b.Run(format, func(b *testing.B) {
			for _, r := range recs {
				new(TokenMemo).RecordTokens(r)
			}
			cpu0 := cputime.Process()
			for b.Loop() {
				memo := new(TokenMemo)
				for _, r := range recs {
					memo.RecordTokens(r)
				}
			}
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N*len(recs)), "cpu-µs/record")
		})
	}
}

// BenchmarkRecordTokensFirst is a run's whole token work as a new process
// does it: load the tables (LoadTokens), then count a format's sample
// (sampleRecords) through a new memo, every table cold (highRanks built
// on the way, or not). Only the first op of a process is that: run one
// format with -benchtime 1x, one process a measurement (e.g. `go test -c`,
// then the binary in a loop with -test.bench RecordTokensFirst/glaive).
// Reported: CPU ms.
func BenchmarkRecordTokensFirst(b *testing.B) {
	for _, format := range []string{"glaive", "toolace", "xlam"} {
		b.Run(format, func(b *testing.B) {
			recs, _ := sampleRecords(b, format)
			cpu0 := cputime.Process()
			for b.Loop() {
				LoadTokens()
				memo := new(TokenMemo)
				for _, r := range recs {
					memo.RecordTokens(r)
				}
			}
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
