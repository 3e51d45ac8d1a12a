package formats

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file holds the package's JSON layer: a decoder into an
// order-preserving tree and a compact writer. encoding/json is not used for
// rows because it loses object key order (Go maps) and would make us decode
// twice (once for the row, once more for every embedded JSON text).

type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jNumber
	jString
	jArray
	jObject
)

// A jvalue is a decoded JSON value. Objects keep their members in source
// order; numbers keep their literal text, so 1.0 stays 1.0.
type jvalue struct {
	kind  jkind
	str   string    // jString: decoded text; jNumber: the literal
	elems []jmember // jArray: elements (key unused); jObject: members in order
}

type jmember struct {
	key string
	val jvalue
}

// get returns the member called key of an object, or nil.
func (v *jvalue) get(key string) *jvalue {
	if v.kind != jObject {
		return nil
	}
	for i := range v.elems {
		if v.elems[i].key == key {
			return &v.elems[i].val
		}
	}
	return nil
}

// has reports whether an object has a member called key.
func (v *jvalue) has(key string) bool { return v.get(key) != nil }

// stringOr returns the string member key of an object; ok is false when the
// member exists but is not a string. A missing or null member gives "", true.
func (v *jvalue) stringOr(key string) (s string, ok bool) {
	m := v.get(key)
	switch {
	case m == nil || m.kind == jNull:
		return "", true
	case m.kind == jString:
		return m.str, true
	}
	return "", false
}

func (k jkind) String() string {
	switch k {
	case jNull:
		return "null"
	case jFalse, jTrue:
		return "boolean"
	case jNumber:
		return "number"
	case jString:
		return "string"
	case jArray:
		return "array"
	}
	return "object"
}

// A jsonError says where and why decoding failed. eof marks input that ended
// inside a value (truncation).
type jsonError struct {
	off int
	msg string
	eof bool
}

