package llm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	openai "github.com/sashabaranov/go-openai"
	"golang.org/x/sync/singleflight"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
)

// Options are the run-level settings of NewTeacher and NewEmbedder.
type Options struct {
	// CacheDir holds the request cache (CacheFile and its log); "" disables
	// caching, so every run pays again. Teacher and embedder may share a
	// directory.
	CacheDir string
	// CacheRoot, when set, is CacheDir opened by the caller as an os.Root
	// (a run opens it inside its confined output root); the cache reaches
	// its files only through it.
	CacheRoot *os.Root
	// CacheSegment, when set, is the segment of CacheDir this process
	// writes (a worker's, see segments.go); lookups see every segment.
	CacheSegment string
	// Getenv reads the API key; nil means os.Getenv.
	Getenv func(string) string
	// Log receives cache-miss explanations, breaker and stop events; nil
	// discards them.
	Log *slog.Logger
	// Explain logs, for each request not served from the cache, what
	// changed since the last answer for the same slot (augment run
	// --explain), and counts the causes in Stats.MissCauses.
	Explain bool
	// BatchRoot is the batch directory of teacher.mode batch, opened by the
	// caller (a run's is <output>/batch inside its confined output root):
	// the batch files and state are created, renamed, removed and read only
	// through it.
	BatchRoot *atomicfs.Root
	// CountTokens estimates the tokens of a prompt's text for the context
	// check (see CheckModels); nil counts four bytes as a token.
	CountTokens func(string) int
}

func (o *Options) defaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// A Teacher is the run's connection to the teacher model: endpoints with
// adaptive concurrency and circuit breakers, retries, the request cache,
// and the run-wide error-rate and budget stops. Stages talk to it through
// a StageClient, which keeps their accounting apart.
type Teacher struct {
	cfg     Config
	log     *slog.Logger
	explain bool
	cache   *Cache
	pool    *pool
	trs     []*http.Transport
	rp      retryPolicy
	prices  prices
	flights singleflight.Group
	redact  redactor // removes the key from server text before it is kept
	// extraBody is teacher.extra_body as compact JSON (keys in order); nil
	// when there is none.
	extraBody json.RawMessage

	mu     sync.Mutex
	stages map[string]*StageClient

	fatalMu sync.Mutex
	fatal   *FatalError
	halt    halt

	tokIn, tokOut atomic.Int64
	window        errWindow
	noUsageWarn   sync.Once // the warning that answers without usage escape the budget

	batch *batchRun // nil unless teacher.mode is batch
	key   string    // the API key ("" for none); never logged or written

	// contextLen is the smallest context length (max_model_len) that an
	// endpoint lists for the model, found by CheckModels; 0 when unknown.
	contextLen  atomic.Int64
	countTokens func(string) int
}

