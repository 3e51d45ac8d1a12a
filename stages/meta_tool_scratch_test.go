package stages

import (
	"fmt"
	"math/rand/v2"
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

// TestReseederAsRand: a generator reseeded for a record draws what
// Env.Rand gives the record (the recipe before reseeder: FNV-1a of seed,
// stage, NUL, ID), whatever it drew for the record before.
func TestReseederAsRand(t *testing.T) {
	for _, env := range []*Env{{Stage: "meta_tool", Seed: 42}, {Stage: "negatives", Seed: 0}, {Stage: "", Seed: 1 << 63}} {
		var src rand.PCG
		g := rand.New(&src)
		rs := env.reseeder()
		for _, id := range []string{"", "xlam:0", "glaive:12345", "名前:7"} {
			s := seedHash(env.Seed, env.Stage, "\x00", id)
			want := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
			got := env.Rand(id)
			rs.reseed(&src, id)
			for k := range 20 {
				w := want.Uint64()
				if a, b := got.Uint64(), g.Uint64(); a != w || b != w {
					t.Fatalf("%s/%d id %q draw %d: Env.Rand %x, reseeded %x, want %x", env.Stage, env.Seed, id, k, a, b, w)
				}
			}
		}
	}
}
