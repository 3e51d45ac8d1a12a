package swar

import (
	"math/bits"
	"strings"
	"testing"
)

// TestStringSpecial checks the first flagged byte against a byte loop for
// every byte value at every position of a word of plain filler, and with a
// second special byte after it (where borrows could add false flags).
func TestStringSpecial(t *testing.T) {
	special := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	for _, fill := range []byte{'a', 0xE4, 0x7F, 0x20} {
		for pos := range 8 {
			for c := range 256 {
				for _, after := range []byte{fill, 0, '"'} {
					b := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
					b[pos] = byte(c)
					for k := pos + 1; k < 8; k++ {
						b[k] = after
					}
					want := 8
					for k, x := range b {
						if special(x) {
							want = k
							break
						}
					}
					got := 8
					if m := StringSpecial(Load(string(b), 0)); m != 0 {
						got = bits.TrailingZeros64(m) / 8
					}
					if got != want {
						t.Fatalf("% x: first special byte %d, want %d", b, got, want)
					}
				}
			}
		}
	}
}

// TestLetters checks Letters against a byte loop for every byte value at
// every position of words of several fillers.
func TestLetters(t *testing.T) {
	letter := func(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
	for _, fill := range []byte{'a', 'Z', '@', '[', '`', '{', 0xE4, 0xC1, 0xDA, 0x7F, 0} {
		for pos := range 8 {
			for c := range 256 {
				b := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
				b[pos] = byte(c)
				want := 0
				for _, x := range b {
					if letter(x) {
						want++
					}
				}
				if got := Letters(Load(string(b), 0)); got != want {
					t.Fatalf("% x: %d letters, want %d", b, got, want)
				}
			}
		}
	}
}

// TestASCII: every length to 20, with one byte outside ASCII at each place
// (or none), answered as a byte-at-a-time check does.
func TestASCII(t *testing.T) {
	for n := 0; n <= 20; n++ {
		for at := -1; at < n; at++ {
			b := []byte(strings.Repeat("a", n))
			if at >= 0 {
				b[at] = 0x80
			}
			if got, want := ASCII(string(b)), at < 0; got != want {
				t.Errorf("%q: ASCII %v, want %v", b, got, want)
			}
		}
	}
}
