package jsontree

import (
	"unsafe"

	"github.com/augmentdata/augment/internal/swar"
)

// A Laid reads, byte by byte, JSON text held in a string literal (see
// Inner) that is laid out as Python's json.dumps writes it by default:
// ", " between elements, ": " after a key, no other white space, and
// strings without escapes. xlam's tool lists and answers are such text, and
// a reader that knows what comes next matches the punctuation and keys
// between the values as fixed text (Lit; the brackets of containers with
// Open and Close, which count how deep the reading is) instead of reading
// them token by token through Inner.
//
// A Laid accepts only what Inner reads alike (the same strings, values and
// checks: duplicate keys, UTF-8, nesting depth) and gives up on anything
// else — other white space, an escape inside a string (at either level),
// invalid UTF-8: a method that fails returns false and may have moved the
// reading position. A hook that gives up reads the literal again through
// the Inner it took the Laid from, which a Laid never changes: only
// Inner.Took moves the Inner on, to where a Laid that read the whole
// text stands. A Laid's strings are views of the row, valid while the hook
// runs; Inner.Keep copies those a hook keeps.
type Laid struct {
	p     *Parser
	i     int
	depth int // the containers open (Open, not yet Close)
}

// Laid returns a Laid reading from the Inner's position, which must be
// outside every container (before, between or after the outermost values);
// elsewhere, or once reading has failed or ended, its reads fail.
func (r Inner) Laid() Laid {
	p, in := r.p, &r.p.in
	if in.failed || in.ended || in.n != 0 {
		return Laid{p: p, i: len(p.Data)}
	}
	return Laid{p: p, i: p.Pos}
}

// Took moves the Inner to where l stands, over the outermost values l
// read; Keep the strings a hook keeps before. It fails (as every read of
// the Inner then) when the Inner has moved since Laid, or is in a
// container, or l is (an Open without its Close).
func (r Inner) Took(l Laid) bool {
	p, in := r.p, &r.p.in
	if in.failed || in.ended || in.n != 0 || l.p != p || l.depth != 0 || l.i < p.Pos || l.i > len(p.Data) {
		return r.fail()
	}
	p.Pos = l.i
	in.began = true
	return true
}

// Keep returns a copy of s, a string a Laid of this Inner read, that stays
// valid after Parse, as KeptString's do. Call it before Took. Strings kept
// in the order they stand in the text share one block with the Parser's
// other strings, as KeptString's do.
func (r Inner) Keep(s string) string {
	p := r.p
	if s == "" {
		return ""
	}
	// The block has room for the rest of the row from s on, which bounds
	// what the strings kept from there take (see room).
	p.room(p.offset(s))
	at := len(p.slab)
	p.slab = append(p.slab, s...)
	return p.slabString(at)
}

// offset returns where s, a view of Data, starts in Data; Pos when s is
// not one.
func (p *Parser) offset(s string) int {
	d := uintptr(unsafe.Pointer(unsafe.SliceData(p.Data)))
	a := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	if len(s) > len(p.Data) || a < d || a-d > uintptr(len(p.Data)-len(s)) {
		return p.Pos
	}
	return int(a - d)
}

// Lit reads s, fixed text in its JSON form as it stands in the literal
// (for example `, \"description\": ` between two members), and reports
// whether it was there; reading does not move when it was not. s holds no
// bracket outside its strings: containers are Open's and Close's.
func (l *Laid) Lit(s string) bool {
	d := l.p.Data
	if len(d)-l.i >= len(s) && string(d[l.i:l.i+len(s)]) == s {
		l.i += len(s)
		return true
	}
	return false
}

// Since returns the text l read since it stood where from, an earlier
// copy of it, stood: a view of the row, valid while the hook runs. It is
// "" when from is not an earlier copy of l.
func (l *Laid) Since(from Laid) string {
	if from.p != l.p || from.i >= l.i {
		return ""
	}
	return unsafe.String(&l.p.Data[from.i], l.i-from.i)
}

// Again reads s, the whole text of one value that a Laid read before at
// the depth l stands at (Since), and reports whether it was there;
// reading does not move when it was not. The value's text decides all
// that reading it decides (its strings, keys, nesting), so reading s
// again is reading that value.
func (l *Laid) Again(s string) bool {
	d := l.p.Data
	if s != "" && len(d)-l.i >= len(s) && string(d[l.i:l.i+len(s)]) == s {
		l.i += len(s)
		return true
	}
	return false
}

