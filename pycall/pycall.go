// Package pycall reads and writes calls in Python-call syntax, as ToolACE's
// assistant turns and Tool-DC's traces hold them:
// `[Name With Spaces(a="x", n=3), other(x=[1, 2], d={'k': None})]`.
// Parse reads it into calls with compact JSON arguments (numbers written
// back as JSON numbers, ".5" as "0.5" and "7." as "7.0"); Print writes calls
// back, so parsing Print's output gives the same calls.
package pycall

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// Parse parses calls written in Python-call syntax, as ToolACE's
// assistant turns hold them: `[Name With Spaces(a="x", n=3), other(x=[1, 2])]`,
// or one call without the brackets. Names are arbitrary text up to the "(" that
// opens a keyword-argument list which parses (so "User Feed (Video Posts) V2(…)"
// works); they may not contain quotes, '=', ',', brackets or braces, or newlines.
// Arguments must be keyword arguments, each a Python literal: strings in
// single, double or triple quotes with Python escapes (adjacent literals
// concatenate), ints and floats (signs, exponents, '_' separators),
// True/False/None (or true/false/null), lists and tuples (→ arrays) and dicts
// with string keys (→ objects). Each call's Arguments is a compact JSON object
// in argument order, as jsontree.Compact writes it, written as the text is
// read (no tree); the calls of one Parse share one block, each call's
// arguments without room past their end. Positional arguments, other
// expressions, repeated keys and an empty list are errors.
func Parse(s string) ([]record.Call, error) {
	p := pyParser{s: s}
	sp := scratch.Get().(*scratchBufs)
	p.out, p.str = sp.out[:0], sp.str[:0]
	defer func() {
		if cap(p.out) <= 1<<20 && cap(p.str) <= 1<<20 {
			sp.out, sp.str = p.out[:0], p.str[:0]
			scratch.Put(sp)
		}
	}()
	p.space()
	var calls []record.Call
	var ends []int // where each call's arguments end in p.out
	if p.peek() == '[' {
		p.i++
		p.space()
		if p.peek() == ']' {
			return nil, p.fail("empty call list")
		}
		for {
			c, err := p.call(true)
			if err != nil {
				return nil, err
			}
			calls = append(calls, c)
			ends = append(ends, len(p.out))
			p.space()
			if p.peek() == ',' {
				p.i++
				p.space()
				if p.peek() == ']' {
					p.i++
					break
				}
				continue
			}
			if p.peek() == ']' {
				p.i++
				break
			}
			return nil, p.fail("expected , or ] after a call")
		}
	} else {
		c, err := p.call(false)
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
		ends = append(ends, len(p.out))
	}
	p.space()
	if p.i < len(p.s) {
		return nil, p.fail("unexpected text after the calls")
	}
	// The calls' arguments, written one after another, in one block.
	block := append([]byte(nil), p.out...)
	at := 0
	for k, end := range ends {
		calls[k].Arguments = block[at:end:end]
		at = end
	}
	return calls, nil
}

// scratchBufs are a Parse's buffers: the arguments written so far (out)
// and the string being decoded (str).
type scratchBufs struct{ out, str []byte }

var scratch = sync.Pool{New: func() any { return new(scratchBufs) }}

// Print writes calls in the syntax Parse reads:
// `[name(k="v", n=3), other()]`. Strings are double-quoted with JSON's
// escapes (all valid in Python), true/false/null print as True/False/None,
// numbers as written. For calls Parse returned, parsing the output
// gives the same calls. Arguments that are not a JSON object are printed
// verbatim inside the parentheses, and keys or names with characters the
// syntax cannot hold are printed as they are, so such calls do not parse back.
func Print(calls []record.Call) string {
	b := []byte{'['}
	for i, c := range calls {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, c.Name...)
		b = append(b, '(')
		v, err := jsontree.Parse(c.Arguments)
		if err != nil || v.Kind != jsontree.Object {
			b = append(b, c.Arguments...)
		} else {
			for j, m := range v.Elems {
				if j > 0 {
					b = append(b, ", "...)
				}
				b = append(b, m.Key...)
				b = append(b, '=')
				b = appendPy(b, &m.Val)
			}
		}
		b = append(b, ')')
	}
	return string(append(b, ']'))
}

