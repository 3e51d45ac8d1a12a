package jsontree

import (
	"sync"
	"unsafe"

	"github.com/augmentdata/augment/internal/swar"
)

// The one-pass decoder of JSON text held in a string literal (see
// Parser.Embedded). It reads the literal's raw bytes: the inner text's
// strings start and end with \" and its escapes are doubled (\\n for an
// inner \n, \\\" for an inner \"), while structure, numbers and literals
// are plain bytes. It handles what JSON encoders write and leaves the rest
// to the two passes, which then decide every error message and repair
// exactly as before: a \u escape at either level, escaped white space
// other than \n, \t and \r, an inner string that would hold a control
// character, invalid UTF-8, or any syntax error give up, and the literal
// is decoded as a string.

// embeddedAt skips white space and reports whether a string literal
// starts at Pos, for which Embedded is asked.
func (p *Parser) embeddedAt() bool {
	p.SkipSpace()
	return p.CopyStrings && !p.Spans && p.Pos < len(p.Data) && p.Data[p.Pos] == '"'
}

// literalMember decodes the string literal at Pos, the value of the
// top-level member k: offered to Literal when Embedded or Hooked names k,
// else (or when the hook declines) decoded in one pass when Embedded names
// k, else as a string.
func (p *Parser) literalMember(k string) (Value, error) {
	embedded := p.Embedded != nil && p.Embedded(k)
	if p.Literal != nil && (embedded || p.Hooked != nil && p.Hooked(k)) {
		if e, ok := p.offerLiteral(k); ok {
			return e, nil
		}
	}
	if embedded {
		return p.embeddedValue()
	}
	return p.value()
}

// embeddedValue decodes the string literal at Pos as the array or object
// its text holds or, failing that, as a string.
//
// The rest of Data is first copied into the slab (room makes room for
// it), and the literal decoded there without CopyStrings: the inner strings
// without escapes, most of them, are views of the copy rather than copies
// one by one. Once the literal's closing quote is found, the slab keeps
// the literal's body and frees what follows.
func (p *Parser) embeddedValue() (Value, error) {
	start, base := p.Pos, len(p.stack)
	if c := p.Data[start+1:]; len(c) > 0 && (c[0] == '[' || c[0] == '{' || c[0] == ' ' || c[0] == '\\') {
		p.room(start)
		at := len(p.slab)
		p.slab = append(p.slab, p.Data[start+1:]...)
		block, whole := unsafe.SliceData(p.slab), len(p.slab)
		data, depth := p.Data, p.depth
		p.Data, p.Pos, p.depth, p.CopyStrings = p.slab[at:whole:whole], 0, 0, false
		v, ok := p.eValue()
		if ok {
			p.eSpace()
			// A raw quote where a token may start closes the literal.
			ok = p.Pos < len(p.Data) && p.Data[p.Pos] == '"' && (v.Kind == Array || v.Kind == Object)
		}
		end := p.Pos
		p.Data, p.depth, p.CopyStrings = data, depth, true
		// What follows the body (all of the copy on failure) is free again,
		// unless an escaped inner string was decoded after the copy, in
		// this block or a new one: then the copy stays, unused.
		if unsafe.SliceData(p.slab) == block && len(p.slab) == whole {
			if ok {
				p.slab = p.slab[:at+end]
			} else {
				p.slab = p.slab[:at]
			}
		}
		if ok {
			p.Pos = start + 1 + end + 1
			return v, nil
		}
	}
	p.Pos, p.stack = start, p.stack[:base]
	return p.value()
}

// eSpace skips the inner text's white space: spaces, and \n, \t and \r
// escapes (raw control characters end the outer literal's validity).
func (p *Parser) eSpace() {
	d := p.Data
	for p.Pos < len(d) {
		switch d[p.Pos] {
		case ' ':
			p.Pos++
		case '\\':
			if p.Pos+1 < len(d) {
				if e := d[p.Pos+1]; e == 'n' || e == 't' || e == 'r' {
					p.Pos += 2
					continue
				}
			}
			return
		default:
			return
		}
	}
}

// eValue decodes one inner value at Pos; ok false means give up.
func (p *Parser) eValue() (Value, bool) {
	p.eSpace()
	if p.Pos >= len(p.Data) {
		return Value{}, false
	}
	switch c := p.Data[p.Pos]; {
	case c == '{':
		return p.eContainer(Object)
	case c == '[':
		return p.eContainer(Array)
	case c == '\\':
		s, ok := p.eString(false)
		return Value{Kind: String, Str: s}, ok
	}
	return p.eScalar()
}

