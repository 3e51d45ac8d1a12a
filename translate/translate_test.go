package translate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
)

func loadRecord(t testing.TB) *record.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r record.Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// okAnswer returns the good teacher answer decoded into plain maps, for
// tests to break in one place.
func okAnswer(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "answer_ok.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := jsonout.MarshalIndent(v, "")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Path helpers into a decoded answer.
func turn(m map[string]any, i int) map[string]any {
	return m["conversations"].([]any)[i].(map[string]any)
}

func call(m map[string]any, i, j int) map[string]any {
	return turn(m, i)["tool_calls"].([]any)[j].(map[string]any)
}

func args(m map[string]any, i, j int) map[string]any {
	return call(m, i, j)["arguments"].(map[string]any)
}

// teacher is a scripted teacher: it answers the i-th request with
// answers[i] (the last one repeats) and records the requests.
type teacher struct {
	mu       sync.Mutex
	answers  []string
	finish   string
	cut      int // the first cut answers end with finish_reason "length"
	requests []llm.Request
}

func (f *teacher) client() llm.Client {
	return llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests = append(f.requests, req)
		a := f.answers[min(len(f.requests), len(f.answers))-1]
		finish := f.finish
		if len(f.requests) <= f.cut {
			finish = "length"
		}
		if finish == "" {
			finish = "stop"
		}
		return llm.Response{Content: a, FinishReason: finish, Provider: "openai", Model: "teacher-1"}, nil
	})
}

// judge is a scripted equivalence judge: a translation listed in unequal is
// not equivalent; everything else is.
// judge is an equivalence judge: a translation is equivalent unless it is
// in unequal or, with pairs set, unless pairs says it renders that source
// value.
type judge struct {
	mu      sync.Mutex
	unequal map[string]bool
	pairs   map[[2]string]bool // {source value, translation}
	asked   []string           // "param=orig→translated"
	slots   []string
}

func (j *judge) fn(ctx context.Context, slot, param string, orig, translated json.RawMessage) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var o, tr string
	if err := json.Unmarshal(orig, &o); err != nil {
		return false, err
	}
	if err := json.Unmarshal(translated, &tr); err != nil {
		return false, err
	}
	j.asked = append(j.asked, param+"="+o+"→"+tr)
	j.slots = append(j.slots, slot)
	if j.pairs != nil {
		return j.pairs[[2]string{o, tr}], nil
	}
	return !j.unequal[tr], nil
}

