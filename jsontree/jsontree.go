// Package jsontree decodes JSON into an order-preserving tree and prints it
// back. It is augment's one JSON parser for text whose key order, number
// spelling or byte positions matter: the dump readers (stages/formats) and
// translate, which rewrites string literals in place through spans.
//
// encoding/json is not used there because it loses object key order (Go
// maps) and would make the readers decode twice (once for the row, once more
// for every embedded JSON text).
package jsontree

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/augmentdata/augment/internal/swar"
)

// A Kind is the type of a JSON value.
type Kind uint8

const (
	Null Kind = iota
	False
	True
	Number
	String
	Array
	Object
)

// A Value is a decoded JSON value. Objects keep their members in source
// order; numbers keep their literal text, so 1.0 stays 1.0.
type Value struct {
	Kind Kind
	// off is where the value's text starts in the text it was decoded
	// from (Parser.Spans; see Span); it sits in what would be padding
	// after Kind.
	off   uint32
	Str   string   // String: decoded text; Number: the literal
	Elems []Member // Array: elements (Key unused); Object: members in order
}

// A Member is an object member or, with Key unused, an array element.
type Member struct {
	Key string
	Val Value
}

// NewString returns a string value.
func NewString(s string) Value { return Value{Kind: String, Str: s} }

// Get returns the member called key of an object, or nil. With duplicate
// keys (Parser.DuplicateKeys) it returns the first.
func (v *Value) Get(key string) *Value {
	if v.Kind != Object {
		return nil
	}
	for i := range v.Elems {
		if v.Elems[i].Key == key {
			return &v.Elems[i].Val
		}
	}
	return nil
}

// Has reports whether an object has a member called key.
func (v *Value) Has(key string) bool { return v.Get(key) != nil }

// StringOr returns the string member key of an object; ok is false when the
// member exists but is not a string. A missing or null member gives "", true.
func (v *Value) StringOr(key string) (s string, ok bool) {
	m := v.Get(key)
	switch {
	case m == nil || m.Kind == Null:
		return "", true
	case m.Kind == String:
		return m.Str, true
	}
	return "", false
}

// String names the kind for messages: "null", "boolean", "number",
// "string", "array" or "object".
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case False, True:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	}
	return "object"
}

// An Error says where and why decoding failed. EOF marks input that ended
// inside a value (truncation).
type Error struct {
	Off int // byte offset in the text
	Msg string
	EOF bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Off) }

// IsEOF reports whether err says the input ended inside a value.
func IsEOF(err error) bool {
	je, ok := err.(*Error)
	return ok && je.EOF
}

// MaxDepth is how deeply arrays and objects may nest.
const MaxDepth = 512

// maxSpanText is the longest text a Parser with Spans takes: spans are
// 32-bit offsets.
const maxSpanText = math.MaxUint32

// A Parser decodes JSON text. The zero value with Data set is ready; Parse
// reads Data as one JSON value, while Value, ReadString and SkipSpace read
// at Pos, for callers that read a JSON value inside other text.
//
// Unless CopyStrings is set, decoded strings without escapes point into
// Data instead of being copied, so Data must not change while the values
// are in use: texts held in Go strings are immutable anyway; rows, which
// a scanner reuses, are decoded with CopyStrings. With CopyStrings the
// decoded strings and number literals share one block, allocated at the
// first string and as long as the rest of Data (decoded text is never
// longer than its literal): one allocation per text instead of one per
// string, and a string kept keeps that block alive.
type Parser struct {
	Data []byte
	Pos  int
	// CopyStrings copies decoded strings out of Data (see above).
	CopyStrings bool
	// SingleQuoteEscape accepts \' inside strings as an apostrophe
	// (glaive's quoted arguments); SawSingleQuote records that one was seen.
	SingleQuoteEscape, SawSingleQuote bool
	// DuplicateKeys accepts an object key that occurs twice, as
	// encoding/json does; by default it is an error.
	DuplicateKeys bool
	// Spans records where each value starts, for Value.Span. It is off by
	// default: the store costs the readers several per cent.
	Spans bool
	// ValidUTF8 says that Data is valid UTF-8, as text this package
	// decoded is: its strings are then not checked again (a string cut
	// from valid text at its quotes, with its escapes decoded, is valid).
	// Text that is not must not be given with it.
	ValidUTF8 bool
	// BadUTF8 and LoneSurrogate record that a string held invalid UTF-8
	// (each run of invalid bytes decoded as one U+FFFD) or a \u escape of
	// half a surrogate pair (decoded as U+FFFD).
	BadUTF8, LoneSurrogate bool

	depth int
	// slab is the block CopyStrings copies strings into: its unused
	// capacity is free, what lies before len(slab) belongs to strings
	// already returned and is never written again.
	slab []byte
	// stack collects the members of the containers being decoded; each
	// finished container copies its own into the slab. high is the most of
	// stack used, cleared when Parse gives the (pooled) stack back.
	stack []Member
	high  int

	// Arena, when set, holds the members of the decoded containers (see
	// Arena); else each container's members are a slice of their own.
	Arena *Arena

	// Embedded, when set with CopyStrings (and without Spans), names the
	// members of the top-level object whose string values may hold JSON
	// text, such as xlam's "tools": when the text is an array or object,
	// the member's value is that array or object, decoded in the same
	// pass as the row (both levels of escapes at once) rather than as a
	// string to be decoded again. Any other text, or one the one-pass
	// decoder leaves to the two passes (see embedded.go), gives the
	// string, exactly as without Embedded.
	Embedded func(key string) bool

	// Literal, when set with Embedded, is offered each member Embedded
	// names, before the one-pass decoder: it reads the JSON text the
	// literal holds through r (see Inner) and returns ok when it took the
	// member, whose value is then v, and r has read the whole literal
	// (Inner.End). Otherwise the literal is decoded as without Literal,
	// and the hook must drop what it read: a reader that builds its own
	// structures from text it knows (xlam's tool lists), leaving all else
	// to the tree.
	Literal func(key string, r Inner) (v Value, ok bool)

	// Hooked, when set with Literal (and, as Embedded, with CopyStrings
	// and without Spans), names further members of the top-level object
	// whose string literals are offered to Literal:
	// texts that hold JSON among other text (glaive's and ToolACE's
	// system prompts, tool definitions after a fixed lead-in). One the
	// hook declines is decoded as a string, as without Hooked (without
	// Embedded's one-pass decoding).
	Hooked func(key string) bool

	in innerState // the Literal hook's Inner
	// wide indexes the keys of the one object on stack that has passed
	// wideKeys members, for the duplicate check (see duplicate).
	wide keyIndex
}

