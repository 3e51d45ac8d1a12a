package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
)

// Fixtures shared by the tests of reason, decision_tokens, negatives,
// response_schema and verify (prefix fx).

func fxEnv(stage string, teacher llm.Client) *Env {
	return &Env{Stage: stage, Seed: 7, Dir: ".", Teacher: teacher, Provider: "offline", Capacity: 4}
}

// fxOffline answers like the offline provider: with the request's stand-in.
func fxOffline() llm.Client {
	return llm.ClientFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		if req.Offline == nil {
			return llm.Response{}, errors.New("request has no offline stand-in")
		}
		s, err := req.Offline()
		return llm.Response{Content: s, FinishReason: "stop", Provider: llm.ProviderOffline}, err
	})
}

// fxScript answers each slot with its scripted answers in order (the last
// one repeats) and the offline stand-in for slots without a script. It
// records every request. Provider is "fake", so llm.Ask re-asks.
type fxScript struct {
	mu      sync.Mutex
	answers map[string][]string
	asked   map[string]int
	reqs    []llm.Request
	err     error // returned for every request when set
}

func (s *fxScript) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if s.err != nil {
		return llm.Response{}, s.err
	}
	if s.asked == nil {
		s.asked = map[string]int{}
	}
	list, ok := s.answers[req.Slot]
	if !ok {
		text, err := req.Offline()
		return llm.Response{Content: text, FinishReason: "stop", Provider: "fake", Model: "m1"}, err
	}
	i := min(s.asked[req.Slot], len(list)-1)
	s.asked[req.Slot]++
	return llm.Response{Content: list[i], FinishReason: "stop", Provider: "fake", Model: "m1"}, nil
}

func (s *fxScript) count(slot string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if r.Slot == slot {
			n++
		}
	}
	return n
}

func fxTool(name, desc, params string) record.Tool {
	return record.Tool{Name: name, Description: desc, Parameters: json.RawMessage(params)}
}

