package translate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestParseAnswer(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		detail string // "" means the answer parses
	}{
		{"minimal", `{"functions":[],"conversations":[]}`, ""},
		{"full turn", `{"conversations":[{"role":"assistant","content":"好","reasoning":"想","tool_calls":[{"name":"f","arguments":{}}],"results":[{"name":"f","content":[1]}]}]}`, ""},
		{"fenced", "```json\n{\"conversations\":[]}\n```", ""},
		{"bare fence", "```\n{\"conversations\":[]}\n```", ""},
		// The tag is dropped whatever it says (llm.StripFence, every stage's rule).
		{"other fence language", "```python\n{\"conversations\":[]}\n```", ""},
		{"empty", ``, "not valid JSON"},
		{"prose around", `Sure! {"conversations":[]}`, "not valid JSON"},
		{"string", `"hi"`, "want an object"},
		{"no conversations", `{"functions":[]}`, `"conversations" is missing`},
		{"duplicate key", `{"conversations":[],"conversations":[]}`, "appears twice"},
		{"unknown key", `{"conversations":[],"lang":"zh"}`, `unexpected key "lang"`},
		{"functions not list", `{"functions":{},"conversations":[]}`, "want a list"},
		{"system not string", `{"system":1,"conversations":[]}`, "want a string"},
		{"turn not object", `{"conversations":["hi"]}`, "want an object"},
		{"turn without role", `{"conversations":[{"content":"x"}]}`, `"role" is missing`},
		{"content not string", `{"conversations":[{"role":"user","content":["x"]}]}`, "want a string"},
		{"unknown turn key", `{"conversations":[{"role":"user","text":"x"}]}`, `unexpected key "text"`},
		{"call not object", `{"conversations":[{"role":"assistant","tool_calls":["f"]}]}`, "want an object"},
		{"call extra key", `{"conversations":[{"role":"assistant","tool_calls":[{"name":"f","arguments":{},"id":"1"}]}]}`, `"name" and "arguments"`},
		{"call name not string", `{"conversations":[{"role":"assistant","tool_calls":[{"name":1,"arguments":{}}]}]}`, `"name" must be a string`},
		{"arguments as string", `{"conversations":[{"role":"assistant","tool_calls":[{"name":"f","arguments":"{}"}]}]}`, "want an object"},
		{"result without content", `{"conversations":[{"role":"tool","results":[{"name":"f","output":1}]}]}`, `"name" and "content"`},
	}
	for _, c := range cases {
		a, p := parseAnswer([]byte(c.in))
		switch {
		case c.detail == "" && p != nil:
			t.Errorf("%s: %v", c.name, p)
		case c.detail != "" && p == nil:
			t.Errorf("%s: parsed, want %q", c.name, c.detail)
		case c.detail != "" && (p.reason != ReasonInvalidJSON || !strings.Contains(p.String(), c.detail)):
			t.Errorf("%s: %s %q, want %q", c.name, p.reason, p, c.detail)
		case c.detail == "" && a == nil:
			t.Errorf("%s: nil answer", c.name)
		}
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"functions":[],"conversations":[]}`,
		`{"conversations":[{"role":"assistant","tool_calls":[{"name":"f","arguments":{"a":"b"}}]},{"role":"tool","results":[{"name":"f","content":"x"}]}]}`,
		"```json\n{\"conversations\":[{\"role\":\"user\",\"content\":\"好\"}]}\n```",
		`{"conversations":[{"role":"user"}],"system":"s"}`,
		`[`, `{"conversations":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, p := parseAnswer(b)
		if (a == nil) == (p == nil) {
			t.Fatalf("want exactly one of answer and problem: %v %v", a, p)
		}
		if p != nil {
			if p.reason != ReasonInvalidJSON || p.detail == "" {
				t.Fatalf("problem %+v", p)
			}
			return
		}
		root, err := parseTree([]byte(llm.StripFence(string(b))))
		if err != nil {
			t.Fatalf("parsed an answer that is not JSON: %q", b)
		}
		if n := root.Get("conversations"); n == nil || len(n.Elems) != len(a.turns) {
			t.Fatalf("turn count differs from the JSON")
		}
		for _, turn := range a.turns {
			for _, c := range turn.calls {
				if c.args == nil || c.args.Kind != jsontree.Object {
					t.Fatalf("call without an argument object")
				}
			}
			for _, r := range turn.results {
				if r.content == nil {
					t.Fatalf("result without content")
				}
			}
		}
	})
}

// TestAnswerSchema: the schema sent with the request is valid JSON Schema
// 2020-12, accepts the good answer and refuses a structurally broken one.
func TestAnswerSchema(t *testing.T) {
	w := toWire(loadRecord(t))
	raw := answerSchema(w)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("answer.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("answer.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v\n%s", err, raw)
	}
	validate := func(m map[string]any) error {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(mustJSON(t, m)))
		if err != nil {
			t.Fatal(err)
		}
		return sch.Validate(inst)
	}
	if err := validate(okAnswer(t)); err != nil {
		t.Errorf("good answer refused: %v", err)
	}
	breaks := map[string]func(m map[string]any){
		"call dropped": func(m map[string]any) { turn(m, 1)["tool_calls"] = turn(m, 1)["tool_calls"].([]any)[:1] },
		"role changed": func(m map[string]any) { turn(m, 0)["role"] = "assistant" },
		"renamed":      func(m map[string]any) { call(m, 5, 0)["name"] = "reserve" },
		"turn dropped": func(m map[string]any) { m["conversations"] = m["conversations"].([]any)[:7] },
		"extra key":    func(m map[string]any) { turn(m, 0)["lang"] = "zh" },
		"no system":    func(m map[string]any) { delete(m, "system") },
	}
	for name, br := range breaks {
		m := okAnswer(t)
		br(m)
		if validate(m) == nil {
			t.Errorf("%s: accepted by the schema", name)
		}
	}
}
