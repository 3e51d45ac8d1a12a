package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
)

// s3Server starts gofakes3 on loopback with a bucket "data" and returns an
// Opener configured for it through storage.s3.endpoint, and a function that
// stores an object (straight into the server's backend: minio-go uploads
// large objects with a chunked encoding gofakes3 v1.2.0 stores as is).
func s3Server(t testing.TB) (*httptest.Server, *Opener, func(key string, b []byte)) {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("data"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	// Credentials from the environment, as in production.
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	o := New(Options{S3: S3Config{Endpoint: srv.URL, Region: "us-east-1"}, Getenv: func(string) string { return "" }})
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := be.PutObject("data", key, map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}, bytes.NewReader(b), int64(len(b)), nil); err != nil {
			t.Fatal(err)
		}
	}
	return srv, o, put
}

func zst(t testing.TB, b []byte) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.EncodeAll(b, nil)
}

func TestS3Sources(t *testing.T) {
	_, o, put := s3Server(t)
	jsonl := []byte(`{"id":1,"query":"q","answers":"[]","tools":"[]"}` + "\n" + `{"id":2,"query":"r","answers":"[]","tools":"[]"}` + "\n")
	put("dumps/x.jsonl", jsonl)
	put("dumps/x.jsonl.gz", gz(t, jsonl))
	put("dumps/x.jsonl.zst", zst(t, jsonl))
	put("dumps/x.parquet", writeParquet(t, []xlamRow{{1, "q", "[]", "[]"}, {2, "r", "[]", "[]"}}))
	put("dumps/x.parquet.gz", gz(t, writeParquet(t, []xlamRow{{1, "q", "[]", "[]"}, {2, "r", "[]", "[]"}})))
	for _, withCache := range []bool{false, true} {
		if withCache {
			o.SetCache(cacheRoot(t))
		}
		for _, k := range []string{"x.jsonl", "x.jsonl.gz", "x.jsonl.zst", "x.parquet", "x.parquet.gz"} {
			got, r := readAll(t, o, "s3://data/dumps/"+k)
			if got != string(jsonl) {
				t.Errorf("%s (cache %v): read %q, want %q", k, withCache, got, jsonl)
			}
			if !strings.HasPrefix(r.Pin, "s3://data/dumps/"+k+"#etag=") || r.Name != k {
				t.Errorf("%s: pin %q name %q", k, r.Pin, r.Name)
			}
		}
	}
}

func TestS3Errors(t *testing.T) {
	_, o, _ := s3Server(t)
	ctx := context.Background()
	var nf *NotFoundError
	if _, err := o.Stat(ctx, "s3://data/missing.jsonl"); !errors.As(err, &nf) || !strings.Contains(err.Error(), "no such object") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := o.Stat(ctx, "s3://nobucket/x.jsonl"); !errors.As(err, &nf) {
		t.Errorf("missing bucket: %v", err)
	}
	if _, err := o.Stat(ctx, "gcs://b/x.jsonl"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("gcs://: %v", err)
	}
	if p := (S3Config{Endpoint: "http://user:pw@127.0.0.1:9000"}).Validate(); len(p) != 1 || !strings.Contains(p[0], "credentials come from the environment only") {
		t.Errorf("endpoint with credentials: %q", p)
	}
	if p := (S3Config{Endpoint: "127.0.0.1:9000"}).Validate(); len(p) != 1 {
		t.Errorf("endpoint without scheme: %q", p)
	}
}

// An object replaced after it was checked is not read half old, half new:
// the read is bound to the ETag the run pinned.
func TestS3ReadIsPinnedToETag(t *testing.T) {
	_, o, put := s3Server(t)
	put("x.jsonl", []byte("{\"v\":1}\n"))
	ctx := context.Background()
	info, err := o.Stat(ctx, "s3://data/x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	put("x.jsonl", []byte("{\"v\":2}\n"))
	loc, _ := Parse("s3://data/x.jsonl")
	r, err := o.openBlob(ctx, loc, info)
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "changed while the run read it") {
		t.Fatalf("read a replaced object under the old pin: %v", err)
	}
}

// The endpoint may come from AWS_ENDPOINT_URL as with the AWS tools.
func TestS3EndpointFromEnvironment(t *testing.T) {
	srv, _, put := s3Server(t)
	put("x.jsonl", []byte("{}\n"))
	env := map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1"}
	o2 := New(Options{Getenv: func(k string) string { return env[k] }})
	if got, _ := readAll(t, o2, "s3://data/x.jsonl"); got != "{}\n" {
		t.Errorf("read %q", got)
	}
}

