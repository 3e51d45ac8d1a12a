package formats

import (
	"testing"

	"github.com/augmentdata/augment/jsontree"
)

const sTools = `[{"name": "hold", "description": "Hold a book", "parameters": {"type": "object", "properties": {"isbn": {"type": "string"}}, "required": ["isbn"]}}]`

type turn map[string]any

func sRow(tools any, turns ...turn) string { return rowJSON("conversations", turns, "tools", tools) }

func TestShareGPT(t *testing.T) {
	human := turn{"from": "human", "value": "Hold 123."}
	call := turn{"from": "function_call", "value": `{"name": "hold", "arguments": {"isbn": "123"}}`}
	obs := turn{"from": "observation", "value": `{"ok": true}`}
	gpt := turn{"from": "gpt", "value": "Done."}
	two := turn{"from": "function_call", "value": `[{"name": "hold", "arguments": {"isbn": "1"}}, {"name": "hold", "arguments": "{\"isbn\": \"2\"}"}]`}
	runParseCases(t, "sharegpt", []parseCase{
		{name: "LLaMA-Factory demo shape",
			row:  sRow(sTools, human, call, obs, gpt),
			want: "tools: hold\nuser: Hold 123.\nassistant: -> hold{\"isbn\":\"123\"}\ntool: hold={\"ok\":true}\nassistant: Done."},
		{name: "system column, tools as a list of OpenAI tools, user/assistant/tool spellings",
			row: rowJSON("system", "Be kind.", "tools", raw(`[{"type": "function", "function": `+sTools[1:len(sTools)-1]+`}]`), "conversations", []turn{
				{"from": "user", "value": "Hold 123."}, call, {"from": "tool", "value": "held"}, {"from": "assistant", "value": "Done."}}),
			want: "system: Be kind.\ntools: hold\nuser: Hold 123.\nassistant: -> hold{\"isbn\":\"123\"}\ntool: hold=held\nassistant: Done."},
		{name: "leading system turn overrides the column",
			row:  rowJSON("system", "column", "conversations", []turn{{"from": "system", "value": "turn"}, human, gpt}),
			want: "system: turn\nuser: Hold 123.\nassistant: Done."},
		{name: "parallel calls answered by one observation holding an array",
			row:  sRow(sTools, human, two, turn{"from": "observation", "value": `[{"ok": 1}, "queued"]`}, gpt),
			want: "tools: hold\nuser: Hold 123.\nassistant: -> hold{\"isbn\":\"1\"} -> hold{\"isbn\":\"2\"}\ntool: hold={\"ok\":1} | hold=queued\nassistant: Done."},
		{name: "parallel calls answered by wrapped results",
			row:  sRow(sTools, human, two, turn{"from": "observation", "value": `[{"name": "hold", "results": {"ok": 1}}, {"tool_call_id": "c2", "name": "hold", "content": "{'ok': 2}"}]`}),
			want: "tools: hold\nuser: Hold 123.\nassistant: -> hold{\"isbn\":\"1\"} -> hold{\"isbn\":\"2\"}\ntool: hold={\"ok\":1} | hold={'ok': 2}"},
		{name: "parallel calls answered by one observation each",
			row:  sRow(sTools, human, two, turn{"from": "observation", "value": "a"}, turn{"from": "observation", "value": "b"}, gpt),
			want: "tools: hold\nuser: Hold 123.\nassistant: -> hold{\"isbn\":\"1\"} -> hold{\"isbn\":\"2\"}\ntool: hold=a | hold=b\nassistant: Done."},
		{name: "one call: the observation text is the result, even an array",
			row:  sRow(sTools, human, call, turn{"from": "observation", "value": `[{"name": "hold", "results": 1}]`}),
			want: "tools: hold\nuser: Hold 123.\nassistant: -> hold{\"isbn\":\"123\"}\ntool: hold=[{\"name\":\"hold\",\"results\":1}]"},
		{name: "reasoning before a function call",
			row:  sRow(sTools, human, turn{"from": "function_call", "value": "<think>Need the ISBN.</think>\n" + `{"name": "hold", "arguments": {"isbn": "123"}}`}),
			want: "tools: hold\nuser: Hold 123.\nassistant: (Need the ISBN.) -> hold{\"isbn\":\"123\"}"},
		{name: "qwen3 thought words, then text and a decision token before the calls in tool-call words",
			row:  sRow(sTools, human, turn{"from": "function_call", "value": "<think>\nNeed the ISBN.\n</think>\n\n<|use_tool|>I will hold it.\n<tool_call>" + `{"name": "hold", "arguments": {"isbn": "123"}}</tool_call>`}),
			want: "tools: hold\nuser: Hold 123.\nassistant: (Need the ISBN.) <|use_tool|>I will hold it. -> hold{\"isbn\":\"123\"}"},
		{name: "empty tools string and missing tools",
			row:  rowJSON("conversations", []turn{human, gpt}, "tools", ""),
			want: "user: Hold 123.\nassistant: Done."},
		{name: "v1 messages with reasoning, text and tool_call parts",
			row: rowJSON("messages", []turn{
				{"role": "system", "content": []turn{{"type": "text", "value": "Think first."}}},
				{"role": "user", "content": []turn{{"type": "text", "value": "Hold 1 and 2."}}},
				{"role": "assistant", "content": []turn{{"type": "reasoning", "value": "Two holds."}, {"type": "tool_call", "value": `{"name": "hold", "arguments": {"isbn": "1"}}`}, {"type": "tool_call", "value": `{"name": "hold", "arguments": {"isbn": "2"}}`}}},
				{"role": "tool", "content": []turn{{"type": "text", "value": `[{"name": "hold", "content": {"ok": 1}}, {"name": "hold", "content": {"ok": 2}}]`}}},
				{"role": "assistant", "content": []turn{{"type": "reasoning", "value": "Report."}, {"type": "text", "value": "Both held."}}},
			}, "tools", `[{"type": "function", "function": {"name": "hold", "description": "h", "parameters": {"type": "dict", "properties": {"isbn": {"type": "str", "default": "0"}}}, "required": ["isbn"]}}]`),
			want: "system: Think first.\ntools: hold\nuser: Hold 1 and 2.\nassistant: (Two holds.) -> hold{\"isbn\":\"1\"} -> hold{\"isbn\":\"2\"}\ntool: hold={\"ok\":1} | hold={\"ok\":2}\nassistant: (Report.) Both held."},
		{name: "tools taken from a ToolACE system text when the column is empty",
			row:  rowJSON("conversations", []turn{{"from": "human", "value": "Time?"}, {"from": "function_call", "value": `{"name": "now", "arguments": {}}`}}, "system", toolacePrefix+taTools+toolaceSuffix, "tools", "[]"),
			want: "tools: Tide Table, now\nuser: Time?\nassistant: -> now{}\n#system_template=toolace"},
		{name: "tools taken from a glaive system text when the column is empty",
			row:  rowJSON("conversations", []turn{{"from": "human", "value": "Joke?"}}, "system", gLead+gTool2+"\n"),
			want: "tools: get_joke\nuser: Joke?\n#system_template=glaive"},

		{name: "reject: no conversations", row: rowJSON("tools", sTools), reason: "sharegpt_missing_conversations"},
		{name: "reject: system not a string", row: rowJSON("system", 1, "conversations", []turn{human}), reason: "sharegpt_bad_field"},
		{name: "reject: empty conversation", row: rowJSON("conversations", []turn{}), reason: "sharegpt_empty_conversation"},
		{name: "reject: unknown role", row: sRow(sTools, turn{"from": "bot", "value": "x"}), reason: "sharegpt_unknown_role", detail: `"bot"`},
		{name: "reject: turn without value", row: sRow(sTools, turn{"from": "human"}), reason: "sharegpt_bad_turn"},
		{name: "reject: content a number", row: sRow(sTools, turn{"from": "human", "value": 3}), reason: "sharegpt_bad_turn"},
		{name: "reject: content null", row: sRow(sTools, turn{"from": "human", "value": nil}), reason: "sharegpt_bad_turn"},
		{name: "reject: bad part", row: rowJSON("messages", []turn{{"role": "user", "content": []int{1}}}), reason: "sharegpt_bad_turn", detail: "part 0"},
		{name: "reject: image part", row: rowJSON("messages", []turn{{"role": "user", "content": []turn{{"type": "image", "value": "x.png"}}}}), reason: "sharegpt_unsupported_content"},
		{name: "reject: tools not JSON", row: sRow("[{", human), reason: "sharegpt_bad_tools"},
		{name: "reject: tools an object", row: sRow(`{"name": "hold"}`, human), reason: "bad_tools"},
		{name: "reject: function call not JSON", row: sRow(sTools, human, turn{"from": "function_call", "value": "hold(isbn=1)"}), reason: "sharegpt_bad_function_call"},
		{name: "reject: function call without arguments", row: sRow(sTools, human, turn{"from": "function_call", "value": `{"name": "hold"}`}), reason: "sharegpt_bad_function_call", detail: "no arguments"},
		{name: "reject: empty call list", row: sRow(sTools, human, turn{"from": "function_call", "value": `[]`}), reason: "sharegpt_bad_function_call", detail: "empty list"},
		{name: "reject: observation without a call", row: sRow(sTools, human, gpt, obs, gpt), reason: "sharegpt_observation_without_call", detail: "turn 2"},
		{name: "reject: two observations for one call", row: sRow(sTools, human, call, obs, obs), reason: "sharegpt_observation_without_call", detail: "turn 3"},
		{name: "reject: one plain observation for two calls", row: sRow(sTools, human, two, obs), reason: "sharegpt_observation_count_mismatch"},
		{name: "reject: array of the wrong length", row: sRow(sTools, human, two, turn{"from": "observation", "value": `[1, 2, 3]`}), reason: "sharegpt_observation_count_mismatch"},
		{name: "reject: undeclared tool", row: sRow("[]", human, call), reason: "undeclared_call"},
	})
}

