package storage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func newTestMirror(t *testing.T, o *Opener, url string) *Mirror {
	t.Helper()
	local, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	loc, _, err := OutputLocation(url)
	if err != nil {
		t.Fatal(err)
	}
	m, err := o.NewMirror(loc, local)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Of processes asking for one lease at once exactly one gets it; the
// others are told who holds it; a "run" lease and a worker lease exclude
// each other; released, the lease is free again.
func TestLeaseExclusive(t *testing.T) {
	_, o, _ := s3Server(t)
	ctx := context.Background()
	var got []*Mirror
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		m := newTestMirror(t, o, "s3://data/out")
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
	other := newTestMirror(t, o, "s3://data/out")
	if err := other.Lock(ctx, "worker-1-of-2", "run"); err != nil {
		t.Fatalf("another worker's lease: %v", err)
	}
	run := newTestMirror(t, o, "s3://data/out")
	var held *LeaseHeldError
	if err := run.Lock(ctx, "run", "worker-"); !errors.As(err, &held) || held.Dir != "s3://data/out" {
		t.Fatalf("a run beside workers: %v", err)
	}
	if err := got[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	run = newTestMirror(t, o, "s3://data/out")
	if err := run.Lock(ctx, "run", "worker-"); err != nil {
		t.Fatalf("after the workers released theirs: %v", err)
	}
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	if files := bucketFiles(t, o, "out/"); len(files) != 0 {
		t.Errorf("leases left: %v", files)
	}
}

// A lease whose holder is gone is taken over: one of a process of this
// host that no longer exists at once, one not renewed for leaseTTL
// whatever its host.
func TestLeaseStaleTakenOver(t *testing.T) {
	_, o, put := s3Server(t)
	ctx := context.Background()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	host, _ := os.Hostname()
	put("out/.augment/lease-run.json", []byte(`{"name":"run","host":"`+host+`","pid":`+strconv.Itoa(dead.Process.Pid)+`,"started":"2026-01-01T00:00:00Z"}`))
	m := newTestMirror(t, o, "s3://data/out")
	if err := m.Lock(ctx, "run"); err != nil {
		t.Fatalf("a lease of a dead process of this host: %v", err)
	}
	m.Close()

	// Another host's lease, renewed recently: held. Old: stale.
	fresh := `{"name":"run","host":"elsewhere","pid":1,"started":"2026-01-01T00:00:00Z"}`
	put("out/.augment/lease-run.json", []byte(fresh))
	var held *LeaseHeldError
	if err := newTestMirror(t, o, "s3://data/out").Lock(ctx, "run"); !errors.As(err, &held) || !strings.Contains(held.Holder, "host elsewhere, pid 1") {
		t.Fatalf("a live lease of another host: %v", err)
	}
	be := s3mem.New()
	be.CreateBucket("data")
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	then := time.Now().Add(-leaseTTL - time.Minute).UTC().Format(http.TimeFormat)
	if _, err := be.PutObject("data", "out/.augment/lease-run.json", map[string]string{"Last-Modified": then}, strings.NewReader(fresh), int64(len(fresh)), nil); err != nil {
		t.Fatal(err)
	}
	o2 := New(Options{S3: S3Config{Endpoint: srv.URL, Region: "us-east-1"}, Getenv: func(string) string { return "" }})
	m = newTestMirror(t, o2, "s3://data/out")
	if err := m.Lock(ctx, "run"); err != nil {
		t.Fatalf("a lease not renewed for its TTL: %v", err)
	}
	m.Close()
}

// A holder whose lease was taken over learns it at its next renewal and
// writes nothing more.
func TestLeaseLostStopsWrites(t *testing.T) {
	old := leaseRenew
	leaseRenew = 50 * time.Millisecond
	t.Cleanup(func() { leaseRenew = old })
	_, o, put := s3Server(t)
	dir := t.TempDir()
	m, root := mirrorOf(t, o, dir, "s3://data/out")
	if err := m.Lock(context.Background(), "run"); err != nil {
		t.Fatal(err)
	}
	put("out/.augment/lease-run.json", []byte(`{"name":"run","host":"elsewhere","pid":9}`))
	deadline := time.Now().Add(5 * time.Second)
	for !m.failed() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	root.WriteFile("late.jsonl", []byte("x"))
	err := m.Close()
	if err == nil || !strings.Contains(err.Error(), "lost the lease") {
		t.Fatalf("Close after losing the lease: %v", err)
	}
	files := bucketFiles(t, o, "out/")
	if _, ok := files["late.jsonl"]; ok {
		t.Error("a file was uploaded after the lease was lost")
	}
	if !strings.Contains(files[".augment/lease-run.json"], "elsewhere") {
		t.Errorf("the new holder's lease was touched: %q", files[".augment/lease-run.json"])
	}
}

// dropFirstAnswer passes the first PUT of a lease to the store and then
// drops its answer, as a connection cut after the server acted does.
type dropFirstAnswer struct {
	base    http.RoundTripper
	mu      sync.Mutex
	dropped bool
}

func (d *dropFirstAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && req.Method == "PUT" && strings.Contains(req.URL.Path, leasePrefix) && !d.dropped {
		d.dropped = true
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

// The lease's create went through but its answer was lost: the client's
// resend finds the lease in place, and it is this process's own (GCS/Azure
// QA: the run refused to start, exit 2, naming itself as the holder).
func TestLeaseOwnCreateAnswerLost(t *testing.T) {
	_, o, _ := s3Server(t)
	d := &dropFirstAnswer{base: o.o.Transport}
	o = New(Options{S3: o.o.S3, Transport: d, Getenv: func(string) string { return "" }})
	m := newTestMirror(t, o, "s3://data/out")
	if err := m.Lock(context.Background(), "run"); err != nil {
		t.Fatalf("the lease whose answer was lost: %v", err)
	}
	if !d.dropped {
		t.Fatal("no lease PUT was made")
	}
	other := newTestMirror(t, o, "s3://data/out")
	var held *LeaseHeldError
	if err := other.Lock(context.Background(), "run"); !errors.As(err, &held) {
		t.Fatalf("a second process: %v, want the lease held", err)
	}
}

// LeaseLive says a process holds a lease of the prefix only while one is
// there and not stale: none, a released one, one of a gone process of this
// host or one not renewed for leaseTTL is not; a held one, the run's or a
// worker's, is.
func TestLeaseLive(t *testing.T) {
	_, o, put := s3Server(t)
	ctx := context.Background()
	reader := newTestMirror(t, o, "s3://data/out")
	live := func(when string, want bool) {
		t.Helper()
		if got, err := reader.LeaseLive(ctx); err != nil || got != want {
			t.Errorf("%s: LeaseLive %t, %v; want %t", when, got, err, want)
		}
	}
	live("no lease", false)
	m := newTestMirror(t, o, "s3://data/out")
	if err := m.Lock(ctx, "worker-1-of-2", "run"); err != nil {
		t.Fatal(err)
	}
	live("a worker holds its lease", true)
	m.Close()
	live("released", false)

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	host, _ := os.Hostname()
	put("out/.augment/lease-run.json", []byte(`{"name":"run","host":"`+host+`","pid":`+strconv.Itoa(dead.Process.Pid)+`,"started":"2026-01-01T00:00:00Z"}`))
	live("a lease of a gone process of this host", false)
	put("out/.augment/lease-run.json", []byte(`{"name":"run","host":"elsewhere","pid":1,"started":"2026-01-01T00:00:00Z"}`))
	live("another host's lease, written now", true)

	be := s3mem.New()
	be.CreateBucket("data")
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	then := time.Now().Add(-leaseTTL - time.Minute).UTC().Format(http.TimeFormat)
	fresh := `{"name":"run","host":"elsewhere","pid":1,"started":"2026-01-01T00:00:00Z"}`
	if _, err := be.PutObject("data", "out/.augment/lease-run.json", map[string]string{"Last-Modified": then}, strings.NewReader(fresh), int64(len(fresh)), nil); err != nil {
		t.Fatal(err)
	}
	o2 := New(Options{S3: S3Config{Endpoint: srv.URL, Region: "us-east-1"}, Getenv: func(string) string { return "" }})
	if got, err := newTestMirror(t, o2, "s3://data/out").LeaseLive(ctx); err != nil || got {
		t.Errorf("a lease not renewed for its TTL: LeaseLive %t, %v", got, err)
	}
}
