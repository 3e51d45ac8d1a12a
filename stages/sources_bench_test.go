package stages

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/storage/fakehub"
)

// benchDump is an xlam dump of n distinct rows (about 420 bytes each).
func benchDump(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"id":%d,"query":"What is the weather in city number %d, and convert %d USD to EUR?",`+
			`"answers":"[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"c%d\"}}, {\"name\": \"convert\", \"arguments\": {\"amount\": %d, \"from\": \"USD\", \"to\": \"EUR\"}}]",`+
			`"tools":"[{\"name\": \"get_weather\", \"description\": \"Weather of a city\", \"parameters\": {\"city\": {\"type\": \"str\", \"description\": \"the city\"}}}, `+
			`{\"name\": \"convert\", \"description\": \"Convert money\", \"parameters\": {\"amount\": {\"type\": \"int\"}, \"from\": {\"type\": \"str\"}, \"to\": {\"type\": \"str\"}}}]"}`+"\n",
			i, i, i%1000, i, i%1000)
	}
	return b.Bytes()
}

// benchIngest runs ingest alone on the source at path, b.N times into
// fresh output directories, and reports the dump's bytes per second.
func benchIngest(b *testing.B, path string, size int, extra string) {
	dir := b.TempDir()
	y := fmt.Sprintf("seed: 1\n%soutput: {dir: out, shard_size: 2000}\nsources:\n  - {name: xlam, path: %q, format: xlam}\n", extra, path)
	pf := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(pf, []byte(y), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p, err := Load(pf, fmt.Sprintf("output.dir=out%d", i))
		if err != nil {
			b.Fatal(err)
		}
		r, err := NewRunner(p, Options{Version: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := r.Run(context.Background())
		r.Close()
		if err != nil {
			b.Fatal(err)
		}
		if c := rep.Stages[0].Counts; c.Out != 30000 || len(c.Rejected) > 0 {
			b.Fatalf("ingest counts %+v, want 30000 records", c)
		}
		os.RemoveAll(filepath.Join(dir, fmt.Sprintf("out%d", i)))
	}
}

// BenchmarkIngestSource compares ingest of the same dump from the local
// disk, from an S3 server on loopback (gofakes3), and from a loopback Hub
// (downloaded into the run's cache, then read).
func BenchmarkIngestSource(b *testing.B) {
	dump := benchDump(30000)
	dir := b.TempDir()
	local := filepath.Join(dir, "xlam.jsonl")
	if err := os.WriteFile(local, dump, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("local", func(b *testing.B) { benchIngest(b, local, len(dump), "") })

	be := s3mem.New()
	be.CreateBucket("dumps")
	srv := httptest.NewServer(gofakes3.New(be).Server())
	defer srv.Close()
	b.Setenv("AWS_ACCESS_KEY_ID", "bench")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "bench")
	// Stored straight into the backend: minio-go uploads large objects
	// with a chunked encoding gofakes3 v1.2.0 would store as is.
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	if _, err := be.PutObject("dumps", "xlam.jsonl", meta, bytes.NewReader(dump), int64(len(dump)), nil); err != nil {
		b.Fatal(err)
	}
	b.Run("s3", func(b *testing.B) {
		benchIngest(b, "s3://dumps/xlam.jsonl", len(dump), fmt.Sprintf("storage: {s3: {endpoint: %q, region: us-east-1}}\n", srv.URL))
	})

	hub := fakehub.New()
	defer hub.Close()
	hub.Commit("org/bench", "main", map[string][]byte{"xlam.jsonl": dump})
	b.Setenv("HF_ENDPOINT", hub.URL)
	b.Run("hub", func(b *testing.B) { benchIngest(b, "hf://datasets/org/bench/xlam.jsonl", len(dump), "") })
}

var benchRuns atomic.Int64

// BenchmarkChainOutput runs ingest, meta_tool, verify and an export (the
// offline teacher: deterministic) on 6000 rows with the output on the local
// disk and on an S3 server on loopback (gofakes3; the run works in a local
// copy and mirrors every committed file). MB/s are of the dump.
func BenchmarkChainOutput(b *testing.B) {
	dump := benchDump(6000)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xlam.jsonl"), dump, 0o644); err != nil {
		b.Fatal(err)
	}
	be := s3mem.New()
	be.CreateBucket("runs")
	srv := httptest.NewServer(gofakes3.New(be).Server())
	defer srv.Close()
	b.Setenv("AWS_ACCESS_KEY_ID", "bench")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "bench")
	y := fmt.Sprintf("seed: 1\nstorage: {s3: {endpoint: %q, region: us-east-1}}\noutput: {dir: out, shard_size: 1000}\n"+
		"sources:\n  - {name: xlam, path: xlam.jsonl, format: xlam}\n"+
		"stages:\n  - meta_tool: {open_world_ratio: 0.5, min_tools: 3}\n  - verify: {checks: [roles, calls_resolved, args_schema]}\n"+
		"  - export: {dataset: bench, allow_offline: true}\n", srv.URL)
	pf := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(pf, []byte(y), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, where := range []string{"local", "s3"} {
		b.Run(where, func(b *testing.B) {
			b.SetBytes(int64(len(dump)))
			for b.Loop() {
				i := benchRuns.Add(1) // every run starts afresh
				sets := []string{fmt.Sprintf("output.dir=%s/out%d", dir, i)}
				if where == "s3" {
					sets = []string{fmt.Sprintf("output.dir=s3://runs/r%d", i), fmt.Sprintf("output.work_dir=%s/work%d", dir, i)}
				}
				p, err := Load(pf, sets...)
				if err != nil {
					b.Fatal(err)
				}
				r, err := NewRunner(p, Options{Version: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				_, err = r.Run(context.Background())
				if cerr := r.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadBatches cuts a dump into batches of 2000 rows as ingest
// does (the Scanner and the copy of the rows into the batches), with a
// consumer that releases each batch at once.
func BenchmarkReadBatches(b *testing.B) {
	dump := benchDump(30000)
	r := &Runner{p: &Pipeline{Output: Output{ShardSize: 2000}}}
	b.SetBytes(int64(len(dump)))
	b.ReportAllocs()
	for b.Loop() {
		batches := make(chan rawBatch)
		rows := 0
		chunks := &rowChunks{}
		done := make(chan struct{})
		go func() {
			for bt := range batches {
				rows += len(bt.rows)
				bt.release()
			}
			close(done)
		}()
		_, _, err := r.readBatches(context.Background(), formats.NewScanner(bytes.NewReader(dump)), Source{}, batches, chunks, nil)
		close(batches)
		<-done
		if err != nil || rows != 30000 {
			b.Fatalf("%d rows, %v", rows, err)
		}
	}
}
