package stages

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
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
				if got, _ := rejectReason(err); got != tt.reason {
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
