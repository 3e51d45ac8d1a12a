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
// escape per quote, not a copy call. dst grows only when the escapes
// outrun its room: room for the text as it is, two quotes and no escape
// is enough for the stores, which never reach past that.
func AppendString(dst []byte, s string) []byte {
	start := len(dst)
	buf := slices.Grow(dst, len(s)+2)
	buf = buf[:cap(buf)]
	j := start
	buf[j] = '"'
	j++
	for i := 0; i < len(s); {
		// Room for a word and an escape; the stores below write into room
		// the text as it is would fill anyway (j+8 never passes where the
		// unescaped rest ends), so this grows only after escapes.
		if len(buf)-j < 10 {
			buf = grow(buf, j, len(s)-i)
		}
		var c byte
		if i+8 <= len(s) {
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
			k := bits.TrailingZeros64(m) / 8
			i += k
			j += k
			c = s[i]
		} else if c = s[i]; c < utf8.RuneSelf && jsonPlain[c] {
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
			if len(buf)-j < i-run+10 { // escapes before the run used its room
				buf = grow(buf, j, len(s)-run)
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
