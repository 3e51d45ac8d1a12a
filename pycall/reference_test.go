package pycall

// The tree-building reader Parse replaced, kept as the reference FuzzParse
// and TestParseMatchesReference hold Parse to: the same calls, the same
// errors.

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

func refParse(s string) ([]record.Call, error) {
	p := refParser{pyParser{s: s}}
	p.space()
	var calls []record.Call
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
	}
	p.space()
	if p.i < len(p.s) {
		return nil, p.fail("unexpected text after the calls")
	}
	return calls, nil
}

// refParser takes the position, depth and the lexical steps Parse did not
// change (peek, space, fail, enter) from pyParser; every step that builds
// a value is its own.
type refParser struct{ pyParser }

// call parses name(kwargs). The name runs to one of the "(" before any byte
// a name cannot hold; each is tried in turn until the argument list after it
// parses and is followed by what may follow a call.
func (p *refParser) call(inList bool) (record.Call, error) {
	start := p.i
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
		args, err := p.kwargs()
		if err == nil {
			save := p.i
			p.space()
			next := p.peek()
			p.i = save
			if next == 0 && !inList || inList && (next == ',' || next == ']') {
				return record.Call{Name: name, Arguments: args}, nil
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
	if firstErr != nil {
		return record.Call{}, firstErr
	}
	p.i = start
	return record.Call{}, p.fail("expected a call: a name followed by (")
}

// kwargs parses "k=v, …)" after the opening parenthesis.
func (p *refParser) kwargs() ([]byte, error) {
	obj := jsontree.Value{Kind: jsontree.Object}
	for {
		p.space()
		if p.peek() == ')' {
			p.i++
			return jsontree.Compact(&obj), nil
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
				return nil, p.fail("unexpected end inside an argument list")
			}
			return nil, p.fail("expected keyword=value (positional arguments are not allowed)")
		}
		if !utf8.ValidString(key) {
			p.i = start
			return nil, p.fail(fmt.Sprintf("argument name %q is not UTF-8", key))
		}
		if obj.Has(key) {
			p.i = start
			return nil, p.fail(fmt.Sprintf("argument %q repeated", key))
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		obj.Elems = append(obj.Elems, jsontree.Member{Key: key, Val: v})
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case ')':
		case 0:
			return nil, p.fail("unexpected end inside an argument list")
		default:
			return nil, p.fail("expected , or ) after an argument")
		}
	}
}

func (p *refParser) value() (jsontree.Value, error) {
	p.space()
	if p.i >= len(p.s) {
		return jsontree.Value{}, p.fail("unexpected end: missing value")
	}
	switch c := p.s[p.i]; {
	case c == '"' || c == '\'':
		var sb strings.Builder
		for {
			if err := p.str(&sb); err != nil {
				return jsontree.Value{}, err
			}
			save := p.i
			p.space()
			if c := p.peek(); c != '"' && c != '\'' {
				p.i = save
				break
			}
		}
		return jsontree.NewString(sb.String()), nil
	case c == '[':
		return p.seq(']')
	case c == '(':
		return p.paren()
	case c == '{':
		return p.dict()
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return p.number()
	}
	start := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i]) {
		p.i++
	}
	switch p.s[start:p.i] {
	case "True", "true":
		return jsontree.Value{Kind: jsontree.True}, nil
	case "False", "false":
		return jsontree.Value{Kind: jsontree.False}, nil
	case "None", "null":
		return jsontree.Value{Kind: jsontree.Null}, nil
	}
	p.i = start
	return jsontree.Value{}, p.fail("expected a literal value")
}

// seq parses a list body up to close; the opening bracket is at p.i.
func (p *refParser) seq(close byte) (jsontree.Value, error) {
	if err := p.enter(); err != nil {
		return jsontree.Value{}, err
	}
	defer func() { p.depth-- }()
	p.i++
	arr := jsontree.Value{Kind: jsontree.Array}
	for {
		p.space()
		if p.peek() == close {
			p.i++
			return arr, nil
		}
		v, err := p.value()
		if err != nil {
			return jsontree.Value{}, err
		}
		arr.Elems = append(arr.Elems, jsontree.Member{Val: v})
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case close:
		case 0:
			return jsontree.Value{}, p.fail("unexpected end inside a list")
		default:
			return jsontree.Value{}, p.fail(fmt.Sprintf("expected , or %c in a list", close))
		}
	}
}

