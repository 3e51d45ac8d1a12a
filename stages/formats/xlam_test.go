package formats

import (
	"fmt"
	"strings"
	"testing"
)

const xTools = `[{"name": "live_giveaways_by_type", "description": "Giveaways", "parameters": {"type": {"description": "kind", "type": "str", "default": "game"}}}, {"name": "bmi", "description": "BMI", "parameters": {"weight": {"description": "kg", "type": "float"}, "height": {"description": "m", "type": "float, optional"}}}]`

func TestXLAM(t *testing.T) {
	runParseCases(t, "xlam", []parseCase{
		{name: "the same tool twice in parallel",
			row: rowJSON("id", 0, "query", "Giveaways for beta and games?", "answers",
				`[{"name": "live_giveaways_by_type", "arguments": {"type": "beta"}}, {"name": "live_giveaways_by_type", "arguments": {"type": "game"}}]`, "tools", xTools),
			want: `tools: live_giveaways_by_type, bmi
user: Giveaways for beta and games?
assistant: -> live_giveaways_by_type{"type":"beta"} -> live_giveaways_by_type{"type":"game"}
#xlam_id=0`},
		{name: "answers and tools as arrays, string id, numbers kept",
			row:  rowJSON("id", "x-9", "query", "BMI for 70.0 kg?", "answers", raw(`[{"name": "bmi", "arguments": {"weight": 70.0}}]`), "tools", raw(xTools)),
			want: "tools: live_giveaways_by_type, bmi\nuser: BMI for 70.0 kg?\nassistant: -> bmi{\"weight\":70.0}\n#xlam_id=x-9"},
		{name: "no calls (irrelevance rows)",
			row:  rowJSON("id", 3, "query", "Tell me a joke", "answers", "[]", "tools", xTools),
			want: "tools: live_giveaways_by_type, bmi\nuser: Tell me a joke\n#xlam_id=3"},
		{name: "repair: arguments as a JSON string",
			row:  rowJSON("id", 4, "query", "BMI?", "answers", `[{"name": "bmi", "arguments": "{\"weight\": 60}"}]`, "tools", xTools),
			want: "tools: live_giveaways_by_type, bmi\nuser: BMI?\nassistant: -> bmi{\"weight\":60}\n#repairs=string_arguments\n#xlam_id=4"},
		{name: "reject: answers not JSON", row: rowJSON("id", 1, "query", "q", "answers", "[{", "tools", xTools), reason: "bad_json", detail: "answers"},
		{name: "reject: tools not JSON", row: rowJSON("id", 1, "query", "q", "answers", "[]", "tools", "[{"), reason: "bad_json", detail: "tools"},
		{name: "reject: no query", row: rowJSON("id", 1, "answers", "[]", "tools", xTools), reason: "xlam_bad_field", detail: "query"},
		{name: "reject: no tools", row: rowJSON("id", 1, "query", "q", "answers", "[]"), reason: "xlam_bad_field", detail: "tools"},
		{name: "reject: bad id", row: rowJSON("id", []int{1}, "query", "q", "answers", "[]", "tools", xTools), reason: "xlam_bad_field", detail: "id"},
		{name: "reject: answers an object", row: rowJSON("id", 1, "query", "q", "answers", `{"name": "bmi"}`, "tools", xTools), reason: "xlam_bad_answers", detail: "JSON object"},
		{name: "reject: call without arguments", row: rowJSON("id", 1, "query", "q", "answers", `[{"name": "bmi"}]`, "tools", xTools), reason: "xlam_bad_answers", detail: "has no arguments"},
		{name: "reject: arguments a list", row: rowJSON("id", 1, "query", "q", "answers", `[{"name": "bmi", "arguments": [70]}]`, "tools", xTools), reason: "xlam_bad_answers", detail: "JSON array"},
		{name: "reject: call without a name", row: rowJSON("id", 1, "query", "q", "answers", `[{"arguments": {}}]`, "tools", xTools), reason: "xlam_bad_answers", detail: "no name"},
		{name: "reject: undeclared tool", row: rowJSON("id", 1, "query", "q", "answers", `[{"name": "weather", "arguments": {}}]`, "tools", xTools), reason: "undeclared_call"},
		{name: "reject: tools an object", row: rowJSON("id", 1, "query", "q", "answers", "[]", "tools", `{"name": "bmi"}`), reason: "bad_tools"},
	})
}

func TestXLAMSchema(t *testing.T) {
	rec, err := Parse("xlam", "x", 0, []byte(rowJSON("id", 0, "query", "q", "answers", "[]", "tools", xTools)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"type":"object","properties":{"type":{"description":"kind","type":"string","default":"game"}},"required":["type"]}`,
		`{"type":"object","properties":{"weight":{"description":"kg","type":"number"},"height":{"description":"m","type":"number"}},"required":["weight"]}`,
	}
	for i, tool := range rec.Tools {
		if string(tool.Parameters) != want[i] {
			t.Errorf("tool %d: got %s, want %s", i, tool.Parameters, want[i])
		}
	}
}

// A tool of many parameters (past the parser's set threshold) reads as a
// narrow one, and a parameter named twice is refused as there.
func TestXLAMWideTool(t *testing.T) {
	params := func(n int, extra string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"p%d": {"description": "d", "type": "str"}`, i)
		}
		return `[{"name": "wide", "description": "many", "parameters": {` + b.String() + extra + `}}]`
	}
	for _, tools := range []string{params(300, ""), params(300, `, "p0": {"description": "again", "type": "str"}`)} {
		rec, err := Parse("xlam", "x", 0, []byte(rowJSON("id", 0, "query", "q", "answers", "[]", "tools", tools)))
		dup := strings.Contains(tools, `"again"`)
		if dup != (err != nil) || !dup && strings.Count(string(rec.Tools[0].Parameters), `"description":"d"`) != 300 {
			t.Errorf("duplicate %v: error %v", dup, err)
		}
	}
}
