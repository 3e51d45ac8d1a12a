package formats

import (
	"strings"
	"testing"

	"github.com/augmentdata/augment/jsontree"
)

const taTools = `[{"name": "Tide Table", "description": "Tides", "parameters": {"type": "dict", "properties": {"harbour": {"type": "string"}}, "required": ["harbour"]}, "required": null}, {"name": "now", "description": "Time", "parameters": {"type": "dict", "properties": {}}, "required": null}]`

func taSystem(tools string) string { return toolacePrefix + tools + toolaceSuffix + " \n" }

func taRow(system string, turns ...string) string {
	var conv []map[string]string
	for i := 0; i+1 < len(turns); i += 2 {
		conv = append(conv, map[string]string{"from": turns[i], "value": turns[i+1]})
	}
	return rowJSON("system", system, "conversations", conv)
}

func TestToolACE(t *testing.T) {
	sys := taSystem(taTools)
	q := "Tides at Rock?"
	runParseCases(t, "toolace", []parseCase{
		{name: "call, results, answer",
			row: taRow(sys, "user", q, "assistant", `[Tide Table(harbour="Rock")]`, "tool", `[{"name": "Tide Table", "results": {"high": "05:12"}}]`, "assistant", "High tide is at 05:12."),
			want: `tools: Tide Table, now
user: Tides at Rock?
assistant: -> Tide Table{"harbour":"Rock"}
tool: Tide Table={"high":"05:12"}
assistant: High tide is at 05:12.
#system_template=toolace`},
		{name: "stripped template (no trailing space and newline), parallel calls, ends on a call",
			row: taRow(toolacePrefix+taTools+toolaceSuffix, "user", q, "assistant", `[Tide Table(harbour="Rock"), now()]`, "tool",
				`[{"name": "Tide Table", "results": {"high": "05:12"}}, {"name": "now", "results": "12:00"}]`, "user", "Again", "assistant", `[now()]`),
			want: `tools: Tide Table, now
user: Tides at Rock?
assistant: -> Tide Table{"harbour":"Rock"} -> now{}
tool: Tide Table={"high":"05:12"} | now=12:00
user: Again
assistant: -> now{}
#system_template=toolace`},
		{name: "results in another order than the calls",
			row: taRow(sys, "user", q, "assistant", `[Tide Table(harbour="Rock"), now()]`, "tool",
				`[{"name": "now", "results": "12:00"}, {"name": "Tide Table", "results": {"high": "05:12"}}]`),
			want: `tools: Tide Table, now
user: Tides at Rock?
assistant: -> Tide Table{"harbour":"Rock"} -> now{}
tool: Tide Table={"high":"05:12"} | now=12:00
#repairs=results_reordered
#system_template=toolace`},
		{name: "a single result object for a single call",
			row:  taRow(sys, "user", q, "assistant", `[now()]`, "tool", `{"name": "now", "results": {"t": "12:00"}}`),
			want: "tools: Tide Table, now\nuser: Tides at Rock?\nassistant: -> now{}\ntool: now={\"t\":\"12:00\"}\n#system_template=toolace"},
		{name: "prose in brackets that is not a call",
			row:  taRow(sys, "user", q, "assistant", "[Note: tides vary (a lot) by season]"),
			want: "tools: Tide Table, now\nuser: Tides at Rock?\nassistant: [Note: tides vary (a lot) by season]\n#system_template=toolace"},
		{name: "other system text around the template is kept",
			row:  taRow("You are Tidy.\n"+sys+"Answer in English.", "user", q, "assistant", "Which date?"),
			want: "system: You are Tidy.\n\nAnswer in English.\ntools: Tide Table, now\nuser: Tides at Rock?\nassistant: Which date?\n#system_template=toolace"},
		{name: "unknown wording: the list is found by its brackets",
			row:  taRow("你是一个函数调用专家。可用的函数如下：\n"+taTools+"\n请只返回函数调用。", "user", "现在几点？几点了？", "assistant", "[now()]"),
			want: "system: 你是一个函数调用专家。可用的函数如下：\n\n请只返回函数调用。\ntools: Tide Table, now\nuser: 现在几点？几点了？\nassistant: -> now{}\n#lang=zh"},
		{name: "empty tool list",
			row:  taRow(taSystem("[]"), "user", "Hello", "assistant", "Hi!"),
			want: "user: Hello\nassistant: Hi!\n#system_template=toolace"},
		{name: "call name matched after normalising",
			row:  taRow(sys, "user", q, "assistant", `[tide_table(harbour="Rock")]`),
			want: "tools: Tide Table, now\nuser: Tides at Rock?\nassistant: -> Tide Table{\"harbour\":\"Rock\"}\n#repairs=call_name_normalized\n#system_template=toolace"},

		{name: "reject: no tool list", row: taRow("You are helpful.", "user", q), reason: "toolace_missing_tools"},
		{name: "reject: system not a string", row: rowJSON("system", []int{1}, "conversations", []int{}), reason: "toolace_bad_system"},
		{name: "reject: tool list not JSON", row: taRow(taSystem(`[{"name": "f",}]`), "user", q), reason: "toolace_bad_tools_json", detail: "expected a string key"},
		{name: "reject: tool without a name", row: taRow(taSystem(`[{"description": "x"}]`), "user", q), reason: "bad_tool", detail: "tool 0 has no name"},
		{name: "reject: no conversations", row: rowJSON("system", sys), reason: "toolace_missing_conversations"},
		{name: "reject: turn not an object", row: rowJSON("system", sys, "conversations", []string{"hi"}), reason: "toolace_bad_turn"},
		{name: "reject: value not a string", row: rowJSON("system", sys, "conversations", []map[string]any{{"from": "user", "value": 3}}), reason: "toolace_bad_turn"},
		{name: "reject: value null", row: rowJSON("system", sys, "conversations", []map[string]any{{"from": "user", "value": nil}}), reason: "toolace_bad_turn"},
		{name: "reject: system null", row: rowJSON("system", nil, "conversations", []int{}), reason: "toolace_bad_system", detail: `"system" is a JSON null`},
		{name: "reject: no system", row: rowJSON("conversations", []int{}), reason: "toolace_bad_system", detail: `no "system"`},
		{name: "reject: unknown role", row: taRow(sys, "human", q), reason: "toolace_unknown_role", detail: `"human"`},
		{name: "reject: unparseable call", row: taRow(sys, "user", q, "assistant", `[Tide Table(harbour=Rock)]`), reason: "toolace_bad_call_syntax", detail: "expected a literal value"},
		{name: "reject: truncated call list", row: taRow(sys, "user", q, "assistant", `[Tide Table(harbour="Rock", days=3`), reason: "toolace_truncated_call", detail: "closing ]"},
		{name: "reject: positional argument", row: taRow(sys, "user", q, "assistant", `[get_tides("Rock")]`), reason: "toolace_bad_call_syntax", detail: "positional"},
		{name: "reject: tool turn without a call", row: taRow(sys, "user", q, "tool", `[{"name": "now", "results": 1}]`), reason: "toolace_result_without_call"},
		{name: "reject: tool turn after prose", row: taRow(sys, "user", q, "assistant", "Let me see.", "tool", `[]`), reason: "toolace_result_without_call"},
		{name: "reject: two tool turns", row: taRow(sys, "user", q, "assistant", `[now()]`, "tool", `[{"name": "now", "results": 1}]`, "tool", `[{"name": "now", "results": 1}]`), reason: "toolace_result_without_call", detail: "turn 3"},
		{name: "reject: tool turn not JSON", row: taRow(sys, "user", q, "assistant", `[now()]`, "tool", `{"name": "now"`), reason: "toolace_bad_tool_turn"},
		{name: "reject: tool turn item without results", row: taRow(sys, "user", q, "assistant", `[now()]`, "tool", `[{"name": "now", "output": 1}]`), reason: "toolace_bad_tool_turn"},
		{name: "reject: fewer results than calls", row: taRow(sys, "user", q, "assistant", `[now(), now()]`, "tool", `[{"name": "now", "results": 1}]`), reason: "toolace_result_mismatch", detail: "1 results for 2 calls"},
		{name: "reject: result for another tool", row: taRow(sys, "user", q, "assistant", `[now()]`, "tool", `[{"name": "Tide Table", "results": 1}]`), reason: "toolace_result_mismatch", detail: `call 0 ("now")`},
		{name: "reject: call to an undeclared tool", row: taRow(sys, "user", q, "assistant", `[Weather(city="Rock")]`), reason: "undeclared_call"},
	})
}

