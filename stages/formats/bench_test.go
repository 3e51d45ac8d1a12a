package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/stages/shard"
)

// dump builds an input of at least size bytes from the fixture rows, as a
// JSON array or as JSON Lines.
func dump(b *testing.B, size int, lines bool) []byte {
	var rows [][]byte
	for _, fx := range fixtures {
		rows = append(rows, fixtureRows(b, fx.file)...)
	}
	return dumpOf(rows, size, lines)
}

// dumpOf builds an input of at least size bytes from rows.
func dumpOf(rows [][]byte, size int, lines bool) []byte {
	var buf bytes.Buffer
	if !lines {
		buf.WriteString("[\n")
	}
	for i := 0; buf.Len() < size; i++ {
		if i > 0 && !lines {
			buf.WriteString(",\n")
		}
		buf.Write(rows[i%len(rows)])
		if lines {
			buf.WriteByte('\n')
		}
	}
	if !lines {
		buf.WriteString("\n]\n")
	}
	return buf.Bytes()
}

func BenchmarkScanner(b *testing.B) {
	// xlam's rows hold JSON texts in strings: many escaped quotes.
	xlam := fixtureRows(b, "xlam.json")
	for _, mode := range []struct {
		name  string
		lines bool
		rows  [][]byte // nil: every fixture's
	}{{"array", false, nil}, {"jsonl", true, nil}, {"xlam-array", false, xlam}, {"xlam-jsonl", true, xlam}} {
		b.Run(mode.name, func(b *testing.B) {
			data := dump(b, 32<<20, mode.lines)
			if mode.rows != nil {
				data = dumpOf(mode.rows, 32<<20, mode.lines)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			defer func() {
				if cpu := cputime.Process() - cpu0; cpu > 0 {
					b.ReportMetric(cpu.Seconds()*1e3/(float64(len(data))*float64(b.N)/1e6), "cpu-ms/MB")
				}
			}()
			for range b.N {
				scanDump(b, data)
			}
		})
	}
}

// BenchmarkScannerDumps scans dumps of about 32 MB made of the rows the
// bench harness builds its dumps from (see BenchmarkParseDumps), one per
// format: their strings differ from the fixtures' (glaive's are long,
// xlam's hold escaped JSON), and the scanner's cost with them.
func BenchmarkScannerDumps(b *testing.B) {
	dir := sharedData(b)
	for _, format := range []string{"glaive", "toolace", "xlam"} {
		b.Run(format, func(b *testing.B) {
			name := format
			if format == "glaive" {
				name = "glaive_v2"
			}
			var rows [][]byte
			for _, lang := range []string{"en", "zh"} {
				data, err := os.ReadFile(filepath.Join(dir, "derived", name+"_format_glaive_toolcall_"+lang+"_demo.json"))
				if err != nil {
					b.Fatal(err)
				}
				rows = append(rows, scanRows(b, data)...)
			}
			data := dumpOf(rows, 32<<20, false)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			for range b.N {
				scanDump(b, data)
			}
			if cpu := cputime.Process() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()*1e3/(float64(len(data))*float64(b.N)/1e6), "cpu-ms/MB")
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for _, fx := range fixtures {
		b.Run(fx.format, func(b *testing.B) {
			rows := fixtureRows(b, fx.file)
			n := 0
			for _, r := range rows {
				n += len(r)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i, r := range rows {
					if _, err := Parse(fx.format, "bench", int64(i), r); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkParseRealData parses the shared dumps (skipped when absent): the
// same dialogues in each format, so the figures compare the readers.
func BenchmarkParseRealData(b *testing.B) {
	dir := sharedData(b)
	for _, c := range []struct{ format, file string }{
		{"toolace", "derived/toolace_format_glaive_toolcall_en_demo.json"},
		{"glaive", "derived/glaive_v2_format_glaive_toolcall_en_demo.json"},
		{"xlam", "derived/xlam_format_glaive_toolcall_en_demo.json"},
		{"sharegpt", "llamafactory/glaive_toolcall_en_demo.json"},
		{"sharegpt-v1", "llamafactory/reason_tool_use_demo_50.jsonl"},
	} {
		b.Run(c.format, func(b *testing.B) {
			data, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				b.Fatal(err)
			}
			rows := scanRows(b, data)
			format := strings.TrimSuffix(c.format, "-v1")
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i, r := range rows {
					if _, err := Parse(format, "bench", int64(i), r); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkParseDumps parses the rows the bench harness (testdata/bench)
// builds its dumps from, the shared en and zh dialogues of each format, and
// reports besides wall time the process CPU time per MB of rows (cpu-ms/MB),
// the steadier figure on a machine shared with other work. The +check
// variants also run shard.Check on each record, as ingest did before
// Parse's contract made it redundant. The +marshal variants parse the rows
// as the harness writes them into its dumps: encoding/json's output, keys
// sorted, one line per row, '<', '>' and '&' as \u escapes (glaive's
// <|endoftext|> and <functioncall> markers).
func BenchmarkParseDumps(b *testing.B) {
	dir := sharedData(b)
	for _, name := range []string{"glaive", "toolace", "xlam", "glaive+check", "toolace+check", "xlam+check",
		"glaive+marshal", "toolace+marshal"} {
		format, variant, _ := strings.Cut(name, "+")
		check := variant == "check"
		b.Run(name, func(b *testing.B) {
			var rows [][]byte
			n := 0
			for _, lang := range []string{"en", "zh"} {
				name := format
				if format == "glaive" {
					name = "glaive_v2"
				}
				data, err := os.ReadFile(filepath.Join(dir, "derived", name+"_format_glaive_toolcall_"+lang+"_demo.json"))
				if err != nil {
					b.Fatal(err)
				}
				for _, row := range scanRows(b, data) {
					if variant == "marshal" {
						row = remarshal(b, row)
					}
					rows = append(rows, row)
					n += len(row)
				}
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			for range b.N {
				for i, r := range rows {
					// A few shared rows are rejected, as in a real run.
					if rec, err := Parse(format, "bench", int64(i), r); err == nil && check {
						if _, err := shard.Check(rec); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			if cpu := cputime.Process() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()*1e3/(float64(n)*float64(b.N)/1e6), "cpu-ms/MB")
			}
		})
	}
}

// remarshal returns row as the bench harness writes it (json.Marshal of
// the decoded row).
func remarshal(tb testing.TB, row []byte) []byte {
	var v map[string]any
	if err := json.Unmarshal(row, &v); err != nil {
		tb.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// scanDump scans every row of a dump.
func scanDump(tb testing.TB, data []byte) {
	sc := NewScanner(bytes.NewReader(data))
	for {
		_, _, err := sc.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// scanRows returns the rows of a dump, each a copy.
func scanRows(tb testing.TB, data []byte) [][]byte {
	tb.Helper()
	var rows [][]byte
	sc := NewScanner(bytes.NewReader(data))
	for {
		row, _, err := sc.Next()
		if errors.Is(err, io.EOF) {
			return rows
		}
		if err != nil {
			tb.Fatal(err)
		}
		rows = append(rows, bytes.Clone(row))
	}
}

// BenchmarkXLAMPasses compares, on the rows of BenchmarkParseDumps, xlam's
// JSON texts decoded in the row parser's pass and in passes of their own.
func BenchmarkXLAMPasses(b *testing.B) {
	dir := sharedData(b)
	var rows [][]byte
	n := 0
	for _, lang := range []string{"en", "zh"} {
		data, err := os.ReadFile(filepath.Join(dir, "derived", "xlam_format_glaive_toolcall_"+lang+"_demo.json"))
		if err != nil {
			b.Fatal(err)
		}
		for _, row := range scanRows(b, data) {
			rows = append(rows, row)
			n += len(row)
		}
	}
	for _, how := range []passes{laidOut, direct, onePass, twoPasses} {
		name := [...]string{"two", "one", "direct", "laid"}[how]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for range b.N {
				for i, r := range rows {
					parse("xlam", "bench", int64(i), r, how)
				}
			}
			if cpu := cputime.Process() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()*1e3/(float64(n)*float64(b.N)/1e6), "cpu-ms/MB")
			}
		})
	}
}
