package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// metaToolDef is the meta_tool definition of seed 000 as the meta_tool
// stage lists it.
const metaToolDef = `{"type":"object","properties":{"tool_description":{"description":"A clear and concise description of the external tool you need to use.","type":"string"},"param_description":{"type":"array","description":"A list of descriptions for each parameter required by the external tool.","items":{"type":"string"}}},"required":["tool_description","param_description"]}`

// openWorldRecord is an open-world record as the meta_tool stage writes it:
// only meta_tool is listed; create_event, with an enum parameter, comes back
// from the meta_tool result (seed 000 Fig 12's envelope) and is called next.
func openWorldRecord() *record.Record {
	return &record.Record{
		ID:    "e:0",
		Tools: []record.Tool{{Name: "meta_tool", Description: "Use this tool when no suitable tool is available.", Parameters: json.RawMessage(metaToolDef)}},
		Messages: []record.Message{
			{Role: "user", Content: "Create an event called Team lunch with high priority"},
			{Role: "assistant", Calls: []record.Call{{Name: "meta_tool", Arguments: json.RawMessage(`{"tool_description":"Create a calendar event","param_description":["Title","Priority"]}`)}}},
			{Role: "tool", Results: []record.Result{{Name: "meta_tool", Content: `[{"name":"meta_tool","function_id":0,"results":{"name":"create_event","description":"Create a calendar event","parameters":{"type":"object","properties":{"title":{"type":"string","description":"Title"},"priority":{"type":"string","enum":["high","low"],"description":"Priority"}},"required":["title"]}}}]`}}},
			{Role: "assistant", Calls: []record.Call{{Name: "create_event", Arguments: json.RawMessage(`{"title":"Team lunch","priority":"high"}`)}}},
			{Role: "tool", Results: []record.Result{{Name: "create_event", Content: `{"status":"ok"}`}}},
			{Role: "assistant", Content: "Your event Team lunch is created."},
		},
	}
}

