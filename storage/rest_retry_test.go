package storage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// busyStore answers the first refuse requests 503 without passing them
// on (the first, or every one, with Retry-After), then passes them to the
// store.
type busyStore struct {
	base   http.RoundTripper
	refuse atomic.Int32
	first  atomic.Bool // the next refusal is the first: it carries Retry-After
	every  bool        // every refusal carries it
	after  string      // the refusals' Retry-After
	reqs   atomic.Int32
}

func (b *busyStore) RoundTrip(req *http.Request) (*http.Response, error) {
	b.reqs.Add(1)
	if b.refuse.Add(-1) < 0 {
		return b.base.RoundTrip(req)
	}
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	h := http.Header{}
	if b.first.Swap(false) || b.every {
		h.Set("Retry-After", b.after)
	}
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Header: h,
		Body: io.NopCloser(strings.NewReader("busy")), Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// restOf is the REST client of a GCS or Azure store.
func restOf(t *testing.T, s blobStore) *rest {
	t.Helper()
	switch s := s.(type) {
	case *gcsStore:
		return &s.rest
	case *azureStore:
		return &s.rest
	}
	t.Fatalf("%T is no REST client", s)
	return nil
}

// GCS and Azure ask again with S3's budget (QA: they gave up after 2.6 s,
// 4 tries, while S3 went on for 20 s), pausing as Retry-After says, else
// by the backoff; a Retry-After that would take the pauses past the
// budget ends the tries at once. The pauses are recorded, not waited out.
func testCloudRetries(t *testing.T, c cloud) {
	c.put("busy/x.jsonl", []byte("{}\n"))
	b := &busyStore{base: http.DefaultTransport}
	o := c.opener(b)
	s, err := o.store(mustParse(t, c.url("x")).Kind)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var pauses []time.Duration
	restOf(t, s).pause = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		pauses = append(pauses, d)
		return nil
	}
	ctx := context.Background()
	try := func(refuse int, after string) error {
		b.refuse.Store(int32(refuse))
		b.first.Store(true)
		b.after = after
		b.reqs.Store(0)
		pauses = nil
		_, err := o.Stat(ctx, c.url("busy/x.jsonl"))
		return err
	}

	if err := try(6, "3"); err != nil {
		t.Fatalf("6 answers 503, then the object: %v", err)
	}
	want := []time.Duration{3 * time.Second}
	for i := 2; i <= 6; i++ {
		want = append(want, restBackoff(i))
	}
	if fmt.Sprint(pauses) != fmt.Sprint(want) || b.reqs.Load() != 7 {
		t.Errorf("%d requests, pauses %v; want 7 and %v (Retry-After, then the backoff)", b.reqs.Load(), pauses, want)
	}

	err = try(1000, "0")
	if !IsUnavailable(err) || !strings.Contains(err.Error(), "503") || b.reqs.Load() != restTries || len(pauses) != restTries-1 {
		t.Errorf("503 every time: %v after %d requests, %d pauses; want an UnavailableError after %d", err, b.reqs.Load(), len(pauses), restTries)
	}

	err = try(1000, strconv.Itoa(int(restBudget/time.Second)+1))
	if !IsUnavailable(err) || b.reqs.Load() != 1 || len(pauses) != 0 {
		t.Errorf("Retry-After beyond %v: %v after %d requests; want the answer at once", restBudget, err, b.reqs.Load())
	}
	// The message says why augment stopped asking (QA: it ended in the
	// server's empty text, a bare colon).
	if msg := fmt.Sprint(err); !strings.Contains(msg, "so after augment's retries (at most 10 tries and 30s of waiting per request), the last answer asking to wait 31 s") {
		t.Errorf("Retry-After beyond the budget: message %q does not say why the tries ended", msg)
	}

	// Retry-After: 20 each time: the second would go past the budget.
	b.every = true
	err = try(1000, "20")
	if !IsUnavailable(err) || b.reqs.Load() != 2 || fmt.Sprint(pauses) != "[20s]" {
		t.Errorf("Retry-After: 20 on every answer: %v after %d requests, pauses %v; want the answer after 2, one pause of 20s", err, b.reqs.Load(), pauses)
	}
}

// The REST clients' backoff adds up to S3's budget, minio-go's 10 tries
// over about 20 s, within restBudget.
func TestRESTRetryBudget(t *testing.T) {
	var total time.Duration
	for try := 1; try < restTries; try++ {
		total += restBackoff(try)
	}
	if restTries != 10 || total < 20*time.Second || total > 25*time.Second || total > restBudget {
		t.Errorf("%d tries pausing %v in all (budget %v); want S3's 10 tries over about 20 s, within the budget", restTries, total, restBudget)
	}
}