// Parse decodes data, which must hold exactly one JSON value. The values
// may point into data (see Parser).
func Parse(data []byte) (Value, error) {
	p := Parser{Data: data}
	return p.Parse()
}

// Parse decodes Data from Pos to its end, which must hold exactly one JSON
// value (white space around it allowed).
func (p *Parser) Parse() (Value, error) {
	sp := p.takeStack()
	v, err := p.Value()
	if err == nil {
		p.SkipSpace()
		if p.Pos < len(p.Data) {
			err = p.fail("unexpected data after the JSON value")
		}
	}
	p.giveStack(sp)
	return v, err
}

// takeStack gives the parser a pooled stack, unless it has one (a Parse
// calling Value): then it returns nil.
func (p *Parser) takeStack() *[]Member {
	if p.stack != nil {
		return nil
	}
	sp := stacks.Get().(*[]Member)
	p.stack, p.high = (*sp)[:0], 0
	return sp
}

// giveStack gives the stack takeStack took back to the pool.
func (p *Parser) giveStack(sp *[]Member) {
	if sp == nil {
		return
	}
	if cap(p.stack) <= 4096 {
		// Cleared, so the pool keeps no references into decoded texts.
		clear(p.stack[:p.high])
		*sp = p.stack[:0]
		stacks.Put(sp)
	}
	p.stack = nil
}

// Value decodes the JSON value at Pos (after white space) and leaves Pos
// just after it.
func (p *Parser) Value() (Value, error) {
	if p.Spans && uint64(len(p.Data)) > maxSpanText {
		return Value{}, &Error{Off: 0, Msg: "text longer than 4 GiB, too long for spans"}
	}
	// Called on its own (not by Parse), it takes a pooled stack too: a
	// caller reading values one after another then does not grow a stack
	// for each.
	sp := p.takeStack()
	v, err := p.value()
	p.giveStack(sp)
	return v, err
}

// ParseString is Parse for text held in a string, without copying it.
func ParseString(s string) (Value, error) { return Parse(bytesOf(s)) }

// StringParser returns a Parser reading s without copying it.
func StringParser(s string) Parser { return Parser{Data: bytesOf(s)} }

// bytesOf returns the bytes of s without copying; they must not be changed.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// view returns data[a:b] as a string, copied only when copyStrings is set.
func (p *Parser) view(a, b int) string {
	if a == b {
		return ""
	}
	if p.CopyStrings {
		p.room(a)
		start := len(p.slab)
		p.slab = append(p.slab, p.Data[a:b]...)
		return unsafe.String(&p.slab[start], b-a)
	}
	return unsafe.String(&p.Data[a], b-a)
}

// room makes sure the slab has room for the rest of Data from offset from,
// which bounds what the strings decoded from there take: decoding text in
// order, a block is allocated at most once.
func (p *Parser) room(from int) {
	if n := len(p.Data) - from; cap(p.slab)-len(p.slab) < n {
		p.slab = make([]byte, 0, n)
	}
}

