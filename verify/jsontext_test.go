package verify

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/record"
)

// systemTextReflect and callJSONReflect are the texts as jsonout.Marshal
// writes them from structs, the reference the hand-written ones match.
func systemTextReflect(r *record.Record) string {
	system := r.System
	if len(r.Tools) > 0 {
		type tool struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Parameters  any    `json:"parameters"`
			Response    any    `json:"response,omitempty"`
		}
		ts := make([]tool, len(r.Tools))
		for i, t := range r.Tools {
			ts[i] = tool{Name: t.Name, Description: t.Description, Parameters: rawOrString(t.Parameters)}
			if resp := bytes.TrimSpace(t.Response); len(resp) > 0 {
				ts[i].Response = rawOrString(resp)
			}
		}
		if b, err := jsonout.Marshal(ts); err == nil {
			if system != "" {
				system += "\n\n"
			}
			system += string(b)
		}
	}
	return system
}

func callJSONReflect(c record.Call) string {
	var args any = json.RawMessage(c.Arguments)
	if !json.Valid(c.Arguments) {
		args = string(c.Arguments)
	}
	b, err := jsonout.Marshal(struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	}{c.Name, args})
	if err != nil {
		return c.Name
	}
	return string(b)
}

var jsonTextStrings = []string{"", "get_weather", `quote " back \ slash`, "tab\tnl\ncr\r", "<b> & co", "bell \a \x00 \x1f",
	"line\u2028sep\u2029", "bad \xff utf8", "潮汐 🌊", "e\u0301", "\u2027 \u2030"}

var jsonTextRaws = []string{"", "{}", `{"type":"object"}`, "{ \"a\" : [1, 2 ,\n\t3], \"b c\": \"x  y\\\" z\" }", `{"s":"\u2028 <&> \\ \" "}`,
	"{oops", "null", " 42 ", `"str"`, "[true, false, null]", "{\"a\":\"\\\\\"}  ", "\xff", "{\"k\": \"é 中\"}"}

// TestJSONTextMatchesJsonout: systemText and callJSON write the bytes
// jsonout.Marshal writes of the same values.
func TestJSONTextMatchesJsonout(t *testing.T) {
	for _, s := range jsonTextStrings {
		for _, raw := range jsonTextRaws {
			checkJSONText(t, s, raw)
		}
	}
}

func checkJSONText(t *testing.T, s, raw string) {
	r := &record.Record{System: s, Tools: []record.Tool{{Name: s, Description: s + "!", Parameters: []byte(raw)}, {Name: "b", Parameters: []byte(raw), Response: []byte(raw)}}}
	if got, want := systemText(r), systemTextReflect(r); got != want {
		t.Fatalf("systemText(%q, %q):\n got %s\nwant %s", s, raw, got, want)
	}
	c := record.Call{Name: s, Arguments: []byte(raw)}
	if got, want := callJSON(c), callJSONReflect(c); got != want {
		t.Fatalf("callJSON(%q, %q):\n got %s\nwant %s", s, raw, got, want)
	}
	if got := systemText(&record.Record{System: s}); got != s {
		t.Fatalf("no tools: %q", got)
	}
}

func FuzzJSONText(f *testing.F) {
	for i, s := range jsonTextStrings {
		f.Add(s, jsonTextRaws[i%len(jsonTextRaws)])
	}
	f.Add("x", strings.Repeat(`{"a": [1, {"b": "c d"}]} `, 3))
	f.Fuzz(checkJSONText)
}