func (e *jsonError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

// isEOF reports whether err says the input ended inside a value.
func isEOF(err error) bool {
	je, ok := err.(*jsonError)
	return ok && je.eof
}

const maxDepth = 512

// A jparser decodes one JSON text. The zero value with data set is ready.
//
// Unless copyStrings is set, decoded strings without escapes point into data
// instead of being copied, so data must not change while the values are in
// use: texts held in Go strings are immutable anyway; rows, which the
// Scanner reuses, are decoded with copyStrings.
type jparser struct {
	data        []byte
	pos         int
	depth       int
	copyStrings bool
	// sqEscape accepts \' inside strings as an apostrophe (glaive's quoted
	// arguments); sawSQ records that one was seen.
	sqEscape, sawSQ bool
	// stack collects the members of the containers being decoded; each
	// finished container copies its own into an exactly sized slice.
	stack []jmember
	// badUTF8 and loneSurrogate record that a string held invalid UTF-8
	// or a \u escape of half a surrogate pair, decoded as U+FFFD.
	badUTF8, loneSurrogate bool
}

// parseJSON decodes data, which must hold exactly one JSON value. The
// values may point into data (see jparser).
func parseJSON(data []byte) (jvalue, error) { return decode(&jparser{data: data}) }

// rowRepairs says which repairs decoding a row made.
type rowRepairs struct{ badUTF8, loneSurrogate bool }

// parseRow decodes a row the caller may reuse: strings are copied.
func parseRow(row []byte) (jvalue, rowRepairs, error) {
	p := jparser{data: row, copyStrings: true}
	v, err := decode(&p)
	return v, rowRepairs{p.badUTF8, p.loneSurrogate}, err
}

func decode(p *jparser) (jvalue, error) {
	sp := stacks.Get().(*[]jmember)
	p.stack = (*sp)[:0]
	defer func() {
		if cap(p.stack) <= 4096 {
			*sp = p.stack[:0]
			stacks.Put(sp)
		}
	}()
	v, err := p.value()
	if err != nil {
		return v, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return v, p.fail("unexpected data after the JSON value")
	}
	return v, nil
}

// parseJSONString is parseJSON for text held in a string, without copying it.
func parseJSONString(s string) (jvalue, error) { return parseJSON(bytesOf(s)) }

// bytesOf returns the bytes of s without copying; they must not be changed.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// view returns data[a:b] as a string, copied only when copyStrings is set.
func (p *jparser) view(a, b int) string {
	if a == b {
		return ""
	}
	if p.copyStrings {
		return string(p.data[a:b])
	}
	return unsafe.String(&p.data[a], b-a)
}

// key decodes an object key; the keys of the known formats are shared
// constants rather than copies.
func (p *jparser) key() (string, error) {
	if p.copyStrings {
		if end := p.pos + 1 + bytes.IndexByte(p.data[p.pos+1:], '"'); end > p.pos {
			if k, ok := knownKey(p.data[p.pos+1 : end]); ok {
				p.pos = end + 1
				return k, nil
			}
		}
	}
	return p.string()
}

func knownKey(b []byte) (string, bool) {
	switch string(b) { // no allocation: the compiler compares in place
	case "system":
		return "system", true
	case "chat":
		return "chat", true
	case "conversations":
		return "conversations", true
	case "messages":
		return "messages", true
	case "from":
		return "from", true
	case "value":
		return "value", true
	case "role":
		return "role", true
	case "content":
		return "content", true
	case "type":
		return "type", true
	case "text":
		return "text", true
	case "tools":
		return "tools", true
	case "name":
		return "name", true
	case "description":
		return "description", true
	case "parameters":
		return "parameters", true
	case "properties":
		return "properties", true
	case "required":
		return "required", true
	case "arguments":
		return "arguments", true
	case "function":
		return "function", true
	case "tool_calls":
		return "tool_calls", true
	case "tool_call_id":
		return "tool_call_id", true
	case "id":
		return "id", true
	case "query":
		return "query", true
	case "answers":
		return "answers", true
	}
	return "", false
}

func (p *jparser) fail(msg string) *jsonError {
	return &jsonError{off: p.pos, msg: msg, eof: p.pos >= len(p.data)}
}

func (p *jparser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jparser) value() (jvalue, error) {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return jvalue{}, p.fail("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return jvalue{kind: jString, str: s}, err
	case c == 't':
		return p.literal("true", jTrue)
	case c == 'f':
		return p.literal("false", jFalse)
	case c == 'n':
		return p.literal("null", jNull)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return jvalue{}, p.fail(fmt.Sprintf("unexpected character %q", rune(p.data[p.pos])))
}

func (p *jparser) literal(word string, k jkind) (jvalue, error) {
	end := p.pos + len(word)
	if end > len(p.data) {
		if string(p.data[p.pos:]) == word[:len(p.data)-p.pos] {
			p.pos = len(p.data)
			return jvalue{}, p.fail("unexpected end of input")
		}
		return jvalue{}, p.fail("invalid literal")
	}
	if string(p.data[p.pos:end]) != word {
		return jvalue{}, p.fail("invalid literal")
	}
	p.pos = end
	return jvalue{kind: k}, nil
}

func (p *jparser) number() (jvalue, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		p.pos = i
		return jvalue{}, p.fail("unexpected end of input")
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		p.pos = i
		return jvalue{}, p.fail("invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			p.pos = i
			return jvalue{}, p.fail("invalid number")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			p.pos = i
			return jvalue{}, p.fail("invalid number")
		}
	}
	p.pos = i
	return jvalue{kind: jNumber, str: p.view(start, i)}, nil
}

// strSpecial marks the bytes that interrupt a run of plain string content.
var strSpecial = func() (t [256]bool) {
	for i := range 0x20 {
		t[i] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// string decodes the string starting at the current '"'. Text without
// escapes is returned as a view of the input (see jparser).
func (p *jparser) string() (string, error) {
	d := p.data
	i := p.pos + 1
	var b []byte // decoded text, once an escape has been seen
	plain := i   // start of the pending run of plain bytes
	for {
		for i < len(d) && !strSpecial[d[i]] {
			i++
		}
		if i >= len(d) {
			p.pos = i
			return "", p.fail("unexpected end of input inside a string")
		}
		switch c := d[i]; {
		case c == '"':
			var s string
			if b == nil {
				s = p.view(plain, i)
			} else {
				b = append(b, d[plain:i]...)
				s = unsafe.String(unsafe.SliceData(b), len(b))
			}
			p.pos = i + 1
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "\uFFFD")
				p.badUTF8 = true
			}
			return s, nil
		case c < 0x20:
			p.pos = i
			return "", p.fail("control character inside a string")
		}
		// A backslash.
		if b == nil {
			b = make([]byte, 0, stringSpan(d, i)+(i-plain))
		}
		b = append(b, d[plain:i]...)
		if i+1 >= len(d) {
			p.pos = i + 1
			return "", p.fail("unexpected end of input inside a string")
		}
		e := d[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case '\'':
			if !p.sqEscape {
				p.pos = i - 2
				return "", p.fail(`invalid escape \'`)
			}
			p.sawSQ = true
			b = append(b, '\'')
		case 'u':
			r, ok := hex4(d[i:])
			if !ok {
				p.pos = i
				if len(d)-i < 4 {
					return "", p.fail("unexpected end of input inside a string")
				}
				return "", p.fail(`invalid \u escape`)
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					r2, ok = hex4(d[i+2:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
					p.loneSurrogate = true
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			p.pos = i - 2
			return "", p.fail(fmt.Sprintf(`invalid escape \%c`, e))
		}
		plain = i
	}
}

// stringSpan returns an upper bound of the bytes left in the string whose
// content continues at d[i]: the distance to its closing quote, or to the end.
func stringSpan(d []byte, i int) int {
	for j := i; ; {
		q := bytes.IndexByte(d[j:], '"')
		if q < 0 {
			return len(d) - i
		}
		q += j
		k := q
		for k > i && d[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q - i
		}
		j = q + 1
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

// pop drops the members stacked since base, clearing them so a pooled
// stack keeps no references into texts already decoded.
func (p *jparser) pop(base int) {
	clear(p.stack[base:])
	p.stack = p.stack[:base]
}

func (p *jparser) array() (jvalue, error) {
	if p.depth++; p.depth > maxDepth {
		return jvalue{}, p.fail("nesting too deep")
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	base := len(p.stack)
	defer p.pop(base)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return jvalue{kind: jArray}, nil
	}
	for {
		e, err := p.value()
		if err != nil {
			return jvalue{}, err
		}
		p.stack = append(p.stack, jmember{val: e})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return jvalue{}, p.fail("unexpected end of input inside an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return jvalue{kind: jArray, elems: slices.Clone(p.stack[base:])}, nil
		default:
			return jvalue{}, p.fail("expected , or ] in an array")
		}
	}
}

func (p *jparser) object() (jvalue, error) {
	if p.depth++; p.depth > maxDepth {
		return jvalue{}, p.fail("nesting too deep")
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	base := len(p.stack)
	defer p.pop(base)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return jvalue{kind: jObject}, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) {
			return jvalue{}, p.fail("unexpected end of input inside an object")
		}
		if p.data[p.pos] != '"' {
			return jvalue{}, p.fail("expected a string key in an object")
		}
		keyAt := p.pos
		k, err := p.key()
		if err != nil {
			return jvalue{}, err
		}
		for _, m := range p.stack[base:] {
			if m.key == k {
				p.pos = keyAt
				return jvalue{}, p.fail(fmt.Sprintf("duplicate key %q", k))
			}
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return jvalue{}, p.fail("unexpected end of input inside an object")
		}
		if p.data[p.pos] != ':' {
			return jvalue{}, p.fail("expected : after an object key")
		}
		p.pos++
		e, err := p.value()
		if err != nil {
			return jvalue{}, err
		}
		p.stack = append(p.stack, jmember{key: k, val: e})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return jvalue{}, p.fail("unexpected end of input inside an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return jvalue{kind: jObject, elems: slices.Clone(p.stack[base:])}, nil
		default:
			return jvalue{}, p.fail("expected , or } in an object")
		}
	}
}

// appendCompact appends v as compact JSON: no insignificant space, members
// in their order, strings escaped by appendJSONString, numbers as written.
func appendCompact(b []byte, v *jvalue) []byte {
	switch v.kind {
	case jNull:
		return append(b, "null"...)
	case jFalse:
		return append(b, "false"...)
	case jTrue:
		return append(b, "true"...)
	case jNumber:
		return append(b, v.str...)
	case jString:
		return appendJSONString(b, v.str)
	case jArray:
		b = append(b, '[')
		for i := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCompact(b, &v.elems[i].val)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i := range v.elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v.elems[i].key)
		b = append(b, ':')
		b = appendCompact(b, &v.elems[i].val)
	}
	return append(b, '}')
}

// compact returns v as compact JSON in a new, exactly sized slice.
func compact(v *jvalue) []byte {
	bp := scratch.Get().(*[]byte)
	b := appendCompact((*bp)[:0], v)
	out := slices.Clone(b)
	if cap(b) <= 1<<20 {
		*bp = b
		scratch.Put(bp)
	}
	return out
}

// compactString is compact as a string, sharing the new slice's memory.
func compactString(v *jvalue) string {
	b := compact(v)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

var stacks = sync.Pool{New: func() any { s := make([]jmember, 0, 64); return &s }}

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// needsEscape marks ASCII bytes that appendJSONString escapes.
var needsEscape = func() (t [256]bool) {
	for i := range 0x20 {
		t[i] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendJSONString appends s as a JSON string. Only '"', '\\' and control
// characters are escaped; other text, including non-ASCII, is written as
// UTF-8 (invalid bytes become U+FFFD). This is the package's one canonical
// spelling, so equal values always compact to equal bytes.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !needsEscape[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, `\u00`...)
				b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jstr builds a string value.
func jstr(s string) jvalue { return jvalue{kind: jString, str: s} }
