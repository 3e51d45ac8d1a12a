package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

func buildDecisionTokens(t testing.TB, cfg DecisionTokensConfig) Stage {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(fxEnv("decision_tokens", nil))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestDecisionTokensEveryAssistantTurn(t *testing.T) {
	st := buildDecisionTokens(t, DecisionTokensConfig{})
	for _, in := range fxAll() {
		in.Messages[len(in.Messages)-1].Reasoning = "some reasoning"
		before := in.Clone()
		out := processOne(t, st, in)
		if !equalJSON(t, in, before) {
			t.Errorf("%s: input modified", in.ID)
		}
		if out.Tag(DecisionTokensTag) != "on" {
			t.Errorf("%s: tag %q", in.ID, out.Tag(DecisionTokensTag))
		}
		if len(out.Lineage) != 1 || out.Lineage[0].Provider != "rule" {
			t.Errorf("%s: lineage %+v", in.ID, out.Lineage)
		}
		for k, m := range out.Messages {
			orig := in.Messages[k]
			switch {
			case m.Role != record.RoleAssistant:
				if m.Content != orig.Content {
					t.Errorf("%s: messages[%d] (%s) changed", in.ID, k, m.Role)
				}
			case len(m.Calls) > 0:
				if m.Content != DefaultUseToolToken+orig.Content {
					t.Errorf("%s: call turn %d content %q", in.ID, k, m.Content)
				}
			default:
				if m.Content != DefaultAnswerToken+orig.Content {
					t.Errorf("%s: answer turn %d content %q", in.ID, k, m.Content)
				}
			}
			if m.Reasoning != orig.Reasoning || len(m.Calls) != len(orig.Calls) {
				t.Errorf("%s: messages[%d] reasoning or calls changed", in.ID, k)
			}
		}
		// Idempotent: a second pass changes nothing and adds no step.
		again := processOne(t, st, out)
		if again != out {
			t.Errorf("%s: second pass changed the record", in.ID)
		}
	}
}

// askUser is an assistant turn saying text and calling get_user_input.
func askUser(text string) record.Message {
	return record.Message{Role: record.RoleAssistant, Content: text,
		Calls: []record.Call{{Name: verify.GetUserInput, Arguments: json.RawMessage(`{}`)}}}
}

func TestDecisionTokensCases(t *testing.T) {
	call := func(content string) record.Message {
		m := fxCalls("get_weather", `{"location":"Paris"}`)
		m.Content = content
		return m
	}
	tests := []struct {
		name string
		cfg  DecisionTokensConfig
		in   record.Message
		want string
	}{
		{"empty call turn gets the token alone", DecisionTokensConfig{}, call(""), "<|use_tool|>"},
		{"text said with calls keeps its text", DecisionTokensConfig{}, call("Let me check."), "<|use_tool|>Let me check."},
		{"answer", DecisionTokensConfig{}, fxSay("Paris is sunny."), "<|answer|>Paris is sunny."},
		{"empty answer", DecisionTokensConfig{}, fxSay(""), "<|answer|>"},
		{"already prefixed answer", DecisionTokensConfig{}, fxSay("<|answer|>Hi"), "<|answer|>Hi"},
		{"already prefixed call", DecisionTokensConfig{}, call("<|use_tool|>"), "<|use_tool|>"},
		{"wrong token on a call turn is replaced", DecisionTokensConfig{}, call("<|answer|>"), "<|use_tool|>"},
		{"wrong token on an answer is replaced", DecisionTokensConfig{}, fxSay("<|use_tool|>Sure."), "<|answer|>Sure."},
		{"custom tokens", DecisionTokensConfig{AnswerToken: "[ANS]", UseToolToken: "[TOOL]"}, call("x"), "[TOOL]x"},
		// A turn that only asks the user answers (seed 000 Fig 6: it invokes no tool).
		{"get_user_input reply answers", DecisionTokensConfig{}, askUser("Which city?"), "<|answer|>Which city?"},
		{"get_user_input reply loses the use-tool token", DecisionTokensConfig{}, askUser("<|use_tool|>Which city?"), "<|answer|>Which city?"},
		{"custom answer", DecisionTokensConfig{AnswerToken: "[ANS]", UseToolToken: "[TOOL]"}, fxSay("<|answer|>x"), "[ANS]<|answer|>x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := buildDecisionTokens(t, tt.cfg)
			in := fxRecord("fx:dt", []record.Tool{fxWeather}, fxUser("weather?"), tt.in)
			out := processOne(t, st, in)
			if got := out.Messages[1].Content; got != tt.want {
				t.Errorf("content %q, want %q", got, tt.want)
			}
			if twice := processOne(t, st, out); twice.Messages[1].Content != tt.want {
				t.Errorf("second pass: %q", twice.Messages[1].Content)
			}
		})
	}
}

