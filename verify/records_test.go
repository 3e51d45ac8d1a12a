package verify

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

func user(s string) record.Message { return record.Message{Role: record.RoleUser, Content: s} }
func answer(s string) record.Message {
	return record.Message{Role: record.RoleAssistant, Content: s}
}
func calls(cs ...record.Call) record.Message {
	return record.Message{Role: record.RoleAssistant, Calls: cs}
}
func results(rs ...record.Result) record.Message {
	return record.Message{Role: record.RoleTool, Results: rs}
}
func result(name, content string) record.Result { return record.Result{Name: name, Content: content} }

var metaToolDef = record.Tool{Name: MetaTool, Description: "Use this tool when no suitable tool is available.", Parameters: json.RawMessage(
	`{"type":"object","properties":{"tool_description":{"type":"string"},"param_description":{"type":"array","items":{"type":"string"}}},"required":["tool_description","param_description"]}`)}

func rec(tools []record.Tool, msgs ...record.Message) *record.Record {
	return &record.Record{ID: "t:0", Tools: tools, Messages: msgs}
}

func TestCheckers(t *testing.T) {
	weather := call("get_weather", `{"city":"Paris"}`)
	weatherRes := result("get_weather", `{"temp":21}`)
	retrieved := `{"name":"book_hotel","description":"Book a hotel","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	tests := []struct {
		check string
		r     *record.Record
		want  []string // kind@path
	}{
		// roles
		{"roles", rec(weatherTools, user("Weather in Paris?"), calls(weather), results(weatherRes), answer("21 degrees.")), nil},
		{"roles", rec(weatherTools, record.Message{Role: record.RoleSystem, Content: "Be brief."}, user("Hi"), answer("Hello!")), nil},
		{"roles", rec(weatherTools, user("Weather in Paris?"), calls(weather)), nil}, // ToolACE rows may end on a call
		{"roles", rec(weatherTools, user("Book it"), calls(call(GetUserInput, `{}`)), user("Paris"), answer("Done.")), nil},
		{"roles", rec(weatherTools), []string{"empty_dialogue@messages"}},
		{"roles", rec(weatherTools, answer("Hello"), user("Hi"), answer("Yes")), []string{"first_not_user@messages[0]"}},
		{"roles", rec(weatherTools, user("a"), user("b"), answer("c")), []string{"role_order@messages[1]"}},
		{"roles", rec(weatherTools, user("a"), answer("b"), answer("c")), []string{"role_order@messages[2]"}},
		{"roles", rec(weatherTools, user("a"), answer("b"), results(weatherRes), answer("c")), []string{"orphan_tool_turn@messages[2]"}},
		{"roles", rec(weatherTools, results(weatherRes), answer("c")), []string{"orphan_tool_turn@messages[0]"}},
		{"roles", rec(weatherTools, user("a"), calls(weather), results(weatherRes), results(weatherRes), answer("c")), []string{"orphan_tool_turn@messages[3]"}},
		{"roles", rec(weatherTools, user("a"), calls(weather, weather), results(weatherRes), answer("c")), []string{"result_count@messages[2]"}},
		{"roles", rec(weatherTools, user("a"), calls(weather), results(result("get_news", "{}")), answer("c")), []string{"result_name@messages[2].results[0]"}},
		{"roles", rec(weatherTools, user("a"), calls(weather), user("b"), answer("c")), []string{"missing_results@messages[1]"}},
		{"roles", rec(weatherTools, user("a"), calls(weather), results(weatherRes), user("b"), answer("c")), []string{"role_order@messages[3]"}},
		{"roles", rec(weatherTools, user(" "), answer("b")), []string{"empty_turn@messages[0]"}},
		{"roles", rec(weatherTools, user("a"), answer(" ")), []string{"empty_turn@messages[1]"}},
		{"roles", rec(weatherTools, user("a"), answer("b"), user("c")), []string{"bad_ending@messages[2]"}},
		{"roles", rec(weatherTools, user("a"), calls(weather), results(weatherRes)), []string{"bad_ending@messages[2]"}},
		{"roles", rec(weatherTools, user("a"), record.Message{Role: record.RoleSystem, Content: "x"}, answer("b")), []string{"misplaced_system@messages[1]"}},
		{"roles", rec(weatherTools, user("a"), record.Message{Role: "bot", Content: "b"}, answer("c")), []string{"unknown_role@messages[1]"}},

		// calls_resolved
		{"calls_resolved", rec(weatherTools, user("a"), calls(weather), results(weatherRes), answer("b")), nil},
		{"calls_resolved", rec(weatherTools, user("a"), calls(call("get_news", `{}`)), results(result("get_news", "{}")), answer("b")),
			[]string{"func_not_found@messages[1].calls[0].name"}},
		{"calls_resolved", rec([]record.Tool{metaToolDef}, user("Book a hotel in Paris"),
			calls(call(MetaTool, `{"tool_description":"book a hotel","param_description":["city"]}`)), results(result(MetaTool, retrieved)),
			calls(call("book_hotel", `{"city":"Paris"}`)), results(result("book_hotel", `{"ok":true}`)), answer("Booked.")), nil},
		{"calls_resolved", rec([]record.Tool{metaToolDef}, user("Book"),
			calls(call(MetaTool, `{"tool_description":"x","param_description":[]}`)),
			results(result(MetaTool, `[{"type":"function","function":`+retrieved+`},{"name":"pay","parameters":{}}]`)),
			calls(call("pay", `{}`), call("book_hotel", `{"city":"Paris"}`)), results(result("pay", "{}"), result("book_hotel", "{}")), answer("ok")), nil},
		// a tool is usable only after the meta_tool result that returns it
		{"calls_resolved", rec([]record.Tool{metaToolDef}, user("Book"),
			calls(call("book_hotel", `{"city":"Paris"}`)), results(result("book_hotel", "{}")),
			calls(call(MetaTool, `{"tool_description":"x","param_description":[]}`)), results(result(MetaTool, retrieved)), answer("ok")),
			[]string{"func_not_found@messages[1].calls[0].name"}},
		// meta_tool itself must be listed
		{"calls_resolved", rec(weatherTools, user("Book"),
			calls(call(MetaTool, `{"tool_description":"x","param_description":[]}`)), results(result(MetaTool, retrieved)), answer("ok")),
			[]string{"func_not_found@messages[1].calls[0].name"}},
		{"calls_resolved", rec([]record.Tool{metaToolDef}, user("Book"),
			calls(call(MetaTool, `{"tool_description":"x","param_description":[]}`)), results(result(MetaTool, `no tool found`)), answer("ok")),
			[]string{"bad_meta_result@messages[2].results[0].content"}},
		{"calls_resolved", rec([]record.Tool{metaToolDef}, user("Book"),
			calls(call(MetaTool, `{"tool_description":"x","param_description":[]}`)), results(result(MetaTool, `[{"description":"nameless"}]`)), answer("ok")),
			[]string{"bad_meta_result@messages[2].results[0].content"}},

		// args_schema
		{"args_schema", rec(weatherTools, user("a"), calls(weather, call("get_random_joke", `{}`)), results(weatherRes, result("get_random_joke", "x")), answer("b")), nil},
		{"args_schema", rec(weatherTools, user("a"), calls(call("get_weather", `{"cty":"Paris"}`)), results(weatherRes), answer("b")),
			[]string{"param_missing@messages[1].calls[0].arguments.city", "unknown_param@messages[1].calls[0].arguments.cty"}},
		{"args_schema", rec(weatherTools, user("a"), answer("b"), user("c"), calls(weather, call("get_weather", `{"city":"Rome","days":"2"}`)), results(weatherRes, weatherRes), answer("d")),
			[]string{"wrong_type@messages[3].calls[1].arguments.days"}},
		// calls to unknown tools are calls_resolved's business
		{"args_schema", rec(weatherTools, user("a"), calls(call("get_news", `{"x":1}`)), results(result("get_news", "{}")), answer("b")), nil},
		// retrieved tools are checked against their returned definition
		{"args_schema", rec([]record.Tool{metaToolDef}, user("Book"),
			calls(call(MetaTool, `{"tool_description":"book a hotel","param_description":["city"]}`)), results(result(MetaTool, retrieved)),
			calls(call("book_hotel", `{"town":"Paris"}`)), results(result("book_hotel", "{}")), answer("ok")),
			[]string{"param_missing@messages[3].calls[0].arguments.city", "unknown_param@messages[3].calls[0].arguments.town"}},

		// meta_tool_shape
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `{"tool_description":"Book a hotel room","param_description":["the city","check-in date"]}`)), results(result(MetaTool, retrieved)), answer("b")), nil},
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `{"tool_description":"Book","param_description":"city"}`)), results(result(MetaTool, retrieved)), answer("b")),
			[]string{"wrong_type@messages[1].calls[0].arguments.param_description"}},
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `{"tool_description":"Book","param_description":["city",3]}`)), results(result(MetaTool, retrieved)), answer("b")),
			[]string{"wrong_type@messages[1].calls[0].arguments.param_description[1]"}},
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `{"tool_description":"Book","param_description":[],"tool_name":"x"}`)), results(result(MetaTool, retrieved)), answer("b")),
			[]string{"unknown_param@messages[1].calls[0].arguments.tool_name"}},
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `{"param_description":[]}`)), results(result(MetaTool, retrieved)), answer("b")),
			[]string{"param_missing@messages[1].calls[0].arguments.tool_description"}},
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `{"tool_description":"  ","param_description":[]}`)), results(result(MetaTool, retrieved)), answer("b")),
			[]string{"empty_value@messages[1].calls[0].arguments.tool_description"}},
		{"meta_tool_shape", rec([]record.Tool{metaToolDef}, user("a"), calls(call(MetaTool, `"book a hotel"`)), results(result(MetaTool, retrieved)), answer("b")),
			[]string{"bad_json@messages[1].calls[0].arguments"}},
	}
	for _, tt := range tests {
		c, ok := Lookup(tt.check)
		if !ok {
			t.Fatalf("no checker %q", tt.check)
		}
		got := c.Check(tt.r)
		if !slices.Equal(kinds(got), tt.want) {
			t.Errorf("%s on %v:\ngot  %v\nwant %v\n%v", tt.check, tt.r.Messages, kinds(got), tt.want, got)
		}
		for _, p := range got {
			if p.Check != tt.check || p.Msg == "" {
				t.Errorf("bad problem %+v", p)
			}
		}
	}
}

func TestCheckersList(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Checkers {
		if seen[c.Name] {
			t.Errorf("duplicate checker %q", c.Name)
		}
		seen[c.Name] = true
		if (c.Check == nil) == (c.CheckLLM == nil) {
			t.Errorf("%s: exactly one of Check and CheckLLM must be set", c.Name)
		}
		if c.Doc == "" {
			t.Errorf("%s: no Doc", c.Name)
		}
		if got, ok := Lookup(c.Name); !ok || got != c {
			t.Errorf("Lookup(%q) = %v, %v", c.Name, got, ok)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup found an unknown name")
	}
}

// The checkers never modify the record they inspect.
func TestCheckersDoNotModify(t *testing.T) {
	r := rec([]record.Tool{metaToolDef}, user("Book"),
		calls(call(MetaTool, `{"tool_description":"x","param_description":[]}`)), results(result(MetaTool, `[{"name":"pay","parameters":{}}]`)),
		calls(call("pay", `{"x":1}`)), results(result("pay", "{}")), answer("ok"))
	before, _ := json.Marshal(r)
	for _, c := range Checkers {
		if c.Check != nil {
			c.Check(r)
		}
	}
	after, _ := json.Marshal(r)
	if string(before) != string(after) {
		t.Errorf("record changed:\n%s\n%s", before, after)
	}
}
