package toollib

import (
	"hash/maphash"

	"github.com/augmentdata/augment/stages/record"
)

// A Set collects distinct tools as they come (two tools are the same when
// name, description and parameters are byte-identical, as in a Library)
// without building a key per tool: its memory grows with the distinct
// tools only. Of tools that are the same it keeps the one added with the
// lowest rank, the first added among equal ranks, so that the result does
// not depend on the order in which concurrent producers add their ranked
// parts. The zero Set is empty and ready to use; a Set is not safe for
// concurrent use.
type Set struct {
	index map[uint64][]int // tool hash → indexes in tools
	tools []record.Tool
	keys  []uint64 // each tool's hash
	ranks []int
}

// setSeed seeds the hashes of every Set, so that AddSet takes another
// Set's hashes as they are (they only find tools: the comparison decides).
var setSeed = maphash.MakeSeed()

// Add adds t with rank unless the Set has the same tool with a rank no
// higher; a same tool with a higher rank is replaced by t.
func (s *Set) Add(t record.Tool, rank int) {
	// Three one-shot hashes, mixed (equal tools hash alike; the
	// comparison decides).
	k := maphash.String(setSeed, t.Name)
	k = (k*0x9E3779B97F4A7C15 ^ maphash.String(setSeed, t.Description)) * 0x9E3779B97F4A7C15
	k ^= maphash.Bytes(setSeed, t.Parameters)
	s.add(k, t, rank)
}

// AddSet adds the tools of o, each with rank, as Add would one by one in
// the order o holds them (Tools).
func (s *Set) AddSet(o *Set, rank int) {
	for i := range o.tools {
		s.add(o.keys[i], o.tools[i], rank)
	}
}

// add is Add of t, whose hash is k.
func (s *Set) add(k uint64, t record.Tool, rank int) {
	if s.index == nil {
		s.index = map[uint64][]int{}
	}
	for _, i := range s.index[k] {
		if o := &s.tools[i]; o.Name == t.Name && o.Description == t.Description && string(o.Parameters) == string(t.Parameters) {
			if rank < s.ranks[i] {
				s.tools[i], s.ranks[i] = t, rank
			}
			return
		}
	}
	s.index[k] = append(s.index[k], len(s.tools))
	s.tools = append(s.tools, t)
	s.keys = append(s.keys, k)
	s.ranks = append(s.ranks, rank)
}

// Len returns the number of distinct tools.
func (s *Set) Len() int { return len(s.tools) }

// Tools returns the distinct tools in the order they were first added. The
// slice is the Set's own.
func (s *Set) Tools() []record.Tool { return s.tools }
