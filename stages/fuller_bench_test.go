package stages

import (
	"context"
	"fmt"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

// fullerBenchRecords are the demo rows of the three raw formats (English
// and Chinese) as ingest makes them, and the library of their tools.
func fullerBenchRecords(b testing.TB) ([]*record.Record, []record.Tool) {
	recs := sharedRecords(b, 500,
		dump{"derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
		dump{"derived/glaive_v2_format_glaive_toolcall_zh_demo.json", "glaive"},
		dump{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		dump{"derived/toolace_format_glaive_toolcall_zh_demo.json", "toolace"},
		dump{"derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"},
		dump{"derived/xlam_format_glaive_toolcall_zh_demo.json", "xlam"})
	var lib []record.Tool
	for _, r := range recs {
		lib = append(lib, r.Tools...)
	}
	return recs, lib
}

// BenchmarkFullerStages runs each deterministic stage of the fuller chain
// (meta_tool → decision_tokens → negatives → export, default settings, the
// offline embedder) over the demo rows, each stage on the previous stage's
// output as in a run; an op is one pass of one stage over all rows. The
// export's pass also encodes each sample as its jsonl shard writes it. cpu-ns/record is
// the process's user+sys time per record.
func BenchmarkFullerStages(b *testing.B) {
	recs, lib := fullerBenchRecords(b)
	ctx := context.Background()
	mt := mtBuild(b, MetaToolConfig{}, mtEnv(lib, noiseOfflineEmbedder(b)))
	dt := buildDecisionTokens(b, DecisionTokensConfig{})
	neg := buildNegatives(b, NegativesConfig{Target: NegativeTargetToken}, nil)
	ex := &exportLines{e: mustBuildExport(b, ExportConfig{})}
	run := func(b *testing.B, st Stage, in []*record.Record) []*record.Record {
		var out []*record.Record
		for _, r := range in {
			o, err := st.Process(ctx, r)
			if err != nil {
				continue // rejects (meta_tool_few_distractors …) are no part of the next stage's input
			}
			out = append(out, o...)
		}
		return out
	}
	afterMT := run(b, mt, recs) // also embeds the library
	afterDT := run(b, dt, afterMT)
	afterNeg := run(b, neg, afterDT)
	for _, c := range []struct {
		name string
		st   Stage
		in   []*record.Record
	}{
		{"meta_tool", mt, recs},
		{"decision_tokens", dt, afterMT},
		{"negatives", neg, afterDT},
		{"export", ex, afterNeg},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			before := cputime.Process()
			for b.Loop() {
				run(b, c.st, c.in)
			}
			cpu := cputime.Process() - before
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.in)), "ns/record")
			// The process's CPU time (GC included), the fair figure on a
			// shared machine.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*len(c.in)), "cpu-ns/record")
		})
	}
}

// exportLines is the export's work on a record in a jsonl run: Process,
// then the sample's line as WriteShard encodes it.
type exportLines struct {
	e    *exporter
	line []byte
}

func (x *exportLines) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	out, err := x.e.Process(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, o := range out {
		x.line = appendLine(x.line[:0], o.Rendered.(*sample))
	}
	return out, nil
}

func mustBuildExport(b testing.TB, cfg ExportConfig) *exporter {
	cfg.defaults()
	st, err := cfg.build(fxEnv("export", nil))
	if err != nil {
		b.Fatal(err)
	}
	return st.(*exporter)
}

// BenchmarkExportLines is the export's work per record of the short chain
// (records as ingest makes them, whose tool lists repeat): Process, then
// the jsonl line. An op is one pass over the demo rows.
func BenchmarkExportLines(b *testing.B) {
	recs, _ := fullerBenchRecords(b)
	ex := &exportLines{e: mustBuildExport(b, ExportConfig{})}
	ctx := context.Background()
	loopCPU(b, len(recs), func(int) {
		for _, r := range recs {
			ex.Process(ctx, r)
		}
	})
}

// BenchmarkCheckChanged is the runner's check of each fuller-chain stage's
// outputs against its checked input (checkOutputs), over the demo rows; an
// op is one pass of one stage's outputs.
func BenchmarkCheckChanged(b *testing.B) {
	recs, lib := fullerBenchRecords(b)
	ctx := context.Background()
	stages := []struct {
		name string
		st   Stage
	}{
		{"meta_tool", mtBuild(b, MetaToolConfig{}, mtEnv(lib, noiseOfflineEmbedder(b)))},
		{"decision_tokens", buildDecisionTokens(b, DecisionTokensConfig{})},
		{"negatives", buildNegatives(b, NegativesConfig{Target: NegativeTargetToken}, nil)},
	}
	in := recs
	for _, s := range stages {
		type pair struct {
			in   *record.Record
			outs []*record.Record
		}
		var pairs []pair
		var next []*record.Record
		for _, r := range in {
			outs, err := s.st.Process(ctx, r)
			if err != nil {
				continue
			}
			pairs = append(pairs, pair{r, outs})
			next = append(next, outs...)
		}
		in = next
		b.Run(s.name, func(b *testing.B) {
			loopCPU(b, len(pairs), func(int) {
				for _, p := range pairs {
					if unfit := checkOutputs(false, true, p.in, p.outs); unfit != nil {
						b.Fatal(fmt.Sprint(unfit))
					}
				}
			})
		})
	}
}