var (
	fxTraffic = fxTool("get_traffic_report", "Get the current traffic report",
		`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. Los Angeles, CA"}},"required":["location"]}`)
	fxStock = fxTool("get_stock_price", "Get the latest trading price of a stock.",
		`{"type":"object","properties":{"symbol":{"type":"string","description":"The ticker symbol"}},"required":["symbol"]}`)
	fxTime = fxTool("get_local_time", "Get the current local time in a city.",
		`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	fxWeather = fxTool("get_weather", "Get the weather in a location",
		`{"type":"object","properties":{"location":{"type":"string"},"units":{"type":"string","enum":["celsius","fahrenheit"]},"filters":{"type":"object","properties":{"wind":{"type":"boolean"}}}},"required":["location"]}`)
	fxMeta = fxTool("meta_tool", "Find a tool that matches a description of what it does and of its parameters.",
		`{"type":"object","properties":{"tool_description":{"type":"string"},"param_description":{"type":"array","items":{"type":"string"}}},"required":["tool_description","param_description"]}`)
)

func fxUser(s string) record.Message { return record.Message{Role: record.RoleUser, Content: s} }
func fxSay(s string) record.Message  { return record.Message{Role: record.RoleAssistant, Content: s} }

// fxCalls makes an assistant call turn from name, arguments pairs.
func fxCalls(pairs ...string) record.Message {
	m := record.Message{Role: record.RoleAssistant}
	for i := 0; i+1 < len(pairs); i += 2 {
		m.Calls = append(m.Calls, record.Call{Name: pairs[i], Arguments: json.RawMessage(pairs[i+1])})
	}
	return m
}

// fxResults makes a tool turn from name, content pairs.
func fxResults(pairs ...string) record.Message {
	m := record.Message{Role: record.RoleTool}
	for i := 0; i+1 < len(pairs); i += 2 {
		m.Results = append(m.Results, record.Result{Name: pairs[i], Content: pairs[i+1]})
	}
	return m
}

func fxRecord(id string, tools []record.Tool, msgs ...record.Message) *record.Record {
	return &record.Record{ID: id, Source: "fx", Format: "openai", Tools: tools, Messages: msgs}
}

// fxSingle: one call, as in seed 000 Fig 13.
func fxSingle() *record.Record {
	return fxRecord("fx:single", []record.Tool{fxTraffic, fxStock},
		fxUser("I need to check the traffic situation in Miami, Florida before I head out. Can you help with that?"),
		fxCalls("get_traffic_report", `{"location":"Miami, Florida"}`),
		fxResults("get_traffic_report", `{"status":"heavy","incidents":[{"road":"I-95","delay_min":20},{"road":"US-1"}]}`),
		fxSay("Traffic in Miami is heavy right now: expect 20 minutes of delay on I-95."))
}

// fxParallel: three parallel calls, one function called twice.
func fxParallel() *record.Record {
	return fxRecord("fx:parallel", []record.Tool{fxStock, fxTime, fxTraffic},
		fxUser("Compare the share prices of Apple and Microsoft, and what time is it in New York?"),
		fxCalls("get_stock_price", `{"symbol":"AAPL"}`, "get_stock_price", `{"symbol":"MSFT"}`, "get_local_time", `{"city":"New York"}`),
		fxResults("get_stock_price", `{"price":191.2}`, "get_stock_price", `{"price":402.5}`, "get_local_time", `{"time":"09:41"}`),
		fxSay("Apple trades at 191.2 and Microsoft at 402.5; it is 09:41 in New York."))
}

// fxMetaTool: an open-world dialogue (seed 000 Fig 12): meta_tool retrieves
// get_traffic_report, which is then called.
func fxMetaTool() *record.Record {
	def, _ := json.Marshal(map[string]any{"name": fxTraffic.Name, "description": fxTraffic.Description, "parameters": fxTraffic.Parameters})
	return fxRecord("fx:meta", []record.Tool{fxMeta, fxStock},
		fxUser("I need to check the traffic situation in Miami, Florida before I head out."),
		fxCalls("meta_tool", `{"tool_description":"Retrieve the latest traffic information","param_description":["The city and state where you want traffic information"]}`),
		fxResults("meta_tool", string(def)),
		fxCalls("get_traffic_report", `{"location":"Miami, Florida"}`),
		fxResults("get_traffic_report", `{"status":"light"}`),
		fxSay("Traffic in Miami is light."))
}

// fxMultiTurn: three call turns; the last repeats the first's function.
func fxMultiTurn() *record.Record {
	return fxRecord("fx:multi", []record.Tool{fxWeather, fxTime, fxTraffic},
		fxUser("What's the weather in Paris?"),
		fxCalls("get_weather", `{"location":"Paris","units":"celsius"}`),
		fxResults("get_weather", `{"temp":18,"sky":"cloudy"}`),
		fxSay("It is 18 °C and cloudy in Paris."),
		fxUser("And what time is it there?"),
		fxCalls("get_local_time", `{"city":"Paris"}`),
		fxResults("get_local_time", `{"time":"15:02"}`),
		fxSay("It is 15:02 in Paris."),
		fxUser("How about the weather in Rome, with wind?"),
		fxCalls("get_weather", `{"location":"Rome","filters":{"wind":true}}`),
		fxResults("get_weather", `{"temp":24.5,"sky":"sunny","wind":{"kmh":12}}`),
		fxSay("Rome: 24.5 °C, sunny, wind 12 km/h."))
}

func fxChat() *record.Record {
	return fxRecord("fx:chat", []record.Tool{fxWeather}, fxUser("Hi!"), fxSay("Hello! How can I help?"))
}

func fxAll() []*record.Record {
	return []*record.Record{fxSingle(), fxParallel(), fxMetaTool(), fxMultiTurn(), fxChat()}
}

func buildReason(t testing.TB, cfg ReasonConfig, teacher llm.Client) Stage {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(fxEnv("reason", teacher))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func processOne(t testing.TB, st Stage, r *record.Record) *record.Record {
	t.Helper()
	out, err := st.Process(context.Background(), r)
	if err != nil {
		t.Fatalf("%s: %v", r.ID, err)
	}
	if len(out) != 1 {
		t.Fatalf("%s: got %d records, want 1", r.ID, len(out))
	}
	return out[0]
}

func TestReasonOnEveryCallTurnOnly(t *testing.T) {
	for _, style := range []string{ReasonStyleMetaTool, ReasonStyleMediaTek} {
		t.Run(style, func(t *testing.T) {
			st := buildReason(t, ReasonConfig{Style: style}, fxOffline())
			for _, in := range fxAll() {
				before := in.Clone()
				out := processOne(t, st, in)
				if !equalJSON(t, in, before) {
					t.Errorf("%s: input record was modified", in.ID)
				}
				if in.Category() == "chat" {
					if out != in {
						t.Errorf("%s: a record without calls must pass through unchanged", in.ID)
					}
					continue
				}
				for k, m := range out.Messages {
					isCall := m.Role == record.RoleAssistant && len(m.Calls) > 0
					switch {
					case isCall && m.Reasoning == "":
						t.Errorf("%s: messages[%d] calls %v but has no reasoning", in.ID, k, calledNames(m))
					case !isCall && m.Reasoning != "":
						t.Errorf("%s: messages[%d] (%s) got reasoning %q", in.ID, k, m.Role, m.Reasoning)
					case isCall:
						for _, n := range calledNames(m) {
							if !strings.Contains(m.Reasoning, n) {
								t.Errorf("%s: messages[%d] reasoning does not name %s: %q", in.ID, k, n, m.Reasoning)
							}
						}
						if strings.HasPrefix(m.Reasoning, "{") {
							t.Errorf("%s: messages[%d] stored the JSON wrapper: %q", in.ID, k, m.Reasoning)
						}
					}
				}
				if n := len(out.Lineage); n != 1 || out.Lineage[0] != (record.Step{Stage: "reason", Provider: "offline"}) {
					t.Errorf("%s: lineage %+v", in.ID, out.Lineage)
				}
			}
		})
	}
}

func equalJSON(t testing.TB, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}

func TestReasonStandInShape(t *testing.T) {
	got := reasonStandIn(fxSingle(), 1)
	want := `You asked: "I need to check the traffic situation in Miami, Florida before I head out. Can you help with that?" ` +
		`To help you, I will call the get_traffic_report function because its description, "Get the current traffic report", fits your request. ` +
		`I will set location to "Miami, Florida".`
	if got != want {
		t.Errorf("stand-in:\n got %s\nwant %s", got, want)
	}
	par := reasonStandIn(fxParallel(), 1)
	for _, s := range []string{"the get_stock_price function and the get_local_time function",
		`For call 1 (get_stock_price) I will set symbol to "AAPL"; for call 2 (get_stock_price) I will set symbol to "MSFT"; for call 3 (get_local_time) I will set city to "New York".`} {
		if !strings.Contains(par, s) {
			t.Errorf("parallel stand-in %q lacks %q", par, s)
		}
	}
	meta := reasonStandIn(fxMetaTool(), 3)
	if !strings.Contains(meta, "I now have the results of the meta_tool function") {
		t.Errorf("stand-in after a tool turn should say so: %q", meta)
	}
	if !strings.Contains(reasonStandIn(fxMetaTool(), 1), "meta_tool finds one") {
		t.Errorf("meta_tool stand-in: %q", reasonStandIn(fxMetaTool(), 1))
	}
	nested := reasonStandIn(fxMultiTurn(), 9)
	if !strings.Contains(nested, `I will set location to "Rome" and filters to {"wind":true}.`) {
		t.Errorf("nested stand-in: %q", nested)
	}
}

// The teacher sees the tools and the dialogue up to and including the call
// turn, nothing after it and no earlier reasoning; slots and stage are set.
func TestReasonRequests(t *testing.T) {
	sc := &fxScript{}
	st := buildReason(t, ReasonConfig{}, sc)
	in := fxMultiTurn()
	in.Messages[1].Reasoning = "EARLIER-REASONING"
	st.(*reasoner).cfg.Overwrite = true
	processOne(t, st, in)
	if len(sc.reqs) != 3 {
		t.Fatalf("got %d requests, want 3 (one per call turn)", len(sc.reqs))
	}
	for _, req := range sc.reqs {
		if req.Stage != "reason@2" || req.Template == "" || req.Offline == nil {
			t.Errorf("request %+v", req)
		}
		var k int
		if _, err := fmt.Sscanf(req.Slot, "fx:multi/turn%d", &k); err != nil {
			t.Fatalf("slot %q", req.Slot)
		}
		text := req.Messages[len(req.Messages)-1].Content
		if strings.Contains(text, "EARLIER-REASONING") {
			t.Errorf("turn %d: prompt shows earlier reasoning", k)
		}
		if !strings.Contains(text, `"name": "get_traffic_report"`) {
			t.Errorf("turn %d: prompt does not list the tools", k)
		}
		for i, m := range in.Messages {
			if m.Role != record.RoleUser {
				continue
			}
			if shown := strings.Contains(text, m.Content); shown != (i < k) {
				t.Errorf("turn %d: user message %d shown=%v", k, i, shown)
			}
		}
		call := string(in.Messages[k].Calls[0].Arguments)
		if !strings.Contains(text, call) {
			t.Errorf("turn %d: prompt lacks the call %s", k, call)
		}
	}
}

func TestReasonKeepsExistingReasoning(t *testing.T) {
	in := fxMultiTurn()
	in.Messages[1].Reasoning = "kept"
	sc := &fxScript{}
	out := processOne(t, buildReason(t, ReasonConfig{}, sc), in)
	if out.Messages[1].Reasoning != "kept" || len(sc.reqs) != 2 {
		t.Errorf("reasoning %q, %d requests", out.Messages[1].Reasoning, len(sc.reqs))
	}
	all := fxSingle()
	all.Messages[1].Reasoning = "already"
	st := buildReason(t, ReasonConfig{}, sc)
	if out := processOne(t, st, all); out != all {
		t.Error("a record whose call turns all have reasoning must pass through")
	}
}

func TestReasonValidator(t *testing.T) {
	single, par, meta, multi := fxSingle(), fxParallel(), fxMetaTool(), fxMultiTurn()
	url := fxRecord("fx:url", []record.Tool{fxTool("fetch", "Fetch a page", `{"type":"object","properties":{"url":{"type":"string"}}}`)},
		fxUser("open it"), fxCalls("fetch", `{"url":"https://example.com/?id=3&page=2"}`))
	tests := []struct {
		name   string
		r      *record.Record
		k      int
		text   string
		reason string // "" = valid
	}{
		{"fig13", single, 1, `To help you with the traffic situation in Miami, Florida, I understand that you need the current traffic report. I will invoke the "get_traffic_report" function with the parameter "location" set to "Miami, Florida".`, ""},
		{"empty", single, 1, "  \n ", ReasonEmpty},
		{"too long", single, 1, "get_traffic_report " + strings.Repeat("x", 600), ReasonTooLong},
		{"cap scales with calls", par, 1, "get_stock_price get_local_time " + strings.Repeat("x", 1500), ""},
		{"cap counts characters not bytes", single, 1, "get_traffic_report " + strings.Repeat("交", 580), ""},
		{"missing function", single, 1, "You want the traffic. I will check it with location set to Miami.", ReasonMissingFunction},
		{"name is case-insensitive", single, 1, "I will use Get_Traffic_Report.", ""},
		{"parallel names all", par, 1, "I will call get_stock_price twice.", ReasonMissingFunction},
		{"meta_tool named", meta, 1, "I will call meta_tool with a tool_description.", ""},
		{"meta_tool missing", meta, 1, "I will search for a tool.", ReasonMissingFunction},
		{"python kwarg defined", single, 1, `get_traffic_report(location="Miami")`, ""},
		{"python kwarg invented", single, 1, `get_traffic_report(location="Miami", radius=5)`, ReasonInventedParameter},
		{"json key invented", single, 1, `I will call get_traffic_report with {"city": "Miami"}.`, ReasonInventedParameter},
		{"json key with space", single, 1, `get_traffic_report {"city" : "Miami"}`, ReasonInventedParameter},
		{"single-quoted key invented", single, 1, `get_traffic_report with {'city': 'Miami'}`, ReasonInventedParameter},
		{"quoted prose name is fine", single, 1, `I will call "get_traffic_report" and set "city" to Miami.`, ""},
		{"comparison is not a mention", single, 1, `get_traffic_report: if delay==5 or a != b then wait.`, ""},
		{"value text is not a mention", url, 1, `I will call fetch with url set to https://example.com/?id=3&page=2.`, ""},
		{"value text elsewhere is", url, 1, `I will call fetch with id=3.`, ReasonInventedParameter},
		{"nested argument key", multi, 9, `get_weather with filters={"wind": true}`, ""},
		{"nested schema property", multi, 1, `get_weather with wind=true`, ""},
		{"retrieved definition defines location", meta, 3, `get_traffic_report(location="Miami, Florida")`, ""},
		{"retrieved definition lacks radius", meta, 3, `get_traffic_report(radius=3)`, ReasonInventedParameter},
		{"function name is not a parameter", single, 1, `{"name": "get_traffic_report"}`, ReasonInventedParameter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newReasonValidator(tt.r, tt.k, 600).check(tt.text)
			got, _ := contract.ReasonOf(err)
			if err != nil && got == "" {
				t.Fatalf("error without reason: %v", err)
			}
			if got != tt.reason {
				t.Errorf("got %q (%v), want %q", got, err, tt.reason)
			}
		})
	}
}

