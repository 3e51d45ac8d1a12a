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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augmentdata/augment/storage/cloudtest"
)

// A cloud is one object store started on loopback for a test: how to
// reach it (the environment, as in production), how another tool puts an
// object there, and the URL scheme.
type cloud struct {
	scheme   string
	endpoint string // Azurite's account URL
	env      map[string]string
	put      func(key string, b []byte) // into the bucket/container "data"
}

func (c cloud) opener(transport http.RoundTripper) *Opener {
	return New(Options{Getenv: func(k string) string { return c.env[k] }, Transport: transport})
}

func (c cloud) url(key string) string { return c.scheme + "://data/" + key }

func azureCloud(t testing.TB) cloud {
	az := cloudtest.StartAzurite(t)
	az.CreateBucket(t, "data")
	return cloud{scheme: "azblob", endpoint: az.Endpoint, env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": az.ConnectionString},
		put: func(key string, b []byte) { az.Put(t, "data", key, b) }}
}

func gcsCloud(t testing.TB) cloud {
	g := cloudtest.StartFakeGCS(t)
	g.CreateBucket(t, "data")
	return cloud{scheme: "gs", env: map[string]string{"STORAGE_EMULATOR_HOST": g.Host},
		put: func(key string, b []byte) { g.Put(t, "data", key, b) }}
}

// TestCloud runs every cloud test against Azurite and fake-gcs-server,
// each started once (Azurite takes seconds to start) and skipped when
// its server is not installed.
func TestCloud(t *testing.T) {
	tests := []struct {
		name string
		f    func(*testing.T, cloud)
	}{
		{"sources", testCloudSources},
		{"read is pinned", testCloudReadIsPinned},
		{"read resumes with range", testCloudReadResumesWithRange},
		{"read resumes after a stall", testCloudReadResumesAfterStall},
		{"mirror", testCloudMirror},
		{"check output", testCloudCheckOutput},
		{"conditional put", testCloudConditionalPut},
		{"lease", testCloudLease},
		{"fetch", testCloudFetch},
		{"pull keeps both caches", testCloudPullKeepsBothCaches},
		{"pull resumes a cut download", testCloudPullResumesCutDownload},
		{"read cut on every try", testCloudReadCutEveryTry},
		{"retries", testCloudRetries},
	}
	for _, c := range []struct {
		name  string
		start func(testing.TB) cloud
	}{{"azblob", azureCloud}, {"gs", gcsCloud}} {
		t.Run(c.name, func(t *testing.T) {
			cl := c.start(t)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.f(t, cl) })
			}
			if c.name == "azblob" {
				t.Run("refused credentials", func(t *testing.T) { testAzureRefusedCredentials(t, cl) })
			}
			if c.name == "gs" {
				t.Run("resumable upload, answer lost", func(t *testing.T) { testGCSResumableAnswerLost(t, cl) })
			}
		})
	}
}

func testCloudSources(t *testing.T, c cloud) {
	jsonl := []byte(`{"id":1,"query":"q","answers":"[]","tools":"[]"}` + "\n" + `{"id":2,"query":"r","answers":"[]","tools":"[]"}` + "\n")
	array := []byte(`[{"id":1,"query":"q","answers":"[]","tools":"[]"},{"id":2,"query":"r","answers":"[]","tools":"[]"}]`)
	c.put("dumps/x.jsonl", jsonl)
	c.put("dumps/x.json", array)
	c.put("dumps/x.jsonl.gz", gz(t, jsonl))
	c.put("dumps/x.jsonl.zst", zst(t, jsonl))
	c.put("dumps/x.parquet", writeParquet(t, []xlamRow{{1, "q", "[]", "[]"}, {2, "r", "[]", "[]"}}))
	c.put("dumps/sub dir/ü x+y.jsonl", jsonl) // a key that needs escaping
	o := c.opener(nil)
	for _, withCache := range []bool{false, true} {
		if withCache {
			o.SetCache(cacheRoot(t))
		}
		for k, want := range map[string][]byte{"x.jsonl": jsonl, "x.json": array, "x.jsonl.gz": jsonl, "x.jsonl.zst": jsonl, "x.parquet": jsonl, "sub dir/ü x+y.jsonl": jsonl} {
			got, r := readAll(t, o, c.url("dumps/"+k))
			if got != string(want) {
				t.Errorf("%s (cache %v): read %q, want %q", k, withCache, got, want)
			}
			if !strings.HasPrefix(r.Pin, c.url("dumps/"+k)+"#") || r.Name != filepath.Base(k) || r.Size <= 0 {
				t.Errorf("%s: pin %q name %q size %d", k, r.Pin, r.Name, r.Size)
			}
		}
	}
	ctx := context.Background()
	var nf *NotFoundError
	if _, err := o.Stat(ctx, c.url("missing.jsonl")); !errors.As(err, &nf) || !strings.Contains(err.Error(), "no such object") {
		t.Errorf("missing object: %v", err)
	}
	if _, err := o.Stat(ctx, c.scheme+"://nothere/x.jsonl"); !errors.As(err, &nf) {
		t.Errorf("missing bucket: %v", err)
	}
}

