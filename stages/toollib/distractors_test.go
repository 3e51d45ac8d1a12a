package toollib

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

func TestDrawSample(t *testing.T) {
	even := func(i int) bool { return i%2 == 0 }
	a := DrawSample(seeded(1), 100, 10, 100, even)
	b := DrawSample(seeded(1), 100, 10, 100, even)
	if !slices.Equal(a, b) || len(a) != 10 {
		t.Fatalf("draws %v and %v: want the same 10", a, b)
	}
	seen := map[int]bool{}
	for _, i := range a {
		if i%2 != 0 || i < 0 || i >= 100 || seen[i] {
			t.Fatalf("draw %v: index %d rejected, out of range or repeated", a, i)
		}
		seen[i] = true
	}
	// The budget bounds the visits: 5 visits find at most 5.
	visits := 0
	got := DrawSample(seeded(2), 100, 50, 5, func(int) bool { visits++; return true })
	if visits != 5 || len(got) != 5 {
		t.Errorf("budget 5: %d visits, %d drawn", visits, len(got))
	}
	// A budget of the whole library visits every index once.
	all := DrawSample(seeded(3), 7, 7, 100, func(int) bool { return true })
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("whole library: %v", all)
	}
	if DrawSample(seeded(4), 10, 0, 10, even) != nil {
		t.Error("need 0 drew tools")
	}
}

func TestDrawAll(t *testing.T) {
	// A small library is searched whole: the only acceptable index is found.
	for seed := range uint64(20) {
		got := DrawAll(seeded(seed), 50, 3, 2, func(i int) bool { return i == 37 })
		if !slices.Equal(got, []int{37}) {
			t.Fatalf("seed %d: %v, want [37]", seed, got)
		}
	}
	offered := map[int]int{}
	got := DrawAll(seeded(5), 30, 100, 40, func(i int) bool { offered[i]++; return i%3 == 0 })
	if len(got) != 10 || len(offered) != 30 {
		t.Fatalf("drew %d, offered %d indexes; want 10 of 30", len(got), len(offered))
	}
	for i, n := range offered {
		if n != 1 {
			t.Errorf("index %d offered %d times", i, n)
		}
	}
	if !slices.Equal(got, DrawAll(seeded(5), 30, 100, 40, func(i int) bool { return i%3 == 0 })) {
		t.Error("same seed, different draw")
	}
	if DrawAll(seeded(6), 0, 3, 10, func(int) bool { return true }) != nil {
		t.Error("an empty library drew tools")
	}
}

// TestDrawRandomness pins what a draw takes from rng, which callers rely on
// (they go on using it): DrawAll draws the scan's start once all probes are
// made, even when the last probe filled the draw.
func TestDrawRandomness(t *testing.T) {
	r, ref := seeded(7), seeded(7)
	DrawAll(r, 1000, 1, 1, func(int) bool { return true })
	ref.IntN(1000) // the probe
	ref.IntN(1000) // the start
	if r.Uint64() != ref.Uint64() {
		t.Error("DrawAll: rng consumption changed")
	}
	r, ref = seeded(8), seeded(8)
	DrawSample(r, 1000, 2, 1000, func(int) bool { return true })
	ref.IntN(1000)
	ref.IntN(999)
	if r.Uint64() != ref.Uint64() {
		t.Error("DrawSample: rng consumption changed")
	}
}

// TestDrawSampleAsMapShuffle: DrawSample's small-array shuffle state draws
// what the lazy Fisher–Yates shuffle over a map draws, for draws that visit
// few positions and many (past the array, into its map), and leaves the rng
// in the same state.
func TestDrawSampleAsMapShuffle(t *testing.T) {
	ref := func(rng *rand.Rand, n, need, budget int, accept func(int) bool) []int {
		budget = min(budget, n)
		swapped := map[int]int{}
		at := func(i int) int {
			if v, ok := swapped[i]; ok {
				return v
			}
			return i
		}
		out := []int{}
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
	for seed := range uint64(200) {
		n := 1 + int(seed*37%500)
		need := 1 + int(seed%40)
		budget := 1 + int(seed*13%300)
		mod := 1 + int(seed%5) // accept one index in mod
		accept := func(i int) bool { return i%mod == 0 }
		r1, r2 := seeded(seed), seeded(seed)
		got, want := DrawSample(r1, n, need, budget, accept), ref(r2, n, need, budget, accept)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d (n %d need %d budget %d): got %v want %v", seed, n, need, budget, got, want)
		}
		if r1.Uint64() != r2.Uint64() {
			t.Fatalf("seed %d: rng state differs", seed)
		}
	}
}
