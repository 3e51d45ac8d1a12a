package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// mtEmbedder is a lexical test embedder: each lower-cased word adds 1 to
// the dimension its hash picks. It counts the texts it embeds.
type mtEmbedder struct {
	mu    sync.Mutex
	texts int
	calls int
}

func (e *mtEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.texts += len(texts)
	e.calls++
	e.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 256)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := fnv.New32a()
			h.Write([]byte(strings.Trim(w, ".,;:!?()\"'")))
			v[h.Sum32()%256]++
		}
		out[i] = v
	}
	return out, nil
}

func mtTool(name, desc string, params ...string) record.Tool {
	props := make([]string, len(params))
	for i, p := range params {
		pn, pd, _ := strings.Cut(p, ":")
		props[i] = fmt.Sprintf(`%q:{"type":"string","description":%q}`, pn, pd)
	}
	schema := `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
	return record.Tool{Name: name, Description: desc, Parameters: json.RawMessage(schema)}
}

var (
	mtTraffic = record.Tool{Name: "get_traffic_report", Description: "Get the current traffic report",
		Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. Los Angeles, CA"}},"required":["location"]}`)}
	mtStock   = mtTool("get_stock_price", "Get the latest trading price of a stock", "symbol:The ticker symbol of the company")
	mtTime    = mtTool("get_local_time", "Get the current local time in a city", "city:Name of the city")
	mtWeather = mtTool("get_weather", "Get the weather forecast for a location", "location:The place to forecast", "units:celsius or fahrenheit")
	mtNews    = mtTool("search_news", "Search recent news articles about a topic", "topic:What the articles should be about")
	mtRecipe  = mtTool("find_recipe", "Find cooking recipes that use given ingredients", "ingredients:Comma separated ingredient list")
)

// mtLibrary is a small library of unrelated tools plus the fixtures.
func mtLibrary() []record.Tool {
	lib := []record.Tool{mtTraffic, mtStock, mtTime, mtWeather, mtNews, mtRecipe}
	topics := []string{"hotel rooms", "flight tickets", "movie showtimes", "museum tickets", "concert seats",
		"train schedules", "car rentals", "restaurant tables", "gym classes", "library books",
		"parking spots", "bike shares", "ferry times", "tennis courts", "yoga sessions"}
	for i, topic := range topics {
		lib = append(lib, mtTool(fmt.Sprintf("book_%d", i), "Reserve "+topic+" for a customer",
			"customer:Full name of the customer", "when:Date of the reservation"))
	}
	return lib
}

func mtEnv(lib []record.Tool, e toollib.Embedder) *Env {
	l := toollib.New(lib)
	env := &Env{Stage: "meta_tool", Seed: 42, Dir: ".", Library: func() (*toollib.Library, error) { return l, nil }}
	if e != nil {
		env.Embedder = e
	}
	return env
}