// NewTeacher checks cfg (after Defaults) and connects nothing yet: the
// first request opens connections. With provider "openai" and a key env
// var named, the variable must be set.
func NewTeacher(cfg Config, o Options) (*Teacher, error) {
	o.defaults()
	cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t := &Teacher{
		cfg:         cfg,
		log:         o.Log,
		explain:     o.Explain,
		countTokens: o.CountTokens,
		rp: retryPolicy{
			timeout: cfg.Timeout.D(), retries: *cfg.MaxRetries,
			base: cfg.RetryBase.D(), maxWait: cfg.RetryMax.D(),
		},
		prices: prices{in: cfg.PriceInputPerMTok, out: cfg.PriceOutputPerMTok},
		stages: map[string]*StageClient{},
		window: errWindow{ring: make([]bool, cfg.ErrorWindow)},
	}
	t.halt = halt{done: make(chan struct{}), err: t.fatalErr}
	if len(cfg.ExtraBody) > 0 {
		b, err := jsonout.Marshal(cfg.ExtraBody)
		if err != nil {
			return nil, fmt.Errorf("teacher.extra_body: %w", err)
		}
		t.extraBody = b
	}
	if cfg.Provider == ProviderOffline {
		return t, nil
	}
	key, err := apiKey("teacher", cfg.APIKeyEnv, o.Getenv)
	if err != nil {
		return nil, err
	}
	t.key = key
	t.redact = newRedactor(key)
	t.pool = newPool(poolConfig{
		breakerFailures:  cfg.BreakerFailures,
		breakerCooldown:  cfg.BreakerCooldown.D(),
		latencyTolerance: cfg.LatencyTolerance,
		redact:           t.redact,
	}, cfg.Endpoints, func(ep Endpoint) *openai.Client {
		c, tr := newOpenAIClient(ep, key)
		t.trs = append(t.trs, tr)
		return c
	})
	if t.cache, err = o.openCache(); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeBatch {
		// Every answer of a batch run comes at the batch price.
		t.prices.in *= cfg.Batch.PriceFactor
		t.prices.out *= cfg.Batch.PriceFactor
		if err := t.openBatch(o.BatchRoot, key); err != nil {
			t.Close()
			return nil, err
		}
	} else if err := checkNoOpenBatches(o.BatchRoot); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func apiKey(block, env string, getenv func(string) string) (string, error) {
	if env == "" {
		return "", nil
	}
	k := getenv(env)
	if k == "" {
		return "", fmt.Errorf("%s.api_key_env: environment variable %s is empty or not set", block, env)
	}
	return k, nil
}

// Provider is "offline" or "openai", for lineage entries.
func (t *Teacher) Provider() string { return t.cfg.Provider }

// Model is the configured model name, for lineage entries; "offline"
// under the offline provider, whose answers come from no model.
func (t *Teacher) Model() string {
	if t.cfg.Provider == ProviderOffline {
		return ProviderOffline
	}
	return t.cfg.Model
}

// Capacity is how many requests the teacher can have in flight at once:
// the sum of the endpoints' max_in_flight, or the number of CPUs for the
// offline provider. LLM stages size their worker pools by it.
func (t *Teacher) Capacity() int {
	if t.batch != nil {
		// Batch mode only writes lines: enough records in flight to keep
		// the CPUs busy.
		return 8 * runtime.GOMAXPROCS(0)
	}
	if t.pool == nil {
		return runtime.GOMAXPROCS(0)
	}
	return t.pool.capacity()
}

// Stage returns the client a stage uses; all its accounting is kept under
// name. Calls with the same name return the same client.
func (t *Teacher) Stage(name string) *StageClient {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stages[name]
	if s == nil {
		s = &StageClient{t: t, name: name, st: newStageStats(), prefix: NewPrefixMeter()}
		t.stages[name] = s
	}
	return s
}

// Stats returns a snapshot per stage, in stage-name order.
func (t *Teacher) Stats() []Stats {
	t.mu.Lock()
	names := sortedKeys(t.stages)
	clients := make([]*StageClient, len(names))
	for i, n := range names {
		clients[i] = t.stages[n]
	}
	t.mu.Unlock()
	out := make([]Stats, len(clients))
	for i, s := range clients {
		out[i] = s.Stats()
	}
	return out
}

// Endpoints describes each endpoint's limit, load and breaker; empty for
// the offline provider.
func (t *Teacher) Endpoints() []EndpointStats {
	if t.pool == nil {
		return nil
	}
	return t.pool.stats()
}

// Cost is this run's cost over all stages at the configured prices.
func (t *Teacher) Cost() float64 { return t.prices.cost(t.tokIn.Load(), t.tokOut.Load()) }

// Flush waits until every answer received so far is committed to the
// cache file. (An answer survives a kill of the process as soon as its
// Complete returns; Flush makes it survive a power loss too.)
func (t *Teacher) Flush() error {
	if t.cache == nil {
		return nil
	}
	return t.cache.Flush()
}

// Close flushes the cache and releases connections. Requests must not be
// in flight.
func (t *Teacher) Close() error {
	for _, tr := range t.trs {
		tr.CloseIdleConnections()
	}
	if t.cache != nil {
		return t.cache.Close()
	}
	return nil
}

func (t *Teacher) fatalErr() error {
	t.fatalMu.Lock()
	defer t.fatalMu.Unlock()
	if t.fatal == nil {
		return nil
	}
	return t.fatal
}

// stop records the first fatal condition and halts every retry loop. It
// returns the recorded condition (an earlier one wins).
func (t *Teacher) stop(f *FatalError) error {
	t.fatalMu.Lock()
	defer t.fatalMu.Unlock()
	if t.fatal == nil {
		t.fatal = f
		close(t.halt.done)
		t.log.Error("llm teacher stopped", "reason", f.Reason, "error", f.Error())
	}
	return t.fatal
}

// errWindow holds the outcomes of the last finished requests.
type errWindow struct {
	mu              sync.Mutex
	ring            []bool // true = failed
	n, next, failed int
}

func (w *errWindow) add(failed bool) (fails, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == len(w.ring) {
		if w.ring[w.next] {
			w.failed--
		}
	} else {
		w.n++
	}
	w.ring[w.next] = failed
	if failed {
		w.failed++
	}
	w.next = (w.next + 1) % len(w.ring)
	return w.failed, w.n
}

// outcome counts a finished request and stops the run when the error rate
// crossed the threshold.
func (t *Teacher) outcome(failed bool) error {
	fails, n := t.window.add(failed)
	if !failed || n < t.cfg.MinRequestsForErrorRate || float64(fails) <= t.cfg.MaxErrorRate*float64(n) {
		return nil
	}
	byClass := map[string]int64{}
	for _, s := range t.Stats() {
		for c, k := range s.Errors {
			byClass[c] += k
		}
	}
	var parts []string
	for _, c := range sortedKeys(byClass) {
		parts = append(parts, fmt.Sprintf("%s %d", c, byClass[c]))
	}
	return t.stop(&FatalError{
		Reason: "llm_error_rate",
		Msg: fmt.Sprintf("stopping the run: %d of the last %d teacher requests failed after retries (%.0f%% > teacher.max_error_rate %.0f%%; failed attempts by class: %s); fix the endpoints and rerun — answers received so far are cached",
			fails, n, 100*float64(fails)/float64(n), 100*t.cfg.MaxErrorRate, strings.Join(parts, ", ")),
	})
}

// spend adds an answer's tokens to the run's cost and stops the run once
// the budget is reached. The answer itself is still delivered.
func (t *Teacher) spend(u Usage) {
	in := t.tokIn.Add(int64(u.PromptTokens))
	out := t.tokOut.Add(int64(u.CompletionTokens))
	if t.cfg.Budget <= 0 {
		return
	}
	if c := t.prices.cost(in, out); c >= t.cfg.Budget {
		t.stop(&FatalError{
			Reason: "llm_budget_reached",
			Msg: fmt.Sprintf("stopping the run: teacher budget %.2f reached (%.4f spent in this run); answers received so far are cached — the budget counts each run's own spending, so a rerun spends up to it again: raise it only as far as you mean to spend more",
				t.cfg.Budget, c),
		})
	}
}

// account adds a received answer's usage to the stage's and the run's
// counts. An answer without usage is counted apart (Stats.NoUsage): its
// cost is unknown, not 0, so the first one warns when a budget is set,
// which it cannot stop.
func (s *StageClient) account(resp Response) {
	t := s.t
	if resp.NoUsage {
		s.st.noUsage.Add(1)
		if t.cfg.Budget > 0 {
			t.noUsageWarn.Do(func() {
				t.log.Warn("the teacher's answers carry no usage: their tokens and cost are unknown and not counted, so teacher.budget cannot stop the run for them; the manifests count them as llm.no_usage",
					"stage", s.name, "budget", t.cfg.Budget)
			})
		}
	}
	s.st.addUsage(resp.Model, resp.Usage, t.prices)
	t.spend(resp.Usage)
}

// A StageClient is a Client whose traffic is accounted to one stage.
type StageClient struct {
	t      *Teacher
	name   string
	st     *stageStats
	prefix *PrefixMeter // every prompt of the stage, answered from the cache or not
}

// Name is the stage name given to Teacher.Stage.
func (s *StageClient) Name() string { return s.name }

// Stats returns a snapshot of the stage's traffic.
func (s *StageClient) Stats() Stats {
	st := s.st.snapshot(s.name, s.t.cfg.Provider, s.t.prices)
	st.PromptBytes, _ = s.prefix.Totals()
	st.PrefixShare = math.Round(s.prefix.Share()*1000) / 1000
	if s.t.batch != nil {
		st.Batch = s.t.batch.store.summary(s.name, s.t.cfg.Batch.MaxRounds)
	}
	return st
}

// Complete answers req: from the offline stand-in under provider
// "offline"; otherwise from the cache, or by sending it (with retries)
// and caching the answer as soon as it arrives.
//
// Unset fields of req take the teacher's configured values, and an empty
// req.Stage the stage client's name, before the cache key is computed.
//
// Errors: a *FatalError (IsFatal) when the run must stop; an *AnswerError
// (a reject reason) when only this request failed; the context's error;
// or a plain error for a malformed request (a stage bug).
func (s *StageClient) Complete(ctx context.Context, req Request) (Response, error) {
	s.prefix.Observe(req.Messages)
	resp, err := s.complete(ctx, req)
	s.st.requests.Add(1)
	switch {
	case sharedPending(err):
		s.st.hits.Add(1) // an identical request in flight is in the batch files
	case IsPending(err):
		s.st.pending.Add(1)
	case err != nil && ctx.Err() == nil:
		s.st.failed.Add(1)
	}
	return resp, err
}

func (s *StageClient) complete(ctx context.Context, req Request) (Response, error) {
	t := s.t
	if err := t.fatalErr(); err != nil {
		return Response{}, err
	}
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	req, err := t.effective(req, s.name)
	if err != nil {
		return Response{}, err
	}
	if t.cfg.Provider == ProviderOffline {
		return s.offline(req)
	}
	canon, key, err := t.canonical(req)
	if err != nil {
		return Response{}, err
	}
	// Identical requests in flight share one lookup and one answer.
	for {
		leader := false
		v, err, _ := t.flights.Do(string(key[:]), func() (any, error) {
			leader = true
			if t.cache != nil {
				resp, ok, err := t.cache.getChat(req.Stage, key[:])
				if err != nil {
					return Response{}, fmt.Errorf("llm cache read: %w", err)
				}
				if ok {
					resp.Cached = true
					return resp, nil
				}
				if t.explain {
					s.explainMiss(req, canon)
				}
			}
			return s.fetch(ctx, req, canon, key[:])
		})
		if err != nil && !leader && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue // the leader's caller gave up; ask again for ourselves
		}
		resp, _ := v.(Response)
		if err == nil && (resp.Cached || !leader) {
			s.st.hits.Add(1)
			resp.Cached = true
		}
		if !leader && IsPending(err) {
			// The leader's copy is in the batch files: this
			// copy shares it, in its own terms.
			err = &PendingError{Stage: req.Stage, Slot: req.Slot, Shared: true}
		}
		var ae *AnswerError
		if !leader && errors.As(err, &ae) && ae.Slot != req.Slot {
			// The leader's failure, told in this request's own terms: a
			// reject must not name another record's slot.
			own := *ae
			own.Stage, own.Slot = req.Stage, req.Slot
			err = &own
		}
		return resp, err
	}
}

