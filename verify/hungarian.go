package verify

import "math"

// Hungarian solves the rectangular assignment problem: it picks at most one
// column for each row and at most one row for each column, as many pairs as
// the smaller side allows, with the least total cost. The result has one
// entry per row: the column assigned to it, or -1 when there are more rows
// than columns and the row got none. Ties are broken deterministically.
//
// cost[i][j] is the cost of assigning row i to column j. Rows may differ in
// length: a missing entry, like NaN and +Inf, is a prohibitive cost that is
// used only when nothing else is possible; -Inf is an irresistible one.
//
// The algorithm is the O(n²m) shortest-augmenting-path method with row and
// column potentials (Kuhn–Munkres as formulated by Jonker and Volgenant).
func Hungarian(cost [][]float64) []int {
	n := len(cost)
	if n == 0 {
		return []int{}
	}
	m := 0
	for _, row := range cost {
		m = max(m, len(row))
	}
	out := make([]int, n)
	if m == 0 {
		for i := range out {
			out[i] = -1
		}
		return out
	}
	a := sanitize(cost, n, m)
	if n <= m {
		return assign(a, n, m)
	}
	// More rows than columns: solve the transpose, then invert.
	t := make([][]float64, m)
	for j := range t {
		t[j] = make([]float64, n)
		for i := range n {
			t[j][i] = a[i][j]
		}
	}
	cols := assign(t, m, n)
	for i := range out {
		out[i] = -1
	}
	for j, i := range cols {
		out[i] = j
	}
	return out
}

// sanitize returns an n×m copy of cost with every entry finite, scaled so
// that sums of n entries cannot overflow.
func sanitize(cost [][]float64, n, m int) [][]float64 {
	maxAbs := 0.0
	for _, row := range cost {
		for _, c := range row {
			if !math.IsNaN(c) && !math.IsInf(c, 0) {
				maxAbs = max(maxAbs, math.Abs(c))
			}
		}
	}
	scale := 1.0
	if maxAbs > 1e100 {
		scale = 1 / maxAbs
		maxAbs = 1
	}
	// big exceeds the gain of any assignment that avoids it.
	big := (maxAbs + 1) * float64(2*(n+m)+1)
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, m)
		for j := range a[i] {
			c := math.NaN()
			if j < len(cost[i]) {
				c = cost[i][j]
			}
			switch {
			case math.IsNaN(c), math.IsInf(c, 1):
				a[i][j] = big
			case math.IsInf(c, -1):
				a[i][j] = -big
			default:
				a[i][j] = c * scale
			}
		}
	}
	return a
}

// assign solves the n×m problem for n ≤ m with finite costs and returns the
// column of every row.
func assign(a [][]float64, n, m int) []int {
	// 1-based arrays; index 0 is the virtual start column/row.
	u := make([]float64, n+1)
	v := make([]float64, m+1)
	p := make([]int, m+1)   // p[j]: row assigned to column j (0: none)
	way := make([]int, m+1) // way[j]: previous column on the augmenting path
	minv := make([]float64, m+1)
	used := make([]bool, m+1)
	for i := 1; i <= n; i++ {
		p[0] = i
		j0 := 0
		for j := range minv {
			minv[j] = math.Inf(1)
			used[j] = false
		}
		for {
			used[j0] = true
			i0 := p[j0]
			delta, j1 := math.Inf(1), -1
			for j := 1; j <= m; j++ {
				if used[j] {
					continue
				}
				if cur := a[i0-1][j-1] - u[i0] - v[j]; cur < minv[j] {
					minv[j], way[j] = cur, j0
				}
				if j1 < 0 || minv[j] < delta {
					delta, j1 = minv[j], j
				}
			}
			for j := 0; j <= m; j++ {
				if used[j] {
					u[p[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if p[j0] == 0 {
				break
			}
		}
		for j0 != 0 {
			j1 := way[j0]
			p[j0] = p[j1]
			j0 = j1
		}
	}
	out := make([]int, n)
	for j := 1; j <= m; j++ {
		if p[j] != 0 {
			out[p[j]-1] = j - 1
		}
	}
	return out
}
