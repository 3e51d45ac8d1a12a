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

// A MinHash makes signatures of Bands×Rows one-byte values: for each of
// Bands×Rows hash functions (simulated, see Sign), the minimum over the
// text's shingles, of which one byte is kept (b-bit MinHash with b = 8). A byte is enough to estimate
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

	seed uint64 // of the one hash function
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
	return &MinHash{Shingle: shingle, N: n, Bands: bands, Rows: rows, seed: Mix(seed ^ 0x6d696e68617368)}, nil // "minhash"
}

// Size is the length of a signature in bytes.
func (m *MinHash) Size() int { return m.Bands * m.Rows }

// Candidate is the probability that a pair of Jaccard similarity j
// becomes a candidate, sharing all Rows values of at least one band:
// 1-(1-j^Rows)^Bands, an S-curve in j.
func (m *MinHash) Candidate(j float64) float64 {
	return 1 - math.Pow(1-math.Pow(j, float64(m.Rows)), float64(m.Bands))
}

// Threshold is the similarity at which a pair is as likely as not to become
// a candidate (Candidate is 0.5): (1-(1/2)^(1/Bands))^(1/Rows), a little
// below the often quoted (1/Bands)^(1/Rows) (0.68 and 0.72 for 14 bands of
// 8 rows).
func (m *MinHash) Threshold() float64 {
	return math.Pow(1-math.Pow(0.5, 1/float64(m.Bands)), 1/float64(m.Rows))
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
//
// The K = Size hash functions are simulated by one-permutation hashing with
// optimal densification (Li, Owen & Zhang 2012; Shrivastava 2017): each
// shingle is hashed once, its hash picks one of K bins and the bin keeps its
// minimum; an empty bin (a text with few shingles) copies the bin found by
// probing a fixed sequence of bins, the same for every text. The agreement
// of two signatures on a bin estimates Jaccard similarity as K separate
// minima would, at the cost of one hash per shingle instead of K.
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
	seed := m.seed
	m.Shingles(w, func(x uint64) {
		some = true
		v := Mix(x ^ seed)
		bin := (v >> 32) * uint64(k) >> 32
		if low := v & 0xffffffff; low < mins[bin] {
			mins[bin] = low
		}
	})
	if !some {
		return false, mins
	}
	for i, v := range mins {
		if v != math.MaxUint64 {
			sig[i] = byte(v)
			continue
		}
		// Optimal densification: probe bins in an order fixed by (seed,
		// i, attempt) until a filled one; one exists since some is true.
		for attempt := uint64(1); ; attempt++ {
			j := (Mix(seed^uint64(i)<<32^attempt) >> 32) * uint64(k) >> 32
			if mins[j] != math.MaxUint64 {
				sig[i] = byte(mins[j])
				break
			}
		}
	}
	return true, mins
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
