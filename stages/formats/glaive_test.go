package formats

import (
	"strings"
	"testing"

	"github.com/augmentdata/augment/jsontree"
)

const (
	gLead    = "SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -\n"
	gNoTools = "SYSTEM: You are a helpful assistant, with no access to external functions.\n\n"
	gTool    = "{\n    \"name\": \"find_book\",\n    \"description\": \"Find a book\",\n    \"parameters\": {\n        \"type\": \"object\",\n        \"properties\": {\n            \"title\": {\n                \"type\": \"string\"\n            }\n        },\n        \"required\": [\n            \"title\"\n        ]\n    }\n}"
	gTool2   = "{\n    \"name\": \"get_joke\",\n    \"description\": \"Tell a joke\",\n    \"parameters\": {}\n}"
)

func gRow(system string, turns ...string) string {
	return rowJSON("system", system, "chat", strings.Join(turns, "\n\n\n")+"\n\n\n")
}

func gCall(args string) string {
	return `ASSISTANT: <functioncall> {"name": "find_book", "arguments": ` + args + `} <|endoftext|>`
}

func TestGlaive(t *testing.T) {
	sys := gLead + gTool + "\n"
	user := "USER: Find Dune."
	resp := `FUNCTION RESPONSE: {"found": true, "shelf": "B-12"}`
	answer := "ASSISTANT: It is on shelf B-12. <|endoftext|>"
	runParseCases(t, "glaive", []parseCase{
		{name: "call, response, answer",
			row: gRow(sys, user, gCall(`'{"title": "Dune"}'`), resp, answer),
			want: `tools: find_book
user: Find Dune.
assistant: -> find_book{"title":"Dune"}
tool: find_book={"found":true,"shelf":"B-12"}
assistant: It is on shelf B-12.
#system_template=glaive`},
		{name: "two tools separated by a blank line, \\n\\n separators, ends on a user turn",
			row: rowJSON("system", gLead+gTool+"\n\n"+gTool2+"\n\n", "chat", "USER: Hi\n\nASSISTANT: Hello! <|endoftext|>\n\nUSER: Bye"),
			want: `tools: find_book, get_joke
user: Hi
assistant: Hello!
user: Bye
#system_template=glaive`},
		{name: "quoted arguments with apostrophes, newlines and unicode",
			row: gRow(sys, user, gCall("'{\n  \"title\": \"Dune: Children's Edition\",\n  \"note\": \"don't \\u00e9\"\n}'"), resp, answer),
			want: `tools: find_book
user: Find Dune.
assistant: -> find_book{"title":"Dune: Children's Edition","note":"don't é"}
tool: find_book={"found":true,"shelf":"B-12"}
assistant: It is on shelf B-12.
#system_template=glaive`},
		{name: "no tools",
			row:  gRow(gNoTools, "USER: What is 2+2?", "ASSISTANT: 4. <|endoftext|>"),
			want: "user: What is 2+2?\nassistant: 4.\n#system_template=glaive_no_tools"},
		{name: "text after the tool list stays as the system text",
			row:  gRow(sys+"\nBe brief.\n", "USER: Hi", "ASSISTANT: Hi. <|endoftext|>"),
			want: "system: Be brief.\ntools: find_book\nuser: Hi\nassistant: Hi.\n#system_template=glaive"},
		{name: "unknown system text loses only its label",
			row:  gRow("SYSTEM: You are a pirate.\n", "USER: Hi", "ASSISTANT: Arr. <|endoftext|>"),
			want: "system: You are a pirate.\nuser: Hi\nassistant: Arr."},
		{name: "tool with empty parameters", // checked in detail in TestGlaiveToolSchema
			row:  gRow(gLead+gTool2+"\n", "USER: Joke?", `ASSISTANT: <functioncall> {"name": "get_joke", "arguments": '{}'} <|endoftext|>`, `FUNCTION RESPONSE: {"joke": "..."}`),
			want: "tools: get_joke\nuser: Joke?\nassistant: -> get_joke{}\ntool: get_joke={\"joke\":\"...\"}\n#system_template=glaive"},
		{name: "non-JSON response kept as text",
			row:  gRow(sys, user, gCall(`'{"title": "Dune"}'`), "FUNCTION RESPONSE: shelf B-12, second row"),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\ntool: find_book=shelf B-12, second row\n#system_template=glaive"},
		{name: "Chinese dialogue gets lang=zh",
			row:  gRow(gNoTools, "USER: 你好，请介绍一下台北。", "ASSISTANT: 台北是台湾的最大城市。 <|endoftext|>"),
			want: "user: 你好，请介绍一下台北。\nassistant: 台北是台湾的最大城市。\n#lang=zh\n#system_template=glaive_no_tools"},

		// Repairs.
		{name: "repair: arguments as a bare object",
			row:  gRow(sys, user, gCall("{\n  \"title\": \"Dune\"\n}"), resp),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\ntool: find_book={\"found\":true,\"shelf\":\"B-12\"}\n#repairs=bare_object_arguments\n#system_template=glaive"},
		{name: "repair: arguments as a JSON string",
			row:  gRow(sys, user, gCall(`"{\"title\": \"Dune\"}"`)),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\n#repairs=string_arguments\n#system_template=glaive"},
		{name: "CRLF line ends",
			row:  gRow(sys, "USER: Find Dune.\r\n\r\n\r\nASSISTANT: It is on shelf B-12. <|endoftext|>\r"),
			want: "tools: find_book\nuser: Find Dune.\nassistant: It is on shelf B-12.\n#system_template=glaive"},
		{name: "repair: a JSON string inside the quotes",
			row:  gRow(sys, user, gCall(`'"{\"title\": \"Dune\"}"'`)),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\n#repairs=string_arguments\n#system_template=glaive"},
		{name: `repair: \' inside the quoted arguments`,
			row:  gRow(sys, user, gCall(`'{"title": "Ender\'s Game"}'`)),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Ender's Game\"}\n#repairs=escaped_apostrophe\n#system_template=glaive"},
		{name: "repair: parameters instead of arguments",
			row:  gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "parameters": '{"title": "Dune"}'} <|endoftext|>`),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\n#repairs=parameters_key\n#system_template=glaive"},
		{name: "repair: no arguments at all",
			row:  gRow(gLead+gTool2+"\n", "USER: Joke?", `ASSISTANT: <functioncall> {"name": "get_joke"} <|endoftext|>`),
			want: "tools: get_joke\nuser: Joke?\nassistant: -> get_joke{}\n#repairs=missing_arguments\n#system_template=glaive"},
		{name: "repair: one closing brace too many",
			row:  gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": '{"title": "Dune"}'}} <|endoftext|>`),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\n#repairs=extra_closing_brace\n#system_template=glaive"},
		{name: "repair: AI to= call syntax",
			row:  gRow(sys, user, "ASSISTANT: Let me look.\nAI to= find_book: {\"title\": \"Dune\"} <|endoftext|>", resp),
			want: "tools: find_book\nuser: Find Dune.\nassistant: Let me look. -> find_book{\"title\":\"Dune\"}\ntool: find_book={\"found\":true,\"shelf\":\"B-12\"}\n#repairs=ai_to_call_syntax\n#system_template=glaive"},
		{name: "repair: prose before <functioncall>",
			row:  gRow(sys, user, "ASSISTANT: Sure, searching.\n<functioncall> {\"name\": \"find_book\", \"arguments\": '{\"title\": \"Dune\"}'} <|endoftext|>", resp),
			want: "tools: find_book\nuser: Find Dune.\nassistant: Sure, searching. -> find_book{\"title\":\"Dune\"}\ntool: find_book={\"found\":true,\"shelf\":\"B-12\"}\n#repairs=text_before_call\n#system_template=glaive"},
		{name: "repair: call name differs from the declared one",
			row:  gRow(gLead+strings.Replace(gTool, "find_book", "find-book", 1)+"\n", user, gCall(`'{"title": "Dune"}'`), resp),
			want: "tools: find-book\nuser: Find Dune.\nassistant: -> find-book{\"title\":\"Dune\"}\ntool: find-book={\"found\":true,\"shelf\":\"B-12\"}\n#repairs=call_name_normalized\n#system_template=glaive"},
		{name: "repair: identical duplicate tool declaration",
			row:  gRow(gLead+gTool+"\n\n"+gTool+"\n", user, gCall(`'{"title": "Dune"}'`)),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\n#repairs=duplicate_tool\n#system_template=glaive"},
		{name: "repair: a duplicate between distinct tools, the later ones moved up",
			row:  gRow(gLead+gTool+"\n\n"+gTool2+"\n\n"+gTool+"\n\n"+gTool2+"\n\n"+strings.Replace(gTool2, "get_joke", "get_fact", 1)+"\n", user, gCall(`'{"title": "Dune"}'`)),
			want: "tools: find_book, get_joke, get_fact\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\"}\n#repairs=duplicate_tool\n#system_template=glaive"},
		{name: "repair: two user turns in a row are merged",
			row:  gRow(gNoTools, "USER: I'll start now.\n\n[After a while]", "USER: Done. Stop it.", "ASSISTANT: Stopped. <|endoftext|>"),
			want: "user: I'll start now.\n\n[After a while]\n\nDone. Stop it.\nassistant: Stopped.\n#repairs=merged_user_turns\n#system_template=glaive_no_tools"},
		{name: "repair: prose turn then call turn are merged",
			row:  gRow(sys, user, "ASSISTANT: One moment. <|endoftext|>", gCall(`'{"title": "Dune"}'`), resp),
			want: "tools: find_book\nuser: Find Dune.\nassistant: One moment. -> find_book{\"title\":\"Dune\"}\ntool: find_book={\"found\":true,\"shelf\":\"B-12\"}\n#repairs=merged_assistant_turns\n#system_template=glaive"},
		{name: "repair: <|endoftext|> ending a user turn",
			row:  rowJSON("system", gNoTools, "chat", "USER: Hi <|endoftext|>\n\nASSISTANT: Hello. <|endoftext|>"),
			want: "user: Hi\nassistant: Hello.\n#repairs=stray_endoftext\n#system_template=glaive_no_tools"},
		{name: "several repairs are listed sorted",
			row:  gRow(sys, user, "ASSISTANT: On it.\n<functioncall> {\"name\": \"find_book\", \"arguments\": {\"title\": \"Dune\"}}} <|endoftext|>"),
			want: "tools: find_book\nuser: Find Dune.\nassistant: On it. -> find_book{\"title\":\"Dune\"}\n#repairs=bare_object_arguments,extra_closing_brace,text_before_call\n#system_template=glaive"},

		// Rejects.
		{name: "reject: row is not JSON", row: `{"system": "x", "chat": "USER: hi`, reason: "bad_json", detail: "inside a string at byte 33"},
		{name: "reject: row is an array", row: `[1]`, reason: "row_not_object", detail: "array"},
		{name: "reject: no chat", row: rowJSON("system", gNoTools), reason: "glaive_bad_field", detail: `no "chat"`},
		{name: "reject: chat null", row: rowJSON("system", gNoTools, "chat", nil), reason: "glaive_bad_field", detail: `"chat" is a JSON null`},
		{name: "reject: system not a string", row: rowJSON("system", 3, "chat", "USER: hi"), reason: "glaive_bad_field", detail: `"system" is a JSON number`},
		{name: "reject: broken tool JSON", row: gRow(gLead+"{\n \"name\": \"f\",\n}\n", "USER: hi"), reason: "glaive_bad_tool_json", detail: "expected a string key"},
		{name: "reject: tools not separated by white space only", row: gRow(gLead+gTool+",\n"+gTool2, "USER: hi"), reason: "glaive_bad_tool_json", detail: "followed by"},
		{name: "reject: one name declared twice differently",
			row:    gRow(gLead+gTool+"\n\n"+strings.Replace(gTool, "Find a book", "Find books", 1)+"\n", "USER: hi"),
			reason: "duplicate_tool_conflict", detail: `"find_book"`},
		{name: "reject: empty chat", row: rowJSON("system", gNoTools, "chat", ""), reason: "glaive_empty_chat"},
		{name: "reject: text before the first marker", row: rowJSON("system", gNoTools, "chat", "hello\nUSER: hi"), reason: "glaive_text_before_first_turn"},
		{name: "reject: stray ASSISTANT: inside a function response",
			row:    gRow(sys, user, gCall(`'{"title": "Dune"}'`), "FUNCTION RESPONSE: {\"title\": \"The Next Big Thing in \nASSISTANT: Top Trends\"} <|endoftext|>", "ASSISTANT: Found one. <|endoftext|>"),
			reason: "glaive_stray_turn_marker", detail: "ASSISTANT: inside turn 2"},
		{name: "reject: stray ASSISTANT: inside a user turn",
			row:    gRow(gNoTools, "USER: The book is \"\nASSISTANT: A Modern Approach\", 2 copies. <|endoftext|>", "ASSISTANT: Sure. <|endoftext|>"),
			reason: "glaive_stray_turn_marker", detail: "inside turn 0"},
		{name: "reject: a turn split in two by a marker",
			row:    gRow(sys, "USER: News on AI?", "ASSISTANT: Here are articles on recent developments in <|endoftext|>", "ASSISTANT:\n1. [AI and ML](https://example.com) <|endoftext|>"),
			reason: "glaive_consecutive_assistant_turns", detail: "turn 2"},
		{name: "reject: two answers to one user turn",
			row:    gRow(gNoTools, "USER: g?", "ASSISTANT: g. <|endoftext|>", "ASSISTANT: h. <|endoftext|>"),
			reason: "glaive_consecutive_assistant_turns"},
		{name: "reject: a call turn followed by another assistant turn",
			row:    gRow(sys, user, gCall(`'{"title": "Dune"}'`), "ASSISTANT: Done. <|endoftext|>"),
			reason: "glaive_consecutive_assistant_turns"},
		{name: "reject: assistant turn without <|endoftext|>",
			row:    rowJSON("system", gNoTools, "chat", "USER: Hi\n\nASSISTANT: Hello."),
			reason: "glaive_unterminated_assistant_turn", detail: `"Hello."`},
		{name: "reject: <|endoftext|> inside a turn",
			row:    gRow(gNoTools, "USER: Hi", "ASSISTANT: Hello. <|endoftext|> How are you? <|endoftext|>"),
			reason: "glaive_stray_endoftext"},
		{name: "reject: two calls in one turn",
			row:    gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": '{}'} <functioncall> {"name": "find_book", "arguments": '{}'} <|endoftext|>`),
			reason: "glaive_multiple_calls"},
		{name: "reject: truncated call",
			row:    gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": '{"title": "Du <|endoftext|>`),
			reason: "glaive_truncated_call"},
		{name: "reject: truncated call, no arguments yet",
			row:    gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_b <|endoftext|>`),
			reason: "glaive_truncated_call"},
		{name: "reject: Infinity", row: gRow(sys, user, gCall(`'{"range": [7, Infinity]}'`)), reason: "glaive_arguments_nonfinite", detail: "Infinity"},
		{name: "reject: NaN bare", row: gRow(sys, user, gCall(`{"x": NaN}`)), reason: "glaive_arguments_nonfinite"},
		{name: "reject: placeholder text", row: gRow(sys, user, gCall(`'{"data": [User provided data]}'`)), reason: "glaive_arguments_not_json", detail: "unexpected character 'U'"},
		{name: "reject: text after the JSON inside the quotes", row: gRow(sys, user, gCall(`'{"title": "Dune"} please'`)), reason: "glaive_arguments_not_json", detail: "text after the JSON value"},
		{name: "reject: arguments a list", row: gRow(sys, user, gCall(`'[5, 10, 15]'`)), reason: "glaive_arguments_not_object", detail: "JSON array"},
		{name: "reject: arguments null", row: gRow(sys, user, gCall(`null`)), reason: "glaive_arguments_not_object", detail: "JSON null"},
		{name: "reject: string arguments that are not an object", row: gRow(sys, user, gCall(`"[1]"`)), reason: "glaive_arguments_not_object"},
		{name: "reject: call without a name", row: gRow(sys, user, `ASSISTANT: <functioncall> {"arguments": '{}'} <|endoftext|>`), reason: "glaive_bad_call", detail: "no name"},
		{name: "reject: call is not an object", row: gRow(sys, user, `ASSISTANT: <functioncall> find_book("Dune") <|endoftext|>`), reason: "glaive_bad_call", detail: "expected {"},
		{name: "reject: both arguments and parameters", row: gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": {}, "parameters": {}} <|endoftext|>`), reason: "glaive_bad_call", detail: "both"},
		{name: "reject: text after the call", row: gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": '{}'} and then more <|endoftext|>`), reason: "glaive_text_after_call", detail: "and then more"},
		{name: "reject: response without a call",
			row:    gRow(sys, user, "ASSISTANT: Let me check.\nAI 查书: {\"title\": \"Dune\"} <|endoftext|>", resp),
			reason: "glaive_response_without_call", detail: "turn 2"},
		{name: "reject: two responses to one call",
			row:    gRow(sys, user, gCall(`'{"title": "Dune"}'`), resp, resp),
			reason: "glaive_response_without_call", detail: "turn 3"},
		{name: "reject: truncated response",
			row:    rowJSON("system", sys, "chat", "USER: Lyrics?\n\n\nASSISTANT: Fetching.\nAI to= find_book: {\"title\": \"Imagine\"} <|endoftext|>\n\n\nFUNCTION RESPONSE: {\"lyrics\": \""),
			reason: "glaive_truncated_response"},
		{name: "reject: call to an undeclared tool",
			row:    gRow(sys, user, `ASSISTANT: <functioncall> {"name": "order_pizza", "arguments": '{}'} <|endoftext|>`),
			reason: "undeclared_call", detail: `"order_pizza"`},
		{name: "reject: a number a float cannot hold",
			row:    gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": '{"title": "Dune", "n": 1e400}'} <|endoftext|>`),
			reason: "number_out_of_range", detail: `"find_book" hold 1e400`},
		{name: "an integer of any size is kept (an int to Python)",
			row:  gRow(sys, user, `ASSISTANT: <functioncall> {"name": "find_book", "arguments": '{"title": "Dune", "n": 123456789012345678901234567890}'} <|endoftext|>`),
			want: "tools: find_book\nuser: Find Dune.\nassistant: -> find_book{\"title\":\"Dune\",\"n\":123456789012345678901234567890}\n#system_template=glaive"},
	})
}

func TestGlaiveToolSchema(t *testing.T) {
	rec, err := Parse("glaive", "g", 0, []byte(gRow(gLead+gTool+"\n\n"+gTool2+"\n", "USER: hi")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`find_book|Find a book|{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`,
		`get_joke|Tell a joke|{"type":"object","properties":{}}`,
	}
	for i, tool := range rec.Tools {
		if got := tool.Name + "|" + tool.Description + "|" + string(tool.Parameters); got != want[i] {
			t.Errorf("tool %d: got %s, want %s", i, got, want[i])
		}
	}
}

// TestGlaiveFlat holds the readers of glaive's responses and call arguments
// without a tree (flatText, flatObject) to the tree on texts at their
// edges: each row gives the same record or reject either way
// (sameEveryWay), and a response the flat reader takes compacts as the
// tree does.
func TestGlaiveFlat(t *testing.T) {
	sys := gLead + gTool + "\n"
	user := "USER: Find Dune."
	answer := "ASSISTANT: Here. <|endoftext|>"
	for _, c := range []struct {
		name, call, resp string
		flat             bool // flatText takes the response
	}{
		{"plain", gCall(`'{"title": "Dune"}'`), `{"found": true, "shelf": "B-12", "n": [1, -2.5e3, null]}`, true},
		{"escapes and apostrophes", gCall(`'{"title": "it\'s \"Dune\"\n", "t\\u00e9": "\u00e9"}'`), `{"q": "say \"hi\"\tnow \u00e9 \ud800", "k\u0031": {}}`, true},
		{"bare object, parameters key", `ASSISTANT: <functioncall> {"name": "find_book", "parameters": {"title": "Dune", "n": {"a": []}}} <|endoftext|>`, `[]`, true},
		{"white space inside the quotes", gCall(`'  {"title" :"Dune" }  '`), ` {"a" : 1 } `, true},
		{"Chinese", gCall(`'{"title": "沙丘"}'`), `{"结果": "找到了"}`, true},
		{"duplicate keys", gCall(`'{"title": "Dune", "title": "Emma"}'`), `{"a": 1, "a": 2}`, false},
		{"truncated", gCall(`'{"title": "Du`), `{"found": tr`, false},
		{"text after the value", gCall(`'{"title": "Dune"} x'`), `{"a": 1} and more`, false},
		{"a string, a number, text", gCall(`"{\"title\": \"Dune\"}"`), `"done"`, true},
		{"not JSON", gCall(`'{title: Dune}'`), `Found it on shelf B-12.`, false},
		{"nonfinite", gCall(`'{"n": NaN}'`), `{"n": Infinity}`, false},
		{"too deep", gCall(`'` + strings.Repeat(`{"a": `, 600) + `1` + strings.Repeat(`}`, 600) + `'`), strings.Repeat("[", 600) + strings.Repeat("]", 600), false},
		{"invalid escape", gCall(`'{"title": "\x"}'`), `{"a": "\x"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := gRow(sys, user, c.call, "FUNCTION RESPONSE: "+c.resp, answer)
			sameEveryWay(t, "glaive", row)
			b := &builder{w: &workspace{laid: true}}
			got, ok := b.flatText(c.resp)
			if ok != c.flat {
				t.Fatalf("flatText(%q) took it: %v, want %v", c.resp, ok, c.flat)
			}
			if v, err := b.parse(c.resp); ok && (err != nil || got != jsontree.CompactString(&v)) {
				t.Fatalf("flatText(%q) = %q, the tree %v %v", c.resp, got, jsontree.CompactString(&v), err)
			}
		})
	}
}
