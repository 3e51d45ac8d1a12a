package stages

import (
	"fmt"
	"slices"
	"testing"
)

// TestMetaToolNameSet: the set answers like a map below and above the
// size where it turns into one, keeps insertion order, and is empty after
// reset with the map dropped.
func TestMetaToolNameSet(t *testing.T) {
	var ns nameSet
	for round := range 2 {
		want := map[string]bool{}
		var order []string
		for i := range 3 * nameSetSmall {
			name := fmt.Sprintf("tool_%d", i%(2*nameSetSmall)) // the second half repeats names
			isNew := ns.add(name)
			if isNew != !want[name] {
				t.Fatalf("round %d: add(%q) = %v, want %v", round, name, isNew, !want[name])
			}
			if isNew {
				order = append(order, name)
			}
			want[name] = true
			for j := range 2 * nameSetSmall {
				probe := fmt.Sprintf("tool_%d", j)
				if ns.has(probe) != want[probe] {
					t.Fatalf("round %d, after %d adds: has(%q) = %v, want %v", round, i+1, probe, !want[probe], want[probe])
				}
			}
		}
		if !slices.Equal(ns.all(), order) {
			t.Fatalf("round %d: all() = %v, want %v", round, ns.all(), order)
		}
		ns.reset()
		if len(ns.all()) != 0 || ns.m != nil || ns.has("tool_0") {
			t.Fatalf("round %d: reset left %v (map %v)", round, ns.all(), ns.m)
		}
	}
}
