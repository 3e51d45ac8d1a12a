package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/augmentdata/augment/jsonout"
)

// A node is one JSON value that remembers its key order and, for strings,
// where its literal sits in the source text. Translation rewrites only
// string literals (splice), so everything else — key order, spacing, number
// spelling — keeps its original bytes.
type node struct {
	kind       byte     // '{' object, '[' array, '"' string, '0' number, 't'/'f' boolean, 'n' null
	keys       []string // object keys, in source order
	kids       []*node  // object values (parallel to keys) or array elements
	str        string   // decoded string value
	raw        []byte   // literal text of numbers, booleans and null
	start, end int      // byte span of a string literal, quotes included
}

var errNotJSON = errors.New("not valid JSON")

// parseTree parses one JSON value (surrounding white space allowed).
func parseTree(b []byte) (*node, error) {
	if !json.Valid(b) {
		return nil, errNotJSON
	}
	p := &treeParser{b: b}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(b) {
		return nil, errNotJSON
	}
	return n, nil
}

// treeParser walks text already checked by json.Valid; its error returns
// guard against a mismatch between the two rather than expected input.
type treeParser struct {
	b []byte
	i int
}

func (p *treeParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *treeParser) value() (*node, error) {
	p.space()
	if p.i >= len(p.b) {
		return nil, errNotJSON
	}
	switch c := p.b[p.i]; c {
	case '{':
		p.i++
		n := &node{kind: '{'}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return n, nil
		}
		for {
			p.space()
			k, err := p.value()
			if err != nil || k.kind != '"' {
				return nil, errNotJSON
			}
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, errNotJSON
			}
			p.i++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k.str)
			n.kids = append(n.kids, v)
			p.space()
			if p.i >= len(p.b) {
				return nil, errNotJSON
			}
			p.i++
			switch p.b[p.i-1] {
			case ',':
			case '}':
				return n, nil
			default:
				return nil, errNotJSON
			}
		}
	case '[':
		p.i++
		n := &node{kind: '['}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return n, nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, v)
			p.space()
			if p.i >= len(p.b) {
				return nil, errNotJSON
			}
			p.i++
			switch p.b[p.i-1] {
			case ',':
			case ']':
				return n, nil
			default:
				return nil, errNotJSON
			}
		}
	case '"':
		start := p.i
		p.i++
		for p.i < len(p.b) && p.b[p.i] != '"' {
			if p.b[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		if p.i >= len(p.b) {
			return nil, errNotJSON
		}
		p.i++
		n := &node{kind: '"', start: start, end: p.i}
		if err := json.Unmarshal(p.b[start:p.i], &n.str); err != nil {
			return nil, errNotJSON
		}
		return n, nil
	case 't', 'f', 'n':
		word := "null"
		switch c {
		case 't':
			word = "true"
		case 'f':
			word = "false"
		}
		if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
			return nil, errNotJSON
		}
		p.i += len(word)
		return &node{kind: c, raw: []byte(word)}, nil
	default:
		start := p.i
		for p.i < len(p.b) && bytes.IndexByte([]byte("+-.0123456789eE"), p.b[p.i]) >= 0 {
			p.i++
		}
		if p.i == start {
			return nil, errNotJSON
		}
		return &node{kind: '0', raw: p.b[start:p.i]}, nil
	}
}

// get returns the value of key in an object node, or nil.
func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k == key {
			return n.kids[i]
		}
	}
	return nil
}

// nth returns the value of the n-th (0-based) occurrence of key, or nil.
func (n *node) nth(key string, i int) *node {
	for j, k := range n.keys {
		if k == key {
			if i == 0 {
				return n.kids[j]
			}
			i--
		}
	}
	return nil
}

// kindName names a node kind for messages.
func kindName(k byte) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	default:
		return "null"
	}
}

// sameValue reports whether a and b are the same JSON value: objects with
// the same keys and values in any order, arrays element by element, numbers
// by value, strings by content.
func sameValue(a, b *node) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case '{':
		if len(a.keys) != len(b.keys) {
			return false
		}
		for i, k := range a.keys {
			// The n-th occurrence of a key pairs with the n-th in b, so
			// objects with repeated keys compare too.
			n := 0
			for _, k2 := range a.keys[:i] {
				if k2 == k {
					n++
				}
			}
			bv := b.nth(k, n)
			if bv == nil || !sameValue(a.kids[i], bv) {
				return false
			}
		}
		return true
	case '[':
		if len(a.kids) != len(b.kids) {
			return false
		}
		for i := range a.kids {
			if !sameValue(a.kids[i], b.kids[i]) {
				return false
			}
		}
		return true
	case '"':
		return a.str == b.str
	case '0':
		return sameNumber(a.raw, b.raw)
	default:
		return true
	}
}

// sameNumber compares two JSON number literals by value: 1, 1.0 and 1e0 are
// the same number.
func sameNumber(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	x, err1 := strconv.ParseFloat(string(a), 64)
	y, err2 := strconv.ParseFloat(string(b), 64)
	return err1 == nil && err2 == nil && x == y
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

// appendString appends s as a JSON string literal without HTML escaping, so
// Chinese text and <, >, & stay readable.
func appendString(dst []byte, s string) []byte {
	b, _ := jsonout.Marshal(s) // encoding a string cannot fail
	return append(dst, b...)
}
