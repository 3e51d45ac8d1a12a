package toollib

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

func TestToolIdentity(t *testing.T) {
	tool := func(name, desc, params string) record.Tool {
		return record.Tool{Name: name, Description: desc, Parameters: json.RawMessage(params)}
	}
	base := tool("get_weather", "Weather now", `{"type":"object","properties":{"city":{"type":"string"}}}`)
	for _, tc := range []struct {
		name      string
		other     record.Tool
		sameDef   bool
		sameKey   bool
		sameDefKy bool
	}{
		{"identical", base, true, true, true},
		{"renamed", tool("weather_now", base.Description, string(base.Parameters)), true, false, true},
		{"spaced schema", tool("weather_now", base.Description, `{"type": "object", "properties": {"city": {"type": "string"}}}`), true, false, true},
		{"other description", tool("get_weather", "Weather later", string(base.Parameters)), false, false, false},
		{"other schema", tool("get_weather", base.Description, `{"type":"object"}`), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameDefinition(base, tc.other); got != tc.sameDef {
				t.Errorf("SameDefinition = %v, want %v", got, tc.sameDef)
			}
			if got := Key(base) == Key(tc.other); got != tc.sameKey {
				t.Errorf("same Key = %v, want %v", got, tc.sameKey)
			}
			if got := DefKey(base) == DefKey(tc.other); got != tc.sameDefKy {
				t.Errorf("same DefKey = %v, want %v", got, tc.sameDefKy)
			}
		})
	}
}

// SameDefinition's scan for compact parameters gives the answer of
// comparing the compacted JSON, for compact, spaced, escaped and invalid
// parameters alike.
func TestSameDefinitionCompactScan(t *testing.T) {
	params := []string{
		`{"type":"object","properties":{}}`,
		`{"type": "object", "properties": {}}`,
		`{"type":"object","properties":{"a":{"type":"string","description":"the city and state"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","description":"the city and  state"}}}`,
		`{"type":"object", "properties":{"a":{"type":"string","description":"the city and state"}}}`,
		`{"type":"object","properties":{"a":{"description":"say \"hi there\" \\ ok"}}}`,
		`{"type":"object","properties":{"a":{"description":"say \"hi there\" \\ ok"} }}`,
		"{\"a\":\n1}", `{"a":1}`, `{"a":"x y`, `{"a": "x y`, `not json`, `not  json`, ``, ` `,
	}
	for _, p := range params {
		for _, q := range params {
			a := record.Tool{Name: "a", Description: "d", Parameters: []byte(p)}
			b := record.Tool{Name: "b", Description: "d", Parameters: []byte(q)}
			want := bytes.Equal(compactJSON(a.Parameters), compactJSON(b.Parameters))
			if got := SameDefinition(a, b); got != want {
				t.Errorf("SameDefinition(%q, %q) = %v, want %v", p, q, got, want)
			}
		}
	}
}