// Block returns room for n bytes of the caller's, a slice of length 0 and
// capacity n that stays valid after Parse as the Parser's strings do: the
// free part of the block CopyStrings copied the strings into when it has
// that much (a reader's texts then share the row's allocation), else a
// new one. Strings decoded later do not overwrite it.
func (p *Parser) Block(n int) []byte {
	at := len(p.slab)
	if n == 0 || cap(p.slab)-at < n {
		return make([]byte, 0, n)
	}
	p.slab = p.slab[:at+n]
	return p.slab[at : at : at+n]
}

// slabString returns the bytes the slab holds from start as a string.
func (p *Parser) slabString(start int) string {
	if start == len(p.slab) {
		return ""
	}
	return unsafe.String(&p.slab[start], len(p.slab)-start)
}

// key decodes an object key; the keys of the known formats are shared
// constants rather than copies.
func (p *Parser) key() (string, error) {
	if p.CopyStrings {
		if end := p.Pos + 1 + bytes.IndexByte(p.Data[p.Pos+1:], '"'); end > p.Pos {
			if k, ok := knownKey(p.Data[p.Pos+1 : end]); ok {
				p.Pos = end + 1
				return k, nil
			}
		}
	}
	return p.ReadString()
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

func (p *Parser) fail(msg string) *Error {
	return &Error{Off: p.Pos, Msg: msg, EOF: p.Pos >= len(p.Data)}
}

// SkipSpace moves Pos past JSON white space.
func (p *Parser) SkipSpace() {
	for p.Pos < len(p.Data) {
		// Most bytes here are punctuation or a value's first byte, all
		// above ' ': one comparison rules them out.
		if c := p.Data[p.Pos]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
		p.Pos++
	}
}

// at is the offset of Pos recorded in a value: Pos with Spans, else 0.
func (p *Parser) at() uint32 {
	if p.Spans {
		return uint32(p.Pos)
	}
	return 0
}

// value decodes the value at Pos. Each kind's decoder records where the
// value starts (Value.off) as it builds it.
func (p *Parser) value() (Value, error) {
	p.SkipSpace()
	if p.Pos >= len(p.Data) {
		return Value{}, p.fail("unexpected end of input")
	}
	switch c := p.Data[p.Pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		at := p.at()
		s, err := p.ReadString()
		return Value{Kind: String, off: at, Str: s}, err
	case c == 't':
		return p.literal("true", True)
	case c == 'f':
		return p.literal("false", False)
	case c == 'n':
		return p.literal("null", Null)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return Value{}, p.fail(unexpected(p.Data[p.Pos:]))
}

// unexpected says which character starts b, where a value was due: the
// character b's UTF-8 starts with (not its first byte read as Latin-1), a
// byte order mark by that name (files joined with cat keep the second
// one's), and a byte that is not UTF-8 as such.
func unexpected(b []byte) string {
	r, n := utf8.DecodeRune(b)
	switch {
	case r == '\uFEFF':
		return "unexpected byte order mark (U+FEFF): a BOM may only start the file (were files joined with cat?)"
	case r == utf8.RuneError && n <= 1:
		return fmt.Sprintf("unexpected byte 0x%02x (not UTF-8)", b[0])
	}
	return fmt.Sprintf("unexpected character %q", r)
}

func (p *Parser) literal(word string, k Kind) (Value, error) {
	end := p.Pos + len(word)
	if end > len(p.Data) {
		if string(p.Data[p.Pos:]) == word[:len(p.Data)-p.Pos] {
			p.Pos = len(p.Data)
			return Value{}, p.fail("unexpected end of input")
		}
		return Value{}, p.fail("invalid literal")
	}
	if string(p.Data[p.Pos:end]) != word {
		return Value{}, p.fail("invalid literal")
	}
	at := p.at()
	p.Pos = end
	return Value{Kind: k, off: at}, nil
}

func (p *Parser) number() (Value, error) {
	start := p.Pos
	end, ok := numberEnd(p.Data, start)
	p.Pos = end
	switch {
	case !ok && end >= len(p.Data) && end-start <= 1: // nothing, or "-", before the end
		return Value{}, p.fail("unexpected end of input")
	case !ok:
		return Value{}, p.fail("invalid number")
	}
	var at uint32
	if p.Spans {
		at = uint32(start)
	}
	return Value{Kind: Number, off: at, Str: p.view(start, end)}, nil
}

// numberEnd reads the JSON number starting at d[i] and returns its end,
// or, when there is none, false and the offset of the byte that is not as
// the grammar wants (len(d) at the end).
func numberEnd(d []byte, i int) (int, bool) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return i, false
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return i, false
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
			return i, false
		}
	}
	return i, true
}

