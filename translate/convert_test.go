package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// sharedData returns the shared data directory: $AUGMENT_SHARED_DATA, or
// shared/data beside the repository. Tests that need it skip without it.
func sharedData(t testing.TB, rel string) string {
	t.Helper()
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	p := filepath.Join(dir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data file %s not available (set AUGMENT_SHARED_DATA to the shared data directory): %v", p, err)
	}
	return p
}

// lfRow is one row of a LLaMA-Factory sharegpt file (glaive_toolcall_*_demo.json).
type lfRow struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
	Tools string `json:"tools"`
}

// lfRecord builds a record from a LLaMA-Factory row the simple way: one
// function_call value is an object or a list of calls, an observation
// answers the calls before it.
func lfRecord(t testing.TB, i int, row lfRow) *record.Record {
	t.Helper()
	r := &record.Record{ID: "glaive_zh:" + strconv.Itoa(i), Row: int64(i)}
	if row.Tools != "" {
		if err := json.Unmarshal([]byte(row.Tools), &r.Tools); err != nil {
			t.Fatalf("row %d tools: %v", i, err)
		}
	}
	var last []record.Call
	for _, m := range row.Conversations {
		switch m.From {
		case "human":
			r.Messages = append(r.Messages, record.Message{Role: record.RoleUser, Content: m.Value})
		case "gpt":
			r.Messages = append(r.Messages, record.Message{Role: record.RoleAssistant, Content: m.Value})
		case "function_call":
			var calls []record.Call
			v := []byte(strings.TrimSpace(m.Value))
			if len(v) > 0 && v[0] == '[' {
				if err := json.Unmarshal(v, &calls); err != nil {
					t.Fatalf("row %d calls: %v", i, err)
				}
			} else {
				var c record.Call
				if err := json.Unmarshal(v, &c); err != nil {
					t.Fatalf("row %d call: %v", i, err)
				}
				calls = []record.Call{c}
			}
			last = calls
			r.Messages = append(r.Messages, record.Message{Role: record.RoleAssistant, Calls: calls})
		case "observation":
			name := ""
			if len(last) > 0 {
				name = last[0].Name
			}
			r.Messages = append(r.Messages, record.Message{Role: record.RoleTool, Results: []record.Result{{Name: name, Content: m.Value}}})
		default:
			t.Fatalf("row %d: role %q", i, m.From)
		}
	}
	return r
}

