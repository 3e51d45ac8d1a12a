// Package jsonout encodes JSON the way augment writes it everywhere (prompts,
// outputs, cache keys, rejects): without HTML escaping, since tool
// descriptions are full of <, > and &; json.RawMessage values formatted like
// the rest; no trailing newline. Changing it changes bytes of every stage.
package jsonout

import (
	"bytes"
	"encoding/json"
	"math/bits"
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
func AppendString(dst []byte, s string) []byte {
	start := len(dst)
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time, as one 64-bit word (the compiler loads them
		// at once), up to the first that is not plain ASCII: the lowest byte
		// of m with its high bit set is the first control character, '"',
		// '\\' or byte of a non-ASCII character (the bits above it may be
		// wrong, as a borrow runs upward).
		if i+8 <= len(s) {
			w := swar.Load(s, i)
			m := swar.StringSpecial(w) | w&swar.Tops
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			// Characters outside ASCII while they last, each checked as
			// UTF-8: the three-byte ones (most CJK) that are not U+2028 or
			// U+2029 and the two-byte ones directly, the rest decoded.
			for i < len(s) && s[i] >= utf8.RuneSelf {
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
					return append(dst[:start], q...)
				}
				i += n
			}
			continue
		}
		if jsonPlain[c] {
			i++
			continue
		}
		var esc byte
		switch c {
		case '"':
			esc = '"'
		case '\\':
			esc = '\\'
		case '\n':
			esc = 'n'
		case '\r':
			esc = 'r'
		case '\t':
			esc = 't'
		}
		if esc == 0 { // another control character
			q, _ := Marshal(s)
			return append(dst[:start], q...)
		}
		dst = append(dst, s[last:i]...)
		dst = append(dst, '\\', esc)
		i++
		last = i
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

// jsonPlain marks the ASCII bytes AppendString copies as they are: all
// but '"', '\\' and control characters.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
