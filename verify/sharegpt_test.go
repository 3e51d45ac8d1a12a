package verify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sharedData locates ../shared/data (beside the repository) from the package directory (the
// repository's parent), or AUGMENT_SHARED_DATA; tests skip without it.
func sharedData(t testing.TB, rel string) string {
	t.Helper()
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	p := filepath.Join(dir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data %s not found (set AUGMENT_SHARED_DATA to the shared data directory): %v", rel, err)
	}
	return p
}

func turns(ft ...string) []Turn {
	var out []Turn
	for i := 0; i+1 < len(ft); i += 2 {
		out = append(out, Turn{From: ft[i], Value: ft[i+1]})
	}
	return out
}

func TestCheckShareGPT(t *testing.T) {
	fc := `{"name": "get_weather", "arguments": {"city": "Paris"}}`
	tools := `[{"name": "get_weather", "description": "d", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]`
	tests := []struct {
		name string
		s    *ShareGPT
		want []string // kind@path
	}{
		{"call, result, answer", &ShareGPT{Conversations: turns("human", "Weather?", "function_call", fc, "observation", `{"t":1}`, "gpt", "Sunny."), Tools: tools}, nil},
		{"system turn first", &ShareGPT{Conversations: turns("system", "Be brief.", "human", "Hi", "gpt", "Hello"), Tools: "[]"}, nil},
		{"ends on a call", &ShareGPT{Conversations: turns("human", "Weather?", "function_call", fc), Tools: tools}, nil},
		{"parallel calls as a list", &ShareGPT{Conversations: turns("human", "Weather?", "function_call", "["+fc+","+fc+"]", "observation", "[1,2]", "gpt", "ok"), Tools: tools}, nil},
		{"wrapped tools", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]`}, nil},
		{"empty observation", &ShareGPT{Conversations: turns("human", "a", "function_call", fc, "observation", "", "gpt", "b"), Tools: tools}, nil},

		{"nil", nil, []string{"lf_empty@conversations"}},
		{"only system", &ShareGPT{Conversations: turns("system", "x"), Tools: "[]"}, []string{"lf_empty@conversations"}},
		{"starts with gpt", &ShareGPT{Conversations: turns("gpt", "a", "human", "b"), Tools: "[]"},
			[]string{"lf_role_order@conversations[0]", "lf_role_order@conversations[1]"}},
		{"two calls in a row", &ShareGPT{Conversations: turns("human", "a", "function_call", fc, "function_call", fc, "observation", "x"), Tools: tools},
			[]string{"lf_role_order@conversations[2]", "lf_role_order@conversations[3]"}},
		{"system not first", &ShareGPT{Conversations: turns("human", "a", "system", "b"), Tools: "[]"}, []string{"lf_role_order@conversations[1]"}},
		{"unknown role", &ShareGPT{Conversations: turns("user", "a", "assistant", "b"), Tools: "[]"},
			[]string{"lf_role_order@conversations[0]", "lf_role_order@conversations[1]"}},
		{"odd count", &ShareGPT{Conversations: turns("human", "a", "gpt", "b", "human", "c"), Tools: "[]"}, []string{"lf_odd_count@conversations"}},
		{"odd count after system", &ShareGPT{Conversations: turns("system", "s", "human", "a"), Tools: "[]"}, []string{"lf_odd_count@conversations"}},
		{"missing from", &ShareGPT{Conversations: []Turn{{Value: "a"}, {From: "gpt", Value: "b"}}, Tools: "[]"}, []string{"lf_missing_field@conversations[0]"}},
		{"empty value", &ShareGPT{Conversations: turns("human", " ", "gpt", "b"), Tools: "[]"}, []string{"empty_turn@conversations[0]"}},
		{"call not JSON", &ShareGPT{Conversations: turns("human", "a", "function_call", "get_weather(city='Paris')"), Tools: tools}, []string{"lf_bad_function_call@conversations[1]"}},
		{"call without arguments", &ShareGPT{Conversations: turns("human", "a", "function_call", `{"name":"f"}`), Tools: tools}, []string{"lf_bad_function_call@conversations[1]"}},
		{"arguments as a string", &ShareGPT{Conversations: turns("human", "a", "function_call", `{"name":"f","arguments":"{\"x\":1}"}`), Tools: tools}, []string{"lf_bad_function_call@conversations[1]"}},
		{"call without name", &ShareGPT{Conversations: turns("human", "a", "function_call", `{"arguments":{}}`), Tools: tools}, []string{"lf_bad_function_call@conversations[1]"}},
		{"empty call list", &ShareGPT{Conversations: turns("human", "a", "function_call", `[]`), Tools: tools}, []string{"lf_bad_function_call@conversations[1]"}},
		{"bad element in call list", &ShareGPT{Conversations: turns("human", "a", "function_call", "["+fc+",3]"), Tools: tools}, []string{"lf_bad_function_call@conversations[1]"}},
		{"tools empty string", &ShareGPT{Conversations: turns("human", "a", "gpt", "b")}, []string{"lf_bad_tools@tools"}},
		{"tools an object", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `{"name":"f"}`}, []string{"lf_bad_tools@tools"}},
		{"tools not JSON", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `[{"name":"f"`}, []string{"lf_bad_tools@tools"}},
		{"tool without name", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `[{"description":"x"}]`}, []string{"lf_bad_tools@tools"}},
		{"wrapped tool without function", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `[{"type":"function"}]`}, []string{"lf_bad_tools@tools"}},
		{"parameters not an object", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `[{"name":"f","parameters":"x"}]`}, []string{"lf_bad_tools@tools"}},
		{"properties not an object", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `[{"name":"f","parameters":{"properties":[]}}]`}, []string{"lf_bad_tools@tools"}},
		{"tool a string", &ShareGPT{Conversations: turns("human", "a", "gpt", "b"), Tools: `["f"]`}, []string{"lf_bad_tools@tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckShareGPT(tt.s)
			if !slices.Equal(kinds(got), tt.want) {
				t.Fatalf("got %v, want %v\n%v", kinds(got), tt.want, got)
			}
			for _, p := range got {
				if p.Check != "sharegpt" || p.Msg == "" || !strings.HasPrefix(p.Kind, "lf_") && p.Kind != ReasonEmptyTurn {
					t.Errorf("bad problem %+v", p)
				}
			}
		})
	}
}

// LLaMA-Factory's own demo files pass, every row.
func TestCheckShareGPTDemos(t *testing.T) {
	for _, f := range []string{"llamafactory/glaive_toolcall_en_demo.json", "llamafactory/glaive_toolcall_zh_demo.json"} {
		b, err := os.ReadFile(sharedData(t, f))
		if err != nil {
			t.Fatal(err)
		}
		var rows []ShareGPT
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 300 {
			t.Fatalf("%s: %d rows", f, len(rows))
		}
		for i := range rows {
			if ps := CheckShareGPT(&rows[i]); ps != nil {
				t.Errorf("%s row %d: %v", f, i, ps)
			}
		}
	}
}

// The ToolACE rows converted by a third-party script (README.md of the
// shared data) carry the script's defects: rows 27 and 30 have an empty gpt
// turn, row 85 an empty list as its function_call. Everything else passes.
func TestCheckShareGPTConvertedToolACE(t *testing.T) {
	b, err := os.ReadFile(sharedData(t, "toolace/toolace_first100_sharegpt_partially_converted.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []ShareGPT
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{
		27: {"empty_turn@conversations[1]"},
		30: {"empty_turn@conversations[1]"},
		85: {"lf_bad_function_call@conversations[3]"},
	}
	for i := range rows {
		if got := kinds(CheckShareGPT(&rows[i])); !slices.Equal(got, want[i]) {
			t.Errorf("row %d: got %v, want %v", i, got, want[i])
		}
	}
}

func FuzzCheckShareGPT(f *testing.F) {
	f.Add([]byte(`{"conversations":[{"from":"human","value":"a"},{"from":"function_call","value":"{\"name\":\"f\",\"arguments\":{}}"}],"tools":"[]"}`))
	f.Add([]byte(`{"conversations":[{"from":"system","value":""}],"tools":"[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]"}`))
	f.Add([]byte(`{"conversations":null,"tools":"[1,null,{}]"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s ShareGPT
		if json.Unmarshal(b, &s) != nil {
			return
		}
		ps := CheckShareGPT(&s)
		for _, p := range ps {
			if p.Check != "sharegpt" || p.Msg == "" || !strings.HasPrefix(p.Kind, "lf_") && p.Kind != ReasonEmptyTurn {
				t.Fatalf("bad problem %+v", p)
			}
		}
		// A sample that passes satisfies the alternation and count rules.
		if ps == nil {
			c := s.Conversations
			if len(c) > 0 && c[0].From == "system" {
				c = c[1:]
			}
			if len(c) == 0 || len(c)%2 != 0 {
				t.Fatalf("passed with %d turns", len(c))
			}
		}
	})
}

// The demo's thoughts: true export wrote <think>…</think> without the
// newlines of the default thought words, which qwen3 needs: LLaMA-Factory
// then fails to parse the call. glm4_7's words have no newlines.
func TestShareGPTThoughtWords(t *testing.T) {
	qwen3, _ := LookupLFTemplate("qwen3")
	glm47, _ := LookupLFTemplate("glm4_7")
	call := `{"name": "w", "arguments": {}}`
	s := &ShareGPT{Tools: "[]", Conversations: []Turn{
		{From: "human", Value: "weather?"},
		{From: "function_call", Value: "<think>They want the weather.</think>" + call},
	}}
	for _, tt := range []struct {
		tpl   *LFTemplate
		value string
		ok    bool
	}{
		{nil, "<think>They want the weather.</think>" + call, false},
		{qwen3, "<think>They want the weather.</think>" + call, false},
		{qwen3, qwen3.Thought("They want the weather.") + call, true},
		{glm47, "<think>They want the weather.</think>" + call, true},
		{glm47, qwen3.Thought("They want the weather.") + call, true},
	} {
		s.Template = tt.tpl
		s.Conversations[1].Value = tt.value
		ps := CheckShareGPT(s)
		if tt.ok != (len(ps) == 0) || !tt.ok && ps[0].Kind != ReasonLFBadFunctionCall {
			t.Errorf("%v %q: %v", tt.tpl, tt.value, ps)
		}
	}
}
