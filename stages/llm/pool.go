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
	// multiplicatively on overload (429, latency rising with load) and
	// grows by about √max per limit's worth of successes.
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

	// load relates the latency of answers to the number in flight when
	// each request was sent and to the answer's length: only a rise that
	// follows the load is overload.
	load loadStats

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
	ep       *endpoint
	epoch    uint64
	probe    bool
	inflight int // requests in flight at ep with this one
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
	t = ticket{ep: best, epoch: best.epoch, inflight: best.inFlight}
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
	latency    time.Duration // from sending to the decoded answer (answers only)
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
		if f := p.overload(e, o.latency, o.tokens, t.inflight); f < 1 && t.epoch == e.epoch {
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

// overload feeds an answer's latency (sending to decoded answer: a server
// may send its headers before the answer is ready), its length and the
// number of requests in flight at the endpoint when it was sent (x) into e's
// statistics, and returns the factor to cut e's limit by (1: no cut).
//
// Over the last hundred or so answers it fits latency = a + b·x + c·tokens
// and cuts only when the latency rises with the number in flight (a real
// queue: a server that cannot batch more answers later the more it is
// sent), namely when
//
//   - x varied (standard deviation at least 1) and the partial correlation
//     of latency with x, the length held constant, is at least
//     minQueueCorrelation, and
//   - the fitted latency at this x, for an answer of mean length, exceeds
//     the tolerance times the fitted latency with nothing in flight.
//
// Latency that climbs or jitters without following x (a flat server's
// noise, answers of different lengths, a slow moment of the client or of
// a server shared with others) cuts nothing (issue 18: jitter cut the
// limit to a third of the ceiling). The cut aims at the x where the fit
// gives tolerance × the no-load latency, at most halving the limit.
func (p *pool) overload(e *endpoint, latency time.Duration, tokens, inflight int) float64 {
	if latency <= 0 {
		return 1
	}
	c := &e.load
	c.add(float64(inflight), float64(tokens), latency.Seconds())
	tol := p.cfg.latencyTolerance
	if tol <= 0 || c.n < minFit || c.spread() < 1 || c.queueCorrelation() < minQueueCorrelation {
		return 1
	}
	b := c.loadSlope()
	x := float64(inflight)
	now := c.my + b*(x-c.mx) // fitted latency at this load, mean length
	idle := c.my - b*c.mx    // … with nothing in flight
	if b <= 0 || now <= tol*max(idle, 0) {
		return 1
	}
	// now(x*) = tol·idle at x* = (tol−1)·idle/b.
	target := (tol - 1) * max(idle, 0) / b
	return min(1, max(0.5, target/x))
}

// minQueueCorrelation is the correlation between requests in flight and
// latency from which a rise counts as a queue. Between independent series
// the correlation over about a hundred samples stays within ±0.3 nearly
// always.
const minQueueCorrelation = 0.5

// minFit is how many answers the fit needs before it is used.
const minFit = 50

// loadStats keeps exponentially weighted means, variances and covariances
// of the number in flight (x), the answer's tokens (t) and the latency
// (y), each new answer weighing correlationAlpha.
type loadStats struct {
	n          int
	mx, mt, my float64
	xx, tt, yy float64
	xt, xy, ty float64
}

const correlationAlpha = 1.0 / 64

func (c *loadStats) add(x, t, y float64) {
	if c.n == 0 {
		c.mx, c.mt, c.my = x, t, y
	}
	c.n++
	a := correlationAlpha
	dx, dt, dy := x-c.mx, t-c.mt, y-c.my
	c.mx += a * dx
	c.mt += a * dt
	c.my += a * dy
	upd := func(v *float64, d float64) { *v = (1 - a) * (*v + a*d) }
	upd(&c.xx, dx*dx)
	upd(&c.tt, dt*dt)
	upd(&c.yy, dy*dy)
	upd(&c.xt, dx*dt)
	upd(&c.xy, dx*dy)
	upd(&c.ty, dt*dy)
}

// spread is the standard deviation of the number in flight.
func (c *loadStats) spread() float64 { return math.Sqrt(c.xx) }

// lengthVaries reports whether the answers' lengths vary independently
// enough of x to be held constant in the fit.
func (c *loadStats) lengthVaries() bool {
	return c.tt > 0 && c.xx*c.tt-c.xt*c.xt > 1e-9*c.xx*c.tt
}

// loadSlope is b, the fitted latency per request in flight.
func (c *loadStats) loadSlope() float64 {
	if c.xx <= 0 {
		return 0
	}
	if !c.lengthVaries() {
		return c.xy / c.xx
	}
	return (c.xy*c.tt - c.ty*c.xt) / (c.xx*c.tt - c.xt*c.xt)
}

// queueCorrelation is the partial correlation of latency with the number
// in flight, the answer's length held constant; 0 when undefined.
func (c *loadStats) queueCorrelation() float64 {
	r := func(cov, va, vb float64) float64 {
		if va <= 0 || vb <= 0 {
			return 0
		}
		return cov / math.Sqrt(va*vb)
	}
	rxy := r(c.xy, c.xx, c.yy)
	if !c.lengthVaries() {
		return rxy
	}
	rxt, rty := r(c.xt, c.xx, c.tt), r(c.ty, c.tt, c.yy)
	d := (1 - rxt*rxt) * (1 - rty*rty)
	if d <= 1e-12 {
		return 0
	}
	return (rxy - rxt*rty) / math.Sqrt(d)
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
			BaseURL: RedactURL(e.url), InFlight: e.inFlight, Limit: math.Round(e.limit*100) / 100, Max: e.max,
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