// An object replaced after it was checked is not read: the read is bound
// to the version (ETag, generation) the run pinned.
func testCloudReadIsPinned(t *testing.T, c cloud) {
	c.put("x.jsonl", []byte("{\"v\":1}\n"))
	o := c.opener(nil)
	ctx := context.Background()
	info, err := o.Stat(ctx, c.url("x.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	c.put("x.jsonl", []byte("{\"v\":2}\n"))
	loc, _ := Parse(c.url("x.jsonl"))
	r, err := o.openBlob(ctx, loc, info)
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	if !errors.Is(err, errObjectChanged) {
		t.Fatalf("read a replaced object under the old pin: %v", err)
	}
}

// cutter cuts off the first response body of every GET of a blob after
// limit bytes, as a broken connection would (with every, the range
// requests that resume it too).
type cutter struct {
	base   http.RoundTripper
	limit  int64
	every  bool
	stall  bool // after limit bytes the stream stays open and silent (until the request is cancelled)
	cut    atomic.Int32
	ranged atomic.Int32
}

func (c *cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil || req.Method != "GET" || resp.StatusCode/100 != 2 || resp.ContentLength < c.limit*2 {
		return resp, err
	}
	if req.Header.Get("Range") != "" {
		c.ranged.Add(1)
		if !c.every {
			return resp, err
		}
	}
	c.cut.Add(1)
	resp.Body = &cutBody{r: io.LimitReader(resp.Body, c.limit), c: resp.Body}
	if c.stall {
		resp.Body = &stallBody{r: io.LimitReader(resp.Body, c.limit), c: resp.Body, done: req.Context().Done(), err: req.Context().Err}
	}
	return resp, err
}

// stallBody gives its bytes, then nothing until the request is cancelled.
type stallBody struct {
	r    io.Reader
	c    io.Closer
	done <-chan struct{}
	err  func() error
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		<-b.done
		return n, b.err()
	}
	return n, err
}

func (b *stallBody) Close() error { return b.c.Close() }

type cutBody struct {
	r io.Reader
	c io.Closer
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *cutBody) Close() error { return b.c.Close() }

// A stream cut off mid-object resumes with a range request from where it
// stopped, and the bytes read are the object's.
func testCloudReadResumesWithRange(t *testing.T, c cloud) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		fmt.Fprintf(&buf, "{\"i\":%d}\n", i)
	}
	c.put("big.jsonl", buf.Bytes())
	cut := &cutter{base: http.DefaultTransport, limit: 100 << 10}
	o := c.opener(cut)
	got, r := readAll(t, o, c.url("big.jsonl"))
	if got != buf.String() {
		t.Fatalf("read %d bytes, want the object's %d", len(got), buf.Len())
	}
	if sum, _ := r.Sum(); sum != sha256hex(buf.Bytes()) {
		t.Errorf("sum %s", sum)
	}
	if cut.cut.Load() != 1 || cut.ranged.Load() != 1 {
		t.Errorf("%d reads cut, %d range requests; want 1 and 1", cut.cut.Load(), cut.ranged.Load())
	}
}

// A stream that stays open but silent is taken for cut after blobStall
// and resumed from where it stopped (GCS/Azure QA: a read sat silent
// forever, the transport's timeout covering headers only).
func testCloudReadResumesAfterStall(t *testing.T, c cloud) {
	defer func(d time.Duration) { blobStall = d }(blobStall)
	blobStall = 200 * time.Millisecond
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		fmt.Fprintf(&buf, "{\"i\":%d}\n", i)
	}
	c.put("stall.jsonl", buf.Bytes())
	stall := &cutter{base: http.DefaultTransport, limit: 100 << 10, stall: true}
	got, _ := readAll(t, c.opener(stall), c.url("stall.jsonl"))
	if got != buf.String() {
		t.Fatalf("read %d bytes, want the object's %d", len(got), buf.Len())
	}
	if stall.cut.Load() != 1 || stall.ranged.Load() != 1 {
		t.Errorf("%d reads stalled, %d range requests; want 1 and 1", stall.cut.Load(), stall.ranged.Load())
	}
}

