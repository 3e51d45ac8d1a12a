package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/pycall"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// tdcClient is a counting fake teacher. answer, when set, scripts the
// answer of a request by its slot; returning ok=false falls back to the
// offline oracle (req.Offline), as does a nil answer.
type tdcClient struct {
	answer func(req llm.Request) (content, finish string, ok bool)

	mu    sync.Mutex
	slots []string
	reqs  []llm.Request
}

func (c *tdcClient) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	c.mu.Lock()
	c.slots = append(c.slots, req.Slot)
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	if c.answer != nil {
		if content, finish, ok := c.answer(req); ok {
			if finish == "" {
				finish = "stop"
			}
			return llm.Response{Content: content, FinishReason: finish, Provider: "scripted", Model: "script-1"}, nil
		}
	}
	out, err := req.Offline()
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Content: out, FinishReason: "stop", Provider: "offline", Model: "oracle"}, nil
}

func (c *tdcClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots)
}

func (c *tdcClient) sortedSlots() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(slices.Values(c.slots))
}

func tdcTool(name, desc, params string) record.Tool {
	return record.Tool{Name: name, Description: desc, Parameters: json.RawMessage(params)}
}

var (
	tdcWeather = tdcTool("get_weather", "Get the current weather for a city",
		`{"type":"object","properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["c","f"],"default":"c"}},"required":["city"]}`)
	tdcGiveaways = tdcTool("live_giveaways_by_type", "Retrieve live giveaways from the GamerPower API based on the specified type.",
		`{"type":"object","properties":{"type":{"type":"string","description":"The type of giveaways to retrieve (e.g., game, loot, beta).","default":"game"}},"required":["type"]}`)
	tdcArea = tdcTool("calculate_area", "Calculate the area of a given shape",
		`{"type":"object","properties":{"shape":{"type":"string"},"dimensions":{"type":"array","items":{"type":"number"}}},"required":["shape","dimensions"]}`)
	tdcStock = tdcTool("get_stock_price", "Get the current stock price of a company",
		`{"type":"object","properties":{"symbol":{"type":"string"},"count":{"type":"integer"}},"required":["symbol"]}`)
)

func tdcCall(name, args string) record.Call {
	return record.Call{Name: name, Arguments: json.RawMessage(args)}
}

// tdcRecord is an xlam-style record: one user turn, one call turn.
func tdcRecord(id, query string, tools []record.Tool, gold ...record.Call) *record.Record {
	return &record.Record{
		ID: id, Source: "xlam", Format: "xlam", Tools: tools,
		Messages: []record.Message{
			{Role: record.RoleUser, Content: query},
			{Role: record.RoleAssistant, Calls: gold},
		},
	}
}