func TestParamMentions(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{`f(a=1, b = 2)`, []string{"a"}},
		{`x==1 y=2 z<=3`, []string{"y"}},
		{`{"a": 1, "b":2, "c d": 3, "e"}`, []string{"a", "b"}},
		{`{'k': 'v'} it's 'fine', no`, []string{"k"}},
		{`"a=1" b=2`, []string{"b"}},
		{`unterminated "quote a=1`, nil},
		{`x.y=3 _z=1 9a=1`, []string{"y", "_z"}},
		{`end=`, []string{"end"}},
		{``, nil},
	}
	for _, tt := range tests {
		if got := paramMentions(tt.text); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("paramMentions(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestParseReasonJSON(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"reason": "The user wants X."}`, "The user wants X.", true},
		{"```json\n{\"reason\": \" padded \"}\n```", "padded", true},
		{"```\n{\"reason\": \"plain fence\"}\n```", "plain fence", true},
		{`{"reason": "a", "extra": 1}`, "", false},
		{`{"why": "a"}`, "", false},
		{`{"reason": 3}`, "", false},
		{`{"reason": "a"} trailing`, "", false},
		{`The user wants X.`, "", false},
		{``, "", false},
		{`[]`, "", false},
	}
	for _, tt := range tests {
		got, err := parseReasonJSON(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseReasonJSON(%q) = %q, %v", tt.in, got, err)
		}
		if err != nil {
			if r, _ := contract.ReasonOf(err); r != ReasonBadJSON {
				t.Errorf("parseReasonJSON(%q): reason %q", tt.in, r)
			}
		}
	}
}