func appendPy(b []byte, v *jsontree.Value) []byte {
	switch v.Kind {
	case jsontree.Null:
		return append(b, "None"...)
	case jsontree.True:
		return append(b, "True"...)
	case jsontree.False:
		return append(b, "False"...)
	case jsontree.Number:
		return append(b, v.Str...)
	case jsontree.String:
		return jsontree.AppendString(b, v.Str)
	case jsontree.Array:
		b = append(b, '[')
		for i := range v.Elems {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPy(b, &v.Elems[i].Val)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i := range v.Elems {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = jsontree.AppendString(b, v.Elems[i].Key)
		b = append(b, ": "...)
		b = appendPy(b, &v.Elems[i].Val)
	}
	return append(b, '}')
}

// A pyError says where Python-call text stopped making sense.
type pyError struct {
	off int
	msg string
}

func (e *pyError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

type pyParser struct {
	s     string
	i     int
	depth int
	out   []byte // the calls' arguments as compact JSON, written as read
	str   []byte // the string literal being decoded
}

func (p *pyParser) fail(msg string) error { return &pyError{off: p.i, msg: msg} }

func (p *pyParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// notInName marks bytes a call name cannot hold.
var notInName = func() (t [256]bool) {
	for _, c := range "\"'=,[]{}\n\r" {
		t[c] = true
	}
	return t
}()

// call parses name(kwargs), the arguments written to p.out. The name runs
// to one of the "(" before any byte a name cannot hold; each is tried in
// turn until the argument list after it parses and is followed by what
// may follow a call.
func (p *pyParser) call(inList bool) (record.Call, error) {
	start, mark := p.i, len(p.out)
	var firstErr error
	tries := 0
	for j := start; j < len(p.s) && !notInName[p.s[j]]; j++ {
		if p.s[j] != '(' {
			continue
		}
		name := strings.TrimSpace(p.s[start:j])
		if name == "" {
			break
		}
		p.i = j + 1
		p.out = p.out[:mark]
		err := p.kwargs()
		if err == nil {
			save := p.i
			p.space()
			next := p.peek()
			p.i = save
			if next == 0 && !inList || inList && (next == ',' || next == ']') {
				return record.Call{Name: name}, nil
			}
			if next == 0 {
				err = p.fail("unexpected end: the call list has no closing ]")
			} else {
				err = p.fail("unexpected text after a call")
			}
		}
		if firstErr == nil {
			firstErr = err
		}
		if tries++; tries == 16 {
			break
		}
	}
	p.out = p.out[:mark]
	if firstErr != nil {
		return record.Call{}, firstErr
	}
	p.i = start
	return record.Call{}, p.fail("expected a call: a name followed by (")
}

// kwargs parses "k=v, …)" after the opening parenthesis and writes it to
// p.out as a compact JSON object, keys in argument order.
func (p *pyParser) kwargs() error {
	p.out = append(p.out, '{')
	base := len(p.out)
	var keys [8]string // the keys so far, while they fit
	more := keys[:0]
	for {
		p.space()
		if p.peek() == ')' {
			p.i++
			p.out = append(p.out, '}')
			return nil
		}
		start := p.i
		for p.i < len(p.s) && !notInKey[p.s[p.i]] {
			p.i++
		}
		key := p.s[start:p.i]
		p.space()
		if key == "" || p.peek() != '=' || strings.HasPrefix(p.s[p.i:], "==") {
			p.i = start
			if p.i >= len(p.s) {
				return p.fail("unexpected end inside an argument list")
			}
			return p.fail("expected keyword=value (positional arguments are not allowed)")
		}
		if !utf8.ValidString(key) { // its JSON would be U+FFFD, the same for other bytes
			p.i = start
			return p.fail(fmt.Sprintf("argument name %q is not UTF-8", key))
		}
		if slices.Contains(more, key) {
			p.i = start
			return p.fail(fmt.Sprintf("argument %q repeated", key))
		}
		more = append(more, key)
		p.i++
		if len(p.out) > base {
			p.out = append(p.out, ',')
		}
		p.out = jsontree.AppendString(p.out, key)
		p.out = append(p.out, ':')
		if _, err := p.value(); err != nil {
			return err
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case ')':
		case 0:
			return p.fail("unexpected end inside an argument list")
		default:
			return p.fail("expected , or ) after an argument")
		}
	}
}

// notInKey marks bytes a keyword name cannot hold.
var notInKey = func() (t [256]bool) {
	for _, c := range " \t\r\n\"'=,()[]{}:" {
		t[c] = true
	}
	return t
}()

// value parses a Python literal and writes it to p.out as compact JSON;
// isString reports a string.
func (p *pyParser) value() (isString bool, err error) {
	p.space()
	if p.i >= len(p.s) {
		return false, p.fail("unexpected end: missing value")
	}
	switch c := p.s[p.i]; {
	case c == '"' || c == '\'':
		p.str = p.str[:0]
		for {
			if err := p.strLit(); err != nil {
				return false, err
			}
			save := p.i
			p.space()
			if c := p.peek(); c != '"' && c != '\'' {
				p.i = save
				break
			}
		}
		p.out = jsontree.AppendString(p.out, unsafe.String(unsafe.SliceData(p.str), len(p.str)))
		return true, nil
	case c == '[':
		return false, p.seq(']')
	case c == '(':
		return false, p.paren()
	case c == '{':
		return false, p.dict()
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return false, p.number()
	}
	start := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i]) {
		p.i++
	}
	switch p.s[start:p.i] {
	case "True", "true":
		p.out = append(p.out, "true"...)
		return false, nil
	case "False", "false":
		p.out = append(p.out, "false"...)
		return false, nil
	case "None", "null":
		p.out = append(p.out, "null"...)
		return false, nil
	}
	p.i = start
	return false, p.fail("expected a literal value")
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func (p *pyParser) enter() error {
	if p.depth++; p.depth > jsontree.MaxDepth {
		return p.fail("nesting too deep")
	}
	return nil
}

// seq parses a list body up to close, the opening bracket at p.i, and
// writes it as a JSON array.
func (p *pyParser) seq(close byte) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	p.i++
	p.out = append(p.out, '[')
	first := true
	for {
		p.space()
		if p.peek() == close {
			p.i++
			p.out = append(p.out, ']')
			return nil
		}
		if !first {
			p.out = append(p.out, ',')
		}
		first = false
		if _, err := p.value(); err != nil {
			return err
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case close:
		case 0:
			return p.fail("unexpected end inside a list")
		default:
			return p.fail(fmt.Sprintf("expected , or %c in a list", close))
		}
	}
}

// paren parses a tuple, written as an array, or a parenthesised value.
func (p *pyParser) paren() error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	start, mark := p.i, len(p.out)
	p.i++
	p.space()
	if p.peek() == ')' {
		p.i++
		p.out = append(p.out, "[]"...)
		return nil
	}
	if _, err := p.value(); err != nil {
		return err
	}
	p.space()
	if p.peek() == ')' {
		p.i++
		return nil
	}
	p.i, p.out = start, p.out[:mark]
	return p.seq(')')
}

// dict parses a dict with string keys and writes it as a JSON object.
func (p *pyParser) dict() error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	p.i++
	p.out = append(p.out, '{')
	base := len(p.out)
	// Where each key's JSON stands in p.out and its literal in p.s, while
	// they fit.
	var room [8][4]int
	keys := room[:0]
	for {
		p.space()
		if p.peek() == '}' {
			p.i++
			p.out = append(p.out, '}')
			return nil
		}
		keyAt, comma := p.i, len(p.out)
		if comma > base {
			p.out = append(p.out, ',')
		}
		at := len(p.out)
		isString, err := p.value()
		if err != nil {
			return err
		}
		if !isString {
			p.i = keyAt
			return p.fail("dict keys must be strings")
		}
		// A string's JSON form is one for each text, so equal forms are
		// equal keys.
		k := p.out[at:]
		for _, o := range keys {
			if string(p.out[o[0]:o[1]]) == string(k) {
				first, again := p.s[o[2]:o[3]], p.s[keyAt:p.i]
				p.i = keyAt
				text := p.keyText(k)
				if first != again && strings.ContainsRune(text, utf8.RuneError) {
					// Different invalid bytes read as the same replacement.
					return p.fail(fmt.Sprintf("dict keys %q and %q are one key once invalid UTF-8 is replaced: %q", first, again, text))
				}
				return p.fail(fmt.Sprintf("dict key %q repeated", text))
			}
		}
		keys = append(keys, [4]int{at, len(p.out), keyAt, p.i})
		p.space()
		if p.peek() != ':' {
			return p.fail("expected : after a dict key")
		}
		p.i++
		p.out = append(p.out, ':')
		if _, err := p.value(); err != nil {
			return err
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		case 0:
			return p.fail("unexpected end inside a dict")
		default:
			return p.fail("expected , or } in a dict")
		}
	}
}