// offline answers with the stage's stand-in.
func (s *StageClient) offline(req Request) (Response, error) {
	if req.Offline == nil {
		// Fatal for the stage, but not recorded as the teacher's stop: stages
		// with stand-ins can still run.
		return Response{}, &FatalError{
			Reason: "llm_offline_unsupported",
			Msg:    fmt.Sprintf("stage %s needs a real teacher model; set teacher.provider (e.g. openai with endpoints) or skip the stage", s.name),
		}
	}
	content, err := req.Offline()
	if err != nil {
		if _, ok := contract.ReasonOf(err); ok {
			return Response{}, err
		}
		return Response{}, &AnswerError{Reason: "llm_offline_failed", Stage: req.Stage, Slot: req.Slot, Attempts: 1, Err: err}
	}
	return Response{Content: content, FinishReason: "stop", Provider: ProviderOffline, Model: s.t.Model()}, nil
}

// fetch sends req and caches the answer before the endpoint slot is
// released (see pool.run).
func (s *StageClient) fetch(ctx context.Context, req Request, canon, key []byte) (Response, error) {
	t := s.t
	if err := t.fits(req); err != nil {
		return Response{}, err
	}
	if t.batch != nil {
		return Response{}, s.enqueue(req, canon, key)
	}
	var resp Response
	var keep func() error
	if t.cache != nil {
		keep = func() error {
			if err := t.cache.putChat(req.Stage, key, canon, resp, stageName(req.Stage), slotKey(req)); err != nil {
				return t.stop(&FatalError{Reason: "llm_cache_write", Err: err,
					Msg: "cannot write the request cache (disk full?); stopping so answers are not paid for twice"})
			}
			return nil
		}
	}
	body, err := chatBody(req, t.cfg.StructuredOutput)
	if err != nil {
		return Response{}, err
	}
	do := chatAttempt(req.Model, body, &resp)
	attempts, class, err := t.pool.run(ctx, t.rp, s.st, t.halt, func(actx context.Context, meta *callMeta, c *openai.Client) error {
		err := do(actx, meta, c)
		// An answer that quotes the key (a server echoing its request)
		// must not reach the cache or the data.
		resp.Content = t.redact.literal(resp.Content)
		resp.Reasoning = t.redact.literal(resp.Reasoning)
		return err
	}, keep)
	if err != nil {
		if class == "" {
			return Response{}, err // context ended, the run stopped, or the cache failed
		}
		switch class {
		case classAuth:
			return Response{}, t.stop(&FatalError{Reason: "llm_auth", Err: err,
				Msg: "the teacher refused the credentials (HTTP 401/403); check the key in the environment variable named by teacher.api_key_env"})
		case classNotFound:
			return Response{}, t.stop(&FatalError{Reason: "llm_model_not_found", Err: err,
				Msg: fmt.Sprintf("the teacher answered 404 for model %q; check teacher.model and the endpoints' base_url (usually ending in /v1)", req.Model)})
		}
		if ferr := t.outcome(true); ferr != nil {
			return Response{}, ferr
		}
		return Response{}, &AnswerError{Reason: "llm_error_" + class, Stage: req.Stage, Slot: req.Slot, Attempts: attempts, Err: err}
	}
	t.outcome(false)
	s.account(resp)
	return resp, nil
}