// strSpecial marks the bytes that interrupt a run of plain string content,
// which are the ASCII bytes AppendString escapes: a plain run is written
// as it stands, which AppendValue relies on.
var strSpecial = func() (t [256]bool) {
	for i := range 0x20 {
		t[i] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// plainRun returns the offset of the first byte at or after d[i] that ends
// a run of plain string content ('"', '\\' or a control character), or
// len(d), and the OR of the bytes it read (a superset of the run's), whose
// high bit says whether the run may hold non-ASCII bytes. It reads eight
// bytes at a time (swar.StringSpecial).
func plainRun(d []byte, i int) (int, uint64) {
	var seen uint64
	for ; i+16 <= len(d); i += 16 { // sixteen bytes a step, then eight
		s := d[i : i+16]
		w, x := binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
		seen |= w | x
		if m := swar.StringSpecial(w); m != 0 {
			return i + bits.TrailingZeros64(m)>>3, seen
		}
		if m := swar.StringSpecial(x); m != 0 {
			return i + 8 + bits.TrailingZeros64(m)>>3, seen
		}
	}
	for ; i+8 <= len(d); i += 8 {
		w := binary.LittleEndian.Uint64(d[i:])
		seen |= w
		if m := swar.StringSpecial(w); m != 0 {
			return i + bits.TrailingZeros64(m)>>3, seen
		}
	}
	for ; i < len(d) && !strSpecial[d[i]]; i++ {
		seen |= uint64(d[i])
	}
	return i, seen
}

// shortEscape maps the character after a backslash to the byte it stands
// for, for JSON's one-character escapes (\u is not among them); 0 for any
// other character.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// ReadString decodes the string literal starting at Pos (its '"'). Text
// without escapes is returned as a view of the input (see Parser).
func (p *Parser) ReadString() (string, error) {
	if p.CopyStrings {
		return p.readStringCopy()
	}
	d := p.Data
	i := p.Pos + 1
	// Once an escape has been seen, the text is decoded into b: the slab
	// from slabAt with CopyStrings, else a pooled buffer (sp), copied out
	// at the closing quote.
	esc := false
	var sp *[]byte
	var b []byte
	slabAt := 0
	plain := i // start of the pending run of plain bytes
	var seen uint64
	for {
		var run uint64
		i, run = plainRun(d, i)
		seen |= run
		if i >= len(d) {
			p.Pos = i
			putScratch(sp, b)
			return "", p.fail("unexpected end of input inside a string")
		}
		switch c := d[i]; {
		case c == '"':
			var s string
			switch {
			case !esc:
				s = p.view(plain, i)
			case sp == nil:
				p.slab = append(b, d[plain:i]...)
				s = p.slabString(slabAt)
			default:
				b = append(b, d[plain:i]...)
				s = string(b)
				putScratch(sp, b)
			}
			p.Pos = i + 1
			return p.validText(s, seen), nil
		case c < 0x20:
			p.Pos = i
			putScratch(sp, b)
			return "", p.fail("control character inside a string")
		}
		// A backslash.
		if !esc {
			esc = true
			if p.CopyStrings {
				p.room(p.Pos)
				slabAt, b = len(p.slab), p.slab
			} else {
				sp = scratch.Get().(*[]byte)
				b = (*sp)[:0]
			}
		}
		b = append(b, d[plain:i]...)
		if i+1 >= len(d) {
			p.Pos = i + 1
			putScratch(sp, b)
			return "", p.fail("unexpected end of input inside a string")
		}
		e := d[i+1]
		i += 2
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			b = append(b, shortEscape[e])
		case '\'':
			if !p.SingleQuoteEscape {
				p.Pos = i - 2
				putScratch(sp, b)
				return "", p.fail(`invalid escape \'`)
			}
			p.SawSingleQuote = true
			b = append(b, '\'')
		case 'u':
			r, next, lone, msg := uEscape(d, i)
			if msg != "" {
				p.Pos = i
				putScratch(sp, b)
				return "", p.fail(msg)
			}
			i = next
			p.LoneSurrogate = p.LoneSurrogate || lone
			b = utf8.AppendRune(b, r)
		default:
			p.Pos = i - 2
			putScratch(sp, b)
			return "", p.fail(fmt.Sprintf(`invalid escape \%c`, e))
		}
		plain = i
	}
}

// readStringCopy is ReadString with CopyStrings: the text is copied into
// the slab as it is scanned, in one pass, eight bytes at a time. Each word
// is stored before it is tested: the bytes stored past the string's end
// lie in the slab's free part, which the next string overwrites, and the
// slab has room for them, since room leaves at least the rest of Data
// after the opening quote free and decoded text is never longer than its
// literal (an output word ends no later than the input word it copies).
func (p *Parser) readStringCopy() (string, error) {
	d := p.Data
	p.room(p.Pos + 1)
	start := len(p.slab)
	out := p.slab[:cap(p.slab)]
	o := start
	i := p.Pos + 1
	var seen uint64
	for {
		var run uint64
		i, o, run = copyRun(d, i, out, o)
		seen |= run
		if i >= len(d) {
			p.Pos = i
			return "", p.fail("unexpected end of input inside a string")
		}
		switch c := d[i]; {
		case c == '"':
			s := ""
			if o > start {
				s = unsafe.String(&out[start], o-start)
			}
			p.slab = out[:o]
			p.Pos = i + 1
			return p.validText(s, seen), nil
		case c < 0x20:
			p.Pos = i
			return "", p.fail("control character inside a string")
		}
		// A backslash, not of an escape copyRun decodes.
		if i+1 >= len(d) {
			p.Pos = i + 1
			return "", p.fail("unexpected end of input inside a string")
		}
		e := d[i+1]
		i += 2
		switch e {
		case '\'':
			if !p.SingleQuoteEscape {
				p.Pos = i - 2
				return "", p.fail(`invalid escape \'`)
			}
			p.SawSingleQuote = true
			out[o] = '\''
			o++
		case 'u':
			r, next, lone, msg := uEscape(d, i)
			if msg != "" {
				p.Pos = i
				return "", p.fail(msg)
			}
			i = next
			p.LoneSurrogate = p.LoneSurrogate || lone
			o += utf8.EncodeRune(out[o:], r)
		default:
			p.Pos = i - 2
			return "", p.fail(fmt.Sprintf(`invalid escape \%c`, e))
		}
	}
}

// copyRun copies the run of plain string content at d[i] to out[o] (see
// readStringCopy), decoding the one-character escapes it meets on the way
// (\n, \", ...: shortEscape), up to the first '"', control character or
// other backslash, or the end of d, and returns where both stopped and the
// OR of the bytes read (see plainRun). Escapes are decoded here rather than
// by the caller because text such as a system prompt holding indented JSON
// has one every few bytes.
func copyRun(d []byte, i int, out []byte, o int) (int, int, uint64) {
	var seen uint64
	for {
		n := -1 // where the special byte lies after i, once found
		// Sixteen bytes a step while they last (one test of both words),
		// then eight, then one.
		for ; i+16 <= len(d) && o+16 <= len(out); i, o = i+16, o+16 {
			s, t := d[i:i+16], out[o:o+16]
			w, x := binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
			binary.LittleEndian.PutUint64(t, w)
			binary.LittleEndian.PutUint64(t[8:], x)
			seen |= w | x
			if m := swar.StringSpecial(w); m != 0 {
				n = bits.TrailingZeros64(m) >> 3
				break
			}
			if m := swar.StringSpecial(x); m != 0 {
				n = 8 + bits.TrailingZeros64(m)>>3
				break
			}
		}
		if n < 0 {
			for ; i+8 <= len(d); i, o = i+8, o+8 {
				w := binary.LittleEndian.Uint64(d[i:])
				binary.LittleEndian.PutUint64(out[o:], w)
				seen |= w
				if m := swar.StringSpecial(w); m != 0 {
					n = bits.TrailingZeros64(m) >> 3
					break
				}
			}
		}
		if n < 0 {
			n = 0
			for ; i < len(d) && !strSpecial[d[i]]; i, o = i+1, o+1 {
				out[o] = d[i]
				seen |= uint64(d[i])
			}
		}
		i, o = i+n, o+n
		// out has room for the escape's byte: o trails i (see
		// readStringCopy) and i+1 < len(d).
		if i+1 < len(d) && d[i] == '\\' {
			if r := shortEscape[d[i+1]]; r != 0 {
				out[o] = r
				i, o = i+2, o+1
				continue
			}
			// \u00XX of an ASCII character, one byte as uEscape and
			// utf8.EncodeRune make it: encoding/json writes '<', '>' and
			// '&' so (glaive's <|endoftext|> and <functioncall> in dumps
			// Go wrote).
			if i+5 < len(d) && d[i+1] == 'u' && d[i+2] == '0' && d[i+3] == '0' {
				hi, lo := hexVal[d[i+4]], hexVal[d[i+5]]
				if hi < 8 && lo < 16 {
					out[o] = hi<<4 | lo
					i, o = i+6, o+1
					continue
				}
			}
		}
		return i, o, seen
	}
}

// putScratch gives a buffer from the scratch pool back, grown to b, unless
// it is nil or has grown past 1 MiB.
func putScratch(sp *[]byte, b []byte) {
	if sp != nil && cap(b) <= 1<<20 {
		*sp = b[:0]
		scratch.Put(sp)
	}
}

// validText returns s, a string just read, with invalid UTF-8 replaced by
// U+FFFD (and BadUTF8 set). seen is the OR of its bytes' words: only text
// with a byte outside ASCII can be invalid.
func (p *Parser) validText(s string, seen uint64) string {
	if seen&swar.Tops == 0 || p.ValidUTF8 {
		return s
	}
	return p.repairText(s)
}

func (p *Parser) repairText(s string) string {
	if validText(s) {
		return s
	}
	p.BadUTF8 = true
	return strings.ToValidUTF8(s, "\uFFFD")
}

// validText reports whether s is valid UTF-8, as utf8.ValidString does,
// in fewer instructions on text that mixes ASCII with characters of three
// bytes (Chinese dialogues in JSON): ASCII is skipped eight bytes at a time
// wherever it starts (utf8.ValidString does so only before the first
// character outside ASCII, then goes a byte at a time), and a character
// of three bytes whose lead byte allows any continuation bytes (E1–EC,
// EE–EF) is checked in place; any other is decoded.
func validText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			for i++; i+8 <= len(s) && swar.Load(s, i)&swar.Tops == 0; i += 8 {
			}
			continue
		}
		if c-0xE1 <= 0xEF-0xE1 && c != 0xED {
			// A run of such characters, each checked in place (both
			// bytes after the lead continuation bytes, tested at once).
			at := i
			for i+3 <= len(s) {
				t := s[i : i+3]
				if l := t[0]; l-0xE1 > 0xEF-0xE1 || l == 0xED || (uint16(t[1])|uint16(t[2])<<8)&0xC0C0 != 0x8080 {
					break
				}
				i += 3
			}
			if i > at {
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return false
		}
		i += n
	}
	return true
}