// Open reads the open bracket c of an array ('[') or object ('{'), and
// reports whether it was there within MaxDepth containers of the text's
// top, as Inner.Begin does; reading does not move when it was not.
func (l *Laid) Open(c byte) bool {
	if l.depth >= MaxDepth || l.Peek() != c {
		return false
	}
	l.i++
	l.depth++
	return true
}

// Close reads the close bracket c (']' or '}') of the container the last
// Open opened, and reports whether it was there; reading does not move
// when it was not.
func (l *Laid) Close(c byte) bool {
	if l.depth == 0 || l.Peek() != c {
		return false
	}
	l.i++
	l.depth--
	return true
}

// Next reads what follows an element of the container Open opened that c
// (']' or '}') closes: ", " before another element (more), or c, closing
// it. ok is false when neither is there.
func (l *Laid) Next(c byte) (more, ok bool) {
	if l.Lit(", ") {
		return true, true
	}
	return false, l.Close(c)
}

// Peek returns the next byte, or 0 at the end of the row.
func (l *Laid) Peek() byte {
	if l.i < len(l.p.Data) {
		return l.p.Data[l.i]
	}
	return 0
}

// Str reads a string without escapes: \", valid UTF-8 without quotes,
// backslashes or control characters, \". The string is a view of the row.
func (l *Laid) Str() (string, bool) {
	d := l.p.Data
	i := l.i
	if len(d)-i < 4 || d[i] != '\\' || d[i+1] != '"' {
		return "", false
	}
	start := i + 2
	end, seen := plainRun(d, start)
	if len(d)-end < 2 || d[end] != '\\' || d[end+1] != '"' {
		return "", false
	}
	if end == start {
		l.i = end + 2
		return "", true
	}
	s := unsafe.String(&d[start], end-start)
	if seen&swar.Tops != 0 && !validText(s) {
		return "", false
	}
	l.i = end + 2
	return s, true
}

// AppendValue reads any value and appends it to b compact, as
// Inner.AppendValue would: strings as Str reads them, an object's keys
// checked for duplicates (unless the Parser takes DuplicateKeys), nesting
// up to MaxDepth counted from the text's top (the containers Open opened
// count).
func (l *Laid) AppendValue(b []byte) ([]byte, bool) {
	return l.appendValue(b, l.depth)
}

func (l *Laid) appendValue(b []byte, depth int) ([]byte, bool) {
	d := l.p.Data
	if l.i >= len(d) {
		return b, false
	}
	switch c := d[l.i]; {
	case c == '\\':
		s, ok := l.Str()
		if !ok {
			return b, false
		}
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"'), true
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return b, false
		}
		return l.appendContainer(b, c, depth+1)
	}
	b, end, ok := appendScalar(b, d, l.i)
	if ok {
		l.i = end
	}
	return b, ok
}

// appendContainer reads an array or object whose open bracket is at the
// reading position. An object's keys go on the Inner's key list while it
// is read (see newKey), and off again in either outcome.
func (l *Laid) appendContainer(b []byte, open byte, depth int) ([]byte, bool) {
	in := &l.p.in
	base := len(in.keys)
	b, ok := l.appendBody(b, open, base, depth)
	in.keys = in.keys[:base]
	in.wide.drop(base)
	return b, ok
}

func (l *Laid) appendBody(b []byte, open byte, base, depth int) ([]byte, bool) {
	end := open + 2 // ] and } follow [ and { by two
	b = append(b, open)
	l.i++
	if l.i < len(l.p.Data) && l.p.Data[l.i] == end {
		l.i++
		return append(b, end), true
	}
	for {
		if open == '{' {
			k, ok := l.Str()
			if !ok || !l.p.addKey(k, base) || !l.Lit(": ") {
				return b, false
			}
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, '"', ':')
		}
		var ok bool
		if b, ok = l.appendValue(b, depth); !ok {
			return b, false
		}
		switch {
		case l.Lit(", "):
			b = append(b, ',')
		case l.i < len(l.p.Data) && l.p.Data[l.i] == end:
			l.i++
			return append(b, end), true
		default:
			return b, false
		}
	}
}
