package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
)

// offlineClient answers like the llm layer under provider "offline".
var offlineClient = llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
	s, err := req.Offline()
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Content: s, FinishReason: "stop", Provider: llm.ProviderOffline}, nil
})

// script answers requests with the given answers in turn (the last one
// repeats) and records them.
type script struct {
	mu      sync.Mutex
	answers []string
	// bySlot, when set, answers by the judged message ("m3", the slot's
	// last part), each slot's answers in order: a judge asks about its
	// turns at once.
	bySlot map[string][]string
	asked  map[string]int
	reqs   []llm.Request
}

func (s *script) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	var a string
	if s.bySlot == nil {
		a = s.answers[min(len(s.reqs), len(s.answers))-1]
	} else {
		turn := req.Slot[strings.LastIndexByte(req.Slot, '/')+1:]
		if s.asked == nil {
			s.asked = map[string]int{}
		}
		as := s.bySlot[turn]
		a = as[min(s.asked[turn], len(as)-1)]
		s.asked[turn]++
	}
	return llm.Response{Content: a, FinishReason: "stop", Provider: "fake"}, nil
}

// sorted returns the requests in the order of the judged messages, then
// of their attempts.
func (s *script) sorted() []llm.Request {
	turn := func(r llm.Request) int {
		n, _ := strconv.Atoi(r.Slot[strings.LastIndexByte(r.Slot, 'm')+1:])
		return n
	}
	reqs := slices.Clone(s.reqs)
	slices.SortStableFunc(reqs, func(a, b llm.Request) int {
		return cmp.Or(cmp.Compare(turn(a), turn(b)), cmp.Compare(a.Attempt, b.Attempt))
	})
	return reqs
}

// twoTurns has two call turns and a final answer based on tool results.
func twoTurns() *record.Record {
	return rec(weatherTools,
		user("What's the weather in Paris for 3 days?"),
		calls(call("get_weather", `{"city":"Paris","days":3}`)),
		results(result("get_weather", `{"temp":21,"sky":"sunny"}`)),
		answer("It is 21 degrees and sunny in Paris."),
		user("And in Rome?"),
		calls(call("get_weather", `{"city":"Rome","days":3}`)),
		results(result("get_weather", `{"temp":25,"sky":"cloudy"}`)),
		answer("Rome: 25 degrees, cloudy."),
	)
}

func TestJudgeCallTurns(t *testing.T) {
	s := &script{bySlot: map[string][]string{"m1": {"1"}, "m5": {"0"}}}
	env := LLMEnv{Client: s, Stage: "check"}
	ps, err := JudgeHallucination.CheckLLM(context.Background(), env, twoTurns())
	if err != nil {
		t.Fatal(err)
	}
	s.reqs = s.sorted()
	if want := []string{"hallucination@messages[1]"}; !slices.Equal(kinds(ps), want) {
		t.Fatalf("problems %v, want %v", kinds(ps), want)
	}
	if len(s.reqs) != 2 {
		t.Fatalf("%d requests, want one per call turn", len(s.reqs))
	}
	r0 := s.reqs[0]
	if r0.Stage != "judge_hallucination@1" || r0.Slot != "check/t:0/judge_hallucination/m1" || r0.Offline == nil ||
		r0.Temperature == nil || *r0.Temperature != 0 || r0.Template == "" || r0.Attempt != 0 {
		t.Errorf("request fields: %+v", r0)
	}
	prompt := r0.Messages[len(r0.Messages)-1].Content
	for _, want := range []string{`USER: What's the weather in Paris for 3 days?`, `ASSISTANT (call): {"name":"get_weather","arguments":{"city":"Paris","days":3}}`, `"name": "get_weather"`} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "Rome") {
		t.Error("the first turn's prompt shows later turns")
	}
	if p := s.reqs[1].Messages[len(s.reqs[1].Messages)-1].Content; !strings.Contains(p, "TOOL RESULT (get_weather): {\"temp\":21") {
		t.Errorf("the second turn's prompt lacks the earlier result:\n%s", p)
	}
}