func mtBuild(t testing.TB, cfg MetaToolConfig, env *Env) Stage {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(env)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// mtSingle is seed 000's Fig 11 dialogue with one unused tool.
func mtSingle(id string) *record.Record {
	return fxRecord(id, []record.Tool{mtTraffic, mtStock},
		fxUser("I need to check the traffic situation in Miami, Florida before I head out. Can you help with that?"),
		fxCalls("get_traffic_report", `{"location":"Miami, Florida"}`),
		fxResults("get_traffic_report", `{"status":"heavy"}`),
		fxSay("Traffic in Miami is heavy right now."))
}

// mtParallel has one turn with three calls, one tool called twice.
func mtParallel(id string) *record.Record {
	return fxRecord(id, []record.Tool{mtStock, mtTime, mtTraffic},
		fxUser("Compare Apple and Microsoft shares, and what time is it in New York?"),
		fxCalls("get_stock_price", `{"symbol":"AAPL"}`, "get_stock_price", `{"symbol":"MSFT"}`, "get_local_time", `{"city":"New York"}`),
		fxResults("get_stock_price", `{"price":191.2}`, "get_stock_price", `{"price":402.5}`, "get_local_time", `{"time":"09:41"}`),
		fxSay("Apple 191.2, Microsoft 402.5; 09:41 in New York."))
}

// mtMultiTurn calls get_weather, then get_local_time, then get_weather
// again together with the new get_traffic_report.
func mtMultiTurn(id string) *record.Record {
	return fxRecord(id, []record.Tool{mtWeather, mtTime, mtTraffic, mtNews},
		fxUser("What's the weather in Paris?"),
		fxCalls("get_weather", `{"location":"Paris"}`),
		fxResults("get_weather", `{"temp":18}`),
		fxSay("18 °C in Paris."),
		fxUser("And the time there?"),
		fxCalls("get_local_time", `{"city":"Paris"}`),
		fxResults("get_local_time", `{"time":"15:02"}`),
		fxSay("15:02."),
		fxUser("Weather and traffic in Rome?"),
		fxCalls("get_weather", `{"location":"Rome"}`, "get_traffic_report", `{"location":"Rome"}`),
		fxResults("get_weather", `{"temp":24}`, "get_traffic_report", `{"status":"light"}`),
		fxSay("24 °C and light traffic in Rome."))
}

func mtChat(id string) *record.Record {
	return fxRecord(id, []record.Tool{mtWeather}, fxUser("Can you explain what NLP is?"), fxSay("NLP is the field of …"))
}

func mtAll(prefix string) []*record.Record {
	return []*record.Record{mtSingle(prefix + ":single"), mtParallel(prefix + ":parallel"), mtMultiTurn(prefix + ":multi"), mtChat(prefix + ":chat")}
}

func mtProcess(t testing.TB, st Stage, r *record.Record) *record.Record {
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

// mtResultTools reads a meta_tool result in any of its formats.
func mtResultTools(t testing.TB, content string) []record.Tool {
	t.Helper()
	tools, err := formats.MetaToolResult(content)
	if err != nil {
		t.Fatalf("result %s: %v", content, err)
	}
	return tools
}

// mtReturned is what a meta_tool result returns, without the paper's
// envelope: the Content in bare format, the envelope's "results" in paper
// format (where id is the call's position in a turn of n calls).
func mtReturned(t testing.TB, format, content string, id, n int) string {
	t.Helper()
	if format == MetaToolBare {
		return content
	}
	var env struct {
		Name       string          `json:"name"`
		FunctionID *int            `json:"function_id"`
		Results    json.RawMessage `json:"results"`
	}
	inner := content
	if n == 1 {
		var list []json.RawMessage
		if err := json.Unmarshal([]byte(content), &list); err != nil || len(list) != 1 {
			t.Fatalf("paper result of a lone call %s: want a one-element list (%v)", content, err)
		}
		inner = string(list[0])
	}
	keys, _, err := toollib.ObjectMembers([]byte(inner))
	if err != nil || !slices.Equal(keys, []string{"name", "function_id", "results"}) || json.Unmarshal([]byte(inner), &env) != nil {
		t.Fatalf("paper result %s: keys %v, want name, function_id, results (%v)", content, keys, err)
	}
	if env.Name != verify.MetaTool || env.FunctionID == nil || *env.FunctionID != id {
		t.Fatalf("paper result %s: want name meta_tool and function_id %d", content, id)
	}
	return string(env.Results)
}

func mtInvokedNames(r *record.Record) []string {
	var names []string
	for _, m := range r.Messages {
		for _, c := range m.Calls {
			if c.Name != verify.MetaTool && c.Name != verify.GetUserInput && !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// mtCheck asserts every invariant of a meta_tool output against its
// input (see MetaToolConfig).
func mtCheck(t *testing.T, cfg MetaToolConfig, in, out *record.Record) {
	t.Helper()
	cfg.defaults()
	world, difficulty, category := out.Tag("world"), out.Tag("difficulty"), out.Tag("category")
	if world != "open" && world != "closed" || difficulty != "simple" && difficulty != "hard" {
		t.Fatalf("%s: tags world=%q difficulty=%q", in.ID, world, difficulty)
	}
	if (world == "open") != (out.Tag("result_mode") == cfg.ResultMode) {
		t.Errorf("%s: world %s with result_mode %q", in.ID, world, out.Tag("result_mode"))
	}
	invoked := mtInvokedNames(in)
	listed := map[string]bool{}
	regular := 0
	for i, tl := range out.Tools {
		if listed[tl.Name] {
			t.Errorf("%s: tool %q listed twice", in.ID, tl.Name)
		}
		listed[tl.Name] = true
		if tl.Name != verify.GetUserInput {
			regular++
		}
		if tl.Name == verify.MetaTool && i != 0 {
			t.Errorf("%s: meta_tool listed at %d, want first", in.ID, i)
		}
	}
	if listed[verify.GetUserInput] != cfg.GetUserInput {
		t.Errorf("%s: get_user_input listed = %v", in.ID, listed[verify.GetUserInput])
	}
	if listed[verify.MetaTool] != (world == "open") {
		t.Errorf("%s: meta_tool listed = %v in a %s world", in.ID, listed[verify.MetaTool], world)
	}
	if difficulty == "hard" && regular < cfg.MinTools {
		t.Errorf("%s: hard record lists %d tools, want ≥ %d", in.ID, regular, cfg.MinTools)
	}
	if difficulty == "simple" {
		for _, tl := range in.Tools {
			if listed[tl.Name] && !slices.Contains(invoked, tl.Name) {
				t.Errorf("%s: simple record keeps unused tool %q", in.ID, tl.Name)
			}
		}
	}
	missing := world == "open" && category == "function_missing"
	for _, name := range invoked {
		if missing && listed[name] {
			t.Errorf("%s: invoked tool %q still listed in a function_missing record", in.ID, name)
		}
		if !missing && !listed[name] {
			t.Errorf("%s: invoked tool %q not listed", in.ID, name)
		}
	}
	if difficulty == "hard" {
		for _, tl := range out.Tools {
			orig, inInput := in.ToolByName(tl.Name)
			for _, name := range invoked {
				inv, _ := in.ToolByName(name)
				if tl.Name != name && toollib.SameDefinition(tl, inv) {
					t.Errorf("%s: distractor %q repeats invoked %q", in.ID, tl.Name, name)
				}
			}
			if inInput && !toollib.SameDefinition(orig, tl) {
				t.Errorf("%s: tool %q changed definition", in.ID, tl.Name)
			}
		}
	}
	// Walk the dialogue: every call names an available tool; meta_tool
	// calls come right before the first call of each invoked tool, once.
	avail := maps.Clone(listed)
	metaFor := map[string]int{} // tool → index of its meta_tool call turn
	metaCalls := 0
	var stripped []record.Message
	for i := 0; i < len(out.Messages); i++ {
		m := out.Messages[i]
		isMeta := len(m.Calls) > 0 && m.Calls[0].Name == verify.MetaTool
		for _, c := range m.Calls {
			if (c.Name == verify.MetaTool) != isMeta {
				t.Fatalf("%s: messages[%d] mixes meta_tool with other calls", in.ID, i)
			}
			if !avail[c.Name] {
				t.Errorf("%s: messages[%d] calls %q, not available there", in.ID, i, c.Name)
			}
		}
		if !isMeta {
			if cfg.GetUserInput && len(m.Calls) == 1 && m.Calls[0].Name == verify.GetUserInput {
				if string(m.Calls[0].Arguments) != "{}" {
					t.Errorf("%s: get_user_input arguments %s", in.ID, m.Calls[0].Arguments)
				}
				m.Calls = nil
			}
			stripped = append(stripped, m)
			continue
		}
		if m.Content != "" || m.Reasoning != "" {
			t.Errorf("%s: inserted meta_tool turn has text", in.ID)
		}
		if i+2 >= len(out.Messages) || out.Messages[i+1].Role != record.RoleTool || len(out.Messages[i+1].Results) != len(m.Calls) {
			t.Fatalf("%s: meta_tool call turn %d is not followed by its results and a call turn", in.ID, i)
		}
		next := out.Messages[i+2]
		for k, c := range m.Calls {
			metaCalls++
			keys, _, err := toollib.ObjectMembers(c.Arguments)
			if err != nil || !slices.Equal(keys, []string{"tool_description", "param_description"}) {
				t.Errorf("%s: meta_tool arguments %s: keys %v, %v", in.ID, c.Arguments, keys, err)
			}
			q, err := parseMetaToolArgs(c.Arguments)
			if err != nil {
				t.Fatalf("%s: %v", in.ID, err)
			}
			res := out.Messages[i+1].Results[k]
			if res.Name != verify.MetaTool {
				t.Errorf("%s: result name %q", in.ID, res.Name)
			}
			tools := mtResultTools(t, res.Content)
			returned := mtReturned(t, cfg.ResultFormat, res.Content, k, len(m.Calls))
			if cfg.ResultMode == MetaToolOracle && (len(tools) != 1 || strings.HasPrefix(returned, "[")) {
				t.Errorf("%s: oracle result %s, want one object", in.ID, res.Content)
			}
			if cfg.ResultMode == MetaToolRetrieved && !strings.HasPrefix(returned, "[") {
				t.Errorf("%s: retrieved result %s, want a list", in.ID, res.Content)
			}
			if len(tools) > cfg.TopK {
				t.Errorf("%s: %d tools returned, top_k %d", in.ID, len(tools), cfg.TopK)
			}
			// The call asks for exactly one invoked tool, which the next
			// turn calls and the result returns unchanged.
			var target string
			for _, name := range invoked {
				def, _ := in.ToolByName(name)
				if want, _ := toollib.QueryOf(def); want.Description == q.Description && slices.Equal(want.Params, q.Params) {
					target = name
				}
			}
			if target == "" {
				t.Fatalf("%s: meta_tool call %s asks for no invoked tool", in.ID, c.Arguments)
			}
			if _, dup := metaFor[target]; dup {
				t.Errorf("%s: meta_tool called twice for %q", in.ID, target)
			}
			metaFor[target] = i
			if !slices.ContainsFunc(next.Calls, func(c record.Call) bool { return c.Name == target }) {
				t.Errorf("%s: meta_tool for %q not right before a call of it", in.ID, target)
			}
			if avail[target] {
				t.Errorf("%s: %q retrieved after being available", in.ID, target)
			}
			def, _ := in.ToolByName(target)
			found := false
			names := map[string]bool{}
			for _, tl := range tools {
				if names[tl.Name] {
					t.Errorf("%s: result repeats name %q", in.ID, tl.Name)
				}
				names[tl.Name] = true
				if tl.Name == target {
					found = toollib.SameDefinition(tl, def)
				} else if listed[tl.Name] || slices.Contains(invoked, tl.Name) {
					t.Errorf("%s: result returns %q, which clashes with a listed or invoked tool", in.ID, tl.Name)
				}
				avail[tl.Name] = true
			}
			if !found {
				t.Errorf("%s: result for %q does not return its definition: %s", in.ID, target, res.Content)
			}
		}
		i++ // the tool turn
	}
	if missing != (metaCalls > 0) {
		t.Errorf("%s: category %s with %d meta_tool calls", in.ID, category, metaCalls)
	}
	if missing && metaCalls != len(invoked) {
		t.Errorf("%s: %d meta_tool calls for %d invoked tools", in.ID, metaCalls, len(invoked))
	}
	// Without the inserted turns (and get_user_input) the dialogue is the input's.
	if !mtEqualMessages(stripped, in.Messages) {
		t.Errorf("%s: dialogue changed beyond the inserted turns", in.ID)
	}
	if want := mtCategory(in, world == "open", missing); category != want {
		t.Errorf("%s: category %q, want %q", in.ID, category, want)
	}
	if n := len(out.Lineage); n == 0 || out.Lineage[n-1] != (record.Step{Stage: "meta_tool", Provider: "rule"}) {
		t.Errorf("%s: lineage %v", in.ID, out.Lineage)
	}
}

func mtCategory(in *record.Record, open, missing bool) string {
	tools := map[string]bool{}
	for _, m := range in.Messages {
		for _, c := range m.Calls {
			tools[c.Name] = true
		}
	}
	switch {
	case len(tools) == 0:
		return "chat"
	case missing:
		return "function_missing"
	case open:
		return "function_existing"
	case len(tools) == 1:
		return "single_call" // one tool, called once or more
	}
	return "multi_call"
}

func mtEqualMessages(a, b []record.Message) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func mtPtr(f float64) *float64 { return &f }

func TestMetaToolPaperExample(t *testing.T) {
	// Seed 000 Fig 11 → Fig 12: open world, simple, oracle; the result is
	// Fig 12's tool turn, the definition in the envelope with function_id.
	st := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}, mtEnv(nil, nil))
	out := mtProcess(t, st, mtSingle("mt:fig12"))
	if got := []string{out.Tools[0].Name}; len(out.Tools) != 1 || got[0] != "meta_tool" {
		t.Fatalf("tools = %v, want [meta_tool]", out.Tools)
	}
	var def map[string]any
	if err := json.Unmarshal(out.Tools[0].Parameters, &def); err != nil || fmt.Sprint(def["required"]) != "[tool_description param_description]" {
		t.Errorf("meta_tool parameters %s: required must sit inside parameters", out.Tools[0].Parameters)
	}
	want := []record.Message{
		fxUser("I need to check the traffic situation in Miami, Florida before I head out. Can you help with that?"),
		fxCalls("meta_tool", `{"tool_description":"Get the current traffic report","param_description":["The city and state, e.g. Los Angeles, CA"]}`),
		fxResults("meta_tool", `[{"name":"meta_tool","function_id":0,"results":{"name":"get_traffic_report","description":"Get the current traffic report","parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. Los Angeles, CA"}},"required":["location"]}}}]`),
		fxCalls("get_traffic_report", `{"location":"Miami, Florida"}`),
		fxResults("get_traffic_report", `{"status":"heavy"}`),
		fxSay("Traffic in Miami is heavy right now."),
	}
	if !mtEqualMessages(out.Messages, want) {
		got, _ := json.MarshalIndent(out.Messages, "", " ")
		t.Errorf("messages:\n%s", got)
	}
	for _, kv := range [][2]string{{"world", "open"}, {"difficulty", "simple"}, {"category", "function_missing"}, {"result_mode", "oracle"}} {
		if out.Tag(kv[0]) != kv[1] {
			t.Errorf("tag %s = %q, want %q", kv[0], out.Tag(kv[0]), kv[1])
		}
	}
	// The exported tool turn is Fig 12's, byte for byte up to JSON spacing.
	fig12 := `[{"name": "meta_tool", "function_id": 0, "results": {"name": "get_traffic_report", "description": "Get the current traffic report", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The city and state, e.g. Los Angeles, CA"}}, "required": ["location"]}}}]`
	obs, err := observation(out.Messages[2].Results)
	if err != nil || obs != mtCompactJSON(t, fig12) {
		t.Errorf("exported tool turn %s (%v), want Fig 12's %s", obs, err, fig12)
	}
}

func mtCompactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestMetaToolResultFormats: bare results are the definitions alone; paper
// results of a turn with several meta_tool calls are one envelope each,
// function_id counting the calls, and their exported tool turn is the list
// of them; every consumer reads both formats.
func TestMetaToolResultFormats(t *testing.T) {
	def := `{"name":"get_traffic_report","description":"Get the current traffic report","parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. Los Angeles, CA"}},"required":["location"]}}`
	bare := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0), ResultFormat: MetaToolBare}, mtEnv(nil, nil))
	if got := mtProcess(t, bare, mtSingle("mt:bare")).Messages[2].Results[0].Content; got != def {
		t.Errorf("bare result %s, want %s", got, def)
	}
	for _, format := range []string{MetaToolPaper, MetaToolBare} {
		cfg := MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0), ResultFormat: format, GetUserInput: true}
		st := mtBuild(t, cfg, mtEnv(nil, nil))
		in := mtParallel("mt:par-" + format)
		out := mtProcess(t, st, in)
		mtCheck(t, cfg, in, out)
		res := out.Messages[2].Results
		obs, err := observation(res)
		if err != nil {
			t.Fatal(err)
		}
		if format == MetaToolPaper {
			var turn []struct {
				Name       string          `json:"name"`
				FunctionID int             `json:"function_id"`
				Results    json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal([]byte(obs), &turn); err != nil || len(turn) != 2 || turn[0].FunctionID != 0 || turn[1].FunctionID != 1 {
				t.Errorf("paper tool turn of two meta_tool calls: %s (%v)", obs, err)
			}
		}
		// calls_resolved, args_schema and the reason stage's scope see the
		// returned tools.
		for _, c := range []*verify.Checker{verify.CallsResolved, verify.ArgsSchema} {
			if probs := c.Check(out); len(probs) > 0 {
				t.Errorf("%s: %s: %v", format, c.Name, probs)
			}
		}
		scope := toolsInScope(out, 3)
		if _, ok := scope["get_stock_price"]; !ok {
			t.Errorf("%s: reason scope %v lacks the retrieved get_stock_price", format, slices.Collect(maps.Keys(scope)))
		}
	}
}