// Bad answers are re-asked; when every answer fails the record is rejected
// with the validation's reason.
func TestReasonReaskAndReject(t *testing.T) {
	good := `You want the traffic in Miami. To help you, I will call get_traffic_report because it reports traffic. I will set location to "Miami, Florida".`
	tests := []struct {
		name    string
		style   string
		answers []string
		reason  string // "" = accepted
		asks    int
	}{
		{"empty then good", "", []string{"", good}, "", 2},
		{"missing function then good", "", []string{"I will check the traffic.", good}, "", 2},
		{"invented then good", "", []string{`get_traffic_report(city="Miami")`, good}, "", 2},
		{"too long then good", "", []string{"get_traffic_report " + strings.Repeat("y", 700), good}, "", 2},
		{"always empty", "", []string{""}, ReasonEmpty, 3},
		{"always missing", "", []string{"I will check."}, ReasonMissingFunction, 3},
		{"always invented", "", []string{`get_traffic_report(radius=2)`}, ReasonInventedParameter, 3},
		{"always too long", "", []string{"get_traffic_report " + strings.Repeat("y", 700)}, ReasonTooLong, 3},
		{"last failure decides", "", []string{"", "I will check."}, ReasonMissingFunction, 3},
		{"mediatek bad json then good", ReasonStyleMediaTek, []string{"Sure! " + good, reasonJSON(good)}, "", 2},
		{"mediatek always bad json", ReasonStyleMediaTek, []string{good}, ReasonBadJSON, 3},
		{"mediatek json but invalid reason", ReasonStyleMediaTek, []string{`{"reason": ""}`}, ReasonEmpty, 3},
		// A reasoning model served without a reasoning parser writes its
		// thinking inline: a leading block is dropped, other markup refused.
		{"leading think block dropped", "", []string{"<think>\nOkay, let me see.\n</think>\n\n" + good}, "", 1},
		{"mediatek after a think block", ReasonStyleMediaTek, []string{"<think>hmm</think>" + reasonJSON(good)}, "", 1},
		{"think markup left", "", []string{good + " <think>more</think>"}, ReasonThinkingMarkup, 3},
		{"R1 form: thinking up to a lone </think>", "", []string{"Okay, let me see.\n</think>\n\n" + good}, "", 1},
		{"mediatek in the R1 form", ReasonStyleMediaTek, []string{"hmm\n</think>\n" + reasonJSON(good)}, "", 1},
		{"unclosed think is thinking only", "", []string{"<think>" + good}, llm.ReasonThinkingOnly, 3},
		{"thinking without an answer", "", []string{"<think>" + good + "</think>"}, llm.ReasonThinkingOnly, 3},
		{"fenced text", "", []string{"```json\n" + good + "\n```"}, "", 1},
		{"think block, then a fence", "", []string{"<think>hmm</think>\n```\n" + good + "\n```"}, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &fxScript{answers: map[string][]string{"fx:single/turn1": tt.answers}}
			st := buildReason(t, ReasonConfig{Style: tt.style}, sc)
			out, err := st.Process(context.Background(), fxSingle())
			if asks := sc.count("fx:single/turn1"); asks != tt.asks {
				t.Errorf("asked %d times, want %d", asks, tt.asks)
			}
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := out[0].Messages[1].Reasoning; got != good {
					t.Errorf("reasoning %q", got)
				}
				if step := out[0].Lineage[0]; step.Provider != "fake" || step.Model != "m1" {
					t.Errorf("lineage %+v", step)
				}
				return
			}
			if got, _ := contract.ReasonOf(err); got != tt.reason {
				t.Errorf("reject reason %q (%v), want %q", got, err, tt.reason)
			}
			if !strings.Contains(err.Error(), "messages[1]") {
				t.Errorf("error does not name the turn: %v", err)
			}
		})
	}
}

