package stages

import (
	"bytes"
	"sync"
	"unsafe"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// checkedTools remembers tools that passed shard.Check, for checkChanged:
// a stage lists the same tools record after record (meta_tool's
// distractors come from the run's library, its own definitions are
// shared) at positions shard.CheckChanged does not look at, so it checked
// them again for every record. Tools are found by the address of their
// parameters and compared in full (a memory compare, far cheaper than the
// check). The memo keeps its own copy of each tool, made when it is
// remembered and counted in checkedToolBudget, never a record's memory: a
// record's strings may be views of a whole row group's decoded columns,
// which one remembered tool would keep alive. Safe for concurrent use.
type checkedTools struct {
	mu   sync.Mutex
	slot [checkedToolSlots]checkedTool
	used int // bytes of the remembered copies
}

// A checkedTool is a copy of a tool that passed the check, with the
// address of the parameters it was met in (a hint: bytes are compared).
type checkedTool struct {
	tool record.Tool
	addr uintptr
}

const (
	checkedToolSlots = 4096
	// checkedToolBudget bounds the bytes of the remembered copies; a tool
	// met when it is spent is not remembered.
	checkedToolBudget = 16 << 20
)

// knownTools are the tools the runner's checks passed.
var knownTools checkedTools

// maxLinedUp is the most tools of an output checkChanged lines up (more
// are set against prev's as they are).
const maxLinedUp = 16

// checkChanged is shard.CheckChanged(out, prev), prev being a record that
// passed the check, with prev's tools lined up with out's: each of out's
// tools is set against one that shares its parameters' memory, prev's, or
// against its own fields where they are a remembered tool's bytes (and
// that tool's otherwise), else against prev's tool at its position. Every
// tool it is set against passed the check, so the line-up decides only how
// much is checked again, never what passes. The tools of an output that passes
// that prev does not list are remembered: those come from elsewhere (a
// library, a stage's own definitions) and come again, where prev's own
// would only push them out of their slots.
func (c *checkedTools) checkChanged(out, prev *record.Record) (string, error) {
	against := prev.Tools
	var newTools uint32 // out's tools that prev does not list (by memory) nor the memo
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
			for k := range prev.Tools {
				if sameMemory(t.Parameters, prev.Tools[k].Parameters) {
					tools[i] = prev.Tools[k]
					continue next
				}
			}
			if k := c.find(t.Parameters); k >= 0 {
				tools[i] = checkedAgainst(t, &c.slot[k].tool)
			} else {
				newTools |= 1 << i
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
// pairs −10 %; 16,384 no better). The slots take 352 KiB (4,096 of 88
// bytes); the copies they point to, at most checkedToolBudget.

// find returns the slot remembering parameters met at their address,
// with their bytes, or -1.
func (c *checkedTools) find(params []byte) int {
	k := c.index(params)
	a := address(params)
	for _, k := range [2]int{k, k + 1} {
		if s := &c.slot[k]; s.addr == a && len(params) > 0 && bytes.Equal(s.tool.Parameters, params) {
			return k
		}
	}
	return -1
}

// checkedAgainst is t lined up with u, a remembered tool with t's
// parameters: each field of t that is u's bytes is set against itself
// (the check skips it), the others against u's.
func checkedAgainst(t, u *record.Tool) record.Tool {
	w := *u
	w.Parameters = t.Parameters
	if t.Name == u.Name {
		w.Name = t.Name
	}
	if t.Description == u.Description {
		w.Description = t.Description
	}
	if len(t.Response) > 0 && bytes.Equal(t.Response, u.Response) {
		w.Response = t.Response
	}
	return w
}

// remember puts t first in the pair of slots of its parameters' address
// (a copy of it, unless the budget is spent), the tool that was first
// second.
func (c *checkedTools) remember(t record.Tool) {
	k := c.index(t.Parameters)
	if j := c.find(t.Parameters); j >= 0 {
		if j == k+1 {
			c.slot[k], c.slot[k+1] = c.slot[k+1], c.slot[k]
		}
		return
	}
	size := len(t.Name) + len(t.Description) + len(t.Parameters) + len(t.Response)
	gone := &c.slot[k+1].tool
	freed := len(gone.Name) + len(gone.Description) + len(gone.Parameters) + len(gone.Response)
	if c.used-freed+size > checkedToolBudget {
		return
	}
	c.used += size - freed
	c.slot[k+1] = c.slot[k]
	c.slot[k] = checkedTool{addr: address(t.Parameters), tool: t.Owned()}
}

// address is the address of params' first byte (0 when empty), kept as a
// number: it keeps no memory alive.
func address(params []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(params)))
}

// index is the first slot of the pair of parameters at their address.
func (c *checkedTools) index(params []byte) int {
	if len(params) == 0 {
		return 0
	}
	a := uint64(address(params))
	return int((a*0x9e3779b97f4a7c15)>>52) % checkedToolSlots &^ 1
}

// sameMemory reports whether a and b are the same non-empty elements in
// memory.
func sameMemory[E any](a, b []E) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}