// uEscape decodes the \u escape whose four hex digits start at d[i], with
// the low half that must follow a high surrogate. It returns the rune, the
// index after what it read, lone = true when a surrogate without its other
// half became U+FFFD, and the error message when the digits are missing or
// not hex (then the other results mean nothing).
func uEscape(d []byte, i int) (r rune, next int, lone bool, msg string) {
	r, ok := hex4(d[i:])
	if !ok {
		if len(d)-i < 4 {
			return 0, i, false, "unexpected end of input inside a string"
		}
		return 0, i, false, `invalid \u escape`
	}
	i += 4
	if !utf16.IsSurrogate(r) {
		return r, i, false, ""
	}
	r2, ok := rune(0), false
	if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
		r2, ok = hex4(d[i+2:])
	}
	if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
		return dec, i + 6, false, ""
	}
	return utf8.RuneError, i, true, ""
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

// hexVal maps a hex digit to its value and any other byte to 0xFF.
var hexVal = func() (t [256]byte) {
	for c := range t {
		d, ok := hexDigit(byte(c))
		t[c] = 0xFF
		if ok {
			t[c] = byte(d)
		}
	}
	return t
}()

func hexDigit(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10), true
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

// push stacks a member of the container being decoded.
func (p *Parser) push(m Member) {
	p.stack = append(p.stack, m)
	if len(p.stack) > p.high {
		p.high = len(p.stack)
	}
}

