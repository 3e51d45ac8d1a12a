package near

import (
	"fmt"
	"math"
)

// Shingle kinds: n consecutive words, or n consecutive characters of the
// normalised text.
const (
	ShingleWord = "word"
	ShingleChar = "char"
)

// A MinHash makes signatures of Bands×Rows one-byte values: for each of the
// Bands×Rows hash functions, the minimum over the text's shingles, of which
// one byte is kept (b-bit MinHash with b = 8). A byte is enough to estimate
// Jaccard similarity (two signatures agree on a position with probability
// J + (1-J)/256, corrected for in Similarity) and keeps a signature at
// Bands×Rows bytes; the Rows bytes of a band are its LSH key. Two texts become
// candidates when they agree on a whole band, which happens with probability
// 1-(1-J^Rows)^Bands: for 14 bands of 8 rows, 0.92 at J = 0.8, 0.56 at 0.7,
// 0.05 at 0.5.
//
// A MinHash is immutable and safe for concurrent use.
type MinHash struct {
	Shingle string // ShingleWord or ShingleChar
	N       int    // words or characters per shingle
	Bands   int
	Rows    int // at most 8: a band's key is one uint64

	a, b []uint64 // the hash functions x ↦ a·x + b (mod 2⁶⁴), a odd
}

// NewMinHash returns the MinHash of the given shape; seed picks its hash
// functions, so signatures made with different seeds do not compare.
func NewMinHash(shingle string, n, bands, rows int, seed uint64) (*MinHash, error) {
	switch {
	case shingle != ShingleWord && shingle != ShingleChar:
		return nil, fmt.Errorf("shingle %q is not one of word, char", shingle)
	case n < 1:
		return nil, fmt.Errorf("n-gram size %d: must be at least 1", n)
	case bands < 1 || rows < 1 || rows > 8:
		return nil, fmt.Errorf("%d bands of %d rows: want bands ≥ 1 and 1 ≤ rows ≤ 8", bands, rows)
	}
	m := &MinHash{Shingle: shingle, N: n, Bands: bands, Rows: rows}
	k := bands * rows
	m.a, m.b = make([]uint64, k), make([]uint64, k)
	s := Mix(seed ^ 0x6d696e68617368) // "minhash"
	for i := range k {
		s = Mix(s + 0x9e3779b97f4a7c15)
		m.a[i] = s | 1
		s = Mix(s + 0x9e3779b97f4a7c15)
		m.b[i] = s
	}
	return m, nil
}

// Size is the length of a signature in bytes.
func (m *MinHash) Size() int { return m.Bands * m.Rows }

// Threshold is the similarity at which a pair is as likely as not to become
// a candidate, about (1/Bands)^(1/Rows).
func (m *MinHash) Threshold() float64 {
	return math.Pow(1/float64(m.Bands), 1/float64(m.Rows))
}

// Shingles calls fn with the hash of each shingle of w, in order. A text
// shorter than one shingle is one shingle (the whole text); an empty text
// has none.
func (m *MinHash) Shingles(w *Words, fn func(uint64)) {
	if m.Shingle == ShingleChar {
		rs := w.Runes()
		if len(rs) == 0 {
			return
		}
		n := min(m.N, len(rs))
		for i := 0; i+n <= len(rs); i++ {
			h := uint64(n)
			for _, r := range rs[i : i+n] {
				h = (h ^ uint64(r)) * fnvPrime
			}
			fn(Mix(h))
		}
		return
	}
	hs := w.Hashes()
	if len(hs) == 0 {
		return
	}
	n := min(m.N, len(hs))
	for i := 0; i+n <= len(hs); i++ {
		h := uint64(n)
		for _, x := range hs[i : i+n] {
			h = Mix(h ^ x)
		}
		fn(h)
	}
}

// Sign writes the signature of w into sig (Size bytes) and reports whether
// w had any shingle; an empty text has no signature. mins is scratch space
// of Size values (allocated when too short) and is returned for reuse.
func (m *MinHash) Sign(w *Words, sig []byte, mins []uint64) (bool, []uint64) {
	k := m.Size()
	if cap(mins) < k {
		mins = make([]uint64, k)
	}
	mins = mins[:k]
	for i := range mins {
		mins[i] = math.MaxUint64
	}
	some := false
	a, b := m.a[:len(mins)], m.b[:len(mins)]
	m.Shingles(w, func(x uint64) {
		some = true
		m.update(mins, a, b, x)
	})
	if !some {
		return false, mins
	}
	// The minimum is decided by the high bits; bits 32–39 are as good as
	// uniform and equal whenever the minimising shingle is the same.
	for i, v := range mins {
		sig[i] = byte(v >> 32)
	}
	return true, mins
}

// update folds shingle x into the minima.
func (m *MinHash) update(mins, a, b []uint64, x uint64) {
	a, b = a[:len(mins)], b[:len(mins)]
	for i := range mins {
		if v := a[i]*x + b[i]; v < mins[i] {
			mins[i] = v
		}
	}
}

// BandKey is the LSH key of band i of sig: its Rows bytes.
func (m *MinHash) BandKey(sig []byte, i int) uint64 {
	var k uint64
	for _, c := range sig[i*m.Rows : (i+1)*m.Rows] {
		k = k<<8 | uint64(c)
	}
	return k
}

// Similarity estimates the Jaccard similarity of the shingle sets behind two
// signatures of the same MinHash: the share of agreeing bytes, corrected for
// the 1/256 chance that two different minima agree on a byte.
func Similarity(a, b []byte) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return 0
	}
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	const c = 1.0 / 256
	j := (float64(same)/float64(len(a)) - c) / (1 - c)
	return max(0, min(1, j))
}

// Jaccard is the exact Jaccard similarity of the shingle sets of two texts,
// for tests and reports (it builds both sets).
func (m *MinHash) Jaccard(x, y *Words) float64 {
	sx, sy := map[uint64]bool{}, map[uint64]bool{}
	m.Shingles(x, func(h uint64) { sx[h] = true })
	m.Shingles(y, func(h uint64) { sy[h] = true })
	if len(sx)+len(sy) == 0 {
		return 1
	}
	inter := 0
	for h := range sx {
		if sy[h] {
			inter++
		}
	}
	return float64(inter) / float64(len(sx)+len(sy)-inter)
}