// With several failing turns the earliest decides, however the parallel
// answers interleave; a systemic error wins over rejects.
func TestReasonParallelTurnErrors(t *testing.T) {
	sc := &fxScript{answers: map[string][]string{
		"fx:multi/turn5": {"no name here"},
		"fx:multi/turn9": {""},
	}}
	st := buildReason(t, ReasonConfig{Attempts: 1}, sc)
	for range 20 {
		_, err := st.Process(context.Background(), fxMultiTurn())
		if got, _ := contract.ReasonOf(err); got != ReasonMissingFunction || !strings.Contains(err.Error(), "messages[5]") {
			t.Fatalf("got %v, want the reject of messages[5]", err)
		}
	}
	fatal := &llm.FatalError{Reason: "llm_budget_reached", Msg: "budget reached"}
	st = buildReason(t, ReasonConfig{}, &fxScript{err: fatal})
	_, err := st.Process(context.Background(), fxMultiTurn())
	if _, isReject := contract.ReasonOf(err); isReject || !llm.IsFatal(err) {
		t.Errorf("fatal teacher error became %v", err)
	}
}

func TestReasonConfig(t *testing.T) {
	var c ReasonConfig
	c.defaults()
	if c.Style != ReasonStyleMetaTool || c.Attempts != 3 || c.MaxChars != 600 || len(c.validate()) != 0 {
		t.Errorf("defaults %+v: %v", c, c.validate())
	}
	bad := ReasonConfig{Style: "cot", Attempts: -1, MaxChars: -5}
	if probs := bad.validate(); len(probs) != 3 {
		t.Errorf("validate: %v", probs)
	}
	if _, err := (&ReasonConfig{Style: "meta_tool"}).build(&Env{}); err == nil {
		t.Error("build without a teacher must fail")
	}
	c.Prompt = "missing.tmpl"
	if _, err := c.build(fxEnv("reason", fxOffline())); err == nil {
		t.Error("build with a missing prompt override must fail")
	}
}

