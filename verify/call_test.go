package verify

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

var weatherTools = []record.Tool{
	{Name: "get_weather", Description: "Current weather", Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"city":{"type":"string"},` +
		`"days":{"type":"integer","minimum":1,"maximum":10,"default":1},` +
		`"unit":{"type":"string","enum":["celsius","fahrenheit"],"default":"celsius"},` +
		`"detailed":{"type":"boolean"},` +
		`"tags":{"type":"array","items":{"type":"string"},"maxItems":3},` +
		`"legs":{"type":"array","items":{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"}},"required":["from","to"]}},` +
		`"code":{"type":"string","pattern":"^[A-Z]{3}$"},` +
		`"ratio":{"type":"number","exclusiveMaximum":1}` +
		`},"required":["city"]}`)},
	{Name: "get_random_joke", Description: "A joke", Parameters: json.RawMessage(`{}`)},
	// ToolACE spelling: "dict", and a property-level default as a string.
	{Name: "Market Trends API", Parameters: json.RawMessage(`{"type":"dict","properties":{"trend_type":{"type":"string"},"count":{"type":"int","default":"5"}},"required":["trend_type"]}`)},
	// xlam spelling with Python types.
	{Name: "sum_list", Parameters: json.RawMessage(`{"type":"object","properties":{"nums":{"type":"List[int]"},"label":{"type":"str, optional"},"any":{"type":"Union[int, float]"}},"required":["nums"]}`)},
	{Name: "free_form", Parameters: json.RawMessage(`{"type":"object","properties":{"opts":{"type":"object"}},"additionalProperties":true}`)},
	{Name: "broken", Parameters: json.RawMessage(`[1,2]`)},
	// Keys that need quotes in a path.
	{Name: "spaced", Parameters: json.RawMessage(`{"type":"object","properties":{"departure date":{"type":"string"},"say \"hi\"":{"type":"string"},` +
		`"legs":{"type":"array","items":{"type":"object","properties":{"seat class":{"type":"string"}}}}}}`)},
}

func kinds(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Kind + "@" + p.Path
	}
	return out
}