// openWorldAnswer is a correct translation of openWorldRecord, as decoded
// JSON for tests to break.
func openWorldAnswer(t *testing.T) map[string]any {
	t.Helper()
	const a = `{"functions":[{"name":"meta_tool","description":"Use this tool when no suitable tool is available.","parameters":` + metaToolDef + `}],
	"conversations":[
	 {"role":"user","content":"建立一個名為團隊午餐的高優先事件"},
	 {"role":"assistant","tool_calls":[{"name":"meta_tool","arguments":{"tool_description":"建立行事曆事件","param_description":["標題","優先順序"]}}]},
	 {"role":"tool","results":[{"name":"meta_tool","content":[{"name":"meta_tool","function_id":0,"results":{"name":"create_event","description":"Create a calendar event","parameters":{"type":"object","properties":{"title":{"type":"string","description":"Title"},"priority":{"type":"string","enum":["high","low"],"description":"Priority"}},"required":["title"]}}}]}]},
	 {"role":"assistant","tool_calls":[{"name":"create_event","arguments":{"title":"團隊午餐","priority":"high"}}]},
	 {"role":"tool","results":[{"name":"create_event","content":{"status":"ok"}}]},
	 {"role":"assistant","content":"您的團隊午餐事件已建立。"}]}`
	var m map[string]any
	if err := json.Unmarshal([]byte(a), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTranslateOpenWorldLocks: the tools a meta_tool result returns lock
// the calls after it as listed tools do, and the result itself — a tool
// definition — must come back exactly.
func TestTranslateOpenWorldLocks(t *testing.T) {
	definition := func(m map[string]any) map[string]any {
		env := turn(m, 2)["results"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
		return env["results"].(map[string]any)
	}
	cases := []struct {
		name   string
		break_ func(m map[string]any)
		reason string
		detail string
	}{
		{"enum member of a retrieved tool translated", func(m map[string]any) { args(m, 3, 0)["priority"] = "高" }, ReasonEnumChanged, `"high" was changed to "高"`},
		{"retrieved tool description translated", func(m map[string]any) { definition(m)["description"] = "建立行事曆事件" }, ReasonToolsChanged, "conversations[2].results[0].content"},
		{"retrieved parameter description translated", func(m map[string]any) {
			definition(m)["parameters"].(map[string]any)["properties"].(map[string]any)["title"].(map[string]any)["description"] = "標題"
		}, ReasonToolsChanged, "tool definition"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := openWorldAnswer(t)
			c.break_(m)
			f := &teacher{answers: []string{mustJSON(t, m)}}
			out, err := newTeacher(t, Config{Attempts: 1}, f, &judge{}).Record(t.Context(), openWorldRecord())
			var rej *contract.Reject
			if out != nil || !errors.As(err, &rej) {
				t.Fatalf("accepted a broken answer (error %v)", err)
			}
			if rej.Reason != c.reason || !strings.Contains(rej.Detail, c.detail) {
				t.Errorf("reject %s: %s; want %s mentioning %q", rej.Reason, rej.Detail, c.reason, c.detail)
			}
		})
	}

	src := openWorldRecord()
	f := &teacher{answers: []string{mustJSON(t, openWorldAnswer(t))}}
	out, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Messages[2].Results[0].Content, src.Messages[2].Results[0].Content; got != want {
		t.Errorf("meta_tool result\n%s\nwant it byte-identical:\n%s", got, want)
	}
	if got := string(out.Messages[3].Calls[0].Arguments); got != `{"title":"團隊午餐","priority":"high"}` {
		t.Errorf("create_event arguments %s", got)
	}
	if got := string(out.Messages[1].Calls[0].Arguments); got != `{"tool_description":"建立行事曆事件","param_description":["標題","優先順序"]}` {
		t.Errorf("meta_tool arguments (the assistant's own query, free text) %s", got)
	}
}

// TestConvertOpenWorldLocks: in convert mode the enum members of a tool a
// meta_tool result returns stay as written, and the result (a tool
// definition) keeps its bytes.
func TestConvertOpenWorldLocks(t *testing.T) {
	def := `{"name":"search_recipes","description":"根据食材搜索食谱","parameters":{"type":"object","properties":{"ingredients":{"type":"array","items":{"type":"string"}},"cuisine":{"type":"string","enum":["意大利","墨西哥"]}}}}`
	src := &record.Record{
		ID:    "zh:2",
		Tools: []record.Tool{{Name: "meta_tool", Description: "Use this tool when no suitable tool is available.", Parameters: json.RawMessage(metaToolDef)}},
		Messages: []record.Message{
			{Role: "user", Content: "我想用鸡肉做意大利菜"},
			{Role: "assistant", Calls: []record.Call{{Name: "meta_tool", Arguments: json.RawMessage(`{"tool_description":"根据食材搜索食谱","param_description":["食材","菜系"]}`)}}},
			{Role: "tool", Results: []record.Result{{Name: "meta_tool", Content: def}}},
			{Role: "assistant", Calls: []record.Call{{Name: "search_recipes", Arguments: json.RawMessage(`{"ingredients": ["鸡肉"], "cuisine": "意大利"}`)}}},
			{Role: "tool", Results: []record.Result{{Name: "search_recipes", Content: `{"recipes": ["鸡肉意大利面"]}`}}},
		},
	}
	out := mustConvertRecord(t, src)
	checks := []struct{ got, want string }{
		{out.Messages[0].Content, "我想用雞肉做義大利菜"},
		{string(out.Messages[1].Calls[0].Arguments), `{"tool_description":"根據食材搜尋食譜","param_description":["食材","菜系"]}`},
		{out.Messages[2].Results[0].Content, def},
		{string(out.Messages[3].Calls[0].Arguments), `{"ingredients": ["雞肉"], "cuisine": "意大利"}`},
		{out.Messages[4].Results[0].Content, `{"recipes": ["雞肉義大利麵"]}`},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("%d: got %s, want %s", i, c.got, c.want)
		}
	}
}

// TestConvertLockedCopies: locked values (an e-mail address, a URL, a date
// with a declared format) are converted like the text that quotes them, so
// the call still copies the user's words and no Simplified-only character
// is left; enum members stay as the tool lists them.
func TestConvertLockedCopies(t *testing.T) {
	src := &record.Record{
		ID: "zh:3",
		Tools: []record.Tool{{Name: "create_event", Description: "创建日历事件",
			Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"end_time":{"type":"string","format":"date-time"},"email":{"type":"string"},"url":{"type":"string"},"script":{"type":"string","enum":["简体","繁体"]}}}`)}},
		Messages: []record.Message{
			{Role: "user", Content: "帮我创建一个会议，标题是项目讨论，2022年4月15日11点30分结束，发到约翰@example.com，链接 https://www.x.com/新闻，用简体"},
			{Role: "assistant", Calls: []record.Call{{Name: "create_event", Arguments: json.RawMessage(`{"title":"项目讨论","end_time":"2022年4月15日11点30分","email":"约翰@example.com","url":"https://www.x.com/新闻","script":"简体"}`)}}},
			{Role: "tool", Results: []record.Result{{Name: "create_event", Content: `{"status":"成功","link":"https://www.x.com/新闻"}`}}},
			{Role: "assistant", Content: "会议已经创建好了，链接是 https://www.x.com/新闻。"},
		},
	}
	out := mustConvertRecord(t, src)
	checks := []struct{ got, want string }{
		{out.Messages[0].Content, "幫我建立一個會議，標題是專案討論，2022年4月15日11點30分結束，發到約翰@example.com，連結 https://www.x.com/新聞，用簡體"},
		{string(out.Messages[1].Calls[0].Arguments), `{"title":"專案討論","end_time":"2022年4月15日11點30分","email":"約翰@example.com","url":"https://www.x.com/新聞","script":"简体"}`},
		{out.Messages[2].Results[0].Content, `{"status":"成功","link":"https://www.x.com/新聞"}`},
		{out.Messages[3].Content, "會議已經建立好了，連結是 https://www.x.com/新聞。"},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("%d: got %s, want %s", i, c.got, c.want)
		}
	}
	for s := range translatable(out) {
		if ch, ok := HasSimplifiedOnly(s.text); ok {
			t.Errorf("%s: %q keeps %q", s.path, s.text, ch)
		}
	}
}

// TestConverterCopies: a locked value converts the same inside text as on
// its own, even where OpenCC's segmentation of the text would read it
// otherwise (个数 is a phrase, so s2twp reads 一个数据 as 一個數據, while 数据
// on its own is the Taiwan 資料).
func TestConverterCopies(t *testing.T) {
	const value, text = "数据组@example.com", "请抄送一个数据组@example.com"
	if got := toTaiwan(text); strings.Contains(got, toTaiwan(value)) {
		t.Fatalf("the example no longer shows a difference: %q holds %q", got, toTaiwan(value))
	}
	c := newConverter(true)
	c.addUnit(value)
	c.prepare()
	v, s := c.value(value, true), c.text(text)
	if c.err != nil {
		t.Fatal(c.err)
	}
	if v != "資料組@example.com" || s != "請抄送一個資料組@example.com" {
		t.Errorf("value %q, text %q", v, s)
	}
}

// TestTranslateLockedValuesConverted: in teacher mode the locked values
// the teacher must copy are converted with s2twp afterwards, like the
// teacher's text quoting them, so a Simplified Chinese source gives no
// Simplified characters in its calls.
func TestTranslateLockedValuesConverted(t *testing.T) {
	src := &record.Record{
		ID:    "zh:4",
		Tools: []record.Tool{{Name: "send_mail", Description: "发送邮件", Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`)}},
		Messages: []record.Message{
			{Role: "user", Content: "发邮件到约翰@example.com，说会议取消了"},
			{Role: "assistant", Calls: []record.Call{{Name: "send_mail", Arguments: json.RawMessage(`{"to":"约翰@example.com","body":"会议取消了"}`)}}},
		},
	}
	answer := `{"functions":[{"name":"send_mail","description":"发送邮件","parameters":{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}}],
	"conversations":[{"role":"user","content":"寄郵件到约翰@example.com，說會議取消了"},
	{"role":"assistant","tool_calls":[{"name":"send_mail","arguments":{"to":"约翰@example.com","body":"會議取消了"}}]}]}`
	f := &teacher{answers: []string{answer}}
	out, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Messages[1].Calls[0].Arguments); got != `{"to":"約翰@example.com","body":"會議取消了"}` {
		t.Errorf("arguments %s", got)
	}
	if got := out.Messages[0].Content; got != "寄郵件到約翰@example.com，說會議取消了" {
		t.Errorf("user %q", got)
	}
}

