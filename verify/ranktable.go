package verify

import (
	_ "embed"
	"fmt"
	"hash/maphash"
)

// o200kRanks is o200k_base's vocabulary, the same the library holds (a
// test holds the two equal, and writes this file from the library with
// -update: `go test -run TestO200kRanksFile -update ./verify/`): the tokens
// by rank from 0, each a byte of its length (1 to 255) and its bytes. The
// library makes its map of 200,000 strings when it loads, 20–27 ms of CPU
// in every run that counts tokens; reading this into a rankTable costs a
// few.
//
//go:embed o200k_ranks.bin
var o200kRanks string

// A rankTable finds the rank of a token: an open-addressed table (at most
// half full, probed linearly from the string's hash) whose slot holds the
// token's rank, its length and place in the embedded data, and bits of its
// hash, so that a look-up reads the slot and, when length and hash bits
// match, the token's bytes. Read-only once made.
type rankTable struct {
	data  string
	seed  maphash.Seed
	slots []uint64 // 0 empty; else rankBits of rank+1, lenBits of length, offBits of offset, the rest hash bits
	mask  uint64
	n     int
}

const (
	rankBits = 18
	lenBits  = 8
	offBits  = 22
	tagShift = rankBits + lenBits + offBits
)

// loadRanks reads data, tokens in o200kRanks' layout, into a table; an
// error when data is not in that layout, repeats a token or is too large
// for the slots' fields.
func loadRanks(data string) (*rankTable, error) {
	n := 0
	for i := 0; i < len(data); n++ {
		l := int(data[i])
		if l == 0 || i+1+l > len(data) {
			return nil, fmt.Errorf("token %d at byte %d: length %d past the end or 0", n, i, l)
		}
		i += 1 + l
	}
	if n+1 >= 1<<rankBits || len(data) >= 1<<offBits {
		return nil, fmt.Errorf("%d tokens in %d bytes: too many for the table", n, len(data))
	}
	size := 1024
	for size < 2*n {
		size *= 2
	}
	t := &rankTable{data: data, seed: maphash.MakeSeed(), slots: make([]uint64, size), mask: uint64(size - 1), n: n}
	r := 0
	for i := 0; i < len(data); r++ {
		l := int(data[i])
		off := i + 1
		tok := data[off : off+l]
		h := maphash.String(t.seed, tok)
		v := uint64(r+1) | uint64(l)<<rankBits | uint64(off)<<(rankBits+lenBits) | h&^(1<<tagShift-1)
		for j := h & t.mask; ; j = (j + 1) & t.mask {
			w := t.slots[j]
			if w == 0 {
				t.slots[j] = v
				break
			}
			if t.at(w) == tok {
				return nil, fmt.Errorf("token %d (%q) is token %d too", r, tok, w&(1<<rankBits-1)-1)
			}
		}
		i = off + l
	}
	return t, nil
}

// at is the token of slot value v.
func (t *rankTable) at(v uint64) string {
	off := int(v >> (rankBits + lenBits) & (1<<offBits - 1))
	return t.data[off : off+int(v>>rankBits&(1<<lenBits-1))]
}

// rank is the rank of the token s, if s is one.
func (t *rankTable) rank(s string) (uint32, bool) {
	h := maphash.String(t.seed, s)
	want := uint64(len(s))<<rankBits | h&^(1<<tagShift-1)
	const match = (1<<lenBits-1)<<rankBits | ^uint64(1<<tagShift-1)
	for j := h & t.mask; ; j = (j + 1) & t.mask {
		v := t.slots[j]
		if v == 0 {
			return 0, false
		}
		if v&match == want && t.at(v) == s {
			return uint32(v&(1<<rankBits-1)) - 1, true
		}
	}
}

// each calls f with every token and its rank, in rank order.
func (t *rankTable) each(f func(tok string, rank uint32)) {
	r := uint32(0)
	for i := 0; i < len(t.data); r++ {
		l := int(t.data[i])
		f(t.data[i+1:i+1+l], r)
		i += 1 + l
	}
}