func TestMetaToolParallelAndRepeatedCalls(t *testing.T) {
	st := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}, mtEnv(nil, nil))
	tests := []struct {
		name string
		in   *record.Record
		// per inserted meta turn, the tools it retrieves
		want [][]string
	}{
		// A turn calling get_stock_price twice and get_local_time once gets
		// one meta turn with two calls, in first-call order.
		{"parallel", mtParallel("mt:p"), [][]string{{"get_stock_price", "get_local_time"}}},
		// get_weather is retrieved once; the last turn mixes it with the
		// new get_traffic_report, which alone gets a meta_tool call.
		{"repeated and mixed", mtMultiTurn("mt:m"), [][]string{{"get_weather"}, {"get_local_time"}, {"get_traffic_report"}}},
		{"single", mtSingle("mt:s"), [][]string{{"get_traffic_report"}}},
		{"chat", mtChat("mt:c"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mtProcess(t, st, tt.in)
			mtCheck(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}, tt.in, out)
			var got [][]string
			for i, m := range out.Messages {
				if len(m.Calls) == 0 || m.Calls[0].Name != verify.MetaTool {
					continue
				}
				var names []string
				for _, r := range out.Messages[i+1].Results {
					names = append(names, mtResultTools(t, r.Content)[0].Name)
				}
				got = append(got, names)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("meta turns retrieve %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMetaToolClosedWorld(t *testing.T) {
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(0), HardRatio: mtPtr(0)}
	st := mtBuild(t, cfg, mtEnv(nil, nil))
	for _, in := range mtAll("mt") {
		out := mtProcess(t, st, in)
		mtCheck(t, cfg, in, out)
		if out.Tag("world") != "closed" {
			t.Errorf("%s: world %s", in.ID, out.Tag("world"))
		}
		for _, m := range out.Messages {
			for _, c := range m.Calls {
				if c.Name == verify.MetaTool {
					t.Errorf("%s: closed world calls meta_tool", in.ID)
				}
			}
		}
	}
	// Simple closed-world: exactly the invoked tools, in source order.
	out := mtProcess(t, st, mtMultiTurn("mt:order"))
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"get_weather", "get_local_time", "get_traffic_report"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	if got := mtProcess(t, st, mtParallel("mt:cat")).Tag("category"); got != "multi_call" {
		t.Errorf("parallel category %q, want multi_call", got)
	}
	twice := fxRecord("mt:twice", []record.Tool{mtStock, mtTime},
		fxUser("Apple and Microsoft shares?"),
		fxCalls("get_stock_price", `{"symbol":"AAPL"}`, "get_stock_price", `{"symbol":"MSFT"}`),
		fxResults("get_stock_price", `{"price":191.2}`, "get_stock_price", `{"price":402.5}`),
		fxSay("Apple 191.2, Microsoft 402.5."))
	if got := mtProcess(t, st, twice).Tag("category"); got != "single_call" {
		t.Errorf("one tool called twice: category %q, want single_call (Meta-Bench's single tool)", got)
	}
	if got := mtProcess(t, st, mtSingle("mt:cat1")).Tag("category"); got != "single_call" {
		t.Errorf("single category %q, want single_call", got)
	}
}

func TestMetaToolFunctionExisting(t *testing.T) {
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0), ExistingRatio: 1}
	st := mtBuild(t, cfg, mtEnv(nil, nil))
	for _, in := range mtAll("mt") {
		out := mtProcess(t, st, in)
		mtCheck(t, cfg, in, out)
		if in.ID != "mt:chat" && out.Tag("category") != "function_existing" {
			t.Errorf("%s: category %s", in.ID, out.Tag("category"))
		}
	}
}

