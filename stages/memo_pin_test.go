package stages

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"
	"weak"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// viewTools are tools whose fields are views of big, as a shard decoder's
// are of a row group's decoded columns.
func viewTools(big []byte) []record.Tool {
	off := 0
	view := func(s string) []byte {
		if s == "" {
			return nil
		}
		n := copy(big[off:], s)
		v := big[off : off+n : off+n]
		off += n
		return v
	}
	str := func(s string) string {
		v := view(s)
		return unsafe.String(unsafe.SliceData(v), len(v))
	}
	return []record.Tool{
		{Name: str("get_weather"), Description: str("Current weather of a city."),
			Parameters: view(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		{Name: str("convert"), Description: str("Convert \"units\"."),
			Parameters: view(`{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"}}}`), Response: view(`{"type":"number"}`)},
	}
}

// assertFreed has use hold tools that are views of a large buffer (as many
// times as a memo needs to remember them), drops the buffer and checks,
// after a collection, that nothing use left behind keeps it alive.
func assertFreed(t *testing.T, use func(t *testing.T, tools []record.Tool)) {
	t.Helper()
	w := func() weak.Pointer[byte] {
		big := make([]byte, 8<<20)
		use(t, viewTools(big))
		return weak.Make(&big[0])
	}()
	runtime.GC()
	runtime.GC()
	if w.Value() != nil {
		t.Error("a remembered tool keeps the whole buffer its fields were views of")
	}
}

// TestToolMemoPinsNoShardMemory: the export's tool memo remembers tools and
// their texts, but keeps only its own copies: the decoded memory the tools
// were views of is freed.
func TestToolMemoPinsNoShardMemory(t *testing.T) {
	e := buildExport(t, ExportConfig{})
	assertFreed(t, func(t *testing.T, tools []record.Tool) {
		want, err := toolsJSON(tools)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 4 {
			texts, err := e.toolTexts(tools)
			if err != nil {
				t.Fatal(err)
			}
			if got := toolsString(texts); got != want {
				t.Fatalf("round %d: got %s, want %s", round, got, want)
			}
		}
		for i := range tools {
			e.tools.mu.Lock()
			tt := e.tools.lookup(&tools[i])
			e.tools.mu.Unlock()
			if tt == nil {
				t.Errorf("tool %d: not remembered", i)
			}
		}
	})
	// The memo still renders the same definitions, in other memory, to the
	// same bytes.
	tools := viewTools(make([]byte, 1<<10))
	want, _ := toolsJSON(tools)
	for range 3 {
		texts, err := e.toolTexts(tools)
		if err != nil {
			t.Fatal(err)
		}
		if got := toolsString(texts); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
}

// TestCheckedToolsPinNoShardMemory: the tools checkChanged remembers as
// checked are its own copies: the decoded memory an output's tools were
// views of is freed, and the tools are still found when met again.
func TestCheckedToolsPinNoShardMemory(t *testing.T) {
	var c checkedTools
	prev := fxRecord("r1", []record.Tool{fxTool("a", "A", `{"type":"object"}`)}, fxUser("hi"), fxSay("done"))
	if _, err := shard.Check(prev); err != nil {
		t.Fatal(err)
	}
	assertFreed(t, func(t *testing.T, tools []record.Tool) {
		out := *prev
		out.Tools = append(slices.Clone(prev.Tools), tools...)
		for range 2 {
			if _, err := c.checkChanged(&out, prev); err != nil {
				t.Fatal(err)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range tools {
			if c.find(tools[i].Parameters) < 0 {
				t.Errorf("tool %d is not remembered", i)
			}
		}
	})
	runtime.KeepAlive(&c) // the memo lives on past the collection
}

// TestSamplePlanPinsNoShardMemory: the IDs sample's Plan keeps (the
// quotas' heaps, a quota of n = 0 keeping all) are its own copies: the
// memory the records' IDs were views of is freed while the stage lives on.
func TestSamplePlanPinsNoShardMemory(t *testing.T) {
	for _, n := range []int{0, 3} {
		s := &sampler{cfg: &SampleConfig{Quotas: []Quota{{N: n}}}, seed: 7}
		w := func() weak.Pointer[byte] {
			big := make([]byte, 8<<20)
			off := 0
			if _, err := s.Plan(t.Context(), func(yield func(*record.Record) error) error {
				for i := range 20 {
					k := copy(big[off:], fmt.Sprintf("r%d", i))
					r := &record.Record{ID: unsafe.String(&big[off], k), Source: "s"}
					off += k
					if err := yield(r); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return weak.Make(&big[0])
		}()
		runtime.GC()
		runtime.GC()
		if w.Value() != nil {
			t.Errorf("n = %d: the plan keeps the buffer its records' IDs were views of", n)
		}
		if want := cmp.Or(n, 20); len(s.keep) != want {
			t.Errorf("n = %d: %d kept, want %d", n, len(s.keep), want)
		}
	}
}
