package verify

import (
	"math/bits"

	"github.com/augmentdata/augment/internal/swar"
)

// A strTable maps strings of 1 to strKeyMax bytes to numbers below
// 2^strValBits, without a map's costs: an open-addressed table of two
// words a slot, probed linearly from a multiplicative hash, each slot the
// string itself (strKey) with the number in the top bits of hi; hi 0 is an
// empty slot. A look-up is a multiplication and a slot or two, where a map
// of strings hashes the bytes, probes a group and compares the bytes kept
// elsewhere (one more wait for memory when the map is large). It keeps
// pieces' counts (pieceCounts) and tokens' ranks (highRanks). The zero
// value is empty; not safe for concurrent writes.
type strTable struct {
	slots []strKey // a power of two of them, at most half used
	shift uint     // 64 - log2(len(slots))
	n     int
}

// A strKey is a string of 1 to strKeyMax bytes as two numbers: its first
// 8 bytes (little-endian, zeros after a shorter string), and the rest
// with the length in bits 32 to 35. Bits 36 to 63 of hi are 0, and hi is
// not 0.
type strKey struct{ lo, hi uint64 }

const (
	strKeyMax  = 12
	strValBits = 28
	strValAt   = 64 - strValBits
)

// strKeyOf is the key of s, of 1 to strKeyMax bytes: from loads of 8 or
// 4 bytes that may overlap.
func strKeyOf(s string) strKey {
	n := len(s)
	var k strKey
	switch {
	case n >= 8:
		// The last 8 bytes shifted down to the n-8 after the first 8 (none
		// for n = 8: a shift by 64 is 0).
		k.lo, k.hi = swar.Load(s, 0), swar.Load(s, n-8)>>(8*(16-n))
	case n >= 4:
		k.lo = uint64(swar.Load4(s, 0)) | uint64(swar.Load4(s, n-4))<<(8*(n-4))
	default:
		for i := n - 1; i >= 0; i-- {
			k.lo = k.lo<<8 | uint64(s[i])
		}
	}
	k.hi |= uint64(n) << 32
	return k
}

// strKeyAt is strKeyOf(s[:n]), n from 1 to strKeyMax: from loads of 8
// bytes where s has them.
func strKeyAt(s string, n int) strKey {
	if len(s) < 16 {
		return strKeyOf(s[:n])
	}
	lo, hi := swar.Load(s, 0), swar.Load(s, 8)
	if n < 8 {
		return strKey{lo & (1<<(8*n) - 1), uint64(n) << 32}
	}
	return strKey{lo, hi&(1<<(8*(n-8))-1) | uint64(n)<<32}
}

func (t *strTable) slot(k strKey) uint64 {
	return (k.lo ^ k.hi*0xBF58476D1CE4E5B9) * 0x9E3779B97F4A7C15 >> t.shift
}

// get is the number of the string of key k, if t holds it.
func (t *strTable) get(k strKey) (uint32, bool) {
	if t.n == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.slot(k); ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.lo == k.lo && sl.hi&(1<<strValAt-1) == k.hi {
			return uint32(sl.hi >> strValAt), true
		}
		if sl.hi == 0 {
			return 0, false
		}
	}
}

// put sets the number of the string of key k, which t does not hold, to
// v (below 2^strValBits), the table first grown to size slots (a power of
// two, or 0) if it has fewer.
func (t *strTable) put(k strKey, v uint32, size int) {
	if size = max(size, 1024); len(t.slots) < size || 2*(t.n+1) > len(t.slots) {
		old := t.slots
		size = max(size, 2*len(old))
		t.slots, t.shift = make([]strKey, size), uint(64-bits.TrailingZeros(uint(size)))
		for _, sl := range old {
			if sl.hi != 0 {
				t.insert(sl)
			}
		}
	}
	t.insert(strKey{k.lo, k.hi | uint64(v)<<strValAt})
	t.n++
}

func (t *strTable) insert(sl strKey) {
	mask := uint64(len(t.slots) - 1)
	i := t.slot(strKey{sl.lo, sl.hi & (1<<strValAt - 1)})
	for t.slots[i].hi != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = sl
}

// fill makes t hold entries (keys with their numbers in the top bits of
// hi, as slots hold them; no key twice) in a new table of at least size
// slots (a power of two). The entries are inserted in the order of their
// home slots, by blocks of 64 (a bucket sort), so that the writes sweep
// the table once instead of landing at random: with 30,000 entries in
// 1 MB, the random writes wait for memory each.
func (t *strTable) fill(entries []strKey, size int) {
	size = max(size, 1024)
	for 2*len(entries) > size {
		size *= 2
	}
	t.slots, t.shift, t.n = make([]strKey, size), uint(64-bits.TrailingZeros(uint(size))), len(entries)
	const block = 6 // log2 of the slots of a bucket
	starts := make([]int32, size>>block+1)
	home := func(e strKey) uint64 { return t.slot(strKey{e.lo, e.hi & (1<<strValAt - 1)}) >> block }
	for _, e := range entries {
		starts[home(e)+1]++
	}
	for i := 1; i < len(starts); i++ {
		starts[i] += starts[i-1]
	}
	sorted := make([]strKey, len(entries))
	for _, e := range entries {
		b := home(e)
		sorted[starts[b]] = e
		starts[b]++
	}
	for _, e := range sorted {
		t.insert(e)
	}
}
