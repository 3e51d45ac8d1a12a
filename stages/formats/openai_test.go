package formats

import "testing"

const oTools = `[{"type": "function", "function": {"name": "set_temp", "description": "Set temperature", "parameters": {"type": "object", "properties": {"room": {"type": "string"}, "c": {"type": "number"}}, "required": ["room", "c"]}}}]`

type msg map[string]any

func oCall(id, room string) msg {
	return msg{"id": id, "type": "function", "function": msg{"name": "set_temp", "arguments": `{"room": "` + room + `", "c": 21}`}}
}

func oRow(msgs ...msg) string { return rowJSON("messages", msgs, "tools", raw(oTools)) }

func TestOpenAI(t *testing.T) {
	user := msg{"role": "user", "content": "Kitchen and study to 21."}
	calls := msg{"role": "assistant", "content": nil, "tool_calls": []msg{oCall("a", "kitchen"), oCall("b", "study")}}
	runParseCases(t, "openai", []parseCase{
		{name: "tool messages matched by tool_call_id",
			row: oRow(msg{"role": "system", "content": "Smart home."}, user, calls,
				msg{"role": "tool", "tool_call_id": "b", "content": `{"room": "study"}`},
				msg{"role": "tool", "tool_call_id": "a", "content": `{"room": "kitchen"}`},
				msg{"role": "assistant", "content": "Done."}),
			want: `system: Smart home.
tools: set_temp
user: Kitchen and study to 21.
assistant: -> set_temp{"room":"kitchen","c":21} -> set_temp{"room":"study","c":21}
tool: set_temp={"room":"kitchen"} | set_temp={"room":"study"}
assistant: Done.`},
		{name: "tool messages in order when ids are missing, text parts, reasoning",
			row: oRow(msg{"role": "user", "content": []msg{{"type": "text", "text": "Kitchen"}, {"type": "text", "text": "and study."}}},
				msg{"role": "assistant", "content": "Setting both.", "reasoning_content": "Two rooms.", "tool_calls": []msg{oCall("", "kitchen"), oCall("", "study")}},
				msg{"role": "tool", "content": "ok 1"}, msg{"role": "tool", "content": "ok 2"}),
			want: "tools: set_temp\nuser: Kitchen\nand study.\nassistant: (Two rooms.) Setting both. -> set_temp{\"room\":\"kitchen\",\"c\":21} -> set_temp{\"room\":\"study\",\"c\":21}\ntool: set_temp=ok 1 | set_temp=ok 2"},
		{name: "legacy function_call and function role, tools as a JSON string, arguments as an object",
			row: rowJSON("messages", []msg{user, {"role": "assistant", "content": nil, "function_call": msg{"name": "set_temp", "arguments": raw(`{"room": "hall", "c": 19}`)}},
				{"role": "function", "name": "set_temp", "content": "ok"}, {"role": "developer", "content": "Be brief."}}, "tools", oTools),
			want: "tools: set_temp\nuser: Kitchen and study to 21.\nassistant: -> set_temp{\"room\":\"hall\",\"c\":19}\ntool: set_temp=ok\nsystem: Be brief."},
		{name: "ends on a call", row: oRow(user, calls),
			want: "tools: set_temp\nuser: Kitchen and study to 21.\nassistant: -> set_temp{\"room\":\"kitchen\",\"c\":21} -> set_temp{\"room\":\"study\",\"c\":21}"},

		{name: "reject: no messages", row: rowJSON("tools", raw(oTools)), reason: "openai_missing_messages"},
		{name: "reject: empty messages", row: rowJSON("messages", []msg{}), reason: "openai_empty_messages"},
		{name: "reject: message not an object", row: rowJSON("messages", []int{1}), reason: "openai_bad_message"},
		{name: "reject: no role", row: oRow(msg{"content": "x"}), reason: "openai_bad_message", detail: "no role"},
		{name: "reject: unknown role", row: oRow(msg{"role": "robot", "content": "x"}), reason: "openai_unknown_role"},
		{name: "reject: image content", row: oRow(msg{"role": "user", "content": []msg{{"type": "image_url", "image_url": "x"}}}), reason: "openai_unsupported_content"},
		{name: "reject: content a number", row: oRow(msg{"role": "user", "content": 5}), reason: "openai_bad_message"},
		{name: "reject: arguments not JSON", row: oRow(user, msg{"role": "assistant", "tool_calls": []msg{{"id": "a", "function": msg{"name": "set_temp", "arguments": "{room"}}}}), reason: "openai_bad_tool_call", detail: "not JSON"},
		{name: "reject: tool call without function", row: oRow(user, msg{"role": "assistant", "tool_calls": []msg{{"id": "a"}}}), reason: "openai_bad_tool_call"},
		{name: "reject: tool_calls an object", row: oRow(user, msg{"role": "assistant", "tool_calls": msg{"id": "a"}}), reason: "openai_bad_tool_call"},
		{name: "reject: tool message without a call", row: oRow(user, msg{"role": "tool", "content": "x"}), reason: "openai_result_without_call"},
		{name: "reject: fewer results than calls", row: oRow(user, calls, msg{"role": "tool", "tool_call_id": "a", "content": "x"}), reason: "openai_tool_result_mismatch", detail: "1 tool messages answer 2"},
		{name: "reject: bad tools", row: rowJSON("messages", []msg{user}, "tools", "[{"), reason: "openai_bad_tools"},
		{name: "reject: undeclared tool", row: rowJSON("messages", []msg{user, {"role": "assistant", "tool_calls": []msg{oCall("a", "x")}}}), reason: "undeclared_call"},
		{name: "reject: a number a float cannot hold", row: oRow(user, msg{"role": "assistant", "tool_calls": []msg{{"id": "a", "type": "function", "function": msg{"name": "set_temp", "arguments": `{"room": "x", "c": -2.5E+999}`}}}}),
			reason: "number_out_of_range", detail: "-2.5E+999"},
	})
}