// effective fills req's unset fields from the configuration.
func (t *Teacher) effective(req Request, stage string) (Request, error) {
	if req.Stage == "" {
		req.Stage = stage
	}
	if req.Model == "" {
		req.Model = t.cfg.Model
	}
	if req.Temperature == nil {
		req.Temperature = t.cfg.Temperature
	}
	if req.TopP == nil {
		req.TopP = t.cfg.TopP
	}
	fromCfg, fromCfgCompletion := req.MaxTokens == 0, req.MaxCompletionTokens == 0
	if fromCfg {
		req.MaxTokens = t.cfg.MaxTokens
	}
	if req.Seed == nil {
		req.Seed = t.cfg.Seed
	}
	if fromCfgCompletion {
		req.MaxCompletionTokens = t.cfg.MaxCompletionTokens
	}
	req = t.lengthen(req, fromCfg, fromCfgCompletion)
	if req.ReasoningEffort == "" {
		req.ReasoningEffort = t.cfg.ReasoningEffort
	}
	if req.ExtraBody == nil {
		req.ExtraBody = t.extraBody
	}
	if len(req.ExtraBody) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, req.ExtraBody); err != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
			return req, fmt.Errorf("stage %s: request extra body is not a JSON object", req.Stage)
		}
		req.ExtraBody = b.Bytes()
	}
	if len(req.JSONSchema) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, req.JSONSchema); err != nil {
			return req, fmt.Errorf("stage %s: request JSON schema is not valid JSON: %w", req.Stage, err)
		}
		req.JSONSchema = b.Bytes()
	}
	return req, nil
}

// canonicalRequest is what the cache key hashes: every serialised field of
// the effective request plus how structured output is asked for.
type canonicalRequest struct {
	Request
	Format string `json:"response_format,omitempty"`
}

func (t *Teacher) canonical(req Request) ([]byte, [32]byte, error) {
	c := canonicalRequest{Request: req}
	if len(req.JSONSchema) > 0 {
		c.Format = t.cfg.StructuredOutput
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("stage %s: %w", req.Stage, err)
	}
	return b, sha256.Sum256(b), nil
}

// stageName strips the version from "name@version".
func stageName(stage string) string {
	if i := strings.LastIndexByte(stage, '@'); i >= 0 {
		return stage[:i]
	}
	return stage
}

// slotKey identifies a request's slot and attempt in the slot index; nil
// without a slot.
func slotKey(req Request) []byte {
	if req.Slot == "" {
		return nil
	}
	return strconv.AppendInt(append([]byte(req.Slot), 0), int64(req.Attempt), 10)
}
