package verify

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteForce returns the least total cost of a maximum assignment.
func bruteForce(cost [][]float64) float64 {
	n, m := len(cost), len(cost[0])
	best := math.Inf(1)
	used := make([]bool, m)
	var rec func(i int, sum float64, skips int)
	// Assign rows in order; a row may stay unassigned only when there are
	// more rows than columns.
	rec = func(i int, sum float64, skips int) {
		if i == n {
			best = min(best, sum)
			return
		}
		for j := range m {
			if !used[j] {
				used[j] = true
				rec(i+1, sum+cost[i][j], skips)
				used[j] = false
			}
		}
		if skips > 0 {
			rec(i+1, sum, skips-1)
		}
	}
	rec(0, 0, max(0, n-m))
	return best
}

func total(cost [][]float64, a []int) float64 {
	s := 0.0
	for i, j := range a {
		if j >= 0 {
			s += cost[i][j]
		}
	}
	return s
}

func validAssignment(t *testing.T, a []int, n, m int) {
	t.Helper()
	if len(a) != n {
		t.Fatalf("len %d, want %d", len(a), n)
	}
	seen := map[int]bool{}
	assigned := 0
	for _, j := range a {
		if j < 0 {
			continue
		}
		if j >= m || seen[j] {
			t.Fatalf("invalid assignment %v", a)
		}
		seen[j] = true
		assigned++
	}
	if assigned != min(n, m) {
		t.Fatalf("%d pairs in %v, want %d", assigned, a, min(n, m))
	}
}

func TestHungarianBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n, m := 1+rng.IntN(6), 1+rng.IntN(6)
		cost := make([][]float64, n)
		for i := range cost {
			cost[i] = make([]float64, m)
			for j := range cost[i] {
				if trial%3 == 0 {
					cost[i][j] = float64(rng.IntN(4)) // many ties
				} else {
					cost[i][j] = rng.Float64()*200 - 100
				}
			}
		}
		a := Hungarian(cost)
		validAssignment(t, a, n, m)
		if got, want := total(cost, a), bruteForce(cost); math.Abs(got-want) > 1e-9 {
			t.Fatalf("trial %d: %v gives %v, brute force %v\n%v", trial, a, got, want, cost)
		}
	}
}

func TestHungarianEdges(t *testing.T) {
	if got := Hungarian(nil); len(got) != 0 {
		t.Errorf("nil: %v", got)
	}
	if got := Hungarian([][]float64{{}, {}}); !slices.Equal(got, []int{-1, -1}) {
		t.Errorf("no columns: %v", got)
	}
	if got := Hungarian([][]float64{{5}}); !slices.Equal(got, []int{0}) {
		t.Errorf("1x1: %v", got)
	}
	// Prohibitive entries are avoided when possible.
	inf := math.Inf(1)
	if got := Hungarian([][]float64{{inf, 1}, {1, math.NaN()}}); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("inf/nan: %v", got)
	}
	// ... and used when not.
	if got := Hungarian([][]float64{{inf}, {inf}}); slices.Index(got, 0) < 0 {
		t.Errorf("all inf: %v", got)
	}
	// -Inf is taken.
	if got := Hungarian([][]float64{{0, math.Inf(-1)}, {0, 0}}); got[0] != 1 {
		t.Errorf("-inf: %v", got)
	}
	// Ragged rows: the missing entry is prohibitive.
	if got := Hungarian([][]float64{{1}, {5, 0}}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("ragged: %v", got)
	}
	// Huge finite costs are scaled, not overflowed.
	if got := Hungarian([][]float64{{1e308, 1e307}, {1e307, 1e308}}); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("huge: %v", got)
	}
	// More rows than columns.
	a := Hungarian([][]float64{{3}, {1}, {2}})
	if !slices.Equal(a, []int{-1, 0, -1}) {
		t.Errorf("tall: %v", a)
	}
}

func BenchmarkHungarian50(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	cost := make([][]float64, 50)
	for i := range cost {
		cost[i] = make([]float64, 50)
		for j := range cost[i] {
			cost[i][j] = rng.Float64()
		}
	}
	for b.Loop() {
		Hungarian(cost)
	}
}
