package formats

import "testing"

// TestRepairTags: text Parse had to replace with U+FFFD is tagged, never
// changed silently.
func TestRepairTags(t *testing.T) {
	tests := []struct {
		name, row, content, repairs string
	}{
		{"clean", `{"messages":[{"role":"user","content":"caf\u00e9"}]}`, "café", ""},
		{"invalid UTF-8 bytes", "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9 \xff\xfe ok\"}]}", "caf\uFFFD \uFFFD ok", "invalid_utf8"},
		{"lone surrogate escape", `{"messages":[{"role":"user","content":"a\ud800b"}]}`, "a\uFFFDb", "lone_surrogate"},
		{"both, sorted", "{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00\xc3\"}]}", "\uFFFD\uFFFD", "invalid_utf8,lone_surrogate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Parse("openai", "s", 0, []byte(tt.row))
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Messages[0].Content; got != tt.content {
				t.Errorf("content %q, want %q", got, tt.content)
			}
			if got := rec.Tag("repairs"); got != tt.repairs {
				t.Errorf("repairs %q, want %q", got, tt.repairs)
			}
		})
	}
}