// members moves the members stacked since base into a slice of their own
// (or of the Arena) and returns them, with capacity equal to their number:
// appending to Elems reallocates instead of overwriting a neighbour.
func (p *Parser) members(base int) []Member {
	var out []Member
	if p.Arena != nil {
		out = p.Arena.alloc(len(p.stack) - base)
		copy(out, p.stack[base:])
	} else {
		out = slices.Clone(p.stack[base:])
	}
	p.stack = p.stack[:base]
	return out
}

// An Arena holds the members of many decoded containers in a few blocks,
// reused after Reset: a caller that decodes text after text, each tree
// dropped before the next, then allocates almost nothing for trees. An
// Arena is not safe for concurrent use.
type Arena struct {
	blocks [][]Member
	cur    int      // the block being filled
	free   []Member // its unused part
}

// arenaBlock is how many members an Arena block holds (32 KiB); longer
// member lists get a slice of their own.
const arenaBlock = 512

// arenaKeep is how many blocks Reset keeps for reuse.
const arenaKeep = 16

func (a *Arena) alloc(n int) []Member {
	if n > arenaBlock {
		return make([]Member, n)
	}
	if n > len(a.free) {
		if len(a.blocks) > 0 {
			a.cur++
		}
		if a.cur == len(a.blocks) {
			a.blocks = append(a.blocks, make([]Member, arenaBlock))
		}
		a.free = a.blocks[a.cur]
	}
	out := a.free[:n:n]
	a.free = a.free[n:]
	return out
}

// Members returns n zero members for a tree being built by hand, such as
// a rewritten object, from the Arena's blocks; with a nil Arena, a slice
// of their own. They are valid until Reset, like the decoded trees.
func (a *Arena) Members(n int) []Member {
	if a == nil {
		return make([]Member, n)
	}
	return a.alloc(n)
}

// Reset makes the Arena's blocks free for new trees. Every Value decoded
// with it so far must be out of use: their members will be overwritten.
func (a *Arena) Reset() {
	if len(a.blocks) == 0 {
		return
	}
	// Cleared, so the blocks keep no references into decoded texts.
	for _, b := range a.blocks[:a.cur] {
		clear(b)
	}
	clear(a.blocks[a.cur][:arenaBlock-len(a.free)])
	if len(a.blocks) > arenaKeep {
		clear(a.blocks[arenaKeep:])
		a.blocks = a.blocks[:arenaKeep]
	}
	a.cur, a.free = 0, a.blocks[0]
}