func TestCheckCall(t *testing.T) {
	tests := []struct {
		name string
		call record.Call
		want []string // kind@path
		msg  string   // substring of the first message, if set
	}{
		{"ok minimal", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}, nil, ""},
		{"ok full", record.Call{Name: "get_weather", Arguments: json.RawMessage(
			`{"city":"Paris","days":3,"unit":"fahrenheit","detailed":false,"tags":["a"],"legs":[{"from":"A","to":"B"}],"code":"CDG","ratio":0.5}`)}, nil, ""},
		{"integer written 3.0", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":3.0}`)}, nil, ""},
		{"no params tool", record.Call{Name: "get_random_joke", Arguments: json.RawMessage(`{}`)}, nil, ""},
		{"toolace dict and name with spaces", record.Call{Name: "Market Trends API", Arguments: json.RawMessage(`{"trend_type":"MARKET_INDEXES","count":3}`)}, nil, ""},
		{"xlam python types", record.Call{Name: "sum_list", Arguments: json.RawMessage(`{"nums":[1,2],"label":"x","any":"whatever"}`)}, nil, ""},
		{"additionalProperties true", record.Call{Name: "free_form", Arguments: json.RawMessage(`{"opts":{"x":1},"extra":2}`)}, nil, ""},

		{"unknown function", record.Call{Name: "get_wether", Arguments: json.RawMessage(`{}`)},
			[]string{"func_not_found@name"}, `function "get_wether" is not defined in the tool list`},
		{"missing required", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"days":2}`)},
			[]string{"param_missing@arguments.city"}, `function "get_weather" is missing required parameter "city"`},
		{"unknown param", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","cty":"x"}`)},
			[]string{"unknown_param@arguments.cty"}, `function "get_weather" has no parameter "cty"`},
		{"unknown param on a tool without parameters", record.Call{Name: "get_random_joke", Arguments: json.RawMessage(`{"topic":"cats"}`)},
			[]string{"unknown_param@arguments.topic"}, ""},
		{"string for integer", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":"3"}`)},
			[]string{"wrong_type@arguments.days"}, `parameter "days" of "get_weather" must be integer, got string "3"`},
		{"fraction for integer", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":2.5}`)},
			[]string{"wrong_type@arguments.days"}, "got number 2.5"},
		{"number for string", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":75001}`)},
			[]string{"wrong_type@arguments.city"}, ""},
		{"string for boolean", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","detailed":"true"}`)},
			[]string{"wrong_type@arguments.detailed"}, ""},
		{"null for optional", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","unit":null}`)},
			[]string{"wrong_type@arguments.unit"}, `parameter "unit" of "get_weather" must be string, got null`},
		{"bad enum", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","unit":"kelvin"}`)},
			[]string{"bad_enum@arguments.unit"}, `must be one of "celsius", "fahrenheit"; got "kelvin"`},
		{"enum is case sensitive", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","unit":"Celsius"}`)},
			[]string{"bad_enum@arguments.unit"}, ""},
		{"items type", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","tags":["a",2]}`)},
			[]string{"wrong_type@arguments.tags[1]"}, `parameter "tags[1]"`},
		{"nested required and unknown", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","legs":[{"from":"A","dest":"B"}]}`)},
			[]string{"param_missing@arguments.legs[0].to", "unknown_param@arguments.legs[0].dest"}, `parameter "legs[0]" of "get_weather" is missing required key "to"`},
		{"maximum", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":14}`)},
			[]string{"constraint@arguments.days"}, "must be at most 10, got 14"},
		{"minimum", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":0}`)},
			[]string{"constraint@arguments.days"}, "at least 1"},
		{"exclusive maximum", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","ratio":1}`)},
			[]string{"constraint@arguments.ratio"}, "less than 1"},
		{"max items", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","tags":["a","b","c","d"]}`)},
			[]string{"constraint@arguments.tags"}, "at most 3 items"},
		{"pattern", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","code":"cdg"}`)},
			[]string{"constraint@arguments.code"}, "pattern"},
		{"several problems sorted by key", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"zz":1,"days":"x","aa":2}`)},
			[]string{"param_missing@arguments.city", "unknown_param@arguments.aa", "wrong_type@arguments.days", "unknown_param@arguments.zz"}, ""},
		{"key needing quotes", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","departure date":"x"}`)},
			[]string{`unknown_param@arguments["departure date"]`}, ""},
		// QA F6: the path was quoted twice, `parameter "[\"departure date\"]"`.
		{"top-level key needing quotes", record.Call{Name: "spaced", Arguments: json.RawMessage(`{"departure date":5}`)},
			[]string{`wrong_type@arguments["departure date"]`}, `parameter "departure date" of "spaced" must be string, got integer 5`},
		{"nested key needing quotes", record.Call{Name: "spaced", Arguments: json.RawMessage(`{"legs":[{"seat class":1}]}`)},
			[]string{`wrong_type@arguments.legs[0]["seat class"]`}, `parameter legs[0]["seat class"] of "spaced" must be string, got integer 1`},
		{"key holding a quote", record.Call{Name: "spaced", Arguments: json.RawMessage(`{"say \"hi\"":1}`)},
			[]string{`wrong_type@arguments["say \"hi\""]`}, `parameter "say \"hi\"" of "spaced" must be string, got integer 1`},
		{"arguments not an object", record.Call{Name: "get_weather", Arguments: json.RawMessage(`["Paris"]`)},
			[]string{"bad_json@arguments"}, "got array"},
		{"arguments invalid JSON", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":'Paris'}`)},
			[]string{"bad_json@arguments"}, ""},
		{"arguments empty", record.Call{Name: "get_weather"}, []string{"bad_json@arguments"}, "empty"},
		{"arguments null", record.Call{Name: "get_weather", Arguments: json.RawMessage(`null`)}, []string{"bad_json@arguments"}, ""},
		{"trailing data", record.Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"} {}`)}, []string{"bad_json@arguments"}, ""},
		{"unusable schema", record.Call{Name: "broken", Arguments: json.RawMessage(`{}`)}, []string{"bad_schema@name"}, `tool "broken"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckCall(weatherTools, tt.call)
			if !slices.Equal(kinds(got), tt.want) {
				t.Fatalf("got %v, want %v\n%v", kinds(got), tt.want, got)
			}
			for _, p := range got {
				if p.Check != "call" || p.Msg == "" {
					t.Errorf("bad problem %+v", p)
				}
			}
			if tt.msg != "" && (!strings.Contains(got[0].Msg, tt.msg) || strings.Contains(got[0].Msg, "null null")) {
				t.Errorf("message %q does not contain %q (or says null twice)", got[0].Msg, tt.msg)
			}
		})
	}
}

func TestCheckCallDuplicateNames(t *testing.T) {
	tools := []record.Tool{
		{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)},
		{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}`)},
	}
	if ps := CheckCall(tools, record.Call{Name: "f", Arguments: json.RawMessage(`{"b":1}`)}); ps != nil {
		t.Errorf("fits the second definition, got %v", ps)
	}
	ps := CheckCall(tools, record.Call{Name: "f", Arguments: json.RawMessage(`{"c":1}`)})
	if want := []string{"param_missing@arguments.a", "unknown_param@arguments.c"}; !slices.Equal(kinds(ps), want) {
		t.Errorf("got %v, want the first definition's problems %v", kinds(ps), want)
	}
}

