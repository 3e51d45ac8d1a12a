package formats

import (
	"bytes"
	"fmt"
	"io"
)

// MaxRowBytes bounds one row. A longer row almost always means damaged
// framing (an unclosed string swallowing the rest of the file), so the
// Scanner reports it instead of buffering the whole input.
const MaxRowBytes = 256 << 20

// A Scanner splits a dump into raw rows without decoding them. The dump is
// a JSON array of objects or JSON Lines (one object per line; blank lines
// are skipped); the first non-space byte tells which. It reads through a
// fixed buffer and never holds more than the current row and one read.
//
// Only the framing is checked: strings, escapes and the nesting of {} and
// [] are tracked to find where each row ends; the row's content is Parse's
// business.
type Scanner struct {
	r     io.Reader
	buf   []byte
	head  int   // start of the unconsumed bytes in buf
	end   int   // end of the valid bytes in buf
	base  int64 // input offset of buf[0]
	eof   bool  // r has no more data
	mode  byte  // 0 before the first byte, '[' for an array, '{' for JSON Lines
	after bool  // array: a row has been read, so "," or "]" comes next
	eol   bool  // lines: the rest of the previous row's line must be blank
	done  bool  // array: the closing "]" has been read
	index int64 // index of the next row
	err   error // sticky error
	stack []byte
}

// A ScanError is damaged framing: where (the row being read and the byte
// offset in the input) and what.
type ScanError struct {
	Row    int64 // 0-based index of the row being read
	Offset int64 // byte offset in the input
	Msg    string
}

func (e *ScanError) Error() string {
	return fmt.Sprintf("formats: row %d at byte offset %d: %s", e.Row, e.Offset, e.Msg)
}

const scanBufSize = 1 << 20

// NewScanner returns a Scanner reading r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{r: r, buf: make([]byte, scanBufSize)}
}

// Next returns the next row's bytes, valid until the following call, and
// its 0-based index. At the end of the input it returns io.EOF; damaged
// framing gives a *ScanError, a failing reader its error. Errors are
// sticky: later calls return the same error.
func (s *Scanner) Next() (row []byte, index int64, err error) {
	if s.err != nil {
		return nil, s.index, s.err
	}
	row, err = s.next()
	if err != nil {
		s.err = err
		return nil, s.index, err
	}
	s.index++
	return row, s.index - 1, nil
}

func (s *Scanner) fail(at int, format string, args ...any) error {
	return &ScanError{Row: s.index, Offset: s.base + int64(at), Msg: fmt.Sprintf(format, args...)}
}

// fill reads more input, first moving the unconsumed bytes to the front of
// the buffer (growing it when they fill it). It returns how far the bytes
// moved, so callers can adjust their positions.
func (s *Scanner) fill() (shift int, err error) {
	if s.head > 0 {
		shift = s.head
		copy(s.buf, s.buf[s.head:s.end])
		s.end -= s.head
		s.base += int64(s.head)
		s.head = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= MaxRowBytes {
			return shift, s.fail(0, "row longer than %d bytes (damaged framing?)", MaxRowBytes)
		}
		nb := make([]byte, min(2*len(s.buf), MaxRowBytes))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for range 100 {
		n, rerr := s.r.Read(s.buf[s.end:])
		s.end += n
		if rerr == io.EOF {
			s.eof = true
			return shift, nil
		}
		if rerr != nil {
			return shift, fmt.Errorf("formats: reading row %d: %w", s.index, rerr)
		}
		if n > 0 {
			return shift, nil
		}
	}
	return shift, fmt.Errorf("formats: reading row %d: %w", s.index, io.ErrNoProgress)
}

// peek skips white space and returns the next byte; ok is false at the end
// of the input.
func (s *Scanner) peek() (c byte, ok bool, err error) {
	for {
		for s.head < s.end {
			switch c := s.buf[s.head]; c {
			case ' ', '\t', '\n', '\r':
				s.head++
			default:
				return c, true, nil
			}
		}
		if s.eof {
			return 0, false, nil
		}
		if _, err := s.fill(); err != nil {
			return 0, false, err
		}
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
		case c == '{':
			s.mode = '{'
		default:
			return nil, s.fail(s.head, "the input is neither a JSON array nor JSON Lines: it starts with %q", c)
		}
	}
	if s.mode == '{' {
		return s.nextLine()
	}
	return s.nextElement()
}