// array decodes an array; in either outcome it leaves the stack as it
// found it.
func (p *Parser) array() (Value, error) {
	if p.depth >= MaxDepth {
		return Value{}, p.fail("nesting too deep")
	}
	p.depth++
	base := len(p.stack)
	v, err := p.arrayBody(base)
	p.depth--
	p.stack = p.stack[:base]
	p.wide.drop(base)
	return v, err
}

func (p *Parser) arrayBody(base int) (Value, error) {
	at := p.at()
	p.Pos++ // [
	p.SkipSpace()
	if p.Pos < len(p.Data) && p.Data[p.Pos] == ']' {
		p.Pos++
		return Value{Kind: Array, off: at}, nil
	}
	for {
		e, err := p.value()
		if err != nil {
			return Value{}, err
		}
		p.push(Member{Val: e})
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return Value{}, p.fail("unexpected end of input inside an array")
		}
		switch p.Data[p.Pos] {
		case ',':
			p.Pos++
		case ']':
			p.Pos++
			return Value{Kind: Array, off: at, Elems: p.members(base)}, nil
		default:
			return Value{}, p.fail("expected , or ] in an array")
		}
	}
}

// object decodes an object; in either outcome it leaves the stack as it
// found it.
func (p *Parser) object() (Value, error) {
	if p.depth >= MaxDepth {
		return Value{}, p.fail("nesting too deep")
	}
	p.depth++
	base := len(p.stack)
	v, err := p.objectBody(base)
	p.depth--
	p.stack = p.stack[:base]
	p.wide.drop(base)
	return v, err
}

func (p *Parser) objectBody(base int) (Value, error) {
	at := p.at()
	p.Pos++ // {
	p.SkipSpace()
	if p.Pos < len(p.Data) && p.Data[p.Pos] == '}' {
		p.Pos++
		return Value{Kind: Object, off: at}, nil
	}
	for {
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return Value{}, p.fail("unexpected end of input inside an object")
		}
		if p.Data[p.Pos] != '"' {
			return Value{}, p.fail("expected a string key in an object")
		}
		keyAt := p.Pos
		k, err := p.key()
		if err != nil {
			return Value{}, err
		}
		if p.duplicate(k, base) {
			msg := fmt.Sprintf("duplicate key %q", k)
			if !utf8.Valid(p.Data[keyAt:p.Pos]) {
				// Keys of different invalid bytes read as the same text.
				msg += " (once invalid UTF-8 is replaced by U+FFFD)"
			}
			p.Pos = keyAt
			return Value{}, p.fail(msg)
		}
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return Value{}, p.fail("unexpected end of input inside an object")
		}
		if p.Data[p.Pos] != ':' {
			return Value{}, p.fail("expected : after an object key")
		}
		p.Pos++
		var e Value
		if (p.Embedded != nil || p.Hooked != nil) && p.depth == 1 && p.embeddedAt() {
			e, err = p.literalMember(k)
		} else {
			e, err = p.value()
		}
		if err != nil {
			return Value{}, err
		}
		p.push(Member{Key: k, Val: e})
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return Value{}, p.fail("unexpected end of input inside an object")
		}
		switch p.Data[p.Pos] {
		case ',':
			p.Pos++
		case '}':
			p.Pos++
			return Value{Kind: Object, off: at, Elems: p.members(base)}, nil
		default:
			return Value{}, p.fail("expected , or } in an object")
		}
	}
}

// duplicate reports whether key k is among the members on the stack from
// base, the object's being read, and the Parser does not take
// DuplicateKeys.
func (p *Parser) duplicate(k string, base int) bool {
	if p.DuplicateKeys {
		return false
	}
	n := len(p.stack) - base
	if n < wideKeys {
		for j := range p.stack[base:] { // by index: a Member is 64 bytes
			if p.stack[base+j].Key == k {
				return true
			}
		}
		return false
	}
	return p.wide.has(k, base, n, func(i int) string { return p.stack[base+i].Key })
}

// wideKeys is how many members an object has before its duplicate check
// looks keys up in a set instead of comparing each earlier key: checking
// each key against all before it made one object of n keys cost n²/2
// comparisons (a tool of 80k parameters took 21 s to read).
const wideKeys = 64

// A keyIndex is the key set of one object being read, the one whose
// first member is at base (stored as base+1: 0 means none) of its key
// stack. It holds the object's first n keys; has adds the ones since.
// An object that ends drops its index (drop), so a later object at the
// same base starts a new one.
type keyIndex struct {
	base1 int
	n     int
	set   map[string]struct{}
}

// has reports whether k is among the n keys of the object at base, whose
// i-th key is key(i).
func (x *keyIndex) has(k string, base, n int, key func(i int) string) bool {
	if x.base1 != base+1 { // another object's (a nested one's) or none
		x.base1, x.n = base+1, 0
		if x.set == nil {
			x.set = make(map[string]struct{}, 2*n)
		} else {
			clear(x.set)
		}
	}
	for ; x.n < n; x.n++ {
		x.set[key(x.n)] = struct{}{}
	}
	_, dup := x.set[k]
	return dup
}