// Spooled Parquet files are removed when the reader is closed.
func TestS3ParquetSpoolRemoved(t *testing.T) {
	_, o, put := s3Server(t)
	put("x.parquet", writeParquet(t, []xlamRow{{ID: 1}}))
	cache := cacheRoot(t)
	o.SetCache(cache)
	readAll(t, o, "s3://data/x.parquet")
	ents, _ := os.ReadDir(filepath.Join(cache.Name(), "spool"))
	if len(ents) != 0 {
		t.Errorf("spool holds %d files after Close", len(ents))
	}
}

func TestLocalCompressedAndMislabelled(t *testing.T) {
	dir := t.TempDir()
	jsonl := []byte("{\"a\":1}\n")
	files := map[string][]byte{"a.jsonl.gz": gz(t, jsonl), "a.jsonl.zst": zst(t, jsonl), "plain.jsonl": jsonl,
		"a.parquet": writeParquet(t, []struct {
			A int64 `parquet:"a"`
		}{{1}}),
		"fake.gz": jsonl, "fake.parquet": jsonl}
	for n, b := range files {
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	o := New(Options{})
	for _, n := range []string{"a.jsonl.gz", "a.jsonl.zst", "plain.jsonl", "a.parquet"} {
		got, r := readAll(t, o, filepath.Join(dir, n))
		if got != string(jsonl) {
			t.Errorf("%s: read %q", n, got)
		}
		if r.Pin != "" || r.Size != int64(len(files[n])) {
			t.Errorf("%s: pin %q size %d", n, r.Pin, r.Size)
		}
		sum, _ := r.Sum()
		if want := sha256hex(files[n]); sum != want {
			t.Errorf("%s: sum %s, want the stored bytes' %s", n, sum, want)
		}
	}
	for _, n := range []string{"fake.gz", "fake.parquet"} {
		if _, err := o.Open(context.Background(), filepath.Join(dir, n)); err == nil || !strings.Contains(err.Error(), "the name says") {
			t.Errorf("%s: %v; want a mislabelled-content error", n, err)
		}
	}
	if _, err := o.Open(context.Background(), filepath.Join(dir, "none.jsonl")); err == nil {
		t.Error("missing file opened")
	}
	if err := CheckName("x.jsonl.gz", []byte("{\"a")); err == nil || !strings.Contains(err.Error(), "the name says .gz") {
		t.Errorf("CheckName of plain bytes named .gz: %v", err)
	}
	if err := CheckName("x.json", gz(t, jsonl)[:4]); err != nil {
		t.Errorf("CheckName of gzip bytes named .json: %v", err)
	}
}

// A compressed dump cut short or corrupt reads its decodable rows, then a
// DamagedError that says which codec and what is wrong.
func TestLocalCompressedDamaged(t *testing.T) {
	dir := t.TempDir()
	jsonl := []byte(strings.Repeat("{\"a\":\"0123456789\"}\n", 2000))
	z, g := zst(t, jsonl), gz(t, jsonl)
	corrupt := bytes.Clone(g)
	corrupt[len(corrupt)/2] ^= 0xff
	for name, tt := range map[string]struct {
		b    []byte
		want string
	}{
		"cut.jsonl.gz":     {g[:len(g)-10], "the gzip stream ends early (the file is cut short)"},
		"cut.jsonl.zst":    {z[:len(z)-10], "the zstd stream ends early (the file is cut short)"},
		"corrupt.jsonl.gz": {corrupt, "the gzip stream is corrupt"},
	} {
		os.WriteFile(filepath.Join(dir, name), tt.b, 0o644)
		r, err := New(Options{}).Open(context.Background(), filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(r)
		r.Close()
		var de *DamagedError
		if !errors.As(err, &de) || !de.Damaged() || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a DamagedError saying %q", name, err, tt.want)
		}
	}
}

// openGzipDump opens a gzipped JSONL dump of 1.6 MB written for the test;
// it returns the reader, the plain and the stored bytes.
func openGzipDump(t *testing.T) (r *Reader, plain, stored []byte) {
	t.Helper()
	plain = bytes.Repeat([]byte("{\"a\":\"bcdefgh\"}\n"), 100000)
	stored = gz(t, plain)
	p := filepath.Join(t.TempDir(), "x.jsonl.gz")
	if err := os.WriteFile(p, stored, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{}).Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, plain, stored
}

// Sum hashes the stored bytes even when only the start was read.
func TestSumAfterPartialRead(t *testing.T) {
	r, _, stored := openGzipDump(t)
	var progress int64
	r.Progress(func(n int64) { progress += n })
	io.ReadFull(r, make([]byte, 100))
	sum, err := r.Sum()
	if err != nil || sum != sha256hex(stored) {
		t.Errorf("sum %s, %v; want %s", sum, err, sha256hex(stored))
	}
	if progress != int64(len(stored)) {
		t.Errorf("progress counted %d stored bytes, want %d", progress, len(stored))
	}
}

// After SkipSum the dump reads the same and progress still counts the
// stored bytes; Sum says it has nothing to give rather than a wrong hash.
func TestSkipSum(t *testing.T) {
	r, plain, stored := openGzipDump(t)
	r.SkipSum()
	var progress int64
	r.Progress(func(n int64) { progress += n })
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("read %d bytes, %v; want the %d plain bytes", len(got), err, len(plain))
	}
	if progress != int64(len(stored)) {
		t.Errorf("progress counted %d stored bytes, want %d", progress, len(stored))
	}
	if sum, err := r.Sum(); err == nil {
		t.Errorf("Sum after SkipSum = %s, want an error", sum)
	}
}