func TestJudgeReask(t *testing.T) {
	r := rec(weatherTools, user("Weather in Paris?"), calls(call("get_weather", `{"city":"Paris"}`)))
	s := &script{answers: []string{"I think it is fine.", "`0`"}}
	ps, err := JudgeConsistency.CheckLLM(context.Background(), LLMEnv{Client: s}, r)
	if err != nil || ps != nil {
		t.Fatalf("got %v, %v", ps, err)
	}
	if len(s.reqs) != 2 || s.reqs[1].Attempt != 1 {
		t.Fatalf("want one re-ask with Attempt 1, got %d requests", len(s.reqs))
	}
	msgs := s.reqs[1].Messages
	if n := len(msgs); n < 3 || msgs[n-2].Role != "assistant" || msgs[n-2].Content != "I think it is fine." || msgs[n-1].Role != "user" {
		t.Errorf("re-ask does not show the rejected answer: %+v", msgs)
	}

	// Never readable: a judge_unparseable problem after Attempts asks.
	s = &script{answers: []string{"yes"}}
	ps, err = JudgeMultiStep.CheckLLM(context.Background(), LLMEnv{Client: s, Attempts: 2}, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"judge_unparseable@messages[1]"}; !slices.Equal(kinds(ps), want) {
		t.Fatalf("problems %v, want %v", kinds(ps), want)
	}
	if len(s.reqs) != 2 {
		t.Errorf("%d requests, want 2", len(s.reqs))
	}
}

func TestJudgeErrors(t *testing.T) {
	r := twoTurns()
	down := errors.New("connection refused")
	failing := llm.ClientFunc(func(context.Context, llm.Request) (llm.Response, error) { return llm.Response{}, down })
	for _, c := range Checkers {
		if c.CheckLLM == nil {
			continue
		}
		if _, err := c.CheckLLM(context.Background(), LLMEnv{Client: failing}, r); !errors.Is(err, down) {
			t.Errorf("%s: systemic error lost: %v", c.Name, err)
		}
		if _, err := c.CheckLLM(context.Background(), LLMEnv{}, r); err == nil {
			t.Errorf("%s: no error without a client", c.Name)
		}
	}
	// A request that failed after the client's retries rejects the record:
	// the error keeps its reject reason.
	timeout := llm.ClientFunc(func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, &llm.AnswerError{Reason: "llm_error_timeout"}
	})
	_, err := JudgeCorrectness.CheckLLM(context.Background(), LLMEnv{Client: timeout}, r)
	var ae *llm.AnswerError
	if !errors.As(err, &ae) || ae.RejectReason() != "llm_error_timeout" {
		t.Errorf("got %v", err)
	}
}

func TestJudgeScores(t *testing.T) {
	r := twoTurns()
	s := &script{bySlot: map[string][]string{"m3": {"```json\n{\"score\": 1, \"reason\": \"the sky is not mentioned\"}\n```"}, "m7": {`{"score": 2, "reason": "all"}`}}}
	ps, err := JudgeCompleteness.CheckLLM(context.Background(), LLMEnv{Client: s}, r)
	if err != nil {
		t.Fatal(err)
	}
	s.reqs = s.sorted()
	if want := []string{"incomplete@messages[3]"}; !slices.Equal(kinds(ps), want) || !strings.Contains(ps[0].Msg, "the sky is not mentioned") {
		t.Fatalf("problems %v", ps)
	}
	if q := s.reqs[1].Messages[len(s.reqs[1].Messages)-1].Content; !strings.Contains(q, "And in Rome?") || !strings.Contains(q, "Rome: 25 degrees") {
		t.Errorf("second exchange prompt:\n%s", q)
	}
	// A lower threshold passes the 1.
	s = &script{answers: []string{`{"score": 1, "reason": "partly"}`}}
	if ps, err := JudgeCompleteness.CheckLLM(context.Background(), LLMEnv{Client: s, MinCompleteness: 1}, r); err != nil || ps != nil {
		t.Errorf("threshold 1: %v, %v", ps, err)
	}
	// Correctness judges only answers that follow tool results.
	chat := rec(nil, user("Hi"), answer("Hello!"))
	s = &script{answers: []string{`{"score": 0, "reason": "x"}`}}
	if ps, err := JudgeCorrectness.CheckLLM(context.Background(), LLMEnv{Client: s}, chat); err != nil || ps != nil || len(s.reqs) != 0 {
		t.Errorf("chat: %v, %v, %d requests", ps, err, len(s.reqs))
	}
	s = &script{answers: []string{`{"score": 0, "reason": "x"}`}}
	ps, _ = JudgeCorrectness.CheckLLM(context.Background(), LLMEnv{Client: s}, r)
	s.reqs = s.sorted()
	if want := []string{"incorrect@messages[3]", "incorrect@messages[7]"}; !slices.Equal(kinds(ps), want) {
		t.Errorf("correctness %v", kinds(ps))
	}
	if h, _, _ := strings.Cut(s.reqs[0].Messages[len(s.reqs[0].Messages)-1].Content, "Response:"); !strings.Contains(h, `TOOL RESULT (get_weather): {"temp":21`) || strings.Contains(h, "It is 21 degrees") {
		t.Errorf("correctness history must hold the results but not the answer:\n%s", h)
	}
	// With get_user_input every answer is a reply that calls it: its text
	// is the answer judged (no judge ran on such records before).
	gui := rec(nil, user("Hi"), record.Message{Role: record.RoleAssistant, Content: "Hello! How can I help?",
		Calls: []record.Call{{Name: GetUserInput, Arguments: json.RawMessage(`{}`)}}})
	s = &script{answers: []string{`{"score": 0, "reason": "says nothing"}`}}
	if ps, err := JudgeCompleteness.CheckLLM(context.Background(), LLMEnv{Client: s}, gui); err != nil || !slices.Equal(kinds(ps), []string{"incomplete@messages[1]"}) {
		t.Errorf("get_user_input reply: %v, %v", kinds(ps), err)
	}
}

