package verify

import (
	"strings"
	"testing"
)

// TestBlank holds blank to strings.TrimSpace(s) == "" on every string of
// up to three pieces: ASCII and Unicode white space (U+0085, U+00A0,
// U+3000), other characters and bytes that are not UTF-8.
func TestBlank(t *testing.T) {
	pieces := []string{"", " ", "\t", "\n", "\v", "\f", "\r", "\x1c", "\u0085", "\u00a0", "\u3000", "\u200b", "a", "中", "\xff", "\xe3\x80", "\x00", "|"}
	for _, a := range pieces {
		for _, b := range pieces {
			for _, c := range pieces {
				s := a + b + c
				if got, want := blank(s), strings.TrimSpace(s) == ""; got != want {
					t.Errorf("blank(%q) = %v, TrimSpace says %v", s, got, want)
				}
			}
		}
	}
}