// The Mirror on each store: uploads (one request, and a multipart or block
// upload over the part size), deletions, a manifest after its data, pull
// on a fresh machine with nothing fetched twice, and catch-up.
func testCloudMirror(t *testing.T, c cloud) {
	rec := &recorder{base: http.DefaultTransport}
	o := c.opener(rec)
	first := t.TempDir()
	prefix := c.scheme + "://data/runs/r1"
	m, root := mirrorOf(t, o, first, prefix+"/")
	st := root.Sub("00-ingest")
	big := bytes.Repeat([]byte("0123456789abcdef"), (mirrorPartSize+mirrorPartSize/2)/16) // two parts
	if _, err := st.WriteFile("part-big.parquet", big); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		st.WriteFile(fmt.Sprintf("part-%02d.parquet", i), bytes.Repeat([]byte{byte(i)}, 100<<10))
	}
	st.WriteFile("rejects-empty.jsonl", nil)
	st.WriteFile("manifest.json", []byte(`{"shards":7}`))
	root.Sub("06-export/data").WriteFile("a.jsonl", []byte("a"))
	if err := root.RemoveAll("06-export"); err != nil {
		t.Fatal(err)
	}
	st.WriteFile("gone.jsonl", []byte("x"))
	st.Remove("gone.jsonl")
	os.MkdirAll(filepath.Join(first, ".augment"), 0o755)
	os.WriteFile(filepath.Join(first, ".augment", "lock"), []byte("pid"), 0o644)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	at, _, _ := OutputLocation(prefix)
	at.Key += "/"
	got := storeFiles(t, o, at)
	want := localFiles(t, first)
	delete(want, ".augment/lock")
	if len(got) != len(want) || len(want) != 9 {
		t.Errorf("store holds %v\nwant %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %d bytes stored, %d local", name, len(got[name]), len(w))
		}
	}
	// The manifest's upload waited for every write before it and held
	// back every one after it.
	write := func(r recorded) bool { return r.method == "PUT" || r.method == "POST" }
	var mStart, mEnd time.Time
	for _, r := range rec.reqs {
		if write(r) && strings.Contains(r.path+r.query, "manifest.json") {
			mStart, mEnd = r.start, r.end
		}
	}
	for _, r := range rec.reqs {
		if write(r) && !strings.Contains(r.path+r.query, "manifest.json") && r.end.After(mStart) && r.start.Before(mEnd) {
			t.Errorf("%s %s%s overlapped the manifest's upload", r.method, r.path, r.query)
		}
	}
	if mStart.IsZero() {
		t.Error("no manifest upload seen")
	}

	// Another machine pulls everything; then nothing differs.
	second := t.TempDir()
	m2, _ := mirrorOf(t, o, second, prefix)
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := localFiles(t, second); len(got) != 9 || got["00-ingest/part-big.parquet"] != string(big) {
		t.Errorf("pulled %d files", len(got))
	}
	// A file committed with no mirror running (a killed run) goes up
	// when the first machine mirrors again; nothing else is sent.
	os.WriteFile(filepath.Join(first, "00-ingest", "part-late.parquet"), []byte("late"), 0o644)
	rec.reqs = nil
	m3, _ := mirrorOf(t, o, first, prefix)
	if err := m3.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storeFiles(t, o, at); got["00-ingest/part-late.parquet"] != "late" || len(got) != 10 {
		t.Errorf("after catching up the store holds %v", slices.Sorted(maps.Keys(got)))
	}
	for _, r := range rec.reqs {
		if (r.method == "PUT" || r.method == "POST") && !strings.Contains(r.path+r.query, "part-late") {
			t.Errorf("catch-up sent %s %s%s", r.method, r.path, r.query)
		}
	}
}