func TestToolACETools(t *testing.T) {
	rec, err := Parse("toolace", "t", 0, []byte(taRow(taSystem(taTools), "user", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	got := string(rec.Tools[0].Parameters) + "\n" + string(rec.Tools[1].Parameters)
	want := `{"type":"object","properties":{"harbour":{"type":"string"}},"required":["harbour"]}` + "\n" + `{"type":"object","properties":{}}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(rec.System, "expert") {
		t.Fatalf("template text left in the system: %q", rec.System)
	}
}

// TestToolACEFlat holds the reader of ToolACE's tool turns without a tree
// (flatResults) to the tree on turns at its edges: each row gives the same
// record or reject either way (sameEveryWay), and the reader takes the
// turn or leaves it as listed.
func TestToolACEFlat(t *testing.T) {
	sys := taSystem(taTools)
	call := `[Tide Table(harbour="Rock"), now()]`
	for _, c := range []struct {
		name, turn string
		flat       bool
	}{
		{"objects and a string", `[{"name": "Tide Table", "results": {"high": "05:12", "n": [1, -2.5e3, null, true]}}, {"name": "now", "results": "12:00"}]`, true},
		{"reordered, white space", ` [ {"results" : [ ], "name":"now"} ,{"name": "Tide Table", "results": 3} ] `, true},
		{"JSON in a string, escapes", `[{"name": "Tide Table", "results": "{\"a\": [1, 2]}"}, {"name": "now", "results": "say \"hi\"\n\u00e9 \ud800"}]`, true},
		{"Chinese", `[{"name": "Tide Table", "results": {"结果": "高潮"}}, {"name": "now", "results": "十二点"}]`, true},
		{"null results, empty string", `[{"name": "Tide Table", "results": null}, {"name": "now", "results": ""}]`, true},
		{"too few results", `[{"name": "now", "results": 1}]`, true},
		{"an unknown name", `[{"name": "Tide Table", "results": 1}, {"name": "later", "results": 2}]`, true},
		{"a name with escapes", `[{"name": "Tide\u0020Table", "results": 1}, {"name": "now", "results": 2}]`, true},
		{"a key with escapes", `[{"n\u0061me": "Tide Table", "results": 1}, {"name": "now", "results": 2}]`, true},
		{"empty list", `[]`, false},
		{"an object, not a list", `{"name": "now", "results": 1}`, false},
		{"an extra member", `[{"name": "Tide Table", "results": 1, "ok": true}, {"name": "now", "results": 2}]`, false},
		{"a missing member", `[{"name": "Tide Table"}, {"name": "now", "results": 2}]`, false},
		{"a duplicate member", `[{"name": "Tide Table", "name": "now"}, {"name": "now", "results": 2}]`, false},
		{"a null name", `[{"name": null, "results": 1}, {"name": "now", "results": 2}]`, false},
		{"duplicate keys in the results", `[{"name": "Tide Table", "results": {"a": 1, "a": 2}}, {"name": "now", "results": 2}]`, false},
		{"truncated", `[{"name": "Tide Table", "results": {"high": "05`, false},
		{"text after the list", `[{"name": "Tide Table", "results": 1}, {"name": "now", "results": 2}] ok`, false},
		{"not JSON", `Tides are high at noon.`, false},
		// The list and the item are two of the tree's MaxDepth levels.
		{"results nested to the limit", `[{"name": "Tide Table", "results": ` + nested(jsontree.MaxDepth-2) + `}, {"name": "now", "results": 2}]`, true},
		{"results nested past the limit", `[{"name": "Tide Table", "results": ` + nested(jsontree.MaxDepth-1) + `}, {"name": "now", "results": 2}]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sameEveryWay(t, "toolace", taRow(sys, "user", "Tides?", "assistant", call, "tool", c.turn))
			b := &builder{w: &workspace{laid: true}}
			if _, ok := b.flatResults(c.turn, nil); ok != c.flat {
				t.Fatalf("flatResults(%q) took it: %v, want %v", c.turn, ok, c.flat)
			}
		})
	}
}