func TestMetaToolHard(t *testing.T) {
	// The library holds, besides unrelated tools, three that could stand in
	// for get_traffic_report: the same name with another definition, the same
	// definition under another name, and a near copy. None may be drawn.
	sameName := mtTool("get_traffic_report", "Traffic jams on a road", "road:Road name")
	sameDef := mtTraffic
	sameDef.Name = "traffic_report_v2"
	near := mtTraffic
	near.Name = "current_traffic"
	near.Description = "Get the current traffic report now"
	lib := append(mtLibrary(), sameName, sameDef, near)
	e := &mtEmbedder{}
	for _, open := range []float64{0, 1} {
		cfg := MetaToolConfig{OpenWorldRatio: mtPtr(open), HardRatio: mtPtr(1), GetUserInput: true}
		st := mtBuild(t, cfg, mtEnv(lib, e))
		for i := range 40 {
			for _, in := range mtAll(fmt.Sprintf("mt%d", i)) {
				out := mtProcess(t, st, in)
				mtCheck(t, cfg, in, out)
				for _, tl := range out.Tools {
					if tl.Name == "traffic_report_v2" || tl.Name == "current_traffic" || tl.Name == sameName.Name && tl.Description == sameName.Description {
						if slices.Contains(mtInvokedNames(in), "get_traffic_report") {
							t.Errorf("%s: distractor %q could stand in for get_traffic_report", in.ID, tl.Name)
						}
					}
				}
			}
		}
	}
	// The library is embedded once per run (one request: it is smaller
	// than a batch); the records' tools are in it, so nothing else is.
	if e.calls != 2 || e.texts > 2*len(lib)*3 {
		t.Errorf("embedder called %d times for %d texts; want one call per stage", e.calls, e.texts)
	}
}

// TestMetaToolHardNeverListsNearTwins: hard records list no near-twin of
// an invoked tool (issue 17: calculate_loan_repayment beside
// calculate_loan_payment, generate_random_password beside
// generate_password), neither drawn from the library nor kept from the
// record's unused tools, with the offline lexical embedder, under which the
// twins' Algorithm-1 similarity stays below distractor_max_similarity. A
// related tool that is no twin (generate_qr_code) stays eligible.
func TestMetaToolHardNeverListsNearTwins(t *testing.T) {
	loan := mtTool("calculate_loan_payment", "Calculate the monthly loan payment",
		"loan_amount:The total loan amount", "interest_rate:The annual interest rate", "loan_term:The loan term in years")
	loanTwin := mtTool("calculate_loan_repayment", "Calculate the monthly repayment amount of a loan",
		"principal:The amount borrowed", "rate:Yearly interest in percent", "years:How many years the loan runs")
	pw := mtTool("generate_password", "Generate a random password", "length:The length of the password")
	pwTwin := mtTool("generate_random_password", "Generate a random password of a given length and strength",
		"size:Number of characters", "strength:weak, medium or strong")
	qr := mtTool("generate_qr_code", "Generate a QR code image for a text", "text:The text to encode")
	emb := noiseOfflineEmbedder(t)
	for _, pair := range [][2]record.Tool{{loan, loanTwin}, {pw, pwTwin}} {
		qa, _ := toollib.QueryOf(pair[0])
		qb, _ := toollib.QueryOf(pair[1])
		for _, q := range [][2]toollib.Query{{qa, qb}, {qb, qa}} {
			if sim, err := toollib.Similarity(t.Context(), emb, 0.5, q[0], q[1]); err != nil || sim > 0.85 {
				t.Fatalf("%s ~ %s: Algorithm-1 similarity %.3f (%v); the fixture must pass distractor_max_similarity", pair[0].Name, pair[1].Name, sim, err)
			}
		}
	}
	lib := append(mtLibrary(), loan, loanTwin, pw, pwTwin, qr)
	twins := map[string]string{loan.Name: loanTwin.Name, pw.Name: pwTwin.Name}
	qrListed := 0
	for _, open := range []float64{0, 1} {
		cfg := MetaToolConfig{OpenWorldRatio: mtPtr(open), HardRatio: mtPtr(1), MinTools: 8}
		st := mtBuild(t, cfg, mtEnv(lib, emb))
		for i := range 60 {
			ins := []*record.Record{
				fxRecord(fmt.Sprintf("loan:%d", i), []record.Tool{loan, loanTwin},
					fxUser("What would I pay each month on 200000 at 5% over 30 years?"),
					fxCalls(loan.Name, `{"loan_amount":"200000","interest_rate":"5","loan_term":"30"}`)),
				fxRecord(fmt.Sprintf("pw:%d", i), []record.Tool{pw},
					fxUser("I need a new password, 12 characters."),
					fxCalls(pw.Name, `{"length":"12"}`)),
			}
			for _, in := range ins {
				out := mtProcess(t, st, in)
				mtCheck(t, cfg, in, out)
				invoked := mtInvokedNames(in)[0]
				for _, tl := range out.Tools {
					if tl.Name == twins[invoked] {
						t.Errorf("%s (%s world): lists %s beside the invoked %s", in.ID, out.Tag("world"), tl.Name, invoked)
					}
					if tl.Name == qr.Name {
						qrListed++
					}
				}
			}
		}
	}
	if qrListed == 0 {
		t.Error("generate_qr_code, related to generate_password but no twin, was never drawn")
	}
}

func TestMetaToolHardKeepsUnusedAndShuffles(t *testing.T) {
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(0), HardRatio: mtPtr(1)}
	st := mtBuild(t, cfg, mtEnv(mtLibrary(), &mtEmbedder{}))
	orders := map[string]bool{}
	for i := range 30 {
		in := fxRecord(fmt.Sprintf("mt:%d", i), []record.Tool{mtTraffic, mtStock, mtTime, mtWeather, mtNews, mtRecipe},
			fxUser("Traffic in Miami?"), fxCalls("get_traffic_report", `{"location":"Miami"}`))
		out := mtProcess(t, st, in)
		mtCheck(t, cfg, in, out)
		var names []string
		for _, tl := range out.Tools {
			names = append(names, tl.Name)
		}
		if len(names) != 6 {
			t.Fatalf("tools %v: want the six input tools and no more", names)
		}
		orders[strings.Join(names, ",")] = true
	}
	if len(orders) < 5 {
		t.Errorf("hard tool order varies little: %d orders in 30 records", len(orders))
	}
}

func TestMetaToolFewDistractors(t *testing.T) {
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(0), HardRatio: mtPtr(1)}
	st := mtBuild(t, cfg, mtEnv([]record.Tool{mtTraffic, mtStock}, &mtEmbedder{}))
	_, err := st.Process(context.Background(), mtSingle("mt:few"))
	if reason, ok := contract.ReasonOf(err); !ok || reason != MetaToolFewDistractors {
		t.Fatalf("err = %v, want reject %s", err, MetaToolFewDistractors)
	}
}

func TestMetaToolRetrieved(t *testing.T) {
	lib := mtLibrary()
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0.5), ResultMode: MetaToolRetrieved, TopK: 4}
	st := mtBuild(t, cfg, mtEnv(lib, &mtEmbedder{}))
	positions := map[int]int{}
	for i := range 30 {
		for _, in := range mtAll(fmt.Sprintf("mt%d", i)) {
			out := mtProcess(t, st, in)
			mtCheck(t, cfg, in, out)
			for j, m := range out.Messages {
				if m.Role != record.RoleTool || len(m.Results) == 0 || m.Results[0].Name != verify.MetaTool {
					continue
				}
				for k, r := range m.Results {
					tools := mtResultTools(t, r.Content)
					if !strings.HasPrefix(mtReturned(t, MetaToolPaper, r.Content, k, len(m.Results)), "[") || len(tools) != 4 {
						t.Errorf("%s: retrieved result %s, want a list of 4", in.ID, r.Content)
					}
					target := out.Messages[j-1].Calls[k]
					q, _ := parseMetaToolArgs(target.Arguments)
					for p, tl := range tools {
						if tl.Description == q.Description {
							positions[p]++
						}
					}
				}
			}
		}
	}
	if len(positions) < 3 {
		t.Errorf("the invoked tool sits at positions %v only; the list should be shuffled", positions)
	}
}