func FuzzReasonValidator(f *testing.F) {
	f.Add(`get_traffic_report(location="Miami")`)
	f.Add(`{"city": 1} 'x': a=b "unterminated`)
	f.Add("")
	r := fxMetaTool()
	f.Fuzz(func(t *testing.T, text string) {
		for _, k := range []int{1, 3} {
			err := newReasonValidator(r, k, 600).check(text)
			if err != nil {
				if reason, ok := contract.ReasonOf(err); !ok || !strings.HasPrefix(reason, "reason_") {
					t.Fatalf("check(%q): %v", text, err)
				}
			}
		}
		for _, m := range paramMentions(text) {
			if !isIdent(m) {
				t.Fatalf("mention %q of %q is not an identifier", m, text)
			}
		}
	})
}

func FuzzParseReasonJSON(f *testing.F) {
	f.Add(`{"reason": "x"}`)
	f.Add("```json\n{\"reason\": \"x\"}\n```")
	f.Add("```")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseReasonJSON(s)
		if err != nil {
			if reason, _ := contract.ReasonOf(err); reason != ReasonBadJSON {
				t.Fatalf("parseReasonJSON(%q): %v", s, err)
			}
			return
		}
		// An accepted reason survives the offline wrapper's round trip.
		if again, err := parseReasonJSON(reasonJSON(got)); err != nil || again != strings.TrimSpace(got) {
			t.Fatalf("round trip of %q: %q, %v", got, again, err)
		}
	})
}

