package verify

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/augmentdata/augment/stages/record"
)

// strictSchema adds additionalProperties: false where CheckCall forbids
// unknown keys (the top level, and objects with declared properties), so
// that a JSON Schema validator can serve as an independent oracle.
func strictSchema(v any, top bool) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		out[k] = x
	}
	if p, ok := m["properties"].(map[string]any); ok {
		np := map[string]any{}
		for k, x := range p {
			np[k] = strictSchema(x, false)
		}
		out["properties"] = np
	}
	if it, ok := m["items"]; ok {
		out["items"] = strictSchema(it, false)
	}
	if _, set := m["additionalProperties"]; !set {
		if p, _ := m["properties"].(map[string]any); top || len(p) > 0 {
			out["additionalProperties"] = false
		}
	}
	return out
}

// mutations returns args and variants of it that break one rule each.
func mutations(args map[string]any) []map[string]any {
	clone := func() map[string]any {
		b, _ := json.Marshal(args)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	out := []map[string]any{clone()}
	m := clone()
	m["zz_unknown"] = 1
	out = append(out, m)
	for _, k := range sortedKeys(args) {
		m := clone()
		delete(m, k)
		out = append(out, m)
		m = clone()
		switch v := args[k].(type) {
		case string:
			m[k] = 42
		case float64:
			m[k] = fmt.Sprint(v)
		case bool:
			m[k] = "true"
		case []any:
			m[k] = map[string]any{"a": 1}
			if len(v) > 0 {
				m2 := clone()
				m2[k].([]any)[0] = 7
				out = append(out, m2)
			}
		case map[string]any:
			m[k] = []any{1}
		}
		out = append(out, m)
	}
	return out
}

// CheckCall agrees with a JSON Schema validator on the real tools and calls
// of LLaMA-Factory's glaive demos and on one-rule mutations of those calls.
func TestCheckCallAgreesWithJSONSchema(t *testing.T) {
	compared, invalid := 0, 0
	for _, f := range []string{"llamafactory/glaive_toolcall_en_demo.json", "llamafactory/glaive_toolcall_zh_demo.json"} {
		b, err := os.ReadFile(sharedData(t, f))
		if err != nil {
			t.Fatal(err)
		}
		var rows []ShareGPT
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		for ri, row := range rows {
			var tools []record.Tool
			if err := json.Unmarshal([]byte(row.Tools), &tools); err != nil {
				t.Fatal(err)
			}
			schemas := map[string]*jsonschema.Schema{}
			for _, tool := range tools {
				var doc any
				if err := json.Unmarshal(tool.Parameters, &doc); err != nil {
					t.Fatal(err)
				}
				c := jsonschema.NewCompiler()
				c.DefaultDraft(jsonschema.Draft2020)
				if err := c.AddResource("mem://tool.json", strictSchema(doc, true)); err != nil {
					t.Fatal(err)
				}
				s, err := c.Compile("mem://tool.json")
				if err != nil {
					t.Fatalf("%s row %d tool %s: %v", f, ri, tool.Name, err)
				}
				if _, dup := schemas[tool.Name]; !dup {
					schemas[tool.Name] = s
				}
			}
			for _, turn := range row.Conversations {
				if turn.From != "function_call" {
					continue
				}
				var c struct {
					Name      string         `json:"name"`
					Arguments map[string]any `json:"arguments"`
				}
				if err := json.Unmarshal([]byte(turn.Value), &c); err != nil {
					t.Fatal(err)
				}
				s := schemas[c.Name]
				if s == nil {
					continue
				}
				for _, args := range mutations(c.Arguments) {
					raw, _ := json.Marshal(args)
					inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
					if err != nil {
						t.Fatal(err)
					}
					oracle := s.Validate(inst) == nil
					ps := CheckCall(tools, record.Call{Name: c.Name, Arguments: raw})
					if oracle != (ps == nil) {
						t.Errorf("%s row %d %s %s: validator says valid=%v, CheckCall says %v", f, ri, c.Name, raw, oracle, ps)
					}
					compared++
					if !oracle {
						invalid++
					}
				}
			}
		}
	}
	if compared < 1000 || invalid < compared/3 || invalid == compared {
		t.Errorf("compared %d calls, %d invalid: too few to mean anything", compared, invalid)
	}
	t.Logf("compared %d calls (%d invalid) with the JSON Schema validator", compared, invalid)
}

func TestStrictSchema(t *testing.T) {
	in := map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{}}},
		"b": map[string]any{"type": "object"},
	}}
	out := strictSchema(in, true).(map[string]any)
	props := out["properties"].(map[string]any)
	if out["additionalProperties"] != false || props["a"].(map[string]any)["additionalProperties"] != false {
		t.Errorf("not strict: %v", out)
	}
	if _, set := props["b"].(map[string]any)["additionalProperties"]; set {
		t.Errorf("free-form nested object made strict: %v", props["b"])
	}
	if slices.Contains(sortedKeys(in), "additionalProperties") {
		t.Error("input modified")
	}
}

// The glaive demo calls that break their own tool's schema, as found by
// CheckCall: in the English demo one call (an array for a number); in the
// Chinese demo eight calls: two enum values translated into Chinese (the
// defect the translation stage's structure lock must prevent), two calls
// without a required parameter, and four calls to calculate_area, whose
// schema requires every dimension of every shape.
func TestCheckCallGlaiveDemos(t *testing.T) {
	for _, tt := range []struct {
		file  string
		calls int
		bad   map[string]int // kind → problems
	}{
		{"llamafactory/glaive_toolcall_en_demo.json", 211, map[string]int{"wrong_type": 1}},
		{"llamafactory/glaive_toolcall_zh_demo.json", 216, map[string]int{"param_missing": 15, "bad_enum": 2}},
	} {
		b, err := os.ReadFile(sharedData(t, tt.file))
		if err != nil {
			t.Fatal(err)
		}
		var rows []ShareGPT
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		n := 0
		got := map[string]int{}
		for _, row := range rows {
			var tools []record.Tool
			if err := json.Unmarshal([]byte(row.Tools), &tools); err != nil {
				t.Fatal(err)
			}
			for _, turn := range row.Conversations {
				if turn.From != "function_call" {
					continue
				}
				var c struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				}
				if err := json.Unmarshal([]byte(turn.Value), &c); err != nil {
					t.Fatal(err)
				}
				n++
				for _, p := range CheckCall(tools, record.Call{Name: c.Name, Arguments: c.Arguments}) {
					got[p.Kind]++
				}
			}
		}
		if n != tt.calls || !maps.Equal(got, tt.bad) {
			t.Errorf("%s: %d calls with problems %v; want %d calls with %v", tt.file, n, got, tt.calls, tt.bad)
		}
	}
}