func TestMetaToolRetrievedRanksBySimilarity(t *testing.T) {
	// With top_k 2 the one other tool returned is the library's most
	// similar eligible tool.
	lib := append(mtLibrary(), mtTool("traffic_cams", "Show traffic camera images for a city", "location:The city and state"))
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0), ResultMode: MetaToolRetrieved, TopK: 2}
	st := mtBuild(t, cfg, mtEnv(lib, &mtEmbedder{}))
	out := mtProcess(t, st, mtSingle("mt:rank"))
	var names []string
	for _, tl := range mtResultTools(t, out.Messages[2].Results[0].Content) {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"get_traffic_report", "traffic_cams"}; !slices.Equal(names, want) {
		t.Errorf("retrieved %v, want %v", names, want)
	}
}

func TestMetaToolGetUserInput(t *testing.T) {
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(0), HardRatio: mtPtr(0), GetUserInput: true}
	st := mtBuild(t, cfg, mtEnv(nil, nil))
	out := mtProcess(t, st, mtChat("mt:chat"))
	mtCheck(t, cfg, mtChat("mt:chat"), out)
	a := out.Messages[1]
	if len(a.Calls) != 1 || a.Calls[0].Name != verify.GetUserInput || a.Content != "NLP is the field of …" {
		t.Errorf("assistant turn %+v", a)
	}
	if out.Tag("category") != "chat" || len(out.Tools) != 1 || out.Tools[0].Name != verify.GetUserInput {
		t.Errorf("category %s, tools %v", out.Tag("category"), out.Tools)
	}
	if d := out.Tools[0].Description; d != "Not invoke any additional functions." {
		t.Errorf("get_user_input description %q, want seed 000 Fig 6's", d)
	}
	if len(out.Messages) != 2 {
		t.Errorf("no tool turn may follow get_user_input: %d messages", len(out.Messages))
	}
}

func TestMetaToolRejects(t *testing.T) {
	st := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}, mtEnv(nil, nil))
	badParams := mtTraffic
	badParams.Parameters = json.RawMessage(`{"properties":[1]}`)
	tests := []struct {
		name string
		in   *record.Record
		want string
	}{
		{"lists meta_tool", fxRecord("r1", []record.Tool{verify.MetaToolDef()}, fxUser("x")), MetaToolReservedName},
		{"lists get_user_input", fxRecord("r2", []record.Tool{verify.GetUserInputDef()}, fxUser("x")), MetaToolReservedName},
		{"calls meta_tool", fxRecord("r3", []record.Tool{mtTraffic}, fxUser("x"), fxCalls("meta_tool", `{}`)), MetaToolReservedName},
		{"unknown call", fxRecord("r4", []record.Tool{mtTraffic}, fxUser("x"), fxCalls("nope", `{}`)), MetaToolUnknownCall},
		{"bad parameters", fxRecord("r5", []record.Tool{badParams}, fxUser("x"), fxCalls("get_traffic_report", `{}`)), MetaToolBadParameters},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.Process(context.Background(), tt.in)
			if reason, ok := contract.ReasonOf(err); !ok || reason != tt.want {
				t.Errorf("err = %v, want reject %s", err, tt.want)
			}
		})
	}
}

func TestMetaToolRatios(t *testing.T) {
	tests := []struct {
		open, hard         float64
		wantOpen, wantHard [2]int // bounds out of 400
	}{
		{0.5, 0.5, [2]int{160, 240}, [2]int{160, 240}},
		{0, 1, [2]int{0, 0}, [2]int{400, 400}},
		{1, 0, [2]int{400, 400}, [2]int{0, 0}},
		{0.2, 0.8, [2]int{50, 110}, [2]int{290, 350}},
	}
	for _, tt := range tests {
		cfg := MetaToolConfig{OpenWorldRatio: mtPtr(tt.open), HardRatio: mtPtr(tt.hard)}
		st := mtBuild(t, cfg, mtEnv(mtLibrary(), &mtEmbedder{}))
		open, hard := 0, 0
		for i := range 100 {
			for _, in := range mtAll(fmt.Sprintf("mt%d", i)) {
				out := mtProcess(t, st, in)
				mtCheck(t, cfg, in, out)
				if out.Tag("world") == "open" {
					open++
				}
				if out.Tag("difficulty") == "hard" {
					hard++
				}
			}
		}
		if open < tt.wantOpen[0] || open > tt.wantOpen[1] || hard < tt.wantHard[0] || hard > tt.wantHard[1] {
			t.Errorf("open %.1f hard %.1f: got %d open, %d hard of 400", tt.open, tt.hard, open, hard)
		}
	}
}

// hard_min_calls: a record is hard when its dialogue has at least that many
// calls (seed 000 §3.3.1's split by the frequency of function calling),
// whatever hard_ratio draws; the other choices are drawn as without it.
func TestMetaToolHardMinCalls(t *testing.T) {
	// Calls per record: single 1, parallel 3 (one tool twice), multi 4, chat 0.
	tests := []struct {
		min  int
		hard []string // the records made hard, by ID suffix
	}{
		{1, []string{"single", "parallel", "multi"}},
		{3, []string{"parallel", "multi"}},
		{4, []string{"multi"}},
		{5, nil},
	}
	for _, tt := range tests {
		for _, ratio := range []float64{0, 1} {
			cfg := MetaToolConfig{HardRatio: mtPtr(ratio), HardMinCalls: tt.min, GetUserInput: true}
			drawn := MetaToolConfig{HardRatio: mtPtr(ratio), GetUserInput: true}
			st := mtBuild(t, cfg, mtEnv(mtLibrary(), &mtEmbedder{}))
			ref := mtBuild(t, drawn, mtEnv(mtLibrary(), &mtEmbedder{}))
			for i := range 10 {
				for _, in := range mtAll(fmt.Sprintf("mt%d", i)) {
					out := mtProcess(t, st, in)
					mtCheck(t, cfg, in, out)
					name := in.ID[strings.LastIndex(in.ID, ":")+1:]
					want := "simple"
					if slices.Contains(tt.hard, name) {
						want = "hard"
					}
					if got := out.Tag("difficulty"); got != want {
						t.Errorf("hard_min_calls %d, hard_ratio %v: %s is %s, want %s", tt.min, ratio, in.ID, got, want)
					}
					if w, r := out.Tag("world"), mtProcess(t, ref, in).Tag("world"); w != r {
						t.Errorf("hard_min_calls %d: %s world %s, %s without it", tt.min, in.ID, w, r)
					}
				}
			}
		}
	}
	// Hard records need the library, even with hard_ratio 0.
	if _, err := (&MetaToolConfig{HardRatio: mtPtr(0), HardMinCalls: 2}).build(&Env{}); err == nil {
		t.Error("hard_min_calls without a library must fail to build")
	}
}