func TestNormType(t *testing.T) {
	for in, want := range map[string]string{
		"string": "string", "str": "string", "str, optional": "string", "int": "integer", "Int, optional": "integer",
		"float": "number", "bool": "boolean", "dict": "object", "Dict": "object", "List[int]": "array",
		"List[List[int]]": "array", "Tuple[float, float]": "array", "set": "array", "list": "array", "null": "null",
		"Union[int, float]": "", "any": "", "": "",
	} {
		got, ok := normType(in)
		if got != want || ok != (want != "") {
			t.Errorf("normType(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func FuzzCheckCall(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer","enum":[1,2]}},"required":["a"]}`), []byte(`{"a":3}`))
	f.Add([]byte(`{"type":["string","null"],"items":{"type":"dict"},"pattern":"(?<x>"}`), []byte(`{"a":[{}]}`))
	f.Add([]byte(`{"properties":{"x":{"minLength":-1,"maxItems":1e400,"additionalProperties":{"type":"int"}}}}`), []byte(`{"x":{"y":"z"}}`))
	f.Add([]byte(`not json`), []byte(`{`))
	f.Fuzz(func(t *testing.T, params, args []byte) {
		tools := []record.Tool{{Name: "f", Parameters: params}}
		ps := CheckCall(tools, record.Call{Name: "f", Arguments: args})
		for _, p := range ps {
			if p.Kind == "" || p.Msg == "" || p.Check != "call" {
				t.Fatalf("incomplete problem %+v", p)
			}
		}
		if json.Valid(params) && json.Valid(args) && len(ps) == 0 {
			// A call that passes must have object arguments.
			if _, err := decodeArgs(args); err != nil {
				t.Fatalf("passed with non-object arguments %s", args)
			}
		}
	})
}

func BenchmarkCheckCall(b *testing.B) {
	c := record.Call{Name: "get_weather", Arguments: json.RawMessage(
		`{"city":"Paris","days":3,"unit":"fahrenheit","detailed":false,"tags":["a"],"legs":[{"from":"A","to":"B"}],"code":"CDG","ratio":0.5}`)}
	b.ReportAllocs()
	for b.Loop() {
		if ps := CheckCall(weatherTools, c); ps != nil {
			b.Fatal(ps)
		}
	}
}

// TestCheckCallAnswerSchema holds the cases of the JSON-Schema validator
// stages/llm had (library-backed, without a production user, removed): the
// one validator must give the same verdicts.
func TestCheckCallAnswerSchema(t *testing.T) {
	tools := []record.Tool{{Name: "answer", Parameters: json.RawMessage(`{
		"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 1},
			"unit": {"enum": ["celsius", "fahrenheit"]}
		},
		"required": ["name", "unit"],
		"additionalProperties": false
	}`)}}
	tests := []struct {
		args string
		want []string // kind@path
	}{
		{`{"name":"get_weather","unit":"celsius"}`, nil},
		{`{"name":"x","unit":"fahrenheit"}`, nil},
		{`{"name":"x","unit":"kelvin"}`, []string{"bad_enum@arguments.unit"}},
		{`{"name":"x"}`, []string{"param_missing@arguments.unit"}},
		{`{"name":"x","unit":"celsius","extra":1}`, []string{"unknown_param@arguments.extra"}},
		{`{"name":"","unit":"celsius"}`, []string{"constraint@arguments.name"}},
		{`{"name":"x","unit":`, []string{"bad_json@arguments"}},
		{`no json here`, []string{"bad_json@arguments"}},
	}
	for _, tt := range tests {
		got := kinds(CheckCall(tools, record.Call{Name: "answer", Arguments: json.RawMessage(tt.args)}))
		if !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
			t.Errorf("%s: got %v, want %v", tt.args, got, tt.want)
		}
	}
}
