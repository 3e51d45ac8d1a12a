package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"

	"github.com/augmentdata/augment/internal/swar"
	"github.com/augmentdata/augment/jsontree"
)

// DefaultMaxRowBytes is the row limit of a new Scanner (see SetMaxRowBytes).
const DefaultMaxRowBytes = 16 << 20

// RowExcerptBytes is how much of a row longer than the limit a RowError
// keeps at most: the start of the row (no more than the limit), enough to
// recognise it.
const RowExcerptBytes = 64 << 10

// A Scanner splits a dump into raw rows without decoding them. The dump is
// a JSON array of objects or JSON Lines; the first non-space byte tells
// which ('[' for an array). It reads through a buffer that holds the
// current row and one read, and never more than the row limit plus one
// read.
//
// Only the framing is checked: strings, escapes and the nesting of {} and
// [] are tracked to find where each row ends; the row's content is Parse's
// business.
//
// Damage costs as little as the framing allows:
//
//   - JSON Lines: each line is its own frame. A line holding anything but
//     one object (a line cut short, two objects, text) is one row, returned
//     as it is when it does not start with '{' (Parse then rejects it), or
//     as a *RowError with reason bad_json when its object is broken; the
//     next line is read next. An object may span lines (pretty-printed
//     objects) as long as each line break falls where JSON allows one.
//   - JSON array: a broken element is skipped up to the next top-level
//     element when the separator between the elements read so far is
//     always the same, no longer than the row limit, and holds a line
//     break that no element's own lines repeat (json.dump with indent, one
//     element per line): such a separator cannot occur inside a string or
//     deeper in an element. The skipped text is one *RowError with reason
//     bad_framing. Without such a layout, or when the next element does
//     not start within the row limit after the damage, the scan stops with
//     a *ScanError: the rest of the dump is not read. What is skipped
//     depends on the bytes only, never on the read sizes.
//   - A row longer than the limit is one *RowError with reason
//     row_too_large, holding its first RowExcerptBytes; the scan goes on
//     after it without ever holding it whole.
type Scanner struct {
	r      io.Reader
	buf    []byte
	head   int   // start of the unconsumed bytes in buf
	end    int   // end of the valid bytes in buf
	base   int64 // input offset of buf[0]
	eof    bool  // r has no more data
	rerr   error // r's error, kept while the bytes read with it are framed
	mode   byte  // 0 before the first byte, '[' for an array, '{' for JSON Lines
	after  bool  // array: a row has been read, so "," or "]" comes next
	done   bool  // array: the closing "]" has been read
	index  int64 // index of the next row
	err    error // sticky error
	stack  []byte
	maxRow int

	// Line numbers: lines counts the '\n' in buf[:nl] and before buf.
	lines int64
	nl    int

	// The array layout learned from the elements read so far.
	sep       []byte   // the separator between elements, from after '}' to '{' exclusive
	ambiguous bool     // the separators differ or could occur inside an element
	braceInd  [][]byte // before sep is known: the indentations of lines of the first element that start with '{'

	excerpt []byte // the start of a row too large to keep

	quick     bool // cut rows at the learned separator (SetQuick)
	lastQuick bool // the row Next last returned was cut so
}

// SetQuick lets the Scanner cut an array whose layout is one element per
// line (a learned, unambiguous separator) at the line's end without reading
// the element's strings. Such a row (Quick reports it) is the one the full
// scan would give only when Framed holds for it: the caller must check
// that (a row jsontree parses as one object is framed) and read the dump
// again without SetQuick when it does not.
func (s *Scanner) SetQuick(on bool) { s.quick = on }

// Quick reports whether the row Next last returned was cut at the learned
// separator (see SetQuick).
func (s *Scanner) Quick() bool { return s.lastQuick }

// Framed reports whether the full scan, starting at an element's '{',
// frames exactly row: one object ending at row's last byte (the row limit
// aside, which the quick cut applies itself).
func Framed(row []byte) bool {
	if len(row) == 0 || row[0] != '{' {
		return false
	}
	s := &Scanner{buf: row, end: len(row), eof: true, mode: '[', maxRow: len(row)}
	o, err := s.object()
	return err == nil && o.broken == "" && !o.large && o.end == int64(len(row))
}