// TestMetaToolDeterministic: same seed → same bytes; order and concurrency
// of processing do not matter; another seed changes choices.
func TestMetaToolDeterministic(t *testing.T) {
	cfg := MetaToolConfig{ResultMode: MetaToolRetrieved, GetUserInput: true}
	var ins []*record.Record
	for i := range 25 {
		ins = append(ins, mtAll(fmt.Sprintf("mt%d", i))...)
	}
	run := func(seed uint64, order []int, parallel bool) map[string]string {
		env := mtEnv(mtLibrary(), &mtEmbedder{})
		env.Seed = seed
		st := mtBuild(t, cfg, env)
		out := make(map[string]string)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, i := range order {
			do := func() {
				r := mtProcess(t, st, ins[i])
				b, _ := json.Marshal(r)
				mu.Lock()
				out[r.ID] = string(b)
				mu.Unlock()
			}
			if parallel {
				wg.Go(do)
			} else {
				do()
			}
		}
		wg.Wait()
		return out
	}
	fwd := make([]int, len(ins))
	rev := make([]int, len(ins))
	for i := range ins {
		fwd[i], rev[i] = i, len(ins)-1-i
	}
	a := run(42, fwd, false)
	for name, b := range map[string]map[string]string{"again": run(42, fwd, false), "reversed": run(42, rev, false), "parallel": run(42, rev, true)} {
		for id, want := range a {
			if b[id] != want {
				t.Errorf("%s: %s differs:\n%s\n%s", name, id, want, b[id])
			}
		}
	}
	c := run(43, fwd, false)
	diff := 0
	for id := range a {
		if a[id] != c[id] {
			diff++
		}
	}
	if diff == 0 {
		t.Error("seed 43 gives the same output as seed 42")
	}
	// The input is not modified.
	if ins[0].Tag("world") != "" || len(ins[0].Lineage) != 0 {
		t.Error("Process changed its input record")
	}
}

func TestMetaToolConfig(t *testing.T) {
	var c MetaToolConfig
	c.defaults()
	if *c.OpenWorldRatio != 0.5 || *c.HardRatio != 0.5 || c.MinTools != 5 || c.ResultMode != MetaToolOracle ||
		c.TopK != 5 || *c.Alpha != 0.5 || c.DistractorMaxSimilarity != 0.85 || c.ExistingRatio != 0 ||
		c.ResultFormat != MetaToolPaper || *c.TwinDescriptionSimilarity != 0.4 {
		t.Errorf("defaults: %+v", c)
	}
	if probs := c.validate(); len(probs) != 0 {
		t.Errorf("defaults invalid: %v", probs)
	}
	tests := []struct {
		cfg  MetaToolConfig
		want string
	}{
		{MetaToolConfig{OpenWorldRatio: mtPtr(1.5)}, "open_world_ratio: 1.5 is outside [0, 1]"},
		{MetaToolConfig{HardRatio: mtPtr(-0.1)}, "hard_ratio"},
		{MetaToolConfig{ExistingRatio: 2}, "existing_ratio"},
		{MetaToolConfig{Alpha: mtPtr(1.1)}, "alpha"},
		{MetaToolConfig{MinTools: -1}, "min_tools"},
		{MetaToolConfig{DistractorMaxSimilarity: 1.5}, "distractor_max_similarity"},
		{MetaToolConfig{ResultMode: "best"}, `result_mode: "best" is not one of oracle, retrieved`},
		{MetaToolConfig{ResultFormat: "toolace"}, `result_format: "toolace" is not one of paper, bare`},
		{MetaToolConfig{TwinDescriptionSimilarity: mtPtr(-0.5)}, "twin_description_similarity"},
		{MetaToolConfig{TopK: -2}, "top_k"},
		{MetaToolConfig{HardMinCalls: -1}, "hard_min_calls: must be at least 0"},
	}
	for _, tt := range tests {
		tt.cfg.defaults()
		probs := tt.cfg.validate()
		if len(probs) != 1 || !strings.Contains(probs[0], tt.want) {
			t.Errorf("%+v: %v, want one problem about %q", tt.cfg, probs, tt.want)
		}
	}
	// Explicit zero ratios are kept, not defaulted.
	z := MetaToolConfig{OpenWorldRatio: mtPtr(0), HardRatio: mtPtr(0)}
	z.defaults()
	if *z.OpenWorldRatio != 0 || *z.HardRatio != 0 {
		t.Errorf("zero ratios became %v %v", *z.OpenWorldRatio, *z.HardRatio)
	}
	// The library is only needed for hard records or retrieved results.
	if _, err := (&MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0), ResultMode: MetaToolOracle, TopK: 5, MinTools: 5, Alpha: mtPtr(0.5)}).build(&Env{}); err != nil {
		t.Errorf("oracle simple without library: %v", err)
	}
	if _, err := (&MetaToolConfig{HardRatio: mtPtr(0.5)}).build(&Env{}); err == nil {
		t.Error("hard records without a library must fail to build")
	}
}

