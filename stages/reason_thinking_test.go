package stages

import (
	"context"
	"github.com/augmentdata/augment/pycall"
	"github.com/augmentdata/augment/stages/contract"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
	"github.com/augmentdata/augment/stages/record"
)

// fakeTeacher serves rules from fakellm through the real llm layer (a fresh
// cache per call), so answers carry reasoning_content as a vLLM reasoning
// parser returns it. It returns the teacher and the fake for its counters.
func fakeTeacher(t *testing.T, rules []fakellm.Rule) (*llm.Teacher, *fakellm.Server) {
	t.Helper()
	fake, err := fakellm.New(fakellm.Config{Script: rules})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	teacher, err := llm.NewTeacher(llm.Config{
		Provider: llm.ProviderOpenAI, Model: "fake-model",
		Endpoints: []llm.Endpoint{{BaseURL: hs.URL + "/v1", MaxInFlight: 4}},
	}, llm.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { teacher.Close() })
	return teacher, fake
}

// source thinking stores the teacher's thinking (reasoning_content), never
// its answer, under the same checks; source answer (the default) is
// unchanged and never takes the thinking.
func TestReasonSourceThinking(t *testing.T) {
	const (
		answer   = `You asked about Miami. To help you, I will call get_traffic_report because it reports traffic. I will set location to "Miami, Florida".`
		thinking = `The user is heading out in Miami, so get_traffic_report fits; I will set location to "Miami, Florida".`
	)
	tests := []struct {
		name    string
		source  string
		rule    fakellm.Rule
		want    string // stored reasoning; "" = rejected
		reason  string
		answers int64 // chat requests the server saw
	}{
		{"answer (default)", "", fakellm.Rule{Regexp: "(?s)^.", Answer: answer, Reasoning: thinking}, answer, "", 1},
		{"thinking", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: answer, Reasoning: thinking}, thinking, "", 1},
		{"thinking absent: never the answer", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: answer}, "", ReasonNoThinking, 3},
		{"thinking misses the function", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: answer, Reasoning: "I will look up the traffic."}, "", ReasonMissingFunction, 3},
		{"thinking invents a parameter", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: answer, Reasoning: `get_traffic_report(radius=2)`}, "", ReasonInventedParameter, 3},
		{"thinking too long", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: answer, Reasoning: "get_traffic_report " + strings.Repeat("y", 700)}, "", ReasonTooLong, 3},
		// A server without a reasoning parser leaves the thinking in the
		// answer: it is taken out (llm.SplitThinking) and is the thinking.
		{"inline thinking", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: "<think>\n" + thinking + "\n</think>\n\n" + answer}, thinking, "", 1},
		{"inline thinking, R1 form", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Answer: thinking + "\n</think>\n\n" + answer}, thinking, "", 1},
		// Thinking and no answer after it: the model did not finish.
		{"thinking without an answer", SourceThinking, fakellm.Rule{Regexp: "(?s)^.", Reasoning: thinking}, "", llm.ReasonThinkingOnly, 3},
		{"inline thinking is never the answer", "", fakellm.Rule{Regexp: "(?s)^.", Answer: thinking + "\n</think>\n\n" + answer}, answer, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			teacher, fake := fakeTeacher(t, []fakellm.Rule{tt.rule})
			cfg := ReasonConfig{Source: tt.source}
			cfg.defaults()
			if probs := cfg.validate(); len(probs) > 0 {
				t.Fatal(probs)
			}
			env := fxEnv("reason", teacher.Stage("reason"))
			env.Provider = llm.ProviderOpenAI
			st, err := cfg.build(env)
			if err != nil {
				t.Fatal(err)
			}
			out, err := st.Process(context.Background(), fxSingle())
			if got := fake.Counters().Chat; got != tt.answers {
				t.Errorf("server saw %d requests, want %d", got, tt.answers)
			}
			if tt.want == "" {
				if got, _ := contract.ReasonOf(err); got != tt.reason {
					t.Fatalf("reject reason %q (%v), want %q", got, err, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out[0].Messages[1].Reasoning; got != tt.want {
				t.Errorf("reasoning %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReasonSourceConfig(t *testing.T) {
	cfg := ReasonConfig{Source: "answers"}
	cfg.defaults()
	if probs := cfg.validate(); len(probs) != 1 || !strings.Contains(probs[0], "source") {
		t.Errorf("problems %q", probs)
	}
	cfg = ReasonConfig{Source: SourceThinking}
	cfg.defaults()
	if _, err := cfg.build(fxEnv("reason", fxOffline())); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Errorf("source thinking under the offline provider: %v", err)
	}
}

// tool_dc trace thinking: the turn's reasoning is the Retry answer's
// thinking, checked like reason's; an answer without thinking is never
// used as one, and the default trace is unchanged.
func TestToolDCTraceThinking(t *testing.T) {
	const thinking = `Paris is named, and get_weather takes city, so I call get_weather with city "Paris".`
	answer := `[get_weather(city="Paris")]`
	tests := []struct {
		name     string
		trace    string
		rule     fakellm.Rule
		attempts int
		want     string // "" = rejected with reason
		reason   string
	}{
		{"trace answer keeps the template", "", fakellm.Rule{Contains: "weather in Paris", Answer: answer, Reasoning: thinking}, 0, "1. Candidate Selection:", ""},
		{"trace thinking", SourceThinking, fakellm.Rule{Contains: "weather in Paris", Answer: answer, Reasoning: thinking}, 0, thinking, ""},
		{"no thinking", SourceThinking, fakellm.Rule{Contains: "weather in Paris", Answer: answer}, 1, "", ReasonNoThinking},
		{"thinking misses the function", SourceThinking, fakellm.Rule{Contains: "weather in Paris", Answer: answer, Reasoning: "It is about Paris."}, 1, "", ReasonMissingFunction},
		{"thinking invents a parameter", SourceThinking, fakellm.Rule{Contains: "weather in Paris", Answer: answer, Reasoning: `get_weather(town="Paris")`}, 1, "", ReasonInventedParameter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			teacher, fake := fakeTeacher(t, []fakellm.Rule{tt.rule})
			env := tdcEnv(teacher.Stage("tool_dc"), tdcLibrary(100), teacher.Capacity())
			env.Provider = llm.ProviderOpenAI
			st := tdcBuild(t, ToolDCConfig{Grouping: ToolDCAnchor, Trace: tt.trace, Attempts: tt.attempts}, env)
			rec := tdcRecord("xlam:42", "What is the weather in Paris right now?", []record.Tool{tdcWeather, tdcStock},
				tdcCall("get_weather", `{"city":"Paris"}`))
			out, err := st.Process(context.Background(), rec)
			if tt.want == "" {
				if got, _ := contract.ReasonOf(err); got != tt.reason {
					t.Fatalf("reject reason %q (%v), want %q", got, err, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fake.Counters().Chat; got != 7 {
				t.Errorf("server saw %d requests, want K + 2 = 7", got)
			}
			turn := out[0].Messages[1]
			if !strings.HasPrefix(turn.Reasoning, tt.want) {
				t.Errorf("reasoning %q, want it to start with %q", turn.Reasoning, tt.want)
			}
			if tt.trace == SourceThinking && (out[0].System != "" || out[0].Tag("tool_dc") != "thinking") {
				t.Errorf("system %q, tag %q: the trace template was used", out[0].System, out[0].Tag("tool_dc"))
			}
			if pycall.Print(turn.Calls) != answer {
				t.Errorf("calls %s", pycall.Print(turn.Calls))
			}
		})
	}
}

func TestToolDCTraceConfig(t *testing.T) {
	for _, tt := range []struct {
		cfg  ToolDCConfig
		want string
	}{
		{ToolDCConfig{Trace: "thoughts"}, "trace:"},
		{ToolDCConfig{MaxChars: 100}, "max_chars: applies"},
		{ToolDCConfig{Trace: SourceThinking, MaxChars: -1}, "max_chars: must"},
	} {
		tt.cfg.defaults()
		if probs := tt.cfg.validate(); len(probs) != 1 || !strings.HasPrefix(probs[0], tt.want) {
			t.Errorf("%+v: problems %q, want %q", tt.cfg, probs, tt.want)
		}
	}
	cfg := ToolDCConfig{Trace: SourceThinking}
	cfg.defaults()
	if cfg.MaxChars != toolDCDefaultThinkingChars {
		t.Errorf("default max_chars %d", cfg.MaxChars)
	}
	if _, err := cfg.build(tdcEnv(fxOffline(), tdcLibrary(10), 2)); err == nil || !strings.Contains(err.Error(), "offline") {
		t.Errorf("trace thinking under the offline provider: %v", err)
	}
}

// The reason prompts share all that can be shared, in both styles: two
// records with different tools share the instructions up to their tool
// lists, and two turns of one record share everything up to the later
// turn's own part (instructions, tools, the dialogue before the earlier
// turn). This is the ceiling llm.prefix_share can reach for a stage whose
// records each bring their own tools (see the mt-llama figures in the
// report of issue 10).
func TestReasonPromptPrefixOrder(t *testing.T) {
	for _, style := range []string{ReasonStyleMetaTool, ReasonStyleMediaTek} {
		sc := &fxScript{}
		st := buildReason(t, ReasonConfig{Style: style}, sc)
		for _, r := range []*record.Record{fxSingle(), fxMultiTurn()} {
			if _, err := st.Process(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		prompts := map[string]string{}
		for _, req := range sc.reqs {
			var b strings.Builder
			for _, m := range req.Messages {
				b.WriteString(m.Role + "\n" + m.Content + "\x00")
			}
			prompts[req.Slot] = b.String()
		}
		single, turn1, turn5 := prompts["fx:single/turn1"], prompts["fx:multi/turn1"], prompts["fx:multi/turn5"]
		if single == "" || turn1 == "" || turn5 == "" {
			t.Fatalf("%s: prompts %v", style, maps.Keys(prompts))
		}
		toolsAt := strings.Index(single, `"name": "`+fxSingle().Tools[0].Name+`"`)
		if toolsAt < 500 {
			t.Fatalf("%s: the tools start at %d", style, toolsAt)
		}
		if got := commonPrefix(single, turn1); got < toolsAt-8 {
			t.Errorf("%s: records share %d bytes, want the %d bytes of instructions before the tools", style, got, toolsAt)
		}
		// Turn 5 repeats turn 1's tools and the user message before it.
		history := strings.Index(turn1, "What's the weather in Paris?") + len("What's the weather in Paris?")
		if got := commonPrefix(turn1, turn5); got < history {
			t.Errorf("%s: turns of one record share %d bytes, want at least the %d up to the first user message", style, got, history)
		}
	}
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
