package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// noiseTeacher answers each slot with its scripted answers in order (the
// last one repeats), or with the offline stand-in when a slot has no
// script. Provider is "fake", so llm.Ask re-asks after a failed parse.
type noiseTeacher struct {
	mu      sync.Mutex
	answers map[string][]string
	reqs    []llm.Request
}

func (s *noiseTeacher) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if r.Slot == req.Slot {
			n++
		}
	}
	s.reqs = append(s.reqs, req)
	list, ok := s.answers[req.Slot]
	if !ok {
		text, err := req.Offline()
		return llm.Response{Content: text, FinishReason: "stop", Provider: "fake", Model: "m1"}, err
	}
	return llm.Response{Content: list[min(n, len(list)-1)], FinishReason: "stop", Provider: "fake", Model: "m1"}, nil
}

func (s *noiseTeacher) asked(slot string) []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []llm.Request
	for _, r := range s.reqs {
		if r.Slot == slot {
			out = append(out, r)
		}
	}
	return out
}

// noiseOffline answers like the offline provider.
func noiseOffline() llm.Client {
	return llm.ClientFunc(func(_ context.Context, req llm.Request) (llm.Response, error) {
		s, err := req.Offline()
		return llm.Response{Content: s, FinishReason: "stop", Provider: llm.ProviderOffline}, err
	})
}

