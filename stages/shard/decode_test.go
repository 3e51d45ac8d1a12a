package shard

import (
	"bytes"
	"slices"
	"testing"
)

// refRequired is the decoder's check of a required list leaf taken level
// by level: the levels of its list s, one value per element, no
// definition level above 1.
func refRequired(c, s *column, total int) bool {
	if !sameShape(c, s) || c.len() != total {
		return false
	}
	for _, def := range c.def {
		if def > 1 {
			return false
		}
	}
	return true
}

// refNestedShape is nestedShape as two walks: the levels and counts
// first, then the messages against their list.
func refNestedShape(c, msgs *column, rows, total int) ([]int32, int, bool) {
	if len(c.rep) != len(c.def) {
		return nil, 0, false
	}
	counts := make([]int32, total)
	r, m, n := -1, -1, 0
	for i, rep := range c.rep {
		def := c.def[i]
		switch {
		case def > 2 || rep > 2:
			return nil, 0, false
		case rep == 0:
			if r++; r >= rows {
				return nil, 0, false
			}
			if def > 0 {
				m++
			}
		case r < 0:
			return nil, 0, false
		case rep == 1:
			if def == 0 {
				return nil, 0, false
			}
			m++
		case rep == 2:
			if def != 2 || m < 0 {
				return nil, 0, false
			}
		}
		if m >= total {
			return nil, 0, false
		}
		if def == 2 {
			counts[m]++
			n++
		}
	}
	if r != rows-1 || m != total-1 {
		return nil, 0, false
	}
	var top []byte
	var present []bool
	for i, rep := range c.rep {
		if rep != 2 {
			top = append(top, rep)
			present = append(present, c.def[i] > 0)
		}
	}
	if !bytes.Equal(top, msgs.rep) || len(present) != len(msgs.def) {
		return nil, 0, false
	}
	for i, p := range present {
		if p != (msgs.def[i] > 0) {
			return nil, 0, false
		}
	}
	return counts, n, true
}

// shapeLevels makes, from in, the levels of a list column (rows rows)
// and of a leaf under it: a list of its own in each element (nested) or
// one value per element, then flips a few levels when in asks for it, so
// both valid and damaged shapes occur.
func shapeLevels(in []byte, nested bool) (list, leaf column, rows, total int) {
	next := func() byte {
		if len(in) == 0 {
			return 0
		}
		b := in[0]
		in = in[1:]
		return b
	}
	rows = int(next()%6) + 1
	for range rows {
		n := int(next() % 4)
		if n == 0 {
			list.rep, list.def = append(list.rep, 0), append(list.def, 0)
			leaf.rep, leaf.def = append(leaf.rep, 0), append(leaf.def, 0)
			continue
		}
		for i := range n {
			rep := byte(min(i, 1))
			list.rep, list.def = append(list.rep, rep), append(list.def, 1)
			total++
			if !nested {
				leaf.rep, leaf.def = append(leaf.rep, rep), append(leaf.def, 1)
				leaf.offs = append(leaf.offs, 0)
				continue
			}
			k := int(next() % 3)
			if k == 0 {
				leaf.rep, leaf.def = append(leaf.rep, rep), append(leaf.def, 1)
			}
			for j := range k {
				r := rep
				if j > 0 {
					r = 2
				}
				leaf.rep, leaf.def = append(leaf.rep, r), append(leaf.def, 2)
			}
		}
	}
	leaf.offs = append(leaf.offs, 0)
	for len(in) >= 3 && len(leaf.rep) > 0 {
		i := int(in[1]) % len(leaf.rep)
		switch in[0] % 4 {
		case 0:
			leaf.rep[i] = in[2] % 4
		case 1:
			leaf.def[i] = in[2] % 4
		case 2:
			leaf.rep, leaf.def = slices.Delete(leaf.rep, i, i+1), slices.Delete(leaf.def, i, i+1)
		case 3:
			leaf.offs = append(leaf.offs, 0)
		}
		in = in[3:]
	}
	return list, leaf, rows, total
}

// FuzzShapes holds the decoder's one-walk level checks (required, and
// nestedShape's message check folded into its count walk) to the level by
// level versions above, on valid and damaged levels.
func FuzzShapes(f *testing.F) {
	f.Add([]byte{3, 2, 0, 3, 1, 2, 1})
	f.Add([]byte{2, 1, 2, 1, 2, 0, 1, 3})
	f.Add([]byte{4, 3, 1, 1, 0, 2, 2, 2, 1, 1, 7, 2})
	f.Add([]byte{2, 2, 2, 2, 0, 5, 2})
	f.Add([]byte{1, 3, 2, 2, 2, 3, 4, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		list, leaf, rows, total := shapeLevels(in, false)
		if _, n, err := listShape(&list, rows, 1); err != nil || n != total {
			t.Fatalf("the list's own levels do not parse: %v", err)
		}
		var d decoder
		got := d.required(&leaf, &list, total, col.toolDesc) == nil
		if want := refRequired(&leaf, &list, total); got != want {
			t.Errorf("required = %v, level by level %v (list %v/%v, leaf %v/%v)", got, want, list.rep, list.def, leaf.rep, leaf.def)
		}

		list, leaf, rows, total = shapeLevels(in, true)
		counts, n, err := nestedShape(&leaf, &list, rows, total)
		wantCounts, wantN, ok := refNestedShape(&leaf, &list, rows, total)
		if (err == nil) != ok || !slices.Equal(counts, wantCounts) || n != wantN {
			t.Errorf("nestedShape = %v %d %v, in two walks %v %d %v (list %v/%v, leaf %v/%v)",
				counts, n, err, wantCounts, wantN, ok, list.rep, list.def, leaf.rep, leaf.def)
		}
	})
}
