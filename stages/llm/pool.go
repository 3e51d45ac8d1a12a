package llm

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"golang.org/x/sync/semaphore"
)

// errUnavailable is returned by acquire when every endpoint's breaker is
// open: the attempt fails at once (class "unavailable") instead of queueing
// behind dead servers.
var errUnavailable = errors.New("every endpoint is out of rotation after repeated failures")

type breakerState int

const (
	breakerClosed   breakerState = iota // serving
	breakerOpen                         // out of rotation until openUntil
	breakerHalfOpen                     // one probe request decides
)

func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half_open"
	}
	return "closed"
}

// An endpoint is one server with its own adaptive concurrency limit and
// circuit breaker. Fields below mu are guarded by the pool's mutex.
type endpoint struct {
	url string
	max int
	// sem enforces max as a hard cap whatever the adaptive bookkeeping does.
	sem    *semaphore.Weighted
	client *openai.Client

	inFlight int
	// limit is the adaptive concurrency limit, 1 ≤ limit ≤ max. It is cut
	// multiplicatively on overload (429, climbing latency) and grows by
	// about √max per limit's worth of successes.
	limit float64
	// epoch increases at every cut; an overload signal from a request sent
	// before the latest cut belongs to the burst already answered, so it
	// does not cut again ("one cut per burst").
	epoch       uint64
	pausedUntil time.Time // Retry-After: no new requests before this

	state     breakerState
	fails     int // consecutive breaker failures
	openUntil time.Time
	cooldown  time.Duration
	probing   bool

	// Time to first byte, exponentially weighted: short reacts within a few
	// requests, long over a few hundred.
	shortTTFB, longTTFB float64
	ttfbSamples         int

	sent, failures, cuts, trips int64
}

// EndpointStats describes one endpoint for progress output and manifests.
type EndpointStats struct {
	BaseURL  string  `json:"base_url"`
	InFlight int     `json:"in_flight"`
	Limit    float64 `json:"limit"` // current adaptive concurrency limit
	Max      int     `json:"max_in_flight"`
	Breaker  string  `json:"breaker"` // "closed", "open", "half_open"
	Sent     int64   `json:"sent"`
	Failures int64   `json:"failures"` // failed attempts, 429s not counted
	Cuts     int64   `json:"cuts"`     // times the limit was cut for overload
	Trips    int64   `json:"trips"`    // times the breaker opened
}

type poolConfig struct {
	breakerFailures  int
	breakerCooldown  time.Duration
	latencyTolerance float64 // ≤ 0 disables the latency signal
	// redact cleans the errors of failed attempts (see pool.run).
	redact redactor
}

// A pool spreads attempts over endpoints: the least loaded healthy one
// (in flight relative to its limit) takes the next attempt; callers wait
// in FIFO order when all are busy.
type pool struct {
	cfg poolConfig
	now func() time.Time

	mu      sync.Mutex
	eps     []*endpoint
	waiters []chan struct{}
}

func newPool(cfg poolConfig, eps []Endpoint, client func(Endpoint) *openai.Client) *pool {
	p := &pool{cfg: cfg, now: time.Now}
	for _, e := range eps {
		p.eps = append(p.eps, &endpoint{
			url:      e.BaseURL,
			max:      e.MaxInFlight,
			sem:      semaphore.NewWeighted(int64(e.MaxInFlight)),
			client:   client(e),
			limit:    float64(e.MaxInFlight),
			cooldown: cfg.breakerCooldown,
		})
	}
	return p
}

// capacity is the total configured in-flight cap.
func (p *pool) capacity() int {
	n := 0
	for _, e := range p.eps {
		n += e.max
	}
	return n
}

// A ticket is one attempt's claim on an endpoint.
type ticket struct {
	ep    *endpoint
	epoch uint64
	probe bool
}

// errHalted is returned by acquire when the run has stopped (see halt).
var errHalted = errors.New("the run has stopped")

// recheckEvery bounds every wait in acquire: a waiter looks at the
// endpoints again at least this often even if no release wakes it, so a
// missed wake-up can delay an attempt but never park it for good.
const recheckEvery = time.Second