// eScalar decodes an inner true, false, null or number at Pos; ok false
// means give up.
func (p *Parser) eScalar() (Value, bool) {
	var v Value
	var err error
	switch c := p.Data[p.Pos]; {
	case c == 't':
		v, err = p.literal("true", True)
	case c == 'f':
		v, err = p.literal("false", False)
	case c == 'n':
		v, err = p.literal("null", Null)
	case c == '-' || (c >= '0' && c <= '9'):
		v, err = p.number()
	default:
		return Value{}, false
	}
	return v, err == nil
}

// eContainer decodes an inner array or object; in either outcome it leaves
// the stack as it found it.
func (p *Parser) eContainer(k Kind) (Value, bool) {
	if p.depth >= MaxDepth {
		return Value{}, false
	}
	p.depth++
	base := len(p.stack)
	v, ok := p.eBody(k, base)
	p.depth--
	p.stack = p.stack[:base]
	p.wide.drop(base)
	return v, ok
}

func (p *Parser) eBody(k Kind, base int) (Value, bool) {
	end := byte(']')
	if k == Object {
		end = '}'
	}
	p.Pos++ // [ or {
	p.eSpace()
	if p.Pos < len(p.Data) && p.Data[p.Pos] == end {
		p.Pos++
		return Value{Kind: k}, true
	}
	for {
		var m Member
		if k == Object {
			p.eSpace()
			key, ok := p.eString(true)
			if !ok {
				return Value{}, false
			}
			if p.duplicate(key, base) {
				return Value{}, false
			}
			p.eSpace()
			if p.Pos >= len(p.Data) || p.Data[p.Pos] != ':' {
				return Value{}, false
			}
			p.Pos++
			m.Key = key
		}
		var ok bool
		if m.Val, ok = p.eValue(); !ok {
			return Value{}, false
		}
		p.push(m)
		p.eSpace()
		if p.Pos >= len(p.Data) {
			return Value{}, false
		}
		switch p.Data[p.Pos] {
		case ',':
			p.Pos++
		case end:
			p.Pos++
			return Value{Kind: k, Elems: p.members(base)}, true
		default:
			return Value{}, false
		}
	}
}

// eString decodes an inner string literal, which starts at Pos with \".
// A key is, when it is one of the known ones, that shared constant.
func (p *Parser) eString(key bool) (string, bool) {
	d := p.Data
	if p.Pos+1 >= len(d) || d[p.Pos] != '\\' || d[p.Pos+1] != '"' {
		return "", false
	}
	i := p.Pos + 2
	plain := i // start of the pending run of plain bytes
	esc := false
	var b []byte // once an escape has been seen: the text, in the slab from slabAt
	slabAt := 0
	var seen uint64
	for {
		var run uint64
		i, run = plainRun(d, i)
		seen |= run
		// A raw quote ends the outer literal, a control character is
		// invalid there: neither belongs to the inner text.
		if i+1 >= len(d) || d[i] != '\\' {
			return "", false
		}
		if d[i+1] == '"' { // the closing \"
			var s string
			switch {
			case esc:
				p.slab = append(b, d[plain:i]...)
				s = p.slabString(slabAt)
			case key:
				if k, ok := knownKey(d[plain:i]); ok {
					s = k
					break
				}
				fallthrough
			default:
				s = p.view(plain, i)
			}
			if seen&swar.Tops != 0 && !validText(s) {
				return "", false
			}
			p.Pos = i + 2
			return s, true
		}
		if !esc {
			esc = true
			p.room(p.Pos)
			slabAt, b = len(p.slab), p.slab
		}
		b = append(b, d[plain:i]...)
		switch d[i+1] {
		case '/': // \/, an outer escape of a plain /
			b = append(b, '/')
			i += 2
		case '\\': // an inner escape, its character after \\
			if i+2 >= len(d) {
				return "", false
			}
			switch c := d[i+2]; c {
			case '\\': // \\\" \\\\ \\\/: an inner ", \ or / escaped twice
				if i+3 >= len(d) {
					return "", false
				}
				switch c := d[i+3]; c {
				case '"', '\\', '/':
					b = append(b, c)
				default:
					return "", false
				}
				i += 4
			case '/', 'b', 'f', 'n', 'r', 't':
				b = append(b, shortEscape[c])
				i += 3
			default: // \\u and anything else
				return "", false
			}
		default: // an outer \n, \t, \u … inside the inner string
			return "", false
		}
		plain = i
	}
}

