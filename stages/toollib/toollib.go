// Package toollib holds the run's tool library: every distinct tool seen in
// the ingested sources, and the ways stages search it (Meta-Tool similarity,
// BM25).
package toollib

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/augmentdata/augment/stages/record"
)

// A Library is a deduplicated, deterministically ordered set of tools.
// Tools are sorted by name, then by definition; two tools are the same when
// name, description and parameters are byte-identical.
type Library struct {
	Tools   []record.Tool
	Hash    string // identifies the library's content; part of the key of stages that use it
	byName  map[string][]int
	compact []bool // per tool: its parameters hold no white space outside strings
}

// New builds a library from tools, dropping exact duplicates.
func New(tools []record.Tool) *Library {
	ts := slices.Clone(tools)
	slices.SortFunc(ts, compare)
	ts = slices.CompactFunc(ts, func(a, b record.Tool) bool { return compare(a, b) == 0 })
	l := &Library{Tools: ts, byName: make(map[string][]int, len(ts)), compact: make([]bool, len(ts))}
	h := sha256.New()
	for i, t := range ts {
		l.byName[t.Name] = append(l.byName[t.Name], i)
		l.compact[i] = compact(t.Parameters)
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
		h.Write([]byte(t.Description))
		h.Write([]byte{0})
		h.Write(t.Parameters)
		h.Write([]byte{0})
	}
	l.Hash = hex.EncodeToString(h.Sum(nil)[:12])
	return l
}

// Named returns the indexes of the tools called name.
func (l *Library) Named(name string) []int { return l.byName[name] }

// Find returns the index of the first tool called t.Name with t's
// definition (SameDefinition), or -1. The usual case, t itself in the
// library with compact parameters, costs no scan of t's parameters.
func (l *Library) Find(t record.Tool) int {
	named := l.byName[t.Name]
	for _, i := range named {
		u := l.Tools[i]
		switch {
		case u.Description != t.Description:
			continue
		case !l.compact[i]:
			// A tool written with white space may equal t once compacted,
			// whatever comes later: the general rule decides.
			return l.find(named, t)
		case bytes.Equal(u.Parameters, t.Parameters):
			// Every tool before it of that description is compact and
			// differs from t, which is compact too: none is t's definition.
			return i
		}
	}
	// Every tool of that name and description is compact and none equals
	// t: a compact t is none of them.
	if compact(t.Parameters) {
		return -1
	}
	return l.find(named, t)
}

// find is Find by SameDefinition, tool by tool.
func (l *Library) find(named []int, t record.Tool) int {
	for _, i := range named {
		if SameDefinition(l.Tools[i], t) {
			return i
		}
	}
	return -1
}

func compare(a, b record.Tool) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Description, b.Description); c != 0 {
		return c
	}
	return bytes.Compare(a.Parameters, b.Parameters)
}

// Key identifies a tool definition: two tools with the same key are the
// same tool (name, description and parameters byte-identical; parameters
// are compact JSON by the record's contract).
func Key(t record.Tool) string {
	return t.Name + "\x00" + t.Description + "\x00" + string(t.Parameters)
}

// DefKey identifies what a tool does apart from its name: two tools with the
// same DefKey describe the same function, whatever they are called. Unlike
// Key it does not rely on compact parameters: a tool built by hand with
// spaces in its schema is the same definition as its compact twin.
func DefKey(t record.Tool) string {
	return t.Description + "\x00" + string(compactJSON(t.Parameters))
}

// SameDefinition reports whether a and b describe the same function,
// whatever their names (their DefKeys are equal).
func SameDefinition(a, b record.Tool) bool {
	switch {
	case a.Description != b.Description:
		return false
	case bytes.Equal(a.Parameters, b.Parameters):
		return true
	case compact(a.Parameters) && compact(b.Parameters):
		return false // compacting changes neither (the common case: records hold compact JSON)
	}
	return bytes.Equal(compactJSON(a.Parameters), compactJSON(b.Parameters))
}

// compact reports whether b has no white space outside JSON strings, so
// that compactJSON(b) is b: a scan without the allocation and the JSON
// scanner of json.Compact.
func compact(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// compactJSON returns b without insignificant white space, or b itself
// when it is not JSON.
func compactJSON(b []byte) []byte {
	var c bytes.Buffer
	if json.Compact(&c, b) != nil {
		return b
	}
	return c.Bytes()
}