// acquire waits for a free slot on a healthy endpoint, preferring one other
// than avoid (the endpoint of the previous failed attempt). It returns
// errUnavailable at once when every endpoint's breaker is open, and
// errHalted as soon as halted is closed.
//
// Waiters are woken, oldest first, when slots free up, and all of them
// when a breaker changes state; besides, each wait ends by the time an
// endpoint may take work again (Retry-After pause or cooldown over) or
// after recheckEvery, whichever comes first.
func (p *pool) acquire(ctx context.Context, avoid *endpoint, halted <-chan struct{}) (ticket, error) {
	for {
		p.mu.Lock()
		t, ok, wakeAt, down := p.pick(avoid)
		if ok {
			p.mu.Unlock()
			return t, nil
		}
		if down {
			p.mu.Unlock()
			return ticket{}, errUnavailable
		}
		w := make(chan struct{}, 1)
		p.waiters = append(p.waiters, w)
		p.mu.Unlock()

		wait := recheckEvery
		if !wakeAt.IsZero() {
			wait = min(wait, max(wakeAt.Sub(p.now()), time.Millisecond))
		}
		tm := time.NewTimer(wait)
		var err error
		select {
		case <-w:
		case <-tm.C:
			p.dropWaiter(w)
		case <-ctx.Done():
			p.dropWaiter(w)
			err = ctx.Err()
		case <-halted:
			p.dropWaiter(w)
			err = errHalted
		}
		tm.Stop()
		if err != nil {
			return ticket{}, err
		}
	}
}

// dropWaiter removes w from the queue; if w was signalled meanwhile, the
// signal passes to the next waiter so no free slot goes unnoticed.
func (p *pool) dropWaiter(w chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
	select {
	case <-w:
		p.signal(1)
	default:
	}
}