// A prefix holding objects augment did not write is refused; an empty one
// or augment's is taken.
func testCloudCheckOutput(t *testing.T, c cloud) {
	o := c.opener(nil)
	ctx := context.Background()
	c.put("theirs/data.csv", []byte("a,b"))
	c.put("ours/.augment/output-dir", []byte("augment"))
	c.put("ours/config.yaml", []byte("x"))
	for dir, want := range map[string]string{"theirs": "holds objects augment did not write", "ours": "", "new": ""} {
		loc, _, err := OutputLocation(c.scheme + "://data/" + dir)
		if err != nil {
			t.Fatal(err)
		}
		err = o.CheckOutput(ctx, loc)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", dir, err, want)
		}
	}
	loc, _, _ := OutputLocation(c.scheme + "://nothere/x")
	if err := o.CheckOutput(ctx, loc); err == nil || !strings.Contains(err.Error(), "no such bucket") {
		t.Errorf("missing bucket: %v", err)
	}
}

// Credentials the store refuses give an AuthError naming what to set;
// the account and key may come from their own variables.
func testAzureRefusedCredentials(t *testing.T, c cloud) {
	c.put("auth/x.jsonl", []byte("{}\n"))
	env := map[string]string{"AZURE_STORAGE_ACCOUNT": "devstoreaccount1", "AZURE_STORAGE_KEY": "d3Jvbmc=", "AZURE_STORAGE_SERVICE_ENDPOINT": c.endpoint}
	o := New(Options{Getenv: func(k string) string { return env[k] }})
	var auth *AuthError
	if _, err := o.Stat(context.Background(), "azblob://data/auth/x.jsonl"); !errors.As(err, &auth) || !strings.Contains(err.Error(), "AZURE_STORAGE_KEY") {
		t.Errorf("wrong key: %v", err)
	}
	env["AZURE_STORAGE_KEY"] = cloudtest.AzuriteKey
	o = New(Options{Getenv: func(k string) string { return env[k] }})
	if got, _ := readAll(t, o, "azblob://data/auth/x.jsonl"); got != "{}\n" {
		t.Errorf("account + key from the environment: read %q", got)
	}
}