func noiseBuild(t testing.TB, cfg NoiseConfig, teacher llm.Client, e toollib.Embedder) Stage {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(&Env{Stage: "noise", Seed: 1, Dir: ".", Teacher: teacher, Embedder: e, Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// noiseInput is an open-world record with meta_tool calls: one turn with
// two calls, a later turn with one.
func noiseInput(t testing.TB) *record.Record {
	t.Helper()
	st := mtBuild(t, MetaToolConfig{OpenWorldRatio: mtPtr(1), HardRatio: mtPtr(0)}, mtEnv(nil, nil))
	out, err := st.Process(context.Background(), mtMultiTurn("noise:1"))
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// metaSlots lists the request slots of the meta_tool calls of r.
func metaSlots(r *record.Record) []string {
	var slots []string
	for i, m := range r.Messages {
		for j, c := range m.Calls {
			if c.Name == verify.MetaTool {
				slots = append(slots, fmt.Sprintf("%s/turn%d/call%d", r.ID, i, j))
			}
		}
	}
	return slots
}

const (
	noiseGood = `{"name":"meta_tool","arguments":{"tool_description":"Get the weather forecast for a location","param_description":["The place to forecast","celsius or fahrenheit"]}}`
	// noiseWeather is the input's first meta_tool call's arguments.
	noiseWeather = `{"tool_description":"Get the weather forecast for a location","param_description":["The place to forecast","celsius or fahrenheit"]}`
)

func TestParseNoiseAnswer(t *testing.T) {
	tests := []struct {
		name, in string
		params   int
		want     string // reason, or "" for accepted
		detail   string
	}{
		{"valid", `{"name":"meta_tool","arguments":{"tool_description":"Fetch the weather","param_description":["Where"]}}`, 1, "", ""},
		{"fenced", "```json\n{\"name\":\"meta_tool\",\"arguments\":{\"tool_description\":\"x\",\"param_description\":[]}}\n```", 0, "", ""},
		{"keys in any order", `{"arguments":{"param_description":["a"],"tool_description":"x"},"name":"meta_tool"}`, 1, "", ""},
		{"not json", `Sure! Here it is: {"name":"meta_tool"}`, 1, NoiseInvalidJSON, ""},
		{"trailing text", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a"]}} hope this helps`, 1, NoiseInvalidJSON, ""},
		{"two objects", `{"name":"meta_tool"} {"name":"meta_tool"}`, 1, NoiseInvalidJSON, ""},
		{"empty", ``, 1, NoiseInvalidJSON, ""},
		{"array", `[{"name":"meta_tool"}]`, 1, NoiseBadShape, "got an array"},
		{"missing arguments", `{"name":"meta_tool"}`, 1, NoiseBadShape, `missing key(s) "arguments"`},
		{"parameters instead of arguments", `{"name":"meta_tool","parameters":{"tool_description":"x","param_description":["a"]}}`, 1, NoiseBadShape, `missing key(s) "arguments" and unexpected key(s) "parameters"`},
		{"extra top key", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a"]},"id":1}`, 1, NoiseBadShape, `unexpected key(s) "id"`},
		{"duplicate key", `{"name":"meta_tool","name":"meta_tool","arguments":{"tool_description":"x","param_description":["a"]}}`, 1, NoiseBadShape, `"name" appears twice`},
		{"renamed function", `{"name":"tool_finder","arguments":{"tool_description":"x","param_description":["a"]}}`, 1, NoiseBadShape, `"tool_finder"`},
		{"name not a string", `{"name":7,"arguments":{"tool_description":"x","param_description":["a"]}}`, 1, NoiseBadShape, "name is 7"},
		{"arguments as string", `{"name":"meta_tool","arguments":"{\"tool_description\":\"x\"}"}`, 1, NoiseBadShape, "got a string"},
		{"extra argument", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a"],"tool_name":"y"}}`, 1, NoiseBadShape, `unexpected key(s) "tool_name"`},
		{"missing param_description", `{"name":"meta_tool","arguments":{"tool_description":"x"}}`, 1, NoiseBadShape, `missing key(s) "param_description"`},
		{"duplicate argument", `{"name":"meta_tool","arguments":{"tool_description":"x","tool_description":"y","param_description":["a"]}}`, 1, NoiseBadShape, "appears twice"},
		{"tool_description not a string", `{"name":"meta_tool","arguments":{"tool_description":["x"],"param_description":["a"]}}`, 1, NoiseBadShape, "not a string"},
		{"tool_description empty", `{"name":"meta_tool","arguments":{"tool_description":"  ","param_description":["a"]}}`, 1, NoiseBadShape, "tool_description is empty"},
		{"param_description a string", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":"a"}}`, 1, NoiseBadShape, "not an array of strings"},
		{"param_description null", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":null}}`, 0, NoiseBadShape, "not an array of strings"},
		{"param_description of numbers", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":[1]}}`, 1, NoiseBadShape, "not an array of strings"},
		{"empty param description", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a",""]}}`, 2, NoiseBadShape, "param_description[1] is empty"},
		{"dropped parameter", `{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a"]}}`, 2, NoiseBadShape, "1 entries, the original 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := parseNoiseAnswer(tt.in, tt.params)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if q.Description == "" || len(q.Params) != tt.params {
					t.Errorf("parsed %+v", q)
				}
				return
			}
			reason, ok := contract.ReasonOf(err)
			if !ok || reason != tt.want || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("err = %v, want %s containing %q", err, tt.want, tt.detail)
			}
		})
	}
}

func FuzzParseNoiseAnswer(f *testing.F) {
	f.Add(noiseGood, 2)
	f.Add(`{"name":"meta_tool","arguments":{"tool_description":"x","param_description":[]}}`, 0)
	f.Add("```\n{\"name\":\"meta_tool\"}\n```", 1)
	f.Add(`{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a","a"]},"x":{}}`, 2)
	f.Add(`[`, 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		q, err := parseNoiseAnswer(s, n)
		if err != nil {
			if _, ok := contract.ReasonOf(err); !ok {
				t.Fatalf("error without a reject reason: %v", err)
			}
			return
		}
		// An accepted answer survives re-encoding unchanged.
		b, err := jsonout.Marshal(noiseCall{Name: verify.MetaTool, Arguments: q})
		if err != nil {
			t.Fatal(err)
		}
		q2, err := parseNoiseAnswer(string(b), n)
		if err != nil || q2.Description != q.Description || strings.Join(q2.Params, "\x00") != strings.Join(q.Params, "\x00") {
			t.Fatalf("re-encoded %s: %+v, %v", b, q2, err)
		}
	})
}

func TestNoiseAcceptsAndKeepsResults(t *testing.T) {
	in := noiseInput(t)
	slots := metaSlots(in)
	if len(slots) != 3 {
		t.Fatalf("input has %d meta_tool calls, want 3", len(slots))
	}
	teacher := &noiseTeacher{answers: map[string][]string{
		slots[0]: {`{"name":"meta_tool","arguments":{"tool_description":"Get the weather forecast for a place","param_description":["The place to forecast","celsius or fahrenheit"]}}`},
	}}
	st := noiseBuild(t, NoiseConfig{}, teacher, &mtEmbedder{})
	out := mtProcess(t, st, in)
	var got []string
	for i, m := range out.Messages {
		for j, c := range m.Calls {
			if c.Name == verify.MetaTool {
				got = append(got, string(c.Arguments))
			}
			if c.Name != verify.MetaTool && string(c.Arguments) != string(in.Messages[i].Calls[j].Arguments) {
				t.Errorf("messages[%d]: a regular call changed", i)
			}
		}
		for j, r := range m.Results {
			if r != in.Messages[i].Results[j] {
				t.Errorf("messages[%d]: result %d changed; the tool turn must keep the original definition", i, j)
			}
		}
	}
	if want := `{"tool_description":"Get the weather forecast for a place","param_description":["The place to forecast","celsius or fahrenheit"]}`; got[0] != want {
		t.Errorf("first call %s, want %s", got[0], want)
	}
	sim, err := strconv.ParseFloat(out.Tag("noise_similarity"), 64)
	if err != nil || sim < 0.9 || sim >= 1 {
		t.Errorf("noise_similarity tag %q", out.Tag("noise_similarity"))
	}
	if n := len(out.Lineage); n == 0 || out.Lineage[n-1] != (record.Step{Stage: "noise", Provider: "fake", Model: "m1"}) {
		t.Errorf("lineage %v", out.Lineage)
	}
	if in.Tag("noise_similarity") != "" {
		t.Error("Process changed its input")
	}
	// The request carries the call as the prompt shows it.
	req := teacher.asked(slots[0])[0]
	if req.Stage != "noise@1" || req.Template == "" || !strings.Contains(req.Messages[len(req.Messages)-1].Content, `{"name":"meta_tool","arguments":`+noiseWeather+`}`) {
		t.Errorf("request %+v", req)
	}
}

func TestNoiseReasksThenAccepts(t *testing.T) {
	in := noiseInput(t)
	slot := metaSlots(in)[0]
	teacher := &noiseTeacher{answers: map[string][]string{slot: {
		`Here you go: ` + noiseGood,
		`{"name":"meta_tool","arguments":{"tool_description":"x"}}`,
		noiseGood,
	}}}
	st := noiseBuild(t, NoiseConfig{Attempts: 3}, teacher, &mtEmbedder{})
	mtProcess(t, st, in)
	reqs := teacher.asked(slot)
	if len(reqs) != 3 {
		t.Fatalf("asked %d times, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Attempt != i {
			t.Errorf("ask %d has Attempt %d", i, r.Attempt)
		}
	}
	// The re-asks quote the problem back to the teacher.
	last := reqs[2].Messages[len(reqs[2].Messages)-1].Content
	if !strings.Contains(last, `missing key(s) "param_description"`) {
		t.Errorf("re-ask does not explain the problem: %q", last)
	}
}

func TestNoiseRejects(t *testing.T) {
	lowSim := `{"name":"meta_tool","arguments":{"tool_description":"Book a table at a restaurant","param_description":["Number of guests","Time of the booking"]}}`
	tests := []struct {
		name    string
		answers []string
		want    string
	}{
		{"low similarity", []string{lowSim}, NoiseLowSimilarity},
		{"invalid json", []string{`{"name": "meta_tool", `}, NoiseInvalidJSON},
		{"bad shape", []string{`{"name":"meta_tool","arguments":{"tool_description":"x","param_description":["a"]}}`}, NoiseBadShape},
		// The last failure decides the reason.
		{"bad then low", []string{`nope`, lowSim}, NoiseLowSimilarity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := noiseInput(t)
			slot := metaSlots(in)[0]
			teacher := &noiseTeacher{answers: map[string][]string{slot: tt.answers}}
			st := noiseBuild(t, NoiseConfig{Attempts: 2}, teacher, &mtEmbedder{})
			_, err := st.Process(context.Background(), in)
			if reason, ok := contract.ReasonOf(err); !ok || reason != tt.want {
				t.Fatalf("err = %v, want reject %s", err, tt.want)
			}
			if n := len(teacher.asked(slot)); n != 2 {
				t.Errorf("asked %d times, want 2", n)
			}
		})
	}
}

func TestNoiseEarliestCallDecides(t *testing.T) {
	in := noiseInput(t)
	slots := metaSlots(in)
	teacher := &noiseTeacher{answers: map[string][]string{
		slots[1]: {`not json`},
		slots[2]: {`{"name":"x","arguments":{}}`},
	}}
	st := noiseBuild(t, NoiseConfig{Attempts: 1}, teacher, &mtEmbedder{})
	for range 5 {
		_, err := st.Process(context.Background(), in)
		if reason, _ := contract.ReasonOf(err); reason != NoiseInvalidJSON || !strings.HasPrefix(err.Error(), "messages[7].calls[0]") {
			t.Fatalf("err = %v, want the earlier call's noise_invalid_json", err)
		}
	}
}

func TestNoiseThreshold(t *testing.T) {
	// The same answer passes or fails depending on threshold.
	in := noiseInput(t)
	slot := metaSlots(in)[0]
	answer := `{"name":"meta_tool","arguments":{"tool_description":"Get the weather forecast for a place","param_description":["The place to forecast","celsius or fahrenheit"]}}`
	orig, _ := parseMetaToolArgs(json.RawMessage(noiseWeather))
	q, _ := parseNoiseAnswer(answer, 2)
	sim, err := toollib.Similarity(context.Background(), &mtEmbedder{}, 0.5, orig, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		threshold float64
		ok        bool
	}{{sim - 0.01, true}, {sim + 0.01, false}} {
		teacher := &noiseTeacher{answers: map[string][]string{slot: {answer}}}
		st := noiseBuild(t, NoiseConfig{Threshold: c.threshold, Attempts: 1}, teacher, &mtEmbedder{})
		_, err := st.Process(context.Background(), in)
		if (err == nil) != c.ok {
			t.Errorf("threshold %.4f (similarity %.4f): err = %v", c.threshold, sim, err)
		}
	}
	// At threshold 1 a rewrite equal to the original passes (its cosine
	// came out just below 1), and so does the offline stand-in, which falls
	// back to the unchanged call.
	same := `{"name":"meta_tool","arguments":` + noiseWeather + `}`
	teacher := &noiseTeacher{answers: map[string][]string{slot: {same}}}
	if _, err := noiseBuild(t, NoiseConfig{Threshold: 1, Attempts: 1}, teacher, &mtEmbedder{}).Process(context.Background(), in); err != nil {
		t.Errorf("threshold 1, the original itself: %v", err)
	}
	if _, err := noiseBuild(t, NoiseConfig{Threshold: 1}, noiseOffline(), noiseOfflineEmbedder(t)).Process(context.Background(), in); err != nil {
		t.Errorf("threshold 1, offline: %v", err)
	}
}

func TestNoisePassesRecordsWithoutMetaTool(t *testing.T) {
	teacher := &noiseTeacher{}
	st := noiseBuild(t, NoiseConfig{}, teacher, &mtEmbedder{})
	in := mtSingle("noise:none")
	out := mtProcess(t, st, in)
	if out != in || len(teacher.reqs) != 0 {
		t.Errorf("a record without meta_tool calls must pass unchanged and unasked")
	}
}

func TestParseMetaToolArgs(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{`{"tool_description":"x","param_description":[]}`, ""},
		{` {"param_description":["a","b"],"tool_description":"x"} `, ""},
		{`{"tool_description":"x","param_description":[]} x`, "trailing data"},
		{`{"tool_description":"x","param_description":[]}{}`, "trailing data"},
		{`{"tool_description":"x"}`, `missing key(s) "param_description"`},
		{`[]`, "want a JSON object, got an array"},
		{`{"tool_description":"x","param_description":[],"k":1}`, `unexpected key(s) "k"`},
	}
	for _, tt := range tests {
		q, err := parseMetaToolArgs(json.RawMessage(tt.in))
		switch {
		case tt.err == "" && (err != nil || q.Description != "x" || q.Params == nil):
			t.Errorf("%s: %+v, %v", tt.in, q, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: err = %v, want %q", tt.in, err, tt.err)
		}
	}
}

func TestNoiseBadInputCall(t *testing.T) {
	in := fxRecord("noise:bad", nil, fxUser("x"), fxCalls("meta_tool", `{"tool_description":"x"}`))
	st := noiseBuild(t, NoiseConfig{}, &noiseTeacher{}, &mtEmbedder{})
	_, err := st.Process(context.Background(), in)
	if reason, _ := contract.ReasonOf(err); reason != NoiseBadShape {
		t.Errorf("err = %v, want %s", err, NoiseBadShape)
	}
}

// noiseFailingEmbedder fails every request.
type noiseFailingEmbedder struct{}

func (noiseFailingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("embedder down")
}

func TestNoiseEmbedderFailureIsNotTheAnswers(t *testing.T) {
	in := noiseInput(t)
	teacher := &noiseTeacher{answers: map[string][]string{metaSlots(in)[0]: {noiseGood}}}
	st := noiseBuild(t, NoiseConfig{}, teacher, noiseFailingEmbedder{})
	_, err := st.Process(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "embedder down") {
		t.Fatalf("err = %v", err)
	}
	if reason, ok := contract.ReasonOf(err); ok {
		t.Errorf("an embedder failure became reject %q", reason)
	}
	if len(teacher.reqs) != 0 {
		t.Errorf("the teacher was asked %d times with the embedder down", len(teacher.reqs))
	}
}

func TestNoiseOfflineStandIn(t *testing.T) {
	for _, e := range []struct {
		name string
		emb  toollib.Embedder
	}{{"word embedder", &mtEmbedder{}}, {"offline embedder", noiseOfflineEmbedder(t)}} {
		t.Run(e.name, func(t *testing.T) {
			st := noiseBuild(t, NoiseConfig{}, noiseOffline(), e.emb)
			in := noiseInput(t)
			out := mtProcess(t, st, in)
			again := mtProcess(t, st, in)
			a, _ := json.Marshal(out)
			b, _ := json.Marshal(again)
			if string(a) != string(b) {
				t.Error("offline rewrite is not deterministic")
			}
			changed := 0
			for i, m := range out.Messages {
				for j, c := range m.Calls {
					if c.Name == verify.MetaTool && string(c.Arguments) != string(in.Messages[i].Calls[j].Arguments) {
						changed++
					}
				}
			}
			if changed == 0 {
				t.Error("the offline stand-in changed no call")
			}
			if out.Lineage[len(out.Lineage)-1].Provider != llm.ProviderOffline {
				t.Errorf("lineage %v", out.Lineage)
			}
		})
	}
}

func noiseOfflineEmbedder(t testing.TB) toollib.Embedder {
	t.Helper()
	e, err := llm.NewEmbedder(llm.EmbedderConfig{}, llm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestParaphrase(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	tests := []struct {
		in      string
		param   bool
		oneOf   []string // p = 1: every table word is swapped
		unequal bool
	}{
		{"Get the current traffic report", false, []string{"Retrieve the current traffic report", "Fetch the current traffic report", "Obtain the current traffic report",
			"Retrieve the current traffic report.", "Fetch the current traffic report.", "Obtain the current traffic report."}, false},
		// Words inside other words stay.
		{"together forget", false, []string{"together forget", "together forget."}, false},
		// "ID" is not title case: the replacement stays lower case.
		{"user ID", true, []string{"user identifier", "user identifier."}, false},
		{"The city and state, e.g. Los Angeles, CA", true, nil, true},
		{"获取指定城市的天气信息", true, nil, true},
		// No ASCII period after Chinese text.
		{"城市", true, []string{"城市", "城市。"}, false},
	}
	for _, tt := range tests {
		got := paraphrase(tt.in, 1, tt.param, rng())
		if tt.oneOf != nil && !slices.Contains(tt.oneOf, got) {
			t.Errorf("paraphrase(%q) = %q, want one of %q", tt.in, got, tt.oneOf)
		}
		if tt.unequal && got == tt.in {
			t.Errorf("paraphrase(%q) changed nothing", tt.in)
		}
		if got2 := paraphrase(tt.in, 1, tt.param, rng()); got2 != got {
			t.Errorf("paraphrase(%q) not deterministic: %q, %q", tt.in, got, got2)
		}
	}
	if got := paraphrase("Get the weather", 0, false, rng()); got != "Get the weather" {
		t.Errorf("p = 0 changed %q", got)
	}
	for _, s := range []string{"", ".", "The", "e.g."} {
		if got := paraphrase(s, 1, true, rng()); strings.TrimSpace(got) == "" && s != "" {
			t.Errorf("paraphrase(%q) = %q: emptied", s, got)
		}
	}
}

func TestNoiseConfig(t *testing.T) {
	var c NoiseConfig
	c.defaults()
	if c.Attempts != 3 || c.Threshold != 0.9 || *c.Alpha != 0.5 {
		t.Errorf("defaults %+v", c)
	}
	tests := []struct {
		cfg  NoiseConfig
		want string
	}{
		{NoiseConfig{Attempts: -1}, "attempts"},
		{NoiseConfig{Threshold: 1.2}, "threshold: 1.2 is outside (0, 1]"},
		{NoiseConfig{Threshold: -0.5}, "threshold"},
		{NoiseConfig{Alpha: mtPtr(2)}, "alpha"},
	}
	for _, tt := range tests {
		tt.cfg.defaults()
		if probs := tt.cfg.validate(); len(probs) != 1 || !strings.Contains(probs[0], tt.want) {
			t.Errorf("%+v: %v, want one problem about %q", tt.cfg, probs, tt.want)
		}
	}
	if _, err := (&NoiseConfig{}).build(&Env{Embedder: &mtEmbedder{}}); err == nil {
		t.Error("build without a teacher must fail")
	}
	if _, err := (&NoiseConfig{Prompt: "missing.tmpl"}).build(&Env{Teacher: noiseOffline(), Embedder: &mtEmbedder{}, Dir: t.TempDir()}); err == nil {
		t.Error("build with a missing prompt override must fail")
	}
}

// A rewrite after the teacher's inline thinking is read (one ask); thinking
// without a rewrite is rejected as such, not as invalid JSON.
func TestNoiseInlineThinking(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   string // reject reason; "" = accepted at once
	}{
		{"closed think block", "<think>\nZZTHINK reword it\n</think>\n\n" + noiseGood, ""},
		{"R1 form", "ZZTHINK reword it\n</think>\n\n```json\n" + noiseGood + "\n```", ""},
		{"unclosed think block", "<think>\nZZTHINK reword it " + noiseGood, llm.ReasonThinkingOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := noiseInput(t)
			slot := metaSlots(in)[0]
			teacher := &noiseTeacher{answers: map[string][]string{slot: {tt.answer}}}
			st := noiseBuild(t, NoiseConfig{Attempts: 2}, teacher, &mtEmbedder{})
			out, err := st.Process(context.Background(), in)
			if tt.want != "" {
				if reason, _ := contract.ReasonOf(err); reason != tt.want {
					t.Fatalf("err = %v, want reject %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(teacher.asked(slot)); n != 1 {
				t.Errorf("asked %d times, want 1", n)
			}
			if b, _ := json.Marshal(out); strings.Contains(string(b), "ZZTHINK") {
				t.Errorf("the thinking reached the record: %s", b)
			}
		})
	}
}