// keyText returns the text of a dict key from its JSON form.
func (p *pyParser) keyText(k []byte) string {
	v, err := jsontree.Parse(k)
	if err != nil || v.Kind != jsontree.String {
		return string(k)
	}
	return v.Str
}

// number reads a Python int or float literal and writes it as a JSON
// number: "+" and "_" dropped, leading zeros trimmed, ".5" → "0.5", "1." → "1.0".
func (p *pyParser) number() error {
	start := p.i
	b := p.out
	if c := p.peek(); c == '-' || c == '+' {
		if c == '-' {
			b = append(b, '-')
		}
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) {
			c := p.s[p.i]
			if c >= '0' && c <= '9' {
				b = append(b, c)
				n++
			} else if c != '_' || n == 0 || p.i+1 >= len(p.s) || p.s[p.i+1] < '0' || p.s[p.i+1] > '9' {
				break
			}
			p.i++
		}
		return n
	}
	intAt := len(b)
	nInt := digits()
	for nInt > 1 && b[intAt] == '0' {
		b = append(b[:intAt], b[intAt+1:]...)
		nInt--
	}
	nFrac := 0
	if p.peek() == '.' {
		p.i++
		if nInt == 0 {
			b = append(b, '0')
		}
		b = append(b, '.')
		if nFrac = digits(); nFrac == 0 {
			b = append(b, '0')
		}
	}
	if nInt == 0 && nFrac == 0 {
		p.i = start
		return p.fail("invalid number")
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		b = append(b, 'e')
		p.i++
		if c := p.peek(); c == '-' || c == '+' {
			b = append(b, c)
			p.i++
		}
		if digits() == 0 {
			return p.fail("invalid number exponent")
		}
	}
	if p.i < len(p.s) && (isIdent(p.s[p.i]) || p.s[p.i] == '.') {
		return p.fail("invalid number")
	}
	p.out = b
	return nil
}

