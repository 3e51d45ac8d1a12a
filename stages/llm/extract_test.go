package llm

import (
	"encoding/json"
	"testing"
)

func TestExtractJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{"bare object", `{"a":1}`, `{"a":1}`, false},
		{"bare array", ` [1, 2] `, `[1, 2]`, false},
		{"fenced", "```json\n{\"a\": [1]}\n```", `{"a": [1]}`, false},
		{"fence without language", "```\n{\"a\":1}\n```", `{"a":1}`, false},
		{"think block", "<think>maybe {\"a\":0}?</think>\n{\"a\":2}", `{"a":2}`, false},
		{"prose around", `Sure! Here it is: {"x":"}"} Hope it helps.`, `{"x":"}"}`, false},
		{"broken first candidate", `use {braces} like {"k":true}`, `{"k":true}`, false},
		{"truncated", `{"a": [1, 2`, "", true},
		{"no json", `I cannot do that.`, "", true},
		{"empty", ``, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExtractJSON(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("want error, got %s", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "```json\n[1]\n```", `<think>x</think>{}`, `{{{{`, `x [1,{"a":}] {"b":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ExtractJSON(s)
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("ExtractJSON(%q) returned invalid JSON %q", s, got)
		}
		if got[0] != '{' && got[0] != '[' {
			t.Fatalf("ExtractJSON(%q) returned a non-container %q", s, got)
		}
	})
}