func newTeacher(t testing.TB, cfg Config, f *teacher, j *judge) *Translator {
	t.Helper()
	tr, err := New(cfg, f.client(), j.fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTranslatePasses(t *testing.T) {
	src := loadRecord(t)
	f := &teacher{answers: []string{mustJSON(t, okAnswer(t))}}
	j := &judge{}
	out, err := newTeacher(t, Config{}, f, j).Record(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 1 {
		t.Errorf("%d requests, want 1", len(f.requests))
	}
	req := f.requests[0]
	if req.Stage != "translate@1" || req.Attempt != 0 || req.Offline != nil || len(req.JSONSchema) == 0 || req.Slot != "fixture:0/translate" {
		t.Errorf("request: stage %q attempt %d offline %v schema %d bytes slot %q", req.Stage, req.Attempt, req.Offline != nil, len(req.JSONSchema), req.Slot)
	}

	// Tools: byte-identical.
	if len(out.Tools) != len(src.Tools) {
		t.Fatalf("%d tools, want %d", len(out.Tools), len(src.Tools))
	}
	for i := range src.Tools {
		a, b := src.Tools[i], out.Tools[i]
		if a.Name != b.Name || a.Description != b.Description || !bytes.Equal(a.Parameters, b.Parameters) {
			t.Errorf("tool %d changed: %+v → %+v", i, a, b)
		}
	}
	// Locked argument bytes survive; free text is the converted answer.
	wantArgs := []string{
		`{"city": "京都", "check_in": "2024-11-22", "guests": 2, "sort_by": "rating", "contact_email": "amy@example.com", "notes": "遠離街道的安靜房間"}`,
		`{"city": "京都", "unit": "celsius"}`,
		`{"hotel_id": "HTL-4471", "guest_name": "Amy Chen", "website": "https://example.com/h/4471"}`,
	}
	var gotArgs []string
	for _, m := range out.Messages {
		for _, c := range m.Calls {
			gotArgs = append(gotArgs, string(c.Arguments))
		}
	}
	if !slices.Equal(gotArgs, wantArgs) {
		t.Errorf("arguments:\n got %q\nwant %q", gotArgs, wantArgs)
	}
	wantResult := `{"hotels": [{"hotel_id": "HTL-4471", "name": "Garden Inn", "review": "非常安靜又乾淨", "url": "https://example.com/h/4471", "price": 120.50}]}`
	if got := out.Messages[2].Results[0].Content; got != wantResult {
		t.Errorf("result:\n got %s\nwant %s", got, wantResult)
	}
	if got := out.Messages[6].Results[0].Content; got != "訂房已確認：參考編號 BK-99812。" {
		t.Errorf("plain result %q", got)
	}
	// The answer's Simplified-only characters are repaired one by one; its
	// words stay the teacher's (no s2twp phrase conversion: 网络→網絡).
	if got := out.Messages[3].Content; !strings.HasPrefix(got, "我在網絡上找到") {
		t.Errorf("content not repaired: %q", got)
	}
	if got := out.Messages[1].Reasoning; got != "使用者想找飯店並查詢天氣；這兩個呼叫互不相依。" {
		t.Errorf("reasoning %q", got)
	}
	if out.System != "你是一位樂於助人的旅遊助理。" {
		t.Errorf("system %q", out.System)
	}
	for s := range translatable(out) {
		if c, ok := HasSimplifiedOnly(s.text); ok {
			t.Errorf("%s keeps Simplified %q", s.path, c)
		}
	}
	// Tags, lineage, identity.
	if out.Tag("lang") != "zh-TW" || out.Tag("world") != "closed" {
		t.Errorf("tags %v", out.Tags)
	}
	if want := (record.Step{Stage: "translate", Provider: "openai", Model: "teacher-1"}); out.Lineage[len(out.Lineage)-1] != want {
		t.Errorf("lineage %v", out.Lineage)
	}
	if out.ID != src.ID || len(src.Lineage) != 1 || src.Tag("lang") != "" {
		t.Errorf("source changed or ID changed: %q %v %v", out.ID, src.Lineage, src.Tags)
	}
	// The judge saw exactly the changed free-text arguments, once each.
	wantAsked := []string{
		"search_hotels.city=Kyoto→京都",
		"search_hotels.notes=quiet room away from the street→遠離街道的安靜房間",
		"get_weather.city=Kyoto→京都",
	}
	if !slices.Equal(j.asked, wantAsked) {
		t.Errorf("judge asked %q, want %q", j.asked, wantAsked)
	}
	// Each question says where its value is (equiv_value's slot was empty).
	for _, s := range j.slots {
		if !regexp.MustCompile(`^translate/` + regexp.QuoteMeta(src.ID) + `/m\d+/c\d+$`).MatchString(s) {
			t.Errorf("judge slot %q", s)
		}
	}
}

// TestTranslateRejects breaks the good answer in one way per case; every
// attempt gets the same broken answer, so the record is rejected with the
// check's reason after Attempts asks.
func TestTranslateRejects(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(m map[string]any)
		raw    string // used instead of the broken map when set
		reason string
		detail string // substring of the reject detail
	}{
		{name: "invalid JSON", raw: `{"functions": [], "conversations": [`, reason: ReasonInvalidJSON, detail: "not valid JSON"},
		{name: "prose", raw: `Here is the translation you asked for.`, reason: ReasonInvalidJSON},
		{name: "array", raw: `[]`, reason: ReasonInvalidJSON, detail: "want an object"},
		{name: "extra top-level key", break_: func(m map[string]any) { m["note"] = "done" }, reason: ReasonInvalidJSON, detail: `unexpected key "note"`},
		{name: "call without arguments", break_: func(m map[string]any) { delete(call(m, 5, 0), "arguments") }, reason: ReasonInvalidJSON},
		{name: "functions missing", break_: func(m map[string]any) { delete(m, "functions") }, reason: ReasonToolsChanged},
		{name: "function description translated", break_: func(m map[string]any) {
			m["functions"].([]any)[1].(map[string]any)["description"] = "城市的天氣預報"
		}, reason: ReasonToolsChanged, detail: "functions[1] (get_weather)"},
		{name: "function dropped from functions", break_: func(m map[string]any) {
			m["functions"] = m["functions"].([]any)[:2]
		}, reason: ReasonToolsChanged},
		{name: "turn dropped", break_: func(m map[string]any) {
			c := m["conversations"].([]any)
			m["conversations"] = c[:len(c)-1]
		}, reason: ReasonTurnsChanged, detail: "7 turns, want 8"},
		{name: "role changed", break_: func(m map[string]any) { turn(m, 4)["role"] = "assistant" }, reason: ReasonTurnsChanged, detail: `role "assistant", want "user"`},
		{name: "system dropped", break_: func(m map[string]any) { delete(m, "system") }, reason: ReasonTurnsChanged},
		{name: "content dropped", break_: func(m map[string]any) { delete(turn(m, 3), "content") }, reason: ReasonTurnsChanged},
		{name: "text added to a call turn", break_: func(m map[string]any) { turn(m, 5)["content"] = "好的。" }, reason: ReasonTurnsChanged},
		{name: "function renamed", break_: func(m map[string]any) { call(m, 5, 0)["name"] = "預訂飯店" }, reason: ReasonFunctionRenamed, detail: `"book_hotel" was renamed to "預訂飯店"`},
		{name: "parallel call renamed", break_: func(m map[string]any) { call(m, 1, 1)["name"] = "get_forecast" }, reason: ReasonFunctionRenamed},
		{name: "call dropped", break_: func(m map[string]any) {
			t := turn(m, 1)
			t["tool_calls"] = t["tool_calls"].([]any)[:1]
		}, reason: ReasonCallDropped},
		{name: "call added", break_: func(m map[string]any) {
			t := turn(m, 5)
			t["tool_calls"] = append(t["tool_calls"].([]any), map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "京都"}})
		}, reason: ReasonCallAdded},
		{name: "calls added to a text turn", break_: func(m map[string]any) {
			turn(m, 3)["tool_calls"] = []any{map[string]any{"name": "book_hotel", "arguments": map[string]any{}}}
		}, reason: ReasonCallAdded},
		{name: "argument key translated", break_: func(m map[string]any) {
			a := args(m, 5, 0)
			a["旅客姓名"] = a["guest_name"]
			delete(a, "guest_name")
		}, reason: ReasonKeyChanged, detail: `key "guest_name" is missing`},
		{name: "argument key added", break_: func(m map[string]any) { args(m, 1, 1)["days"] = 3.0 }, reason: ReasonKeyChanged, detail: `unexpected key "days"`},
		{name: "enum member translated", break_: func(m map[string]any) { args(m, 1, 1)["unit"] = "攝氏" }, reason: ReasonEnumChanged, detail: `"celsius" was changed to "攝氏"`},
		{name: "enum member swapped", break_: func(m map[string]any) { args(m, 1, 0)["sort_by"] = "price" }, reason: ReasonEnumChanged},
		{name: "number changed", break_: func(m map[string]any) { args(m, 1, 0)["guests"] = 3.0 }, reason: ReasonValueChanged, detail: "2 was changed to 3"},
		{name: "number became text", break_: func(m map[string]any) { args(m, 1, 0)["guests"] = "兩位" }, reason: ReasonValueChanged, detail: "a number became a string"},
		{name: "date translated", break_: func(m map[string]any) { args(m, 1, 0)["check_in"] = "2024年11月22日" }, reason: ReasonValueChanged},
		{name: "ID changed", break_: func(m map[string]any) { args(m, 5, 0)["hotel_id"] = "HTL-4417" }, reason: ReasonValueChanged},
		{name: "URL changed", break_: func(m map[string]any) { args(m, 5, 0)["website"] = "https://example.com/zh-tw/h/4471" }, reason: ReasonValueChanged},
		{name: "e-mail changed", break_: func(m map[string]any) { args(m, 1, 0)["contact_email"] = "amy@example.com.tw" }, reason: ReasonValueChanged},
		{name: "result key translated", break_: func(m map[string]any) {
			res := turn(m, 2)["results"].([]any)[1].(map[string]any)["content"].(map[string]any)
			res["預報"] = res["forecast"]
			delete(res, "forecast")
		}, reason: ReasonResultsChanged},
		{name: "result ID changed", break_: func(m map[string]any) {
			res := turn(m, 2)["results"].([]any)[0].(map[string]any)["content"].(map[string]any)
			res["hotels"].([]any)[0].(map[string]any)["hotel_id"] = "HTL-1"
		}, reason: ReasonValueChanged},
		{name: "result dropped", break_: func(m map[string]any) {
			t := turn(m, 2)
			t["results"] = t["results"].([]any)[:1]
		}, reason: ReasonResultsChanged},
		{name: "plain result became an object", break_: func(m map[string]any) {
			turn(m, 6)["results"].([]any)[0].(map[string]any)["content"] = map[string]any{"status": "ok"}
		}, reason: ReasonResultsChanged},
		// 恒生 is a proper name that OpenCC's phrase table keeps as is, so
		// 恒 (Simplified for 恆) survives s2twp; Taiwan writes 恆生.
		{name: "left in English", break_: func(m map[string]any) {
			turn(m, 7)["content"] = "Your booking is confirmed; the reference is BK-99812."
		}, reason: ReasonUntranslated},
		{name: "partly translated", break_: func(m map[string]any) {
			turn(m, 3)["content"] = "我 found Garden Inn (HTL-4471) for 120.50 per night. Expect light rain and 14 °C. Shall I book it?"
		}, reason: ReasonUntranslated, detail: "conversations[3].content: "},
		{name: "Japanese", break_: func(m map[string]any) {
			turn(m, 7)["content"] = "ご予約は確定しました。参照番号は BK-99812 です。"
		}, reason: ReasonUntranslated, detail: "conversations[7].content: "},
		{name: "Korean", break_: func(m map[string]any) {
			turn(m, 7)["content"] = "예약이 확정되었습니다. 참조 번호는 BK-99812입니다."
		}, reason: ReasonUntranslated, detail: "kana or hangul"},
		{name: "free text changed meaning", break_: func(m map[string]any) { args(m, 1, 0)["notes"] = "靠近街道的熱鬧房間" }, reason: ReasonNotEquivalent, detail: "靠近街道的熱鬧房間"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.raw
			if c.break_ != nil {
				m := okAnswer(t)
				c.break_(m)
				a = mustJSON(t, m)
			}
			f := &teacher{answers: []string{a}}
			j := &judge{unequal: map[string]bool{"靠近街道的熱鬧房間": true}}
			out, err := newTeacher(t, Config{Attempts: 2}, f, j).Record(t.Context(), loadRecord(t))
			if out != nil {
				t.Fatalf("accepted a broken answer")
			}
			var rej *contract.Reject
			if !errors.As(err, &rej) {
				t.Fatalf("error %v is not a *contract.Reject", err)
			}
			if rej.Reason != c.reason {
				t.Errorf("reason %q, want %q (%s)", rej.Reason, c.reason, rej.Detail)
			}
			if !strings.Contains(rej.Detail, c.detail) {
				t.Errorf("detail %q lacks %q", rej.Detail, c.detail)
			}
			if len(f.requests) != 2 {
				t.Errorf("%d requests, want 2 (attempts)", len(f.requests))
			}
			// The re-ask is a distinct request that quotes the problem.
			if f.requests[1].Attempt != 1 || !strings.Contains(f.requests[1].Messages[0].Content, "was rejected for these reasons") {
				t.Errorf("re-ask: attempt %d, feedback missing", f.requests[1].Attempt)
			}
		})
	}
}