// paren parses a tuple, or a parenthesised value.
func (p *refParser) paren() (jsontree.Value, error) {
	if err := p.enter(); err != nil {
		return jsontree.Value{}, err
	}
	defer func() { p.depth-- }()
	start := p.i
	p.i++
	p.space()
	if p.peek() == ')' {
		p.i++
		return jsontree.Value{Kind: jsontree.Array}, nil
	}
	v, err := p.value()
	if err != nil {
		return jsontree.Value{}, err
	}
	p.space()
	if p.peek() == ')' {
		p.i++
		return v, nil
	}
	p.i = start
	return p.seq(')')
}

func (p *refParser) dict() (jsontree.Value, error) {
	if err := p.enter(); err != nil {
		return jsontree.Value{}, err
	}
	defer func() { p.depth-- }()
	p.i++
	obj := jsontree.Value{Kind: jsontree.Object}
	for {
		p.space()
		if p.peek() == '}' {
			p.i++
			return obj, nil
		}
		keyAt := p.i
		k, err := p.value()
		if err != nil {
			return jsontree.Value{}, err
		}
		if k.Kind != jsontree.String {
			p.i = keyAt
			return jsontree.Value{}, p.fail("dict keys must be strings")
		}
		if obj.Has(k.Str) {
			p.i = keyAt
			return jsontree.Value{}, p.fail(fmt.Sprintf("dict key %q repeated", k.Str))
		}
		p.space()
		if p.peek() != ':' {
			return jsontree.Value{}, p.fail("expected : after a dict key")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return jsontree.Value{}, err
		}
		obj.Elems = append(obj.Elems, jsontree.Member{Key: k.Str, Val: v})
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		case 0:
			return jsontree.Value{}, p.fail("unexpected end inside a dict")
		default:
			return jsontree.Value{}, p.fail("expected , or } in a dict")
		}
	}
}

// number reads a Python int or float literal and writes it as a JSON
// number: "+" and "_" dropped, leading zeros trimmed, ".5" → "0.5", "1." → "1.0".
func (p *refParser) number() (jsontree.Value, error) {
	start := p.i
	var b []byte
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
		return jsontree.Value{}, p.fail("invalid number")
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		b = append(b, 'e')
		p.i++
		if c := p.peek(); c == '-' || c == '+' {
			b = append(b, c)
			p.i++
		}
		if digits() == 0 {
			return jsontree.Value{}, p.fail("invalid number exponent")
		}
	}
	if p.i < len(p.s) && (isIdent(p.s[p.i]) || p.s[p.i] == '.') {
		return jsontree.Value{}, p.fail("invalid number")
	}
	return jsontree.Value{Kind: jsontree.Number, Str: string(b)}, nil
}

// str appends one Python string literal (at p.i) to sb.
func (p *refParser) str(sb *strings.Builder) error {
	q := p.s[p.i]
	triple := strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3))
	if triple {
		p.i += 3
	} else {
		p.i++
	}
	for {
		if p.i >= len(p.s) {
			return p.fail("unexpected end inside a string")
		}
		c := p.s[p.i]
		switch {
		case c == q && (!triple || strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3))):
			if triple {
				p.i += 3
			} else {
				p.i++
			}
			return nil
		case c == '\\':
			if err := p.escape(sb); err != nil {
				return err
			}
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			p.i++
		default:
			r, n := utf8.DecodeRuneInString(p.s[p.i:])
			sb.WriteRune(r) // invalid UTF-8 becomes U+FFFD
			p.i += n
		}
	}
}

// escape decodes one backslash escape at p.i. Unknown escapes keep the
// backslash, as Python does.
func (p *refParser) escape(sb *strings.Builder) error {
	if p.i+1 >= len(p.s) {
		p.i++
		return p.fail("unexpected end inside a string")
	}
	e := p.s[p.i+1]
	p.i += 2
	switch e {
	case '\\', '\'', '"':
		sb.WriteByte(e)
		return nil
	case 'a':
		sb.WriteByte('\a')
		return nil
	case 'b':
		sb.WriteByte('\b')
		return nil
	case 'f':
		sb.WriteByte('\f')
		return nil
	case 'n':
		sb.WriteByte('\n')
		return nil
	case 'r':
		sb.WriteByte('\r')
		return nil
	case 't':
		sb.WriteByte('\t')
		return nil
	case 'v':
		sb.WriteByte('\v')
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
		sb.WriteRune(r) // lone surrogates become U+FFFD
		return nil
	case '0', '1', '2', '3', '4', '5', '6', '7':
		r := rune(e - '0')
		for k := 0; k < 2 && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '7'; k++ {
			r = r<<3 | rune(p.s[p.i]-'0')
			p.i++
		}
		sb.WriteRune(r)
		return nil
	}
	sb.WriteByte('\\')
	p.i-- // the escaped byte is read as ordinary text
	return nil
}