func TestJudgePromptOverride(t *testing.T) {
	tmpl, err := prompts.Parse("mine", []byte("-- user --\nCUSTOM {{.Turn}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := &script{answers: []string{"0"}}
	r := rec(weatherTools, user("Weather in Paris?"), calls(call("get_weather", `{"city":"Paris"}`)))
	if _, err := JudgeHallucination.CheckLLM(context.Background(), LLMEnv{Client: s, Prompts: map[string]*prompts.Template{"judge_hallucination": tmpl}}, r); err != nil {
		t.Fatal(err)
	}
	if got := s.reqs[0].Messages[0].Content; !strings.HasPrefix(got, "CUSTOM ASSISTANT (call)") || s.reqs[0].Template != tmpl.Hash {
		t.Errorf("override not used: %q", got)
	}
}

// Every built-in prompt verify uses renders against its samples, whose
// first sets every field of its data (so that a check of an override takes
// the branches of every {{if}} on a field).
func TestPromptsRender(t *testing.T) {
	for _, name := range PromptNames() {
		tmpl, err := prompts.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		samples := PromptSamples(name)
		if len(samples) == 0 {
			t.Errorf("%s: no sample", name)
			continue
		}
		v := reflect.ValueOf(samples[0])
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("%s: the first sample leaves %s empty", name, v.Type().Field(i).Name)
			}
		}
		for _, data := range samples {
			msgs, err := tmpl.Render(data)
			if err != nil || len(msgs) == 0 || tmpl.Doc == "" {
				t.Errorf("%s: %v, %d messages, doc %q", name, err, len(msgs), tmpl.Doc)
			}
		}
	}
	if PromptSamples("translate") != nil {
		t.Error("samples for a prompt verify does not use")
	}
}

