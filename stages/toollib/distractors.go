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
	budget = min(budget, n)
	swapped := map[int]int{}
	at := func(i int) int {
		if v, ok := swapped[i]; ok {
			return v
		}
		return i
	}
	var out []int
	for d := 0; d < budget && len(out) < need; d++ {
		j := d + rng.IntN(n-d)
		i := at(j)
		swapped[j] = at(d)
		if accept(i) {
			out = append(out, i)
		}
	}
	return out
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
