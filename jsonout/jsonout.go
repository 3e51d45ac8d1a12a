// Package jsonout encodes JSON the way augment writes it everywhere (prompts,
// outputs, cache keys, rejects): without HTML escaping, since tool
// descriptions are full of <, > and &; json.RawMessage values formatted like
// the rest; no trailing newline. Changing it changes bytes of every stage.
package jsonout

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/augmentdata/augment/internal/swar"
)

// Marshal returns v as compact JSON.
func Marshal(v any) ([]byte, error) { return MarshalIndent(v, "") }

// MarshalIndent returns v as JSON indented by indent per level, or compact
// when indent is "".
func MarshalIndent(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// AppendString appends s as a JSON string exactly as Marshal writes it
// (encoding/json without HTML escaping); the common cases are written
// directly, rare ones (control characters other than \n \r \t,
// U+2028/U+2029, invalid UTF-8) through Marshal. The export writes every
// string of its samples with it, and token counts the strings of tools
// and calls. The text is validated as UTF-8 in the same pass that copies
// it (FuzzAppendString holds the result to Marshal's).
//
// Text is copied eight bytes at a time: each word is stored whole and the
// output moves on to its first byte that needs care, so text dense in
// quotes (JSON inside strings: calls, results) costs a store and an
// escape per quote, not a copy call. Room is checked once per byte that
// needs care, not per word: dst holds, past the output, room for the rest
// of the text as it is and one byte more, which the stores of a run of
// plain words never pass; it grows only when escapes have used that up.
// Characters outside ASCII are checked as UTF-8 four bytes at a time.
func AppendString(dst []byte, s string) []byte {
	start := len(dst)
	buf := slices.Grow(dst, len(s)+2)
	buf = buf[:cap(buf)]
	j := start
	buf[j] = '"'
	j++
text:
	for i := 0; i < len(s); {
		if len(buf)-j <= len(s)-i {
			buf = grow(buf, j, len(s)-i)
		}
		// Plain words while they last; a store never reaches past where
		// the rest of the text as it is ends.
		for i+8 <= len(s) {
			// Lowest byte of m with its high bit set: the first control
			// character, '"', '\\' or byte of a non-ASCII character (the
			// bits above it may be wrong, as a borrow runs upward).
			w := swar.Load(s, i)
			binary.LittleEndian.PutUint64(buf[j:j+8], w)
			m := swar.StringSpecial(w) | w&swar.Tops
			if m == 0 {
				i += 8
				j += 8
				continue
			}
			if w&swar.Tops == 0 && m&^quotes(w) == 0 && len(buf)-j >= 24 {
				// Only quotes and backslashes need care: each gets its
				// backslash, the rest of the word stored after it (the
				// stores reach at most 24 bytes past j).
				n := 0 // backslashes written
				for e := quotes(w); e != 0; e &= e - 1 {
					p := bits.TrailingZeros64(e) / 8
					buf[j+p+n] = '\\'
					n++
					binary.LittleEndian.PutUint64(buf[j+p+n:j+p+n+8], w>>(8*p))
				}
				i += 8
				j += 8 + n
				continue text
			}
			k := bits.TrailingZeros64(m) / 8
			i += k
			j += k
			break
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf && jsonPlain[c] { // the last bytes, under a word
			buf[j] = c
			i++
			j++
			continue
		}
		if c >= utf8.RuneSelf {
			// Characters outside ASCII while they last, each checked as
			// UTF-8: the three-byte ones (most CJK) that are not U+2028 or
			// U+2029 and the two-byte ones directly, the rest decoded;
			// then copied as they are.
			run := i
			for i < len(s) && s[i] >= utf8.RuneSelf {
				if i+4 <= len(s) && cjk3(swar.Load4(s, i)) {
					i += 3
					continue
				}
				c := s[i]
				if c >= 0xE1 && c <= 0xEF && c != 0xED && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 &&
					(c != 0xE2 || s[i+1] != 0x80 || s[i+2]&^1 != 0xA8) {
					i += 3
					continue
				}
				if c >= 0xC2 && c <= 0xDF && i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
					i += 2
					continue
				}
				r, n := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' { // invalid UTF-8, U+2028 or U+2029
					q, _ := Marshal(s)
					return append(buf[:start], q...)
				}
				i += n
			}
			j += copy(buf[j:], s[run:i])
			continue
		}
		esc := jsonEscape[c]
		if esc == 0 { // another control character
			q, _ := Marshal(s)
			return append(buf[:start], q...)
		}
		buf[j] = '\\'
		buf[j+1] = esc
		i++
		j += 2
	}
	if len(buf)-j < 1 {
		buf = grow(buf, j, 0)
	}
	buf[j] = '"'
	return buf[:j+1]
}

// quotes flags the bytes of w that are '"' or '\\', exactly: each flag
// is a byte's high bit, and no other byte is flagged.
func quotes(w uint64) uint64 {
	return zeroBytes(w^swar.Ones*'"') | zeroBytes(w^swar.Ones*'\\')
}

// zeroBytes flags the zero bytes of x by their high bits, exactly (no
// borrow crosses a byte: the low seven bits of each byte are added apart).
func zeroBytes(x uint64) uint64 {
	const low7 = 0x7F7F7F7F7F7F7F7F
	return ^((x&low7 + low7) | x | low7)
}

// cjk3 reports whether the low three bytes of x (little-endian) are a
// three-byte UTF-8 character AppendString copies as it is without
// decoding: a lead byte E1–EC or EE–EF (no overlong forms, no surrogates)
// and two continuation bytes, and not U+2028 or U+2029 (E2 80 A8/A9).
func cjk3(x uint32) bool {
	return lead3[byte(x)] && x&0xC0C000 == 0x808000 && x&0xFEFFFF != 0xA880E2
}

// lead3 marks the lead bytes cjk3 takes.
var lead3 = func() (t [256]bool) {
	for c := 0xE1; c <= 0xEF; c++ {
		t[c] = c != 0xED
	}
	return t
}()

// grow returns buf, whose first j bytes are written, with room after them
// for rest more bytes of text, its closing quote and a word and an escape
// more, and an eighth of rest for escapes to come.
func grow(buf []byte, j, rest int) []byte {
	buf = slices.Grow(buf[:j], rest+rest/8+11)
	return buf[:cap(buf)]
}

// jsonEscape is the letter after the backslash of the ASCII bytes
// AppendString escapes as two bytes; 0 for the rest.
var jsonEscape = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\n': 'n', '\r': 'r', '\t': 't'}

// jsonPlain marks the ASCII bytes AppendString copies as they are: all
// but '"', '\\' and control characters.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