// BenchmarkFullerChain is the per-record work of the fuller chain after
// ingest, without its Parquet writes: over records read back from an
// ingest shard (as the chain's first stage reads them), meta_tool,
// decision_tokens and negatives each with the runner's check of their
// outputs (checkOutputs), then the export's Process, its jsonl lines
// (writeLines, hashed as the file hashes them) and the report's partial
// of the records written. An op is one pass over the rows; xlam is the
// xlam demo rows alone (the harness's xlam dump repeats them), all the
// three formats' demo rows.
func BenchmarkFullerChain(b *testing.B) {
	xlam := []dump{
		{"derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"},
		{"derived/xlam_format_glaive_toolcall_zh_demo.json", "xlam"},
	}
	for _, c := range []struct {
		name  string
		dumps []dump
	}{
		{"xlam", xlam},
		{"all", append([]dump{
			{"derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
			{"derived/glaive_v2_format_glaive_toolcall_zh_demo.json", "glaive"},
			{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
			{"derived/toolace_format_glaive_toolcall_zh_demo.json", "toolace"}}, xlam...)},
	} {
		b.Run(c.name, func(b *testing.B) {
			recs := sharedRecords(b, 200, c.dumps...)
			var lib []record.Tool
			for _, r := range recs {
				lib = append(lib, r.Tools...)
			}
			copies := shardCopies(b, recs, 4)
			ctx := context.Background()
			rules := []Stage{
				mtBuild(b, MetaToolConfig{}, mtEnv(lib, noiseOfflineEmbedder(b))),
				buildDecisionTokens(b, DecisionTokensConfig{}),
				buildNegatives(b, NegativesConfig{Target: NegativeTargetToken}, nil),
			}
			ex := mustBuildExport(b, ExportConfig{})
			var memo verify.TokenMemo
			chain := func(in []*record.Record) int64 {
				for _, st := range rules {
					var next []*record.Record
					for _, r := range in {
						outs, err := st.Process(ctx, r)
						if err != nil {
							continue
						}
						if unfit := checkOutputs(false, true, r, outs); unfit != nil {
							b.Fatal(fmt.Sprint(unfit))
						}
						next = append(next, outs...)
					}
					in = next
				}
				out, n := exportHashed(b, ex, in)
				// The token sample's share of a 100 MB xlam dump's rows.
				p := report.NewPartial(166960, &memo)
				for _, r := range out {
					p.AddWritten(r)
				}
				return n
			}
			b.SetBytes(chain(copies[0]))
			loopCPU(b, len(recs), func(i int) { chain(copies[i%len(copies)]) })
		})
	}
}

// BenchmarkShortChain is the per-record work of the bench's short chain
// after ingest (decision_tokens with the runner's check of its outputs,
// then the export's Process, its jsonl lines hashed as the file hashes
// them and the report's partial of the records written) over the glaive
// and ToolACE demo rows repeated to a shard of 5,000 records (each
// repeat under its own ID), read from
// a shard as the chain reads them; an op is one pass over a copy.
func BenchmarkShortChain(b *testing.B) {
	for _, c := range []struct {
		name string
		d    []dump
	}{
		{"glaive+toolace", []dump{
			{"derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
			{"derived/glaive_v2_format_glaive_toolcall_zh_demo.json", "glaive"},
			{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
			{"derived/toolace_format_glaive_toolcall_zh_demo.json", "toolace"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rows := sharedRecords(b, 500, c.d...)
			var recs []*record.Record
			for k := 0; len(recs) < 5000; k++ {
				for _, r := range rows {
					r = r.Clone()
					r.ID = fmt.Sprintf("%s#%d", r.ID, k)
					recs = append(recs, r)
				}
			}
			copies := shardCopies(b, recs, 4)
			ctx := context.Background()
			dt := buildDecisionTokens(b, DecisionTokensConfig{})
			ex := mustBuildExport(b, ExportConfig{})
			var memo verify.TokenMemo
			chain := func(in []*record.Record) int64 {
				next := make([]*record.Record, 0, len(in))
				for _, r := range in {
					outs, err := dt.Process(ctx, r)
					if err != nil {
						continue
					}
					if unfit := checkOutputs(false, true, r, outs); unfit != nil {
						b.Fatal(fmt.Sprint(unfit))
					}
					next = append(next, outs...)
				}
				out, n := exportHashed(b, ex, next)
				p := report.NewPartial(40847, &memo) // the sample's share of the 100 MB glaive dump's rows
				for _, r := range out {
					p.AddWritten(r)
				}
				return n
			}
			b.SetBytes(chain(copies[0]))
			loopCPU(b, len(recs), func(i int) { chain(copies[i%len(copies)]) })
		})
	}
}

// loopCPU calls op(i), i counting the calls, until b is done, then
// reports the process's CPU time (GC included, the fair figure on a
// shared machine) per record, an op being over records records.
func loopCPU(b *testing.B, records int, op func(i int)) {
	b.ReportAllocs()
	before := cputime.Process()
	for i := 0; b.Loop(); i++ {
		op(i)
	}
	cpu := cputime.Process() - before
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*records), "cpu-ns/record")
}

// shardCopies writes recs to a shard and reads it back n times: n copies
// of the records as a stage reads them from its input shard (views of
// their decoded columns), for benchmarks that go round the copies.
func shardCopies(tb testing.TB, recs []*record.Record, n int) [][]*record.Record {
	tb.Helper()
	dir, err := atomicfs.OpenRoot(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	defer dir.Close()
	if _, err := shard.Write(dir, "part.parquet", recs, shard.Options{}); err != nil {
		tb.Fatal(err)
	}
	copies := make([][]*record.Record, n)
	for i := range copies {
		if copies[i], err = shard.Read(dir.Path("part.parquet")); err != nil {
			tb.Fatal(err)
		}
	}
	return copies
}
