package stages

import (
	"testing"

	"github.com/augmentdata/augment/stages/llm"
)

func TestLLMProgress(t *testing.T) {
	prev := llm.Stats{Requests: 10, CacheHits: 4, TokensIn: 1000, TokensOut: 200}
	cur := llm.Stats{Requests: 30, CacheHits: 4, TokensIn: 3000, TokensOut: 600, InFlight: 3, Failed: 1, Cost: 1.5}
	for _, tc := range []struct {
		name        string
		prev, cur   llm.Stats
		secs        float64
		done, total int64
		want        string
	}{
		{"rates over the interval, cost projected from a quarter done", prev, cur, 2, 25, 100,
			"req/s=10.0 tok/s=1200 in_flight=3 cache_hits=4 failed=1 cost=1.50 projected=6.00"},
		{"half done doubles the cost", prev, cur, 2, 50, 100,
			"req/s=10.0 tok/s=1200 in_flight=3 cache_hits=4 failed=1 cost=1.50 projected=3.00"},
		{"all done projects the cost so far", prev, cur, 2, 100, 100,
			"req/s=10.0 tok/s=1200 in_flight=3 cache_hits=4 failed=1 cost=1.50 projected=1.50"},
		{"more done than planned (added records) never projects below the cost", prev, cur, 2, 120, 100,
			"req/s=10.0 tok/s=1200 in_flight=3 cache_hits=4 failed=1 cost=1.50 projected=1.50"},
		{"nothing done yet: no projection", prev, cur, 2, 0, 100,
			"req/s=10.0 tok/s=1200 in_flight=3 cache_hits=4 failed=1 cost=1.50"},
		{"unknown total: no projection", prev, cur, 2, 10, 0,
			"req/s=10.0 tok/s=1200 in_flight=3 cache_hits=4 failed=1 cost=1.50"},
		{"no prices: neither cost nor projection", llm.Stats{}, llm.Stats{Requests: 5, CacheHits: 5}, 1, 5, 10,
			"req/s=0.0 tok/s=0 in_flight=0 cache_hits=5 failed=0"},
		{"zero interval counts as one second", llm.Stats{}, llm.Stats{Requests: 3, TokensOut: 30}, 0, 1, 3,
			"req/s=3.0 tok/s=30 in_flight=0 cache_hits=0 failed=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := llmProgress(tc.prev, tc.cur, tc.secs, tc.done, tc.total); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