// TestConvertGlaiveZh converts the 300 Simplified Chinese rows of
// LLaMA-Factory's glaive_toolcall_zh_demo.json and checks the structure
// lock: tool definitions byte-identical, names, keys, enums and numbers
// unchanged, every other value converted on its own, no Simplified-only
// character left anywhere translatable.
func TestConvertGlaiveZh(t *testing.T) {
	b, err := os.ReadFile(sharedData(t, "llamafactory/glaive_toolcall_zh_demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []lfRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 300 {
		t.Fatalf("%d rows, want 300", len(rows))
	}
	tr, err := New(Config{Mode: ModeConvert}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	changedArgs := 0
	for i, row := range rows {
		src := lfRecord(t, i, row)
		out, err := tr.Record(t.Context(), src)
		if err != nil {
			t.Errorf("row %d: %v", i, err)
			continue
		}
		if out.Tag("lang") != Lang || out.Lineage[len(out.Lineage)-1] != (record.Step{Stage: "translate", Provider: "rule"}) {
			t.Errorf("row %d: tags %v lineage %v", i, out.Tags, out.Lineage)
		}
		for k := range src.Tools {
			a, b := src.Tools[k], out.Tools[k]
			if a.Name != b.Name || a.Description != b.Description || !bytes.Equal(a.Parameters, b.Parameters) {
				t.Errorf("row %d tool %d changed", i, k)
			}
		}
		for s := range translatable(out) {
			if c, ok := HasSimplifiedOnly(s.text); ok {
				t.Errorf("row %d %s: %q keeps %q", i, s.path, s.text, c)
			}
		}
		for k, m := range src.Messages {
			om := out.Messages[k]
			if om.Role != m.Role || len(om.Calls) != len(m.Calls) || len(om.Results) != len(m.Results) {
				t.Fatalf("row %d turn %d: shape changed", i, k)
			}
			if om.Content != mustConvert(t, m.Content) {
				t.Errorf("row %d turn %d: content %q", i, k, om.Content)
			}
			for c, call := range m.Calls {
				oc := om.Calls[c]
				if oc.Name != call.Name {
					t.Errorf("row %d: name %q → %q", i, call.Name, oc.Name)
				}
				conv, err := parseTree(oc.Arguments)
				if err != nil {
					t.Fatalf("row %d: arguments %v", i, err)
				}
				// The conversion of the source's arguments, value by value,
				// must be exactly what the structure lock lets through.
				want := string(convertJSON(call.Arguments, scopeOf(src).params(k, call.Name), newConverter(true)))
				wantTree, _ := parseTree([]byte(want))
				w := walker{keyReason: ReasonKeyChanged}
				w.compare("", wantTree, conv, scopeOf(src).params(k, call.Name))
				if len(w.problems) > 0 {
					t.Errorf("row %d call %s: %v", i, call.Name, w.problems)
				}
				for _, f := range w.allFree() {
					if f.ans.Str != f.orig.Str {
						t.Errorf("row %d %s: %q is not the conversion %q", i, f.path, f.ans.Str, f.orig.Str)
					}
				}
				for _, l := range w.allLocked() {
					if _, ok := HasSimplifiedOnly(l.Str); ok {
						t.Errorf("row %d: locked value %q keeps a Simplified-only character", i, l.Str)
					}
				}
				if !bytes.Equal(call.Arguments, oc.Arguments) {
					changedArgs++
				}
			}
		}
	}
	if changedArgs == 0 {
		t.Error("no argument value was converted")
	}
	// A known row, end to end.
	out := mustConvertRecord(t, lfRecord(t, 0, rows[0]))
	if got := out.Messages[0].Content; got != "我需要為John Doe生成一張發票。他購買了2個蘋果，每個$1，以及3根香蕉，每根$0.5。" {
		t.Errorf("row 0 user: %q", got)
	}
	if got := string(out.Messages[1].Calls[0].Arguments); got != `{"customer_name": "約翰·多伊", "items": [{"name": "蘋果", "quantity": 2, "price": 1}, {"name": "香蕉", "quantity": 3, "price": 0.5}]}` {
		t.Errorf("row 0 arguments: %s", got)
	}
}

// TestConvertLocks: the enum member 中国 and a dated ID stay; 意大利 at the
// enum position, not a member, is converted like text (QA: glaive_zh:102
// kept 意大利 while the text said 義大利); free text and results are
// converted; the source is not modified.
func TestConvertLocks(t *testing.T) {
	src := &record.Record{
		ID:     "zh:1",
		System: "你是一个乐于助人的助手。",
		Tools: []record.Tool{{Name: "search_recipes", Description: "根据食材搜索食谱",
			Parameters: json.RawMessage(`{"type":"object","properties":{"ingredients":{"type":"array","items":{"type":"string"}},"cuisine":{"type":"string","enum":["Italian","Mexican"]},"region":{"type":"string","enum":["中国","台湾"]},"since":{"type":"string","format":"date"}}}`)}},
		Messages: []record.Message{
			{Role: "user", Content: "我想用鸡肉做意大利菜，需要软件帮忙吗？"},
			{Role: "assistant", Reasoning: "用户想要意大利菜谱。", Calls: []record.Call{{Name: "search_recipes", Arguments: json.RawMessage(`{"ingredients": ["鸡肉", "甜椒"], "cuisine": "意大利", "region": "中国", "since": "2024年1月1日"}`)}}},
			{Role: "tool", Results: []record.Result{{Name: "search_recipes", Content: `{"recipes": [{"name": "鸡肉意大利面", "id": "R-1"}]}`}}},
			{Role: "tool", Results: []record.Result{{Name: "search_recipes", Content: `没有更多结果`}}},
		},
	}
	before, _ := json.Marshal(src)
	out := mustConvertRecord(t, src)
	if after, _ := json.Marshal(src); !bytes.Equal(before, after) {
		t.Error("Convert modified its input")
	}
	checks := []struct{ got, want string }{
		{out.System, "你是一個樂於助人的助手。"},
		{out.Messages[0].Content, "我想用雞肉做義大利菜，需要軟體幫忙嗎？"},
		{out.Messages[1].Reasoning, "使用者想要義大利菜譜。"},
		{string(out.Messages[1].Calls[0].Arguments), `{"ingredients": ["雞肉", "甜椒"], "cuisine": "義大利", "region": "中国", "since": "2024年1月1日"}`},
		{out.Messages[2].Results[0].Content, `{"recipes": [{"name": "雞肉義大利麵", "id": "R-1"}]}`},
		{out.Messages[3].Results[0].Content, "沒有更多結果"},
		{out.Tools[0].Description, "根据食材搜索食谱"},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("%d: got %q, want %q", i, c.got, c.want)
		}
	}
}

// TestConvertJSONText: a string argument or result value holding JSON text
// is converted as JSON, as teacher mode compares it: its keys (城市, 备注)
// keep their bytes, its strings are converted one by one, and the rest of
// its text — spacing, key order, the escapes of strings left as they are —
// is the source's (QA: convert mode converted such a string as one text,
// keys included: 备注→備註). A locked value inside (an e-mail address) is a
// unit, so the user's text quoting it converts it as the call does; a
// schema that locks the string, and text that is not JSON, keep the old
// whole-string conversion. The values are those of `opencc -c s2twp.json`
// (1.1.6) on each string alone.
func TestConvertJSONText(t *testing.T) {
	params := `{"type":"object","properties":{"p":{"type":"string"},"raw":{"type":"string","format":"json"}}}`
	cases := []struct {
		name             string
		user, args, res  string
		wantUser         string
		wantArgs, wantRe string
	}{
		{name: "object, keys and spacing kept",
			args:     `{"p": "{\"城市\":\"北京\",  \"备注\" : \"请带上资料\", \"code\": \"AX9\"}"}`,
			wantArgs: `{"p": "{\"城市\":\"北京\",  \"备注\" : \"請帶上資料\", \"code\": \"AX9\"}"}`},
		{name: "array",
			args:     `{"p":"[\"软件\", {\"类型\": \"内存\"}, 3]"}`,
			wantArgs: `{"p":"[\"軟體\", {\"类型\": \"記憶體\"}, 3]"}`},
		{name: "escapes of unconverted strings kept",
			args:     `{"p":"{\"\\u540d\": \"line\\nx\", \"数据\": \"\\u4e2a人\"}"}`,
			wantArgs: `{"p":"{\"\\u540d\": \"line\\nx\", \"数据\": \"個人\"}"}`},
		{name: "JSON text inside JSON text",
			args:     `{"p":"{\"inner\": \"{\\\"城市\\\": \\\"广州\\\"}\"}"}`,
			wantArgs: `{"p":"{\"inner\": \"{\\\"城市\\\": \\\"廣州\\\"}\"}"}`},
		{name: "locked value inside is a unit",
			user:     "请发到一个数据组@x.com",
			wantUser: "請發到一個資料組@x.com",
			args:     `{"p":"{\"联系\": \"数据组@x.com\"}"}`,
			wantArgs: `{"p":"{\"联系\": \"資料組@x.com\"}"}`},
		{name: "result value",
			args: `{"p":"北京"}`, wantArgs: `{"p":"北京"}`,
			res:    `{"status": "ok", "detail": "{\"结果\": \"提交成功，请查收\", \"编号\": \"AX9\"}"}`,
			wantRe: `{"status": "ok", "detail": "{\"结果\": \"提交成功，請查收\", \"编号\": \"AX9\"}"}`},
		{name: "schema locks the string: one value",
			args:     `{"raw":"{\"软件\": \"内存\"}"}`,
			wantArgs: `{"raw":"{\"軟體\": \"記憶體\"}"}`},
		{name: "not JSON: text",
			args:     `{"p":"{软件: 内存"}`,
			wantArgs: `{"p":"{軟體: 記憶體"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !json.Valid([]byte(c.args)) || c.res != "" && !json.Valid([]byte(c.res)) {
				t.Fatalf("bad case: %s %s", c.args, c.res)
			}
			user, wantUser := c.user, c.wantUser
			if user == "" {
				user, wantUser = "提交表单", "提交表單"
			}
			src := &record.Record{
				ID:    "j:1",
				Tools: []record.Tool{{Name: "submit_form", Parameters: json.RawMessage(params)}},
				Messages: []record.Message{
					{Role: "user", Content: user},
					{Role: "assistant", Calls: []record.Call{{Name: "submit_form", Arguments: json.RawMessage(c.args)}}},
				},
			}
			if c.res != "" {
				src.Messages = append(src.Messages, record.Message{Role: "tool", Results: []record.Result{{Name: "submit_form", Content: c.res}}})
			}
			out := mustConvertRecord(t, src)
			if got := out.Messages[0].Content; got != wantUser {
				t.Errorf("user %q, want %q", got, wantUser)
			}
			if got := string(out.Messages[1].Calls[0].Arguments); got != c.wantArgs {
				t.Errorf("arguments\n got %s\nwant %s", got, c.wantArgs)
			}
			if c.res != "" {
				if got := out.Messages[2].Results[0].Content; got != c.wantRe {
					t.Errorf("result\n got %s\nwant %s", got, c.wantRe)
				}
			}
			for s := range translatable(out) {
				if r, ok := HasSimplifiedOnly(s.text); ok {
					t.Errorf("%s: %q keeps %q", s.path, s.text, r)
				}
			}
		})
	}
	// Keys are not text: a Traditional record whose only Simplified-only
	// characters are keys inside JSON text is not converted.
	tr, err := New(Config{Mode: ModeConvert}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &record.Record{
		ID:    "j:2",
		Tools: []record.Tool{{Name: "submit_form", Parameters: json.RawMessage(params)}},
		Messages: []record.Message{
			{Role: "user", Content: "請幫我提交表單，備註：帶投影片。"},
			{Role: "assistant", Calls: []record.Call{{Name: "submit_form", Arguments: json.RawMessage(`{"p":"{\"备注\": \"帶投影片\"}"}`)}}},
		},
	}
	got, err := NewStage(tr, "translate", nil).Process(t.Context(), src)
	if err != nil || len(got) != 1 || got[0] != src || got[0].Tag("lang") != "" {
		t.Errorf("Traditional record with a Simplified key in JSON text: got %v, %v; want it passed on unchanged", got, err)
	}
}

func TestConvertModeRejects(t *testing.T) {
	tr, err := New(Config{Mode: ModeConvert}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		r      *record.Record
		reason string
	}{
		{"english", &record.Record{Messages: []record.Message{{Role: "user", Content: "Hello there"}}}, ReasonNotChinese},
		{"bad arguments", &record.Record{Messages: []record.Message{{Role: "assistant", Calls: []record.Call{{Name: "f", Arguments: json.RawMessage(`[1]`)}}}}}, ReasonSourceInvalid},
	}
	for _, c := range cases {
		_, err := tr.Record(t.Context(), c.r)
		var rej *contract.Reject
		if !errors.As(err, &rej) || rej.Reason != c.reason {
			t.Errorf("%s: error %v, want %s", c.name, err, c.reason)
		}
	}
}

func BenchmarkConvert(b *testing.B) {
	// The fixture dialogue with its user turn and one argument in
	// Simplified Chinese: a record of typical size, mostly text to convert.
	r := loadRecord(b)
	r.Messages = append(r.Messages, record.Message{Role: "user", Content: "我需要为John Doe生成一张发票。他购买了2个苹果，每个$1，以及3根香蕉，每根$0.5。"})
	r.Messages[1].Calls[0].Arguments = json.RawMessage(`{"city": "京都", "check_in": "2024-11-22", "guests": 2, "sort_by": "rating", "contact_email": "amy@example.com", "notes": "远离街道的安静房间"}`)
	r.Messages[0].Content = "我想在京都找一间安静的酒店，两个人，2024-11-22入住，按评分排序，并告诉我那里的天气。我的邮箱是 amy@example.com。"
	mustConvertRecord(b, r)
	size := 0
	for s := range translatable(r) {
		size += len(s.text)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Convert(r); err != nil {
			b.Fatal(err)
		}
	}
}