// An Inner reads, token by token, the JSON text held in a string literal,
// for a Parser's Literal hook: a reader that turns the text straight into
// its own structures instead of a tree. It reads what the one-pass decoder
// reads (the same escapes, white space and checks: duplicate keys, nesting
// depth, valid UTF-8), and gives up where it gives up. A failure is sticky:
// every later call returns a zero value, and OK reports it. The strings it
// returns are valid until the row's Parse returns, except those of
// KeptString, which are the row's own (see Parser.CopyStrings).
//
// Reading goes: Begin opens an array or object (an outermost value must
// be one; the literal may hold several, one after another); More says
// whether another element follows (false: the container has closed); in
// an object each element starts with Key or AppendKey; Peek shows a
// value's first byte; String, KeptString and AppendValue (any value,
// written compact) read a value; Text reads fixed text between the
// outermost values; End, after the last of them, reads the literal's
// closing quote.
//
// An Inner is a handle on a pooled copy of the Parser (offerLiteral),
// whose state it reads and keeps (innerState): passed by value, it costs
// no allocation.
type Inner struct{ p *Parser }

// innerState is an Inner's state, kept in the Parser.
type innerState struct {
	failed bool
	began  bool // an outermost container has been opened, or Text read
	ended  bool
	n      int // open containers
	levels [innerLevels]innerLevel
	// keys holds the keys of the open objects, for the duplicate check.
	keys   []string
	high   int       // the most keys held
	pooled *[]string // where keys came from (keyStacks), taken at the first key
	wide   keyIndex  // of the one object on keys past wideKeys members
}

// innerLevels is how deeply an Inner's containers may nest (AppendValue
// reads deeper values whole, up to MaxDepth).
const innerLevels = 8

type innerLevel struct {
	close byte  // ']' or '}'
	first bool  // no element read yet
	base  int32 // the object's keys start here in keys
}

// offerLiteral offers the string literal at Pos, the value of the
// top-level member key, to the Literal hook. When the hook takes it, Pos
// is after the literal and the slab holds the strings it kept; when not,
// the parser is as before the call (what the hook wrote into the slab's
// free part stays free).
func (p *Parser) offerLiteral(key string) (Value, bool) {
	// The hook reads through a pooled copy of the parser, so that p,
	// which a hook could keep, does not move to the heap: every Parse
	// would allocate its parser then.
	ip := innerParsers.Get().(*Parser)
	*ip = Parser{} // cleared in place: a literal would be built aside and copied
	ip.Data, ip.Pos, ip.DuplicateKeys, ip.slab = p.Data, p.Pos+1, p.DuplicateKeys, p.slab
	v, ok := p.Literal(key, Inner{ip})
	ok = ok && ip.in.ended && !ip.in.failed
	if ok {
		p.Pos, p.slab = ip.Pos, ip.slab
	}
	if kp := ip.in.pooled; kp != nil { // newKey took a list
		if keys := ip.in.keys; cap(keys) <= 1024 {
			clear(keys[:ip.in.high]) // no references into the text
			*kp = keys[:0]
			keyStacks.Put(kp)
		}
	}
	// No references into the text or the caller's memory stay in the pool.
	ip.Data, ip.slab, ip.in.keys, ip.in.pooled = nil, nil, nil, nil
	innerParsers.Put(ip)
	return v, ok
}

var innerParsers = sync.Pool{New: func() any { return new(Parser) }}

var keyStacks = sync.Pool{New: func() any { s := make([]string, 0, 32); return &s }}

// OK reports whether everything read so far was read.
func (r Inner) OK() bool { return !r.p.in.failed }

// fail marks the reading failed and returns false.
func (r Inner) fail() bool {
	r.p.in.failed = true
	return false
}

// Begin opens an array (k Array) or object (k Object).
func (r Inner) Begin(k Kind) bool {
	p, in := r.p, &r.p.in
	if in.failed || in.ended {
		return r.fail()
	}
	in.began = true
	p.eSpace()
	open := byte('[')
	if k == Object {
		open = '{'
	}
	if p.Pos >= len(p.Data) || p.Data[p.Pos] != open || in.n == innerLevels || p.depth >= MaxDepth {
		return r.fail()
	}
	p.Pos++
	p.depth++
	in.levels[in.n] = innerLevel{close: open + 2, first: true, base: int32(len(in.keys))} // ] and } follow [ and { by two
	in.n++
	return true
}

