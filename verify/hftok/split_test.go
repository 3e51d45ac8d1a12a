package hftok

import (
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
)

// splitRegex splits s with the regex engine, as pieces.
func splitRegex(t testing.TB, pattern, s string) []string {
	re := regexp2.MustCompile(pattern, regexp2.None)
	runes := []rune(s)
	var out []string
	pos := 0
	m, err := re.FindRunesMatch(runes)
	for err == nil && m != nil {
		if pos < m.RuneIndex {
			out = append(out, string(runes[pos:m.RuneIndex]))
		}
		out = append(out, string(runes[m.RuneIndex:m.RuneIndex+m.RuneLength]))
		pos = m.RuneIndex + m.RuneLength
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	if pos < len(runes) {
		out = append(out, string(runes[pos:]))
	}
	return out
}

func splitHand(s string, digits int) []string {
	var out []string
	splitFast(s, digits, func(a, b int) { out = append(out, s[a:b]) })
	return out
}

var splitCases = []string{
	"Hello world", "I'm here, you'RE there; they'LL go'd", "12345 67", "  leading and trailing  ",
	"a\n\nb\r\n  c \n", "x  \t y", "!!! ?? ...\n\n", "café 北京 🚀🚀", "'", "' s", "a'", "\u00a0nbsp\u2003em",
	"tab\t\tend\t", " \n", "\n ", "   x", "a1b22c333d4444", "--> ok\r\r\n", "¼½ ⅔ ٣٤٥",
}

// TestSplitFast: the hand-written split equals the regex engine's on the
// Llama 3 and Qwen patterns.
func TestSplitFast(t *testing.T) {
	for _, p := range []struct {
		pattern string
		digits  int
	}{{patternLlama3, 3}, {patternQwen, 1}} {
		for _, s := range splitCases {
			want, got := splitRegex(t, p.pattern, s), splitHand(s, p.digits)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("digits %d, %q:\n got %q\nwant %q", p.digits, s, got, want)
			}
		}
	}
}

func FuzzSplitFast(f *testing.F) {
	for _, s := range splitCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8Valid(s) {
			return // the regex engine reads runes; invalid bytes differ by design
		}
		for _, p := range []struct {
			pattern string
			digits  int
		}{{patternLlama3, 3}, {patternQwen, 1}} {
			want, got := splitRegex(t, p.pattern, s), splitHand(s, p.digits)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("digits %d, %q:\n got %q\nwant %q", p.digits, s, got, want)
			}
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