// tdcLibrary makes n distinct tools with one required string parameter.
func tdcLibrary(n int) []record.Tool {
	topics := []string{"movie", "flight", "hotel", "recipe", "song", "book", "train", "crypto", "news", "podcast"}
	lib := make([]record.Tool, n)
	for i := range lib {
		topic := topics[i%len(topics)]
		lib[i] = tdcTool(fmt.Sprintf("find_%s_%d", topic, i), fmt.Sprintf("Find a %s by keyword (variant %d)", topic, i),
			`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)
	}
	return lib
}

func tdcEnv(client llm.Client, lib []record.Tool, capacity int) *Env {
	l := toollib.New(lib)
	return &Env{
		Stage: "tool_dc", Seed: 7, Teacher: client, Capacity: capacity, Provider: "offline",
		Library: func() (*toollib.Library, error) { return l, nil },
	}
}

func tdcBuild(t testing.TB, cfg ToolDCConfig, env *Env) *toolDC {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("config problems: %v", probs)
	}
	st, err := cfg.build(env)
	if err != nil {
		t.Fatal(err)
	}
	return st.(*toolDC)
}

func tdcRun(t *testing.T, st Stage, r *record.Record) *record.Record {
	t.Helper()
	out, err := st.Process(context.Background(), r)
	if err != nil {
		t.Fatalf("Process(%s): %v", r.ID, err)
	}
	if len(out) != 1 {
		t.Fatalf("Process(%s) returned %d records", r.ID, len(out))
	}
	return out[0]
}

func tdcWantReject(t *testing.T, err error, reason string) {
	t.Helper()
	got, ok := contract.ReasonOf(err)
	if !ok || got != reason {
		t.Fatalf("error = %v, want a reject with reason %s", err, reason)
	}
}

func TestToolDCConfig(t *testing.T) {
	one := 1.0
	bad := 3.0
	tests := []struct {
		cfg  ToolDCConfig
		want []string // substrings of the problems, in order
	}{
		{ToolDCConfig{}, nil},
		{ToolDCConfig{Candidates: 50, Grouping: "anchor", TopK: 50, Temperature: &one, Attempts: 1}, nil},
		{ToolDCConfig{Candidates: 51}, []string{"candidates: 51"}},
		{ToolDCConfig{Candidates: -1}, []string{"candidates: -1"}},
		{ToolDCConfig{Grouping: "random"}, []string{`grouping: "random"`}},
		{ToolDCConfig{TopK: 3}, []string{"top_k: applies to grouping anchor only"}},
		{ToolDCConfig{Grouping: "anchor", Candidates: 4, TopK: 5}, []string{"top_k: 5 is not between 1 and candidates (4)"}},
		{ToolDCConfig{Temperature: &bad, MaxTokens: -1, Attempts: -2}, []string{"temperature: 3", "max_tokens", "attempts"}},
	}
	for _, tt := range tests {
		cfg := tt.cfg
		cfg.defaults()
		probs := cfg.validate()
		if len(probs) != len(tt.want) {
			t.Errorf("%+v: problems %q, want %d", tt.cfg, probs, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(probs[i], w) {
				t.Errorf("%+v: problem %q, want it to mention %q", tt.cfg, probs[i], w)
			}
		}
	}
	var cfg ToolDCConfig
	cfg.defaults()
	if cfg.Candidates != 20 || cfg.Grouping != "enumerate" || cfg.TopK != 0 || *cfg.Temperature != 0 || cfg.Attempts != 2 {
		t.Errorf("defaults = %+v", cfg)
	}
	anchor := ToolDCConfig{Grouping: "anchor"}
	anchor.defaults()
	if anchor.TopK != 5 {
		t.Errorf("anchor default top_k = %d, want 5", anchor.TopK)
	}
}

// The stage's block in pipeline.yaml decodes strictly and validates with
// the line of the stage.
func TestToolDCPipelineYAML(t *testing.T) {
	const head = "sources: [{path: x.json, format: xlam}]\nstages:\n"
	p, err := Parse("pipeline.yaml", []byte(head+"  - tool_dc: {grouping: anchor, candidates: 30}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stages[0]; st.Name != "tool_dc" || st.ToolDC == nil || st.ToolDC.TopK != 5 || st.ToolDC.Candidates != 30 {
		t.Errorf("stage = %+v", st)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"  - tool_dc: {candidate: 5}\n", `unknown key stages[0].tool_dc.candidate (did you mean candidates?)`},
		{"  - tool_dc: {candidates: 80}\n", "pipeline.yaml:3: stage \"tool_dc\": candidates: 80 is not between 1 and 50"},
		{"  - tool_dc: {grouping: anchor, top_k: 0, candidates: 3, attempts: -1}\n", "attempts: must be at least 1"},
	} {
		_, err := Parse("pipeline.yaml", []byte(head+tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

// Requests per kept record: |T| + 1 under enumerate, K + 2 under anchor.
func TestToolDCRequestCount(t *testing.T) {
	single := tdcRecord("xlam:1", "What's the weather in Paris?", []record.Tool{tdcWeather, tdcStock}, tdcCall("get_weather", `{"city":"Paris"}`))
	parallel := tdcRecord("xlam:2", "Where can I find live giveaways for beta access and games? Also the Apple stock price.",
		[]record.Tool{tdcGiveaways, tdcStock},
		tdcCall("live_giveaways_by_type", `{"type":"beta"}`), tdcCall("live_giveaways_by_type", `{"type":"game"}`), tdcCall("get_stock_price", `{"symbol":"AAPL"}`))
	tests := []struct {
		name string
		cfg  ToolDCConfig
		r    *record.Record
		want int
	}{
		{"enumerate N=20", ToolDCConfig{}, single, 21},
		{"enumerate N=5", ToolDCConfig{Candidates: 5}, single, 6},
		{"enumerate N=1", ToolDCConfig{Candidates: 1}, single, 2},
		{"enumerate N=50", ToolDCConfig{Candidates: 50}, single, 51},
		{"enumerate parallel N=10", ToolDCConfig{Candidates: 10}, parallel, 11},
		{"anchor N=20 K=5", ToolDCConfig{Grouping: "anchor"}, single, 7},
		{"anchor N=8 K=3", ToolDCConfig{Candidates: 8, Grouping: "anchor", TopK: 3}, single, 5},
		{"anchor N=4 K=4", ToolDCConfig{Candidates: 4, Grouping: "anchor", TopK: 4}, single, 6},
		{"anchor parallel N=20 K=5", ToolDCConfig{Grouping: "anchor"}, parallel, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &tdcClient{}
			st := tdcBuild(t, tt.cfg, tdcEnv(client, tdcLibrary(80), 4))
			out := tdcRun(t, st, tt.r)
			if got := client.count(); got != tt.want {
				t.Errorf("requests = %d, want %d", got, tt.want)
			}
			if got := out.Tag("tool_dc.requests"); got != strconv.Itoa(tt.want) {
				t.Errorf("tag tool_dc.requests = %s, want %d", got, tt.want)
			}
			slots := client.sortedSlots()
			if len(slices.Compact(slices.Clone(slots))) != len(slots) {
				t.Errorf("slots repeat: %q", slots)
			}
			if !slices.Contains(slots, tt.r.ID+"/retry") {
				t.Errorf("no retry slot in %q", slots)
			}
			if tt.cfg.Grouping == "" {
				for _, tool := range out.Tools {
					if !slices.Contains(slots, tt.r.ID+"/try/"+tool.Name) {
						t.Errorf("no Try slot for tool %s", tool.Name)
					}
				}
				if n := strconv.Itoa(len(out.Tools)); out.Tag("tool_dc.tools") != n || len(out.Tools)+1 != tt.want {
					t.Errorf("tools = %d (tag %s), want %d", len(out.Tools), out.Tag("tool_dc.tools"), tt.want-1)
				}
			}
		})
	}
}

// The trace lists exactly the record's real candidate calls and valid tools.
func TestToolDCTraceOracle(t *testing.T) {
	client := &tdcClient{}
	st := tdcBuild(t, ToolDCConfig{Candidates: 6}, tdcEnv(client, tdcLibrary(30), 2))
	gold := tdcCall("get_weather", `{"city":"Paris"}`)
	in := tdcRecord("xlam:7", "What's the weather in Paris?", []record.Tool{tdcWeather, tdcStock}, gold)
	in.Tags = []record.Tag{{Key: "lang", Value: "en"}}
	out := tdcRun(t, st, in)

	want := `1. Candidate Selection: I read the request and try to fill each function's parameters with what it gives me. ` +
		`These functions could serve it with their parameters filled in: [get_weather(city="Paris")]. ` +
		`2. Validation: I check each candidate against its definition: the function must exist, every argument must be a declared parameter, ` +
		`no required parameter may be missing, and every value must have the declared type. These functions pass: [get_weather]. ` +
		`3. Final Review: I leave out every function that did not pass or does not concern the request, and decide using only the validated ones.`
	turn := out.Messages[1]
	if turn.Reasoning != want {
		t.Errorf("reasoning:\n%s\nwant:\n%s", turn.Reasoning, want)
	}
	if turn.Content != "" || len(turn.Calls) != 1 || turn.Calls[0].Name != "get_weather" || string(turn.Calls[0].Arguments) != `{"city":"Paris"}` {
		t.Errorf("target turn = %+v", turn)
	}
	if len(out.Messages) != 2 || out.Messages[0].Content != in.Messages[0].Content {
		t.Errorf("messages = %+v", out.Messages)
	}
	if len(out.Tools) != 6 || !slices.ContainsFunc(out.Tools, func(tl record.Tool) bool { return tl.Name == "get_weather" }) ||
		!slices.ContainsFunc(out.Tools, func(tl record.Tool) bool { return tl.Name == "get_stock_price" }) {
		t.Errorf("tools = %v", tdcNames(out.Tools))
	}
	for key, val := range map[string]string{
		"tool_dc": "trace", "tool_dc.grouping": "enumerate", "tool_dc.tools": "6", "tool_dc.requests": "7",
		"tool_dc.candidates": `[{"name":"get_weather","arguments":{"city":"Paris"}}]`,
		"tool_dc.valid":      `["get_weather"]`, "lang": "en",
	} {
		if got := out.Tag(key); got != val {
			t.Errorf("tag %s = %q, want %q", key, got, val)
		}
	}
	if out.Tag("tool_dc.anchors") != "" {
		t.Errorf("enumerate record has anchors tag %q", out.Tag("tool_dc.anchors"))
	}
	if !strings.Contains(out.System, "Candidate Selection") || !strings.Contains(out.System, "<tool_call></tool_call>") {
		t.Errorf("system = %q, want the trace protocol", out.System)
	}
	if len(out.Lineage) != 1 || out.Lineage[0] != (record.Step{Stage: "tool_dc", Provider: "offline", Model: "oracle"}) {
		t.Errorf("lineage = %+v", out.Lineage)
	}
	// The input is untouched.
	if len(in.Tools) != 2 || in.Messages[1].Reasoning != "" || in.Tag("tool_dc") != "" {
		t.Errorf("input record changed: %+v", in)
	}
	// Request shape: temperature 0 is explicit, the stage is versioned, one
	// tool per Try prompt, only the valid tool in the Retry prompt.
	for _, req := range client.reqs {
		if req.Temperature == nil || *req.Temperature != 0 || req.Stage != "tool_dc@2" || req.Template == "" {
			t.Errorf("request %s: temperature %v stage %q template %q", req.Slot, req.Temperature, req.Stage, req.Template)
		}
		sys := req.Messages[0].Content
		if req.Slot == "xlam:7/retry" {
			if !strings.Contains(sys, `"get_weather"`) || strings.Contains(sys, `"get_stock_price"`) {
				t.Errorf("retry prompt lists the wrong tools:\n%s", sys)
			}
		} else if strings.Count(sys, `"name":`) != 1 {
			t.Errorf("try prompt %s lists %d tools", req.Slot, strings.Count(sys, `"name":`))
		}
		if last := req.Messages[len(req.Messages)-1]; last.Role != "user" || last.Content != "What's the weather in Paris?" {
			t.Errorf("request %s: question message %+v", req.Slot, last)
		}
	}
}

// tdcScripted answers Try requests from a map of tool name → answer, the
// Retry with retry; unlisted tools get the oracle's answer.
func tdcScripted(try map[string]string, retry string) func(llm.Request) (string, string, bool) {
	return func(req llm.Request) (string, string, bool) {
		_, rest, _ := strings.Cut(req.Slot, "/")
		if rest == "retry" {
			return retry, "", retry != ""
		}
		name := strings.TrimPrefix(rest, "try/")
		a, ok := try[name]
		if a == "TRUNCATED" {
			return `[get_weather(city="Pa`, "length", true
		}
		return a, "", ok
	}
}

// Check: a Try answer for the distractor decoy is valid only when it passes
// the decoy's schema; every parsed call is a candidate.
func TestToolDCCheck(t *testing.T) {
	decoy := tdcTool("city_weather_report", "Weather report for a city",
		`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)
	tests := []struct {
		name      string
		answer    string
		candidate bool // the answer's calls are listed as candidates
		valid     bool
	}{
		{"valid", `[city_weather_report(city="Paris")]`, true, true},
		{"valid with optional", `[city_weather_report(city="Paris", days=3)]`, true, true},
		{"valid in a code fence", "```python\n[city_weather_report(city=\"Paris\")]\n```", true, true},
		{"unknown key", `[city_weather_report(city="Paris", country="FR")]`, true, false},
		{"missing required", `[city_weather_report(days=3)]`, true, false},
		{"wrong type", `[city_weather_report(city="Paris", days="three")]`, true, false},
		{"integer as float", `[city_weather_report(city="Paris", days=2.5)]`, true, false},
		{"function not in group", `[get_weather(city="Lyon")]`, true, false},
		{"one bad call spoils the answer", `[city_weather_report(city="Paris"), city_weather_report(town="Lyon")]`, true, false},
		{"empty", ``, false, false},
		{"empty list", `[]`, false, false},
		{"prose", `None of the functions fit this request.`, false, false},
		{"unparseable", `[city_weather_report(city=Paris)]`, false, false},
		{"truncated", `TRUNCATED`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &tdcClient{answer: tdcScripted(map[string]string{"city_weather_report": tt.answer}, "")}
			// Candidates 2: T = the gold tool and the record's other tool.
			st := tdcBuild(t, ToolDCConfig{Candidates: 2}, tdcEnv(client, nil, 2))
			gold := tdcCall("get_weather", `{"city":"Paris"}`)
			out := tdcRun(t, st, tdcRecord("r:1", "Weather in Paris?", []record.Tool{tdcWeather, decoy}, gold))

			var cands []record.Call
			if err := json.Unmarshal([]byte(out.Tag("tool_dc.candidates")), &cands); err != nil {
				t.Fatal(err)
			}
			var valid []string
			if err := json.Unmarshal([]byte(out.Tag("tool_dc.valid")), &valid); err != nil {
				t.Fatal(err)
			}
			hasDecoy := len(cands) > 1 // the gold tool always adds its own call
			if hasDecoy != tt.candidate {
				t.Errorf("candidates %s: decoy listed = %v, want %v", out.Tag("tool_dc.candidates"), hasDecoy, tt.candidate)
			}
			if got := slices.Contains(valid, decoy.Name); got != tt.valid {
				t.Errorf("valid %q: decoy valid = %v, want %v", valid, got, tt.valid)
			}
			if !slices.Contains(valid, "get_weather") {
				t.Errorf("valid %q lacks the gold tool", valid)
			}
			// The trace states the same lists.
			wantCands := pycall.Print(cands)
			var validTools []record.Tool
			for _, tl := range out.Tools {
				if slices.Contains(valid, tl.Name) {
					validTools = append(validTools, tl)
				}
			}
			r := out.Messages[1].Reasoning
			if !strings.Contains(r, "filled in: "+wantCands+". 2. Validation:") || !strings.Contains(r, "pass: "+tdcNames(validTools)+". 3. Final Review:") {
				t.Errorf("reasoning does not state candidates %s and valid %s:\n%s", wantCands, tdcNames(validTools), r)
			}
			// Order: valid tools follow T's order.
			var order []string
			for _, tl := range out.Tools {
				if slices.Contains(valid, tl.Name) {
					order = append(order, tl.Name)
				}
			}
			if !slices.Equal(order, valid) {
				t.Errorf("valid %q not in tool order %q", valid, order)
			}
		})
	}
}

func TestToolDCRejects(t *testing.T) {
	weatherGold := tdcCall("get_weather", `{"city":"Paris"}`)
	tools := []record.Tool{tdcWeather, tdcStock}
	parallel := tdcRecord("p:1", "Weather in Paris and the AAPL price", tools, weatherGold, tdcCall("get_stock_price", `{"symbol":"AAPL"}`))
	tests := []struct {
		name     string
		r        *record.Record
		try      map[string]string
		retry    string
		reason   string
		requests int // with candidates 4
	}{
		{"no Try answer", tdcRecord("r:1", "Weather in Paris?", tools, weatherGold),
			map[string]string{"get_weather": "[]"}, "", ToolDCNoValidCandidate, 4},
		{"only invalid Try answers", tdcRecord("r:2", "Weather in Paris?", tools, weatherGold),
			map[string]string{"get_weather": `[get_weather(town="Paris")]`, "get_stock_price": `[get_stock_price(ticker="X")]`}, "", ToolDCNoValidCandidate, 4},
		{"gold tool missed", parallel,
			map[string]string{"get_stock_price": "[]"}, "", ToolDCMissedGoldTool, 4},
		{"retry value differs", tdcRecord("r:3", "Weather in Paris?", tools, weatherGold),
			nil, `[get_weather(city="Lyon")]`, ToolDCRetryMismatch, 5},
		{"retry wrong function", tdcRecord("r:4", "Weather in Paris?", tools, weatherGold),
			map[string]string{"get_stock_price": `[get_stock_price(symbol="P")]`}, `[get_stock_price(symbol="P")]`, ToolDCRetryMismatch, 5},
		{"retry extra call", tdcRecord("r:5", "Weather in Paris?", tools, weatherGold),
			nil, `[get_weather(city="Paris"), get_weather(city="Lyon")]`, ToolDCRetryMismatch, 5},
		{"retry misses a parallel call", parallel,
			nil, `[get_weather(city="Paris")]`, ToolDCRetryMismatch, 5},
		{"retry unknown argument", tdcRecord("r:6", "Weather in Paris?", tools, weatherGold),
			nil, `[get_weather(city="Paris", country="FR")]`, ToolDCRetryMismatch, 5},
		{"retry no call", tdcRecord("r:7", "Weather in Paris?", tools, weatherGold),
			nil, `[]`, ToolDCRetryNoCall, 5},
		{"retry never parses", tdcRecord("r:8", "Weather in Paris?", tools, weatherGold),
			nil, `I would call get_weather for Paris.`, ToolDCRetryBadSyntax, 6},
		{"gold call invalid", tdcRecord("r:9", "Weather in Paris?", tools, tdcCall("get_weather", `{"town":"Paris"}`)),
			nil, "", ToolDCGoldInvalid, 0},
		{"gold function unknown", tdcRecord("r:10", "Weather in Paris?", tools, tdcCall("get_forecast", `{"city":"Paris"}`)),
			nil, "", ToolDCGoldInvalid, 0},
		{"two tools, one name", tdcRecord("r:11", "Weather in Paris?", []record.Tool{tdcWeather, tdcTool("get_weather", "other", `{"type":"object","properties":{}}`)}, weatherGold),
			nil, "", ToolDCAmbiguousTool, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &tdcClient{answer: tdcScripted(tt.try, tt.retry)}
			st := tdcBuild(t, ToolDCConfig{Candidates: 4}, tdcEnv(client, tdcLibrary(20), 3))
			out, err := st.Process(context.Background(), tt.r)
			if out != nil {
				t.Errorf("rejected record also returned %d records", len(out))
			}
			tdcWantReject(t, err, tt.reason)
			if got := client.count(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
		})
	}
}

// A record that repeats an exact duplicate tool is fine; a record without a
// self-contained call turn is filtered, not rejected.
func TestToolDCTarget(t *testing.T) {
	u := func(s string) record.Message { return record.Message{Role: record.RoleUser, Content: s} }
	a := func(s string) record.Message { return record.Message{Role: record.RoleAssistant, Content: s} }
	c := func(calls ...record.Call) record.Message {
		return record.Message{Role: record.RoleAssistant, Calls: calls}
	}
	res := record.Message{Role: record.RoleTool, Results: []record.Result{{Name: "get_weather", Content: `{"t":20}`}}}
	sys := record.Message{Role: record.RoleSystem, Content: "Be brief."}
	gold := tdcCall("get_weather", `{"city":"Paris"}`)
	tests := []struct {
		name string
		msgs []record.Message
		want int
	}{
		{"xlam", []record.Message{u("q"), c(gold)}, 1},
		{"glaive multi-turn", []record.Message{u("hi"), a("What city?"), u("Paris"), c(gold), res, a("20 degrees"), u("and Lyon?"), c(gold)}, 3},
		{"system first", []record.Message{sys, u("q"), c(gold)}, 2},
		{"chat only", []record.Message{u("hi"), a("hello")}, -1},
		{"call first", []record.Message{c(gold), u("q")}, -1},
		{"blank user", []record.Message{u("  "), c(gold)}, -1},
		{"tool turn before", []record.Message{u("q"), res, c(gold)}, -1},
		{"empty", nil, -1},
	}
	for _, tt := range tests {
		if got := toolDCTarget(tt.msgs); got != tt.want {
			t.Errorf("%s: target = %d, want %d", tt.name, got, tt.want)
		}
	}

	client := &tdcClient{}
	st := tdcBuild(t, ToolDCConfig{Candidates: 3}, tdcEnv(client, tdcLibrary(10), 2))
	chat := &record.Record{ID: "g:1", Tools: []record.Tool{tdcWeather}, Messages: []record.Message{u("hi"), a("hello")}}
	_, err := st.Process(context.Background(), chat)
	var f *contract.Filter
	if !errors.As(err, &f) || f.Reason != ToolDCNoTargetTurn {
		t.Errorf("chat record: error %v, want filter %s", err, ToolDCNoTargetTurn)
	}

	// Multi-turn: cut after the first call turn; the teacher sees a transcript.
	multi := &record.Record{ID: "g:2", System: "Today is Monday.", Tools: []record.Tool{tdcWeather, tdcWeather},
		Messages: []record.Message{u("Hi, I need the weather."), a("Which city?"), u("Paris"), c(gold), res, a("20 degrees"), u("and Lyon?"), c(tdcCall("get_weather", `{"city":"Lyon"}`))}}
	out := tdcRun(t, st, multi)
	if len(out.Messages) != 4 || out.Messages[3].Calls[0].Name != "get_weather" || string(out.Messages[3].Calls[0].Arguments) != `{"city":"Paris"}` {
		t.Errorf("multi-turn output messages = %+v", out.Messages)
	}
	if !strings.HasSuffix(out.System, "\n\nToday is Monday.") {
		t.Errorf("system %q does not keep the record's own system text last", out.System)
	}
	for _, req := range client.reqs {
		q := req.Messages[len(req.Messages)-1].Content
		if q != "User: Hi, I need the weather.\n\nAssistant: Which city?\n\nUser: Paris" {
			t.Fatalf("question = %q", q)
		}
		if !strings.Contains(req.Messages[0].Content, "Today is Monday.") {
			t.Fatalf("system context missing from %s prompt", req.Slot)
		}
	}
}

// Type tolerance and order-insensitivity come from verify.MatchCalls; the
// record keeps its gold calls as written (the training target is y_gt: a
// Retry's count="3" for an integer, or 5.0 for 5, is not taught).
func TestToolDCMatchTolerance(t *testing.T) {
	tests := []struct {
		name  string
		r     *record.Record
		retry string
	}{
		{"omitted default", tdcRecord("m:1", "Weather in Paris?", []record.Tool{tdcWeather}, tdcCall("get_weather", `{"city":"Paris","unit":"c"}`)),
			`[get_weather(city="Paris")]`},
		{"explicit default", tdcRecord("m:2", "Weather in Paris?", []record.Tool{tdcWeather}, tdcCall("get_weather", `{"city":"Paris"}`)),
			`[get_weather(city="Paris", unit="c")]`},
		{"parallel reordered", tdcRecord("m:3", "Giveaways for beta and games", []record.Tool{tdcGiveaways},
			tdcCall("live_giveaways_by_type", `{"type":"beta"}`), tdcCall("live_giveaways_by_type", `{"type":"game"}`)),
			`[live_giveaways_by_type(type="game"), live_giveaways_by_type(type="beta")]`},
		{"1 vs 1.0", tdcRecord("m:4", "Area of a 5 by 3 rectangle", []record.Tool{tdcArea},
			tdcCall("calculate_area", `{"shape":"rectangle","dimensions":[5,3]}`)),
			`[calculate_area(shape="rectangle", dimensions=[5.0, 3.0])]`},
		{"string number where schema says integer", tdcRecord("m:5", "Three quotes for AAPL", []record.Tool{tdcStock},
			tdcCall("get_stock_price", `{"symbol":"AAPL","count":3}`)),
			`[get_stock_price(symbol="AAPL", count="3")]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &tdcClient{answer: tdcScripted(nil, tt.retry)}
			st := tdcBuild(t, ToolDCConfig{Candidates: 3}, tdcEnv(client, tdcLibrary(10), 2))
			out := tdcRun(t, st, tt.r)
			if got, want := pycall.Print(out.Messages[1].Calls), pycall.Print(tt.r.Messages[1].Calls); got != want {
				t.Errorf("calls = %s, want the gold %s (the Retry said %s)", got, want, tt.retry)
			}
			if out.Lineage[0].Provider != "scripted" {
				t.Errorf("lineage %+v, want the Retry's provider", out.Lineage)
			}
		})
	}
}

// Distractors are never equivalent to a gold tool, never repeat a name, and
// the gold tool is not always first.
func TestToolDCDistractors(t *testing.T) {
	lib := tdcLibrary(40)
	sameName := tdcTool("get_weather", "Weather from another provider", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)
	sameDef := tdcTool("weather_now", tdcWeather.Description, `{"type":"object", "properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["c","f"],"default":"c"}},"required":["city"]}`)
	dupName := tdcTool("find_movie_0", "A second tool named find_movie_0", `{"type":"object","properties":{}}`)
	lib = append(lib, sameName, sameDef, dupName, tdcWeather, tdcStock)
	client := &tdcClient{}
	st := tdcBuild(t, ToolDCConfig{Candidates: 20}, tdcEnv(client, lib, 4))
	positions := map[int]int{}
	for i := range 40 {
		r := tdcRecord(fmt.Sprintf("d:%d", i), "Weather in Paris?", []record.Tool{tdcWeather, tdcStock}, tdcCall("get_weather", `{"city":"Paris"}`))
		out := tdcRun(t, st, r)
		if len(out.Tools) != 20 {
			t.Fatalf("%s: %d tools", r.ID, len(out.Tools))
		}
		names := map[string]bool{}
		for j, tl := range out.Tools {
			if names[tl.Name] {
				t.Errorf("%s: tool name %s twice", r.ID, tl.Name)
			}
			names[tl.Name] = true
			if tl.Name == "weather_now" {
				t.Errorf("%s: distractor with the gold tool's definition", r.ID)
			}
			if tl.Name == "get_weather" {
				if tl.Description != tdcWeather.Description {
					t.Errorf("%s: distractor named like the gold tool", r.ID)
				}
				positions[j]++
			}
		}
		if !names["get_stock_price"] {
			t.Errorf("%s: the record's own tool was dropped", r.ID)
		}
	}
	if len(positions) < 5 {
		t.Errorf("gold tool positions over 40 records: %v; want a shuffled spread", positions)
	}

	// A library too small to fill N gives fewer tools, not duplicates.
	small := tdcBuild(t, ToolDCConfig{Candidates: 20}, tdcEnv(client, []record.Tool{tdcWeather, sameName, sameDef, tdcArea}, 2))
	out := tdcRun(t, small, tdcRecord("d:small", "Weather in Paris?", []record.Tool{tdcWeather}, tdcCall("get_weather", `{"city":"Paris"}`)))
	if got := tdcNames(out.Tools); len(out.Tools) != 2 || !strings.Contains(got, "calculate_area") {
		t.Errorf("small library tools = %s, want get_weather and calculate_area", got)
	}
}

// Anchor grouping: S0 is the BM25 top K; S1…SK are disjoint, each holding
// one anchor, and together hold every tool.
func TestToolDCAnchorGroups(t *testing.T) {
	client := &tdcClient{}
	st := tdcBuild(t, ToolDCConfig{Candidates: 12, Grouping: "anchor", TopK: 3}, tdcEnv(client, tdcLibrary(20), 2))
	cands := append([]record.Tool{tdcArea, tdcWeather, tdcGiveaways, tdcStock}, tdcLibrary(8)...)
	q := "What's the current weather in Paris, and the current stock price?"
	gs, anchors := st.groups("x:1", cands, q)
	if len(gs) != 4 || len(anchors) != 3 {
		t.Fatalf("%d groups, %d anchors", len(gs), len(anchors))
	}
	rank := toollib.NewToolBM25(cands).Rank(q)
	var top []string
	for _, h := range rank[:3] {
		top = append(top, cands[h.Doc].Name)
	}
	if !slices.Equal(anchors, top) || gs[0].slot != "x:1/try/top" || tdcNames(gs[0].tools) != "["+strings.Join(top, ", ")+"]" {
		t.Errorf("S0 = %s (anchors %q), want the BM25 top 3 %q", tdcNames(gs[0].tools), anchors, top)
	}
	if !slices.Contains(top, "get_weather") || !slices.Contains(top, "get_stock_price") {
		t.Errorf("BM25 top 3 %q misses the relevant tools", top)
	}
	seen := map[string]int{}
	for i, g := range gs[1:] {
		if g.tools[0].Name != anchors[i] || g.slot != "x:1/try/anchor/"+anchors[i] {
			t.Errorf("group %d: anchor %s slot %s, want %s", i+1, g.tools[0].Name, g.slot, anchors[i])
		}
		if len(g.tools) != 4 {
			t.Errorf("group %d holds %d tools, want 1 anchor + 3", i+1, len(g.tools))
		}
		for _, tl := range g.tools {
			seen[tl.Name]++
		}
	}
	for _, tl := range cands {
		if seen[tl.Name] != 1 {
			t.Errorf("tool %s is in %d anchor groups, want 1", tl.Name, seen[tl.Name])
		}
	}

	// End to end: the trace of an anchor-grouped record.
	out := tdcRun(t, st, tdcRecord("x:2", q, []record.Tool{tdcWeather, tdcStock}, tdcCall("get_weather", `{"city":"Paris"}`), tdcCall("get_stock_price", `{"symbol":"AAPL"}`)))
	if out.Tag("tool_dc.grouping") != "anchor" || out.Tag("tool_dc.requests") != "5" || !strings.HasPrefix(out.Tag("tool_dc.anchors"), `["`) {
		t.Errorf("tags = %+v", out.Tags)
	}
	// Both the top group and an anchor group propose each gold call; the trace
	// lists each call once.
	if got := out.Tag("tool_dc.candidates"); strings.Count(got, `"name"`) != 2 {
		t.Errorf("candidates %s, want the two gold calls once each", got)
	}
}

// Same input and seed, any concurrency: byte-identical output.
func TestToolDCDeterministic(t *testing.T) {
	records := []*record.Record{
		tdcRecord("x:1", "Weather in Paris?", []record.Tool{tdcWeather, tdcStock}, tdcCall("get_weather", `{"city":"Paris"}`)),
		tdcRecord("x:2", "Giveaways for beta and games", []record.Tool{tdcGiveaways, tdcArea},
			tdcCall("live_giveaways_by_type", `{"type":"beta"}`), tdcCall("live_giveaways_by_type", `{"type":"game"}`)),
	}
	run := func(capacity int, grouping string, seed uint64) string {
		env := tdcEnv(&tdcClient{}, tdcLibrary(100), capacity)
		env.Seed = seed
		st := tdcBuild(t, ToolDCConfig{Grouping: grouping}, env)
		var b strings.Builder
		for _, r := range records {
			out := tdcRun(t, st, r)
			j, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(j)
			b.WriteByte('\n')
		}
		return b.String()
	}
	for _, g := range []string{"enumerate", "anchor"} {
		a, b := run(1, g, 7), run(8, g, 7)
		if a != b {
			t.Errorf("%s: output depends on concurrency:\n%s\n%s", g, a, b)
		}
		if c := run(8, g, 8); c == a {
			t.Errorf("%s: another seed gave the same tool draw", g)
		}
	}
}

// A Try request the teacher never answers rejects the record with the llm
// reason; a fatal error stops the shard.
func TestToolDCTeacherErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		reason string
	}{
		{"answer error", &llm.AnswerError{Reason: "llm_error_timeout"}, "llm_error_timeout"},
		{"fatal", &llm.FatalError{Reason: "llm_budget_reached", Msg: "budget reached"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
				if strings.HasSuffix(req.Slot, "/try/get_weather") {
					return llm.Response{}, tt.err
				}
				out, _ := req.Offline()
				return llm.Response{Content: out, FinishReason: "stop", Provider: "offline"}, nil
			})
			st := tdcBuild(t, ToolDCConfig{Candidates: 5}, tdcEnv(client, tdcLibrary(10), 2))
			_, err := st.Process(context.Background(), tdcRecord("e:1", "Weather?", []record.Tool{tdcWeather}, tdcCall("get_weather", `{"city":"Paris"}`)))
			if tt.reason != "" {
				tdcWantReject(t, err, tt.reason)
				return
			}
			if _, ok := contract.ReasonOf(err); ok || !llm.IsFatal(err) {
				t.Errorf("error = %v, want a fatal, non-reject error", err)
			}
		})
	}
}

func FuzzToolDCAnswer(f *testing.F) {
	for _, s := range []string{"", "[]", `[get_weather(city="Paris")]`, "```\n[f(a=1)]\n```", "```", "```python", "None.", `[a(b=[1, {"c": None}])]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		calls, err := parseToolDCAnswer(s)
		if err != nil {
			return
		}
		for _, c := range calls {
			if !json.Valid(c.Arguments) {
				t.Fatalf("%q: call %s has invalid arguments %s", s, c.Name, c.Arguments)
			}
		}
	})
}

func BenchmarkToolDCProcess(b *testing.B) {
	for _, g := range []string{"enumerate", "anchor"} {
		b.Run(g, func(b *testing.B) {
			client := llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
				out, err := req.Offline()
				return llm.Response{Content: out, FinishReason: "stop", Provider: "offline"}, err
			})
			st := tdcBuild(b, ToolDCConfig{Grouping: g}, tdcEnv(client, tdcLibrary(30000), 8))
			r := tdcRecord("b:1", "Where can I find live giveaways for beta access and games?", []record.Tool{tdcGiveaways, tdcStock},
				tdcCall("live_giveaways_by_type", `{"type":"beta"}`), tdcCall("live_giveaways_by_type", `{"type":"game"}`))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Process(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// tdcReadDump parses one dump with stages/formats; rows it rejects are
// left out.
func tdcReadDump(t testing.TB, path, format string) []*record.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*record.Record
	sc := formats.NewScanner(f)
	for {
		row, i, err := sc.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := formats.Parse(format, "xlam", i, row)
		if err == nil {
			out = append(out, r)
		}
	}
}

// Offline oracle mode on real rows (xlam en/zh, and the multi-turn ToolACE
// and glaive layouts): every record with a target turn and valid gold calls
// becomes a trace costing |T| + 1 requests, whose lists are exactly the gold
// calls and the gold tools; the others are filtered (no target turn) or
// rejected as gold_invalid, never failed.
func TestToolDCRealData(t *testing.T) {
	dir := sharedData(t)
	for _, d := range []struct{ file, format string }{
		{"xlam_format_glaive_toolcall_en_demo.json", "xlam"},
		{"xlam_format_glaive_toolcall_zh_demo.json", "xlam"},
		{"toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		{"glaive_v2_format_glaive_toolcall_zh_demo.json", "glaive"},
	} {
		t.Run(d.file, func(t *testing.T) {
			recs := tdcReadDump(t, filepath.Join(dir, "derived", d.file), d.format)
			if len(recs) < 90 {
				t.Fatalf("only %d records parsed", len(recs))
			}
			var lib []record.Tool
			for _, r := range recs {
				lib = append(lib, r.Tools...)
			}
			client := &tdcClient{}
			st := tdcBuild(t, ToolDCConfig{}, tdcEnv(client, lib, 4))
			traces, eligible, outcomes := 0, 0, map[string]int{}
			for _, r := range recs {
				before := client.count()
				outs, err := st.Process(context.Background(), r)
				var f *contract.Filter
				switch reason, rejected := contract.ReasonOf(err); {
				case errors.As(err, &f):
					if f.Reason != ToolDCNoTargetTurn || toolDCTarget(r.Messages) >= 0 {
						t.Errorf("%s: filtered as %s", r.ID, f.Reason)
					}
					outcomes["filtered"]++
					continue
				case rejected:
					eligible++
					outcomes[reason]++
					if reason != ToolDCGoldInvalid {
						t.Errorf("%s: %v", r.ID, err)
					}
					continue
				case err != nil:
					t.Fatalf("%s: %v", r.ID, err)
				}
				eligible++
				out := outs[0]
				traces++
				target := len(out.Messages) - 1
				if got := client.count() - before; got != len(out.Tools)+1 || out.Tag("tool_dc.requests") != strconv.Itoa(got) {
					t.Errorf("%s: %d requests for %d tools (tag %s)", r.ID, got, len(out.Tools), out.Tag("tool_dc.requests"))
				}
				if target != toolDCTarget(r.Messages) {
					t.Errorf("%s: cut after message %d, want %d", r.ID, target, toolDCTarget(r.Messages))
				}
				gold := r.Messages[target].Calls
				if m := verify.MatchCalls(out.Tools, gold, out.Messages[target].Calls); !m.OK {
					t.Errorf("%s: trace calls do not match gold: %+v", r.ID, m.Problems)
				}
				// The oracle proposes exactly the gold calls and validates exactly
				// the gold tools.
				var cands []record.Call
				if err := json.Unmarshal([]byte(out.Tag("tool_dc.candidates")), &cands); err != nil {
					t.Fatal(err)
				}
				key := func(cs []record.Call) []string {
					var ks []string
					for _, c := range cs {
						ks = append(ks, pycall.Print([]record.Call{c}))
					}
					slices.Sort(ks)
					return slices.Compact(ks)
				}
				if !slices.Equal(key(cands), key(gold)) {
					t.Errorf("%s: candidates %s, want the gold calls %s", r.ID, out.Tag("tool_dc.candidates"), pycall.Print(gold))
				}
				var valid, goldNames []string
				if err := json.Unmarshal([]byte(out.Tag("tool_dc.valid")), &valid); err != nil {
					t.Fatal(err)
				}
				for _, c := range gold {
					goldNames = append(goldNames, c.Name)
				}
				slices.Sort(goldNames)
				slices.Sort(valid)
				if !slices.Equal(valid, slices.Compact(goldNames)) {
					t.Errorf("%s: valid %q, want the gold tools %q", r.ID, valid, goldNames)
				}
				if !strings.Contains(out.Messages[target].Reasoning, "filled in: "+pycall.Print(cands)+".") {
					t.Errorf("%s: reasoning does not list the candidates", r.ID)
				}
			}
			t.Logf("%d records: %d traces, %v", len(recs), traces, outcomes)
			if eligible == 0 || traces < eligible*9/10 {
				t.Errorf("%d traces from %d eligible records (%v)", traces, eligible, outcomes)
			}
		})
	}
}

// End to end through the llm layer and its fake OpenAI-compatible server:
// the server sees exactly |T| + 1 (enumerate) or K + 2 (anchor) requests
// for a record, and a rerun on the same cache sees none.
func TestToolDCFakeLLM(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  ToolDCConfig
		want int64
	}{
		{"enumerate N=20", ToolDCConfig{}, 21},
		{"enumerate N=50", ToolDCConfig{Candidates: 50}, 51},
		{"anchor N=20 K=5", ToolDCConfig{Grouping: "anchor"}, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake, err := fakellm.New(fakellm.Config{Script: []fakellm.Rule{
				{Contains: "weather in Paris", Answer: `[get_weather(city="Paris")]`},
			}})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(fake)
			defer hs.Close()
			cacheDir := t.TempDir()
			process := func() *record.Record {
				teacher, err := llm.NewTeacher(llm.Config{
					Provider: llm.ProviderOpenAI, Model: "fake-model",
					Endpoints: []llm.Endpoint{{BaseURL: hs.URL + "/v1", MaxInFlight: 8}},
				}, llm.Options{CacheDir: cacheDir})
				if err != nil {
					t.Fatal(err)
				}
				defer teacher.Close()
				env := tdcEnv(teacher.Stage("tool_dc"), tdcLibrary(100), teacher.Capacity())
				st := tdcBuild(t, tt.cfg, env)
				return tdcRun(t, st, tdcRecord("xlam:42", "What is the weather in Paris right now?", []record.Tool{tdcWeather, tdcStock},
					tdcCall("get_weather", `{"city":"Paris"}`)))
			}
			first := process()
			if got := fake.Counters().Chat; got != tt.want {
				t.Errorf("server saw %d chat requests, want %d", got, tt.want)
			}
			if first.Tag("tool_dc.valid") != `["get_weather"]` || first.Lineage[0].Provider != llm.ProviderOpenAI {
				t.Errorf("trace tags %+v lineage %+v", first.Tags, first.Lineage)
			}
			second := process()
			if got := fake.Counters().Chat; got != tt.want {
				t.Errorf("rerun sent %d more requests, want 0", got-tt.want)
			}
			a, _ := json.Marshal(first)
			b, _ := json.Marshal(second)
			if string(a) != string(b) {
				t.Errorf("rerun output differs:\n%s\n%s", a, b)
			}
		})
	}
}

// TestToolDCTruncatedTries: a Try answer cut off at the token limit is not
// asked again (one inference per tool), but it is counted and named in the
// reject, so a token limit set too low does not pass for a teacher that
// found nothing.
func TestToolDCTruncatedTries(t *testing.T) {
	tools := []record.Tool{tdcWeather, tdcStock}
	r := tdcRecord("r:1", "Weather in Paris?", tools, tdcCall("get_weather", `{"city":"Paris"}`))
	client := &tdcClient{answer: tdcScripted(map[string]string{"get_weather": "TRUNCATED", "get_stock_price": "TRUNCATED"}, "")}
	st := tdcBuild(t, ToolDCConfig{Candidates: 2}, tdcEnv(client, tdcLibrary(20), 3))
	ctx, ctr := withCounters()
	_, err := st.Process(ctx, r)
	tdcWantReject(t, err, ToolDCNoValidCandidate)
	if !strings.Contains(err.Error(), "2 of the answers cut off at the token limit: raise teacher.max_tokens") {
		t.Errorf("reject %v does not name the cut answers", err)
	}
	if got := ctr.m[CounterTryTruncated]; got != 2 {
		t.Errorf("try_truncated = %d, want 2 (counters %v)", got, ctr.m)
	}
}

// A reasoning model's thinking written into a Try or Retry answer is taken
// out before the calls are read (llm.SplitThinking), and a Try answer that
// does not parse (prose, thinking only) is counted and named in
// no_valid_candidate, not passed off as "no call".
func TestToolDCThinkingAndUnparsedTries(t *testing.T) {
	tools := []record.Tool{tdcWeather, tdcStock}
	r := tdcRecord("r:1", "Weather in Paris?", tools, tdcCall("get_weather", `{"city":"Paris"}`))

	client := &tdcClient{answer: tdcScripted(map[string]string{
		"get_weather":     "<think>\nZZTHINK get_weather fits.\n</think>\n\n[get_weather(city=\"Paris\")]",
		"get_stock_price": "ZZTHINK nothing here.\n</think>\n\n[]",
	}, "ZZTHINK so get_weather.\n</think>\n\n[get_weather(city=\"Paris\")]")}
	st := tdcBuild(t, ToolDCConfig{Candidates: 2}, tdcEnv(client, tdcLibrary(20), 3))
	out := tdcRun(t, st, r)
	if b, _ := json.Marshal(out); strings.Contains(string(b), "ZZTHINK") || out.Tag("tool_dc.valid") != `["get_weather"]` {
		t.Errorf("kept record %s", b)
	}

	client = &tdcClient{answer: tdcScripted(map[string]string{
		"get_weather":     `I would call get_weather(city="Paris").`,
		"get_stock_price": "<think>\nZZTHINK never closed",
	}, "")}
	st = tdcBuild(t, ToolDCConfig{Candidates: 2}, tdcEnv(client, tdcLibrary(20), 3))
	ctx, ctr := withCounters()
	_, err := st.Process(ctx, r)
	tdcWantReject(t, err, ToolDCNoValidCandidate)
	if !strings.Contains(err.Error(), "2 Try requests gave 0 candidate calls, none passed the check (2 of the answers did not parse, the first: ") {
		t.Errorf("reject %v does not name the answers that did not parse", err)
	}
	if got := ctr.m[CounterTryUnparsed]; got != 2 {
		t.Errorf("try_unparsed = %d, want 2 (counters %v)", got, ctr.m)
	}
	if client.count() != 2 {
		t.Errorf("%d requests, want 2: a Try is asked once", client.count())
	}

	// An empty answer is not "[]" (a server that sends the calls as
	// message.tool_calls answers so); a "[]" is no call, not counted.
	client = &tdcClient{answer: tdcScripted(map[string]string{"get_weather": "", "get_stock_price": "[]"}, "")}
	st = tdcBuild(t, ToolDCConfig{Candidates: 2}, tdcEnv(client, tdcLibrary(20), 3))
	ctx, ctr = withCounters()
	_, err = st.Process(ctx, r)
	tdcWantReject(t, err, ToolDCNoValidCandidate)
	if !strings.HasSuffix(err.Error(), "(1 of the answers did not parse, the first: the answer is empty (not even []))") || ctr.m[CounterTryUnparsed] != 1 {
		t.Errorf("reject %v, try_unparsed %d", err, ctr.m[CounterTryUnparsed])
	}
}
