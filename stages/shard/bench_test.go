package shard

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/stages/record"
)

// forEachSet runs run on each record set: synthetic dialogues, when the
// shared data is present the LLaMA-Factory demos (real en and zh text),
// and when AUGMENT_BENCH_SHARDS is a glob the records of the shards it
// matches (e.g. a harness run's out/*/*.parquet), one shard at a time.
// MB/s figures are per byte of the records' JSON, the unit of the
// pipeline's throughput target.
func forEachSet(b *testing.B, run func(b *testing.B, recs []*record.Record)) {
	sets := map[string]func(b *testing.B) []*record.Record{
		"synthetic":    func(*testing.B) []*record.Record { return syntheticRecords(5000, 42) },
		"llamafactory": func(b *testing.B) []*record.Record { return llamaFactoryRecords(b) },
	}
	names := []string{"synthetic", "llamafactory"}
	if glob := os.Getenv("AUGMENT_BENCH_SHARDS"); glob != "" {
		paths, err := filepath.Glob(glob)
		if err != nil || len(paths) == 0 {
			b.Fatalf("AUGMENT_BENCH_SHARDS=%s matches no shard (%v)", glob, err)
		}
		for _, p := range paths {
			name := filepath.Base(filepath.Dir(p)) + "/" + filepath.Base(p)
			names = append(names, name)
			sets[name] = func(b *testing.B) []*record.Record {
				recs, err := Read(p)
				if err != nil {
					b.Fatal(err)
				}
				return recs
			}
		}
	}
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			recs := sets[name](b)
			b.SetBytes(jsonSize(b, recs))
			b.ReportAllocs()
			cpu := cputime.Process()
			run(b, recs)
			// CPU time of the whole process (GC included) per op: on a
			// shared machine a steadier figure than the wall time.
			b.ReportMetric(float64((cputime.Process()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkWrite measures Write end to end: checks, Parquet encoding with
// zstd, hashing, fsync and rename.
func BenchmarkWrite(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		path := filepath.Join(b.TempDir(), "s.parquet")
		for b.Loop() {
			if _, err := writeAt(b, path, recs, Options{Version: "bench"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWriteMirror is BenchmarkWrite with the JSONL mirror on.
func BenchmarkWriteMirror(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		path := filepath.Join(b.TempDir(), "s.parquet")
		for b.Loop() {
			if _, err := writeAt(b, path, recs, Options{Version: "bench", JSONL: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncode is the Parquet encoding alone, into io.Discard.
func BenchmarkEncode(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		for b.Loop() {
			if err := writeParquet(io.Discard, recs, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncodeGeneric is BenchmarkEncode with the writer the column
// encoder replaced (parquet-go's GenericWriter, the oracle of
// TestEncodeSameBytes): the before/after of encode.go in one binary.
func BenchmarkEncodeGeneric(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		for b.Loop() {
			if err := writeParquetGeneric(io.Discard, recs, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRead measures Read of a whole shard (guards included).
func BenchmarkRead(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		path := filepath.Join(b.TempDir(), "s.parquet")
		if _, err := writeAt(b, path, recs, Options{}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := Read(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWriteJSONL measures WriteJSONL of records (the export path's
// encoder).
func BenchmarkWriteJSONL(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		path := filepath.Join(b.TempDir(), "s.jsonl")
		for b.Loop() {
			if _, err := writeJSONLAt(b, path, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheck measures the validation Write does before encoding.
func BenchmarkCheck(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		for b.Loop() {
			for _, r := range recs {
				if _, err := Check(r); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkCheckChanged checks records changed the way a rule stage
// changes them (decision_tokens: the list of turns copied, each assistant
// text replaced, a tag and a step added, the rest shared), by Check and by
// CheckChanged against the record they came from.
func BenchmarkCheckChanged(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		outs := make([]*record.Record, len(recs))
		for i, r := range recs {
			c := *r
			c.Messages = slices.Clone(r.Messages)
			for k := range c.Messages {
				if c.Messages[k].Role == record.RoleAssistant {
					c.Messages[k].Content = "<answer>" + c.Messages[k].Content
				}
			}
			c.Tags = slices.Clone(r.Tags)
			c.SetTag("decision_tokens", "on")
			c.Lineage = slices.Clip(r.Lineage)
			c.AddStep("decision_tokens", "rule", "")
			outs[i] = &c
		}
		for _, mode := range []string{"check", "changed"} {
			b.Run(mode, func(b *testing.B) {
				for b.Loop() {
					for i, r := range outs {
						var err error
						if mode == "check" {
							_, err = Check(r)
						} else {
							_, err = CheckChanged(r, recs[i])
						}
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	})
}

// BenchmarkCodecs measures each compression codec: encoding (with the
// file's size per input byte as "size/json") and reading the file back.
func BenchmarkCodecs(b *testing.B) {
	for _, c := range Compressions {
		b.Run(c, func(b *testing.B) {
			o := Options{Compression: c}
			forEachSet(b, func(b *testing.B, recs []*record.Record) {
				n := jsonSize(b, recs)
				var buf bytes.Buffer
				if err := writeParquet(&buf, recs, o); err != nil {
					b.Fatal(err)
				}
				b.Run("encode", func(b *testing.B) {
					b.SetBytes(n)
					for b.Loop() {
						if err := writeParquet(io.Discard, recs, o); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(buf.Len())/float64(n), "size/json")
				})
				b.Run("read", func(b *testing.B) {
					b.SetBytes(n)
					data := buf.Bytes()
					for b.Loop() {
						err := scanReader(bytes.NewReader(data), int64(len(data)), "bench", nil, func(*record.Record) error { return nil })
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		})
	}
}

// BenchmarkBlockCodecs compares Snappy (the shard default, klauspost's
// fast encoder) with LZ4 blocks (Parquet's LZ4_RAW, which shards do not
// offer) on a shard's uncompressed bytes cut in 1 MiB blocks, the page
// size: the question is whether LZ4_RAW would be the cheaper default.
func BenchmarkBlockCodecs(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		var raw bytes.Buffer
		if err := writeParquet(&raw, recs, Options{Compression: "none"}); err != nil {
			b.Fatal(err)
		}
		var blocks [][]byte
		for data := raw.Bytes(); len(data) > 0; {
			n := min(len(data), pageBufferSize)
			blocks, data = append(blocks, data[:n]), data[n:]
		}
		var lz4c lz4.Compressor
		codecs := []struct {
			name   string
			encode func(dst, src []byte) []byte
			decode func(dst, src []byte) error
		}{
			{"snappy", func(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) },
				func(dst, src []byte) error { _, err := s2.Decode(dst, src); return err }},
			{"lz4", func(dst, src []byte) []byte {
				n, err := lz4c.CompressBlock(src, dst[:cap(dst)])
				if err != nil {
					b.Fatal(err)
				}
				return dst[:n]
			}, func(dst, src []byte) error { _, err := lz4.UncompressBlock(src, dst); return err }},
		}
		for _, c := range codecs {
			dst := make([]byte, 0, max(s2.MaxEncodedLen(pageBufferSize), lz4.CompressBlockBound(pageBufferSize)))
			var packed [][]byte
			size := 0
			for _, blk := range blocks {
				p := c.encode(dst, blk)
				packed, size = append(packed, bytes.Clone(p)), size+len(p)
			}
			b.Run(c.name+"/encode", func(b *testing.B) {
				b.SetBytes(int64(raw.Len()))
				for b.Loop() {
					for _, blk := range blocks {
						c.encode(dst, blk)
					}
				}
				b.ReportMetric(float64(raw.Len())/float64(size), "ratio")
			})
			b.Run(c.name+"/decode", func(b *testing.B) {
				b.SetBytes(int64(raw.Len()))
				out := make([]byte, pageBufferSize)
				for b.Loop() {
					for _, p := range packed {
						if err := c.decode(out, p); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	})
}
