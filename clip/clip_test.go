package clip

import "testing"

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s     string
		n     int
		runes string
		bytes string
	}{
		{"short", 10, "short", "short"},
		{"exactly", 7, "exactly", "exactly"},
		{"abcdef", 4, "abc…", "abcd…"},
		{"日本語です", 3, "日本…", "日…"},
		{"日本語です", 4, "日本語…", "日…"},
		{"ab", 1, "…", "a…"},
	} {
		if got := Runes(tc.s, tc.n); got != tc.runes {
			t.Errorf("Runes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.runes)
		}
		if got := Bytes(tc.s, tc.n); got != tc.bytes {
			t.Errorf("Bytes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.bytes)
		}
	}
}