func TestTranslateReaskThenSuccess(t *testing.T) {
	bad := okAnswer(t)
	call(bad, 5, 0)["name"] = "預訂飯店"
	f := &teacher{answers: []string{mustJSON(t, bad), mustJSON(t, okAnswer(t))}}
	out, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), loadRecord(t))
	if err != nil {
		t.Fatal(err)
	}
	if out.Messages[5].Calls[0].Name != "book_hotel" {
		t.Errorf("call name %q", out.Messages[5].Calls[0].Name)
	}
	if len(f.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(f.requests))
	}
	first, second := f.requests[0], f.requests[1]
	if first.Attempt != 0 || second.Attempt != 1 {
		t.Errorf("attempts %d, %d", first.Attempt, second.Attempt)
	}
	if strings.Contains(first.Messages[0].Content, "rejected") {
		t.Errorf("first ask carries feedback")
	}
	if !strings.Contains(second.Messages[0].Content, `function "book_hotel" was renamed to "預訂飯店"`) {
		t.Errorf("re-ask lacks the problem:\n%s", second.Messages[0].Content)
	}
	if !bytes.Equal(first.JSONSchema, second.JSONSchema) || first.Template != second.Template {
		t.Errorf("schema or template changed between attempts")
	}
}

func TestTranslateReaskExhausted(t *testing.T) {
	bad := okAnswer(t)
	args(bad, 1, 1)["unit"] = "攝氏"
	f := &teacher{answers: []string{mustJSON(t, bad)}}
	_, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), loadRecord(t))
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.RejectReason() != ReasonEnumChanged {
		t.Fatalf("error %v, want reject %s", err, ReasonEnumChanged)
	}
	if len(f.requests) != 3 || !strings.Contains(rej.Detail, "3 attempt(s)") {
		t.Errorf("%d requests (want the default 3); detail %q", len(f.requests), rej.Detail)
	}
	// The detail names the earlier attempts' problems after the last one's.
	if !strings.Contains(rej.Detail, "(earlier: attempt 1: ") || !strings.Contains(rej.Detail, "; attempt 2: ") {
		t.Errorf("detail %q does not name the earlier attempts", rej.Detail)
	}
}

