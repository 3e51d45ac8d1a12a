package translate

import (
	"runtime"
	"strconv"
	"testing"
	"unsafe"
	"weak"
)

// TestPlanPinsNoShardMemory: the IDs Plan keeps of the chosen records are
// its own copies: the memory the records' IDs were views of (a shard
// decoder's column) is freed while the stage lives on.
func TestPlanPinsNoShardMemory(t *testing.T) {
	s := newConvertStage(t, Config{Count: 3}, 3)
	w := func() weak.Pointer[byte] {
		big := make([]byte, 8<<20)
		rs := zhRecords(10)
		off := 0
		for _, r := range rs {
			n := copy(big[off:], r.ID+strconv.Itoa(off))
			r.ID = unsafe.String(&big[off], n)
			off += n
		}
		if _, err := s.Plan(t.Context(), scanOf(rs)); err != nil {
			t.Fatal(err)
		}
		if len(s.chosen) != 3 {
			t.Fatalf("%d chosen, want 3", len(s.chosen))
		}
		return weak.Make(&big[0])
	}()
	runtime.GC()
	runtime.GC()
	if w.Value() != nil {
		t.Error("the plan keeps the buffer its records' IDs were views of")
	}
	runtime.KeepAlive(s)
}
