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

// TestFind: Library.Find is the first tool of the name with SameDefinition,
// whichever of the library and the probe is written with white space.
func TestFind(t *testing.T) {
	tool := func(name, desc, params string) record.Tool {
		return record.Tool{Name: name, Description: desc, Parameters: json.RawMessage(params)}
	}
	const (
		p1       = `{"type":"object","properties":{"city":{"type":"string"}}}`
		p1spaced = `{"type": "object", "properties": {"city": {"type": "string"}}}`
		p2       = `{"type":"object"}`
		p2spaced = `{ "type":"object" }`
		p3       = `{"type":"object","properties":{"a b":{"type":"string"}}}`
	)
	var all []record.Tool
	for _, name := range []string{"get_weather", "weather"} {
		for _, desc := range []string{"Weather now", "Weather later", ""} {
			for _, p := range []string{p1, p1spaced, p2, p2spaced, p3, `not json`} {
				all = append(all, tool(name, desc, p))
			}
		}
	}
	// Libraries of every subset of the variants of one name would be too
	// many: take seeded subsets.
	for seed := range uint64(200) {
		rng := seeded(seed)
		var tools []record.Tool
		for _, tl := range all {
			if rng.IntN(3) == 0 {
				tools = append(tools, tl)
			}
		}
		lib := New(tools)
		for _, probe := range append(all, tool("other", "x", p1)) {
			want := -1
			for _, i := range lib.Named(probe.Name) {
				if SameDefinition(lib.Tools[i], probe) {
					want = i
					break
				}
			}
			if got := lib.Find(probe); got != want {
				t.Fatalf("seed %d: Find(%s %q %s) = %d, want %d", seed, probe.Name, probe.Description, probe.Parameters, got, want)
			}
		}
	}
}