// strLit appends the text of one Python string literal (at p.i) to p.str.
func (p *pyParser) strLit() error {
	q := p.s[p.i]
	triple := p.i+2 < len(p.s) && p.s[p.i+1] == q && p.s[p.i+2] == q
	if triple {
		p.i += 3
	} else {
		p.i++
	}
	for {
		// A run of ASCII other than the quote and the backslash.
		j := p.i
		for j < len(p.s) && p.s[j] < utf8.RuneSelf && p.s[j] != q && p.s[j] != '\\' {
			j++
		}
		p.str = append(p.str, p.s[p.i:j]...)
		p.i = j
		if p.i >= len(p.s) {
			return p.fail("unexpected end inside a string")
		}
		c := p.s[p.i]
		switch {
		case c == q && (!triple || p.i+2 < len(p.s) && p.s[p.i+1] == q && p.s[p.i+2] == q):
			if triple {
				p.i += 3
			} else {
				p.i++
			}
			return nil
		case c == q:
			p.str = append(p.str, c)
			p.i++
		case c == '\\':
			if err := p.escape(); err != nil {
				return err
			}
		default:
			r, n := utf8.DecodeRuneInString(p.s[p.i:])
			p.str = utf8.AppendRune(p.str, r) // invalid UTF-8 becomes U+FFFD
			p.i += n
		}
	}
}

// escape decodes one backslash escape at p.i into p.str. Unknown escapes keep the
// backslash, as Python does.
func (p *pyParser) escape() error {
	if p.i+1 >= len(p.s) {
		p.i++
		return p.fail("unexpected end inside a string")
	}
	e := p.s[p.i+1]
	p.i += 2
	switch e {
	case '\\', '\'', '"':
		p.str = append(p.str, e)
		return nil
	case 'a':
		p.str = append(p.str, '\a')
		return nil
	case 'b':
		p.str = append(p.str, '\b')
		return nil
	case 'f':
		p.str = append(p.str, '\f')
		return nil
	case 'n':
		p.str = append(p.str, '\n')
		return nil
	case 'r':
		p.str = append(p.str, '\r')
		return nil
	case 't':
		p.str = append(p.str, '\t')
		return nil
	case 'v':
		p.str = append(p.str, '\v')
		return nil
	case '\n':
		return nil // line continuation
	case 'x', 'u', 'U':
		n := 2
		if e == 'u' {
			n = 4
		} else if e == 'U' {
			n = 8
		}
		if p.i+n > len(p.s) {
			return p.fail("truncated \\" + string(e) + " escape")
		}
		r, ok := hexRune(p.s[p.i : p.i+n])
		if !ok {
			return p.fail("invalid \\" + string(e) + " escape")
		}
		p.i += n
		if utf16.IsSurrogate(r) && e == 'u' && strings.HasPrefix(p.s[p.i:], `\u`) && p.i+6 <= len(p.s) {
			if r2, ok := hexRune(p.s[p.i+2 : p.i+6]); ok && utf16.DecodeRune(r, r2) != utf8.RuneError {
				r = utf16.DecodeRune(r, r2)
				p.i += 6
			}
		}
		if r > utf8.MaxRune {
			return p.fail("invalid \\U escape")
		}
		p.str = utf8.AppendRune(p.str, r) // lone surrogates become U+FFFD
		return nil
	case '0', '1', '2', '3', '4', '5', '6', '7':
		r := rune(e - '0')
		for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; k++ {
			r = r<<3 | rune(p.s[p.i]-'0')
			p.i++
		}
		p.str = utf8.AppendRune(p.str, r)
		return nil
	}
	p.str = append(p.str, '\\')
	p.i-- // the escaped byte is read as ordinary text
	return nil
}

// hexRune decodes the hexadecimal digits of s.
func hexRune(s string) (rune, bool) {
	n, err := strconv.ParseUint(s, 16, 32)
	return rune(n), err == nil
}
