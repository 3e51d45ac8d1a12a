package stages

import (
	"strings"
	"testing"
)

func TestStripCodeFence(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"  plain answer ", "plain answer"},
		{"```json\n{\"a\": 1}\n```", `{"a": 1}`},
		{"```\nI'm sorry, I can't do that.\n```", "I'm sorry, I can't do that."},
		{"```text\r\nI'm sorry.\r\n```", "I'm sorry."},
		{"```I'm sorry.```", "I'm sorry."},
		// An opening line with blanks is text, not a language tag.
		{"```I'm sorry, I can't.\nTry a map app.```", "I'm sorry, I can't.\nTry a map app."},
		{"Use ```code``` here", "Use ```code``` here"},
		{"```json\n{}", "```json\n{}"},
		{"``````", ""},
	} {
		if got := stripCodeFence(tt.in); got != tt.want {
			t.Errorf("stripCodeFence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzStripCodeFence: the body is a trimmed part of the input, and a text
// without a fence is only trimmed.
func FuzzStripCodeFence(f *testing.F) {
	for _, s := range []string{"x", "```json\n{}\n```", "```a b\nc```", "``````", "```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := stripCodeFence(s)
		if got != strings.TrimSpace(got) || !strings.Contains(s, got) {
			t.Fatalf("%q: body %q is not a trimmed part of it", s, got)
		}
		if !strings.HasPrefix(strings.TrimSpace(s), "```") && got != strings.TrimSpace(s) {
			t.Fatalf("%q: unfenced text changed to %q", s, got)
		}
	})
}
