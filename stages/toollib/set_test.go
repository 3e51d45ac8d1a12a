package toollib

import (
	"fmt"
	"slices"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

func TestSet(t *testing.T) {
	tool := func(name, desc, params, resp string) record.Tool {
		return record.Tool{Name: name, Description: desc, Parameters: []byte(params), Response: []byte(resp)}
	}
	var s Set
	s.Add(tool("a", "d", `{}`, `1`), 2)
	s.Add(tool("b", "d", `{}`, ``), 0)
	s.Add(tool("a", "d", `{}`, `2`), 2)     // same as the first, same rank: the first stays
	s.Add(tool("a", "d", `{"x":1}`, ``), 1) // other parameters: another tool
	s.Add(tool("a", "d\x00", `{}`, ``), 0)  // other description: another tool
	s.Add(tool("a", "d", `{}`, `3`), 1)     // same as the first, lower rank: replaces it
	s.Add(tool("b", "d", `{}`, `4`), 1)     // same as "b", higher rank: ignored
	got := s.Tools()
	want := []record.Tool{tool("a", "d", `{}`, `3`), tool("b", "d", `{}`, ``), tool("a", "d", `{"x":1}`, ``), tool("a", "d\x00", `{}`, ``)}
	if !slices.EqualFunc(got, want, func(a, b record.Tool) bool {
		return compare(a, b) == 0 && string(a.Response) == string(b.Response)
	}) || s.Len() != 4 {
		t.Fatalf("got %q,\nwant %q", got, want)
	}
	if l := New(got); len(l.Tools) != 4 {
		t.Fatalf("New kept %d of the distinct tools", len(l.Tools))
	}
}

// TestSetAddSet: a Set's tools added to another with AddSet are what
// adding them one by one with Add makes, ranks and order included.
func TestSetAddSet(t *testing.T) {
	tool := func(name, params, resp string) record.Tool {
		return record.Tool{Name: name, Description: "d", Parameters: []byte(params), Response: []byte(resp)}
	}
	parts := [][]record.Tool{
		{tool("a", `{}`, `1`), tool("b", `{}`, ``), tool("a", `{}`, `2`)},
		{tool("c", `{}`, ``), tool("a", `{}`, `3`), tool("b", `{"x":1}`, ``)},
		{tool("b", `{}`, `4`), tool("c", `{}`, `5`), tool("d", `{}`, ``)},
	}
	ranks := []int{5, 2, 2}
	var bySet, byTool Set
	for i, part := range parts {
		var p Set
		for _, tl := range part {
			p.Add(tl, 0)
			byTool.Add(tl, ranks[i])
		}
		bySet.AddSet(&p, ranks[i])
	}
	want := []record.Tool{tool("a", `{}`, `3`), tool("b", `{}`, `4`), tool("c", `{}`, ``), tool("b", `{"x":1}`, ``), tool("d", `{}`, ``)}
	for name, s := range map[string]*Set{"AddSet": &bySet, "Add": &byTool} {
		if got := s.Tools(); !slices.EqualFunc(got, want, func(a, b record.Tool) bool {
			return compare(a, b) == 0 && string(a.Response) == string(b.Response)
		}) {
			t.Errorf("%s: got %q,\nwant %q", name, got, want)
		}
	}
}

// BenchmarkDistinct dedups the tools of 5000 records with 3 tools each, 60
// distinct, as ingest does per shard: with a Set, and with New as ingest
// did before.
func BenchmarkDistinct(b *testing.B) {
	var all []record.Tool
	for i := range 5000 {
		for j := range 3 {
			k := (i*7 + j*13) % 60
			all = append(all, record.Tool{Name: fmt.Sprintf("tool_%d", k%20), Description: fmt.Sprintf("Does thing %d with the given inputs", k),
				Parameters: fmt.Appendf(nil, `{"type":"object","properties":{"city":{"type":"string","description":"the city %d"}},"required":["city"]}`, k)})
		}
	}
	b.Run("Set", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s Set
			for _, t := range all {
				s.Add(t, 0)
			}
			if s.Len() != 60 {
				b.Fatal(s.Len())
			}
		}
	})
	// Parts: ingest's way, a Set per part of 500 records, each merged
	// into the source's Set, tool by tool (Add) or by AddSet; the tools of
	// 2,000 distinct records, as many as the harness's dumps repeat.
	var drawn []record.Tool
	for i := range 5000 {
		for j := range 3 {
			k := (i%2000)*3 + j
			drawn = append(drawn, record.Tool{Name: fmt.Sprintf("tool_%d", k%20), Description: fmt.Sprintf("Does thing %d with the given inputs", k),
				Parameters: fmt.Appendf(nil, `{"type":"object","properties":{"city":{"type":"string","description":"the city %d"}},"required":["city"]}`, k)})
		}
	}
	for _, merge := range []string{"Add", "AddSet"} {
		b.Run("Parts"+merge, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var s Set
				for i := 0; i < len(drawn); i += 1500 {
					var p Set
					for _, t := range drawn[i : i+1500] {
						p.Add(t, 0)
					}
					if merge == "AddSet" {
						s.AddSet(&p, i)
						continue
					}
					for _, t := range p.Tools() {
						s.Add(t, i)
					}
				}
				if s.Len() != 6000 {
					b.Fatal(s.Len())
				}
			}
		})
	}
	b.Run("New", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n := len(New(all).Tools); n != 60 {
				b.Fatal(n)
			}
		}
	})
}
