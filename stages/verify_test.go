package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

func buildVerify(t testing.TB, cfg VerifyConfig, teacher llm.Client) countedVerify {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(fxEnv("verify", teacher))
	if err != nil {
		t.Fatal(err)
	}
	return countedVerify{st.(*verifyStage), &counters{m: map[string]int64{}}}
}

// countedVerify runs a verify stage with its own shard counters, as the
// runner does, so tests can read what the stage counted.
type countedVerify struct {
	*verifyStage
	c *counters
}

func (s countedVerify) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	return s.verifyStage.Process(context.WithValue(ctx, countersKey{}, s.c), r)
}

func (s countedVerify) Counters() map[string]int64 {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return maps.Clone(s.c.m)
}

// fxBroken has problems for three checkers: a call to an unlisted function
// (calls_resolved), get_weather without its required location and with an
// unknown parameter (args_schema), and one result for two calls (roles).
func fxBroken() *record.Record {
	return fxRecord("fx:broken", []record.Tool{fxWeather},
		fxUser("Weather in Paris and my horoscope?"),
		fxCalls("get_weather", `{"cty":"Paris"}`, "horoscope", `{"sign":"leo"}`),
		fxResults("get_weather", `{"temp":18}`),
		fxSay("18 °C in Paris."))
}

// expectedProblems runs the named rule checkers directly.
func expectedProblems(r *record.Record, names ...string) (all []verify.Problem, failing []string) {
	for _, n := range names {
		ch, _ := verify.Lookup(n)
		if ps := ch.Check(r); len(ps) > 0 {
			failing = append(failing, n)
			all = append(all, ps...)
		}
	}
	return all, failing
}

func TestVerifyRejectsWithEveryProblem(t *testing.T) {
	for _, order := range [][]string{
		{"roles", "calls_resolved", "args_schema"},
		{"args_schema", "roles", "calls_resolved"},
		{"meta_tool_shape", "calls_resolved", "args_schema", "roles"},
	} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			st := buildVerify(t, VerifyConfig{Checks: order}, nil)
			want, failing := expectedProblems(fxBroken(), order...)
			if len(failing) != 3 {
				t.Fatalf("fixture: failing checks %v, want roles, calls_resolved and args_schema", failing)
			}
			_, err := st.Process(context.Background(), fxBroken())
			var rej *contract.Reject
			if !errors.As(err, &rej) {
				t.Fatalf("got %v, want a reject", err)
			}
			if rej.Reason != "verify:"+failing[0] {
				t.Errorf("reason %q, want verify:%s", rej.Reason, failing[0])
			}
			n, list, ok := strings.Cut(rej.Detail, " problem(s): ")
			var got []verify.Problem
			if !ok || json.Unmarshal([]byte(list), &got) != nil {
				t.Fatalf("detail %q", rej.Detail)
			}
			if n != strconv.Itoa(len(want)) || !equalJSON(t, got, want) {
				t.Errorf("detail lists %v\nwant %v", got, want)
			}
			counters := st.Counters()
			for _, name := range failing {
				if counters["check."+name] != 1 {
					t.Errorf("check.%s = %d", name, counters["check."+name])
				}
			}
			kinds := map[string]int64{}
			for _, p := range want {
				kinds[p.Kind]++
			}
			for k, v := range kinds {
				if counters["kind."+k] != v {
					t.Errorf("kind.%s = %d, want %d", k, counters["kind."+k], v)
				}
			}
			if len(counters) != len(failing)+len(kinds) {
				t.Errorf("unexpected counters %v", counters)
			}
		})
	}
}

func TestVerifyPassesAndCountsTokens(t *testing.T) {
	st := buildVerify(t, VerifyConfig{Checks: []string{"roles", "calls_resolved", "args_schema", "meta_tool_shape"}}, nil)
	for _, in := range fxAll() {
		out := processOne(t, st, in)
		want := strconv.Itoa(verify.RecordTokens(in))
		if out.Tag("tokens") != want {
			t.Errorf("%s: tokens tag %q, want %s", in.ID, out.Tag("tokens"), want)
		}
		if len(out.Lineage) != 1 || out.Lineage[0] != (record.Step{Stage: "verify", Provider: "rule"}) {
			t.Errorf("%s: lineage %+v", in.ID, out.Lineage)
		}
		if again := processOne(t, st, out); again != out {
			t.Errorf("%s: a second pass must not change the record", in.ID)
		}
	}
	if c := st.Counters(); len(c) != 0 {
		t.Errorf("counters of clean records: %v", c)
	}
	off := false
	quiet := buildVerify(t, VerifyConfig{Checks: []string{"roles"}, CountTokens: &off}, nil)
	if in := fxSingle(); processOne(t, quiet, in) != in {
		t.Error("with count_tokens off a clean record passes through unchanged")
	}
}