// A ScanError is damage the Scanner cannot skip: where (the row being read
// and the byte offset in the input from which nothing more is read) and
// what. It is sticky.
type ScanError struct {
	Row    int64 // 0-based index of the row being read
	Offset int64 // byte offset in the input; the input from here on is not read
	Msg    string
}

func (e *ScanError) Error() string {
	return fmt.Sprintf("formats: row %d at byte offset %d: %s", e.Row, e.Offset, e.Msg)
}

// A RowError is one row the Scanner could not frame, or one longer than the
// limit. The Scanner has skipped it (its index is used up) and reads on.
type RowError struct {
	Reason string // bad_json, bad_framing or row_too_large
	Row    int64  // 0-based index of the row
	Line   int64  // 1-based line where the row starts
	Offset int64  // byte offset of the row in the input
	Bytes  int64  // the row's length
	// Raw is the row's text, or its first RowExcerptBytes when it is too
	// large. It is valid until the next call of Next.
	Raw []byte
	Msg string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("line %d, byte offset %d, %d bytes: %s", e.Line, e.Offset, e.Bytes, e.Msg)
}

// RejectReason is the reason code the row is rejected under.
func (e *RowError) RejectReason() string { return e.Reason }

const scanBufSize = 1 << 20

// NewScanner returns a Scanner reading r with the default row limit.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{r: r, buf: make([]byte, scanBufSize), maxRow: DefaultMaxRowBytes}
}

// SetMaxRowBytes sets the row limit: a longer row is a RowError with reason
// row_too_large. n ≤ 0 keeps the default. Call it before the first Next.
func (s *Scanner) SetMaxRowBytes(n int) {
	if n > 0 {
		s.maxRow = n
	}
}

// Next returns the next row's bytes, valid until the following call, and
// its 0-based index. At the end of the input it returns io.EOF. A row that
// could not be framed gives a *RowError and the following call goes on
// with the next row. Damage that cannot be skipped gives a *ScanError, a
// failing reader its error; these are sticky: later calls return the same
// error.
func (s *Scanner) Next() (row []byte, index int64, err error) {
	if s.err != nil {
		return nil, s.index, s.err
	}
	s.lastQuick = false
	row, err = s.next()
	if err != nil {
		if re, ok := err.(*RowError); ok {
			s.index++
			return nil, re.Row, err
		}
		s.err = err
		return nil, s.index, err
	}
	s.index++
	return row, s.index - 1, nil
}