// More reports whether another element of the innermost open container
// follows; false means it has closed (or reading failed).
func (r Inner) More() bool {
	p, in := r.p, &r.p.in
	if in.failed || in.n == 0 {
		return r.fail()
	}
	l := &in.levels[in.n-1]
	p.eSpace()
	if p.Pos >= len(p.Data) {
		return r.fail()
	}
	c := p.Data[p.Pos]
	if c == l.close {
		p.Pos++
		p.depth--
		in.keys = in.keys[:int(l.base)]
		in.n--
		return false
	}
	if l.first {
		l.first = false
		return true
	}
	if c != ',' {
		return r.fail()
	}
	p.Pos++
	// After a comma a value must follow, not the closing bracket: the
	// value's reader fails on it.
	return true
}

// Key reads an object member's key and its colon. A key the object has
// had already fails, unless the Parser takes DuplicateKeys.
func (r Inner) Key() string {
	_, k := r.key(nil, false)
	return k
}

// AppendKey is Key, appending the key's JSON form and a colon to b.
func (r Inner) AppendKey(b []byte) ([]byte, string) { return r.key(b, true) }

func (r Inner) key(b []byte, appendIt bool) ([]byte, string) {
	in := &r.p.in
	if in.failed || in.n == 0 || in.levels[in.n-1].close != '}' {
		r.fail()
		return b, ""
	}
	b, k, ok := r.memberKey(b, int(in.levels[in.n-1].base), appendIt)
	if !ok {
		r.fail()
		return b, ""
	}
	return b, k
}

// memberKey reads a member's key and its colon in the object whose keys
// start at base (see newKey), appending the key's JSON form and a colon to
// b when appendIt. The key is a view: keys are not kept.
func (r Inner) memberKey(b []byte, base int, appendIt bool) ([]byte, string, bool) {
	p := r.p
	p.eSpace()
	start := p.Pos
	k, ok := p.eString(false)
	if !ok || !r.newKey(k, base) {
		return b, "", false
	}
	if appendIt {
		b = append(p.appendQuoted(b, k, start), ':')
	}
	p.eSpace()
	if p.Pos >= len(p.Data) || p.Data[p.Pos] != ':' {
		return b, "", false
	}
	p.Pos++
	return b, k, true
}

// newKey records key k of the object whose keys start at base, or fails
// when the object has had it already (unless the Parser takes
// DuplicateKeys).
func (r Inner) newKey(k string, base int) bool {
	if !r.p.addKey(k, base) {
		return r.fail()
	}
	return true
}

// addKey is newKey, reporting a repeated key without failing the Inner
// (Laid's reads fail on their own).
func (p *Parser) addKey(k string, base int) bool {
	in := &p.in
	if in.pooled == nil {
		in.pooled = keyStacks.Get().(*[]string)
		in.keys = (*in.pooled)[:0]
	}
	if !p.DuplicateKeys {
		if n := len(in.keys) - base; n >= wideKeys {
			if in.wide.has(k, base, n, func(i int) string { return in.keys[base+i] }) {
				return false
			}
		} else {
			for _, o := range in.keys[base:] {
				if o == k {
					return false
				}
			}
		}
	}
	in.keys = append(in.keys, k)
	in.high = max(in.high, len(in.keys))
	return true
}

// String reads a string value, valid until the row's Parse returns.
func (r Inner) String() string { return r.str(false) }

// KeptString reads a string value that stays valid after Parse, as the
// Parser's other strings do (copied out of Data).
func (r Inner) KeptString() string { return r.str(true) }

func (r Inner) str(keep bool) string {
	p := r.p
	if p.in.failed || p.in.n == 0 {
		r.fail()
		return ""
	}
	p.eSpace()
	p.CopyStrings = keep
	s, ok := p.eString(false)
	p.CopyStrings = false
	if !ok {
		r.fail()
		return ""
	}
	return s
}