// TestVerifyTokensCountResponses: the tokens tag counts the tools as the
// export writes them, response schemas included (QA F8: a 138 kB schema
// left the tag unchanged): the system text is the export's tools JSON.
func TestVerifyTokensCountResponses(t *testing.T) {
	in := fxSingle()
	in.System = ""
	in.Tools[0].Response = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"},"delay_minutes":{"type":"integer"}}}`)
	tools, err := toolsJSON(in.Tools)
	if err != nil {
		t.Fatal(err)
	}
	// The same record with the tools written out as its system prompt.
	asText := in.Clone()
	asText.Tools, asText.System = nil, tools
	want := verify.RecordTokens(asText)
	without := in.Clone()
	without.Tools[0].Response = nil
	if want <= verify.RecordTokens(without) {
		t.Fatalf("the response adds no tokens (%d)", want)
	}
	st := buildVerify(t, VerifyConfig{Checks: []string{"roles"}}, nil)
	if got := processOne(t, st, in).Tag("tokens"); got != strconv.Itoa(want) {
		t.Errorf("tokens tag %s, want %d (%d without the response)", got, want, verify.RecordTokens(without))
	}
	var memo verify.TokenMemo
	if got := memo.RecordTokens(in); got != want {
		t.Errorf("TokenMemo.RecordTokens %d, want %d", got, want)
	}
	st = buildVerify(t, VerifyConfig{Checks: []string{"roles"}, MaxTokens: want - 1}, nil)
	if _, err := st.Process(context.Background(), in); err == nil {
		t.Errorf("max_tokens %d passes a record of %d tokens", want-1, want)
	}
}

func TestVerifyMaxTokens(t *testing.T) {
	in := fxMultiTurn()
	n := verify.RecordTokens(in)
	st := buildVerify(t, VerifyConfig{Checks: []string{"roles"}, MaxTokens: n - 1}, nil)
	_, err := st.Process(context.Background(), in)
	if got, _ := contract.ReasonOf(err); got != TooLong {
		t.Errorf("got %v, want %s", err, TooLong)
	}
	if st.Counters()[TooLong] != 1 {
		t.Errorf("counters %v", st.Counters())
	}
	st = buildVerify(t, VerifyConfig{Checks: []string{"roles"}, MaxTokens: n}, nil)
	processOne(t, st, in)
	// Problems win over length.
	st = buildVerify(t, VerifyConfig{Checks: []string{"roles"}, MaxTokens: 1}, nil)
	_, err = st.Process(context.Background(), fxBroken())
	if got, _ := contract.ReasonOf(err); got != "verify:roles" {
		t.Errorf("got %v, want verify:roles", err)
	}
	// Length rejects in tag mode too.
	st = buildVerify(t, VerifyConfig{Checks: []string{"roles"}, MaxTokens: 1, Action: VerifyActionTag}, nil)
	if _, err = st.Process(context.Background(), fxSingle()); err == nil {
		t.Error("tag mode must still reject records over max_tokens")
	}
}

func TestVerifyTagAction(t *testing.T) {
	st := buildVerify(t, VerifyConfig{Checks: []string{"roles", "calls_resolved", "args_schema", "meta_tool_shape"}, Action: VerifyActionTag}, nil)
	in := fxBroken()
	out := processOne(t, st, in)
	for _, name := range []string{"roles", "calls_resolved", "args_schema"} {
		if out.Tag("verify."+name) != "fail" {
			t.Errorf("tag verify.%s = %q", name, out.Tag("verify."+name))
		}
	}
	if out.Tag("verify.meta_tool_shape") != "" {
		t.Error("passing checks get no tag")
	}
	if !equalJSON(t, out.Messages, in.Messages) || out.Tag("tokens") == "" {
		t.Error("tag mode keeps the dialogue and counts tokens")
	}
	if st.Counters()["check.roles"] != 1 {
		t.Errorf("counters %v", st.Counters())
	}
}