// drop forgets the index of the object at base, which has ended.
func (x *keyIndex) drop(base int) {
	if x.base1 == base+1 {
		x.base1 = 0
	}
}

// AppendCompact appends v as compact JSON: no insignificant space, members
// in their order, strings escaped by AppendString, numbers as written.
func AppendCompact(b []byte, v *Value) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case False:
		return append(b, "false"...)
	case True:
		return append(b, "true"...)
	case Number:
		return append(b, v.Str...)
	case String:
		return AppendString(b, v.Str)
	case Array:
		b = append(b, '[')
		for i := range v.Elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendCompact(b, &v.Elems[i].Val)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i := range v.Elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, v.Elems[i].Key)
		b = append(b, ':')
		b = AppendCompact(b, &v.Elems[i].Val)
	}
	return append(b, '}')
}

// compact returns v as compact JSON in a new, exactly sized slice.
func Compact(v *Value) []byte {
	bp := scratch.Get().(*[]byte)
	b := AppendCompact((*bp)[:0], v)
	out := slices.Clone(b)
	if cap(b) <= 1<<20 {
		*bp = b
		scratch.Put(bp)
	}
	return out
}

// CompactString is compact as a string, sharing the new slice's memory.
func CompactString(v *Value) string {
	b := Compact(v)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

var stacks = sync.Pool{New: func() any { s := make([]Member, 0, 64); return &s }}

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// AppendString appends s as a JSON string. Only '"', '\\' and control
// characters are escaped; other text, including non-ASCII, is written as
// UTF-8 (invalid bytes become U+FFFD). This is the package's one canonical
// spelling, so equal values always compact to equal bytes.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time over ASCII that needs no escape, up to
		// the first byte that does or is not ASCII (see plainRun; here a
		// high bit also stops the skip, and the lowest flag is exact),
		// then the last bytes one by one (most keys and short values are
		// only such bytes).
		for ; i+8 <= len(s); i += 8 {
			w := swar.Load(s, i)
			if m := swar.StringSpecial(w) | w&swar.Tops; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
		}
		for i < len(s) && s[i] < utf8.RuneSelf && !strSpecial[s[i]] {
			i++
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
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
		// Text outside ASCII, rune by rune while it lasts (a word check
		// per rune would only fail).
		for i < len(s) && s[i] >= utf8.RuneSelf {
			// Three-byte runes (most CJK) led by 0xE1–0xEC or 0xEE–0xEF
			// are valid with any two continuation bytes.
			if c := s[i]; c >= 0xE1 && c <= 0xEF && c != 0xED && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 {
				i += 3
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
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Span returns where v's text lies in src, the text v was decoded from by
// a Parser with Spans set: src[start:end] is the literal, quotes included
// for a string, brackets for an array or object. Values built rather than
// decoded, or decoded without Spans, have no span.
func (v *Value) Span(src []byte) (start, end int) {
	start = int(v.off)
	switch v.Kind {
	case Null, True:
		return start, start + 4
	case False:
		return start, start + 5
	case Number:
		return start, start + len(v.Str)
	case String:
		return start, stringEnd(src, start)
	}
	depth := 0
	for i := start; i < len(src); i++ {
		switch src[i] {
		case '"':
			i = stringEnd(src, i) - 1
		case '[', '{':
			depth++
		case ']', '}':
			if depth--; depth == 0 {
				return start, i + 1
			}
		}
	}
	return start, len(src)
}

// stringEnd returns the offset just after the string literal that starts
// at src[i] (its opening quote).
func stringEnd(src []byte, i int) int {
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(src)
}

// Equal reports whether a and b are the same JSON value: objects with the
// same members in any order (the n-th occurrence of a repeated key pairs
// with the n-th in the other), arrays element by element, numbers by value
// (1, 1.0 and 1e0 are equal), strings by content.
func Equal(a, b *Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case Object:
		if len(a.Elems) != len(b.Elems) {
			return false
		}
		for i := range a.Elems {
			k := a.Elems[i].Key
			n := 0
			for _, m := range a.Elems[:i] {
				if m.Key == k {
					n++
				}
			}
			bv := b.nth(k, n)
			if bv == nil || !Equal(&a.Elems[i].Val, bv) {
				return false
			}
		}
		return true
	case Array:
		if len(a.Elems) != len(b.Elems) {
			return false
		}
		for i := range a.Elems {
			if !Equal(&a.Elems[i].Val, &b.Elems[i].Val) {
				return false
			}
		}
		return true
	case String:
		return a.Str == b.Str
	case Number:
		return sameNumber(a.Str, b.Str)
	}
	return true
}

// nth returns the value of the n-th (0-based) occurrence of key in an
// object, or nil.
func (v *Value) nth(key string, n int) *Value {
	for i := range v.Elems {
		if v.Elems[i].Key == key {
			if n == 0 {
				return &v.Elems[i].Val
			}
			n--
		}
	}
	return nil
}

// sameNumber compares two JSON number literals by value.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}