// appendQuoted appends the JSON form of s, the string eString has just
// read from the literal that started at start. A string read without
// escapes is its own JSON form, copied as it is: eString stops at quotes,
// backslashes and control characters and checks UTF-8, the only things
// AppendString would change. Every escape is longer than what it stands
// for, so the lengths tell.
func (p *Parser) appendQuoted(b []byte, s string, start int) []byte {
	if len(s) == p.Pos-start-4 { // \" s \"
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	return AppendString(b, s)
}

// Peek returns the first byte of the next value, after white space, or 0
// when reading has failed or the text has ended.
func (r Inner) Peek() byte {
	p := r.p
	if p.in.failed {
		return 0
	}
	p.eSpace()
	if p.Pos >= len(p.Data) {
		return 0
	}
	return p.Data[p.Pos]
}

// AppendValue reads any value and appends it to b as AppendCompact would
// append its tree, without building the tree: eValue's grammar, written
// as it is read.
func (r Inner) AppendValue(b []byte) []byte {
	if r.p.in.failed || r.p.in.n == 0 {
		r.fail()
		return b
	}
	b, ok := r.appendValue(b)
	if !ok {
		r.fail()
	}
	return b
}

func (r Inner) appendValue(b []byte) ([]byte, bool) {
	p := r.p
	p.eSpace()
	if p.Pos >= len(p.Data) {
		return b, false
	}
	switch c := p.Data[p.Pos]; {
	case c == '{' || c == '[':
		return r.appendContainer(b, c)
	case c == '\\':
		start := p.Pos
		s, ok := p.eString(false)
		return p.appendQuoted(b, s, start), ok
	}
	v, ok := p.eScalar()
	if !ok {
		return b, false
	}
	return AppendCompact(b, &v), true
}

// appendContainer is eContainer and eBody, written as read.
func (r Inner) appendContainer(b []byte, open byte) ([]byte, bool) {
	p, in := r.p, &r.p.in
	if p.depth >= MaxDepth {
		return b, false
	}
	p.depth++
	base := len(in.keys)
	b, ok := r.appendBody(b, open, base)
	p.depth--
	in.keys = in.keys[:base]
	in.wide.drop(base)
	return b, ok
}

func (r Inner) appendBody(b []byte, open byte, base int) ([]byte, bool) {
	p := r.p
	end := open + 2 // ] and } follow [ and { by two
	b = append(b, open)
	p.Pos++
	p.eSpace()
	if p.Pos < len(p.Data) && p.Data[p.Pos] == end {
		p.Pos++
		return append(b, end), true
	}
	for n := 0; ; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		var ok bool
		if open == '{' {
			if b, _, ok = r.memberKey(b, base, true); !ok {
				return b, false
			}
		}
		if b, ok = r.appendValue(b); !ok {
			return b, false
		}
		p.eSpace()
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

// Start skips white space and returns where the next value starts, for
// Since; -1 once reading has failed or ended.
func (r Inner) Start() int {
	p, in := r.p, &r.p.in
	if in.failed || in.ended {
		return -1
	}
	p.eSpace()
	return p.Pos
}

// Since returns the literal's text from at, a Start, to where the Inner
// reads: the text of the values read since, as it stands in the row (a
// view, valid while the hook runs); "" when reading has failed.
func (r Inner) Since(at int) string {
	p := r.p
	if p.in.failed || at < 0 || at >= p.Pos || p.Pos > len(p.Data) {
		return ""
	}
	return unsafe.String(&p.Data[at], p.Pos-at)
}

// Ahead returns up to n bytes of the literal's text from where the next
// value starts (after white space), as Start finds it: a view, valid
// while the hook runs.
func (r Inner) Ahead(n int) string {
	at := r.Start()
	if at < 0 || at >= len(r.p.Data) {
		return ""
	}
	return unsafe.String(&r.p.Data[at], min(n, len(r.p.Data)-at))
}

// Again reads s, the whole text of one value that an Inner read before
// (Since) with as many containers open around it as this one has, as the
// next value (after white space), and reports whether it was there;
// reading does not move past the white space when it was not. The
// value's text decides all that reading it decides (its strings, keys,
// escapes, nesting), so reading s again is reading that value.
func (r Inner) Again(s string) bool {
	p, in := r.p, &r.p.in
	if in.failed || in.ended || s == "" {
		return false
	}
	p.eSpace()
	if len(p.Data)-p.Pos < len(s) || string(p.Data[p.Pos:p.Pos+len(s)]) != s {
		return false
	}
	p.Pos += len(s)
	in.began = true
	return true
}

// Text reads s as the literal's next bytes, as they stand: fixed text
// before, between or after the outermost values, given in its JSON form
// (escaped, without quotes; a text whose form differs, such as one
// escaped otherwise, fails). s must be the whole JSON form of a text: no
// raw quote, backslash that starts no escape, or control character.
func (r Inner) Text(s string) bool {
	p, in := r.p, &r.p.in
	if in.failed || in.ended || in.n != 0 || len(p.Data)-p.Pos < len(s) || string(p.Data[p.Pos:p.Pos+len(s)]) != s {
		return r.fail()
	}
	p.Pos += len(s)
	in.began = true
	return true
}

// End reads the end of the literal after the last outermost container (or
// Text): white space, then the closing quote.
func (r Inner) End() bool {
	p, in := r.p, &r.p.in
	if in.failed || !in.began || in.ended || in.n != 0 || p.depth != 0 {
		return r.fail()
	}
	p.eSpace()
	if p.Pos >= len(p.Data) || p.Data[p.Pos] != '"' {
		return r.fail()
	}
	p.Pos++
	in.ended = true
	return true
}
