package storage

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augmentdata/augment/atomicfs"
)

// recorder notes when each request to the store started and ended.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path, query string
	start, end          time.Time
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := r.base.RoundTrip(req)
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.URL.RawQuery, start, time.Now()})
	r.mu.Unlock()
	return resp, err
}

// bucketFiles reads every object under prefix of the S3 bucket "data".
func bucketFiles(t *testing.T, o *Opener, prefix string) map[string]string {
	return storeFiles(t, o, Location{Kind: S3, Bucket: "data", Key: prefix})
}

// storeFiles reads every object under the prefix at.Key of at's bucket,
// through the store's own client.
func storeFiles(t *testing.T, o *Opener, at Location) map[string]string {
	t.Helper()
	s, err := o.store(at.Kind)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := map[string]string{}
	for obj, err := range s.list(ctx, at.Bucket, at.Key, 0) {
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.open(ctx, Location{Kind: at.Kind, Bucket: at.Bucket, Key: obj.Key}, obj, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(obj.Key, at.Key)] = string(b)
	}
	return out
}

// localFiles reads every file of dir but the mirror's record (not part of
// the output).
func localFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if filepath.ToSlash(rel) == syncLogName {
			return nil
		}
		b, _ := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out
}

func mirrorOf(t *testing.T, o *Opener, dir, url string) (*Mirror, *atomicfs.Root) {
	t.Helper()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	local, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	loc, ok, err := OutputLocation(url)
	if err != nil || !ok {
		t.Fatal(url, ok, err)
	}
	m, err := o.NewMirror(loc, local)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m, root.Observe(m)
}

