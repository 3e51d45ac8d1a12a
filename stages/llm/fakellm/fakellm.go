// Package fakellm is a fake OpenAI-compatible server for tests, benchmarks
// and demos (`augment fake-llm`): chat completions and embeddings with
// scripted or echoed answers, configurable latency, a bounded number of
// requests served at once (the rest queue, as on a busy inference server),
// and deterministic fault injection (429 with Retry-After, 5xx, hangs,
// truncated answers, invalid JSON bodies, dropped connections, 400s that
// echo the request's credentials, an outage after a number of requests).
// It counts the requests it sees and the peak number in flight.
//
// Faults are chosen from a hash of the seed, the request body and how many
// times that same body has arrived before, so a run that sends the same
// requests meets the same faults, and a retried request gets a fresh draw.
// (The fake keeps one counter per distinct body while faults or jitter are
// on, about 50 bytes each.)
package fakellm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Config describes the fake's behaviour. The zero value answers every
// chat request at once by echoing the last user message.
type Config struct {
	// Model is reported in answers when the request names none
	// (default "fake-model").
	Model string `json:"model"`
	// Latency is the time from a request's arrival to its complete answer;
	// Jitter adds a deterministic pseudo-random [0, Jitter) on top. TTFB is
	// the part of it before the response headers are sent (it defaults to
	// the whole latency, as a non-streaming server behaves).
	Latency Duration `json:"latency"`
	Jitter  Duration `json:"jitter"`
	TTFB    Duration `json:"ttfb"`
	// Capacity, when positive, is how many requests are served at once; the
	// others wait in arrival order before their latency starts, so latency
	// grows with the number in flight beyond it, as on an inference server
	// whose batch is full. Zero serves every request at once.
	Capacity int `json:"capacity"`
	// Script answers chat requests whose last user message matches a rule,
	// first match wins; other requests get the message echoed back.
	Script []Rule `json:"script"`
	// Faults sets the share of requests that fail in each way.
	Faults Faults `json:"faults"`
	// Seed varies which requests meet faults.
	Seed uint64 `json:"seed"`
	// EmbedDim is the embedding size when a request sets no dimensions
	// (default 16).
	EmbedDim int `json:"embed_dim"`
	// Record keeps every request (arrival time, fault, body) for Log.
	Record bool `json:"record"`
	// MaxModelLen is listed as the model's context length by /models
	// (vLLM's max_model_len) when set.
	MaxModelLen int `json:"max_model_len"`
	// Batch shapes the Files and Batches endpoints (see batch.go).
	Batch BatchConfig `json:"batch"`
}

// A Rule maps matching chat requests to an answer.
type Rule struct {
	Contains string `json:"contains"` // substring of the last user message
	Regexp   string `json:"regexp"`   // or a regular expression; Answer may use $1…
	Answer   string `json:"answer"`
	// Reasoning, when set, is served as the answer's reasoning_content, as
	// a reasoning model behind vLLM's reasoning parser returns its
	// thinking; Regexp rules may use $1… in it too.
	Reasoning string `json:"reasoning"`
	// FinishReason overrides "stop" (e.g. "length").
	FinishReason string `json:"finish_reason"`
	re           *regexp.Regexp
}

// Faults are shares in [0, 1] of the requests that fail in each way; their
// sum must not exceed 1.
type Faults struct {
	RateLimit   float64  `json:"rate_limit"`   // 429 with Retry-After
	RetryAfter  Duration `json:"retry_after"`  // sent with 429 (default 1s)
	ServerError float64  `json:"server_error"` // 500, 502 (HTML body) or 503
	Hang        float64  `json:"hang"`         // no answer until the client gives up (or HangFor)
	HangFor     Duration `json:"hang_for"`     // default 10m
	Truncate    float64  `json:"truncate"`     // half the answer, finish_reason "length"
	InvalidJSON float64  `json:"invalid_json"` // 200 with a body cut mid-JSON
	Drop        float64  `json:"drop"`         // connection closed without an answer
	// EchoAuth answers 400 with a message quoting the request's
	// Authorization and api-key headers, as a careless proxy does.
	EchoAuth float64 `json:"echo_auth"`
	// Delay is how long a 429, 5xx, 400 or dropped connection takes to
	// come (default at once), as a server that fails after working on the
	// request for a while.
	Delay Duration `json:"delay"`
	// DownAfter, when positive, makes every chat and embeddings request
	// after the first DownAfter (counted from New or SetFaults) answer 503:
	// a server that went down.
	DownAfter int64 `json:"down_after"`
}

