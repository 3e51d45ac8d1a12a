package formats

import (
	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/contract"
	"strings"
	"testing"
)

func TestPyType(t *testing.T) {
	tests := []struct {
		in       string
		want     string // compact JSON of the replacing members, as an object
		optional bool
	}{
		{"str", `{"type":"string"}`, false},
		{"str, optional", `{"type":"string"}`, true},
		{"int, Optional", `{"type":"integer"}`, true},
		{"float", `{"type":"number"}`, false},
		{"bool, optional", `{"type":"boolean"}`, true},
		{"string", `{"type":"string"}`, false},
		{"Integer", `{"type":"integer"}`, false},
		{"dict", `{"type":"object"}`, false},
		{"Dict", `{"type":"object"}`, false},
		{"Dict[str, Any]", `{"type":"object"}`, false},
		{"list", `{"type":"array"}`, false},
		{"List", `{"type":"array"}`, false},
		{"set", `{"type":"array"}`, false},
		{"List[str]", `{"type":"array","items":{"type":"string"}}`, false},
		{"List[List[int]]", `{"type":"array","items":{"type":"array","items":{"type":"integer"}}}`, false},
		{"List[Union[int, float]]", `{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"number"}]}}`, false},
		{"List[Dict]", `{"type":"array","items":{"type":"object"}}`, false},
		{"Tuple[float, float]", `{"type":"array","items":{"type":"number"}}`, false},
		{"Tuple[int, str]", `{"type":"array"}`, false},
		{"Tuple[int, ...]", `{"type":"array","items":{"type":"integer"}}`, false},
		{"typing.List[str]", `{"type":"array","items":{"type":"string"}}`, false},
		{"Optional[int]", `{"type":"integer"}`, true},
		{"Union[str, None]", `{"type":"string"}`, true},
		{"Union[int, float]", `{"anyOf":[{"type":"integer"},{"type":"number"}]}`, false},
		{"Any", `{}`, false},
		{"List[str], optional", `{"type":"array","items":{"type":"string"}}`, true},
	}
	for _, tt := range tests {
		ms, opt, ok := pyType(nil, tt.in)
		if !ok {
			t.Errorf("%q: not understood", tt.in)
			continue
		}
		v := jsontree.Value{Kind: jsontree.Object, Elems: ms}
		if got := string(jsontree.Compact(&v)); got != tt.want || opt != tt.optional {
			t.Errorf("%q: got %s optional=%v, want %s optional=%v", tt.in, got, opt, tt.want, tt.optional)
		}
	}
	for _, bad := range []string{"", "Callable", "datetime", "List[", "List[int", "a..", "Union[]", "str optional"} {
		if _, _, ok := pyType(nil, bad); ok {
			t.Errorf("%q: understood, want unknown", bad)
		}
	}
}