func TestMirrorUploadsInCommitOrder(t *testing.T) {
	_, o, _ := s3Server(t)
	rec := &recorder{base: o.o.Transport}
	o = New(Options{S3: o.o.S3, Transport: rec, Getenv: func(string) string { return "" }})
	dir := t.TempDir()
	m, root := mirrorOf(t, o, dir, "s3://data/runs/r1/")
	st := root.Sub("00-ingest")
	for i := range 12 {
		if _, err := st.WriteFile(fmt.Sprintf("part-%02d.parquet", i), bytes.Repeat([]byte{byte(i)}, 200<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.WriteFile("manifest.json", []byte(`{"shards":12}`)); err != nil {
		t.Fatal(err)
	}
	st.WriteFile("part-99.parquet", []byte("late"))
	st.WriteFile("gone.jsonl", []byte("x"))
	if err := st.Remove("gone.jsonl"); err != nil {
		t.Fatal(err)
	}
	root.Sub("06-export/data").WriteFile("a.jsonl", []byte("a"))
	if err := root.RemoveAll("06-export"); err != nil {
		t.Fatal(err)
	}
	root.WriteFile("config.yaml", []byte("seed: 1\n"))
	os.MkdirAll(filepath.Join(dir, "cache", "sources", "hub"), 0o755)
	os.WriteFile(filepath.Join(dir, "cache", "sources", "hub", "big"), []byte("download"), 0o644)
	os.WriteFile(filepath.Join(dir, "cache", "chat.db"), []byte("cache"), 0o644) // written outside the Root
	os.MkdirAll(filepath.Join(dir, ".augment"), 0o755)
	os.WriteFile(filepath.Join(dir, ".augment", "lock"), []byte("pid"), 0o644)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	got := bucketFiles(t, o, "runs/r1/")
	want := localFiles(t, dir)
	delete(want, ".augment/lock")
	delete(want, "cache/sources/hub/big")
	if len(got) != len(want) || len(want) != 16 {
		t.Errorf("bucket holds %v\nwant %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %d bytes in the bucket, %d local", name, len(got[name]), len(w))
		}
	}
	// The manifest went up after every part committed before it.
	var manifestStart time.Time
	for _, r := range rec.reqs {
		if r.method == "PUT" && strings.HasSuffix(r.path, "/00-ingest/manifest.json") {
			manifestStart = r.start
		}
	}
	for _, r := range rec.reqs {
		if r.method == "PUT" && strings.Contains(r.path, "/part-") && !strings.Contains(r.path, "part-99") && r.end.After(manifestStart) {
			t.Errorf("%s ended after the manifest's upload started", r.path)
		}
	}
}

// A run resumed on another machine starts from the bucket; files committed
// locally but never uploaded (a killed run) go up when the mirror starts.
func TestMirrorPullAndCatchUp(t *testing.T) {
	_, o, _ := s3Server(t)
	first := t.TempDir()
	m, root := mirrorOf(t, o, first, "s3://data/out")
	root.Sub("00-ingest").WriteFile("part-a.parquet", bytes.Repeat([]byte("a"), 20<<20)) // two parts
	root.Sub("00-ingest").WriteFile("manifest.json", []byte("{}"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Committed with no mirror running, as by a run killed before upload.
	os.WriteFile(filepath.Join(first, "00-ingest", "part-b.parquet"), []byte("b"), 0o644)

	second := t.TempDir()
	m2, _ := mirrorOf(t, o, second, "s3://data/out")
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := localFiles(t, second); len(got) != 2 || len(got["00-ingest/part-a.parquet"]) != 20<<20 {
		t.Errorf("pulled %d files", len(got))
	}
	m3, _ := mirrorOf(t, o, first, "s3://data/out") // the first machine again
	if err := m3.Close(); err != nil {
		t.Fatal(err)
	}
	if got := bucketFiles(t, o, "out/"); got["00-ingest/part-b.parquet"] != "b" || len(got) != 3 {
		t.Errorf("after catching up the bucket holds %v", slices.Sorted(maps.Keys(got)))
	}
}

// refuser answers every PUT with 403 AccessDenied while on.
type refuser struct {
	base http.RoundTripper
	on   atomic.Bool
}

func (r *refuser) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == "PUT" && r.on.Load() {
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>denied</Message></Error>`
		return &http.Response{StatusCode: 403, Status: "403 Forbidden", Header: http.Header{"Content-Type": {"application/xml"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
	}
	return r.base.RoundTrip(req)
}

// A failed upload fails Close, and what it left behind goes up with the
// next mirror of the same directory.
func TestMirrorFailureThenCatchUp(t *testing.T) {
	_, o, _ := s3Server(t)
	ref := &refuser{base: o.o.Transport}
	o = New(Options{S3: o.o.S3, Transport: ref, Getenv: func(string) string { return "" }})
	dir := t.TempDir()
	m, root := mirrorOf(t, o, dir, "s3://data/out")
	ref.on.Store(true)
	root.WriteFile("x.jsonl", []byte("x"))
	root.WriteFile("manifest.json", []byte("{}"))
	err := m.Close()
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") && !strings.Contains(err.Error(), "denied") {
		t.Fatalf("Close after refused uploads: %v", err)
	}
	if got := bucketFiles(t, o, "out/"); len(got) != 0 {
		t.Errorf("bucket holds %v after refused uploads", slices.Sorted(maps.Keys(got)))
	}
	ref.on.Store(false)
	m2, _ := mirrorOf(t, o, dir, "s3://data/out")
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := bucketFiles(t, o, "out/"); got["x.jsonl"] != "x" || got["manifest.json"] != "{}" {
		t.Errorf("after catching up the bucket holds %v", got)
	}
}

func TestLocalETag(t *testing.T) {
	data := bytes.Repeat([]byte("abc"), 7<<20) // 21 MiB
	one := md5.Sum(data)
	if got, _ := localETag(bytes.NewReader(data), 0, 0); got != hex.EncodeToString(one[:]) {
		t.Errorf("single part: %s", got)
	}
	p1, p2 := md5.Sum(data[:16<<20]), md5.Sum(data[16<<20:])
	all := md5.Sum(append(p1[:], p2[:]...))
	want := hex.EncodeToString(all[:]) + "-2"
	if got, _ := localETag(bytes.NewReader(data), 16<<20, 2); got != want {
		t.Errorf("two parts: %s, want %s", got, want)
	}
	if ps := partSizes(int64(len(data)), 2); !slices.Contains(ps, 16<<20) {
		t.Errorf("part sizes %v lack ours", ps)
	}
}

func TestOutputLocation(t *testing.T) {
	for in, want := range map[string]string{"s3://b-1": "s3://b-1", "s3://b-1/": "s3://b-1", "s3://b-1/runs/r1/": "s3://b-1/runs/r1", "out": "",
		"gs://b_1/runs/": "gs://b_1/runs", "azblob://c-1": "azblob://c-1", "azblob://c-1/r/": "azblob://c-1/r"} {
		loc, ok, err := OutputLocation(in)
		if err != nil || ok != (want != "") {
			t.Errorf("OutputLocation(%q) = %v, %v", in, ok, err)
			continue
		}
		if ok {
			got := loc.Kind.Scheme() + "://" + loc.Bucket
			if loc.Key != "" {
				got += "/" + loc.Key
			}
			if got != want {
				t.Errorf("OutputLocation(%q) = %s, want %s", in, got, want)
			}
		}
	}
	for _, bad := range []string{"hf://datasets/o/n/x", "gcs://bbb/x", "s3://B/x", "gs://B/x", "azblob://a_b"} {
		if _, _, err := OutputLocation(bad); err == nil {
			t.Errorf("OutputLocation(%q): no error", bad)
		}
	}
}

// Two workers' mirrors of one prefix: Fetch brings one what the other
// published, data before manifests, fetches a replaced object again, and
// keeps a local file not uploaded yet.
func TestMirrorFetchFromOtherWorkers(t *testing.T) {
	_, o, _ := s3Server(t)
	a, rootA := mirrorOf(t, o, t.TempDir(), "s3://data/run")
	dirB := t.TempDir()
	b, _ := mirrorOf(t, o, dirB, "s3://data/run")
	rootA.Sub("01-x").WriteFile("part-a.parquet", []byte("a1"))
	rootA.WriteFile(".augment/workers/01-x/0-of-2.json", []byte(`{"v":1}`))
	a.flush()
	// B committed a file of the same name and has not uploaded it.
	os.MkdirAll(filepath.Join(dirB, "01-x"), 0o755)
	os.WriteFile(filepath.Join(dirB, "01-x", "mine.jsonl"), []byte("b's own"), 0o644)
	rootA.Sub("01-x").WriteFile("mine.jsonl", []byte("a's"))
	a.flush()
	for _, dir := range []string{".augment/workers/01-x", "01-x"} {
		if err := b.Fetch(context.Background(), dir, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := localFiles(t, dirB)
	if got["01-x/part-a.parquet"] != "a1" || got[".augment/workers/01-x/0-of-2.json"] != `{"v":1}` || got["01-x/mine.jsonl"] != "b's own" {
		t.Fatalf("after Fetch B holds %v", got)
	}
	// A replaces its part: B's next Fetch gets the new one; keep filters.
	rootA.WriteFile(".augment/workers/01-x/0-of-2.json", []byte(`{"v":2}`))
	rootA.Sub("01-x").WriteFile("part-b.parquet", []byte("b1"))
	a.flush()
	if err := b.Fetch(context.Background(), "", func(name string) bool { return strings.HasSuffix(name, ".json") }); err != nil {
		t.Fatal(err)
	}
	got = localFiles(t, dirB)
	if got[".augment/workers/01-x/0-of-2.json"] != `{"v":2}` || got["01-x/part-b.parquet"] != "" {
		t.Errorf("after a filtered Fetch B holds %v", got)
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
}

// A snapshot uploads what its writer writes, at most once per interval
// while one is pending, and nothing when the writer has nothing.
func TestMirrorSnapshot(t *testing.T) {
	_, o, _ := s3Server(t)
	m, _ := mirrorOf(t, o, t.TempDir(), "s3://data/snap")
	n := 0
	write := func(content string) func(w io.Writer) (bool, error) {
		return func(w io.Writer) (bool, error) {
			n++
			_, err := io.WriteString(w, content)
			return true, err
		}
	}
	m.Snapshot("cache/llm-cache.db", time.Hour, write("first"))
	m.flush()
	m.Snapshot("cache/llm-cache.db", time.Hour, write("too soon"))
	m.flush()
	if got := bucketFiles(t, o, "snap/"); got["cache/llm-cache.db"] != "first" || n != 1 {
		t.Fatalf("bucket %v after %d snapshots", got, n)
	}
	m.Snapshot("cache/segments/w/llm-cache.db", 0, func(io.Writer) (bool, error) { return false, nil })
	m.flush()
	if got := bucketFiles(t, o, "snap/"); len(got) != 1 {
		t.Errorf("a snapshot with nothing to write uploaded: %v", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// A request cache in the prefix that differs from the local one (another
// machine paid for answers too) joins it as a segment of its own: neither
// copy's answers are lost.
func TestMirrorPullKeepsBothCaches(t *testing.T) {
	_, o, _ := s3Server(t)
	first := t.TempDir()
	os.MkdirAll(filepath.Join(first, "cache"), 0o755)
	os.WriteFile(filepath.Join(first, "cache", "llm-cache.db"), []byte("answers of machine A"), 0o644)
	m, _ := mirrorOf(t, o, first, "s3://data/c")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	second := t.TempDir()
	os.MkdirAll(filepath.Join(second, "cache"), 0o755)
	os.WriteFile(filepath.Join(second, "cache", "llm-cache.db"), []byte("answers of machine B"), 0o644)
	m2, _ := mirrorOf(t, o, second, "s3://data/c")
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	got := localFiles(t, second)
	var pulled []string
	for name, b := range got {
		if strings.HasPrefix(name, "cache/segments/pulled-") && strings.HasSuffix(name, "/llm-cache.db") && b == "answers of machine A" {
			pulled = append(pulled, name)
		}
	}
	if got["cache/llm-cache.db"] != "answers of machine B" || len(pulled) != 1 {
		t.Fatalf("machine B holds %v", got)
	}
	if b := bucketFiles(t, o, "c/"); b[pulled[0]] != "answers of machine A" || b["cache/llm-cache.db"] != "answers of machine B" {
		t.Errorf("bucket holds %v", b)
	}
}

// answerer answers every request with one status and a plain body, as a
// gateway in front of the store may.
type answerer struct{ status int }

func (a answerer) RoundTrip(req *http.Request) (*http.Response, error) {
	body := http.StatusText(a.status)
	return &http.Response{StatusCode: a.status, Status: fmt.Sprint(a.status, " ", body), Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// CheckOutput's errors are typed by what the user can do: credentials to
// set (a 401 or 403 without S3's error code too), a prefix to change, or
// neither (a 500: the store's, not the config's).
func TestCheckOutputErrors(t *testing.T) {
	srv, o, put := s3Server(t)
	loc, _, err := OutputLocation("s3://data/out")
	if err != nil {
		t.Fatal(err)
	}
	put("out/notes.txt", []byte("someone else's"))
	var foreign *ForeignPrefixError
	if err := o.CheckOutput(t.Context(), loc); !errors.As(err, &foreign) || foreign.Object != "out/notes.txt" {
		t.Errorf("foreign prefix: %v", err)
	}
	for _, tc := range []struct {
		status int
		auth   bool
	}{{401, true}, {403, true}, {500, false}} {
		o := New(Options{S3: S3Config{Endpoint: srv.URL, Region: "us-east-1"}, Transport: answerer{tc.status}, Getenv: func(string) string { return "" }})
		err := o.CheckOutput(t.Context(), loc)
		var auth *AuthError
		if err == nil || errors.As(err, &auth) != tc.auth || tc.auth && !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
			t.Errorf("HTTP %d: %v (auth error %v)", tc.status, err, tc.auth)
		}
	}
}

// writeOutside replaces a local file the way report.html and the dataset
// cards are written: atomically, through a Root the mirror does not
// observe.
func writeOutside(t *testing.T, dir, name, content string) {
	t.Helper()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.WriteFile(name, []byte(content)); err != nil {
		t.Fatal(err)
	}
}

// puts lists the objects rec saw PUT, in order.
func (r *recorder) puts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.reqs {
		if q.method == "PUT" {
			out = append(out, q.path)
		}
	}
	return out
}

// A file rewritten after it was in step, by a writer the mirror does not
// observe, goes up at Close, even at its old size: after a Pull (a run
// writing its report) and after a Fetch (augment report on a prefix). A
// file still in step is not uploaded again.
func TestMirrorUploadsFilesRewrittenOutsideTheRoot(t *testing.T) {
	_, o, _ := s3Server(t)
	rec := &recorder{base: o.o.Transport}
	o = New(Options{S3: o.o.S3, Transport: rec, Getenv: func(string) string { return "" }})
	dir := t.TempDir()
	m, root := mirrorOf(t, o, dir, "s3://data/r")
	root.WriteFile("report.html", []byte("run 1"))
	root.Sub("02-export").WriteFile("README.md", []byte("num_examples: 9"))
	root.Sub("02-export").WriteFile("part-0.jsonl", []byte("{}"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m, _ = mirrorOf(t, o, dir, "s3://data/r") // the rerun
	writeOutside(t, dir, "report.html", "run 2")
	writeOutside(t, dir, "02-export/README.md", "num_examples: 7")
	before := len(rec.puts())
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	got := bucketFiles(t, o, "r/")
	if got["report.html"] != "run 2" || got["02-export/README.md"] != "num_examples: 7" {
		t.Errorf("after the rerun the bucket holds %q", got)
	}
	if puts := rec.puts()[before:]; len(puts) != 2 {
		t.Errorf("the rerun's Close uploaded %q, want the two rewritten files only", puts)
	}

	// augment report on the prefix: a temporary copy, fetched, rewritten.
	tmp := t.TempDir()
	local, err := os.OpenRoot(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	loc, _, _ := OutputLocation("s3://data/r")
	rm, err := o.NewMirror(loc, local)
	if err != nil {
		t.Fatal(err)
	}
	if err := rm.Fetch(t.Context(), "", nil); err != nil {
		t.Fatal(err)
	}
	writeOutside(t, tmp, "report.html", "rep 3")
	if err := rm.Close(); err != nil {
		t.Fatal(err)
	}
	if got := bucketFiles(t, o, "r/"); got["report.html"] != "rep 3" {
		t.Errorf("after the report command the bucket's report.html is %q", got["report.html"])
	}
}

// A local file newer than its object (committed after the version the
// copy last had in step, never uploaded: a failed upload, a killed run)
// is kept by the next Pull and goes up; an object another machine
// replaced since is fetched over the local file as before.
func TestMirrorPullKeepsNewerLocalFiles(t *testing.T) {
	_, o, _ := s3Server(t)
	ref := &refuser{base: o.o.Transport}
	o = New(Options{S3: o.o.S3, Transport: ref, Getenv: func(string) string { return "" }})
	dir := t.TempDir()
	m, root := mirrorOf(t, o, dir, "s3://data/n")
	st := root.Sub("01-x")
	st.WriteFile("manifest.json", []byte(`{"shards":0}`)) // the stage starts
	m.flush()
	ref.on.Store(true) // an upload fails: the rest stays local
	st.WriteFile("part-0.parquet", []byte("p0"))
	st.WriteFile("manifest.json", []byte(`{"shards":1}`))
	if err := m.Close(); err == nil {
		t.Fatal("Close after a refused upload: no error")
	}
	ref.on.Store(false)

	m, _ = mirrorOf(t, o, dir, "s3://data/n") // the rerun
	if got := localFiles(t, dir)["01-x/manifest.json"]; got != `{"shards":1}` {
		t.Fatalf("the rerun's pull left the local manifest %s", got)
	}
	// Killed while uploads lag: a manifest committed, not uploaded.
	m.flush()
	os.WriteFile(filepath.Join(dir, "01-x", "part-1.parquet"), []byte("p1"), 0o644)
	os.WriteFile(filepath.Join(dir, "01-x", "manifest.json"), []byte(`{"shards":2}`), 0o644)
	m.Discard()

	m, _ = mirrorOf(t, o, dir, "s3://data/n")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"01-x/manifest.json": `{"shards":2}`, "01-x/part-0.parquet": "p0", "01-x/part-1.parquet": "p1"}
	for _, got := range []map[string]string{localFiles(t, dir), bucketFiles(t, o, "n/")} {
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s holds %q, want %q", name, got[name], w)
			}
		}
	}

	// Another machine moves the prefix on; this copy, which has a newer
	// local file too, takes the prefix's.
	other := t.TempDir()
	m2, root2 := mirrorOf(t, o, other, "s3://data/n")
	root2.Sub("01-x").WriteFile("manifest.json", []byte(`{"shards":3}`))
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "01-x", "manifest.json"), []byte(`{"shards":-1}`), 0o644)
	m, _ = mirrorOf(t, o, dir, "s3://data/n")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := localFiles(t, dir)["01-x/manifest.json"]; got != `{"shards":3}` {
		t.Errorf("the stale copy kept its manifest %s over the prefix's", got)
	}
}

// holdPuts holds the PUT of one object until released, and notes the body
// of every PUT of a manifest in the order they reach the store.
type holdPuts struct {
	base     http.RoundTripper
	hold     string        // path suffix of the PUT held
	release  chan struct{} // closed to let it go
	held     chan struct{} // closed once it is held
	mu       sync.Mutex
	manifest []string
	parts    []string // the part objects whose PUT has ended, in order
}

func (h *holdPuts) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == "PUT" && strings.HasSuffix(req.URL.Path, h.hold) {
		close(h.held)
		<-h.release
	}
	if req.Method == "PUT" && strings.HasSuffix(req.URL.Path, "/manifest.json") && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		h.mu.Lock()
		h.manifest = append(h.manifest, string(b))
		h.mu.Unlock()
	}
	resp, err := h.base.RoundTrip(req)
	if req.Method == "PUT" && strings.Contains(req.URL.Path, "/part-") {
		h.mu.Lock()
		h.parts = append(h.parts, path.Base(req.URL.Path))
		h.mu.Unlock()
	}
	return resp, err
}

// A manifest is uploaded as it was committed, not as the local file reads
// when its turn in the queue comes: by then it may name parts committed
// after it, not yet uploaded (GCS/Azure QA: the prefix held manifests naming
// 64–92 objects it lacked after an upload of a later stage failed).
func TestMirrorUploadsManifestsAsCommitted(t *testing.T) {
	_, o, _ := s3Server(t)
	h := &holdPuts{base: o.o.Transport, hold: "/00-ingest/slow.jsonl", release: make(chan struct{}), held: make(chan struct{})}
	o = New(Options{S3: o.o.S3, Transport: h, Getenv: func(string) string { return "" }})
	m, root := mirrorOf(t, o, t.TempDir(), "s3://data/runs/r1/")
	st := root.Sub("00-ingest")
	if _, err := st.WriteFile("slow.jsonl", []byte("slow")); err != nil {
		t.Fatal(err)
	}
	<-h.held // the manifest below waits for this upload
	if _, err := st.WriteFile("manifest.json", []byte(`{"shards":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteFile("part-00.parquet", []byte("part")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteFile("manifest.json", []byte(`{"shards":["part-00"]}`)); err != nil {
		t.Fatal(err)
	}
	close(h.release)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := []string{`{"shards":[]}`, `{"shards":["part-00"]}`}; !slices.Equal(h.manifest, want) {
		t.Errorf("manifest uploads %q, want %q (each as committed, in order)", h.manifest, want)
	}
	if !slices.Equal(h.parts, []string{"part-00.parquet"}) {
		t.Errorf("parts uploaded: %q", h.parts)
	}
	if got := bucketFiles(t, o, "runs/r1/")["00-ingest/manifest.json"]; got != `{"shards":["part-00"]}` {
		t.Errorf("the prefix's manifest reads %q", got)
	}
}
