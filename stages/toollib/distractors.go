package toollib

import "math/rand/v2"

// Distractors are tools drawn at random from the library to pad a record's
// tool list. A draw visits library indexes in an order taken from rng and
// keeps those the caller's accept takes (not one of the record's own tools,
// not a stand-in for one, …; accept may keep state, such as the names taken
// so far) until it has need of them. The rng is the record's seeded one,
// so the same record draws the same tools; what a draw takes from rng is
// part of its contract, since the caller goes on using rng.

// DrawSample returns up to need indexes of an n-tool library that accept
// takes, visiting at most budget distinct indexes in a uniformly random
// order (a lazy Fisher–Yates shuffle, one rng.IntN a visit): a bounded
// sample without replacement, for callers that give up rather than scan a
// large library whole.
func DrawSample(rng *rand.Rand, n, need, budget int, accept func(i int) bool) []int {
	if need <= 0 {
		return nil
	}
	return AppendSample(make([]int, 0, min(need, budget, n)), rng, n, need, budget, accept)
}

// AppendSample is DrawSample appending the indexes to dst (for a caller
// that keeps a buffer from record to record); the same rng draws.
func AppendSample(dst []int, rng *rand.Rand, n, need, budget int, accept func(i int) bool) []int {
	budget = min(budget, n)
	var swapped swaps // position → index moved there by the shuffle so far
	for d, got := 0, 0; d < budget && got < need; d++ {
		j := d + rng.IntN(n-d)
		i := swapped.at(j)
		swapped.set(j, swapped.at(d))
		if accept(i) {
			dst = append(dst, i)
			got++
		}
	}
	return dst
}

// swaps is the sparse state of a lazy Fisher–Yates shuffle: the positions
// whose index moved, and where to. A draw visits few positions, so they
// are kept in a small array, and in a map once there are more.
type swaps struct {
	n    int
	pos  [16]int
	idx  [16]int
	more map[int]int
}

// at returns the index at position i.
func (s *swaps) at(i int) int {
	if s.more != nil {
		if v, ok := s.more[i]; ok {
			return v
		}
		return i
	}
	for k := range s.n {
		if s.pos[k] == i {
			return s.idx[k]
		}
	}
	return i
}

// set puts index v at position i.
func (s *swaps) set(i, v int) {
	if s.more != nil {
		s.more[i] = v
		return
	}
	for k := range s.n {
		if s.pos[k] == i {
			s.idx[k] = v
			return
		}
	}
	if s.n < len(s.pos) {
		s.pos[s.n], s.idx[s.n] = i, v
		s.n++
		return
	}
	s.more = make(map[int]int, 2*len(s.pos))
	for k := range s.n {
		s.more[s.pos[k]] = s.idx[k]
	}
	s.more[i] = v
}

// DrawAll returns up to need indexes of an n-tool library that accept
// takes, offering it every index at most once: first up to probes random
// picks (rng.IntN(n) each, repeats skipped; cheap on a large library), then,
// while fewer than need are taken, every index not yet offered, in order
// from a random start (one more rng.IntN(n), drawn whenever all probes were
// made), so a small library is searched whole.
func DrawAll(rng *rand.Rand, n, need, probes int, accept func(i int) bool) []int {
	if n == 0 || need <= 0 {
		return nil
	}
	var out []int
	tried := map[int]bool{}
	offer := func(i int) {
		tried[i] = true
		if accept(i) {
			out = append(out, i)
		}
	}
	for range probes {
		if len(out) == need || len(tried) == n {
			return out
		}
		if i := rng.IntN(n); !tried[i] {
			offer(i)
		}
	}
	start := rng.IntN(n)
	for j := 0; j < n && len(out) < need; j++ {
		if i := (start + j) % n; !tried[i] {
			offer(i)
		}
	}
	return out
}
