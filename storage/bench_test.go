package storage

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/storage/fakehub"
)

// BenchmarkRead reads one 32 MiB JSON Lines dump through Open, as ingest
// does: from the local disk, from gofakes3 on loopback (streamed), from
// the loopback Hub (downloaded into a fresh cache, then read), from
// Azurite and fake-gcs-server on loopback (streamed), and gzip-
// and zstd-compressed from the local disk. MB/s are of the decoded rows.
func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	for buf.Len() < 32<<20 {
		buf.WriteString(`{"id":12345,"query":"What is the weather in Oslo?","answers":"[]","tools":"[]"}` + "\n")
	}
	dump := buf.Bytes()
	dir := b.TempDir()
	for name, data := range map[string][]byte{"x.jsonl": dump, "x.jsonl.gz": gz(b, dump), "x.jsonl.zst": zst(b, dump)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	skip := false // SkipSum before reading
	read := func(b *testing.B, o *Opener, path string, fresh func()) {
		b.SetBytes(int64(len(dump)))
		for b.Loop() {
			if fresh != nil {
				fresh()
			}
			r, err := o.Open(context.Background(), path)
			if err != nil {
				b.Fatal(err)
			}
			if skip {
				r.SkipSum()
			}
			n, err := io.Copy(io.Discard, r)
			if err != nil || n != int64(len(dump)) {
				b.Fatal(n, err)
			}
			r.Close()
		}
	}
	for _, name := range []string{"x.jsonl", "x.jsonl.gz", "x.jsonl.zst"} {
		b.Run("local/"+name, func(b *testing.B) { read(b, New(Options{}), filepath.Join(dir, name), nil) })
	}
	// The dump's hash known (ingest hashed it first): read, not hashed.
	b.Run("local/x.jsonl/skipsum", func(b *testing.B) {
		skip = true
		defer func() { skip = false }()
		read(b, New(Options{}), filepath.Join(dir, "x.jsonl"), nil)
	})
	b.Run("s3", func(b *testing.B) {
		_, o, put := s3Server(b)
		put("x.jsonl", dump)
		read(b, o, "s3://data/x.jsonl", nil)
	})
	// Azurite and fake-gcs-server, when installed (see package cloudtest).
	b.Run("azblob", func(b *testing.B) {
		c := azureCloud(b)
		c.put("x.jsonl", dump)
		read(b, c.opener(nil), c.url("x.jsonl"), nil)
	})
	b.Run("gs", func(b *testing.B) {
		c := gcsCloud(b)
		c.put("x.jsonl", dump)
		read(b, c.opener(nil), c.url("x.jsonl"), nil)
	})
	b.Run("hub", func(b *testing.B) {
		hub := fakehub.New()
		defer hub.Close()
		hub.Commit("o/n", "main", map[string][]byte{"x.jsonl": dump})
		o := New(Options{Getenv: func(k string) string {
			if k == "HF_ENDPOINT" {
				return hub.URL
			}
			return ""
		}})
		read(b, o, "hf://datasets/o/n/x.jsonl", func() {
			r, err := os.OpenRoot(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			o.SetCache(r)
		})
	})
}