// The store decides a conditional put: create only if absent, replace
// only at the version given (also: not a deleted object); get returns
// the version its bytes are, with when it was written.
func testCloudConditionalPut(t *testing.T, c cloud) {
	o := c.opener(nil)
	s, err := o.store(mustParse(t, c.url("cas/x")).Kind)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loc := mustParse(t, c.url("cas/x"))
	put := func(b string, cond putCond) (blobObject, error) {
		return s.put(ctx, loc, strings.NewReader(b), int64(len(b)), cond)
	}
	v1, err := put("one", ifAbsent)
	if err != nil || v1.ETag == "" {
		t.Fatalf("create: %+v %v", v1, err)
	}
	if _, err := put("two", ifAbsent); !errors.Is(err, errConditionFailed) {
		t.Fatalf("create over an object: %v", err)
	}
	v2, err := put("two", ifMatch(v1.ETag))
	if err != nil || v2.ETag == v1.ETag {
		t.Fatalf("replace at the version: %+v %v", v2, err)
	}
	if _, err := put("three", ifMatch(v1.ETag)); !errors.Is(err, errConditionFailed) {
		t.Fatalf("replace at an old version: %v", err)
	}
	body, got, err := s.get(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if string(b) != "two" || strings.Trim(got.ETag, `"`) != strings.Trim(v2.ETag, `"`) || got.Size != 3 || got.MD5 == "" ||
		time.Since(got.Modified).Abs() > time.Minute {
		t.Errorf("get: %q %+v, want the second version %+v", b, got, v2)
	}
	if err := s.remove(ctx, loc); err != nil {
		t.Fatal(err)
	}
	if _, err := put("four", ifMatch(v2.ETag)); !errors.Is(err, errConditionFailed) {
		t.Fatalf("replace a deleted object: %v", err)
	}
}

func mustParse(t *testing.T, u string) Location {
	t.Helper()
	loc, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Leases on the store: of processes asking at once exactly one gets a
// lease; a run's lease and a worker's exclude each other; a holder whose
// lease is overwritten stops writing; released, no lease is left.
func testCloudLease(t *testing.T, c cloud) {
	o := c.opener(nil)
	ctx := context.Background()
	prefix := c.url("leased")
	var got []*Mirror
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 6 {
		m := newTestMirror(t, o, prefix)
		wg.Go(func() {
			err := m.Lock(ctx, "worker-0-of-2", "run")
			var held *LeaseHeldError
			switch {
			case err == nil:
				mu.Lock()
				got = append(got, m)
				mu.Unlock()
			case !errors.As(err, &held) || !strings.Contains(held.Holder, "worker-0-of-2: host "):
				t.Errorf("want a LeaseHeldError naming the holder, got %v", err)
			}
		})
	}
	wg.Wait()
	if len(got) != 1 {
		t.Fatalf("%d processes got the lease, want 1", len(got))
	}
	var held *LeaseHeldError
	if err := newTestMirror(t, o, prefix).Lock(ctx, "run", "worker-"); !errors.As(err, &held) || held.Dir != prefix {
		t.Fatalf("a run beside a worker: %v", err)
	}
	if err := got[0].Close(); err != nil {
		t.Fatal(err)
	}
	if left := storeFiles(t, o, mustParse(t, c.url("leased/x"))); len(left) != 0 {
		t.Fatalf("left in the prefix: %v", left)
	}

	old := leaseRenew
	leaseRenew = 50 * time.Millisecond
	t.Cleanup(func() { leaseRenew = old })
	m, root := mirrorOf(t, o, t.TempDir(), prefix)
	if err := m.Lock(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	c.put("leased/.augment/lease-run.json", []byte(`{"name":"run","host":"elsewhere","pid":9}`))
	deadline := time.Now().Add(5 * time.Second)
	for !m.failed() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	root.WriteFile("late.jsonl", []byte("x"))
	if err := m.Close(); err == nil || !strings.Contains(err.Error(), "lost the lease") {
		t.Fatalf("Close after losing the lease: %v", err)
	}
	files := storeFiles(t, o, Location{Kind: m.loc.Kind, Bucket: "data", Key: "leased/"})
	if _, ok := files["late.jsonl"]; ok || !strings.Contains(files[".augment/lease-run.json"], "elsewhere") {
		t.Errorf("after the lease was lost the prefix holds %v", files)
	}
}

// Fetch between two mirrors of one prefix: what one published reaches
// the other, a replaced object is fetched again.
func testCloudFetch(t *testing.T, c cloud) {
	o := c.opener(nil)
	a, rootA := mirrorOf(t, o, t.TempDir(), c.url("shared"))
	dirB := t.TempDir()
	b, _ := mirrorOf(t, o, dirB, c.url("shared"))
	rootA.Sub("01-x").WriteFile("part-a.parquet", []byte("a1"))
	rootA.WriteFile(".augment/workers/01-x/0-of-2.json", []byte(`{"v":1}`))
	a.flush()
	if err := b.Fetch(context.Background(), "", nil); err != nil {
		t.Fatal(err)
	}
	rootA.WriteFile(".augment/workers/01-x/0-of-2.json", []byte(`{"v":2}`))
	a.flush()
	if err := b.Fetch(context.Background(), ".augment/workers", nil); err != nil {
		t.Fatal(err)
	}
	if got := localFiles(t, dirB); got["01-x/part-a.parquet"] != "a1" || got[".augment/workers/01-x/0-of-2.json"] != `{"v":2}` {
		t.Fatalf("after Fetch B holds %v", got)
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
}

// Two machines' request caches: the second keeps its own and gets the
// first's as a segment named by its content, as on S3.
func testCloudPullKeepsBothCaches(t *testing.T, c cloud) {
	o := c.opener(nil)
	for i, answers := range []string{"answers of machine A", "answers of machine B"} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "cache"), 0o755)
		os.WriteFile(filepath.Join(dir, "cache", "llm-cache.db"), []byte(answers), 0o644)
		m, _ := mirrorOf(t, o, dir, c.url("caches"))
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue
		}
		got := localFiles(t, dir)
		sum := md5.Sum([]byte("answers of machine A"))
		pulled := "cache/segments/pulled-" + hex.EncodeToString(sum[:])[:12] + "/llm-cache.db"
		if got["cache/llm-cache.db"] != answers || got[pulled] != "answers of machine A" {
			t.Fatalf("machine B holds %v", got)
		}
		if b := storeFiles(t, o, Location{Kind: m.loc.Kind, Bucket: "data", Key: "caches/"}); b[pulled] != "answers of machine A" || b["cache/llm-cache.db"] != answers {
			t.Errorf("the store holds %v", b)
		}
	}
}