func (s *Scanner) skipBOM() error {
	for s.end-s.head < 3 && !s.eof {
		if _, err := s.fill(); err != nil {
			return err
		}
	}
	if bytes.HasPrefix(s.buf[s.head:s.end], []byte("\xEF\xBB\xBF")) {
		s.head += 3
	}
	return nil
}

func (s *Scanner) nextLine() ([]byte, error) {
	for s.eol {
		if s.head >= s.end {
			if s.eof {
				break
			}
			if _, err := s.fill(); err != nil {
				return nil, err
			}
			continue
		}
		switch c := s.buf[s.head]; c {
		case ' ', '\t', '\r':
			s.head++
		case '\n':
			s.head++
			s.eol = false
		default:
			return nil, s.fail(s.head, "unexpected %q after row %d on the same line", c, s.index-1)
		}
	}
	s.eol = false
	c, ok, err := s.peek()
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, io.EOF
	case c != '{':
		return nil, s.fail(s.head, "a JSON Lines row must be an object, found %q", c)
	}
	row, err := s.object()
	s.eol = true
	return row, err
}

func (s *Scanner) nextElement() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	c, ok, err := s.peek()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, s.fail(s.head, "the input ends before the array's closing ]")
	}
	if s.after {
		switch c {
		case ',':
			s.head++
			if c, ok, err = s.peek(); err != nil {
				return nil, err
			} else if !ok {
				return nil, s.fail(s.head, "the input ends after a comma, before the array's closing ]")
			}
			if c == ']' {
				return nil, s.fail(s.head, "trailing comma before the closing ]")
			}
		case ']':
			return nil, s.close()
		default:
			return nil, s.fail(s.head, "expected , or ] after row %d, found %q", s.index-1, c)
		}
	} else if c == ']' {
		return nil, s.close()
	}
	if c != '{' {
		return nil, s.fail(s.head, "an array element must be an object, found %q", c)
	}
	s.after = true
	return s.object()
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
		return s.fail(s.head, "unexpected %q after the array's closing ]", c)
	}
	return io.EOF
}

// structural marks the bytes object() stops at outside strings.
var structural = func() (t [256]bool) {
	for _, c := range `"{}[]` {
		t[c] = true
	}
	return t
}()

// object returns the object starting at buf[head] and consumes it.
func (s *Scanner) object() ([]byte, error) {
	start, p := s.head, s.head
	s.stack = s.stack[:0]
	inString := false
	lines := s.mode == '{'
	for {
		if p >= s.end {
			if s.eof {
				what := "inside the row"
				if inString {
					what = "inside a string"
				}
				return nil, s.fail(start, "the input ends %s (truncated row?)", what)
			}
			shift, err := s.fill()
			if err != nil {
				return nil, err
			}
			start -= shift
			p -= shift
			continue
		}
		buf := s.buf[:s.end]
		if inString {
			q := bytes.IndexByte(buf[p:], '"')
			seg := buf[p:]
			if q >= 0 {
				seg = buf[p : p+q]
			}
			if lines {
				if nl := bytes.IndexByte(seg, '\n'); nl >= 0 {
					return nil, s.fail(p+nl, "the line ends inside a string (truncated row?)")
				}
			}
			if q < 0 {
				p = s.end
				continue
			}
			q += p
			bs := 0
			for k := q - 1; buf[k] == '\\'; k-- {
				bs++
			}
			p = q + 1
			inString = bs%2 == 1
			continue
		}
		for p < len(buf) && !structural[buf[p]] {
			p++
		}
		if p >= len(buf) {
			continue
		}
		c := buf[p]
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if len(s.stack) >= maxDepth {
				return nil, s.fail(p, "nesting deeper than %d", maxDepth)
			}
			s.stack = append(s.stack, c)
		default: // '}' or ']'
			open := byte('{')
			if c == ']' {
				open = '['
			}
			if n := len(s.stack); n == 0 || s.stack[n-1] != open {
				return nil, s.fail(p, "unbalanced %q", c)
			}
			s.stack = s.stack[:len(s.stack)-1]
			if len(s.stack) == 0 {
				s.head = p + 1
				return buf[start : p+1], nil
			}
		}
		p++
	}
}
