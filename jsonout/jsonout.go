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
// and calls.
func AppendString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		q, _ := Marshal(s)
		return append(dst, q...)
	}
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
			if w&swar.Tops == swar.Tops { // eight bytes of non-ASCII characters
				if e := w ^ swar.Ones*0xE2; (e-swar.Ones)&^e&swar.Tops == 0 { // none is 0xE2
					i += 8
					continue
				}
			}
			m := swar.StringSpecial(w) | w&swar.Tops
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := s[i]
		if jsonPlain[c] {
			i++
			for i < len(s) && s[i] >= utf8.RuneSelf && s[i] != 0xE2 { // the rest of a non-ASCII character or run
				i++
			}
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
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
				break
			}
			i++
			continue
		}
		if esc == 0 { // another control character, U+2028 or U+2029
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

// jsonPlain marks the bytes of valid UTF-8 text that AppendString
// copies as they are: all but '"', '\\', control characters and 0xE2 (the
// lead byte of U+2028 and U+2029, which encoding/json escapes).
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\' && c != 0xE2
	}
	return t
}()