func TestNormalizeTool(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"ToolACE dict types and stray required null",
			`{"name": "New Address", "description": "d", "parameters": {"type": "dict", "properties": {"p": {"description": "x", "type": "string", "default": "83646"}, "o": {"type": "dict", "properties": {"q": {"type": "integer"}}}}, "required": ["p"]}, "required": null}`,
			`New Address|d|{"type":"object","properties":{"p":{"description":"x","type":"string","default":"83646"},"o":{"type":"object","properties":{"q":{"type":"integer"}}}},"required":["p"]}`},
		{"xlam flat map",
			`{"name": "live_giveaways", "description": "d", "parameters": {"type": {"description": "kind", "type": "str", "default": "game"}, "limit": {"description": "n", "type": "int, optional", "default": 10}, "ids": {"description": "", "type": "List[int]"}}}`,
			`live_giveaways|d|{"type":"object","properties":{"type":{"description":"kind","type":"string","default":"game"},"limit":{"description":"n","type":"integer","default":10},"ids":{"description":"","type":"array","items":{"type":"integer"}}},"required":["type","ids"]}`},
		{"xlam flat map, all optional",
			`{"name": "f", "description": "d", "parameters": {"a": {"type": "str, optional", "default": ""}}}`,
			`f|d|{"type":"object","properties":{"a":{"type":"string","default":""}}}`},
		{"xlam flat map, unknown type dropped",
			`{"name": "f", "description": "d", "parameters": {"cb": {"description": "c", "type": "Callable"}}}`,
			`f|d|{"type":"object","properties":{"cb":{"description":"c"}},"required":["cb"]}`},
		{"OpenAI wrapper",
			`{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}`,
			`f|d|{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"no parameters", `{"name": "now", "description": "time"}`, `now|time|{"type":"object","properties":{}}`},
		{"null parameters", `{"name": "now", "parameters": null}`, `now||{"type":"object","properties":{}}`},
		{"empty parameters object", `{"name": "now", "description": "", "parameters": {}}`, `now||{"type":"object","properties":{}}`},
		{"object type without properties", `{"name": "now", "parameters": {"type": "object"}}`, `now||{"type":"object","properties":{}}`},
		{"properties without type",
			`{"name": "f", "parameters": {"properties": {"a": {"type": "string"}}, "required": ["a"]}}`,
			`f||{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{"tool-level required moves into parameters",
			`{"name": "f", "parameters": {"type": "dict", "properties": {"id": {"type": "str", "default": "x"}}}, "required": ["id"]}`,
			`f||{"type":"object","properties":{"id":{"type":"string","default":"x"}},"required":["id"]}`},
		{"tool-level required does not override",
			`{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}, "required": ["b"]}`,
			`f||{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`},
		{"python types inside a JSON Schema, required derived from optional marks",
			`{"name": "f", "parameters": {"type": "dict", "properties": {"w": {"type": "int, optional", "default": "1024"}, "url": {"type": "str"}}}}`,
			`f||{"type":"object","properties":{"w":{"type":"integer","default":"1024"},"url":{"type":"string"}},"required":["url"]}`},
		{"type lists, items, anyOf and additionalProperties normalised",
			`{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": ["str", "null"]}, "b": {"type": "array", "items": {"type": "dict"}}, "c": {"anyOf": [{"type": "int"}, {"type": "float"}]}, "d": {"type": "object", "additionalProperties": {"type": "bool"}}, "e": {"type": "List[str]", "items": {"type": "int"}}}}}`,
			`f||{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"type":"array","items":{"type":"object"}},"c":{"anyOf":[{"type":"integer"},{"type":"number"}]},"d":{"type":"object","additionalProperties":{"type":"boolean"}},"e":{"type":"array","items":{"type":"integer"}}}}`},
		{"a type that is not a name nor a list of names is dropped",
			`{"name": "f", "description": "d", "parameters": {"a": {"description": "s", "type": null}, "n": {"type": 5, "default": 1}, "o": {"type": {"a": 1}}}}`,
			`f|d|{"type":"object","properties":{"a":{"description":"s"},"n":{"default":1},"o":{}},"required":["a","n","o"]}`},
		{"unknown keywords kept in place",
			`{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"], "format": "date", "x-extra": {"k": 1}}}, "additionalProperties": false}}`,
			`f||{"type":"object","properties":{"a":{"type":"string","enum":["x","y"],"format":"date","x-extra":{"k":1}}},"additionalProperties":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := jsontree.ParseString(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			tool, err := normalizeTool(nil, &v, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := tool.Name + "|" + tool.Description + "|" + string(tool.Parameters); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestNormalizeToolErrors(t *testing.T) {
	tests := []struct{ in, reason, detail string }{
		{`"f"`, "bad_tool", "JSON string"},
		{`{"description": "d"}`, "bad_tool", "no name"},
		{`{"name": ""}`, "bad_tool", "no name"},
		{`{"name": 3}`, "bad_tool", "no name"},
		{`{"name": "f", "description": 3}`, "bad_tool", "description is a JSON number"},
		{`{"name": "f", "parameters": []}`, "bad_tool_parameters", "parameters are a JSON array"},
		{`{"name": "f", "parameters": {"type": "array", "items": {}}}`, "bad_tool_parameters", `type "array"`},
		{`{"name": "f", "parameters": {"a": 1}}`, "bad_tool_parameters", "neither a JSON Schema"},
		{`{"name": "f", "parameters": {"type": "object", "properties": []}}`, "bad_tool_parameters", "properties are a JSON array"},
		{`{"name": "f", "parameters": {"type": "object", "required": "a"}}`, "bad_tool_parameters", `required is not a list of names: "a"`},
		{`{"name": "f", "parameters": {"type": "object"}, "required": [1]}`, "bad_tool_parameters", "required holds"},
	}
	for _, tt := range tests {
		v, err := jsontree.ParseString(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		_, err = normalizeTool(nil, &v, 0)
		pe, ok := err.(*contract.Reject)
		if !ok || pe.Reason != tt.reason || !strings.Contains(pe.Detail, tt.detail) {
			t.Errorf("%s: got %v, want %s containing %q", tt.in, err, tt.reason, tt.detail)
		}
	}
}