// Judges: the answer decides; unreadable answers become problems; a client
// error is systemic unless it carries a reject reason.
func TestVerifyJudges(t *testing.T) {
	answer := func(s string) llm.Client {
		return llm.ClientFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
			return llm.Response{Content: s, FinishReason: "stop", Provider: "fake", Model: "judge"}, nil
		})
	}
	cfg := VerifyConfig{Checks: []string{"roles", "judge_hallucination"}}
	st := buildVerify(t, cfg, answer("0"))
	if st.Concurrency() != 4 {
		t.Errorf("a stage with judges runs at the teacher's capacity, got %d", st.Concurrency())
	}
	out := processOne(t, st, fxParallel())
	if l := out.Lineage[len(out.Lineage)-1]; l.Provider != "offline" {
		t.Errorf("lineage %+v: the judge's provider comes from the Env", l)
	}
	st = buildVerify(t, cfg, answer("1"))
	_, err := st.Process(context.Background(), fxParallel())
	if got, _ := contract.ReasonOf(err); got != "verify:judge_hallucination" {
		t.Errorf("judge said 1: %v", err)
	}
	st = buildVerify(t, VerifyConfig{Checks: cfg.Checks, Attempts: 2}, answer("maybe"))
	_, err = st.Process(context.Background(), fxParallel())
	if got, _ := contract.ReasonOf(err); got != "verify:judge_hallucination" || !strings.Contains(err.Error(), "judge_unparseable") {
		t.Errorf("unreadable judge: %v", err)
	}
	if st.Counters()["kind.judge_unparseable"] != 1 {
		t.Errorf("counters %v", st.Counters())
	}
	boom := llm.ClientFunc(func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, errors.New("connection refused")
	})
	_, err = buildVerify(t, cfg, boom).Process(context.Background(), fxParallel())
	if _, isReject := contract.ReasonOf(err); err == nil || isReject {
		t.Errorf("a dead teacher must be systemic, got %v", err)
	}
	timeout := llm.ClientFunc(func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, &llm.AnswerError{Reason: "llm_error_timeout", Attempts: 7}
	})
	_, err = buildVerify(t, cfg, timeout).Process(context.Background(), fxParallel())
	if got, _ := contract.ReasonOf(err); got != "llm_error_timeout" {
		t.Errorf("an unanswered request rejects the record: %v", err)
	}
	// Offline stand-ins answer when the teacher is the offline provider.
	processOne(t, buildVerify(t, cfg, fxOffline()), fxSingle())
}

func TestVerifyPromptOverride(t *testing.T) {
	dir := t.TempDir()
	text := "My hallucination judge.\n-- user --\nAnswer 1 or 0 about: {{.Turn}}\n"
	if err := os.WriteFile(filepath.Join(dir, "hall.tmpl"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	want, _ := prompts.Parse("x", []byte(text))
	var mu sync.Mutex
	var seen []llm.Request
	client := llm.ClientFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		return llm.Response{Content: "0", FinishReason: "stop"}, nil
	})
	cfg := VerifyConfig{Checks: []string{"judge_hallucination"}, Prompts: map[string]string{"judge_hallucination": "hall.tmpl"}}
	cfg.defaults()
	env := fxEnv("verify", client)
	env.Dir = dir
	st, err := cfg.build(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Process(context.Background(), fxSingle()); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[0].Template != want.Hash || !strings.HasPrefix(seen[0].Messages[0].Content, "Answer 1 or 0 about:") {
		t.Errorf("requests %+v", seen)
	}
	cfg.Prompts["judge_hallucination"] = "missing.tmpl"
	if _, err := cfg.build(env); err == nil {
		t.Error("a missing override must fail the build")
	}
}

// Counters stay exact under concurrent Process calls.
func TestVerifyCountersConcurrent(t *testing.T) {
	st := buildVerify(t, VerifyConfig{Checks: []string{"roles", "calls_resolved"}}, nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			st.Process(context.Background(), fxBroken())
			st.Process(context.Background(), fxSingle())
		})
	}
	wg.Wait()
	if c := st.Counters(); c["check.roles"] != 50 || c["check.calls_resolved"] != 50 {
		t.Errorf("counters %v", c)
	}
}

