package llm

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func testPool(t *testing.T, caps ...int) (*pool, *fakeClock) {
	t.Helper()
	var eps []Endpoint
	for i, c := range caps {
		eps = append(eps, Endpoint{BaseURL: "http://ep" + string(rune('a'+i)), MaxInFlight: c})
	}
	p := newPool(poolConfig{breakerFailures: 3, breakerCooldown: 10 * time.Second, latencyTolerance: 2}, eps, func(Endpoint) *openai.Client { return nil })
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	p.now = clk.now
	return p, clk
}

func mustAcquire(t *testing.T, p *pool) ticket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tk, err := p.acquire(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestPoolOneCutPerBurst(t *testing.T) {
	p, _ := testPool(t, 8)
	var burst []ticket
	for range 8 {
		burst = append(burst, mustAcquire(t, p))
	}
	for _, tk := range burst {
		p.release(tk, outcome{class: classRateLimited})
	}
	e := p.eps[0]
	if e.cuts != 1 || e.limit != 4 {
		t.Fatalf("8 429s of one burst: %d cuts, limit %v; want 1 cut to 4", e.cuts, e.limit)
	}
	// A 429 for a request sent after the cut is a new burst.
	tk := mustAcquire(t, p)
	p.release(tk, outcome{class: classRateLimited})
	if e.cuts != 2 || e.limit != 2 {
		t.Fatalf("new burst: %d cuts, limit %v", e.cuts, e.limit)
	}
	// Probing back up: about √max more slots per limit's worth of successes.
	for range 200 {
		p.release(mustAcquire(t, p), outcome{latency: 10 * time.Millisecond})
	}
	if e.limit != 8 {
		t.Fatalf("limit after 200 successes: %v, want back at the cap 8", e.limit)
	}
}

// wave sends k requests at once (so the i-th goes out with i in flight)
// and answers them in order, each after lat(i) with tokens completion
// tokens.
func wave(t *testing.T, p *pool, k int, lat func(inflight int) (time.Duration, int)) {
	t.Helper()
	var tks []ticket
	for range k {
		tks = append(tks, mustAcquire(t, p))
	}
	for _, tk := range tks {
		d, tokens := lat(tk.inflight)
		p.release(tk, outcome{latency: d, tokens: tokens})
	}
}

func TestPoolLatencyBackoff(t *testing.T) {
	p, _ := testPool(t, 16)
	e := p.eps[0]
	perToken := time.Millisecond
	sizes := []int{16, 3, 9, 1, 12, 6, 16, 2}
	waves := func(n int, lat func(inflight int) (time.Duration, int)) {
		for i := range n {
			wave(t, p, min(sizes[i%len(sizes)], int(e.limit)), lat)
		}
	}
	waves(20, func(int) (time.Duration, int) { return perToken * (16 + 16), 16 })
	if e.cuts != 0 || e.limit != 16 {
		t.Fatalf("steady latency cut the limit: %+v", e)
	}
	// Longer answers take longer without any overload: per token the time
	// is the same, so no cut.
	waves(20, func(int) (time.Duration, int) { return perToken * (400 + 16), 400 })
	if e.cuts != 0 || e.limit != 16 {
		t.Fatalf("longer answers were taken for overload: cuts %d limit %v", e.cuts, e.limit)
	}
	// A server with flat latency, 90 ms give or take 10, whatever the load,
	// and answers from 4 to 500 tokens: per token the time varies
	// fiftyfold, but not with the load. Nothing to back off from (issue 18:
	// this cut the limit to a third of the ceiling).
	rng := rand.New(rand.NewPCG(1, 2))
	waves(400, func(int) (time.Duration, int) {
		return 80*time.Millisecond + time.Duration(rng.Int64N(int64(20*time.Millisecond))), 4 + rng.IntN(497)
	})
	if e.cuts != 0 || e.limit != 16 {
		t.Fatalf("jitter was taken for overload: cuts %d limit %v", e.cuts, e.limit)
	}
	// The server starts queueing: each request waits for those sent before
	// it, so time per token climbs with the number in flight.
	lowest := e.limit
	waves(30, func(inflight int) (time.Duration, int) {
		lowest = min(lowest, e.limit)
		return time.Duration(inflight) * 20 * perToken * (400 + 16), 400
	})
	if e.cuts == 0 || lowest > 8 {
		t.Fatalf("latency climbing with the load did not cut: cuts %d, lowest limit %v", e.cuts, lowest)
	}
}

func TestPoolRetryAfterPauses(t *testing.T) {
	p, clk := testPool(t, 4)
	p.release(mustAcquire(t, p), outcome{class: classRateLimited, retryAfter: 2 * time.Second})
	p.mu.Lock()
	_, ok, wakeAt, down := p.pick(nil)
	p.mu.Unlock()
	if ok || down || !wakeAt.Equal(clk.now().Add(2*time.Second)) {
		t.Fatalf("paused endpoint: ok=%v down=%v wake=%v", ok, down, wakeAt.Sub(clk.now()))
	}
	clk.advance(2 * time.Second)
	mustAcquire(t, p)
}

// pickAvoiding takes a slot, preferring any endpoint but avoid.
func pickAvoiding(t *testing.T, p *pool, avoid *endpoint) ticket {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	tk, ok, _, _ := p.pick(avoid)
	if !ok {
		t.Fatal("no endpoint available")
	}
	return tk
}

func TestPoolBreaker(t *testing.T) {
	p, clk := testPool(t, 4, 4)
	dead, live := p.eps[0], p.eps[1]
	for range 3 {
		tk := pickAvoiding(t, p, live)
		if tk.ep != dead {
			t.Fatal("setup: attempt did not go to the first endpoint")
		}
		p.release(tk, outcome{class: classConnection})
	}
	if dead.state != breakerOpen || dead.trips != 1 {
		t.Fatalf("3 connection failures: state %v trips %d", dead.state, dead.trips)
	}
	for range 20 {
		tk := pickAvoiding(t, p, live)
		if tk.ep == dead {
			t.Fatal("open endpoint got work")
		}
		p.release(tk, outcome{})
	}
	// After the cooldown one probe goes to the dead endpoint; while it is
	// out, no other attempt does. Its failure doubles the cooldown.
	clk.advance(10 * time.Second)
	probe := pickAvoiding(t, p, live)
	if probe.ep != dead || !probe.probe || dead.state != breakerHalfOpen {
		t.Fatalf("probe %+v state %v", probe, dead.state)
	}
	if tk := pickAvoiding(t, p, live); tk.ep != live {
		t.Fatal("second attempt during the probe went to the half-open endpoint")
	} else {
		p.release(tk, outcome{})
	}
	p.release(probe, outcome{class: classTimeout})
	if dead.state != breakerOpen || dead.openUntil.Sub(clk.now()) != 20*time.Second {
		t.Fatalf("failed probe: state %v reopens in %v", dead.state, dead.openUntil.Sub(clk.now()))
	}
	clk.advance(20 * time.Second)
	probe = pickAvoiding(t, p, live)
	if probe.ep != dead || !probe.probe {
		t.Fatalf("second probe: %+v", probe)
	}
	p.release(probe, outcome{})
	if dead.state != breakerClosed || dead.cooldown != 10*time.Second {
		t.Fatalf("successful probe: state %v cooldown %v", dead.state, dead.cooldown)
	}
}

func TestPoolAllDown(t *testing.T) {
	p, _ := testPool(t, 2)
	for range 3 {
		p.release(mustAcquire(t, p), outcome{class: classServer})
	}
	if _, err := p.acquire(context.Background(), nil, nil); !errors.Is(err, errUnavailable) {
		t.Fatalf("all endpoints open: %v", err)
	}
}

func TestPoolWaitersAndCap(t *testing.T) {
	p, _ := testPool(t, 2)
	a, b := mustAcquire(t, p), mustAcquire(t, p)
	got := make(chan ticket)
	go func() {
		tk, err := p.acquire(context.Background(), nil, nil)
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	// The waiter must not get a slot while both are taken.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.acquire(ctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	p.release(a, outcome{})
	c := <-got
	if p.eps[0].inFlight != 2 {
		t.Fatalf("in flight %d, want 2", p.eps[0].inFlight)
	}
	p.release(b, outcome{})
	p.release(c, outcome{})
	if p.eps[0].inFlight != 0 || len(p.waiters) != 0 {
		t.Fatalf("leak: in flight %d, waiters %d", p.eps[0].inFlight, len(p.waiters))
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	l := h.summary()
	within := func(got, want float64) bool { return got > want*0.96 && got < want*1.04 }
	if l.Count != 1000 || !within(l.P50, 500) || !within(l.P90, 900) || !within(l.P99, 990) || l.Max != 1000 {
		t.Fatalf("%+v", l)
	}
	for _, us := range []uint64{0, 1, 15, 16, 17, 31, 32, 1000, 1 << 30, 1 << 39, 1<<40 + 5, 1 << 62} {
		i := histIndex(us)
		if i < 0 || i >= histBuckets {
			t.Fatalf("index %d of %d out of range", i, us)
		}
		if us < 1<<39 {
			if v := histValue(i); v < float64(us)*0.96 || v > float64(us)*1.04+1 {
				t.Errorf("bucket value %v for %d", v, us)
			}
		}
	}
	if (&histogram{}).summary() != (Latency{}) {
		t.Error("empty histogram")
	}
}

// A successful attempt's result is kept while its endpoint slot is still
// held, and an error from keeping it ends the run without a class.
func TestPoolKeepsBeforeRelease(t *testing.T) {
	p, _ := testPool(t, 1)
	rp := retryPolicy{timeout: time.Second, retries: 2, base: time.Millisecond, maxWait: time.Millisecond}
	h := halt{done: make(chan struct{}), err: func() error { return nil }}
	ok := func(context.Context, *callMeta, *openai.Client) error { return nil }
	held := -1
	keep := func() error {
		p.mu.Lock()
		held = p.eps[0].inFlight
		p.mu.Unlock()
		return nil
	}
	if n, class, err := p.run(context.Background(), rp, newStageStats(), h, ok, keep); n != 1 || class != "" || err != nil || held != 1 {
		t.Fatalf("attempts %d class %q err %v; slots held while keeping: %d, want 1", n, class, err, held)
	}
	diskFull := errors.New("disk full")
	n, class, err := p.run(context.Background(), rp, newStageStats(), h, ok, func() error { return diskFull })
	if n != 1 || class != "" || !errors.Is(err, diskFull) || p.eps[0].inFlight != 0 {
		t.Fatalf("attempts %d class %q err %v in flight %d", n, class, err, p.eps[0].inFlight)
	}
}

// Waiters parked while a half-open endpoint's probe is out must not be
// forgotten when the probe fails and the breaker opens again (issue 18:
// every worker parked in acquire with nothing in flight). Each waiter must
// come back within bounded time: with a slot once the endpoint is
// probed again, or with errUnavailable while every breaker is open.
func TestPoolWaitersSurviveAFailedProbe(t *testing.T) {
	p := newPool(poolConfig{breakerFailures: 2, breakerCooldown: 20 * time.Millisecond}, []Endpoint{{BaseURL: "http://a", MaxInFlight: 4}},
		func(Endpoint) *openai.Client { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	never := make(chan struct{})
	// closed → open
	for range 2 {
		tk, err := p.acquire(ctx, nil, never)
		if err != nil {
			t.Fatal(err)
		}
		p.release(tk, outcome{class: classServer})
	}
	if e := p.eps[0]; e.state != breakerOpen {
		t.Fatalf("after 2 failures: %v", e.state)
	}
	// open → half-open: the probe goes out.
	time.Sleep(25 * time.Millisecond)
	probe, err := p.acquire(ctx, nil, never)
	if err != nil || !probe.probe {
		t.Fatalf("probe: %+v %v", probe, err)
	}
	// Waiters arrive while the probe is in flight.
	const waiters = 8
	type result struct {
		tk  ticket
		err error
	}
	results := make(chan result, waiters)
	for range waiters {
		go func() {
			tk, err := p.acquire(ctx, nil, never)
			results <- result{tk, err}
		}()
	}
	for {
		p.mu.Lock()
		n := len(p.waiters)
		p.mu.Unlock()
		if n == waiters {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The probe fails: half-open → open.
	p.release(probe, outcome{class: classTimeout})
	if e := p.eps[0]; e.state != breakerOpen {
		t.Fatalf("after the failed probe: %v", e.state)
	}
	deadline := time.After(10 * time.Second)
	for i := range waiters {
		select {
		case r := <-results:
			switch {
			case r.err == nil:
				p.release(r.tk, outcome{})
			case errors.Is(r.err, errUnavailable):
			default:
				t.Fatalf("waiter: %v", r.err)
			}
		case <-deadline:
			t.Fatalf("%d of %d waiters still parked 10s after the failed probe (cooldown 40ms)", waiters-i, waiters)
		}
	}
}

// A halted run wakes its waiters at once.
func TestPoolAcquireStopsOnHalt(t *testing.T) {
	p, _ := testPool(t, 1)
	mustAcquire(t, p)
	halted := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := p.acquire(context.Background(), nil, halted)
		done <- err
	}()
	close(halted)
	select {
	case err := <-done:
		if !errors.Is(err, errHalted) {
			t.Fatalf("halted acquire: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acquire ignored the halt")
	}
}