// pick chooses an endpoint under p.mu. When none can take an attempt now it
// returns the earliest time one might (zero if only a release can help) and
// whether every endpoint is out of rotation.
func (p *pool) pick(avoid *endpoint) (t ticket, ok bool, wakeAt time.Time, down bool) {
	now := p.now()
	var best *endpoint
	bestLoad := math.Inf(1)
	open := 0
	for _, e := range p.eps {
		if e.state == breakerOpen {
			if now.Before(e.openUntil) {
				open++
				wakeAt = earliest(wakeAt, e.openUntil)
				continue
			}
			e.state, e.probing = breakerHalfOpen, false
		}
		if now.Before(e.pausedUntil) {
			wakeAt = earliest(wakeAt, e.pausedUntil)
			continue
		}
		limit := max(1, int(e.limit))
		if e.state == breakerHalfOpen {
			if e.probing {
				continue
			}
			limit = 1
		}
		if e.inFlight >= limit {
			continue
		}
		load := float64(e.inFlight+1) / float64(limit)
		if e == avoid {
			load += 1 // only if nothing else is free
		}
		if load < bestLoad {
			best, bestLoad = e, load
		}
	}
	if best == nil {
		return ticket{}, false, wakeAt, open == len(p.eps)
	}
	if !best.sem.TryAcquire(1) {
		// Cannot happen while inFlight < limit ≤ max; treat as busy.
		return ticket{}, false, wakeAt, false
	}
	best.inFlight++
	best.sent++
	t = ticket{ep: best, epoch: best.epoch}
	if best.state == breakerHalfOpen {
		best.probing, t.probe = true, true
	}
	return t, true, time.Time{}, false
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// An outcome is what one attempt observed.
type outcome struct {
	class      string        // "" for an answer, else the error class
	ttfb       time.Duration // time to the response headers (0 if none)
	tokens     int           // completion tokens of the answer, 0 if unknown
	retryAfter time.Duration // from a 429 or 503, 0 if absent
}

// release returns t's slot and feeds the outcome to the endpoint's limit and
// breaker.
func (p *pool) release(t ticket, o outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := t.ep
	e.inFlight--
	e.sem.Release(1)
	now := p.now()
	state := e.state
	if o.retryAfter > 0 {
		e.pausedUntil = laterOf(e.pausedUntil, now.Add(o.retryAfter))
	}
	switch {
	case o.class == classCanceled:
		// The caller gave up; nothing learnt about the endpoint, and a
		// probe must be sent again.
		if t.probe {
			e.probing = false
		}
	case o.class == "":
		e.fails = 0
		if e.state != breakerClosed {
			e.state, e.probing, e.cooldown = breakerClosed, false, p.cfg.breakerCooldown
		}
		if f := p.overload(e, o.ttfb, o.tokens); f < 1 && t.epoch == e.epoch {
			p.cut(e, f)
		} else {
			// Probe back up: about √max more slots per limit's worth of
			// answers, so a cut heals within a few rounds.
			e.limit = min(float64(e.max), e.limit+math.Sqrt(float64(e.max))/e.limit)
		}
	case o.class == classRateLimited:
		if t.probe {
			e.state, e.probing = breakerClosed, false
		}
		if t.epoch == e.epoch {
			p.cut(e, 0.5)
		}
	case breakerFailure(o.class):
		e.failures++
		e.fails++
		switch {
		case t.probe:
			e.cooldown = min(2*e.cooldown, 16*p.cfg.breakerCooldown)
			p.trip(e, now)
		case e.state == breakerClosed && e.fails >= p.cfg.breakerFailures:
			p.trip(e, now)
		}
	default:
		// The server answered, just not with a completion (400, 401, 404):
		// it is alive.
		e.failures++
		e.fails = 0
		if t.probe {
			e.state, e.probing = breakerClosed, false
		}
	}
	if e.state != state || t.probe {
		// The breaker moved (or a probe slot came free): every waiter
		// decides anew, to take a slot, wait for a cooldown's end or give
		// up when every endpoint is out of rotation.
		p.signal(len(p.waiters))
		return
	}
	p.signal(p.freeSlots())
}

func (p *pool) trip(e *endpoint, now time.Time) {
	e.state, e.probing = breakerOpen, false
	e.openUntil = now.Add(e.cooldown)
	e.trips++
}

// overload feeds a time to first byte into e's averages and returns the
// factor to cut e's limit by: 1 while the recent average stays within the
// tolerance of the long-run one, else tolerance × long ÷ recent (at least
// 0.5), so a small climb cuts a little and a steep one halves the limit.
//
// A non-streaming server sends its headers when the answer is complete, so
// the time is divided by the answer's length (plus a constant for the
// prompt's share) to compare answers of different lengths: an overloaded
// server queues requests and decodes each token more slowly, so this
// per-token time climbs.
func (p *pool) overload(e *endpoint, ttfb time.Duration, tokens int) float64 {
	if ttfb <= 0 {
		return 1
	}
	s := ttfb.Seconds()
	if tokens > 0 {
		s /= float64(tokens + 16)
	}
	if e.ttfbSamples == 0 {
		e.shortTTFB, e.longTTFB = s, s
	}
	e.ttfbSamples++
	e.shortTTFB += 0.1 * (s - e.shortTTFB)
	e.longTTFB += 0.005 * (s - e.longTTFB)
	tol := p.cfg.latencyTolerance
	if tol <= 0 || e.ttfbSamples < 50 || e.shortTTFB <= tol*e.longTTFB {
		return 1
	}
	return max(0.5, tol*e.longTTFB/e.shortTTFB)
}

func (p *pool) cut(e *endpoint, factor float64) {
	e.limit = max(1, e.limit*factor)
	e.epoch++
	e.cuts++
}

// freeSlots counts attempts the endpoints could take right now.
func (p *pool) freeSlots() int {
	now := p.now()
	n := 0
	for _, e := range p.eps {
		switch {
		case e.state == breakerOpen && now.Before(e.openUntil), now.Before(e.pausedUntil):
		case e.state != breakerClosed:
			if !e.probing {
				n++
			}
		default:
			n += max(0, max(1, int(e.limit))-e.inFlight)
		}
	}
	return n
}

// signal wakes up to n waiters, oldest first.
func (p *pool) signal(n int) {
	for ; n > 0 && len(p.waiters) > 0; n-- {
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		w <- struct{}{}
	}
}

func (p *pool) stats() []EndpointStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]EndpointStats, len(p.eps))
	for i, e := range p.eps {
		out[i] = EndpointStats{
			BaseURL: e.url, InFlight: e.inFlight, Limit: math.Round(e.limit*100) / 100, Max: e.max,
			Breaker: e.state.String(), Sent: e.sent, Failures: e.failures, Cuts: e.cuts, Trips: e.trips,
		}
	}
	return out
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
