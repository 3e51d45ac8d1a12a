package stages

import (
	"sync"
	"unsafe"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// checkedTools remembers tools that passed shard.Check, by the memory of
// their parameters, for checkChanged: a stage lists the same tools record
// after record (meta_tool's distractors come from the run's library, its
// own definitions are shared) at positions shard.CheckChanged does not
// look at, so it checked them again for every record. A remembered tool
// keeps its memory, so the same address cannot hold other bytes while it
// is remembered; records are not changed in place. One lives for one pass
// over a shard's records (processShard's workers share it), whose outputs
// hold that memory anyway: it keeps nothing past the pass. (A process-wide
// one kept, with each remembered tool, whatever memory the tool was a view
// of, such as a whole row group's decoded columns.) The zero value is
// ready; safe for concurrent use.
type checkedTools struct {
	mu   sync.Mutex
	slot [checkedToolSlots]record.Tool
}

const checkedToolSlots = 4096

// maxLinedUp is the most tools of an output checkChanged lines up (more
// are set against prev's as they are).
const maxLinedUp = 16

// checkChanged is shard.CheckChanged(out, prev), prev being a record that
// passed the check, with prev's tools lined up with out's: each of out's
// tools is set against one that shares its parameters' memory, prev's or
// one remembered, else against prev's tool at its position. Every tool it
// is set against passed the check, so the line-up decides only how much
// is checked again, never what passes. The tools of an output that passes
// that prev does not list are remembered: those come from elsewhere (a
// library, a stage's own definitions) and come again, where prev's own
// would only push them out of their slots.
func (c *checkedTools) checkChanged(out, prev *record.Record) (string, error) {
	against := prev.Tools
	var newTools uint32 // out's tools that prev does not list (by memory)
	if n := len(out.Tools); n > 0 && n <= maxLinedUp && !sameMemory(out.Tools, prev.Tools) {
		var lined [maxLinedUp]record.Tool // on the stack: no pool, no write barriers
		tools := lined[:n]
		copy(tools, prev.Tools)
		c.mu.Lock()
	next:
		for i := range tools {
			t := &out.Tools[i]
			if i < len(prev.Tools) && sameMemory(t.Parameters, prev.Tools[i].Parameters) {
				continue
			}
			for _, p := range prev.Tools {
				if sameMemory(t.Parameters, p.Parameters) {
					tools[i] = p
					continue next
				}
			}
			newTools |= 1 << i
			if k := c.find(t.Parameters); k >= 0 {
				tools[i] = c.slot[k]
			}
		}
		c.mu.Unlock()
		against = tools
	}
	reason, err := shard.CheckChangedTools(out, prev, against)
	if err == nil && newTools != 0 {
		c.mu.Lock()
		for i, t := range out.Tools {
			if newTools&(1<<i) != 0 && len(t.Parameters) > 0 {
				c.remember(t)
			}
		}
		c.mu.Unlock()
	}
	return reason, err
}

// The slots are pairs (2k, 2k+1): parameters at an address may sit in
// either slot of the pair their address hashes to, the one remembered
// last in the first. With 1,024 slots of one tool each, the demo rows'
// 576 library tools pushed each other out record after record and a
// fifth of meta_tool's check went to parameters checked again
// (BenchmarkCheckChanged/meta_tool: 4,096 slots in pairs, −22 %; 1,024 in
// pairs −10 %; 16,384 no better). The slots take 320 kB.

// find returns the slot remembering parameters at their address, or -1.
func (c *checkedTools) find(params []byte) int {
	k := c.index(params)
	switch {
	case sameMemory(params, c.slot[k].Parameters):
		return k
	case sameMemory(params, c.slot[k+1].Parameters):
		return k + 1
	}
	return -1
}

// remember puts t first in the pair of slots of its parameters' address,
// the tool that was first second.
func (c *checkedTools) remember(t record.Tool) {
	k := c.index(t.Parameters)
	if !sameMemory(t.Parameters, c.slot[k].Parameters) {
		c.slot[k+1] = c.slot[k] // t itself when it was second
		c.slot[k] = t
	}
}

// index is the first slot of the pair of parameters at their address.
func (c *checkedTools) index(params []byte) int {
	if len(params) == 0 {
		return 0
	}
	a := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(params))))
	return int((a*0x9e3779b97f4a7c15)>>52) % checkedToolSlots &^ 1
}

// sameMemory reports whether a and b are the same non-empty elements in
// memory.
func sameMemory[E any](a, b []E) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}