// TestMetaToolYAML: the stage decodes from pipeline.yaml strictly.
func TestMetaToolYAML(t *testing.T) {
	src := []byte(`
sources:
  - path: x.jsonl
    format: openai
stages:
  - meta_tool:
      open_world_ratio: 0
      result_mode: retrieved
      get_user_input: true
  - noise:
      threshold: 0.95
`)
	p, err := Parse("pipeline.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	mt := p.Stages[0].MetaTool
	if mt == nil || *mt.OpenWorldRatio != 0 || mt.ResultMode != MetaToolRetrieved || !mt.GetUserInput || *mt.HardRatio != 0.5 {
		t.Errorf("meta_tool config %+v", mt)
	}
	if n := p.Stages[1].Noise; n == nil || n.Threshold != 0.95 || n.Attempts != 3 {
		t.Errorf("noise config %+v", n)
	}
	_, err = Parse("pipeline.yaml", []byte("sources:\n  - path: x.jsonl\n    format: openai\nstages:\n  - meta_tool:\n      worlds: 2\n"))
	if err == nil || !strings.Contains(err.Error(), "worlds") {
		t.Errorf("unknown key: %v", err)
	}
}

// mtBenchRecord is a realistic ToolACE-like record: six tools, a parallel
// turn and a follow-up turn.
func mtBenchRecord() *record.Record {
	return fxRecord("bench:0", []record.Tool{mtTraffic, mtStock, mtTime, mtWeather, mtNews, mtRecipe},
		fxUser("Compare Apple and Microsoft shares, and what time is it in New York?"),
		fxCalls("get_stock_price", `{"symbol":"AAPL"}`, "get_stock_price", `{"symbol":"MSFT"}`, "get_local_time", `{"city":"New York"}`),
		fxResults("get_stock_price", `{"price":191.2}`, "get_stock_price", `{"price":402.5}`, "get_local_time", `{"time":"09:41"}`),
		fxSay("Apple 191.2, Microsoft 402.5; 09:41 in New York."),
		fxUser("Any news on Apple? And the weather there?"),
		fxCalls("search_news", `{"topic":"Apple"}`, "get_weather", `{"location":"New York"}`),
		fxResults("search_news", `[{"title":"Apple ships"}]`, "get_weather", `{"temp":12}`),
		fxSay("Apple ships; 12 °C."))
}

// BenchmarkMetaTool processes one realistic record; the library (5,000
// tools) is embedded before the timer starts.
func BenchmarkMetaTool(b *testing.B) {
	lib := mtLibrary()
	for i := range 5000 {
		lib = append(lib, mtTool(fmt.Sprintf("tool_%d", i), fmt.Sprintf("Look up item %d in catalogue %d by code", i, i%97),
			fmt.Sprintf("code:Item code number %d", i%13), "limit:Maximum number of results"))
	}
	for _, c := range []struct {
		name string
		cfg  MetaToolConfig
	}{
		{"open-simple-oracle", MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}},
		{"open-hard-retrieved", MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(1), ResultMode: MetaToolRetrieved, GetUserInput: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := mtBuild(b, c.cfg, mtEnv(lib, &mtEmbedder{}))
			in := mtBenchRecord()
			mtProcess(b, st, in) // embeds the library
			for b.Loop() {
				if _, err := st.Process(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMetaToolRealData runs every variant over the demo rows (English and
// Chinese; ToolACE rows include parallel calls) and checks all invariants;
// then the offline noise stage rewrites every open-world record's
// meta_tool calls, all above the threshold under the offline embedder.
func TestMetaToolRealData(t *testing.T) {
	recs := sharedRecords(t, 500,
		dump{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		dump{"derived/toolace_format_glaive_toolcall_zh_demo.json", "toolace"},
		dump{"derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
		dump{"derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"})
	var lib []record.Tool
	parallel, repeated := 0, 0
	for _, r := range recs {
		lib = append(lib, r.Tools...)
		seen := map[string]bool{}
		for _, m := range r.Messages {
			if len(m.Calls) > 1 {
				parallel++
			}
			for _, c := range m.Calls {
				if seen[c.Name] {
					repeated++
				}
				seen[c.Name] = true
			}
		}
	}
	t.Logf("%d records, %d library tools, %d parallel call turns, %d repeated calls", len(recs), len(toollib.New(lib).Tools), parallel, repeated)
	emb := noiseOfflineEmbedder(t)
	noise := noiseBuild(t, NoiseConfig{}, noiseOffline(), emb)
	for _, c := range []struct {
		name string
		cfg  MetaToolConfig
	}{
		{"defaults", MetaToolConfig{}},
		{"open-hard-retrieved-get_user_input", MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(1), ResultMode: MetaToolRetrieved, GetUserInput: true}},
		{"simple-existing", MetaToolConfig{OpenWorldRatio: mtPtr(0.5), HardRatio: mtPtr(0), ExistingRatio: 0.3}},
	} {
		cfg := c.cfg
		st := mtBuild(t, cfg, mtEnv(lib, emb))
		counts := map[string]int{}
		calls, changed, rejects := 0, 0, map[string]int{}
		low := 1.0
		for _, in := range recs {
			outs, err := st.Process(context.Background(), in)
			if err != nil {
				reason, ok := contract.ReasonOf(err)
				if !ok {
					t.Fatalf("%s: %v", in.ID, err)
				}
				rejects[reason]++
				continue
			}
			out := outs[0]
			mtCheck(t, cfg, in, out)
			counts[out.Tag("world")+"/"+out.Tag("difficulty")+"/"+out.Tag("category")]++
			if out.Tag("category") != "function_missing" {
				continue
			}
			noisy := mtProcess(t, noise, out)
			sim, _ := strconv.ParseFloat(noisy.Tag("noise_similarity"), 64)
			low = min(low, sim)
			for i, m := range noisy.Messages {
				for j, c := range m.Calls {
					if c.Name == verify.MetaTool {
						calls++
						if string(c.Arguments) != string(out.Messages[i].Calls[j].Arguments) {
							changed++
						}
					}
				}
			}
		}
		t.Logf("%s: %v, rejects %v; noise changed %d of %d meta_tool calls, lowest similarity %.4f", c.name, counts, rejects, changed, calls, low)
		if len(rejects) > 0 {
			t.Errorf("real rows rejected: %v", rejects)
		}
		if calls > 0 && (low < 0.9 || changed*10 < calls*7) {
			t.Errorf("offline noise: %d of %d calls changed, lowest similarity %.4f", changed, calls, low)
		}
	}
}

// TestMetaToolTwinsRealData measures the near-twin rule on ../shared/data
// (LLaMA-Factory's glaive demos in English and Chinese and the derived raw
// dumps): how many library tools it keeps out per invoked tool beside the
// rules before it (same definition, Algorithm-1 similarity above
// distractor_max_similarity with the offline embedder), and that hard
// records never list a near-twin of an invoked tool, among them the pairs
// issue 17 found.
func TestMetaToolTwinsRealData(t *testing.T) {
	recs := sharedRecords(t, 1000,
		dump{"llamafactory/glaive_toolcall_en_demo.json", "sharegpt"},
		dump{"llamafactory/glaive_toolcall_zh_demo.json", "sharegpt"},
		dump{"derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		dump{"derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
		dump{"derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"})
	var all []record.Tool
	for _, r := range recs {
		all = append(all, r.Tools...)
	}
	lib := toollib.New(all)
	emb := noiseOfflineEmbedder(t)
	var cfg MetaToolConfig
	cfg.defaults()
	// The pool each invoked tool leaves, under the old rules and with the
	// near-twin rule added.
	qs := make([]toollib.Query, len(lib.Tools))
	for i, tl := range lib.Tools {
		qs[i], _ = toollib.QueryOf(tl)
	}
	vecs, err := toollib.Embed(t.Context(), emb, qs, 512)
	if err != nil {
		t.Fatal(err)
	}
	invoked := map[int]bool{}
	for _, r := range recs {
		for _, m := range r.Messages {
			for _, c := range m.Calls {
				if tl, ok := r.ToolByName(c.Name); ok {
					for _, i := range lib.Named(tl.Name) {
						if toollib.SameDefinition(lib.Tools[i], tl) {
							invoked[i] = true
						}
					}
				}
			}
		}
	}
	// Counted in distinct names: the library holds up to 14 definitions
	// under one name (generate_password), all kept out together.
	names := map[string]bool{}
	for _, tl := range lib.Tools {
		names[tl.Name] = true
	}
	oldOut, twinOnly, maxOut := 0, 0, 0
	pairs := map[string]bool{}
	for i := range invoked {
		old, twin := map[string]bool{}, map[string]bool{}
		for j, c := range lib.Tools {
			if c.Name == lib.Tools[i].Name {
				continue
			}
			if toollib.SameDefinition(lib.Tools[i], c) || toollib.Score(0.5, vecs[i], vecs[j]) > cfg.DistractorMaxSimilarity ||
				toollib.Score(0.5, vecs[j], vecs[i]) > cfg.DistractorMaxSimilarity {
				old[c.Name] = true
			} else if toollib.NearTwins(lib.Tools[i], c, lexicalTwinEmbedding, *cfg.TwinDescriptionSimilarity) {
				twin[c.Name] = true
			}
		}
		for name := range twin {
			if !old[name] {
				twinOnly++
				pairs[lib.Tools[i].Name+" ~ "+name] = true
			}
		}
		oldOut += len(old)
		maxOut = max(maxOut, len(old)+len(twin))
	}
	n := float64(len(invoked))
	t.Logf("%d records, library %d tools under %d names, %d invoked definitions: the old rules keep out %.2f names per invoked tool, the near-twin rule %.2f more (%d distinct pairs); at most %d of %d names (%.1f%%) kept out for one tool",
		len(recs), len(lib.Tools), len(names), len(invoked), float64(oldOut)/n, float64(twinOnly)/n, len(pairs), maxOut, len(names)-1, 100*float64(maxOut)/float64(len(names)-1))
	t.Logf("pairs only the near-twin rule catches: %v", slices.Sorted(maps.Keys(pairs)))
	if float64(maxOut) > 0.05*float64(len(names)) {
		t.Errorf("one invoked tool keeps %d of %d names out: the pool is gutted", maxOut, len(names))
	}
	// Hard records, open and closed: no listed tool is a near-twin of an
	// invoked one; the pairs of issue 17 in particular.
	known := [][2]string{{"calculate_loan_payment", "calculate_loan_repayment"}, {"generate_password", "generate_random_password"},
		{"search_recipe", "search_recipes"}, {"create_event", "create_calendar_event"}}
	hardCfg := MetaToolConfig{HardRatio: mtPtr(1), GetUserInput: true}
	st := mtBuild(t, hardCfg, mtEnv(all, emb))
	listed, rejects := 0, map[string]int{}
	for _, in := range recs {
		outs, err := st.Process(context.Background(), in)
		if err != nil {
			reason, ok := contract.ReasonOf(err)
			if !ok {
				t.Fatalf("%s: %v", in.ID, err)
			}
			rejects[reason]++
			continue
		}
		out := outs[0]
		for _, name := range mtInvokedNames(in) {
			inv, _ := in.ToolByName(name)
			for _, tl := range out.Tools {
				if tl.Name == name || tl.Name == verify.MetaTool || tl.Name == verify.GetUserInput {
					continue
				}
				listed++
				if toollib.NearTwins(inv, tl, lexicalTwinEmbedding, *cfg.TwinDescriptionSimilarity) {
					t.Errorf("%s: lists %s beside its near-twin %s", in.ID, tl.Name, name)
				}
				for _, k := range known {
					if name == k[0] && tl.Name == k[1] || name == k[1] && tl.Name == k[0] {
						t.Errorf("%s: lists %s beside %s", in.ID, tl.Name, name)
					}
				}
			}
		}
	}
	t.Logf("hard variants: %d tools listed beside invoked ones, rejects %v", listed, rejects)
	if len(rejects) > 0 {
		t.Errorf("real rows rejected: %v", rejects)
	}
}

// TestMetaToolStandInMemo holds the remembered stand-in answers
// (metaToolLibrary.standIn) to the tests they stand for: over the demo
// rows, with the default hard ratio, a stage that remembers writes the
// same records and rejects, first with its memo cold and then warm, as one
// that tests every pair.
func TestMetaToolStandInMemo(t *testing.T) {
	recs, lib := fullerBenchRecords(t)
	emb := noiseOfflineEmbedder(t)
	run := func(st Stage) []string {
		var out []string
		for _, in := range recs {
			outs, err := st.Process(context.Background(), in)
			if err != nil {
				out = append(out, in.ID+" "+err.Error())
				continue
			}
			b, err := json.Marshal(outs[0])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	build := func(budget int64) (Stage, *metaToolLibrary) {
		st := mtBuild(t, MetaToolConfig{}, mtEnv(lib, emb))
		ml, err := st.(*metaToolStage).library()
		if err != nil {
			t.Fatal(err)
		}
		ml.standInBudget = budget
		return st, ml
	}
	plain, _ := build(0)
	want := run(plain)
	memo, ml := build(standInBudget)
	cold := run(memo)
	if ml.standInUsed.Load() == 0 {
		t.Fatal("no invoked tool got a row: the test tests nothing")
	}
	warm := run(memo)
	for i := range want {
		if cold[i] != want[i] || warm[i] != want[i] {
			t.Fatalf("record %d differs with the memo:\nwant %s\ncold %s\nwarm %s", i, want[i], cold[i], warm[i])
		}
	}
}

// TestMetaToolSimpleTakesLibrary: a stage whose records need no library
// (no hard records, oracle results) takes queries and encodings from the
// run's library when there is one, with the same records as without it.
func TestMetaToolSimpleTakesLibrary(t *testing.T) {
	recs, lib := fullerBenchRecords(t)
	cfg := MetaToolConfig{OpenWorldRatio: mtPtr(0.7), HardRatio: mtPtr(0)}
	with := mtBuild(t, cfg, mtEnv(lib, &mtEmbedder{}))
	noLib := mtEnv(lib, &mtEmbedder{})
	noLib.Library = nil
	without := mtBuild(t, cfg, noLib)
	for _, in := range recs {
		a, errA := with.Process(context.Background(), in)
		b, errB := without.Process(context.Background(), in)
		if (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() {
			t.Fatalf("%s: errors differ: %v / %v", in.ID, errA, errB)
		}
		if errA != nil {
			continue
		}
		ja, _ := json.Marshal(a[0])
		jb, _ := json.Marshal(b[0])
		if string(ja) != string(jb) {
			t.Fatalf("%s differs with the library:\n%s\n%s", in.ID, ja, jb)
		}
	}
	if with.(*metaToolStage).lib.Load() == nil {
		t.Error("the library was not taken")
	}
}

// The turns inserted for a lone call of a library tool (oracle results,
// paper envelope) are the library's lists, shared by every record that
// retrieves the tool and of their exact length; their text is checked
// against the records made without the library by
// TestMetaToolSimpleTakesLibrary. A simple closed-world record that
// calls every tool it lists keeps its list, and a simple open-world one
// lists meta_tool alone, in the stage's one list. Allocations a record:
// the copy (record and list) and its tags, and in the open world its
// messages.
func TestMetaToolSharedLists(t *testing.T) {
	ctx := context.Background()
	open := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}, mtEnv(mtLibrary(), nil))
	a, b := mtProcess(t, open, mtSingle("mt:a")), mtProcess(t, open, mtSingle("mt:b"))
	calls, results := a.Messages[1].Calls, a.Messages[2].Results
	if calls[0].Name != verify.MetaTool || &calls[0] != &b.Messages[1].Calls[0] || &results[0] != &b.Messages[2].Results[0] {
		t.Errorf("the inserted turns' lists are not the library's: %+v", a.Messages[1:3])
	}
	if cap(calls) != 1 || cap(results) != 1 {
		t.Errorf("inserted lists have room: cap %d, %d", cap(calls), cap(results))
	}
	if len(a.Tools) != 1 || a.Tools[0].Name != verify.MetaTool || &a.Tools[0] != &b.Tools[0] || cap(a.Tools) != 1 {
		t.Errorf("open world simple tools %+v: not the stage's list of meta_tool alone", a.Tools)
	}
	in := mtSingle("mt:allocs")
	if n := testing.AllocsPerRun(100, func() { open.Process(ctx, in) }); n != 3 && !raceDetector {
		t.Errorf("open world: %v allocations a record, want 3", n)
	}

	closed := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(0), HardRatio: mtPtr(0)}, mtEnv(mtLibrary(), nil))
	in = fxRecord("mt:all-called", []record.Tool{mtTraffic}, mtSingle("").Messages...)
	out := mtProcess(t, closed, in)
	if &out.Tools[0] != &in.Tools[0] || cap(out.Tools) != len(out.Tools) {
		t.Errorf("closed world calling every listed tool: tools not the record's, clipped")
	}
	if n := testing.AllocsPerRun(100, func() { closed.Process(ctx, in) }); n != 2 && !raceDetector {
		t.Errorf("closed world: %v allocations a record, want 2", n)
	}
	// A tool listed and not called leaves the list new.
	if out := mtProcess(t, closed, mtSingle("mt:unused")); len(out.Tools) != 1 || out.Tools[0].Name != mtTraffic.Name {
		t.Errorf("closed world tools %+v, want get_traffic_report alone", out.Tools)
	}
}

// TestMetaToolDropStandInsAsTested: dropStandIns, which takes a record's
// unused tool with a library definition through standsIn (remembered per
// pair), keeps the unused tools that testing each one's own definition,
// twin and vectors against every invoked tool keeps, cold and warm, with
// the demo rows' tools, each record's unused tools being the others.
func TestMetaToolDropStandInsAsTested(t *testing.T) {
	recs, lib := fullerBenchRecords(t)
	st := mtBuild(t, MetaToolConfig{}, mtEnv(lib, noiseOfflineEmbedder(t))).(*metaToolStage)
	ctx := context.Background()
	ml, err := st.library()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := ml.index(ctx, st.env.Embedder)
	if err != nil {
		t.Fatal(err)
	}
	// tested is dropStandIns by its definition, tool by tool.
	tested := func(p *metaToolPlan, unused []int) []int {
		var kept []int
		for _, i := range unused {
			tl := p.in.Tools[i]
			tw := toollib.NewTwin(tl)
			if st.twinOfInvoked(p, tl, &tw) {
				continue
			}
			if q, err := toollib.QueryOf(tl); err == nil {
				vs, err := toollib.Embed(ctx, st.env.Embedder, []toollib.Query{q}, metaToolEmbedBatch)
				if err != nil {
					t.Fatal(err)
				}
				if st.likeInvoked(p, vs[0]) {
					continue
				}
			}
			kept = append(kept, i)
		}
		return kept
	}
	dropped, compared := 0, 0
	for round := range 2 {
		for _, in := range recs {
			var plan metaToolPlan
			p := &plan
			p.start(in, st.seed)
			if st.collect(p) != nil || len(p.invoked) == 0 {
				p.release()
				continue
			}
			p.hard, p.open = true, true
			var unused []int
			var names nameSet
			for i := range in.Tools {
				if names.add(in.Tools[i].Name) && p.invokedIndex(in.Tools[i].Name) < 0 {
					unused = append(unused, i)
				}
			}
			if len(unused) == 0 || st.invokedVectors(ctx, p, ml, ix) != nil {
				p.release()
				continue
			}
			want := tested(p, unused)
			got, err := st.dropStandIns(ctx, p, ml, ix, slices.Clone(unused))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, %s: dropStandIns kept %v, testing each tool keeps %v of %v", round, in.ID, got, want, unused)
			}
			compared += len(unused)
			dropped += len(unused) - len(want)
			p.release()
		}
	}
	if dropped == 0 || dropped == compared {
		t.Fatalf("%d of %d unused tools dropped: the test tells nothing", dropped, compared)
	}
}