type faultRate struct {
	kind string
	rate float64
}

// rates lists the fault shares in the order draws test them.
func (f Faults) rates() []faultRate {
	return []faultRate{
		{FaultRateLimit, f.RateLimit}, {FaultServerError, f.ServerError}, {FaultHang, f.Hang},
		{FaultTruncate, f.Truncate}, {FaultInvalidJSON, f.InvalidJSON}, {FaultDrop, f.Drop},
		{FaultEchoAuth, f.EchoAuth},
	}
}

// Fault kinds as reported in Counters.Faults and Seen.Fault.
const (
	FaultNone        = ""
	FaultRateLimit   = "rate_limit"
	FaultServerError = "server_error"
	FaultHang        = "hang"
	FaultTruncate    = "truncate"
	FaultInvalidJSON = "invalid_json"
	FaultDrop        = "drop"
	FaultEchoAuth    = "echo_auth"
	FaultDown        = "down" // after Faults.DownAfter requests
)

// Duration is a time.Duration written "1.5s" in JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalText writes d as "1.5s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses "1.5s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q", b)
	}
	*d = Duration(v)
	return nil
}

// ParseConfig reads a JSON Config; unknown fields are errors.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("fake-llm config: %w", err)
	}
	return c, nil
}

// RegisterFlags adds flags for the scalar settings to fs, writing into c.
// The script is set from JSON only (ParseConfig).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "model name reported in answers")
	fs.DurationVar((*time.Duration)(&c.Latency), "latency", c.Latency.D(), "time to answer each request")
	fs.DurationVar((*time.Duration)(&c.Jitter), "jitter", c.Jitter.D(), "extra pseudo-random latency, up to this much")
	fs.DurationVar((*time.Duration)(&c.TTFB), "ttfb", c.TTFB.D(), "time before the response headers (default: the whole latency)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the fault draws")
	fs.IntVar(&c.EmbedDim, "embed-dim", c.EmbedDim, "embedding size (default 16)")
	fs.BoolVar(&c.Record, "record", c.Record, "keep a log of every request (GET /fake/log)")
	fs.Float64Var(&c.Faults.RateLimit, "fault-429", c.Faults.RateLimit, "share of requests answered 429")
	fs.DurationVar((*time.Duration)(&c.Faults.RetryAfter), "retry-after", c.Faults.RetryAfter.D(), "Retry-After sent with 429 (default 1s)")
	fs.Float64Var(&c.Faults.ServerError, "fault-5xx", c.Faults.ServerError, "share of requests answered 500/502/503")
	fs.Float64Var(&c.Faults.Hang, "fault-hang", c.Faults.Hang, "share of requests never answered")
	fs.DurationVar((*time.Duration)(&c.Faults.HangFor), "hang-for", c.Faults.HangFor.D(), "how long a hung request waits (default 10m)")
	fs.Float64Var(&c.Faults.Truncate, "fault-truncate", c.Faults.Truncate, "share of answers cut short (finish_reason length)")
	fs.Float64Var(&c.Faults.InvalidJSON, "fault-invalid-json", c.Faults.InvalidJSON, "share of answers with a broken JSON body")
	fs.Float64Var(&c.Faults.Drop, "fault-drop", c.Faults.Drop, "share of connections closed without an answer")
	fs.Float64Var(&c.Faults.EchoAuth, "fault-echo-auth", c.Faults.EchoAuth, "share of requests answered 400 quoting their Authorization header")
	fs.DurationVar((*time.Duration)(&c.Faults.Delay), "fault-delay", c.Faults.Delay.D(), "time before a fault answer is sent")
	fs.Int64Var(&c.Faults.DownAfter, "down-after", c.Faults.DownAfter, "answer 503 to every request after this many (0: never)")
	fs.IntVar(&c.Capacity, "capacity", c.Capacity, "requests served at once, the rest queue (0: no limit)")
}

