package llm

import (
	"context"
	"errors"
	"fmt"
	"github.com/augmentdata/augment/stages/contract"
	"strings"
	"testing"
)

type reasonErr struct{ reason string }

func (e reasonErr) Error() string        { return "bad: " + e.reason }
func (e reasonErr) RejectReason() string { return e.reason }

func TestAsk(t *testing.T) {
	type call struct {
		attempt   int
		maxTokens int
		msgs      int
	}
	parseInt := func(s string) (int, error) {
		var n int
		if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
			return 0, fmt.Errorf("not a number: %q", s)
		}
		return n, nil
	}
	tests := []struct {
		name     string
		answers  []Response
		attempts int
		parse    func(string) (int, error)
		want     int
		reason   string // "" = success
		detail   string // in the error, when set
		calls    []call
	}{
		{
			name:     "first answer parses",
			answers:  []Response{{Content: "42", FinishReason: "stop"}},
			attempts: 3, parse: parseInt, want: 42,
			calls: []call{{0, 100, 1}},
		},
		{
			name:     "truncated then fine: same messages, next attempt, doubled limit",
			answers:  []Response{{Content: "4", FinishReason: "length"}, {Content: "42", FinishReason: "stop"}},
			attempts: 3, parse: parseInt, want: 42,
			calls: []call{{0, 100, 1}, {1, 200, 1}},
		},
		{
			name:     "invalid then fine: correction appended",
			answers:  []Response{{Content: "forty-two", FinishReason: "stop"}, {Content: "42", FinishReason: "stop"}},
			attempts: 3, parse: parseInt, want: 42,
			calls: []call{{0, 100, 1}, {1, 100, 3}},
		},
		{
			name:     "always truncated",
			answers:  []Response{{FinishReason: "length"}, {FinishReason: "length"}},
			attempts: 2, parse: parseInt, reason: "llm_truncated",
			calls: []call{{0, 100, 1}, {1, 200, 1}},
		},
		{
			name:     "always invalid",
			answers:  []Response{{Content: "x"}, {Content: "y"}, {Content: "z"}},
			attempts: 3, parse: parseInt, reason: "llm_invalid_answer",
			// The last problem, then what the earlier attempts got wrong.
			detail: `not a number: "z" (earlier: attempt 1: not a number: "x"; attempt 2: not a number: "y")`,
			calls:  []call{{0, 100, 1}, {1, 100, 3}, {2, 100, 5}},
		},
		{
			name:     "parser reason wins",
			answers:  []Response{{Content: "x"}},
			attempts: 1, parse: func(string) (int, error) { return 0, reasonErr{"translate_enum_changed"} },
			reason: "translate_enum_changed",
			calls:  []call{{0, 100, 1}},
		},
		{
			name:     "offline answers are not re-asked",
			answers:  []Response{{Content: "x", Provider: ProviderOffline}},
			attempts: 3, parse: parseInt, reason: "llm_invalid_answer",
			calls: []call{{0, 100, 1}},
		},
		{
			name:     "zero attempts still asks once",
			answers:  []Response{{Content: "7"}},
			attempts: 0, parse: parseInt, want: 7,
			calls: []call{{0, 100, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []call
			var lastMsgs []Message
			c := ClientFunc(func(_ context.Context, req Request) (Response, error) {
				got = append(got, call{req.Attempt, req.MaxTokens, len(req.Messages)})
				lastMsgs = req.Messages
				return tt.answers[len(got)-1], nil
			})
			req := Request{Stage: "s@1", Slot: "r1", MaxTokens: 100, Messages: []Message{{Role: "user", Content: "the answer?"}}}
			v, _, err := Ask(context.Background(), c, req, tt.attempts, tt.parse)
			if fmt.Sprint(got) != fmt.Sprint(tt.calls) {
				t.Errorf("calls (attempt, max_tokens, messages) = %v, want %v", got, tt.calls)
			}
			if tt.reason == "" {
				if err != nil || v != tt.want {
					t.Fatalf("got %v, %v; want %v", v, err, tt.want)
				}
				return
			}
			var ae *AnswerError
			if !errors.As(err, &ae) || ae.RejectReason() != tt.reason {
				t.Fatalf("want AnswerError %q, got %v", tt.reason, err)
			}
			if ae.Slot != "r1" || ae.Stage != "s@1" {
				t.Errorf("error lost the request's identity: %+v", ae)
			}
			if !strings.HasSuffix(err.Error(), tt.detail) {
				t.Errorf("error %q, want it to end with %q", err, tt.detail)
			}
			if len(lastMsgs) > 1 {
				if lastMsgs[len(lastMsgs)-2].Role != "assistant" || !strings.Contains(lastMsgs[len(lastMsgs)-1].Content, "could not be used") {
					t.Errorf("correction messages: %+v", lastMsgs)
				}
			}
		})
	}
}