// TestShareGPTReingestsMetaTool: augment's own open-world exports list
// meta_tool and call the tools its results return; those count as declared
// from the result on, in either result format and for parallel retrievals.
func TestShareGPTReingestsMetaTool(t *testing.T) {
	metaTools := `[{"name": "meta_tool", "description": "Find a tool", "parameters": {"type": "object", "properties": {"tool_description": {"type": "string"}, "param_description": {"type": "array", "items": {"type": "string"}}}}}, {"name": "get_user_input", "description": "Not invoke any additional functions.", "parameters": {"type": "object", "properties": {}}}]`
	human := turn{"from": "human", "value": "Traffic in Miami?"}
	ask := turn{"from": "function_call", "value": `{"name": "meta_tool", "arguments": {"tool_description": "Get the current traffic report", "param_description": ["The city and state"]}}`}
	askTwo := turn{"from": "function_call", "value": `[{"name": "meta_tool", "arguments": {"tool_description": "traffic", "param_description": []}}, {"name": "meta_tool", "arguments": {"tool_description": "tolls", "param_description": []}}]`}
	use := turn{"from": "function_call", "value": "<think>I will call get_traffic_report.</think>" + `{"name": "get_traffic_report", "arguments": {"location": "Miami"}}`}
	useBoth := turn{"from": "function_call", "value": `[{"name": "get_traffic_report", "arguments": {"location": "Miami"}}, {"name": "Get-Tolls", "arguments": {}}]`}
	obs := turn{"from": "observation", "value": `{"status": "heavy"}`}
	reply := turn{"from": "function_call", "value": `{"name": "get_user_input", "arguments": {}}`}
	tolls := `{"name":"get_tolls","description":"Toll prices","parameters":{"type":"object","properties":{}}}`
	askLine := `assistant: -> meta_tool{"tool_description":"Get the current traffic report","param_description":["The city and state"]}`
	useLine := `assistant: (I will call get_traffic_report.) -> get_traffic_report{"location":"Miami"}`
	runParseCases(t, "sharegpt", []parseCase{
		{name: "paper result (Fig 12)",
			row: sRow(metaTools, human, ask, turn{"from": "observation", "value": fig12}, use, obs, reply),
			want: "tools: meta_tool, get_user_input\nuser: Traffic in Miami?\n" + askLine + "\ntool: meta_tool=" + mustCompact(t, fig12) + "\n" +
				useLine + "\ntool: get_traffic_report={\"status\":\"heavy\"}\nassistant: -> get_user_input{}"},
		{name: "bare result",
			row:  sRow(metaTools, human, ask, turn{"from": "observation", "value": mtDef}, use),
			want: "tools: meta_tool, get_user_input\nuser: Traffic in Miami?\n" + askLine + "\ntool: meta_tool=" + mtDef + "\n" + useLine},
		{name: "parallel retrieval in one paper tool turn; a returned name normalised",
			row: sRow(metaTools, human, askTwo, turn{"from": "observation", "value": `[{"name": "meta_tool", "function_id": 0, "results": ` + mtDef + `}, {"name": "meta_tool", "function_id": 1, "results": ` + tolls + `}]`}, useBoth),
			want: "tools: meta_tool, get_user_input\nuser: Traffic in Miami?\n" +
				`assistant: -> meta_tool{"tool_description":"traffic","param_description":[]} -> meta_tool{"tool_description":"tolls","param_description":[]}` + "\n" +
				`tool: meta_tool={"name":"meta_tool","function_id":0,"results":` + mtDef + `} | meta_tool={"name":"meta_tool","function_id":1,"results":` + tolls + "}\n" +
				`assistant: -> get_traffic_report{"location":"Miami"} -> get_tolls{}` + "\n#repairs=call_name_normalized"},
		{name: "reject: a call before the result that returns its tool",
			row: sRow(metaTools, human, use, obs, ask, turn{"from": "observation", "value": fig12}), reason: "undeclared_call", detail: "turn 1"},
		{name: "reject: a tool the result did not return",
			row: sRow(metaTools, human, ask, turn{"from": "observation", "value": `[{"name": "meta_tool", "function_id": 0, "results": ` + tolls + `}]`}, use), reason: "undeclared_call", detail: "nor returned by meta_tool"},
		{name: "reject: a result that is no definition returns nothing",
			row: sRow(metaTools, human, ask, turn{"from": "observation", "value": `no tool found`}, use), reason: "undeclared_call"},
		{name: "reject: results only count for meta_tool calls",
			row: sRow(`[{"name": "lookup", "description": "x", "parameters": {"type": "object", "properties": {}}}]`, human,
				turn{"from": "function_call", "value": `{"name": "lookup", "arguments": {}}`}, turn{"from": "observation", "value": mtDef}, use), reason: "undeclared_call"},
	})
}

func mustCompact(t *testing.T, s string) string {
	t.Helper()
	v, err := jsontree.ParseString(s)
	if err != nil {
		t.Fatal(err)
	}
	return jsontree.CompactString(&v)
}
