package stages

import (
	"strings"
	"testing"
)

func TestStripInlineThinking(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"  plain answer ", "plain answer", true},
		{"<think>\nhmm\n</think>\n\nthe answer", "the answer", true},
		{"<think></think>x", "x", true},
		{"<think>never closed", "<think>never closed", false},
		{"answer <think>late</think>", "answer <think>late</think>", false},
		{"<think>a</think> b </think>", "b </think>", false},
		{"", "", true},
	} {
		got, ok := stripInlineThinking(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("stripInlineThinking(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzStripInlineThinking: an answer said to be clean holds no thinking
// markup and is a trimmed part of the input.
func FuzzStripInlineThinking(f *testing.F) {
	for _, s := range []string{"x", "<think>a</think>b", "<think>", "a</think>", " <think> </think> "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := stripInlineThinking(s)
		if ok && (strings.Contains(got, "<think>") || strings.Contains(got, "</think>")) {
			t.Fatalf("%q: clean answer %q holds markup", s, got)
		}
		if !strings.Contains(s, got) || got != strings.TrimSpace(got) {
			t.Fatalf("%q: answer %q is not a trimmed part of it", s, got)
		}
	})
}
