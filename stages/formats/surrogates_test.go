package formats

import "testing"

// TestEmbeddedSurrogatesAreRepairs: half a surrogate pair escaped in a JSON
// text or Python call held in a string decodes as U+FFFD, which is tagged
// as the row-level one is (repairs=lone_surrogate); an escape left as text,
// or a U+FFFD the row wrote, is no repair.
func TestEmbeddedSurrogatesAreRepairs(t *testing.T) {
	sys := gLead + gTool + "\n"
	xlamTools := `[{"name": "f", "description": "d", "parameters": {"a": {"type": "str"}}}]`
	tests := []struct{ name, format, row, want string }{
		{"glaive quoted arguments", "glaive", gRow(sys, "USER: Find it.", gCall(`'{"title": "Du\ud800ne"}'`)), "lone_surrogate"},
		{"glaive function response", "glaive", gRow(sys, "USER: Find it.", gCall(`'{"title": "Dune"}'`), `FUNCTION RESPONSE: {"found": "\udc00"}`), "lone_surrogate"},
		{"ToolACE call", "toolace", taRow(taSystem(taTools), "user", "q", "assistant", `[Tide Table(harbour="\ud800")]`), "lone_surrogate"},
		{"ToolACE call, \\U escape", "toolace", taRow(taSystem(taTools), "user", "q", "assistant", `[Tide Table(harbour="\U0000DC00")]`), "lone_surrogate"},
		{"xlam answers", "xlam", rowJSON("id", 1, "query", "q", "answers", `[{"name": "f", "arguments": {"a": "\ud800"}}]`, "tools", xlamTools), "lone_surrogate"},
		{"row level", "xlam", `{"id": 1, "query": "q\ud800", "answers": "[]", "tools": "[]"}`, "lone_surrogate"},
		{"a pair is no repair", "glaive", gRow(sys, "USER: Find it.", gCall(`'{"title": "\ud83d\ude00"}'`)), ""},
		{"the escape as text in a user turn", "glaive", gRow(sys, `USER: what is \ud800?`), ""},
		{"a U+FFFD written in the row", "xlam", rowJSON("id", 1, "query", "q \uFFFD", "answers", `[{"name": "f", "arguments": {"a": "\ufffd"}}]`, "tools", xlamTools), ""},
	}
	for _, tt := range tests {
		rec, err := Parse(tt.format, "s", 0, []byte(tt.row))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := rec.Tag("repairs"); got != tt.want {
			t.Errorf("%s: repairs %q, want %q", tt.name, got, tt.want)
		}
	}
}
