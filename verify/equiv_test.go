package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
)

func TestEquivalentRules(t *testing.T) {
	// Decided without a request: the client fails the test if asked.
	never := llm.ClientFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		t.Errorf("unexpected request %s", req.Messages[len(req.Messages)-1].Content)
		return llm.Response{}, errors.New("unexpected")
	})
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{`"New York"`, `"New York"`, true},
		{`"New York"`, `"  new   york "`, true},
		{`"紐約"`, `"纽约"`, true},       // Traditional vs Simplified
		{`"臺北市"`, `"台北市"`, true},     // variant characters
		{`"ＮＹ１２３"`, `"NY123"`, true}, // full-width ASCII
		{`3`, `3.0`, true},
		{`3`, `"3"`, true},
		{`true`, `"TRUE"`, true},
		{`["a","B"]`, `["A","b"]`, true},
		{`{"x":"紐約","n":1}`, `{"n":1.0,"x":"纽约"}`, true},
		{`3`, `4`, false},
		{`"3"`, `4`, false},
		{`["a"]`, `["a","b"]`, false},
		{`{"x":1}`, `{"y":1}`, false},
		{`{"x":"a","n":1}`, `{"x":"b","n":2}`, false}, // differs beyond strings
		{`true`, `"yes"`, false},
		{`null`, `""`, false},
		{`{"city":`, `{"city":`, true}, // invalid JSON: byte-identical only
		{`{"city":`, `{"city": `, true},
		{`{"city":`, `{"town":`, false},
	} {
		got, err := Equivalent(context.Background(), LLMEnv{Client: never}, "p", json.RawMessage(tt.a), json.RawMessage(tt.b))
		if err != nil || got != tt.want {
			t.Errorf("Equivalent(%s, %s) = %v, %v; want %v", tt.a, tt.b, got, err, tt.want)
		}
	}
}

func TestEquivalentJudge(t *testing.T) {
	ctx := context.Background()
	s := &script{answers: []string{`{"is_equal": true, "reason": "New York in Chinese"}`}}
	env := LLMEnv{Client: s, Stage: "translate", Slot: "translate/x:1/m2/c0"}
	got, err := Equivalent(ctx, env, "city", json.RawMessage(`"New York"`), json.RawMessage(`"紐約"`))
	if err != nil || !got {
		t.Fatalf("got %v, %v", got, err)
	}
	req := s.reqs[0]
	if req.Stage != "equiv_value@1" || req.Slot != "translate/x:1/m2/c0/equiv/city" || req.Offline == nil {
		t.Errorf("request %+v", req)
	}
	if p := req.Messages[len(req.Messages)-1].Content; !strings.Contains(p, `"city"`) || !strings.Contains(p, `"New York"`) || !strings.Contains(p, `"紐約"`) {
		t.Errorf("prompt:\n%s", p)
	}

	s = &script{answers: []string{`{"is_equal": false, "reason": "different cities"}`}}
	if got, err := Equivalent(ctx, LLMEnv{Client: s}, "city", json.RawMessage(`"Paris"`), json.RawMessage(`"倫敦"`)); err != nil || got {
		t.Errorf("got %v, %v", got, err)
	}

	// Offline the stand-in is the rules alone: different strings stay different.
	if got, err := Equivalent(ctx, LLMEnv{Client: offlineClient}, "city", json.RawMessage(`"New York"`), json.RawMessage(`"紐約"`)); err != nil || got {
		t.Errorf("offline: %v, %v", got, err)
	}
	// No client: rules alone.
	if got, err := Equivalent(ctx, LLMEnv{}, "city", json.RawMessage(`"New York"`), json.RawMessage(`"紐約"`)); err != nil || got {
		t.Errorf("no client: %v, %v", got, err)
	}

	// Unreadable answers: an AnswerError that rejects the record.
	s = &script{answers: []string{"Yes, they are the same."}}
	_, err = Equivalent(ctx, LLMEnv{Client: s, Attempts: 2}, "city", json.RawMessage(`"New York"`), json.RawMessage(`"紐約"`))
	var ae *llm.AnswerError
	if !errors.As(err, &ae) || ae.RejectReason() != ReasonUnparseable || len(s.reqs) != 2 {
		t.Errorf("got %v after %d requests", err, len(s.reqs))
	}
}

func BenchmarkEquivalentRules(b *testing.B) {
	x, y := json.RawMessage(`{"city":"紐約市","days":3}`), json.RawMessage(`{"days":3.0,"city":"纽约市"}`)
	for b.Loop() {
		if ok, _ := Equivalent(context.Background(), LLMEnv{}, "p", x, y); !ok {
			b.Fatal("not equivalent")
		}
	}
}

// The call-level functions are used from concurrent stage workers.
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				c := call("get_weather", fmt.Sprintf(`{"city":"City %d","days":%d}`, w, i%10+1))
				if ps := CheckCall(weatherTools, c); ps != nil {
					t.Error(ps)
				}
				if m := MatchCalls(weatherTools, []record.Call{c}, []record.Call{c}); !m.OK {
					t.Error(m.Problems)
				}
				if ok, err := Equivalent(context.Background(), LLMEnv{}, "city", json.RawMessage(`"紐約"`), json.RawMessage(`"纽约"`)); !ok || err != nil {
					t.Error(ok, err)
				}
			}
		})
	}
	wg.Wait()
}
