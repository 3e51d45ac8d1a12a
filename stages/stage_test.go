package stages

import (
	"encoding/binary"
	"hash/fnv"
	"testing"
)

// TestSeedHashIsFNV: seedHash is FNV-64a over the seed's 8 little-endian
// bytes and the parts (the recipe every seeded choice, and so every
// seeded output, depends on).
func TestSeedHashIsFNV(t *testing.T) {
	for _, c := range []struct {
		seed  uint64
		parts []string
	}{{0, nil}, {1, []string{"meta_tool", "\x00", "glaive-000017"}}, {1<<63 | 12345, []string{"", "潮汐", "x"}}} {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], c.seed)
		h.Write(b[:])
		for _, p := range c.parts {
			h.Write([]byte(p))
		}
		if got, want := seedHash(c.seed, c.parts...), h.Sum64(); got != want {
			t.Errorf("seedHash(%d, %q) = %x, want %x", c.seed, c.parts, got, want)
		}
	}
}
