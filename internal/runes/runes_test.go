package runes

import (
	"testing"
	"unicode/utf8"
)

// TestAt: every sequence led by a byte that is not ASCII, with the
// bytes after it cut short or not, decodes as utf8.DecodeRuneInString
// decodes it.
func TestAt(t *testing.T) {
	for lead := 0x80; lead <= 0xFF; lead++ {
		for c1 := range 256 {
			for c2 := range 256 {
				b := string([]byte{byte(lead), byte(c1), byte(c2)})
				for _, s := range []string{b, b[:2], "x" + b, b + "\x80"} {
					i := len(s) - len(b)
					if i < 0 || s[i] != byte(lead) {
						i = 0
					}
					r, n := At(s, i)
					wr, wn := utf8.DecodeRuneInString(s[i:])
					if r != wr || n != wn {
						t.Fatalf("%q at %d: %U %d, want %U %d", s, i, r, n, wr, wn)
					}
				}
			}
		}
	}
}