func TestAskDoesNotMutateCallerMessages(t *testing.T) {
	msgs := make([]Message, 1, 8) // spare capacity an append could scribble into
	msgs[0] = Message{Role: "user", Content: "q"}
	n := 0
	c := ClientFunc(func(_ context.Context, req Request) (Response, error) {
		n++
		if n == 1 {
			return Response{Content: "bad"}, nil
		}
		return Response{Content: "ok"}, nil
	})
	_, _, err := Ask(context.Background(), c, Request{Messages: msgs}, 2, func(s string) (string, error) {
		if s != "ok" {
			return "", errors.New("want ok")
		}
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := msgs[:2]; got[1] != (Message{}) {
		t.Fatalf("Ask wrote into the caller's backing array: %+v", got)
	}
}

func TestAskPassesClientErrorsThrough(t *testing.T) {
	fatal := &FatalError{Reason: "llm_budget_reached", Msg: "budget"}
	transport := &AnswerError{Reason: "llm_error_timeout"}
	for _, want := range []error{fatal, transport, context.Canceled} {
		c := ClientFunc(func(context.Context, Request) (Response, error) { return Response{}, want })
		_, _, err := Ask(context.Background(), c, Request{}, 3, func(s string) (string, error) { return s, nil })
		if !errors.Is(err, want) {
			t.Errorf("got %v, want %v", err, want)
		}
	}
	if !IsFatal(fatal) || IsFatal(transport) || IsFatal(fmt.Errorf("wrapped: %w", transport)) {
		t.Error("IsFatal misclassifies")
	}
	if !IsFatal(fmt.Errorf("shard 3: %w", fatal)) {
		t.Error("IsFatal must see through wrapping")
	}
	var rr contract.Rejecter
	if errors.As(fatal, &rr) {
		t.Error("a fatal error must not carry a reject reason, or the runner would reject a record instead of stopping")
	}
}

func TestOfflineTeacher(t *testing.T) {
	teacher, err := NewTeacher(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	if teacher.Capacity() < 1 || teacher.Provider() != ProviderOffline || teacher.Model() != ProviderOffline {
		t.Fatalf("capacity %d provider %q model %q", teacher.Capacity(), teacher.Provider(), teacher.Model())
	}
	s := teacher.Stage("noise")
	resp, err := s.Complete(context.Background(), Request{Offline: func() (string, error) { return "rule-based answer", nil }})
	if err != nil || resp.Content != "rule-based answer" || resp.Provider != ProviderOffline || resp.FinishReason != "stop" {
		t.Fatalf("got %+v, %v", resp, err)
	}

	_, err = s.Complete(context.Background(), Request{Offline: func() (string, error) { return "", reasonErr{"noise_no_candidate"} }})
	var rr contract.Rejecter
	if !errors.As(err, &rr) || rr.RejectReason() != "noise_no_candidate" || IsFatal(err) {
		t.Fatalf("stand-in reject must pass through: %v", err)
	}
	_, err = s.Complete(context.Background(), Request{Offline: func() (string, error) { return "", errors.New("boom") }})
	if !errors.As(err, &rr) || rr.RejectReason() != "llm_offline_failed" {
		t.Fatalf("plain stand-in error: %v", err)
	}

	tr := teacher.Stage("translate")
	_, err = tr.Complete(context.Background(), Request{Messages: []Message{{Role: "user", Content: "翻譯"}}})
	if !IsFatal(err) {
		t.Fatalf("nil Offline must be fatal, got %v", err)
	}
	if want := "stage translate needs a real teacher model; set teacher.provider"; !strings.Contains(err.Error(), want) {
		t.Fatalf("message %q lacks %q", err, want)
	}
	if errors.As(err, &rr) {
		t.Fatal("the offline-unsupported error must not be a per-record reject")
	}
	if _, err := s.Complete(context.Background(), Request{Offline: func() (string, error) { return "still fine", nil }}); err != nil {
		t.Fatalf("a stage without a stand-in must not stop the others: %v", err)
	}
	st := s.Stats()
	if st.Requests != 4 || st.Failed != 2 || st.Sent != 0 || st.Provider != ProviderOffline {
		t.Fatalf("stats: %+v", st)
	}
}

func TestNewTeacherAPIKey(t *testing.T) {
	cfg := Config{Provider: ProviderOpenAI, Model: "m", APIKeyEnv: "AUGMENT_TEST_KEY", Endpoints: []Endpoint{{BaseURL: "http://127.0.0.1:1/v1"}}}
	_, err := NewTeacher(cfg, Options{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "teacher.api_key_env: environment variable AUGMENT_TEST_KEY") {
		t.Fatalf("missing key: %v", err)
	}
	_, err = NewTeacher(Config{Provider: "nope"}, Options{})
	if err == nil || !strings.Contains(err.Error(), "teacher.provider") {
		t.Fatalf("invalid config: %v", err)
	}
}