func TestParseAnswers(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
		ok   bool
	}{
		{"1", true, true}, {" 0\n", false, true}, {`"1"`, true, true}, {"`0`", false, true}, {"'1'", true, true},
		{"", false, false}, {"10", false, false}, {"1.", false, false}, {"Answer: 1", false, false}, {"\"1'", false, false}, {"2", false, false},
	} {
		got, err := parseBinary(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseBinary(%q) = %v, %v", tt.in, got, err)
		}
	}
	for _, tt := range []struct {
		in    string
		score int
		ok    bool
	}{
		{`{"score": 2, "reason": "all"}`, 2, true},
		// ComplexFuncBench's runner accepts integral floats (Python 2.0 == 2)
		// and never reads the reason (QA F3).
		{`{"score": 2.0, "reason": "all requested information is addressed"}`, 2, true},
		{`{"score": 0.0}`, 0, true}, {`{"score": 1.00, "reason": "x"}`, 1, true}, {`{"score": 2e0}`, 2, true},
		{`{"score": -0.0}`, 0, true}, {`{"score": 2, "reason": ["a", "b"]}`, 2, true}, {`{"score": 1, "reason": null}`, 1, true},
		{`{"score": 2.5}`, 0, false}, {`{"score": true}`, 0, false}, {`{"score": null}`, 0, false}, {`{"score": 1e999}`, 0, false},
		{"```json\n{\"score\": 0}\n```", 0, true},
		{"```\n{\"score\": 1, \"reason\": \"x\", \"extra\": true}\n```", 1, true},
		{`{"score": 3}`, 0, false}, {`{"score": 1.5}`, 0, false}, {`{"score": "2"}`, 0, false}, {`{"reason": "x"}`, 0, false},
		{`Score: {"score": 2}`, 0, false}, {`{"score": 2} thanks`, 0, false}, {"```json{\"score\": 2}```", 0, false},
		{"```json\n{\"score\": 2}", 0, false}, {`[{"score": 2}]`, 0, false}, {`{"score": 2, "reason": 5}`, 2, true},
	} {
		got, err := parseScore(tt.in)
		if (err == nil) != tt.ok || got.score != tt.score {
			t.Errorf("parseScore(%q) = %v, %v", tt.in, got, err)
		}
	}
	for _, tt := range []struct {
		in     string
		eq, ok bool
	}{
		{`{"is_equal": true, "reason": "same city"}`, true, true},
		{"```json\n{\"is_equal\": false, \"reason\": \"no\"}\n```", false, true},
		{`{"is_equal": "true"}`, false, false}, {`{"equal": true}`, false, false}, {`true`, false, false},
		{`{"is_equAl": true}`, false, false}, {`{"Is_Equal": false, "is_equal": true}`, false, false}, // keys are case-sensitive (fuzz)
	} {
		got, err := parseEqual(tt.in)
		if (err == nil) != tt.ok || got != tt.eq {
			t.Errorf("parseEqual(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func FuzzJudgeAnswers(f *testing.F) {
	for _, s := range []string{"1", " 0 ", "`1`", `{"score": 2, "reason": "x"}`, "```json\n{\"is_equal\": true}\n```", "```", `{"score": 1e999}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := parseBinary(s); err == nil {
			d := "0"
			if v {
				d = "1"
			}
			if strings.Count(s, d) != 1 {
				t.Fatalf("parseBinary(%q) = %v without exactly one %s", s, v, d)
			}
		}
		if v, err := parseScore(s); err == nil && (v.score < 0 || v.score > 2) {
			t.Fatalf("parseScore(%q) = %d", s, v.score)
		}
		if _, err := parseEqual(s); err == nil && !strings.Contains(s, "is_equal") {
			t.Fatalf("parseEqual(%q) accepted without is_equal", s)
		}
	})
}

var convertTool = record.Tool{Name: "convert", Parameters: json.RawMessage(`{"type":"object","properties":{}, "additionalProperties": true}`)}

// The offline stand-ins, through the same path the llm layer uses.
func TestOfflineStandIns(t *testing.T) {
	env := LLMEnv{Client: offlineClient}
	meta := `{"tool_description":"find a hotel","param_description":["city"]}`
	tests := []struct {
		name  string
		check *Checker
		r     *record.Record
		want  []string
	}{
		{"hallucination: values from the user", JudgeHallucination, twoTurns(), nil},
		{"hallucination: value from an earlier result", JudgeHallucination, rec(weatherTools, user("Find the airport code of Paris and its weather"),
			calls(call("get_random_joke", `{}`)), results(result("get_random_joke", `{"code":"CDG"}`)),
			calls(call("get_weather", `{"city":"Paris","code":"CDG"}`))), nil},
		{"hallucination: default and enum values", JudgeHallucination, rec(weatherTools, user("Weather in Paris?"),
			calls(call("get_weather", `{"city":"Paris","unit":"fahrenheit","days":1}`))), nil},
		{"hallucination: composed text", JudgeHallucination, rec([]record.Tool{{Name: "send", Parameters: json.RawMessage(`{"type":"object","properties":{"body":{"type":"string"}}}`)}},
			user("Tell Bob that the meeting moves to Friday afternoon"), calls(call("send", `{"body":"Hi Bob, the meeting moves to Friday afternoon."}`))), nil},
		{"hallucination: invented city", JudgeHallucination, rec(weatherTools, user("What's the weather like?"),
			calls(call("get_weather", `{"city":"London"}`))), []string{"hallucination@messages[1]"}},
		{"hallucination: invented number", JudgeHallucination, rec(weatherTools, user("Weather in Paris"),
			calls(call("get_weather", `{"city":"Paris","days":7}`))), []string{"hallucination@messages[1]"}},
		{"hallucination: unavailable tool", JudgeHallucination, rec(weatherTools, user("news please"),
			calls(call("get_news", `{}`))), []string{"hallucination@messages[1]"}},
		{"hallucination: meta_tool arguments are the model's own", JudgeHallucination, rec([]record.Tool{metaToolDef}, user("Book me a room"),
			calls(call(MetaTool, meta))), nil},

		{"hallucination: percentages, codes, dates", JudgeHallucination, rec(append([]record.Tool{convertTool}, weatherTools...),
			user("Convert 500 US dollars to euros on 22/11/2024 at 10 am, and add a 15% fee"),
			calls(call("convert", `{"amount":500,"from":"USD","to":"EUR","fee":0.15,"date":"2024-11-22","time":"10:00"}`))), nil},
		{"hallucination: invented date", JudgeHallucination, rec(append([]record.Tool{convertTool}, weatherTools...),
			user("Convert 500 US dollars to euros tomorrow"), calls(call("convert", `{"amount":500,"date":"2022-04-15"}`))),
			[]string{"hallucination@messages[1]"}},
		{"hallucination: Chinese text rephrased", JudgeHallucination, rec(append([]record.Tool{convertTool}, weatherTools...),
			user("我想找素食的意大利面食谱"), calls(call("convert", `{"query":"素食意大利面"}`))), nil},
		{"hallucination: Chinese text invented", JudgeHallucination, rec(append([]record.Tool{convertTool}, weatherTools...),
			user("我想找素食的意大利面食谱"), calls(call("convert", `{"query":"红烧牛肉"}`))), []string{"hallucination@messages[1]"}},

		{"consistency: exact values", JudgeConsistency, twoTurns(), nil},
		{"consistency: misspelt city", JudgeConsistency, rec(weatherTools, user("Weather in Amsterdam please"),
			calls(call("get_weather", `{"city":"Amsterdan"}`))), []string{"inconsistent@messages[1]"}},
		{"consistency: reasoning names another tool", JudgeConsistency, rec(weatherTools, user("Weather in Paris"),
			record.Message{Role: record.RoleAssistant, Reasoning: "I will use get_random_joke to cheer you up.", Calls: []record.Call{call("get_weather", `{"city":"Paris"}`)}}),
			[]string{"inconsistent@messages[1]"}},
		{"consistency: reasoning names the called tool", JudgeConsistency, rec(weatherTools, user("Weather in Paris"),
			record.Message{Role: record.RoleAssistant, Reasoning: "You want the weather; get_weather with city Paris.", Calls: []record.Call{call("get_weather", `{"city":"Paris"}`)}}), nil},

		{"multistep: no reasoning", JudgeMultiStep, twoTurns(), []string{"no_multi_step@messages[1]", "no_multi_step@messages[5]"}},
		{"multistep: complete", JudgeMultiStep, rec(weatherTools, user("Weather in Paris"),
			record.Message{Role: record.RoleAssistant, Reasoning: "You want the forecast. The get weather tool fits. I set city to Paris.", Calls: []record.Call{call("get_weather", `{"city":"Paris"}`)}}), nil},
		{"multistep: tool not named", JudgeMultiStep, rec(weatherTools, user("Weather in Paris"),
			record.Message{Role: record.RoleAssistant, Reasoning: "You want the forecast for Paris.", Calls: []record.Call{call("get_weather", `{"city":"Paris"}`)}}),
			[]string{"no_multi_step@messages[1]"}},
		{"multistep: parameters not named", JudgeMultiStep, rec(weatherTools, user("Weather in Paris"),
			record.Message{Role: record.RoleAssistant, Reasoning: "I will call getWeather.", Calls: []record.Call{call("get_weather", `{"city":"Paris"}`)}}),
			[]string{"no_multi_step@messages[1]"}},

		{"completeness: every result reflected", JudgeCompleteness, twoTurns(), nil},
		{"completeness: one of two results", JudgeCompleteness, rec(weatherTools, user("Weather in Paris and Rome?"),
			calls(call("get_weather", `{"city":"Paris"}`), call("get_weather", `{"city":"Rome"}`)),
			results(result("get_weather", `{"temp":21}`), result("get_weather", `{"temp":25}`)), answer("Paris has 21 degrees.")),
			[]string{"incomplete@messages[3]"}},
		{"completeness: chat answer", JudgeCompleteness, rec(nil, user("Hi"), answer("Hello!")), nil},

		{"correctness: numbers from the results", JudgeCorrectness, twoTurns(), nil},
		{"correctness: an invented number", JudgeCorrectness, rec(weatherTools, user("Price of AAPL?"),
			calls(call("get_weather", `{"city":"x"}`)), results(result("get_weather", `{"price":"1,234.50","change":12}`)),
			answer("AAPL trades at 1234.5, up 15 today.")), []string{"incorrect@messages[3]"}},
		{"correctness: list numbers are ignored", JudgeCorrectness, rec(weatherTools, user("News?"),
			calls(call("get_weather", `{"city":"x"}`)), results(result("get_weather", `{"items":["a","b"]}`)),
			answer("1. a\n2. b")), nil},
	}
	for _, tt := range tests {
		ps, err := tt.check.CheckLLM(context.Background(), env, tt.r)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(kinds(ps), tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, kinds(ps), tt.want)
		}
	}
}

func TestApproxDistance(t *testing.T) {
	for _, tt := range []struct {
		pat, text string
		want      int
	}{
		{"paris", "weather in paris today", 0},
		{"amsterdan", "weather in amsterdam", 1},
		{"abc", "", 3},
		{"", "x", 0},
		{"kitten", "sitting", 2},
	} {
		if got := approxDistance([]rune(tt.pat), []rune(tt.text)); got != tt.want {
			t.Errorf("approxDistance(%q, %q) = %d, want %d", tt.pat, tt.text, got, tt.want)
		}
	}
}

// A judge's thinking written into its answer (a reasoning model served
// without a reasoning parser) is taken out before the verdict is read;
// thinking that never reaches a verdict is judge_unparseable.
func TestJudgeInlineThinking(t *testing.T) {
	r := rec(weatherTools, user("Weather in Paris?"), calls(call("get_weather", `{"city":"Paris"}`)))
	for _, tt := range []struct {
		name   string
		answer string
		want   []string
		asks   int
	}{
		{"closed block, verdict 0", "<think>\nZZTHINK the call fits.\n</think>\n\n0", nil, 1},
		{"R1 form, verdict 1", "ZZTHINK the city is made up.\n</think>\n\n1", []string{"hallucination@messages[1]"}, 1},
		{"score after a block", "<think>fine</think>\n```json\n{\"score\": 2, \"reason\": \"ok\"}\n```", nil, 1},
		{"thinking only", "<think>\nZZTHINK still thinking", []string{"judge_unparseable@messages[1]"}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{answers: []string{tt.answer}}
			c, in := JudgeHallucination, r
			if strings.Contains(tt.answer, "score") {
				c = JudgeCompleteness
				in = rec(weatherTools, user("Weather in Paris?"), calls(call("get_weather", `{"city":"Paris"}`)),
					results(result("get_weather", `{"temp":21}`)), answer("21 degrees in Paris."))
			}
			ps, err := c.CheckLLM(context.Background(), LLMEnv{Client: s, Attempts: 2}, in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(kinds(ps), tt.want) || len(s.reqs) != tt.asks {
				t.Errorf("problems %v after %d requests, want %v after %d", ps, len(s.reqs), tt.want, tt.asks)
			}
		})
	}
}
