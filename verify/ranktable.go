package verify

import (
	"math/bits"
	"sync"
)

// A highTable holds the rank of every token of highMin to highMax bytes
// whose first byte is not ASCII: the look-ups of most of a merge of text
// in other scripts than Latin (a character and its neighbours' bytes),
// most of them of strings that are no token. The library's map of 200,000
// strings is far larger than the processor's caches, so a look-up in it
// waits for memory two or three times (its group, its key's bytes); in
// this table (about 1 MB) a look-up reads one slot of 16 bytes, which holds
// the whole string. It holds all such tokens, so it answers for strings
// of that shape on its own, "no token" included. Read-only once built.
type highTable struct {
	slots []highSlot // a power of two of them, at most half used
	shift uint       // 64 - log2(len(slots))
}

// highSlot is a string of highMin to highMax bytes as smallKey has it
// (its first 8 bytes; the rest, up to 4 bytes, with the length in bits 32
// to 35 of hi) and the token's rank plus one in bits 36 to 55 of hi; hi 0
// is an empty slot.
type highSlot struct{ lo, hi uint64 }

const (
	highMin       = 3
	highMax       = 12
	highRankShift = 36
	highKeyMask   = 1<<highRankShift - 1
)

// highKey is s (highMin to highMax bytes) as a slot's key.
func highKey(s string) highSlot {
	var k highSlot
	for i := len(s) - 1; i >= 0; i-- {
		if i >= 8 {
			k.hi = k.hi<<8 | uint64(s[i])
		} else {
			k.lo = k.lo<<8 | uint64(s[i])
		}
	}
	k.hi |= uint64(len(s)) << 32
	return k
}

func (t *highTable) slot(k highSlot) uint64 {
	return (k.lo ^ k.hi*0xBF58476D1CE4E5B9) * 0x9E3779B97F4A7C15 >> t.shift
}

// inHigh reports whether the table answers for s.
func inHigh(s string) bool { return len(s) >= highMin && len(s) <= highMax && s[0] >= 0x80 }

// newHighTable builds the table from rk, or returns nil when a rank does
// not fit a slot.
func newHighTable(rk map[string]uint) *highTable {
	t := new(highTable)
	t.resize(1 << 16) // o200k_base has some 30,000 such tokens
	n := 0
	for tok, r := range rk {
		if !inHigh(tok) {
			continue
		}
		if r+1 >= 1<<(64-highRankShift-8) {
			return nil
		}
		if 2*(n+1) > len(t.slots) {
			t.resize(2 * len(t.slots))
		}
		k := highKey(tok)
		t.insert(highSlot{k.lo, k.hi | uint64(r+1)<<highRankShift})
		n++
	}
	return t
}

// resize makes t's slots size long, keeping those it holds.
func (t *highTable) resize(size int) {
	old := t.slots
	t.slots, t.shift = make([]highSlot, size), uint(64-bits.TrailingZeros(uint(size)))
	for _, sl := range old {
		if sl.hi != 0 {
			t.insert(sl)
		}
	}
}

func (t *highTable) insert(sl highSlot) {
	mask := uint64(len(t.slots) - 1)
	i := t.slot(highSlot{sl.lo, sl.hi & highKeyMask})
	for t.slots[i].hi != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = sl
}

// rank is the rank of the token s (inHigh), or noRank.
func (t *highTable) rank(s string) uint32 {
	k := highKey(s)
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(k); ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.hi == 0 {
			return noRank
		}
		if sl.lo == k.lo && sl.hi&highKeyMask == k.hi {
			return uint32(sl.hi>>highRankShift) - 1
		}
	}
}

// highRanks is the highTable of ranks, built when a merge first looks up
// a string it answers for (text in Latin script alone never does), or nil.
var highRanks = sync.OnceValue(func() *highTable {
	if rk := ranks(); rk != nil {
		return newHighTable(rk)
	}
	return nil
})