// A GET the store refuses or fails is reported as such, not as content
// that does not match its name (.gz, .zst, .parquet).
func TestS3GetFailureBeforeContent(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("data"); err != nil {
		t.Fatal(err)
	}
	s3 := gofakes3.New(be).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/data/dumps/") {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		s3.ServeHTTP(w, r)
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	o := New(Options{S3: S3Config{Endpoint: srv.URL, Region: "us-east-1"}, Getenv: func(string) string { return "" }})
	for _, k := range []string{"x.json.gz", "x.jsonl.zst", "x.parquet"} {
		if _, err := be.PutObject("data", "dumps/"+k, map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}, strings.NewReader("whatever"), 8, nil); err != nil {
			t.Fatal(err)
		}
		_, err := o.Open(context.Background(), "s3://data/dumps/"+k)
		if !errors.As(err, new(*AuthError)) || strings.Contains(err.Error(), "the name says") {
			t.Errorf("%s: %v; want the store's refusal", k, err)
		}
	}
}

// The store's passing failures (429, 5xx, no answer) are UnavailableErrors;
// refusals and missing objects are not.
func TestS3ErrorKinds(t *testing.T) {
	loc := Location{Kind: S3, Bucket: "b", Key: "k"}
	for _, c := range []struct {
		err         error
		unavailable bool
	}{
		{minio.ErrorResponse{StatusCode: 500, Code: "InternalError"}, true},
		{minio.ErrorResponse{StatusCode: 503, Code: "SlowDown"}, true},
		{minio.ErrorResponse{StatusCode: 429}, true},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"}, false},
		{minio.ErrorResponse{StatusCode: 404, Code: "NoSuchKey"}, false},
		{minio.ErrorResponse{StatusCode: 400, Code: "InvalidArgument"}, false},
	} {
		if got := IsUnavailable(s3Error(loc, c.err)); got != c.unavailable {
			t.Errorf("s3Error(%v): unavailable %v, want %v", c.err, got, c.unavailable)
		}
	}
}

// A stream that stays open but silent is taken for cut after blobStall and
// resumed from where it stopped, on S3 as on GCS and Azure (TestCloud).
func TestS3ReadResumesAfterStall(t *testing.T) {
	defer func(d time.Duration) { blobStall = d }(blobStall)
	blobStall = 200 * time.Millisecond
	_, o, put := s3Server(t)
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		fmt.Fprintf(&buf, "{\"i\":%d}\n", i)
	}
	put("stall.jsonl", buf.Bytes())
	stall := &cutter{base: http.DefaultTransport, limit: 100 << 10, stall: true}
	o = New(Options{S3: o.o.S3, Transport: stall, Getenv: func(string) string { return "" }})
	got, _ := readAll(t, o, "s3://data/stall.jsonl")
	if got != buf.String() {
		t.Fatalf("read %d bytes, want the object's %d", len(got), buf.Len())
	}
	if stall.cut.Load() != 1 || stall.ranged.Load() != 1 {
		t.Errorf("%d reads stalled, %d range requests; want 1 and 1", stall.cut.Load(), stall.ranged.Load())
	}
}
