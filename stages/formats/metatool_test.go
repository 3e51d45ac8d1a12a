package formats

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// fig12 is the tool turn of seed 000 Fig 12 as printed there.
const fig12 = `[{"name": "meta_tool", "function_id": 0, "results": {"name": "get_traffic_report", "description": "Get the current traffic report", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The city and state, e.g. Los Angeles, CA"}}, "required": ["location"]}}}]`

const mtDef = `{"name":"get_traffic_report","description":"Get the current traffic report","parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. Los Angeles, CA"}},"required":["location"]}}`

func TestMetaToolResult(t *testing.T) {
	other := `{"name":"get_tolls","description":"Toll prices","parameters":{"type":"object","properties":{}}}`
	tests := []struct {
		name, content string
		want          []string // "name|parameters" per tool
		err           string
	}{
		{name: "bare definition", content: mtDef, want: []string{"get_traffic_report|" + `{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. Los Angeles, CA"}},"required":["location"]}`}},
		{name: "list of definitions (retrieved, bare)", content: "[" + mtDef + "," + other + "]", want: []string{"get_traffic_report|", "get_tolls|"}},
		{name: "OpenAI-wrapped definition", content: `{"type":"function","function":` + other + `}`, want: []string{"get_tolls|"}},
		{name: "Fig 12 as printed", content: fig12, want: []string{"get_traffic_report|"}},
		{name: "envelope of a list (retrieved, paper)", content: `[{"name":"meta_tool","function_id":0,"results":[` + other + `,` + mtDef + `]}]`, want: []string{"get_tolls|", "get_traffic_report|"}},
		{name: "one envelope of several in a turn", content: `{"name":"meta_tool","function_id":1,"results":` + other + `}`, want: []string{"get_tolls|"}},
		{name: "a whole parallel turn", content: `[{"name":"meta_tool","function_id":0,"results":` + mtDef + `},{"name":"meta_tool","function_id":1,"results":` + other + `}]`, want: []string{"get_traffic_report|", "get_tolls|"}},
		{name: "parameters normalised like listed tools", content: `{"name":"f","description":"d","parameters":{"type":"dict","properties":{"n":{"type":"int"}}},"required":null}`, want: []string{`f|{"type":"object","properties":{"n":{"type":"integer"}}}`}},
		{name: "not JSON", content: `{"name":`, err: "not JSON"},
		{name: "empty list", content: `[]`, err: "empty list"},
		{name: "a number", content: `3`, err: "want a tool definition"},
		{name: "no name", content: `{"description":"x"}`, err: "no name"},
		{name: "envelope of another function", content: `[{"name":"get_weather","results":{"temp":3}}]`, err: `"get_weather"`},
		{name: "envelope in an envelope", content: `{"name":"meta_tool","results":{"name":"meta_tool","results":` + mtDef + `}}`, err: "envelope inside an envelope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MetaToolResult(tt.content)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, %v; want an error about %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d tools %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				name, params, _ := strings.Cut(w, "|")
				if got[i].Name != name || params != "" && string(got[i].Parameters) != params {
					t.Errorf("tool %d: %s %s, want %s %s", i, got[i].Name, got[i].Parameters, name, params)
				}
			}
		})
	}
}

// FuzzMetaToolResult: no panic; every tool returned has a name and object
// parameters; the tools, written back as a bare list, read the same.
func FuzzMetaToolResult(f *testing.F) {
	for _, s := range []string{fig12, mtDef, "[" + mtDef + "]", `{"name":"meta_tool","function_id":1,"results":[` + mtDef + `]}`, `[]`, `{"results":3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		tools, err := MetaToolResult(content)
		if err != nil {
			return
		}
		for _, tl := range tools {
			if tl.Name == "" || !json.Valid(tl.Parameters) || !strings.HasPrefix(string(tl.Parameters), "{") {
				t.Fatalf("tool %+v from %q", tl, content)
			}
		}
		b, err := json.Marshal(tools)
		if err != nil {
			t.Fatal(err)
		}
		again, err := MetaToolResult(string(b))
		if err != nil || !sameTools(tools, again) {
			t.Fatalf("re-read %s: %v %+v", b, err, again)
		}
	})
}

func sameTools(a, b []record.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || string(a[i].Parameters) != string(b[i].Parameters) {
			return false
		}
	}
	return true
}
