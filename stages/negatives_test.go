package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

func buildNegatives(t testing.TB, cfg NegativesConfig, teacher llm.Client) Stage {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(fxEnv("negatives", teacher))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkNegatives asserts the invariants of one Process result and returns
// the negatives.
func checkNegatives(t *testing.T, in *record.Record, out []*record.Record, wantToken string) []*record.Record {
	t.Helper()
	if len(out) == 0 || out[0] != in {
		t.Fatalf("%s: the input record must come first, unchanged", in.ID)
	}
	negs := out[1:]
	var ks []int
	for _, neg := range negs {
		var k int
		if _, err := fmt.Sscanf(strings.TrimPrefix(neg.ID, in.ID), "/neg%d", &k); err != nil {
			t.Fatalf("negative ID %q", neg.ID)
		}
		ks = append(ks, k)
		orig := in.Messages[k]
		if orig.Role != record.RoleAssistant || len(orig.Calls) == 0 {
			t.Fatalf("%s: cut at messages[%d], which is not a call turn", neg.ID, k)
		}
		// Cut right before the call turn, then one direct answer.
		if len(neg.Messages) != k+1 || !equalJSON(t, neg.Messages[:k], in.Messages[:k]) {
			t.Errorf("%s: dialogue is not the parent's first %d messages plus the answer", neg.ID, k)
		}
		last := neg.Messages[k]
		// A direct answer: text alone, or, when the parent's answers are
		// get_user_input calls and the answer is a reply (not the token),
		// the text with the one call get_user_input({}), as meta_tool
		// writes the record's other answers.
		asks := wantToken == "" && asksUser(in)
		if last.Role != record.RoleAssistant || last.Reasoning != "" || last.Content == "" ||
			(!asks && len(last.Calls) != 0) || (asks && !equalJSON(t, last.Calls, askUser("").Calls)) {
			t.Errorf("%s: last turn %+v is not a direct answer", neg.ID, last)
		}
		if wantToken != "" && last.Content != wantToken {
			t.Errorf("%s: answer %q, want %q", neg.ID, last.Content, wantToken)
		}
		// Never keep a called function; keep every other tool, in order.
		called := calledNames(orig)
		var want []record.Tool
		for _, tool := range in.Tools {
			if !slices.Contains(called, tool.Name) {
				want = append(want, tool)
			}
		}
		if !equalJSON(t, neg.Tools, want) && !(len(want) == 0 && len(neg.Tools) == 0) {
			t.Errorf("%s: tools %v, want %v", neg.ID, toolNames(neg.Tools), toolNames(want))
		}
		for name := range toolsInScope(neg, len(neg.Messages)) {
			if slices.Contains(called, name) {
				t.Errorf("%s: still offers %s", neg.ID, name)
			}
		}
		if neg.Tag("category") != "negative" || len(neg.Lineage) != len(in.Lineage)+1 {
			t.Errorf("%s: tags %v lineage %v", neg.ID, neg.Tags, neg.Lineage)
		}
	}
	if !slices.IsSorted(ks) || len(slices.Compact(slices.Clone(ks))) != len(ks) {
		t.Errorf("%s: negatives at %v, want distinct and in order", in.ID, ks)
	}
	return negs
}

func toolNames(tools []record.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func TestNegativeTurns(t *testing.T) {
	lonely := fxRecord("fx:lonely", []record.Tool{fxTraffic},
		fxUser("traffic in Miami?"), fxCalls("get_traffic_report", `{"location":"Miami"}`))
	asksOnly := fxRecord("fx:asksonly", []record.Tool{fxTraffic, verify.GetUserInputDef()},
		fxUser("traffic in Miami?"), fxCalls("get_traffic_report", `{"location":"Miami"}`))
	noUser := fxRecord("fx:nouser", []record.Tool{fxTraffic, fxStock}, fxCalls("get_stock_price", `{"symbol":"X"}`))
	tests := []struct {
		name    string
		r       *record.Record
		noTools bool
		want    []int
	}{
		{"single", fxSingle(), false, []int{1}},
		{"parallel", fxParallel(), false, []int{1}},
		// Turn 3 calls a tool that meta_tool returned in the dialogue: not eligible.
		{"meta_tool", fxMetaTool(), false, []int{1}},
		// Turn 9 calls get_weather again, which turn 1 already called.
		{"repeat call", fxMultiTurn(), false, []int{1, 5}},
		{"chat", fxChat(), false, nil},
		{"no tool would remain", lonely, false, nil},
		{"no tool may remain", lonely, true, []int{1}},
		// get_user_input asks the user and calls no function: it is no
		// tool left.
		{"only get_user_input would remain", asksOnly, false, nil},
		{"only get_user_input may remain", asksOnly, true, []int{1}},
		{"no user turn before", noUser, false, nil},
		// Open world: meta_tool reaches every tool, so only a meta_tool
		// turn can become a negative; a turn that asks the user is a reply.
		{"open world", openWorld(), false, []int{3}},
	}
	for _, tt := range tests {
		if got := negativeTurns(tt.r, tt.noTools, nil); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// openWorld is an open-world record: a get_user_input reply (turn 1), a
// meta_tool turn (3) and a call to a listed tool (7) that meta_tool could
// also retrieve.
func openWorld() *record.Record {
	def, _ := json.Marshal(map[string]any{"name": fxTraffic.Name, "description": fxTraffic.Description, "parameters": fxTraffic.Parameters})
	r := fxRecord("fx:open", []record.Tool{fxMeta, verify.GetUserInputDef(), fxStock},
		fxUser("Hi!"), askUser("Hello! What can I do for you?"),
		fxUser("How is the traffic in Miami, Florida?"),
		fxCalls("meta_tool", `{"tool_description":"Retrieve the latest traffic information","param_description":["The city and state"]}`),
		fxResults("meta_tool", string(def)),
		fxCalls("get_traffic_report", `{"location":"Miami, Florida"}`),
		fxResults("get_traffic_report", `{"status":"light"}`),
		fxCalls("get_stock_price", `{"symbol":"AAPL"}`),
		fxResults("get_stock_price", `{"price":191.2}`),
		fxSay("Traffic is light; AAPL is at 191.2."))
	r.SetTag("world", "open")
	return r
}

// The negative of an open-world meta_tool turn lists no meta_tool, so it
// is tagged world=closed.
func TestNegativesOpenWorld(t *testing.T) {
	st := buildNegatives(t, NegativesConfig{Ratio: 1, PerRecord: 5}, nil)
	in := openWorld()
	out, err := st.Process(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	negs := checkNegatives(t, in, out, DefaultAnswerToken)
	if len(negs) != 1 || negs[0].ID != "fx:open/neg3" {
		t.Fatalf("negatives %v, want fx:open/neg3 alone", negs)
	}
	if w := negs[0].Tag("world"); w != "closed" || slices.Contains(toolNames(negs[0].Tools), verify.MetaTool) {
		t.Errorf("world %q, tools %v: want closed without meta_tool", w, toolNames(negs[0].Tools))
	}
}

func TestNegativesTokenTarget(t *testing.T) {
	st := buildNegatives(t, NegativesConfig{Ratio: 1, PerRecord: 5}, nil)
	for _, in := range fxAll() {
		before := in.Clone()
		out, err := st.Process(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		negs := checkNegatives(t, in, out, DefaultAnswerToken)
		if got, want := len(negs), len(negativeTurns(in, false, nil)); got != want {
			t.Errorf("%s: %d negatives, want %d (every eligible turn)", in.ID, got, want)
		}
		if !equalJSON(t, in, before) {
			t.Errorf("%s: input modified", in.ID)
		}
	}
	out, _ := st.Process(context.Background(), fxParallel())
	neg := out[1]
	if neg.ID != "fx:parallel/neg1" || !slices.Equal(toolNames(neg.Tools), []string{"get_traffic_report"}) {
		t.Errorf("parallel negative %s tools %v", neg.ID, toolNames(neg.Tools))
	}
	if neg.Lineage[0] != (record.Step{Stage: "negatives", Provider: "rule"}) {
		t.Errorf("lineage %+v", neg.Lineage)
	}
	custom := buildNegatives(t, NegativesConfig{Ratio: 1, Token: "[NONE]"}, nil)
	out, _ = custom.Process(context.Background(), fxSingle())
	checkNegatives(t, out[0], out, "[NONE]")
}

// per_record picks distinct turns; the choice is seeded per record.
func TestNegativesPerRecordAndSeed(t *testing.T) {
	in := fxMultiTurn() // eligible turns 1 and 5
	one := buildNegatives(t, NegativesConfig{Ratio: 1}, nil)
	picked := map[string]int{}
	for i := range 200 {
		r := in.Clone()
		r.ID = fmt.Sprintf("fx:multi%d", i)
		out, err := one.Process(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		negs := checkNegatives(t, r, out, DefaultAnswerToken)
		if len(negs) != 1 {
			t.Fatalf("%s: %d negatives, want 1", r.ID, len(negs))
		}
		picked[strings.TrimPrefix(negs[0].ID, r.ID)]++
		// Same record, same choice.
		again, _ := one.Process(context.Background(), r.Clone())
		if again[1].ID != negs[0].ID {
			t.Fatalf("%s: choice not deterministic", r.ID)
		}
	}
	if picked["/neg1"] < 50 || picked["/neg5"] < 50 {
		t.Errorf("turn choice is not spread over the eligible turns: %v", picked)
	}
	two := buildNegatives(t, NegativesConfig{Ratio: 1, PerRecord: 2}, nil)
	out, _ := two.Process(context.Background(), in)
	if negs := checkNegatives(t, in, out, DefaultAnswerToken); len(negs) != 2 {
		t.Errorf("per_record 2: %d negatives", len(negs))
	}
}

// ratio is the share of eligible records that get negatives, and records
// flow through conserved: in + added = out.
func TestNegativesRatioAndConservation(t *testing.T) {
	const n = 4000
	for _, ratio := range []float64{0.1, 0.5, 1} {
		st := buildNegatives(t, NegativesConfig{Ratio: ratio, PerRecord: 2}, nil)
		in, out, added, withNeg, eligible := 0, 0, 0, 0, 0
		for i := range n {
			r := fxNumbered(i)
			res, err := st.Process(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			checkNegatives(t, r, res, DefaultAnswerToken)
			in++
			out += len(res)
			added += len(res) - 1
			if len(negativeTurns(r, false, nil)) > 0 {
				eligible++
			}
			if len(res) > 1 {
				withNeg++
			}
		}
		if in+added != out {
			t.Errorf("ratio %v: in %d + added %d != out %d", ratio, in, added, out)
		}
		// Binomial: allow five standard deviations.
		want := ratio * float64(eligible)
		sd := 5 * math.Sqrt(float64(eligible)*ratio*(1-ratio))
		if got := float64(withNeg); got < want-sd || got > want+sd {
			t.Errorf("ratio %v: %d of %d eligible records got negatives, want about %.0f", ratio, withNeg, eligible, want)
		}
	}
}

// Records in any order give the same negatives.
func TestNegativesOrderIndependent(t *testing.T) {
	st := buildNegatives(t, NegativesConfig{Ratio: 0.5}, nil)
	run := func(recs []*record.Record) map[string]string {
		got := map[string]string{}
		for _, r := range recs {
			out, err := st.Process(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range out[1:] {
				got[o.ID] = fmt.Sprint(toolNames(o.Tools), len(o.Messages))
			}
		}
		return got
	}
	var recs []*record.Record
	for i := range 100 {
		r := fxAll()[i%5]
		r.ID = fmt.Sprintf("%s#%d", r.ID, i)
		recs = append(recs, r)
	}
	a := run(recs)
	slices.Reverse(recs)
	if b := run(recs); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("order changed the negatives:\n%v\n%v", a, b)
	}
}

func TestNegativeAssertion(t *testing.T) {
	bad := fxSingle()
	bad.Messages = bad.Messages[:1]
	bad.ID = "fx:single/neg1"
	err := assertNegative(bad, []string{"get_traffic_report"})
	if err == nil {
		t.Fatal("a negative that still lists the called function must fail")
	}
	if _, isReject := contract.ReasonOf(err); isReject {
		t.Errorf("the violation must be systemic, got a reject: %v", err)
	}
	meta := fxMetaTool()
	meta.Tools = []record.Tool{fxStock}
	meta.Messages = meta.Messages[:3]
	if assertNegative(meta, []string{"get_traffic_report"}) == nil {
		t.Error("a negative whose meta_tool result offers the called function must fail")
	}
	good := fxSingle()
	good.Tools = []record.Tool{fxStock}
	good.Messages = good.Messages[:1]
	if err := assertNegative(good, []string{"get_traffic_report"}); err != nil {
		t.Error(err)
	}
}

func TestNegativesTeacherTarget(t *testing.T) {
	st := buildNegatives(t, NegativesConfig{Ratio: 1, Target: NegativeTargetTeacher}, fxOffline())
	for _, in := range fxAll() {
		out, err := st.Process(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, neg := range checkNegatives(t, in, out, "") {
			reply := neg.Messages[len(neg.Messages)-1].Content
			if !strings.HasPrefix(reply, "I'm sorry") {
				t.Errorf("%s: reply %q", neg.ID, reply)
			}
			if neg.Lineage[len(neg.Lineage)-1].Provider != llm.ProviderOffline {
				t.Errorf("%s: lineage %+v", neg.ID, neg.Lineage)
			}
		}
	}
	if st.(Concurrent).Concurrency() != 4 {
		t.Error("a teacher-backed negatives stage runs at the teacher's capacity")
	}
}

// askUserRecord is a closed-world record as meta_tool writes it with
// get_user_input: true: get_user_input listed last, every answer a
// get_user_input call keeping its text.
func askUserRecord() *record.Record {
	return fxRecord("fx:askuser", []record.Tool{fxTraffic, fxStock, verify.GetUserInputDef()},
		fxUser("How is the traffic?"), askUser("Which city do you mean?"),
		fxUser("Miami, Florida."),
		fxCalls("get_traffic_report", `{"location":"Miami, Florida"}`),
		fxResults("get_traffic_report", `{"status":"light"}`),
		askUser("Traffic in Miami is light."))
}

// In a record whose answers are get_user_input calls, a teacher reply is
// one too (one form per sample); the token target stays the token alone;
// the stand-in names no get_user_input among the tools it has.
func TestNegativesGetUserInputReply(t *testing.T) {
	in := askUserRecord()
	teacher := buildNegatives(t, NegativesConfig{Ratio: 1, Target: NegativeTargetTeacher}, fxOffline())
	out, err := teacher.Process(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	negs := checkNegatives(t, in, out, "")
	if len(negs) != 1 || negs[0].ID != "fx:askuser/neg3" {
		t.Fatalf("negatives %v, want fx:askuser/neg3", negs)
	}
	last := negs[0].Messages[3]
	if !verify.Reply(last.Calls) || len(last.Calls) != 1 || string(last.Calls[0].Arguments) != "{}" {
		t.Errorf("reply calls %+v, want get_user_input({}) alone", last.Calls)
	}
	if want := "I'm sorry, but I can't do that for you here: the tools I have (get_stock_price) are not meant for this request. If you tell me more about what you need, I can try to help in another way."; last.Content != want {
		t.Errorf("reply %q, want %q", last.Content, want)
	}
	// A row that lists get_user_input but answers in plain text gets a
	// plain reply: its answers have that one form.
	plain := askUserRecord()
	for i, m := range plain.Messages {
		if verify.Reply(m.Calls) {
			plain.Messages[i].Calls = nil
		}
	}
	out, err = teacher.Process(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if negs := checkNegatives(t, plain, out, ""); len(negs) != 1 || negs[0].Messages[3].Calls != nil {
		t.Errorf("plain answers: %+v, want a plain reply", negs)
	}
	token := buildNegatives(t, NegativesConfig{Ratio: 1}, nil)
	out, err = token.Process(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if negs := checkNegatives(t, in, out, DefaultAnswerToken); len(negs) != 1 || negs[0].Messages[3].Calls != nil {
		t.Errorf("token target: %+v, want the token alone", negs)
	}
}

func TestNegativesTeacherReask(t *testing.T) {
	good := "Sorry, I can't look up traffic with the tools I have here. A navigation app would show you live traffic for Miami."
	tests := []struct {
		name    string
		answers []string
		reason  string
		asks    int
	}{
		{"good", []string{good}, "", 1},
		{"call then good", []string{`[get_traffic_report(location="Miami")]`, good}, "", 2},
		{"claim then good", []string{"I checked the traffic for you: it is light.", good}, "", 2},
		{"always empty", []string{" "}, NegativeReplyEmpty, 3},
		{"always json call", []string{`{"name": "get_traffic_report", "arguments": {"location": "Miami"}}`}, NegativeReplyCallSyntax, 3},
		{"always claims", []string{"I have called the traffic service and it returned nothing."}, NegativeReplyClaimsCall, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &fxScript{answers: map[string][]string{"fx:single/neg1": tt.answers}}
			st := buildNegatives(t, NegativesConfig{Ratio: 1, Target: NegativeTargetTeacher}, sc)
			out, err := st.Process(context.Background(), fxSingle())
			if n := sc.count("fx:single/neg1"); n != tt.asks {
				t.Errorf("asked %d times, want %d", n, tt.asks)
			}
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := out[1].Messages[1].Content; got != good {
					t.Errorf("reply %q", got)
				}
				return
			}
			if got, _ := contract.ReasonOf(err); got != tt.reason {
				t.Errorf("reason %q (%v), want %q", got, err, tt.reason)
			}
		})
	}
	// The request shows the cut dialogue and the remaining tools only.
	sc := &fxScript{}
	st := buildNegatives(t, NegativesConfig{Ratio: 1, Target: NegativeTargetTeacher}, sc)
	if _, err := st.Process(context.Background(), fxSingle()); err != nil {
		t.Fatal(err)
	}
	text := sc.reqs[0].Messages[0].Content
	if strings.Contains(text, `"get_traffic_report"`) || !strings.Contains(text, `"get_stock_price"`) ||
		strings.Contains(text, "Miami is heavy") || !strings.Contains(text, "Miami, Florida before I head out") {
		t.Errorf("prompt:\n%s", text)
	}
	if sc.reqs[0].Stage != "negatives@1" || sc.reqs[0].Slot != "fx:single/neg1" {
		t.Errorf("request %s %s", sc.reqs[0].Stage, sc.reqs[0].Slot)
	}
}

func TestCheckNegativeReply(t *testing.T) {
	fns := []string{"get_traffic_report", "Market Trends API"}
	tests := []struct {
		text, reason string
	}{
		{"I can't check live traffic with the tools I have. Try a navigation app.", ""},
		{"The get_traffic_report tool is not available to me.", ""},
		{"", NegativeReplyEmpty},
		{`get_traffic_report(location="Miami")`, NegativeReplyCallSyntax},
		{`Let me try: get_traffic_report (location="Miami")`, NegativeReplyCallSyntax},
		{`[Market Trends API(trend_type="MARKET_INDEXES")]`, NegativeReplyCallSyntax},
		{`<functioncall> {"name": "x"}`, NegativeReplyCallSyntax},
		{`<|python_tag|>[...]`, NegativeReplyCallSyntax},
		{`{"name": "get_news", "parameters": {}}`, NegativeReplyCallSyntax},
		{`[1, 2, 3]`, NegativeReplyCallSyntax},
		{"my_get_traffic_report(x) is a different word", ""},
		{"I called the service but it failed.", NegativeReplyClaimsCall},
		{"Let me check that for you.", NegativeReplyClaimsCall},
		{"According to the tool, traffic is light.", NegativeReplyClaimsCall},
		{"我已经调用了工具。", NegativeReplyClaimsCall},
		{"抱歉，我目前的工具無法查詢交通狀況。", ""},
		{strings.Repeat("抱歉", negativeMaxChars/2), ""}, // characters, not bytes
		{strings.Repeat("x", negativeMaxChars+1), NegativeReplyTooLong},
		{"I'm sorry.\n</think>\nI can't do that.", NegativeReplyThinking},
	}
	for _, tt := range tests {
		got, _ := contract.ReasonOf(checkNegativeReply(tt.text, fns, negativeMaxChars))
		if got != tt.reason {
			t.Errorf("checkNegativeReply(%q) = %q, want %q", tt.text, got, tt.reason)
		}
	}
	for _, r := range fxAll() {
		neg := r.Clone()
		neg.Tools = neg.Tools[1:]
		if err := checkNegativeReply(negativeStandIn(neg), toolNames(r.Tools), negativeMaxChars); err != nil {
			t.Errorf("stand-in fails its own check: %v", err)
		}
	}
	if err := checkNegativeReply(negativeStandIn(&record.Record{}), nil, negativeMaxChars); err != nil {
		t.Error(err)
	}
}

func TestNegativesConfig(t *testing.T) {
	var c NegativesConfig
	c.defaults()
	if c.Ratio != 0.1 || c.PerRecord != 1 || c.Target != "token" || c.Token != "<|answer|>" || c.Attempts != 3 || c.MaxChars != 0 || len(c.validate()) > 0 {
		t.Errorf("defaults %+v %v", c, c.validate())
	}
	bad := NegativesConfig{Ratio: 1.5, PerRecord: -1, Target: "llm", Token: " ", Attempts: -1, Prompt: "x.tmpl", MaxChars: 10}
	if probs := bad.validate(); len(probs) != 7 {
		t.Errorf("validate: %v", probs)
	}
	if probs := (&NegativesConfig{Ratio: 1, PerRecord: 1, Target: NegativeTargetTeacher, Token: "t", Attempts: 1, MaxChars: -1}).validate(); len(probs) != 1 || !strings.HasPrefix(probs[0], "max_chars") {
		t.Errorf("validate negative max_chars: %v", probs)
	}
	teacher := NegativesConfig{Target: NegativeTargetTeacher}
	teacher.defaults()
	if teacher.MaxChars != negativeMaxChars {
		t.Errorf("target teacher: max_chars %d, want %d", teacher.MaxChars, negativeMaxChars)
	}
	if _, err := teacher.build(&Env{}); err == nil {
		t.Error("target teacher without a teacher must fail")
	}
}

func FuzzCheckNegativeReply(f *testing.F) {
	f.Add("I can't do that.", "get_weather")
	f.Add(`get_weather(city="x")`, "get_weather")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, text, fn string) {
		err := checkNegativeReply(text, []string{fn}, 100)
		if err == nil {
			return
		}
		switch reason, _ := contract.ReasonOf(err); reason {
		case NegativeReplyEmpty, NegativeReplyCallSyntax, NegativeReplyClaimsCall, NegativeReplyTooLong, NegativeReplyThinking:
		default:
			t.Fatalf("checkNegativeReply(%q, %q): %v", text, fn, err)
		}
	})
}

func BenchmarkNegativesToken(b *testing.B) {
	st := buildNegatives(b, NegativesConfig{Ratio: 1, PerRecord: 2}, nil)
	in := fxMultiTurn()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Process(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUnitFloat: unitFloat of a source's draw is what a generator on the
// same source draws with Float64 (negatives' source per record is
// Env.Rand's: TestReseederAsRand).
func TestUnitFloat(t *testing.T) {
	a, b := rand.NewPCG(1, 2), rand.NewPCG(1, 2)
	g := rand.New(b)
	for k := range 1000 {
		if got, want := unitFloat(a.Uint64()), g.Float64(); got != want {
			t.Fatalf("draw %d: %v, want %v", k, got, want)
		}
	}
	for _, u := range []uint64{0, 1, 1<<53 - 1, 1 << 53, ^uint64(0)} {
		if f := unitFloat(u); f < 0 || f >= 1 {
			t.Fatalf("unitFloat(%x) = %v, outside [0, 1)", u, f)
		}
	}
}

// TestRetrievedNames: the names a retrievedNames gives for a meta_tool
// result are those of the tools formats.MetaToolResult reads from it
// (none when it reads none), on first and later sight, with and without a
// memo, and past the budget.
func TestRetrievedNames(t *testing.T) {
	def := func(name string) string {
		return `{"name":"` + name + `","description":"d","parameters":{"type":"object","properties":{}}}`
	}
	tests := []struct {
		name    string
		content string
		want    []string
	}{
		{"paper, lone call", `[{"name":"meta_tool","function_id":0,"results":` + def("get_weather") + `}]`, []string{"get_weather"}},
		{"paper, one of several", `{"name":"meta_tool","function_id":1,"results":` + def("b") + `}`, []string{"b"}},
		{"retrieved list", `[` + def("a") + `,` + def("b") + `,` + def("c") + `]`, []string{"a", "b", "c"}},
		{"bare", def("x"), []string{"x"}},
		{"wrapped", `{"type":"function","function":` + def("w") + `}`, []string{"w"}},
		{"not JSON", `{"name":`, nil},
		{"another function's envelope", `{"name":"other","function_id":0,"results":` + def("x") + `}`, nil},
		{"empty list", `[]`, nil},
		{"no name", `{"description":"d"}`, nil},
	}
	memo := newRetrievedNames()
	for round := range 2 {
		for _, tt := range tests {
			ts, _ := formats.MetaToolResult(tt.content)
			var fromTools []string
			for _, tool := range ts {
				fromTools = append(fromTools, tool.Name)
			}
			if !slices.Equal(fromTools, tt.want) {
				t.Fatalf("%s: MetaToolResult names %v, want %v (the table is wrong)", tt.name, fromTools, tt.want)
			}
			for _, rn := range []*retrievedNames{memo, nil} {
				if got := rn.of(tt.content); !slices.Equal(got, tt.want) {
					t.Errorf("round %d, %s (memo %v): %v, want %v", round, tt.name, rn != nil, got, tt.want)
				}
			}
		}
	}
	if len(memo.memo.m) != len(tests) {
		t.Errorf("%d contents remembered, want %d", len(memo.memo.m), len(tests))
	}
	full := newRetrievedNames()
	full.memo.used = retrievedNamesBudget
	for range 2 {
		if got := full.of(tests[0].content); !slices.Equal(got, tests[0].want) {
			t.Errorf("past the budget: %v, want %v", got, tests[0].want)
		}
	}
	if len(full.memo.m) != 0 {
		t.Errorf("past the budget: %d contents remembered", len(full.memo.m))
	}
}

// FuzzRetrievedNames holds retrievedNames to formats.MetaToolResult's
// names for any content, first and again.
func FuzzRetrievedNames(f *testing.F) {
	f.Add(`[{"name":"meta_tool","function_id":0,"results":{"name":"a","description":"d","parameters":{}}}]`)
	f.Add(`[{"name":"a","parameters":{}},{"name":"b","parameters":{}}]`)
	f.Add(`{"name":`)
	memo := newRetrievedNames()
	f.Fuzz(func(t *testing.T, content string) {
		ts, _ := formats.MetaToolResult(content)
		var want []string
		for _, tool := range ts {
			want = append(want, tool.Name)
		}
		for range 2 {
			if got := memo.of(content); !slices.Equal(got, want) {
				t.Fatalf("%q: %v, want %v", content, got, want)
			}
		}
	})
}

// fxNumbered is a copy of the i-th fixture (of five, in turn) with an ID
// of its own, so that each draws its own negatives.
func fxNumbered(i int) *record.Record {
	base := fxAll()[i%5]
	r := base.Clone()
	r.ID = fmt.Sprintf("%s#%d", base.ID, i)
	return r
}

// A record the stage passes (passer) is one Process returns alone, and
// every record Process gives negatives is one it does not pass.
func TestNegativesPasses(t *testing.T) {
	for _, ratio := range []float64{0.1, 0.5, 1} {
		st := buildNegatives(t, NegativesConfig{Ratio: ratio, PerRecord: 2}, nil).(*negatives)
		passed := 0
		for i := range 400 {
			r := fxNumbered(i)
			res, err := st.Process(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if !st.passes(r) {
				continue
			}
			passed++
			if len(res) != 1 || res[0] != r {
				t.Fatalf("ratio %v: %s passes, and Process gave %d records", ratio, r.ID, len(res))
			}
		}
		if (ratio == 1) != (passed == 0) {
			t.Errorf("ratio %v: %d of 400 records passed", ratio, passed)
		}
	}
}

// A reasoning model served without a reasoning parser writes its thinking
// into the reply (Qwen3's <think> block, DeepSeek-R1's "thinking\n</think>"
// after the pre-filled "<think>\n"); with one it may send thinking and no
// reply. The thinking never becomes the training target; a fence around
// the whole reply is dropped; a rambling reply is capped. Served by the
// fake OpenAI-compatible server through the real llm layer.
func TestNegativesTeacherReplyShapes(t *testing.T) {
	const (
		good  = "Sorry, I can't look up traffic with the tools I have here. A navigation app would show you live traffic for Miami."
		think = "ZZTHINK Okay, the user wants traffic; no tool for it."
	)
	tests := []struct {
		name              string
		answer, reasoning string
		reason            string // "" = the reply is good
		asks              int64
	}{
		{"plain", good, "", "", 1},
		{"closed think block", "<think>\n" + think + "\n</think>\n\n" + good, "", "", 1},
		{"R1 form", think + "\n</think>\n\n" + good, "", "", 1},
		{"fenced", "```json\n" + good + "\n```", "", "", 1},
		{"think block, then a fence", "<think>" + think + "</think>\n```\n" + good + "\n```", "", "", 1},
		{"unclosed think block", "<think>\n" + think + "\n" + good, "", llm.ReasonThinkingOnly, 3},
		{"content null, thinking in reasoning_content", "", think + "\n" + good, llm.ReasonThinkingOnly, 3},
		{"rambling", good + "\n\nExplanation: " + strings.Repeat("the tools listed are not for traffic. ", 40), "", NegativeReplyTooLong, 3},
		{"thinking left inside", good + "\n<think>" + think + "</think>", "", NegativeReplyThinking, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			teacher, fake := fakeTeacher(t, []fakellm.Rule{{Regexp: "(?s)^.", Answer: tt.answer, Reasoning: tt.reasoning}})
			st := buildNegatives(t, NegativesConfig{Ratio: 1, Target: NegativeTargetTeacher}, teacher.Stage("negatives"))
			out, err := st.Process(context.Background(), fxSingle())
			if got := fake.Counters().Chat; got != tt.asks {
				t.Errorf("server saw %d requests, want %d", got, tt.asks)
			}
			if tt.reason != "" {
				if got, _ := contract.ReasonOf(err); got != tt.reason {
					t.Fatalf("reject reason %q (%v), want %q", got, err, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out[1].Messages[1].Content; got != good {
				t.Errorf("reply %q, want %q", got, good)
			}
		})
	}
}