// A record already in shape but without the tag only gets the tag.
func TestDecisionTokensTagOnly(t *testing.T) {
	st := buildDecisionTokens(t, DecisionTokensConfig{})
	in := fxRecord("fx:tag", nil, fxUser("hi"), fxSay("<|answer|>hello"))
	out := processOne(t, st, in)
	if out == in || out.Tag(DecisionTokensTag) != "on" || out.Messages[1].Content != "<|answer|>hello" || len(out.Lineage) != 1 {
		t.Errorf("got %+v", out)
	}
	noAssistant := fxRecord("fx:user-only", nil, fxUser("hi"))
	if out := processOne(t, st, noAssistant); out.Tag(DecisionTokensTag) != "on" {
		t.Error("every record gets the tag")
	}
}

func TestDecisionTokensValidate(t *testing.T) {
	tests := []struct {
		cfg  DecisionTokensConfig
		bad  bool
		want string
	}{
		{DecisionTokensConfig{}, false, ""},
		{DecisionTokensConfig{AnswerToken: "<|x|>", UseToolToken: "<|x|>"}, true, "must differ"},
		{DecisionTokensConfig{AnswerToken: "<|a", UseToolToken: "<|a|>"}, true, "prefix"},
		{DecisionTokensConfig{AnswerToken: " <|a|>"}, true, "answer_token"},
	}
	for _, tt := range tests {
		tt.cfg.defaults()
		probs := tt.cfg.validate()
		if (len(probs) > 0) != tt.bad || (tt.bad && !strings.Contains(strings.Join(probs, ";"), tt.want)) {
			t.Errorf("%+v: %v", tt.cfg, probs)
		}
	}
}

func BenchmarkDecisionTokens(b *testing.B) {
	st := buildDecisionTokens(b, DecisionTokensConfig{})
	in := fxMultiTurn()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Process(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// A record whose call turn gets the token costs the copy (record and
// list), its tags and its messages: the lineage is shared (stepper), and
// the token alone is no new text.
func TestDecisionTokensAllocs(t *testing.T) {
	st := buildDecisionTokens(t, DecisionTokensConfig{})
	in := fxRecord("fx:allocs", []record.Tool{fxWeather}, fxUser("weather?"), fxCalls("get_weather", `{"location":"Paris"}`))
	in.Lineage = []record.Step{{Stage: "00-ingest", Provider: "rule"}}
	processOne(t, st, in) // the stage's lineage for the next records
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { st.Process(ctx, in) }); n != 3 {
		t.Errorf("%v allocations a record, want 3", n)
	}
}

// The stage writes the new texts of consecutive records into shared
// blocks (texts): no text may be overwritten by a later record's, whether
// the records are processed one after another or at once, with texts
// that fill a block, texts larger than one, and turns left unchanged or
// given the token alone.
func TestDecisionTokensTextsKept(t *testing.T) {
	st := buildDecisionTokens(t, DecisionTokensConfig{})
	text := func(i int) string {
		switch i % 7 {
		case 0:
			return ""
		case 1:
			return DefaultAnswerToken + "already " + strings.Repeat("a", i%50)
		case 2:
			return DefaultUseToolToken + "wrong token " + strings.Repeat("b", i%70)
		case 3:
			return strings.Repeat("long "+string(rune('a'+i%26)), textBlock/20+i%100) // over a quarter of a block: a record's own
		case 4:
			return strings.Repeat("huge", textBlock/3+i%10) // over a block
		default:
			return strings.Repeat(string(rune('A'+i%26)), 1+i%300)
		}
	}
	const n = 3000
	ins := make([]*record.Record, n)
	for i := range ins {
		call := fxCalls("get_weather", `{"location":"Paris"}`)
		call.Content = text(i + 1)
		ins[i] = fxRecord(fmt.Sprintf("fx:%d", i), []record.Tool{fxWeather}, fxUser("q"), fxSay(text(i)), call, fxSay(text(i+3)))
	}
	want := func(in *record.Record) []string {
		var w []string
		for _, m := range in.Messages {
			switch {
			case m.Role != record.RoleAssistant:
				w = append(w, m.Content)
			case len(m.Calls) > 0 && !strings.HasPrefix(m.Content, DefaultUseToolToken):
				w = append(w, DefaultUseToolToken+strings.TrimPrefix(m.Content, DefaultAnswerToken))
			case len(m.Calls) == 0 && !strings.HasPrefix(m.Content, DefaultAnswerToken):
				w = append(w, DefaultAnswerToken+strings.TrimPrefix(m.Content, DefaultUseToolToken))
			default:
				w = append(w, m.Content)
			}
		}
		return w
	}
	outs := make([]*record.Record, n)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				out, err := st.Process(context.Background(), ins[i])
				if err != nil || len(out) != 1 {
					t.Errorf("%d: %v, %d records", i, err, len(out))
					return
				}
				outs[i] = out[0]
			}
		})
	}
	wg.Wait()
	for i, out := range outs {
		if out == nil {
			continue
		}
		w := want(ins[i])
		for k, m := range out.Messages {
			if m.Content != w[k] {
				t.Fatalf("record %d turn %d: %.60q…, want %.60q…", i, k, m.Content, w[k])
			}
		}
	}
}
