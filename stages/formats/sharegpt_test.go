package formats

import "testing"

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
