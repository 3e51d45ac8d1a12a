package llm

import (
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of one stage's traffic through the teacher. It is
// cheap to take (atomic loads and one short lock), so progress bars may poll
// it several times a second; rates come from the difference of two
// snapshots. It is JSON-tagged for the stage manifest.
type Stats struct {
	Stage    string `json:"stage"`
	Provider string `json:"provider"`
	// Requests counts Complete calls that finished (answered or failed).
	Requests int64 `json:"requests"`
	// CacheHits counts requests answered without sending: from the cache,
	// by sharing the answer of an identical request in flight, or (batch
	// mode) rejected for the failures the batch directory records.
	CacheHits int64 `json:"cache_hits"`
	// Sent counts HTTP attempts, retries included; Retries counts the repeats.
	Sent    int64 `json:"sent"`
	Retries int64 `json:"retries"`
	// InFlight is the number of this stage's requests being sent right now.
	InFlight int64 `json:"in_flight"`
	// Failed counts requests that ended in an error other than their
	// context's: after retries, on a fatal stop, or from the stand-in.
	Failed int64 `json:"failed"`
	// Errors counts failed attempts by class ("timeout", "rate_limited",
	// "server", "connection", …).
	Errors map[string]int64 `json:"errors,omitempty"`
	// Tokens as reported by the server's usage, for answers received in
	// this run (cache hits cost nothing and are not counted).
	TokensIn  int64 `json:"tokens_in"`
	TokensOut int64 `json:"tokens_out"`
	// Cost of this run's tokens at the configured prices; 0 without prices.
	Cost float64 `json:"cost"`
	// NoUsage counts answers received in this run whose server reported
	// no usage: their tokens and cost are unknown, so TokensIn, TokensOut
	// and Cost count only the other answers, and teacher.budget does not
	// see them.
	NoUsage int64 `json:"no_usage,omitempty"`
	// Models breaks the tokens down by the model that answered.
	Models map[string]ModelUsage `json:"models,omitempty"`
	// Latency of answered HTTP attempts.
	Latency Latency `json:"latency"`
	// MissCauses counts cache misses by what changed since the last request
	// of the same slot ("messages", "template", "new_slot", …). Filled only
	// with Options.Explain.
	MissCauses map[string]int64 `json:"miss_causes,omitempty"`
	// PromptBytes counts the bytes of every prompt the stage asked this
	// run (cache hits included); PrefixShare is the share of them that
	// repeated an earlier prompt's prefix, the part a server's prefix
	// cache computes once (see PrefixMeter).
	PromptBytes int64   `json:"prompt_bytes,omitempty"`
	PrefixShare float64 `json:"prefix_share,omitempty"`
	// Pending counts requests written to batch files in this run (batch
	// mode); Batch sums up the stage's batch jobs of its latest epoch.
	Pending int64         `json:"pending,omitempty"`
	Batch   *BatchSummary `json:"batch,omitempty"`
}

// ModelUsage is the traffic of one model within a stage.
type ModelUsage struct {
	Requests  int64   `json:"requests"`
	TokensIn  int64   `json:"tokens_in"`
	TokensOut int64   `json:"tokens_out"`
	Cost      float64 `json:"cost"`
}

// Latency summarises a latency histogram, in milliseconds. Quantiles are
// accurate to about 3 %.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// ProjectedCost extrapolates the cost so far to the whole stage, given the
// share of its records done (0 < done ≤ 1). It returns 0 when nothing is
// done yet.
func (s Stats) ProjectedCost(done float64) float64 {
	if done <= 0 {
		return 0
	}
	return s.Cost / done
}

// stageStats is the live, concurrently updated form of Stats.
type stageStats struct {
	requests, hits, sent, retries, inFlight, failed, tokIn, tokOut, pending, noUsage atomic.Int64

	mu     sync.Mutex
	errors map[string]int64
	models map[string]*ModelUsage
	misses map[string]int64

	lat histogram
}

func newStageStats() *stageStats {
	return &stageStats{errors: map[string]int64{}, models: map[string]*ModelUsage{}, misses: map[string]int64{}}
}

func (s *stageStats) addError(class string) {
	s.mu.Lock()
	s.errors[class]++
	s.mu.Unlock()
}

func (s *stageStats) addMiss(cause string) {
	s.mu.Lock()
	s.misses[cause]++
	s.mu.Unlock()
}

func (s *stageStats) addUsage(model string, u Usage, p prices) {
	s.tokIn.Add(int64(u.PromptTokens))
	s.tokOut.Add(int64(u.CompletionTokens))
	s.mu.Lock()
	m := s.models[model]
	if m == nil {
		m = &ModelUsage{}
		s.models[model] = m
	}
	m.Requests++
	m.TokensIn += int64(u.PromptTokens)
	m.TokensOut += int64(u.CompletionTokens)
	m.Cost = p.cost(m.TokensIn, m.TokensOut)
	s.mu.Unlock()
}

func (s *stageStats) snapshot(stage, provider string, p prices) Stats {
	st := Stats{
		Stage:     stage,
		Provider:  provider,
		Requests:  s.requests.Load(),
		CacheHits: s.hits.Load(),
		Sent:      s.sent.Load(),
		Retries:   s.retries.Load(),
		InFlight:  s.inFlight.Load(),
		Failed:    s.failed.Load(),
		Pending:   s.pending.Load(),
		TokensIn:  s.tokIn.Load(),
		TokensOut: s.tokOut.Load(),
		NoUsage:   s.noUsage.Load(),
		Latency:   s.lat.summary(),
	}
	st.Cost = p.cost(st.TokensIn, st.TokensOut)
	s.mu.Lock()
	if len(s.errors) > 0 {
		st.Errors = make(map[string]int64, len(s.errors))
		for k, v := range s.errors {
			st.Errors[k] = v
		}
	}
	if len(s.models) > 0 {
		st.Models = make(map[string]ModelUsage, len(s.models))
		for k, v := range s.models {
			st.Models[k] = *v
		}
	}
	if len(s.misses) > 0 {
		st.MissCauses = make(map[string]int64, len(s.misses))
		for k, v := range s.misses {
			st.MissCauses[k] = v
		}
	}
	s.mu.Unlock()
	return st
}

// prices are per million tokens.
type prices struct{ in, out float64 }

func (p prices) cost(in, out int64) float64 {
	return (float64(in)*p.in + float64(out)*p.out) / 1e6
}

// histogram is a fixed-size log-linear histogram of durations in
// microseconds: values below 16 µs have their own bucket, above that every
// power of two is split into 16 buckets, so a bucket's width is at most
// 1/16 of its lower bound. Memory is constant however many values arrive.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	max    atomic.Int64
}