// TestTranslateReorderedFreeTextCalls: parallel calls of one function that
// differ only in free text are aligned on the judge's verdicts, so a
// correct translation that reorders them passes and keeps the source's
// order. Only the calls that failed are aligned again (the third call,
// accepted where it is, costs no further verdicts); an answer in order
// needs one verdict per value.
func TestTranslateReorderedFreeTextCalls(t *testing.T) {
	params := `{"type":"object","properties":{"amount":{"type":"number"},"from_currency":{"type":"string"},"to_currency":{"type":"string"},"note":{"type":"string"}}}`
	src := &record.Record{
		ID:    "e:8",
		Tools: []record.Tool{{Name: "convert_currency", Description: "Convert currency", Parameters: json.RawMessage(params)}},
		Messages: []record.Message{
			{Role: "user", Content: "Convert 500 USD to EUR each for rent, food and utilities"},
			{Role: "assistant", Calls: []record.Call{
				{Name: "convert_currency", Arguments: json.RawMessage(`{"amount":500,"from_currency":"USD","to_currency":"EUR","note":"rent"}`)},
				{Name: "convert_currency", Arguments: json.RawMessage(`{"amount":500,"from_currency":"USD","to_currency":"EUR","note":"food"}`)},
				{Name: "convert_currency", Arguments: json.RawMessage(`{"amount":500,"from_currency":"USD","to_currency":"EUR","note":"utilities"}`)},
			}},
		},
	}
	answer := func(first, second string) string {
		return `{"functions":[{"name":"convert_currency","description":"Convert currency","parameters":` + params + `}],
		"conversations":[{"role":"user","content":"房租、食物和水電費各把500美元換成歐元"},
		{"role":"assistant","tool_calls":[
		 {"name":"convert_currency","arguments":{"amount":500,"from_currency":"USD","to_currency":"EUR","note":"` + first + `"}},
		 {"name":"convert_currency","arguments":{"amount":500,"from_currency":"USD","to_currency":"EUR","note":"` + second + `"}},
		 {"name":"convert_currency","arguments":{"amount":500,"from_currency":"USD","to_currency":"EUR","note":"水電費"}}]}]}`
	}
	equal := map[[2]string]bool{{"rent", "房租"}: true, {"food", "食物"}: true, {"utilities", "水電費"}: true}
	for _, c := range []struct {
		name          string
		first, second string
		asked         int
		wrong         string // the path of the value rejected, if one is
	}{
		{"reordered", "食物", "房租", 5, ""},
		{"in order", "房租", "食物", 3, ""},
		{"reordered, one wrong", "食物", "保險", 5, "tool_calls[0].arguments.note: \"保險\" does not mean the same as the original \"rent\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &teacher{answers: []string{answer(c.first, c.second)}}
			j := &judge{pairs: equal}
			tr, err := New(Config{Attempts: 1}, f.client(), j.fn, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tr.Record(t.Context(), src)
			if len(j.asked) != c.asked {
				t.Errorf("%d verdicts asked, want %d", len(j.asked), c.asked)
			}
			if c.wrong != "" {
				var rej *contract.Reject
				if !errors.As(err, &rej) || rej.Reason != ReasonNotEquivalent || !strings.Contains(rej.Detail, c.wrong) {
					t.Fatalf("error %v, want %s naming %s", err, ReasonNotEquivalent, c.wrong)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			calls := out.Messages[1].Calls
			for k, want := range []string{"房租", "食物", "水電費"} {
				if !strings.Contains(string(calls[k].Arguments), `"note":"`+want+`"`) {
					t.Errorf("call %d: %s, want the note %s", k, calls[k].Arguments, want)
				}
			}
		})
	}
}