// Validate reports what is wrong with c.
func (c *Config) Validate() error {
	var errs []error
	f := c.Faults
	sum := 0.0
	for _, r := range f.rates() {
		if r.rate < 0 || r.rate > 1 || math.IsNaN(r.rate) {
			errs = append(errs, fmt.Errorf("faults.%s: %v is outside [0, 1]", r.kind, r.rate))
		}
		sum += r.rate
	}
	if sum > 1+1e-9 {
		errs = append(errs, fmt.Errorf("faults: shares add up to %v > 1", sum))
	}
	if f.DownAfter < 0 {
		errs = append(errs, errors.New("faults.down_after must not be negative"))
	}
	if c.Capacity < 0 {
		errs = append(errs, errors.New("capacity must not be negative"))
	}
	for _, d := range []Duration{c.Latency, c.Jitter, c.TTFB, f.RetryAfter, f.HangFor, f.Delay} {
		if d < 0 {
			errs = append(errs, errors.New("durations must not be negative"))
			break
		}
	}
	for i, o := range c.Batch.Outcomes {
		switch o {
		case "", OutcomeCompleted, OutcomeFailed, OutcomeExpired, OutcomeCancelled:
		default:
			errs = append(errs, fmt.Errorf("batch.outcomes[%d]: unknown outcome %q", i, o))
		}
	}
	if b := c.Batch.ErrorShare; b < 0 || b > 1 || math.IsNaN(b) {
		errs = append(errs, fmt.Errorf("batch.error_share: %v is outside [0, 1]", b))
	}
	if c.Batch.Steps != nil && *c.Batch.Steps < 0 {
		errs = append(errs, errors.New("batch.steps must not be negative"))
	}
	for i, r := range c.Script {
		if (r.Contains == "") == (r.Regexp == "") {
			errs = append(errs, fmt.Errorf("script[%d]: set exactly one of contains and regexp", i))
		}
		if r.Regexp != "" {
			if _, err := regexp.Compile(r.Regexp); err != nil {
				errs = append(errs, fmt.Errorf("script[%d].regexp: %w", i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Seen is one recorded request.
type Seen struct {
	At    time.Time `json:"at"`
	Path  string    `json:"path"`
	Fault string    `json:"fault,omitempty"`
	// BodyHash identifies the request body; repeats of a request share it.
	BodyHash uint64 `json:"body_hash"`
	Body     []byte `json:"body"`
}

// Counters are the fake's running totals.
type Counters struct {
	Requests     int64            `json:"requests"` // every request, any path
	Chat         int64            `json:"chat"`
	Embeddings   int64            `json:"embeddings"`
	Answered     int64            `json:"answered"` // complete 200 answers
	InFlight     int64            `json:"in_flight"`
	PeakInFlight int64            `json:"peak_in_flight"`
	Faults       map[string]int64 `json:"faults,omitempty"`
	Batch        BatchCounters    `json:"batch"` // the Files and Batches endpoints
}

// Server is the fake, an http.Handler. Paths ending in /chat/completions,
// /embeddings and /models are served, and the Files and Batches endpoints
// (batch.go); GET /fake/counters returns Counters as JSON, and GET
// /fake/log the recorded requests (Config.Record) as JSON.
type Server struct {
	cfg   Config
	slots chan struct{} // Capacity tokens; nil without a capacity

	requests, chat, embeddings, answered atomic.Int64
	inFlight, peak                       atomic.Int64
	served                               atomic.Int64 // chat and embeddings requests, for DownAfter

	mu       sync.Mutex
	cfgFault Faults // the current faults (SetFaults), under mu
	faults   map[string]int64
	occur    map[uint64]uint64 // arrivals per body hash
	log      []Seen

	// Files and Batches endpoints (batch.go).
	files             map[string]*fakeFile
	batches           map[string]*fakeBatch
	batchList         []*fakeBatch // in creation order
	fileSeq, batchSeq int
	bc                BatchCounters
	pollFailed        int // GET /batches/{id} answered 503 (BatchConfig.PollFailures)
}

// New returns a fake serving cfg, or cfg's problems.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Model == "" {
		cfg.Model = "fake-model"
	}
	if cfg.EmbedDim == 0 {
		cfg.EmbedDim = 16
	}
	if cfg.Faults.RetryAfter == 0 {
		cfg.Faults.RetryAfter = Duration(time.Second)
	}
	if cfg.Faults.HangFor == 0 {
		cfg.Faults.HangFor = Duration(10 * time.Minute)
	}
	cfg.Script = append([]Rule(nil), cfg.Script...)
	for i := range cfg.Script {
		if cfg.Script[i].Regexp != "" {
			cfg.Script[i].re = regexp.MustCompile(cfg.Script[i].Regexp)
		}
	}
	s := &Server{cfg: cfg, cfgFault: cfg.Faults, faults: map[string]int64{}, occur: map[uint64]uint64{}}
	if cfg.Capacity > 0 {
		s.slots = make(chan struct{}, cfg.Capacity)
	}
	return s, nil
}

// SetFaults replaces the fault settings from now on (a server that goes
// down or recovers while a client runs). Unset RetryAfter and HangFor take
// their defaults.
func (s *Server) SetFaults(f Faults) error {
	c := s.cfg
	c.Faults = f
	if err := c.Validate(); err != nil {
		return err
	}
	if f.RetryAfter == 0 {
		f.RetryAfter = Duration(time.Second)
	}
	if f.HangFor == 0 {
		f.HangFor = Duration(10 * time.Minute)
	}
	s.mu.Lock()
	s.cfgFault = f
	if f.DownAfter > 0 {
		s.served.Store(0)
	}
	s.mu.Unlock()
	return nil
}

func (s *Server) currentFaults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfgFault
}

// Counters returns a snapshot of the totals.
func (s *Server) Counters() Counters {
	c := Counters{
		Requests: s.requests.Load(), Chat: s.chat.Load(), Embeddings: s.embeddings.Load(),
		Answered: s.answered.Load(), InFlight: s.inFlight.Load(), PeakInFlight: s.peak.Load(),
	}
	s.mu.Lock()
	if len(s.faults) > 0 {
		c.Faults = make(map[string]int64, len(s.faults))
		for k, v := range s.faults {
			c.Faults[k] = v
		}
	}
	c.Batch = s.bc
	s.mu.Unlock()
	return c
}

// Log returns the recorded requests in arrival order (empty unless
// Config.Record).
func (s *Server) Log() []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Seen(nil), s.log...)
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	n := s.inFlight.Add(1)
	left := false
	leave := func() { // the request stops counting as in flight
		if !left {
			left = true
			s.inFlight.Add(-1)
		}
	}
	defer leave()
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/fake/counters":
		writeJSON(w, http.StatusOK, s.Counters())
	case r.Method == http.MethodGet && path == "/fake/log":
		if !s.cfg.Record {
			writeError(w, http.StatusNotFound, "not_found", "requests are recorded with -record (record: true) only")
			return
		}
		writeJSON(w, http.StatusOK, s.Log())
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		m := map[string]any{"id": s.cfg.Model, "object": "model", "owned_by": "fakellm"}
		if s.cfg.MaxModelLen > 0 {
			m["max_model_len"] = s.cfg.MaxModelLen
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{m}})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		s.chat.Add(1)
		s.serve(w, r, s.answerChat, leave)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/embeddings"):
		s.embeddings.Add(1)
		s.serve(w, r, s.answerEmbeddings, leave)
	case isBatchAPI(path):
		s.serveBatchAPI(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+path)
	}
}