const (
	histSub     = 16
	histMaxExp  = 40 // 2^40 µs ≈ 12.7 days; longer values land in the last bucket
	histBuckets = (histMaxExp-3)*histSub + histSub
)

func histIndex(us uint64) int {
	if us < histSub {
		return int(us)
	}
	e := bits.Len64(us) - 1 // ≥ 4
	if e >= histMaxExp {
		return histBuckets - 1
	}
	sub := (us >> (e - 4)) & (histSub - 1)
	return (e-3)*histSub + int(sub)
}

// histValue is the midpoint of bucket i, in µs.
func histValue(i int) float64 {
	if i < histSub {
		return float64(i)
	}
	e := i/histSub + 3
	sub := i % histSub
	low := uint64(histSub+sub) << (e - 4)
	width := uint64(1) << (e - 4)
	return float64(low) + float64(width)/2
}

func (h *histogram) record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[histIndex(uint64(us))].Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			break
		}
	}
}

func (h *histogram) summary() Latency {
	var counts [histBuckets]uint64
	var total uint64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		total += counts[i]
	}
	if total == 0 {
		return Latency{}
	}
	q := func(p float64) float64 {
		rank := uint64(p*float64(total) + 0.5)
		if rank < 1 {
			rank = 1
		}
		var cum uint64
		for i, c := range counts {
			cum += c
			if cum >= rank {
				return histValue(i) / 1000
			}
		}
		return histValue(histBuckets-1) / 1000
	}
	return Latency{
		Count: int64(total),
		P50:   q(0.50),
		P90:   q(0.90),
		P99:   q(0.99),
		Max:   float64(h.max.Load()) / 1000,
	}
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