// TestTranslateReorderedCalls: parallel calls that come back in another
// order are aligned to the source's by Hungarian assignment and put back in
// the source's order.
func TestTranslateReorderedCalls(t *testing.T) {
	m := okAnswer(t)
	tc := turn(m, 1)["tool_calls"].([]any)
	tc[0], tc[1] = tc[1], tc[0]
	f := &teacher{answers: []string{mustJSON(t, m)}}
	out, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), loadRecord(t))
	if err != nil {
		t.Fatal(err)
	}
	calls := out.Messages[1].Calls
	if calls[0].Name != "search_hotels" || calls[1].Name != "get_weather" {
		t.Errorf("order %s, %s", calls[0].Name, calls[1].Name)
	}
	if !strings.Contains(string(calls[0].Arguments), `"notes": "遠離街道的安靜房間"`) {
		t.Errorf("arguments %s", calls[0].Arguments)
	}
}

// TestTranslateSameNameParallelCalls: two calls of one function are told
// apart by their values.
// TestTranslateJSONTextArgument: an argument whose value is JSON text
// keeps its keys, its locked values and its bytes; only its free text is
// translated (and judged).
func TestTranslateJSONTextArgument(t *testing.T) {
	params := `{"type":"object","properties":{"title":{"type":"string"},"payload":{"type":"string","description":"JSON text with extra options"}}}`
	src := &record.Record{
		ID:    "j:1",
		Tools: []record.Tool{{Name: "book_meeting", Description: "Book a meeting room", Parameters: json.RawMessage(params)}},
		Messages: []record.Message{
			{Role: "user", Content: "Book the weekly team sync and remind me to bring the slides."},
			{Role: "assistant", Calls: []record.Call{
				{Name: "book_meeting", Arguments: json.RawMessage(`{"title":"Weekly team sync","payload":"{\"note\": \"bring the slides\", \"code\": \"AX9\"}"}`)},
			}},
		},
	}
	answer := func(payload string) string {
		p, _ := json.Marshal(payload)
		return `{"functions":[{"name":"book_meeting","description":"Book a meeting room","parameters":` + params + `}],
	"conversations":[{"role":"user","content":"幫我預訂團隊每週例會，並提醒我帶投影片。"},
	{"role":"assistant","tool_calls":[{"name":"book_meeting","arguments":{"title":"團隊每週例會","payload":` + string(p) + `}}]}]}`
	}
	cases := []struct {
		name, payload, reason, want string
	}{
		{name: "free text translated", payload: `{"note":"帶投影片","code":"AX9"}`,
			want: `{"title":"團隊每週例會","payload":"{\"note\": \"帶投影片\", \"code\": \"AX9\"}"}`},
		{name: "inner key translated", payload: `{"備註": "帶投影片", "code": "AX9"}`, reason: ReasonKeyChanged},
		{name: "inner code changed", payload: `{"note": "帶投影片", "code": "AX8"}`, reason: ReasonValueChanged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &teacher{answers: []string{answer(c.payload)}}
			j := &judge{}
			out, err := newTeacher(t, Config{Attempts: 1}, f, j).Record(t.Context(), src)
			if c.reason != "" {
				var rej *contract.Reject
				if !errors.As(err, &rej) || rej.Reason != c.reason {
					t.Fatalf("got %v, want reject %s", err, c.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(out.Messages[1].Calls[0].Arguments); got != c.want {
				t.Errorf("arguments %s, want %s", got, c.want)
			}
			if !slices.Contains(j.asked, "book_meeting.payload.note=bring the slides→帶投影片") {
				t.Errorf("judge asked %q", j.asked)
			}
		})
	}
}

func TestTranslateSameNameParallelCalls(t *testing.T) {
	src := &record.Record{
		ID:    "p:1",
		Tools: []record.Tool{{Name: "get_stock_price", Description: "Price of a stock", Parameters: json.RawMessage(`{"type":"object","properties":{"symbol":{"type":"string"},"note":{"type":"string"}}}`)}},
		Messages: []record.Message{
			{Role: "user", Content: "What do Apple and Microsoft trade at right now?"},
			{Role: "assistant", Calls: []record.Call{
				{Name: "get_stock_price", Arguments: json.RawMessage(`{"symbol":"AAPL","note":"for my portfolio review"}`)},
				{Name: "get_stock_price", Arguments: json.RawMessage(`{"symbol":"MSFT","note":"compare with last week"}`)},
			}},
		},
	}
	answer := `{"functions":[{"name":"get_stock_price","description":"Price of a stock","parameters":{"type":"object","properties":{"symbol":{"type":"string"},"note":{"type":"string"}}}}],
	"conversations":[{"role":"user","content":"蘋果和微軟現在的股價是多少？"},
	{"role":"assistant","tool_calls":[
	  {"name":"get_stock_price","arguments":{"symbol":"MSFT","note":"與上週比較"}},
	  {"name":"get_stock_price","arguments":{"symbol":"AAPL","note":"用於我的投資組合檢視"}}]}]}`
	f := &teacher{answers: []string{answer}}
	out, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"symbol":"AAPL","note":"用於我的投資組合檢視"}`, `{"symbol":"MSFT","note":"與上週比較"}`}
	for i, c := range out.Messages[1].Calls {
		if string(c.Arguments) != want[i] {
			t.Errorf("call %d: %s, want %s", i, c.Arguments, want[i])
		}
	}
}

func TestTranslateFencedAnswer(t *testing.T) {
	f := &teacher{answers: []string{"```json\n" + mustJSON(t, okAnswer(t)) + "\n```"}}
	if _, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), loadRecord(t)); err != nil {
		t.Fatal(err)
	}
}

// TestTranslateInlineThinking: a reasoning model served without a reasoning
// parser writes its thinking before the JSON (a <think> block, or
// DeepSeek-R1's "thinking\n</think>"): it is taken out and the JSON read;
// thinking without an answer is asked again, then llm_thinking_only.
func TestTranslateInlineThinking(t *testing.T) {
	a := mustJSON(t, okAnswer(t))
	for _, ans := range []string{
		"<think>\nZZTHINK translate it.\n</think>\n\n" + a,
		"ZZTHINK translate it.\n</think>\n\n```json\n" + a + "\n```",
	} {
		f := &teacher{answers: []string{ans}}
		if _, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), loadRecord(t)); err != nil || len(f.requests) != 1 {
			t.Errorf("%.40q: %v after %d requests", ans, err, len(f.requests))
		}
	}
	f := &teacher{answers: []string{"<think>\nZZTHINK translate it. " + a}}
	_, err := newTeacher(t, Config{Attempts: 2}, f, &judge{}).Record(t.Context(), loadRecord(t))
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.Reason != llm.ReasonThinkingOnly || !strings.Contains(rej.Detail, "never closed") || len(f.requests) != 2 {
		t.Fatalf("error %v after %d requests", err, len(f.requests))
	}
	if fb := f.requests[1].Messages[0].Content; !strings.Contains(fb, "thinking only") {
		t.Errorf("the re-ask does not say what was wrong:\n%s", fb)
	}
}

// TestTranslateTruncatedAnswer: an answer cut off at the token limit is
// asked again with the same prompt (no feedback on it), as llm.Ask does, so
// a truncation fault does not change what is asked next; the last one is
// llm_truncated, as in the other LLM stages.
func TestTranslateTruncatedAnswer(t *testing.T) {
	a := mustJSON(t, okAnswer(t))
	f := &teacher{answers: []string{a[:len(a)/2]}, finish: "length"}
	_, err := newTeacher(t, Config{Attempts: 1}, f, &judge{}).Record(t.Context(), loadRecord(t))
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.Reason != "llm_truncated" || !strings.Contains(rej.Detail, "token limit") {
		t.Fatalf("error %v", err)
	}
	f = &teacher{answers: []string{a[:len(a)/2], a}, cut: 1}
	if _, err := newTeacher(t, Config{Attempts: 2}, f, &judge{}).Record(t.Context(), loadRecord(t)); err != nil {
		t.Fatal(err)
	}
	first, second := f.requests[0], f.requests[1]
	if second.Attempt != first.Attempt+1 || !slices.Equal(first.Messages, second.Messages) {
		t.Errorf("the re-ask after a cut answer: attempt %d after %d, same messages %v", second.Attempt, first.Attempt, slices.Equal(first.Messages, second.Messages))
	}
}

// TestTranslateSystemicErrors: errors of the teacher and of the judge pass
// through untouched, so the runner can tell a fatal condition from a reject.
func TestTranslateSystemicErrors(t *testing.T) {
	fatal := &llm.FatalError{Reason: "llm_offline_unsupported", Msg: "needs a real teacher"}
	client := llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) { return llm.Response{}, fatal })
	tr, err := New(Config{}, client, (&judge{}).fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Record(t.Context(), loadRecord(t)); !errors.Is(err, fatal) {
		t.Errorf("teacher error: got %v", err)
	}

	down := errors.New("judge endpoint down")
	f := &teacher{answers: []string{mustJSON(t, okAnswer(t))}}
	tr, err = New(Config{}, f.client(), func(context.Context, string, string, json.RawMessage, json.RawMessage) (bool, error) {
		return false, down
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Record(t.Context(), loadRecord(t))
	var rej *contract.Reject
	if !errors.Is(err, down) || errors.As(err, &rej) {
		t.Errorf("judge error: got %v", err)
	}
}

func TestTranslateSourceInvalid(t *testing.T) {
	src := loadRecord(t)
	src.Messages[5].Calls[0].Arguments = json.RawMessage(`{"hotel_id": `)
	f := &teacher{answers: []string{"{}"}}
	_, err := newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), src)
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.Reason != ReasonSourceInvalid || len(f.requests) != 0 {
		t.Fatalf("error %v after %d requests", err, len(f.requests))
	}
}

func TestNewNeeds(t *testing.T) {
	j := (&judge{}).fn
	c := (&teacher{}).client()
	if _, err := New(Config{}, nil, j, nil); err == nil {
		t.Error("teacher mode without a client")
	}
	if _, err := New(Config{}, c, nil, nil); err == nil {
		t.Error("teacher mode without a judge")
	}
	if _, err := New(Config{Mode: "convert"}, nil, nil, nil); err != nil {
		t.Errorf("convert mode: %v", err)
	}
	if _, err := New(Config{Mode: "magic"}, c, j, nil); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("bad mode: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.tmpl")
	if err := os.WriteFile(bad, []byte("-- user --\n{{.Nope}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Prompt: bad}, c, j, nil); err == nil || !strings.Contains(err.Error(), "Nope") {
		t.Errorf("broken override: %v", err)
	}
}

func TestConfig(t *testing.T) {
	var d Config
	d.Defaults()
	if d != (Config{Mode: "teacher", Ratio: 1, Attempts: 3, Keep: "translated"}) {
		t.Errorf("defaults %+v", d)
	}
	if errs := d.Validate(); len(errs) != 0 {
		t.Errorf("defaults invalid: %v", errs)
	}
	cases := []struct {
		cfg  Config
		want []string // substrings, one per error
	}{
		{Config{Count: 10}, nil},
		{Config{Mode: "convert", Ratio: 0.25, Keep: "both"}, nil},
		{Config{Mode: "gpt"}, []string{"mode"}},
		{Config{Keep: "all"}, []string{"keep"}},
		{Config{Ratio: 1.5}, []string{"ratio"}},
		{Config{Ratio: -0.1}, []string{"ratio"}},
		{Config{Count: -1}, []string{"count"}},
		{Config{Ratio: 0.5, Count: 10}, []string{"ratio and count"}},
		{Config{Attempts: -2}, []string{"attempts"}},
		{Config{Mode: "convert", Prompt: "x.tmpl"}, []string{"prompt"}},
	}
	for _, c := range cases {
		c.cfg.Defaults()
		errs := c.cfg.Validate()
		if len(errs) != len(c.want) {
			t.Errorf("%+v: errors %v, want %d", c.cfg, errs, len(c.want))
			continue
		}
		for i, e := range errs {
			if !strings.HasPrefix(e.Error(), c.want[i]) {
				t.Errorf("%+v: error %q, want it to start with %q", c.cfg, e, c.want[i])
			}
		}
	}
}

// TestTranslateConcurrent: one Translator serves many records at once.
func TestTranslateConcurrent(t *testing.T) {
	f := &teacher{answers: []string{mustJSON(t, okAnswer(t))}}
	tr := newTeacher(t, Config{}, f, &judge{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := tr.Record(t.Context(), loadRecord(t))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// withBrokenReadBack makes the conversion check know no relation between
// characters, so that every conversion that changes a character counts as
// damaged: it tests that a damaged conversion rejects the record in both
// modes (the real check accepts every conversion of the real data).
func withBrokenReadBack(t *testing.T) {
	t.Helper()
	broken := *mustChinese()
	broken.readBack = &readBack{}
	saved := loadChinese
	loadChinese = func() (*chinese, error) { return &broken, nil }
	t.Cleanup(func() { loadChinese = saved })
}

func TestConversionDamagedRejects(t *testing.T) {
	withBrokenReadBack(t)
	conv, err := New(Config{Mode: ModeConvert}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &record.Record{ID: "zh:1", Messages: []record.Message{{Role: "user", Content: "来确保存储在区块链上"}}}
	_, err = conv.Record(t.Context(), src)
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.Reason != ReasonConversionDamaged || !strings.Contains(rej.Detail, "来确保存储") {
		t.Errorf("convert mode: error %v, want reject %s", err, ReasonConversionDamaged)
	}

	// Teacher mode converts with s2twp only locked values holding
	// Simplified-only characters (the teacher's text is repaired character
	// by character).
	teachSrc := loadRecord(t)
	setArg(t, teachSrc, 1, 0, "contact_email", "约翰@example.com")
	ans := okAnswer(t)
	args(ans, 1, 0)["contact_email"] = "约翰@example.com"
	f := &teacher{answers: []string{mustJSON(t, ans)}}
	_, err = newTeacher(t, Config{}, f, &judge{}).Record(t.Context(), teachSrc)
	if !errors.As(err, &rej) || rej.Reason != ReasonConversionDamaged {
		t.Errorf("teacher mode: error %v, want reject %s", err, ReasonConversionDamaged)
	}
	if len(f.requests) != 1 {
		t.Errorf("teacher mode: %d requests; a damaged conversion is not the teacher's to fix", len(f.requests))
	}
}