// An answerer builds the JSON answer of a well-formed request; a non-nil
// error is a 400 for the client.
type answerer func(body []byte, draw uint64, truncate bool) (any, error)

// serve answers a chat or embeddings request; leave is called when the
// request stops being in flight if that happens before serve returns.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, answer answerer, leave func()) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "cannot read body: "+err.Error())
		return
	}
	h := fnv.New64a()
	h.Write(body)
	bodyHash := h.Sum64()
	faults := s.currentFaults()
	fault, draw := s.draw(faults, bodyHash)
	if n := s.served.Add(1); faults.DownAfter > 0 && n > faults.DownAfter {
		fault = FaultDown
	}
	if s.cfg.Record {
		s.mu.Lock()
		s.log = append(s.log, Seen{At: time.Now(), Path: r.URL.Path, Fault: fault, BodyHash: bodyHash, Body: body})
		s.mu.Unlock()
	}
	if fault != FaultNone {
		s.mu.Lock()
		s.faults[fault]++
		s.mu.Unlock()
	}
	ctx := r.Context()
	switch fault {
	case FaultRateLimit, FaultServerError, FaultDown, FaultEchoAuth, FaultDrop:
		if !sleep(ctx, faults.Delay.D()) {
			return
		}
	}
	switch fault {
	case FaultDown:
		writeError(w, http.StatusServiceUnavailable, "server_error", "the server is down")
		return
	case FaultEchoAuth:
		// Quotes the credentials back, as some gateways do in their errors.
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(
			"malformed request (headers: Authorization: %s, api-key: %s)", r.Header.Get("Authorization"), r.Header.Get("Api-Key")))
		return
	case FaultRateLimit:
		ra := faults.RetryAfter.D()
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ra.Seconds()))))
		if ra%time.Second != 0 {
			w.Header().Set("Retry-After-Ms", strconv.FormatInt(ra.Milliseconds(), 10))
		}
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "rate limit reached, retry later")
		return
	case FaultServerError:
		switch draw % 3 {
		case 0:
			writeError(w, http.StatusInternalServerError, "server_error", "internal error")
		case 1:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		default:
			writeError(w, http.StatusServiceUnavailable, "server_error", "overloaded")
		}
		return
	case FaultHang:
		t := time.NewTimer(faults.HangFor.D())
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return
	case FaultDrop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				leave() // before the client can see the close
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2 or a wrapped writer: abort the stream
	}
	resp, err := answer(body, draw, fault == FaultTruncate)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	if fault == FaultInvalidJSON {
		out = out[:len(out)/2]
	}
	if s.slots != nil {
		// Wait for a place in the batch; the latency starts once served.
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			return
		}
	}
	total := s.cfg.Latency.D()
	if s.cfg.Jitter > 0 {
		total += time.Duration(draw>>11) % s.cfg.Jitter.D()
	}
	ttfb := total
	if s.cfg.TTFB > 0 {
		ttfb = s.cfg.TTFB.D()
		total = max(total, ttfb)
	}
	if !sleep(ctx, ttfb) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	if total > ttfb {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if !sleep(ctx, total-ttfb) {
			return
		}
	}
	w.Write(out)
	if fault == FaultNone || fault == FaultTruncate {
		s.answered.Add(1)
	}
}

