package llm

import (
	"math"
	"strings"
	"testing"
)

func TestPrefixMeter(t *testing.T) {
	static := strings.Repeat("instructions shared by every request. ", 20) // 760 bytes
	tests := []struct {
		name    string
		prompts [][]Message
		min     float64
		max     float64
	}{
		{"nothing repeats", [][]Message{{{Role: "user", Content: strings.Repeat("a", 500)}}, {{Role: "user", Content: strings.Repeat("b", 500)}}}, 0, 0},
		{"the same prompt twice: the second's full blocks", [][]Message{{{Role: "user", Content: static}}, {{Role: "user", Content: static}}}, 0.45, 0.5},
		{"static system first, record last", [][]Message{
			{{Role: "system", Content: static}, {Role: "user", Content: "record one"}},
			{{Role: "system", Content: static}, {Role: "user", Content: "record two"}},
			{{Role: "system", Content: static}, {Role: "user", Content: "record three"}},
		}, 0.6, 0.67},
		{"record first: no prefix in common", [][]Message{
			{{Role: "user", Content: "record one\n" + static}},
			{{Role: "user", Content: "record two\n" + static}},
		}, 0, 0},
		{"a later difference keeps the blocks before it", [][]Message{
			{{Role: "user", Content: static + "tool A"}},
			{{Role: "user", Content: static + "tool B"}},
		}, 0.45, 0.5},
	}
	for _, tt := range tests {
		m := NewPrefixMeter()
		for _, p := range tt.prompts {
			m.Observe(p)
		}
		if got := m.Share(); got < tt.min || got > tt.max || math.IsNaN(got) {
			t.Errorf("%s: share %.3f, want in [%.2f, %.2f]", tt.name, got, tt.min, tt.max)
		}
	}
	// Bounded memory: beyond the cap, blocks are looked up, not kept.
	m := NewPrefixMeter()
	m.maxRemembered = 4
	for i := range 50 {
		m.Observe([]Message{{Role: "user", Content: strings.Repeat(string(rune('a'+i%26)), 1000)}})
	}
	if len(m.seen) > 4 {
		t.Fatalf("remembered %d blocks", len(m.seen))
	}
}