func BenchmarkReasonOffline(b *testing.B) {
	st := buildReason(b, ReasonConfig{}, fxOffline())
	in := fxMultiTurn()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Process(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// fxSharedRecords parses real dumps of every format from ../shared/data.
func fxSharedRecords(t testing.TB) []*record.Record {
	return sharedRecords(t, 1000,
		dump{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		dump{"derived/toolace_format_glaive_toolcall_zh_demo.json", "toolace"},
		dump{"derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
		dump{"derived/glaive_v2_format_glaive_toolcall_zh_demo.json", "glaive"},
		dump{"derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"},
		dump{"derived/xlam_format_glaive_toolcall_zh_demo.json", "xlam"},
		dump{"llamafactory/glaive_toolcall_en_demo.json", "sharegpt"},
		dump{"glaive/glaive_v2_rows_dataflow.jsonl", "glaive"})
}

// On real rows, every stage of this file set keeps its invariants with the
// offline teacher: reasoning on every call turn and nowhere else, decision
// tokens on every assistant turn, negatives that never keep a called
// function, response schemas that are valid JSON, and the verify stage's
// counts adding up.
func TestRecipesOnSharedData(t *testing.T) {
	recs := fxSharedRecords(t)
	ctx := context.Background()
	for _, style := range []string{ReasonStyleMetaTool, ReasonStyleMediaTek} {
		st := buildReason(t, ReasonConfig{Style: style}, fxOffline())
		rejects := map[string]int{}
		calls := 0
		for _, in := range recs {
			out, err := st.Process(ctx, in)
			if err != nil {
				reason, ok := contract.ReasonOf(err)
				if !ok {
					t.Fatalf("%s: %v", in.ID, err)
				}
				rejects[reason]++
				continue
			}
			for k, m := range out[0].Messages {
				if isCall := m.Role == record.RoleAssistant && len(m.Calls) > 0; isCall != (m.Reasoning != "") {
					t.Fatalf("%s: messages[%d] reasoning %q", in.ID, k, m.Reasoning)
				}
				if len(m.Calls) > 0 {
					calls++
				}
			}
		}
		// The offline stand-in passes the stage's own validation on every
		// real call turn.
		if len(rejects) > 0 || calls < 500 {
			t.Errorf("%s: rejects %v, %d call turns", style, rejects, calls)
		}
	}

	dt := buildDecisionTokens(t, DecisionTokensConfig{})
	for _, in := range recs {
		out := processOne(t, dt, in)
		for k, m := range out.Messages {
			if m.Role != record.RoleAssistant {
				continue
			}
			want := DefaultAnswerToken
			if len(m.Calls) > 0 {
				want = DefaultUseToolToken
			}
			if !strings.HasPrefix(m.Content, want) || strings.HasPrefix(m.Content, want+want) {
				t.Fatalf("%s: messages[%d] content %q", in.ID, k, m.Content)
			}
		}
		if processOne(t, dt, out) != out {
			t.Fatalf("%s: decision tokens not idempotent", in.ID)
		}
	}

	neg := buildNegatives(t, NegativesConfig{Ratio: 1, PerRecord: 3}, nil)
	in, outN, added := 0, 0, 0
	for _, r := range recs {
		res, err := neg.Process(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		checkNegatives(t, r, res, DefaultAnswerToken)
		in, outN, added = in+1, outN+len(res), added+len(res)-1
	}
	// Most demo rows list one tool only; those need allow_no_tools.
	if in+added != outN || added < 150 {
		t.Errorf("negatives: in %d + added %d vs out %d", in, added, outN)
	}
	empty := buildNegatives(t, NegativesConfig{Ratio: 1, AllowNoTools: true}, nil)
	more := 0
	for _, r := range recs {
		res, err := empty.Process(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		checkNegatives(t, r, res, DefaultAnswerToken)
		more += len(res) - 1
	}
	if more <= added {
		t.Errorf("allow_no_tools made %d negatives, without it %d", more, added)
	}
	t.Logf("negatives: %d (per_record 3), %d with allow_no_tools (per_record 1)", added, more)

	_, _, withSchemas := runResponseSchema(t, ResponseSchemaConfig{}, recs)
	attached := 0
	for _, r := range withSchemas {
		for _, tool := range r.Tools {
			if len(tool.Response) == 0 {
				continue
			}
			attached++
			if !json.Valid(tool.Response) {
				t.Fatalf("%s: %s response schema %s", r.ID, tool.Name, tool.Response)
			}
		}
	}
	if attached < 300 {
		t.Errorf("only %d tools got a response schema", attached)
	}

	vs := buildVerify(t, VerifyConfig{Checks: []string{"roles", "calls_resolved", "args_schema", "meta_tool_shape"}}, nil)
	rejected := 0
	for _, r := range recs {
		if _, err := vs.Process(ctx, r); err != nil {
			if _, ok := contract.ReasonOf(err); !ok {
				t.Fatal(err)
			}
			rejected++
		}
	}
	var failed int64
	for k, v := range vs.Counters() {
		if strings.HasPrefix(k, "check.") {
			failed += v
		}
	}
	if rejected > 0 && failed < int64(rejected) {
		t.Errorf("verify: %d rejects but check counters %v", rejected, vs.Counters())
	}
	t.Logf("%d records; verify rejected %d: %v", len(recs), rejected, vs.Counters())
}

// The five stage types decode strictly from pipeline.yaml, get their
// defaults, and report bad values with the yaml key.
func TestRecipeStagesInPipeline(t *testing.T) {
	good := `
sources:
  - {path: x.json, format: xlam}
stages:
  - reason: {style: mediatek, max_chars: 400}
  - negatives: {ratio: 0.5, target: teacher}
  - decision_tokens: {}
  - response_schema: {overwrite: true}
  - verify:
      checks: [roles, args_schema]
      action: tag
      max_tokens: 4096
`
	p, err := Parse("pipeline.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stages
	if len(s) != 5 || s[0].Name != "reason" || s[0].Reason.Style != "mediatek" || s[0].Reason.Attempts != 3 ||
		s[1].Negatives.PerRecord != 1 || s[1].Negatives.Token != DefaultAnswerToken ||
		s[2].DecisionTokens.UseToolToken != DefaultUseToolToken || !s[3].ResponseSchema.Overwrite ||
		s[4].Verify.Action != "tag" || !*s[4].Verify.CountTokens {
		t.Errorf("decoded %+v", s)
	}
	bad := `
sources:
  - {path: x.json, format: xlam}
stages:
  - reason: {style: cot, temperature: 1}
`
	_, err = Parse("pipeline.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "temperature") {
		t.Errorf("unknown key: %v", err)
	}
	invalid := `
sources:
  - {path: x.json, format: xlam}
stages:
  - reason: {style: cot}
  - negatives: {ratio: 2}
  - verify: {checks: [nope]}
`
	_, err = Parse("pipeline.yaml", []byte(invalid))
	for _, want := range []string{`style: "cot"`, "ratio: 2", `unknown check "nope"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// A turn that only calls get_user_input (a reply to the user, seed 000
// Fig 19) gets no reasoning; the other call turns of the record do.
func TestReasonSkipsGetUserInputTurns(t *testing.T) {
	r := fxRecord("fx:gui", []record.Tool{fxWeather},
		fxUser("Hi there"),
		record.Message{Role: record.RoleAssistant, Content: "Hello! How can I help?",
			Calls: []record.Call{{Name: "get_user_input", Arguments: json.RawMessage(`{}`)}}},
		fxUser("Weather in Paris?"),
		fxCalls("get_weather", `{"location":"Paris"}`),
	)
	out := processOne(t, buildReason(t, ReasonConfig{}, fxOffline()), r)
	if out.Messages[1].Reasoning != "" {
		t.Errorf("get_user_input turn got reasoning %q", out.Messages[1].Reasoning)
	}
	if out.Messages[3].Reasoning == "" {
		t.Error("the get_weather turn has no reasoning")
	}
}