// draw picks the fault of a request from the seed, its body hash and its
// arrival count, and returns the 64-bit draw for other choices.
func (s *Server) draw(f Faults, bodyHash uint64) (string, uint64) {
	rates := f.rates()
	active := s.cfg.Jitter > 0
	for _, r := range rates {
		active = active || r.rate > 0
	}
	if !active {
		return FaultNone, bodyHash
	}
	s.mu.Lock()
	n := s.occur[bodyHash]
	s.occur[bodyHash] = n + 1
	s.mu.Unlock()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], s.cfg.Seed)
	binary.LittleEndian.PutUint64(b[8:], bodyHash)
	binary.LittleEndian.PutUint64(b[16:], n)
	h := fnv.New64a()
	h.Write(b[:])
	x := rand.New(rand.NewPCG(h.Sum64(), n)).Uint64()
	u := float64(x>>11) / (1 << 53)
	for _, c := range rates {
		if u < c.rate {
			return c.kind, x
		}
		u -= c.rate
	}
	return FaultNone, x
}

func sleep(ctx interface{ Done() <-chan struct{} }, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type chatRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is the thinking of a reasoning model, apart from
	// the answer (vLLM's reasoning parsers, DeepSeek-R1).
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

// messageText reads a message content: a string, or an array of parts
// whose text parts are joined.
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// tokens estimates a token count the way usage numbers look: about four
// bytes per token.
func tokens(s string) int { return (len(s) + 3) / 4 }

func (s *Server) answerChat(body []byte, draw uint64, truncate bool) (any, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body is not a chat completion request: %w", err)
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages must not be empty")
	}
	prompt, last := 0, ""
	for _, m := range req.Messages {
		text := messageText(m.Content)
		prompt += 4 + tokens(text)
		if m.Role == "user" {
			last = text
		}
	}
	answer, thinking, finish := last, "", "stop"
	for _, rule := range s.cfg.Script {
		if rule.re != nil {
			if m := rule.re.FindStringSubmatchIndex(last); m != nil {
				answer = string(rule.re.ExpandString(nil, rule.Answer, last, m))
				thinking = string(rule.re.ExpandString(nil, rule.Reasoning, last, m))
			} else {
				continue
			}
		} else if !strings.Contains(last, rule.Contains) {
			continue
		} else {
			answer, thinking = rule.Answer, rule.Reasoning
		}
		if rule.FinishReason != "" {
			finish = rule.FinishReason
		}
		break
	}
	if req.MaxTokens > 0 && tokens(answer) > req.MaxTokens {
		answer, finish = cut(answer, 4*req.MaxTokens), "length"
	}
	if truncate {
		answer, finish = cut(answer, len(answer)/2), "length"
	}
	model := req.Model
	if model == "" {
		model = s.cfg.Model
	}
	completion := tokens(thinking) + tokens(answer)
	return chatResponse{
		ID: fmt.Sprintf("chatcmpl-%016x", draw), Object: "chat.completion", Model: model,
		Choices: []chatChoice{{Message: chatMessage{Role: "assistant", Content: answer, ReasoningContent: thinking}, FinishReason: finish}},
		Usage:   usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion},
	}, nil
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type embeddingRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions int             `json:"dimensions"`
}

type embeddingData struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type embeddingResponse struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  usage           `json:"usage"`
}

func (s *Server) answerEmbeddings(body []byte, _ uint64, _ bool) (any, error) {
	var req embeddingRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body is not an embeddings request: %w", err)
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			return nil, errors.New("input must be a string or an array of strings")
		}
		inputs = []string{one}
	}
	dim := req.Dimensions
	if dim <= 0 {
		dim = s.cfg.EmbedDim
	}
	model := req.Model
	if model == "" {
		model = s.cfg.Model
	}
	resp := embeddingResponse{Object: "list", Model: model, Data: make([]embeddingData, len(inputs))}
	for i, text := range inputs {
		resp.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: Vector(text, dim)}
		resp.Usage.PromptTokens += tokens(text)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	return resp, nil
}

// Vector is the fake's embedding of text: a unit vector drawn from a
// generator seeded by the text, so equal texts get equal vectors and
// different texts nearly orthogonal ones.
func Vector(text string, dim int) []float32 {
	h := fnv.New64a()
	io.WriteString(h, text)
	seed := h.Sum64()
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		x := r.NormFloat64()
		v[i] = float32(x)
		norm += x * x
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
}