func (s *Scanner) fail(off int64, format string, args ...any) error {
	return &ScanError{Row: s.index, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// abs returns the input offset of buf[i].
func (s *Scanner) abs(i int) int64 { return s.base + int64(i) }

// idx returns the index in buf of input offset off.
func (s *Scanner) idx(off int64) int { return int(off - s.base) }

// lineAt returns the 1-based line of buf[i]; i must not be before the
// position of the previous call.
func (s *Scanner) lineAt(i int) int64 {
	s.lines += int64(bytes.Count(s.buf[s.nl:i], []byte{'\n'}))
	s.nl = i
	return s.lines + 1
}

// fill reads more input, first dropping the bytes before head (growing the
// buffer when the rest fills it). Callers keep positions as input offsets
// (abs) across fills, or adjust buffer indexes by the shift returned.
func (s *Scanner) fill() (shift int, err error) {
	if s.head > 0 {
		shift = s.head
		s.lines += int64(bytes.Count(s.buf[s.nl:s.head], []byte{'\n'}))
		s.nl = 0
		copy(s.buf, s.buf[s.head:s.end])
		s.end -= s.head
		s.base += int64(s.head)
		s.head = 0
	}
	if s.end == len(s.buf) {
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for range 100 {
		if rerr := s.rerr; rerr != nil {
			if d, ok := errors.AsType[damaged](rerr); ok && d.Damaged() {
				// A compressed dump cut short or corrupt: the rows
				// before stand, nothing after can be decoded.
				return shift, s.fail(s.abs(s.head), "%v after %d bytes of rows; nothing after that can be read", rerr, s.abs(s.end))
			}
			return shift, fmt.Errorf("formats: reading row %d: %w", s.index, rerr)
		}
		n, rerr := s.r.Read(s.buf[s.end:])
		s.end += n
		if rerr == io.EOF {
			s.eof = true
			return shift, nil
		}
		// An error comes back on the next fill, once the rows of the
		// bytes read with it are framed.
		s.rerr = rerr
		if n > 0 {
			return shift, nil
		}
	}
	return shift, fmt.Errorf("formats: reading row %d: %w", s.index, io.ErrNoProgress)
}

// damaged is an input error in the stored bytes themselves (a compressed
// dump cut short or corrupt: storage.DamagedError), which reading again
// cannot mend, unlike an error of the reading.
type damaged interface {
	error
	Damaged() bool
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// peek skips white space and returns the next byte; ok is false at the end
// of the input.
func (s *Scanner) peek() (c byte, ok bool, err error) {
	for {
		for s.head < s.end {
			if c := s.buf[s.head]; !isSpace(c) {
				return c, true, nil
			}
			s.head++
		}
		if s.eof {
			return 0, false, nil
		}
		if _, err := s.fill(); err != nil {
			return 0, false, err
		}
	}
}

// peekAt returns the first byte that is not white space at or after input
// offset from (which is not before head), and its offset, without consuming
// anything: the bytes from head on stay in the buffer unless the white
// space alone is longer than the row limit. ok is false at the end of the
// input.
func (s *Scanner) peekAt(from int64) (c byte, at int64, ok bool, err error) {
	p := s.idx(from)
	for {
		for p < s.end {
			if c := s.buf[p]; !isSpace(c) {
				return c, s.abs(p), true, nil
			}
			p++
		}
		if s.eof {
			return 0, s.abs(p), false, nil
		}
		if p-s.head > s.maxRow {
			s.head = p
		}
		shift, err := s.fill()
		if err != nil {
			return 0, 0, false, err
		}
		p -= shift
	}
}

func (s *Scanner) next() ([]byte, error) {
	if s.mode == 0 {
		if err := s.skipBOM(); err != nil {
			return nil, err
		}
		c, ok, err := s.peek()
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, io.EOF
		case c == '[':
			s.mode = '['
			s.head++
		default:
			s.mode = '{'
		}
	}
	if s.mode == '{' {
		return s.nextLine()
	}
	return s.nextElement()
}

// skipBOM skips a UTF-8 byte order mark. A UTF-16 or UTF-32 one stops the
// reading at byte 0 with a message that says so: read as UTF-8, such a dump
// is one unframeable row.
func (s *Scanner) skipBOM() error {
	for s.end-s.head < 4 && !s.eof {
		if _, err := s.fill(); err != nil {
			return err
		}
	}
	start := s.buf[s.head:s.end]
	if bytes.HasPrefix(start, []byte("\xEF\xBB\xBF")) {
		s.head += 3
		return nil
	}
	for _, bom := range []struct{ mark, name string }{
		{"\x00\x00\xFE\xFF", "UTF-32"}, {"\xFF\xFE\x00\x00", "UTF-32"}, {"\xFE\xFF", "UTF-16"}, {"\xFF\xFE", "UTF-16"},
	} {
		if bytes.HasPrefix(start, []byte(bom.mark)) {
			return s.fail(s.abs(s.head), "the dump is %s (it starts with a %s byte order mark); augment reads UTF-8: convert it first (iconv -f %s -t UTF-8)", bom.name, bom.name, bom.name)
		}
	}
	// Without a mark: a JSON text's first character in UTF-16 (or UTF-32)
	// is '[' or '{' beside a NUL byte, which UTF-8 JSON never holds.
	for _, head := range []string{"[\x00", "{\x00", "\x00[", "\x00{"} {
		if bytes.HasPrefix(start, []byte(head)) {
			return s.fail(s.abs(s.head), "the dump looks like UTF-16 or UTF-32 (a NUL byte beside its first %q); augment reads UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)", strings.Trim(head, "\x00"))
		}
	}
	return nil
}

// nextLine returns the row starting on the next non-blank line.
func (s *Scanner) nextLine() ([]byte, error) {
	c, ok, err := s.peek()
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, io.EOF
	}
	start := s.abs(s.head)
	line := s.lineAt(s.head)
	if c != '{' {
		// Not an object: the line is the row, and Parse says what it is.
		return s.lineRow(start, start, line)
	}
	o, err := s.object()
	if err != nil {
		return nil, err
	}
	switch {
	case o.large:
		return nil, s.skipLine(start, line)
	case o.broken != "" && o.firstNL >= 0:
		// The row is its first line; the following lines are read again.
		return nil, s.lineError(start, o.firstNL, line, o.broken)
	case o.broken != "":
		nl, large, err := s.lineEnd(start, o.at)
		if err != nil {
			return nil, err
		}
		if large {
			return nil, s.skipLine(start, line)
		}
		return nil, s.lineError(start, nl, line, o.broken)
	}
	return s.lineRow(start, o.end, line)
}

// lineRow returns the line starting at start as a row; the object it holds
// ends at end (or end is start). Text after the object makes the whole line
// the row (Parse rejects it).
func (s *Scanner) lineRow(start, end, line int64) ([]byte, error) {
	nl, large, err := s.lineEnd(start, end)
	if err != nil {
		return nil, err
	}
	if large {
		return nil, s.skipLine(start, line)
	}
	i, j := s.idx(start), s.idx(nl)
	s.head = min(j+1, s.end)
	if end > start && onlySpace(s.buf[s.idx(end):j]) {
		j = s.idx(end)
	}
	return bytes.TrimRight(s.buf[i:j], " \t\r"), nil
}

func onlySpace(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// lineEnd finds the end of the line holding offset from (the row started at
// start): the offset of its '\n', or of the end of the input. large reports
// a line longer than the row limit; the buffer then holds its start.
func (s *Scanner) lineEnd(start, from int64) (nl int64, large bool, err error) {
	for {
		i := s.idx(from)
		if k := bytes.IndexByte(s.buf[i:s.end], '\n'); k >= 0 {
			nl = from + int64(k)
			return nl, nl-start > int64(s.maxRow), nil
		}
		from = s.abs(s.end)
		if from-start > int64(s.maxRow) {
			return 0, true, nil
		}
		if s.eof {
			return from, false, nil
		}
		if _, err := s.fill(); err != nil {
			return 0, false, err
		}
	}
}

// lineError consumes the line from start to nl as a bad_json row.
func (s *Scanner) lineError(start, nl, line int64, why string) error {
	i, j := s.idx(start), s.idx(nl)
	s.head = min(j+1, s.end)
	raw := bytes.TrimRight(s.buf[i:j], " \t\r")
	return &RowError{Reason: "bad_json", Row: s.index, Line: line, Offset: start, Bytes: int64(len(raw)), Raw: raw,
		Msg: "the line is not one JSON object: " + why}
}

// skipLine consumes the line starting at start, which is longer than the
// row limit, keeping only its start.
func (s *Scanner) skipLine(start, line int64) error {
	i := s.idx(start)
	s.keepExcerpt(s.buf[i:s.end])
	s.head = i
	for {
		if k := bytes.IndexByte(s.buf[s.head:s.end], '\n'); k >= 0 {
			s.head += k
			break
		}
		s.head = s.end
		if s.eof {
			break
		}
		if _, err := s.fill(); err != nil {
			return err
		}
	}
	size := s.abs(s.head) - start
	if s.head < s.end {
		s.head++ // the '\n'
	}
	return &RowError{Reason: "row_too_large", Row: s.index, Line: line, Offset: start, Bytes: size, Raw: s.excerpt,
		Msg: fmt.Sprintf("the line is longer than max_row_bytes (%d); the first %d bytes are kept", s.maxRow, len(s.excerpt))}
}

func (s *Scanner) nextElement() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	gap := s.abs(s.head) // where the text after the previous element starts
	c, at, ok, err := s.peekAt(gap)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, s.fail(at, "the input ends before the array's closing ]")
	}
	if s.after {
		switch c {
		case ',':
			if c, at, ok, err = s.peekAt(at + 1); err != nil {
				return nil, err
			} else if !ok {
				return nil, s.fail(at, "the input ends after a comma, before the array's closing ]")
			}
			if c == ']' {
				return nil, s.fail(at, "trailing comma before the closing ]")
			}
		case ']':
			s.head = s.idx(at)
			return nil, s.close()
		default:
			return nil, s.resync(at, fmt.Sprintf("expected , or ] after row %d, found %q", s.index-1, c))
		}
	} else if c == ']' {
		s.head = s.idx(at)
		return nil, s.close()
	}
	if c != '{' {
		return nil, s.resync(at, fmt.Sprintf("an array element must be an object, found %q", c))
	}
	if s.after {
		s.learnSep(gap, at)
	}
	s.head = s.idx(at)
	s.after = true
	if row := s.quickRow(); row != nil {
		return row, nil
	}
	start := s.abs(s.head)
	line := s.lineAt(s.head)
	o, err := s.object()
	if err != nil {
		return nil, err
	}
	switch {
	case o.broken != "" && o.large:
		return nil, s.fail(start, "%s, in a row longer than max_row_bytes (%d)", o.broken, s.maxRow)
	case o.broken != "":
		s.head = s.idx(start)
		return nil, s.resync(start, o.broken)
	case o.large:
		s.head = s.idx(o.end)
		return nil, &RowError{Reason: "row_too_large", Row: s.index, Line: line, Offset: start, Bytes: o.end - start,
			Raw: s.excerpt, Msg: fmt.Sprintf("the row is longer than max_row_bytes (%d); the first %d bytes are kept", s.maxRow, len(s.excerpt))}
	}
	row := s.buf[s.idx(start):s.idx(o.end)]
	s.head = s.idx(o.end)
	s.learnRow(row)
	return row, nil
}

// quickRow returns the element starting at head cut at the end of its
// line (see SetQuick), or nil when the layout or the line does not allow it.
func (s *Scanner) quickRow() []byte {
	if !s.quick || s.sep == nil || s.ambiguous {
		return nil
	}
	pre := bytes.IndexByte(s.sep, '\n') // the separator's bytes before its line break
	nl := bytes.IndexByte(s.buf[s.head:s.end], '\n')
	if nl < 0 {
		return nil
	}
	end := s.head + nl - pre
	if end-s.head < 2 || end-s.head > s.maxRow || s.buf[end-1] != '}' || !bytes.Equal(s.buf[end:s.head+nl], s.sep[:pre]) {
		return nil
	}
	row := s.buf[s.head:end]
	s.head = end
	s.lastQuick = true
	return row
}

// learnSep records the separator between the previous element, which
// ends at input offset gap, and the next, which starts at at.
func (s *Scanner) learnSep(gap, at int64) {
	if s.ambiguous {
		return
	}
	// A separator longer than the row limit is not a layout; peekAt may
	// have dropped it, depending on the read sizes, so its length decides.
	if at-gap > int64(s.maxRow) {
		s.ambiguous = true
		return
	}
	sep := s.buf[s.idx(gap):s.idx(at)]
	switch {
	case s.sep == nil:
		// Only a separator with a line break cannot occur inside a string.
		if len(sep) > 64 || bytes.IndexByte(sep, '\n') < 0 {
			s.ambiguous = true
			return
		}
		ind := sep[bytes.LastIndexByte(sep, '\n')+1:]
		for _, b := range s.braceInd {
			if bytes.Equal(b, ind) {
				s.ambiguous = true
				return
			}
		}
		s.sep, s.braceInd = bytes.Clone(sep), nil
	case !bytes.Equal(sep, s.sep):
		s.ambiguous = true
	}
}

// learnRow checks that no line of an element looks like the start of the
// next element: the separator's indentation followed by '{'. Before the
// separator is known, it collects the indentations of such lines.
func (s *Scanner) learnRow(row []byte) {
	if s.ambiguous {
		return
	}
	var ind []byte
	if s.sep != nil {
		ind = s.sep[bytes.LastIndexByte(s.sep, '\n')+1:]
	}
	for i := bytes.IndexByte(row, '\n'); i >= 0; {
		rest := row[i+1:]
		if s.sep != nil {
			if len(rest) > len(ind) && rest[len(ind)] == '{' && bytes.HasPrefix(rest, ind) {
				s.ambiguous = true
				return
			}
		} else if k := bytes.IndexFunc(rest, func(r rune) bool { return r != ' ' && r != '\t' }); k >= 0 && rest[k] == '{' {
			if len(s.braceInd) == 8 {
				s.ambiguous = true
				return
			}
			if !slices.ContainsFunc(s.braceInd, func(b []byte) bool { return bytes.Equal(b, rest[:k]) }) {
				s.braceInd = append(s.braceInd, bytes.Clone(rest[:k]))
			}
		}
		k := bytes.IndexByte(rest, '\n')
		if k < 0 {
			break
		}
		i += 1 + k
	}
}

// resync skips the broken text starting at offset from (not before head)
// up to the next element, found by the learned separator, and returns it
// as a bad_framing RowError; without a usable layout, or without a next
// element within the row limit, it gives a ScanError.
func (s *Scanner) resync(from int64, why string) error {
	from = max(from, s.abs(s.head))
	if s.sep == nil || s.ambiguous {
		return s.fail(from, "%s; the rest of the array is not read (its layout gives no safe place to resume)", why)
	}
	s.head = s.idx(from)
	line := s.lineAt(s.head)
	// The next element must start within the row limit after from: the
	// outcome depends on the bytes only, never on how much a read brought
	// (a match further on is not looked for, even when already buffered).
	pat := append(bytes.Clone(s.sep), '{')
	last := from + int64(s.maxRow) // the last offset the separator may start at
	tooFar := func() error {
		return s.fail(from, "%s; no next element within max_row_bytes (%d), so the rest of the array is not read", why, s.maxRow)
	}
	at := from + 1
	for {
		i := s.idx(at)
		if k := bytes.Index(s.buf[i:s.end], pat); k >= 0 {
			at += int64(k)
			if at > last {
				return tooFar()
			}
			break
		}
		at = max(at, s.abs(s.end)-int64(len(pat)-1))
		if at > last {
			return tooFar()
		}
		if s.eof {
			return s.fail(from, "%s; no element follows, so the rest of the array is not read", why)
		}
		if _, err := s.fill(); err != nil {
			return err
		}
	}
	raw := bytes.TrimSpace(s.buf[s.idx(from):s.idx(at)])
	next := at + int64(len(s.sep))
	s.head = s.idx(next)
	s.after = false
	return &RowError{Reason: "bad_framing", Row: s.index, Line: line, Offset: from, Bytes: at - from, Raw: raw,
		Msg: fmt.Sprintf("%s; reading resumed at the next element, byte offset %d", why, next)}
}

// close consumes the array's "]" and checks that only white space follows.
func (s *Scanner) close() error {
	s.head++
	s.done = true
	c, ok, err := s.peek()
	if err != nil {
		return err
	}
	if ok {
		return s.fail(s.abs(s.head), "unexpected %q after the array's closing ]", c)
	}
	return io.EOF
}

// structural marks the bytes object() stops at outside strings;
// structuralLines adds the line break, for JSON Lines.
var structural, structuralLines = func() (t, l [256]bool) {
	for _, c := range `"{}[]` {
		t[c] = true
	}
	l = t
	l['\n'] = true
	return t, l
}()

// An objScan is what object() found, as input offsets.
type objScan struct {
	end     int64  // the object is [start, end) when broken is ""
	broken  string // why the object is not well framed
	at      int64  // where that was found
	firstNL int64  // JSON Lines: the first line break after the start, or -1
	large   bool   // the row is longer than the row limit (see object)
}

// object scans the object starting at buf[head]. head stays at its start
// unless the object is too large: then (arrays only) the scanned bytes are
// dropped as it goes, its start kept in s.excerpt, and only the nesting is
// tracked.
//
// Whether a row is too large depends on its bytes only, never on the read
// sizes: an object is large when it ends, or breaks, more than the limit
// after its start. For JSON Lines the row is then its first line when that
// ends within the limit (the object spans lines: broken), else the line
// (large); object returns as soon as that is known.
func (s *Scanner) object() (objScan, error) {
	o := objScan{firstNL: -1}
	start, p := s.head, s.head
	first := s.abs(start)
	carry := 0 // large, in a string: parity of the backslashes just before start
	s.stack = s.stack[:0]
	inString := false
	lines := s.mode == '{'
	st := &structural
	if lines {
		st = &structuralLines
	}
	for {
		if p >= s.end {
			if s.eof {
				what := "inside the row"
				if inString {
					what = "inside a string"
				}
				return s.brk(&o, first, start, fmt.Sprintf("the input ends %s (truncated row?)", what), s.abs(p), s.abs(p))
			}
			if s.over(&o, first, start, s.abs(p)) {
				return o, nil
			}
			if o.large {
				// Drop what was scanned, keeping the escape state.
				if inString {
					carry = backslashes(s.buf[start:p], carry) % 2
				}
				s.head, start = p, p
			}
			shift, err := s.fill()
			if err != nil {
				return o, err
			}
			start -= shift
			p -= shift
			continue
		}
		buf := s.buf[:s.end]
		if inString {
			// Up to the closing quote, passing escaped ones here rather
			// than in the outer loop (strings with escaped JSON inside
			// have many).
			from, to := p, len(buf) // the string's bytes read here
			if q := closingQuote(buf, p, start, carry); q < len(buf) {
				inString, to, p = false, q, q+1
			}
			if lines {
				if nl := bytes.IndexByte(buf[from:to], '\n'); nl >= 0 {
					at := s.abs(from + nl)
					if o.firstNL < 0 {
						o.firstNL = at
					}
					return s.brk(&o, first, start, "the line ends inside a string (truncated line?)", at, at)
				}
			}
			if inString {
				p = s.end
			}
			continue
		}
		for p < len(buf) && !st[buf[p]] {
			p++
		}
		if p >= len(buf) {
			continue
		}
		switch c := buf[p]; c {
		case '"':
			inString = true
		case '\n':
			// JSON Lines: an object may go on on the next line only where
			// JSON allows the break.
			at := s.abs(p)
			if o.firstNL < 0 {
				o.firstNL = at
			}
			k := p - 1
			for isSpace(buf[k]) {
				k--
			}
			prev := buf[k]
			for {
				for p < s.end && isSpace(s.buf[p]) {
					p++
				}
				if p < s.end || s.eof {
					break
				}
				if s.over(&o, first, start, s.abs(p)) {
					return o, nil
				}
				shift, err := s.fill()
				if err != nil {
					return o, err
				}
				start -= shift
				p -= shift
			}
			if p < s.end && !continues(prev, s.stack[len(s.stack)-1], s.buf[p]) {
				return s.brk(&o, first, start, "the line ends before its object does (truncated line?)", at, s.abs(p))
			}
			continue
		case '{', '[':
			if len(s.stack) >= jsontree.MaxDepth {
				return s.brk(&o, first, start, fmt.Sprintf("nesting deeper than %d", jsontree.MaxDepth), s.abs(p), s.abs(p))
			}
			s.stack = append(s.stack, c)
		default: // '}' or ']'
			open := byte('{')
			if c == ']' {
				open = '['
			}
			if n := len(s.stack); n == 0 || s.stack[n-1] != open {
				return s.brk(&o, first, start, fmt.Sprintf("unbalanced %q", c), s.abs(p), s.abs(p))
			}
			s.stack = s.stack[:len(s.stack)-1]
			if len(s.stack) == 0 {
				o.end = s.abs(p + 1)
				s.over(&o, first, start, o.end)
				return o, nil
			}
		}
		p++
	}
}

// keepExcerpt keeps the start of a row too large to hold.
func (s *Scanner) keepExcerpt(row []byte) {
	s.excerpt = append(s.excerpt[:0], row[:min(len(row), RowExcerptBytes, s.maxRow)]...)
}

// over applies the row limit to the object o starting at input offset
// first (buf[start] is the oldest byte still held) once the byte before far
// has been read; it reports whether object must return o.
func (s *Scanner) over(o *objScan, first int64, start int, far int64) bool {
	if o.large || far-first <= int64(s.maxRow) {
		return false
	}
	if s.mode == '{' {
		if o.firstNL >= 0 && o.firstNL-first <= int64(s.maxRow) {
			o.broken, o.at = fmt.Sprintf("the row spans lines and is longer than max_row_bytes (%d)", s.maxRow), o.firstNL
		} else {
			o.large = true
		}
		return true
	}
	o.large = true
	s.keepExcerpt(s.buf[start:s.end])
	return false
}

// brk ends object's scan of o with the damage why found at input offset
// at, the byte at far having been read.
func (s *Scanner) brk(o *objScan, first int64, start int, why string, at, far int64) (objScan, error) {
	if s.over(o, first, start, far) && s.mode == '{' {
		return *o, nil
	}
	o.broken, o.at = why, at
	return *o, nil
}

// closingQuote returns the index of the quote that closes the string
// whose bytes from b[i] on are being scanned, or len(b) when b ends first;
// start and carry are as for backslashes (a quote is escaped when an odd
// number of backslashes precedes it). The quotes are found a word at a
// time, every quote of a word from one load and one exact mask (xlam's
// strings hold a \" every few bytes, where a search per quote cost more
// than the test); after two words without one, IndexByte jumps to the next
// quote (long text without quotes).
func closingQuote(b []byte, i, start, carry int) int {
	closes := func(q int) bool {
		switch {
		case q > start && b[q-1] != '\\':
			return true
		case q > start+1 && b[q-2] != '\\': // \", the common case
			return false
		}
		return backslashes(b[start:q], carry)%2 == 0
	}
	for i+8 <= len(b) {
		m := quoteMask(binary.LittleEndian.Uint64(b[i:]))
		if m == 0 {
			if i+16 > len(b) {
				i += 8
				break
			}
			if m = quoteMask(binary.LittleEndian.Uint64(b[i+8:])); m == 0 {
				k := bytes.IndexByte(b[i+16:], '"')
				if k < 0 {
					return len(b)
				}
				q := i + 16 + k
				if closes(q) {
					return q
				}
				i = q + 1
				continue
			}
			i += 8
		}
		for ; m != 0; m &= m - 1 {
			if q := i + bits.TrailingZeros64(m)>>3; closes(q) {
				return q
			}
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if b[i] == '"' && closes(i) {
			return i
		}
	}
	return len(b)
}

// quoteMask flags the '"' bytes of w, each by its byte's high bit, exactly
// (no borrow crosses a byte: the low seven bits of each byte are added
// apart from its high bit).
func quoteMask(w uint64) uint64 {
	const low7 = 0x7F7F7F7F7F7F7F7F
	x := w ^ swar.Ones*'"'
	return ^((x&low7 + low7) | x | low7)
}

// backslashes counts the backslashes that end b; when they fill b, the
// count carried from before b is added.
func backslashes(b []byte, carry int) int {
	n := 0
	for k := len(b) - 1; k >= 0 && b[k] == '\\'; k-- {
		n++
	}
	if n == len(b) {
		n += carry
	}
	return n
}

// continues reports whether JSON allows a line break between prev, the last
// byte before it, and next, the first byte after it, inside a container
// opened by top.
func continues(prev, top, next byte) bool {
	value := next == '{' || next == '[' || next == '"' || next == '-' || (next >= '0' && next <= '9') ||
		next == 't' || next == 'f' || next == 'n'
	switch prev {
	case '{':
		return next == '"' || next == '}'
	case '[':
		return value || next == ']'
	case ',':
		if top == '{' {
			return next == '"'
		}
		return value
	case ':':
		return value
	}
	return next == ',' || next == '}' || next == ']' || next == ':'
}
