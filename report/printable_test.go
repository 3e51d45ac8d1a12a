package report

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain text, 中文 and 😀", "plain text, 中文 and 😀"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"\x1b]0;title\x07", `\x1b]0;title\a`},
		{"cr\rback\b\b", `cr\rback\b\b`},
		{"rtl \u202e override", `rtl \u202e override`},
		{"del \x7f", `del \x7f`},
		{"not utf-8 \xff\xfe", `not utf-8 \xff\xfe`},
		{`a backslash \ stays`, `a backslash \ stays`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzPrintable: the output is UTF-8 holding no character a terminal acts
// on but line breaks and tabs, and text that needs no escaping is kept.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "hi \x1b[2J", "\u202e", "\xff", "中文\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := printable(s)
		if !utf8.ValidString(got) {
			t.Fatalf("printable(%q) = %q: not UTF-8", s, got)
		}
		for _, c := range got {
			if c != '\n' && c != '\t' && !strconv.IsPrint(c) {
				t.Fatalf("printable(%q) = %q holds %U", s, got, c)
			}
		}
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(c rune) bool { return c != '\n' && c != '\t' && !strconv.IsPrint(c) })
		if clean && got != s {
			t.Fatalf("printable(%q) = %q: changed text that needs no escape", s, got)
		}
	})
}