func TestVerifyConfig(t *testing.T) {
	off := false
	tests := []struct {
		cfg  VerifyConfig
		want []string // substrings of the problems, in order
	}{
		{VerifyConfig{Checks: []string{"roles"}}, nil},
		{VerifyConfig{}, []string{"checks: list at least one of roles"}},
		{VerifyConfig{Checks: []string{"roles", "nope", "roles"}}, []string{`checks[1]: unknown check "nope"`, `checks[2]: "roles" is listed twice`}},
		{VerifyConfig{Checks: []string{"roles"}, Action: "drop"}, []string{`action: "drop"`}},
		{VerifyConfig{Checks: []string{"roles"}, Prompts: map[string]string{"judge_x": "a.tmpl", "judge_consistency": ""}}, []string{"prompts.judge_consistency: path is empty", `prompts: "judge_x" is not one of`}},
		{VerifyConfig{Checks: []string{"roles"}, MinCompleteness: new(3), MinCorrectness: new(-1)}, []string{"min_completeness", "min_correctness"}},
		// An explicit 0 is refused, not taken for unset (it became 2, the strictest).
		{VerifyConfig{Checks: []string{"roles"}, MinCompleteness: new(0)}, []string{"min_completeness: must be 1 or 2, got 0"}},
		{VerifyConfig{Checks: []string{"roles"}, MaxTokens: -1}, []string{"max_tokens: must be ≥ 0"}},
		{VerifyConfig{Checks: []string{"roles"}, MaxTokens: 10, CountTokens: &off}, []string{"max_tokens: needs count_tokens"}},
	}
	for _, tt := range tests {
		tt.cfg.defaults()
		probs := tt.cfg.validate()
		if len(probs) != len(tt.want) {
			t.Errorf("%+v: %v", tt.cfg, probs)
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(probs[i], w) {
				t.Errorf("problem %q lacks %q", probs[i], w)
			}
		}
	}
	var c VerifyConfig
	c.defaults()
	if c.Action != "reject" || c.Attempts != 3 || *c.MinCompleteness != 2 || *c.MinCorrectness != 2 || !*c.CountTokens {
		t.Errorf("defaults %+v", c)
	}
	judge := VerifyConfig{Checks: []string{"judge_multistep"}}
	judge.defaults()
	if _, err := judge.build(&Env{}); err == nil {
		t.Error("judges without a teacher must fail the build")
	}
}

func BenchmarkVerifyRules(b *testing.B) {
	st := buildVerify(b, VerifyConfig{Checks: []string{"roles", "calls_resolved", "args_schema", "meta_tool_shape"}}, nil)
	in := fxMultiTurn()
	ctx := context.Background()
	processOne(b, st, in) // loads the BPE tables once
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Process(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// Every judgement is counted by judge and answer, for the report's score
// histograms: one per call turn for the Meta-Tool judges, one per final
// answer for the ComplexEval ones.
func TestVerifyCountsJudgements(t *testing.T) {
	// Hallucination says 1 (a problem), completeness scores 1; correctness
	// gets no readable answer.
	client := llm.ClientFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		text := req.Messages[len(req.Messages)-1].Content
		a := "0"
		switch {
		case strings.Contains(text, "address") || strings.Contains(strings.ToLower(text), "complete"):
			a = `{"score": 1, "reason": "partly"}`
		case strings.Contains(strings.ToLower(text), "correct"):
			a = "no idea"
		default:
			a = "1"
		}
		return llm.Response{Content: a, FinishReason: "stop", Provider: "fake", Model: "judge"}, nil
	})
	st := buildVerify(t, VerifyConfig{Checks: []string{"judge_hallucination", "judge_completeness", "judge_correctness"}, Attempts: 1, Action: VerifyActionTag}, client)
	for range 3 {
		processOne(t, st, fxParallel())
	}
	c := st.Counters()
	got := map[string]int64{}
	for k, v := range c {
		if strings.HasPrefix(k, "judge.") {
			got[k] = v
		}
	}
	turns := int64(countCallTurns(fxParallel()))
	want := map[string]int64{
		"judge.judge_hallucination=1":         3 * turns,
		"judge.judge_completeness=1":          3,
		"judge.judge_correctness=unparseable": 3,
	}
	if !maps.Equal(got, want) {
		t.Errorf("judgement counters %v, want %v (all counters %v)", got, want, c)
	}
}

func countCallTurns(r *record.Record) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == record.RoleAssistant && len(m.Calls) > 0 {
			n++
		}
	}
	return n
}

// TestVerifyJudgesAskTogether: every judge request of a record is sent
// before any is answered (all judges, all turns). A batch-mode teacher
// answers a round's requests together, so asked one after another the
// judges of a record with n call turns took 2n rounds.
func TestVerifyJudgesAskTogether(t *testing.T) {
	r := fxMetaTool()
	turns := 0
	for _, m := range r.Messages {
		if m.Role == record.RoleAssistant && len(m.Calls) > 0 {
			turns++
		}
	}
	want := 2 * turns
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	barrier := llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		mu.Lock()
		if arrived++; arrived == want {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return llm.Response{Content: "0", FinishReason: "stop", Provider: "fake", Model: "judge"}, nil
		case <-time.After(5 * time.Second):
			return llm.Response{}, fmt.Errorf("only %d of %d judge requests were sent before waiting for an answer", arrived, want)
		}
	})
	st := buildVerify(t, VerifyConfig{Checks: []string{"judge_hallucination", "judge_consistency"}}, barrier)
	if _, err := st.Process(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}
