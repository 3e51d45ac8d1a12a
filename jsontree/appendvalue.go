package jsontree

import (
	"unicode/utf8"

	"github.com/augmentdata/augment/internal/swar"
)

// AppendValue reads the JSON value at Pos (after white space), as Value
// does, and appends it to b as AppendCompact would write the value Value
// returns, without building it: a string without escapes is copied as it
// stands (AppendString would write its bytes unchanged), any other is
// decoded (ReadString) and written by AppendString; numbers as written.
// Objects are checked for duplicate keys, nesting for MaxDepth, strings
// for UTF-8 (unless ValidUTF8), as Value checks them.
//
// ok is false exactly when Value would return an error (and always with
// Spans, Embedded or Hooked set, which AppendValue does not do): a caller
// that wants the error reads again from where it started with Value. After
// a failure Pos is undefined and b may hold part of the value; BadUTF8,
// LoneSurrogate and SawSingleQuote may be set for strings read before it.
func (p *Parser) AppendValue(b []byte) ([]byte, bool) {
	return p.AppendValueIn(b, 0)
}

// AppendValueIn is AppendValue for a value inside outer containers that
// its caller read itself: they count toward MaxDepth, as they do for Value
// reading the whole text (ToolACE's results sit in an item of a list).
func (p *Parser) AppendValueIn(b []byte, outer int) ([]byte, bool) {
	if p.Spans || p.Embedded != nil || p.Hooked != nil || outer < 0 || outer > MaxDepth {
		return b, false
	}
	sp := p.takeStack()
	depth := p.depth
	p.depth = outer
	b, ok := p.appendValue(b)
	p.depth = depth
	p.giveStack(sp)
	return b, ok
}

func (p *Parser) appendValue(b []byte) ([]byte, bool) {
	p.SkipSpace()
	d := p.Data
	if p.Pos >= len(d) {
		return b, false
	}
	switch c := d[p.Pos]; {
	case c == '{' || c == '[':
		if p.depth >= MaxDepth {
			return b, false
		}
		p.depth++
		base := len(p.stack)
		b, ok := p.appendBody(b, c, base)
		p.depth--
		p.stack = p.stack[:base]
		p.wide.drop(base)
		return b, ok
	case c == '"':
		return p.appendString(b)
	}
	b, end, ok := appendScalar(b, d, p.Pos)
	if ok {
		p.Pos = end
	}
	return b, ok
}

// appendScalar appends the literal (true, false or null) or number that
// starts at d[i], as written, and returns where it ends; ok is false when
// none does. Every reader that copies values as they stand uses it.
func appendScalar(b, d []byte, i int) (_ []byte, end int, ok bool) {
	var w string
	if i < len(d) {
		switch d[i] {
		case 't':
			w = "true"
		case 'f':
			w = "false"
		case 'n':
			w = "null"
		}
	}
	if w != "" {
		if len(d)-i < len(w) || string(d[i:i+len(w)]) != w {
			return b, i, false
		}
		return append(b, w...), i + len(w), true
	}
	if end, ok = numberEnd(d, i); !ok {
		return b, i, false
	}
	return append(b, d[i:end]...), end, true
}

// appendString reads the string literal at Pos: a run of plain content up
// to its closing quote is copied with its quotes (plainRun stops at the
// bytes AppendString escapes, and valid UTF-8 it writes as it is); else
// the string is decoded and written again.
func (p *Parser) appendString(b []byte) ([]byte, bool) {
	d := p.Data
	start := p.Pos + 1
	end, seen := plainRun(d, start)
	if end < len(d) && d[end] == '"' && (p.ValidUTF8 || seen&swar.Tops == 0 || utf8.Valid(d[start:end])) {
		b = append(b, d[p.Pos:end+1]...)
		p.Pos = end + 1
		return b, true
	}
	s, err := p.ReadString()
	if err != nil {
		return b, false
	}
	return AppendString(b, s), true
}

// appendBody reads an array or object whose open bracket is at Pos, as
// arrayBody and objectBody do; an object's keys go on the stack (from
// base) for the duplicate check. Inner.appendBody and Laid.appendBody have
// its shape but read other text (JSON escaped inside a string literal;
// json.dumps's layout), so each keeps its own loop.
func (p *Parser) appendBody(b []byte, open byte, base int) ([]byte, bool) {
	end := open + 2 // ] and } follow [ and { by two
	b = append(b, open)
	p.Pos++
	p.SkipSpace()
	if p.Pos < len(p.Data) && p.Data[p.Pos] == end {
		p.Pos++
		return append(b, end), true
	}
	for n := 0; ; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		if open == '{' {
			p.SkipSpace()
			if p.Pos >= len(p.Data) || p.Data[p.Pos] != '"' {
				return b, false
			}
			k, err := p.key()
			if err != nil {
				return b, false
			}
			if p.duplicate(k, base) {
				return b, false
			}
			p.push(Member{Key: k})
			p.SkipSpace()
			if p.Pos >= len(p.Data) || p.Data[p.Pos] != ':' {
				return b, false
			}
			p.Pos++
			b = AppendString(b, k)
			b = append(b, ':')
		}
		var ok bool
		if b, ok = p.appendValue(b); !ok {
			return b, false
		}
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return b, false
		}
		switch p.Data[p.Pos] {
		case ',':
			p.Pos++
		case end:
			p.Pos++
			return append(b, end), true
		default:
			return b, false
		}
	}
}
