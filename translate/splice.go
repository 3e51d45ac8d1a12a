package translate

import (
	"errors"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/jsontree"
)

// Translation rewrites only string literals (splice), so everything else —
// key order, spacing, number spelling — keeps its original bytes. The trees
// come from jsontree, whose values remember where their text sits.

var errNotJSON = errors.New("not valid JSON")

// parseTree parses one JSON value (surrounding white space allowed). Keys
// may repeat, as encoding/json allows: the answer checks report them. The
// tree's strings may point into b, which must not change while it is used.
func parseTree(b []byte) (*jsontree.Value, error) {
	p := jsontree.Parser{Data: b, DuplicateKeys: true, Spans: true}
	v, err := p.Parse()
	if err != nil {
		return nil, errNotJSON
	}
	return &v, nil
}

// splice returns src with the string literals at the given spans replaced by
// the JSON encodings of their new values; everything else keeps its bytes.
// Spans must not overlap; they may come in any order.
func splice(src []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return src
	}
	sorted := make([]edit, len(edits))
	copy(sorted, edits)
	for i := 1; i < len(sorted); i++ { // few edits: insertion sort keeps it simple and stable
		for j := i; j > 0 && sorted[j].start < sorted[j-1].start; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	out := make([]byte, 0, len(src)+len(src)/2)
	prev := 0
	for _, e := range sorted {
		out = append(out, src[prev:e.start]...)
		out = appendString(out, e.value)
		prev = e.end
	}
	return append(out, src[prev:]...)
}

// An edit replaces the string literal at src[start:end].
type edit struct {
	start, end int
	value      string
}

// stringEdit is the edit that writes value over the string literal s, a
// value of the tree parsed from src.
func stringEdit(src []byte, s *jsontree.Value, value string) edit {
	start, end := s.Span(src)
	return edit{start: start, end: end, value: value}
}

// appendString appends s as a JSON string literal the way jsonout writes
// it (no HTML escaping, so Chinese text and <, >, & stay readable).
func appendString(dst []byte, s string) []byte {
	b, _ := jsonout.Marshal(s) // encoding a string cannot fail
	return append(dst, b...)
}
