package stages

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

func buildExport(t *testing.T, cfg ExportConfig) *exporter {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(fxEnv("export", nil))
	if err != nil {
		t.Fatal(err)
	}
	return st.(*exporter)
}

// exportOne renders r and returns its sample's turns as "from: value" lines.
func exportOne(t *testing.T, e *exporter, r *record.Record) *sample {
	t.Helper()
	out, err := e.Process(context.Background(), r)
	if err != nil {
		t.Fatalf("%s: %v", r.ID, err)
	}
	if len(out) != 1 {
		t.Fatalf("%s: %d records out", r.ID, len(out))
	}
	return renderedSample(t, out[0])
}

// renderedSample is the sample Process rendered into r.Rendered: the
// *sample itself (parquet) or read back from its JSON line (jsonl).
func renderedSample(t *testing.T, r *record.Record) *sample {
	t.Helper()
	switch v := r.Rendered.(type) {
	case *sample:
		return v
	case []byte:
		var s sample
		if !bytes.HasSuffix(v, []byte("\n")) || bytes.Count(v, []byte("\n")) != 1 {
			t.Fatalf("%s: not one JSON line: %q", r.ID, v)
		}
		if err := json.Unmarshal(v, &s); err != nil {
			t.Fatalf("%s: %v in %s", r.ID, err, v)
		}
		return &s
	}
	t.Fatalf("%s: no rendering carried (%T)", r.ID, r.Rendered)
	return nil
}

func withReasoning(r *record.Record, text string) *record.Record {
	r = r.Clone()
	for i := range r.Messages {
		if len(r.Messages[i].Calls) > 0 {
			r.Messages[i].Reasoning = text
		}
	}
	return r
}

func TestExportStyles(t *testing.T) {
	single := withReasoning(fxSingle(), "You want traffic. I will use get_traffic_report.")
	tests := []struct {
		name string
		cfg  ExportConfig
		rec  *record.Record
		want []string // the sample's turns, "from|value"
	}{{
		name: "function_call drops reasoning",
		cfg:  ExportConfig{},
		rec:  single,
		want: []string{
			"human|I need to check the traffic situation in Miami, Florida before I head out. Can you help with that?",
			`function_call|{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}`,
			`observation|{"status":"heavy","incidents":[{"road":"I-95","delay_min":20},{"road":"US-1"}]}`,
			"gpt|Traffic in Miami is heavy right now: expect 20 minutes of delay on I-95.",
		},
	}, {
		name: "function_call with thoughts in qwen3's thought words",
		cfg:  ExportConfig{Thoughts: true, Template: "qwen3"},
		rec:  single,
		want: []string{"", "function_call|<think>\nYou want traffic. I will use get_traffic_report.\n</think>\n\n" + `{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}`, "", ""},
	}, {
		name: "function_call with thoughts in glm4_7's thought words",
		cfg:  ExportConfig{Thoughts: true, Template: "glm4_7"},
		rec:  single,
		want: []string{"", `function_call|<think>You want traffic. I will use get_traffic_report.</think>{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}`, "", ""},
	}, {
		name: "parallel calls are one turn and one observation, both lists",
		cfg:  ExportConfig{},
		rec:  fxParallel(),
		want: []string{"",
			`function_call|[{"name": "get_stock_price", "arguments": {"symbol":"AAPL"}}, {"name": "get_stock_price", "arguments": {"symbol":"MSFT"}}, {"name": "get_local_time", "arguments": {"city":"New York"}}]`,
			`observation|[{"price":191.2}, {"price":402.5}, {"time":"09:41"}]`, ""},
	}, {
		name: "inline llama3: reasoning, python_tag, JSON list with parameters",
		cfg:  ExportConfig{Style: "inline"},
		rec:  single,
		want: []string{"", `gpt|You want traffic. I will use get_traffic_report.<|python_tag|>[{"name": "get_traffic_report", "parameters": {"location":"Miami, Florida"}}]`, "", ""},
	}, {
		name: "inline decision: token, reasoning, blank line, Python calls",
		cfg:  ExportConfig{Style: "inline", Surface: "decision"},
		rec: func() *record.Record {
			r := single.Clone()
			r.Messages[1].Content = "<|use_tool|>"
			r.Messages[3].Content = "<|answer|>" + r.Messages[3].Content
			return r
		}(),
		want: []string{"", `gpt|<|use_tool|>You want traffic. I will use get_traffic_report.` + "\n\n" + `[get_traffic_report(location="Miami, Florida")]`, "",
			"gpt|<|answer|>Traffic in Miami is heavy right now: expect 20 minutes of delay on I-95."},
	}, {
		name: "inline decision: a get_user_input reply's text, a blank line, the call",
		cfg:  ExportConfig{Style: "inline", Surface: "decision"},
		rec: fxRecord("fx:gui", []record.Tool{verify.GetUserInputDef()}, fxUser("Hi!"),
			askUser("<|answer|>Hello! What can I do for you?")),
		want: []string{"", "gpt|<|answer|>Hello! What can I do for you?\n\n[get_user_input()]"},
	}, {
		name: "inline tool_dc: think then tool_call",
		cfg:  ExportConfig{Style: "inline", Surface: "tool_dc"},
		rec:  single,
		want: []string{"", `gpt|<think>You want traffic. I will use get_traffic_report.</think><tool_call>[get_traffic_report(location="Miami, Florida")]</tool_call>`, "", ""},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := exportOne(t, buildExport(t, tt.cfg), tt.rec)
			if len(s.Conversations) != len(tt.want) {
				t.Fatalf("%d turns, want %d: %+v", len(s.Conversations), len(tt.want), s.Conversations)
			}
			for i, w := range tt.want {
				if w == "" {
					continue
				}
				if got := s.Conversations[i].From + "|" + s.Conversations[i].Value; got != w {
					t.Errorf("turn %d:\n got %s\nwant %s", i, got, w)
				}
			}
			tpl, _ := verify.LookupLFTemplate(tt.cfg.Template)
			v := verify.ShareGPT{Conversations: s.Conversations, Tools: s.toolsJSON(), Template: tpl}
			if ps := verify.CheckShareGPT(&v); len(ps) > 0 {
				t.Errorf("sample breaks LLaMA-Factory's rules: %v", ps)
			}
		})
	}
}

// An inline sample with tools (tools_placement system) has "[]" as its
// tools column and its tool definitions, with the call format of its
// surface, in its system text: from a non-empty column LLaMA-Factory
// renders the template's own tool prompt, which asks for a call format the
// inline targets do not use. A sample without tools keeps its system text.
func TestExportInlineSystemText(t *testing.T) {
	single := withReasoning(fxSingle(), "You want traffic. I will use get_traffic_report.")
	single.System = "You are a traffic assistant."
	tokens := single.Clone()
	tokens.Messages[1].Content = "<|use_tool|>"
	tokens.Messages[3].Content = "<|answer|>" + tokens.Messages[3].Content
	tokens.SetTag(DecisionTokensTag, "on")
	traffic := `{"name": "get_traffic_report", "description": "Get the current traffic report", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The city and state, e.g. Los Angeles, CA"}}, "required": ["location"]}}`
	plain := fxRecord("fx:chat", nil, fxUser("Where is Boston?"), fxSay("In Massachusetts."))
	plain.System = "Be brief."
	// As meta_tool writes it with get_user_input: true: every answer is a
	// get_user_input call keeping its text.
	asks := single.Clone()
	asks.Tools = append(asks.Tools, verify.GetUserInputDef())
	asks.Messages[3] = askUser(asks.Messages[3].Content)
	asksTokens := asks.Clone()
	asksTokens.Messages[1].Content = "<|use_tool|>"
	asksTokens.Messages[3].Content = "<|answer|>" + asksTokens.Messages[3].Content
	asksTokens.SetTag(DecisionTokensTag, "on")
	// A source row that lists get_user_input but answers in plain text.
	listsOnly := single.Clone()
	listsOnly.Tools = append(listsOnly.Tools, verify.GetUserInputDef())
	const plainText = "answer in plain text"
	tests := []struct {
		name      string
		cfg       ExportConfig
		rec       *record.Record
		want, not []string // in and not in the system text
	}{{
		name: "llama3",
		cfg:  ExportConfig{Style: "inline", Template: "llama3"},
		rec:  single,
		want: []string{traffic, "<|python_tag|>", `[{"name": "function_name", "parameters": {`, "When no call is needed, answer in plain text."},
		not:  []string{"<tool_call>", "Python call syntax", "Begin a reply", "get_user_input"},
	}, {
		// A record listing get_user_input answers with a call of it: the
		// text says so, not "answer in plain text".
		name: "llama3 with get_user_input",
		cfg:  ExportConfig{Style: "inline", Template: "llama3"},
		rec:  asks,
		want: []string{traffic, `then call get_user_input with no parameters: <|python_tag|>[{"name": "get_user_input", "parameters": {}}].`},
		not:  []string{plainText},
	}, {
		// Listing get_user_input is not answering with it: the plain
		// answers keep the plain-text instruction.
		name: "llama3 listing get_user_input, answering in plain text",
		cfg:  ExportConfig{Style: "inline", Template: "llama3"},
		rec:  listsOnly,
		want: []string{"When no call is needed, answer in plain text."},
		not:  []string{"then call get_user_input"},
	}, {
		name: "decision with tokens and get_user_input",
		cfg:  ExportConfig{Style: "inline", Surface: "decision", Template: "breeze", decision: &DecisionTokensConfig{AnswerToken: DefaultAnswerToken, UseToolToken: DefaultUseToolToken}},
		rec:  asksTokens,
		want: []string{traffic, "leave a blank line after it, then call get_user_input with no arguments: [get_user_input()].",
			"calls functions with <|use_tool|>.", "without calling a tool with <|answer|>."},
		not: []string{plainText},
	}, {
		name: "tool_dc with get_user_input",
		cfg:  ExportConfig{Style: "inline", Surface: "tool_dc", Template: "qwen"},
		rec:  asks,
		want: []string{traffic, "then call get_user_input with no arguments: <think></think><tool_call>[get_user_input()]</tool_call>."},
		not:  []string{plainText},
	}, {
		name: "decision with tokens",
		cfg:  ExportConfig{Style: "inline", Surface: "decision", Template: "breeze", decision: &DecisionTokensConfig{AnswerToken: DefaultAnswerToken, UseToolToken: DefaultUseToolToken}},
		rec:  tokens,
		want: []string{traffic, "blank line", "Python call syntax", "[function_name(argument=",
			"calls functions with <|use_tool|>.", "without calling a tool with <|answer|>.", "When no call is needed, answer in plain text."},
		not: []string{"<|python_tag|>", "<tool_call>", "<think>"},
	}, {
		name: "decision without tokens names none",
		cfg:  ExportConfig{Style: "inline", Surface: "decision"},
		rec:  single,
		want: []string{traffic, "[function_name(argument="},
		not:  []string{"<|use_tool|>", "<|answer|>", "Begin a reply"},
	}, {
		name: "tool_dc",
		cfg:  ExportConfig{Style: "inline", Surface: "tool_dc", Template: "qwen"},
		rec:  single,
		want: []string{traffic, "<think></think>", "<tool_call>[function_name(argument=", "When no function can be used, answer in plain text after it."},
		not:  []string{"<|python_tag|>", `"arguments"`, "get_user_input"},
	}, {
		name: "tool_dc to parquet",
		cfg:  ExportConfig{Style: "inline", Surface: "tool_dc", Template: "qwen", Format: "parquet"},
		rec:  single,
		want: []string{traffic, "<tool_call>[function_name(argument="},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := buildExport(t, tt.cfg)
			s := exportOne(t, e, tt.rec)
			if s.toolsJSON() != "[]" {
				t.Errorf("tools column %.80q, want []", s.toolsJSON())
			}
			if !strings.HasPrefix(s.System, tt.rec.System+"\n\n") {
				t.Errorf("system text does not start with the record's: %.80q", s.System)
			}
			list, err := toolsJSON(tt.rec.Tools)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range append(tt.want, spacedJSON(list)) {
				if !strings.Contains(s.System, w) {
					t.Errorf("system text lacks %q:\n%s", w, s.System)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(s.System, w) {
					t.Errorf("system text holds %q, which the surface does not use:\n%s", w, s.System)
				}
			}
			v := verify.ShareGPT{Conversations: s.Conversations, Tools: s.toolsJSON(), Template: e.tpl}
			if ps := verify.CheckShareGPT(&v); len(ps) > 0 {
				t.Errorf("sample breaks LLaMA-Factory's rules: %v", ps)
			}
			if p := exportOne(t, e, plain); p.System != "Be brief." || p.toolsJSON() != "[]" {
				t.Errorf("sample without tools: system %q, tools %q; want them as they were", p.System, p.toolsJSON())
			}
		})
	}
	// tools_placement role keeps the definitions in its tools message and
	// the system text as it is.
	role := buildExport(t, ExportConfig{Style: "inline", Surface: "decision", ToolsPlacement: "role"})
	out, err := role.Process(context.Background(), single)
	if err != nil {
		t.Fatal(err)
	}
	line := string(out[0].Rendered.([]byte))
	if !strings.Contains(line, `{"role":"tools","content":"[{\"name\": \"get_traffic_report\"`) || !strings.Contains(line, `{"role":"system","content":"You are a traffic assistant."}`) {
		t.Errorf("role placement changed: %s", line)
	}
}

// An export's prompt overrides the surface's system text; it must be one
// system section naming only inlineSystem's fields, and applies to inline
// samples with tools_placement system only.
func TestExportInlinePrompt(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.tmpl", "doc\n-- system --\n{{.System}}|{{.Tools}}|{{.UseToolToken}}|{{.AnswerToken}}{{if .GetUserInput}}|{{.GetUserInput}}{{end}}\n")
	write("user.tmpl", "-- user --\n{{.Tools}}\n")
	write("two.tmpl", "-- system --\n{{.Tools}}\n-- system --\nagain\n")
	write("field.tmpl", "-- system --\n{{.Functions}}\n")
	// Prompts whose samples would call functions defined nowhere: the
	// tools column of an inline sample is empty.
	write("notools.tmpl", "my prompt\n-- system --\n{{.System}}\n")
	write("empty.tmpl", "-- system --\n")
	write("sometimes.tmpl", "-- system --\n{{.System}}{{if .System}}\n\n{{.Tools}}{{end}}\n")
	write("comment.tmpl", "-- system --\n{{/* {{.Tools}} */}}{{.System}}\n")
	build := func(cfg ExportConfig) (*exporter, error) {
		cfg.defaults()
		if probs := cfg.validate(); len(probs) > 0 {
			return nil, errors.New(strings.Join(probs, "; "))
		}
		env := fxEnv("export", nil)
		env.Dir = dir
		st, err := cfg.build(env)
		if err != nil {
			return nil, err
		}
		return st.(*exporter), nil
	}
	e, err := build(ExportConfig{Style: "inline", Surface: "decision", Prompt: "ok.tmpl", decision: &DecisionTokensConfig{AnswerToken: "<|say|>", UseToolToken: "<|act|>"}})
	if err != nil {
		t.Fatal(err)
	}
	r := fxRecord("fx:one", []record.Tool{fxTraffic}, fxUser("Traffic?"), fxCalls("get_traffic_report", `{"location":"Miami"}`))
	r.Messages[1].Content = "<|act|>"
	r.SetTag(DecisionTokensTag, "on")
	if got, want := exportOne(t, e, r).System, `|[{"name": "get_traffic_report", "description": "Get the current traffic report", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The city and state, e.g. Los Angeles, CA"}}, "required": ["location"]}}]|<|act|>|<|say|>`; got != want {
		t.Errorf("system text\n got %q\nwant %q", got, want)
	}
	r.Tools = append(r.Tools, verify.GetUserInputDef())
	r.SetTag("world", "closed") // as meta_tool made it: its answers are get_user_input calls
	if got := exportOne(t, e, r).System; !strings.HasSuffix(got, `]|<|act|>|<|say|>|get_user_input`) {
		t.Errorf("system text of a record answering with get_user_input: %q", got)
	}
	for name, wantErr := range map[string]string{"user.tmpl": "want one system section", "two.tmpl": "want one system section", "field.tmpl": "Functions",
		"notools.tmpl": "notools.tmpl: its system section does not always render {{.Tools}}", "empty.tmpl": "does not always render {{.Tools}}",
		"sometimes.tmpl": "does not always render {{.Tools}}", "comment.tmpl": "does not always render {{.Tools}}"} {
		if _, err := build(ExportConfig{Style: "inline", Prompt: name}); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("prompt %s: error %v, want %q", name, err, wantErr)
		}
	}
	for _, cfg := range []ExportConfig{{Prompt: "ok.tmpl"}, {Style: "inline", ToolsPlacement: "role", Prompt: "ok.tmpl"}} {
		if _, err := build(cfg); err == nil || !strings.Contains(err.Error(), "prompt applies to style inline with tools_placement system only") {
			t.Errorf("%+v: error %v", cfg, err)
		}
	}
}

// The system text of an inline sample names both decision tokens of the
// decision_tokens stage before the export whenever its record went through
// that stage, whatever its turns start with: a negative (answer token
// alone) and a call (use-tool token) with the same tools get the same
// text, so the prompt does not tell the answer (seed 002 §3.2's tokens are
// there for the model to decide from the query; at inference the prompt is
// fixed). The tokens are the pipeline's, custom ones included; a record the
// stage did not mark names none.
func TestExportInlineDecisionTokens(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`sources: [{path: a.json, format: xlam}]
stages:
  - decision_tokens: {answer_token: "<|say|>", use_tool_token: "<|act|>"}
  - export: {style: inline, surface: decision, template: breeze}
`))
	if err != nil {
		t.Fatal(err)
	}
	dt, err := p.Stages[0].DecisionTokens.build(fxEnv("decision_tokens", nil))
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stages[1].Export.build(fxEnv("export", nil))
	if err != nil {
		t.Fatal(err)
	}
	e := st.(*exporter)
	tools := []record.Tool{fxTraffic, fxStock}
	marked := func(r *record.Record) *record.Record {
		out, err := dt.Process(context.Background(), r)
		if err != nil || len(out) != 1 {
			t.Fatalf("decision_tokens: %v, %d records", err, len(out))
		}
		return out[0]
	}
	call := exportOne(t, e, marked(fxRecord("fx:call", tools, fxUser("Traffic in Miami?"), fxCalls("get_traffic_report", `{"location":"Miami"}`))))
	negative := exportOne(t, e, marked(fxRecord("fx:neg", tools, fxUser("Order me a pizza."), fxSay(""))))
	if !strings.HasPrefix(call.Conversations[1].Value, "<|act|>") || negative.Conversations[1].Value != "<|say|>" {
		t.Fatalf("turns %q, %q: want <|act|>… and <|say|>", call.Conversations[1].Value, negative.Conversations[1].Value)
	}
	for _, tok := range []string{"<|act|>", "<|say|>"} {
		for _, s := range []*sample{call, negative} {
			if !strings.Contains(s.System, tok) {
				t.Errorf("system text lacks %s:\n%s", tok, s.System)
			}
		}
	}
	if call.System != negative.System {
		t.Errorf("a call's and a negative's system text differ (the prompt tells the answer):\n%s\n---\n%s", call.System, negative.System)
	}
	plain := exportOne(t, e, fxRecord("fx:plain", tools, fxUser("Traffic in Miami?"), fxCalls("get_traffic_report", `{"location":"Miami"}`)))
	if strings.Contains(plain.System, "<|") {
		t.Errorf("a record decision_tokens did not mark names tokens:\n%s", plain.System)
	}
}

// An export takes the decision tokens of the last decision_tokens stage
// that runs before it: a skipped one, or one after it, gives it none.
func TestPipelineExportDecisionTokens(t *testing.T) {
	tests := []struct {
		name, stages string
		want         []string // each export's use-tool token, "" for none
	}{
		{"none", "  - export: {style: inline}\n", []string{""}},
		{"default", "  - decision_tokens: {}\n  - export: {style: inline}\n", []string{DefaultUseToolToken}},
		{"the last one", "  - decision_tokens: {use_tool_token: '<|a|>'}\n  - {name: again, decision_tokens: {use_tool_token: '<|b|>'}}\n  - export: {style: inline}\n", []string{"<|b|>"}},
		{"skipped", "  - decision_tokens: {use_tool_token: '<|a|>'}\n  - {name: again, decision_tokens: {use_tool_token: '<|b|>'}, skip: true}\n  - export: {style: inline}\n", []string{"<|a|>"}},
		{"after an export", "  - {name: first, export: {style: inline}}\n  - decision_tokens: {}\n  - export: {style: inline}\n", []string{"", DefaultUseToolToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte("sources: [{path: a.json, format: xlam}]\nstages:\n"+tt.stages))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range p.Stages {
				if s.Export == nil {
					continue
				}
				tok := ""
				if s.Export.decision != nil {
					tok = s.Export.decision.UseToolToken
				}
				got = append(got, tok)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("exports' use-tool tokens %q, want %q", got, tt.want)
			}
		})
	}
}

// The tools column is what encoding/json makes of the tools, with the
// schemas embedded as they are and no HTML escaping.
func TestExportToolsJSON(t *testing.T) {
	tools := []record.Tool{fxWeather, {Name: "Tide <Table> & \"co\"", Description: "潮汐 times\n", Parameters: json.RawMessage(`{"type":"object","properties":{}}`),
		Response: json.RawMessage(`{"type":"object"}`)}, {Name: "bare"}}
	got, err := toolsJSON(tools)
	if err != nil {
		t.Fatal(err)
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Response    json.RawMessage `json:"response,omitempty"`
	}
	var want []tool
	for _, t := range tools {
		p := t.Parameters
		if len(p) == 0 {
			p = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		want = append(want, tool{t.Name, t.Description, p, t.Response})
	}
	wb, _ := jsonout.Marshal(want)
	if got != string(wb) {
		t.Errorf("tools JSON\n got %s\nwant %s", got, wb)
	}
	if _, err := toolsJSON([]record.Tool{{Name: " "}}); err == nil {
		t.Error("a tool without a name must be an error")
	}
	if _, err := toolsJSON([]record.Tool{{Name: "x", Parameters: json.RawMessage(`[]`)}}); err == nil {
		t.Error("parameters that are not an object must be an error")
	}
}

// Records LLaMA-Factory would drop or crash on are rejected with the rule.
func TestExportRejects(t *testing.T) {
	e := buildExport(t, ExportConfig{})
	tests := []struct {
		name   string
		rec    *record.Record
		reason string
	}{
		{"no assistant turn", fxRecord("x:1", nil, fxUser("hello")), "export_no_assistant_turn"},
		{"starts with the assistant", fxRecord("x:2", nil, fxSay("hi"), fxUser("hello"), fxSay("bye")), verify.ReasonLFRoleOrder},
		{"two user turns in a row", fxRecord("x:3", nil, fxUser("a"), fxUser("b"), fxSay("c")), verify.ReasonLFRoleOrder},
		{"arguments not an object", fxRecord("x:4", []record.Tool{fxTime}, fxUser("time?"), fxCalls("get_local_time", `["Paris"]`)), "export_bad_call"},
		{"empty answer", fxRecord("x:5", nil, fxUser("a"), fxSay(" ")), verify.ReasonEmptyTurn},
	}
	for _, tt := range tests {
		_, err := e.Process(context.Background(), tt.rec)
		if got, _ := contract.ReasonOf(err); got != tt.reason {
			t.Errorf("%s: reason %q (%v), want %q", tt.name, got, err, tt.reason)
		}
	}
	// A dialogue ending on a user turn is cut after its last assistant turn.
	r := fxRecord("x:6", nil, fxUser("a"), fxSay("b"), fxUser("c"))
	if s := exportOne(t, e, r); len(s.Conversations) != 2 {
		t.Errorf("trailing user turn kept: %+v", s.Conversations)
	}
}

// WriteShard and Finish make a directory LLaMA-Factory loads: dataset_info.json
// naming a folder of one file type.
func TestExportWritesDatasetDir(t *testing.T) {
	dir := t.TempDir()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, format := range []string{"jsonl", "parquet"} {
		e := buildExport(t, ExportConfig{Dataset: "demo_" + format, Format: format})
		var recs []*record.Record
		for _, r := range fxAll() {
			out, err := e.Process(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if out[0] == r || r.Rendered != nil {
				t.Fatal("Process changed its input record instead of returning a copy carrying the sample")
			}
			recs = append(recs, out...)
		}
		refs, rejects, err := e.WriteShard(context.Background(), root, "fx-00000", recs)
		if err != nil || len(rejects) != 0 || len(refs) != 1 || refs[0].Rows != int64(len(recs)) {
			t.Fatalf("%s: refs %+v rejects %v err %v", format, refs, rejects, err)
		}
		if _, err := e.Finish(root, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "demo_"+format, "part-fx-00000."+format)); err != nil {
			t.Error(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "dataset_info.json"))
	if err != nil || !strings.Contains(string(b), `"file_name": "demo_parquet"`) || !strings.Contains(string(b), `"formatting": "sharegpt"`) {
		t.Errorf("dataset_info.json: %s %v", b, err)
	}
}

// appendLine and writeJSONString write exactly what encoding/json writes.
func TestAppendLineMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "tabs\tand\nnewlines\r", "<html> & co", "潮汐表 🌊",
		"bell \a and \b \f \x00", "line\u2028sep\u2029", "bad \xff utf8", "mixed é\"\n\u2028"}
	for _, v := range strs {
		s := &sample{Conversations: []verify.Turn{{From: "human", Value: v}, {From: "gpt", Value: v + "!"}}, System: v, Tools: "[" + v + "]"}
		got := bytes.NewBuffer(appendLine(nil, s))
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		if got.String() != want.String() {
			t.Errorf("%q:\n got %s\nwant %s", v, got.String(), want.String())
		}
	}
}

// TestToolMemo: tool lists rendered through the exporter's memo of tools —
// tools met first or again (in new memory or the same), of one name with
// different definitions or sharing parameters in memory, whose
// fields' bytes could run into each other, not UTF-8, with characters JSON
// escapes, and with the memo full — give toolsJSON's string, and their
// samples encoding/json's line (the tools string spliced from the tools'
// quoted texts); bad tools are errors, not remembered.
func TestToolMemo(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	lists := [][]record.Tool{
		nil,
		{{Name: "a", Description: "d", Parameters: obj}},
		{{Name: "a", Description: "d", Parameters: obj, Response: json.RawMessage(`{"r":1}`)}},
		{{Name: "ad", Description: "", Parameters: obj}},
		{{Name: "a", Description: "e", Parameters: obj}}, // parameters in the same memory as others
		{{Name: "a", Description: "d"}, {Name: "b", Description: "<&>\"x\"\n"}},
		{{Name: "b", Description: "<&>\"x\"\n"}, {Name: "a", Description: "d", Parameters: obj}},
		{{Name: "u", Description: "bad \xff and cut \xe6\xbd"}, {Name: "v\xe6", Description: "line\u2028sep\u2029 bell \a 潮汐"}},
		{{Name: "w", Description: "x", Parameters: json.RawMessage(`{"type":"object","description":"\xff \u2028"}`)}, {Name: "a", Description: "d"}},
		{{Name: "a", Description: "d"}, {Name: " ", Description: "d"}},
		{{Name: "x", Parameters: json.RawMessage(`[]`)}},
	}
	check := func(t *testing.T, e *exporter, round int) {
		for i, tools := range lists {
			texts, gotErr := e.toolTexts(tools)
			got := toolsString(texts)
			want, wantErr := toolsJSON(tools)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("round %d, list %d: got %v, want %v", round, i, gotErr, wantErr)
			}
			if gotErr != nil {
				continue
			}
			if got != want {
				t.Errorf("round %d, list %d: got %s, want %s", round, i, got, want)
			}
			s := &sample{Conversations: []verify.Turn{{From: "human", Value: "q"}}, tools: texts}
			if !s.spliced() {
				t.Errorf("round %d, list %d: not spliced", round, i)
			}
			line := bytes.NewBuffer(appendLine(nil, s))
			var enc bytes.Buffer
			en := json.NewEncoder(&enc)
			en.SetEscapeHTML(false)
			en.Encode(&sample{Conversations: s.Conversations, Tools: want})
			if line.String() != enc.String() {
				t.Errorf("round %d, list %d: line\n got %s\nwant %s", round, i, line.String(), enc.String())
			}
		}
	}
	remembered := func(m *toolMemo) int {
		n := 0
		for _, v := range m.slots {
			n += len(v)
		}
		return n
	}
	e := buildExport(t, ExportConfig{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for round := range 3 {
				check(t, e, round)
			}
		})
	}
	wg.Wait()
	if n := remembered(&e.tools); n != 9 {
		t.Errorf("memo holds %d tools, want the 9 distinct good ones", n)
	}
	// More tools of the same field lengths than a slot holds: the rest
	// are rendered each time, to the same bytes.
	var same []record.Tool
	for i := range toolMemoVariants + 4 {
		same = append(same, record.Tool{Name: fmt.Sprintf("t%02d", i), Description: fmt.Sprintf("\"d%02d\"", i), Parameters: obj})
	}
	lists = append(lists, same, slices.Clone(same))
	crowded := buildExport(t, ExportConfig{})
	for round := range 2 {
		check(t, crowded, round)
	}
	if n := len(crowded.tools.slots[lenSlot(&same[0])]); n != toolMemoVariants {
		t.Errorf("the crowded slot holds %d tools, want %d", n, toolMemoVariants)
	}
	full := buildExport(t, ExportConfig{})
	full.tools.used = toolMemoBudget
	check(t, full, 0)
	if n := remembered(&full.tools); n != 0 {
		t.Errorf("over the budget: %d tools remembered", n)
	}
}

// Issue 16: the demo's thoughts: true export wrote <think>…</think>, which
// qwen3's function formatter cannot read (its thought words have newlines);
// for qwen3 the export now writes them, and a template without a reasoning
// class refuses thoughts.
func TestExportThoughtsForTemplate(t *testing.T) {
	qwen3, _ := verify.LookupLFTemplate("qwen3")
	old := `<think>You want traffic.</think>{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}`
	if _, err := qwen3.ReadFunction(old); err == nil {
		t.Fatal("the old thought form must fail qwen3's function formatter")
	}
	s := exportOne(t, buildExport(t, ExportConfig{Thoughts: true, Template: "qwen3"}), withReasoning(fxSingle(), "You want traffic."))
	ft, err := qwen3.ReadFunction(s.Conversations[1].Value)
	if err != nil || ft.Prefix != "<think>\nYou want traffic.\n</think>\n\n" || len(ft.Calls) != 1 {
		t.Errorf("qwen3 reads %q as %+v, %v", s.Conversations[1].Value, ft, err)
	}
	for _, cfg := range []ExportConfig{{Thoughts: true}, {Thoughts: true, Template: "qwen"}, {Thoughts: true, Template: "mistral"}} {
		cfg.defaults()
		if probs := cfg.validate(); len(probs) != 1 || !strings.Contains(probs[0], "does not train thoughts") {
			t.Errorf("%+v: %v", cfg, probs)
		}
	}
}

// Issue 16: glm4's tool format raises on parallel calls. The export rejects
// them (lf_template_no_parallel) or, with parallel: split, writes one call
// and its result at a time.
func TestExportParallelForGLM4(t *testing.T) {
	glm4, _ := verify.LookupLFTemplate("glm4")
	// What the export wrote before: one function_call turn with a list.
	old := exportOne(t, buildExport(t, ExportConfig{}), fxParallel())
	if _, err := glm4.ReadFunction(old.Conversations[1].Value); err == nil {
		t.Fatal("a list of calls must fail glm4's function formatter")
	}
	_, err := buildExport(t, ExportConfig{Template: "glm4"}).Process(context.Background(), fxParallel())
	if reason, _ := contract.ReasonOf(err); reason != verify.ReasonLFNoParallel {
		t.Errorf("parallel: reject gave %v", err)
	}
	split := buildExport(t, ExportConfig{Template: "glm4", Parallel: "split"})
	s := exportOne(t, split, fxParallel())
	var got []string
	for _, c := range s.Conversations {
		got = append(got, c.From+"|"+c.Value)
	}
	want := []string{
		"human|Compare the share prices of Apple and Microsoft, and what time is it in New York?",
		`function_call|{"name": "get_stock_price", "arguments": {"symbol":"AAPL"}}`, `observation|{"price":191.2}`,
		`function_call|{"name": "get_stock_price", "arguments": {"symbol":"MSFT"}}`, `observation|{"price":402.5}`,
		`function_call|{"name": "get_local_time", "arguments": {"city":"New York"}}`, `observation|{"time":"09:41"}`,
		"gpt|Apple trades at 191.2 and Microsoft at 402.5; it is 09:41 in New York.",
	}
	if !slices.Equal(got, want) {
		t.Errorf("split:\n%s", strings.Join(got, "\n"))
	}
	if ps := verify.CheckShareGPT(&verify.ShareGPT{Conversations: s.Conversations, Tools: s.toolsJSON(), Template: glm4}); len(ps) > 0 {
		t.Errorf("split sample: %v", ps)
	}
	// A dialogue ending on the parallel calls ends on the last one.
	r := fxParallel()
	r.Messages = r.Messages[:3]
	s = exportOne(t, split, r)
	if n := len(s.Conversations); n != 6 || s.Conversations[n-1].From != "function_call" {
		t.Errorf("split at the end: %+v", s.Conversations)
	}
	// Decision tokens: every split call turn starts with the turn's token,
	// as a call turn of a record decision_tokens marked does.
	r = fxParallel()
	r.Messages[1].Content = "<|use_tool|>"
	r.SetTag(DecisionTokensTag, "on")
	s = exportOne(t, split, r)
	var calls []string
	for _, c := range s.Conversations {
		if c.From == "function_call" {
			calls = append(calls, c.Value)
		}
	}
	if len(calls) != 3 || slices.ContainsFunc(calls, func(v string) bool { return !strings.HasPrefix(v, "<|use_tool|><tool_call>") }) {
		t.Errorf("split call turns of a tokened turn: %q", calls)
	}
	// Results that do not answer the calls one by one cannot be split.
	r = fxParallel()
	r.Messages[2].Results = r.Messages[2].Results[:2]
	if _, err := split.Process(context.Background(), r); err == nil {
		t.Error("split with missing results must be rejected")
	}
}

// Issue 17 points 1 and 2: the text of a get_user_input turn and decision
// tokens stay in function_call exports, before the calls inside the
// template's tool-call words, and the template's formatter reads them
// back; a template that renders calls alone rejects such a turn.
func TestExportCallText(t *testing.T) {
	gui := fxRecord("fx:gui", []record.Tool{verify.GetUserInputDef()},
		fxUser("What is NLP?"),
		record.Message{Role: record.RoleAssistant, Content: "NLP is the field of computing that handles human language.",
			Calls: []record.Call{{Name: verify.GetUserInput, Arguments: json.RawMessage(`{}`)}}},
		fxUser("Thanks"),
		record.Message{Role: record.RoleAssistant, Content: "<|use_tool|>You are welcome.",
			Calls: []record.Call{{Name: verify.GetUserInput, Arguments: json.RawMessage(`{}`)}}})
	tok := fxSingle()
	tok.Messages[1].Content = "<|use_tool|>"
	tok.Messages[3].Content = "<|answer|>" + tok.Messages[3].Content
	tok.SetTag(DecisionTokensTag, "on")
	tests := []struct {
		tpl  string
		rec  *record.Record
		turn int
		want string
	}{
		{"qwen", gui, 1, "NLP is the field of computing that handles human language.\n" + `<tool_call>{"name": "get_user_input", "arguments": {}}</tool_call>`},
		{"llama3", gui, 3, `<|use_tool|>You are welcome.` + "\n" + `<tool_call>{"name": "get_user_input", "arguments": {}}</tool_call>`},
		{"qwen3", tok, 1, `<|use_tool|><tool_call>{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}</tool_call>`},
		{"glm4", tok, 3, "<|answer|>Traffic in Miami is heavy right now: expect 20 minutes of delay on I-95."},
	}
	for _, tt := range tests {
		tpl, _ := verify.LookupLFTemplate(tt.tpl)
		s := exportOne(t, buildExport(t, ExportConfig{Template: tt.tpl}), tt.rec)
		if got := s.Conversations[tt.turn].Value; got != tt.want {
			t.Errorf("%s %s turn %d:\n got %q\nwant %q", tt.tpl, tt.rec.ID, tt.turn, got, tt.want)
		}
		if ps := verify.CheckShareGPT(&verify.ShareGPT{Conversations: s.Conversations, Tools: s.toolsJSON(), Template: tpl}); len(ps) > 0 {
			t.Errorf("%s: %v", tt.tpl, ps)
		}
		for i, m := range tt.rec.Messages {
			if m.Role != record.RoleAssistant || len(m.Calls) == 0 {
				continue
			}
			ft, err := tpl.ReadFunction(s.Conversations[i].Value)
			if err != nil || !strings.Contains(ft.Prefix, strings.TrimSpace(m.Content)) {
				t.Errorf("%s turn %d: the formatter keeps %q before the calls, want %q (%v)", tt.tpl, i, ft.Prefix, m.Content, err)
			}
		}
	}
	for _, name := range []string{"mistral", "gemma3"} {
		_, err := buildExport(t, ExportConfig{Template: name}).Process(context.Background(), gui)
		if reason, _ := contract.ReasonOf(err); reason != ReasonLFNoCallText {
			t.Errorf("%s: %v, want %s", name, err, ReasonLFNoCallText)
		}
	}
	// Text that holds the template's own tool-call words cannot be read
	// back as written: rejected, not written wrong.
	bad := gui.Clone()
	bad.Messages[1].Content = "Use <tool_call>x</tool_call> tags."
	_, err := buildExport(t, ExportConfig{Template: "qwen"}).Process(context.Background(), bad)
	if reason, _ := contract.ReasonOf(err); reason != verify.ReasonLFBadFunctionCall {
		t.Errorf("text with tool-call words: %v", err)
	}
}

// Issue 17 point 3: a record made with the offline teacher stops the export
// with a config error unless allow_offline is set; then the export counts
// it and dataset_info.json and train_lora.yaml say so.
func TestExportStandIn(t *testing.T) {
	r := fxSingle()
	r.AddStep("reason", "offline", "offline")
	r.SetTag("tokens", "900")
	_, err := buildExport(t, ExportConfig{}).Process(context.Background(), r)
	var cfgErr *ConfigError
	if !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), "allow_offline") {
		t.Fatalf("stand-in record without allow_offline: %v", err)
	}
	e := buildExport(t, ExportConfig{AllowOffline: true, Template: "qwen3", Thoughts: true, Model: "Qwen/Qwen3-8B"})
	ctx, ctr := withCounters()
	tok := fxSingle()
	tok.Messages[1].Content = "<|use_tool|>"
	tok.Messages[3].Content = "<|answer|>ok"
	tok.SetTag(DecisionTokensTag, "on")
	tok.SetTag("tokens", "3000")
	for _, rec := range []*record.Record{r, tok} {
		if _, err := e.Process(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	dir, root := tempRoot(t)
	notes, err := e.Finish(root, []manifests.Shard{{Counts: manifests.Counts{In: 2, Out: 2, Counters: ctr.m}}})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.ReadFile(filepath.Join(dir, "dataset_info.json"))
	train, _ := os.ReadFile(filepath.Join(dir, TrainLoRAFile))
	for _, want := range []string{`"stand_in_samples": 1`, `"template": "qwen3"`, `"samples": 2`} {
		if !strings.Contains(string(info), want) {
			t.Errorf("dataset_info.json lacks %s:\n%s", want, info)
		}
	}
	for _, want := range []string{"STAND-IN DATA: 1 of 2 samples", `model_name_or_path: "Qwen/Qwen3-8B"`, "template: qwen3\n",
		"enable_thinking: true\n", "cutoff_len: 4096\n", `add_special_tokens: "<|answer|>,<|use_tool|>"`, "dataset_dir: .\n"} {
		if !strings.Contains(string(train), want) {
			t.Errorf("train_lora.yaml lacks %q:\n%s", want, train)
		}
	}
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "stand-in data: 1 of 2 samples") }) {
		t.Errorf("notes: %v", notes)
	}
}

// withCounters returns a context whose Count calls land in the returned
// counters, as the runner's do.
func withCounters() (context.Context, *counters) {
	c := &counters{m: map[string]int64{}}
	return context.WithValue(context.Background(), countersKey{}, c), c
}

// BenchmarkExportProcess renders and checks real records (../shared/data)
// for a template with the default tool format and for qwen3 with thoughts,
// and, as measured/llama3, the same records with verify's tokens tag, for
// which the export counts the samples as LLaMA-Factory renders them.
func BenchmarkExportProcess(b *testing.B) {
	unmeasured := fxSharedRecords(b)
	measured := make([]*record.Record, len(unmeasured))
	for i, r := range unmeasured {
		measured[i] = r.Clone()
		measured[i].SetTag("tokens", strconv.Itoa(verify.RecordTokens(r)))
	}
	for _, c := range []struct {
		name string
		cfg  ExportConfig
		recs []*record.Record
	}{
		{"default", ExportConfig{Template: "default"}, unmeasured},
		{"qwen3", ExportConfig{Template: "qwen3", Thoughts: true}, unmeasured},
		{"measured/llama3", ExportConfig{Template: "llama3"}, measured},
	} {
		cfg, recs := c.cfg, c.recs
		b.Run(c.name, func(b *testing.B) {
			cfg.defaults()
			st, err := cfg.build(fxEnv("export", nil))
			if err != nil {
				b.Fatal(err)
			}
			e := st.(*exporter)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				r := recs[i%len(recs)]
				if _, err := e.Process(ctx, r); err != nil {
					if _, ok := contract.ReasonOf(err); !ok {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkAppendSample encodes the samples of real records (../shared/data)
// as the jsonl export writes them; MB/s are of the JSON written.
func BenchmarkAppendSample(b *testing.B) {
	recs := fxSharedRecords(b)
	cfg := ExportConfig{Template: "default"}
	cfg.defaults()
	st, err := cfg.build(fxEnv("export", nil))
	if err != nil {
		b.Fatal(err)
	}
	e := st.(*exporter)
	var samples []*sample
	var size int64
	var line []byte
	for _, r := range recs {
		if s, err := e.render(context.Background(), r, false); err == nil {
			samples = append(samples, s)
			line = appendLine(line[:0], s)
			size += int64(len(line))
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range samples {
			line = appendLine(line[:0], s)
		}
	}
}

// TestExportPreviewIsLine: the preview of a sample is its jsonl line, tools
// column included, whether the export writes jsonl (the tools spliced from
// their quoted texts) or parquet (the tools column kept as a string).
func TestExportPreviewIsLine(t *testing.T) {
	jl := buildExport(t, ExportConfig{})
	pq := buildExport(t, ExportConfig{Format: "parquet"})
	for _, r := range fxAll() {
		a, err := jl.Process(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pq.Process(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		line := string(appendLine(nil, a[0].Rendered.(*sample)))
		pa, okA := jl.Preview(a[0])
		pb, okB := pq.Preview(b[0])
		if !okA || !okB || pa != strings.TrimSuffix(line, "\n") || pb != pa {
			t.Errorf("%s: previews\njsonl   %s\nparquet %s\nline    %s", r.ID, pa, pb, line)
		}
		if len(r.Tools) > 0 && !strings.Contains(pa, `"tools":"[{\"name\":`) {
			t.Errorf("%s: preview without tools: %s", r.ID, pa)
		}
	}
}

// TestLeadingToken holds leadingToken to the rule it replaced: the text up
// to the first "|>", when that is past "<|" and holds no space, tab or
// newline.
func TestLeadingToken(t *testing.T) {
	for _, s := range []string{"<|", "<|>", "<||>", "<|a|>", "<|use_tool|>", "<|answer|>Hello", "<|answer|> x |> y", "<|a b|>", "<|a\tb|>",
		"<|a\nb|>", "<|ab", "<|a|", "<|a|>|>", "<|>a|>", "<||>x|>", "<|中文|>", "<| |>", "<|a|b|>", "<|a\r|>"} {
		want, wantOK := "", false
		if end := strings.Index(s, "|>"); end > 2 && !strings.ContainsAny(s[:end], " \t\n") {
			want, wantOK = s[:end+2], true
		}
		if got, ok := leadingToken(s); got != want || ok != wantOK {
			t.Errorf("leadingToken(%q) = %q, %v; want %q, %v", s, got, ok, want, wantOK)
		}
	}
}

// TestTokenKey: tokenKey gives the counter key of leadingToken's token
// whether the token was met before (found as a prefix) or not, with more
// tokens met than it tries as prefixes; texts whose start is a known
// token followed by more "|>" or blanks included.
func TestTokenKey(t *testing.T) {
	e := buildExport(t, ExportConfig{})
	texts := []string{"<|use_tool|>", "<|a|>", "<|a|>|>x", "<|a b|>", "<|answer|>Hello", "<|answer|> x |> y", "<|", "<|>",
		"<|use_tool|>{", "<|ab", "<||>x|>", "<|中文|>", "<|a|b|>", "<|a\r|>", "<|use_tool|>\n<|a|>", "<|a|"}
	for i := range 2 * knownTokensMax {
		texts = append(texts, fmt.Sprintf("<|t%d|> after", i), fmt.Sprintf("<|t%d|>", i), fmt.Sprintf("<|t%d|>|>", i%3))
	}
	for round := range 2 { // the second round meets every token again
		for _, s := range texts {
			want, wantOK := "", false
			if tok, ok := leadingToken(s); ok {
				want, wantOK = counterToken+tok, true
			}
			if got, ok := e.tokenKey(s); got != want || ok != wantOK {
				t.Errorf("round %d: tokenKey(%q) = %q, %v; want %q, %v", round, s, got, ok, want, wantOK)
			}
		}
	}
	if n := len(*e.knownTokens.Load()); n != knownTokensMax {
		t.Errorf("%d tokens tried as prefixes, want %d", n, knownTokensMax)
	}
}

// TestCountDecisionTokens: each decision token that starts an assistant
// turn is counted once per record, only when the decision_tokens stage
// ran on it; user turns and tokens later in a turn are not counted.
func TestCountDecisionTokens(t *testing.T) {
	e := buildExport(t, ExportConfig{})
	msgs := []record.Message{
		{Role: record.RoleUser, Content: "<|user|> hi"},
		{Role: record.RoleAssistant, Content: "<|use_tool|>"},
		{Role: record.RoleAssistant, Content: "<|answer|>Hello"},
		{Role: record.RoleAssistant, Content: "<|use_tool|>again"},
		{Role: record.RoleAssistant, Content: "text <|no|>"},
		{Role: record.RoleAssistant, Content: "<|a b|>"},
	}
	ctx, c := withCounters()
	on := &record.Record{ID: "on", Messages: msgs}
	on.SetTag(DecisionTokensTag, "on")
	off := &record.Record{ID: "off", Messages: msgs}
	for range 3 {
		e.countDecisionTokens(ctx, on)
		e.countDecisionTokens(ctx, off)
	}
	want := map[string]int64{counterToken + "<|use_tool|>": 3, counterToken + "<|answer|>": 3}
	if !maps.Equal(c.m, want) {
		t.Errorf("counters %v, want %v", c.m, want)
	}
}

// TestMetaToolCallAsFunctionCall: a turn of one meta_tool call gives
// through metaToolCall, met for the first time or again, the turn and
// rejection functionCall gives on a fresh exporter, and its value's JSON
// string; turns that differ only in what the key holds (text, reasoning
// with thoughts, checked, arguments) are not taken for one another.
func TestMetaToolCallAsFunctionCall(t *testing.T) {
	args := []string{`{"tool_description":"a","param_description":["x"]}`, `{"tool_description":"b"}`, ` {"a":1} `, `{bad`, `[1]`, ``,
		`{"q":"\u2028 \" 中文"}`}
	texts := []string{"<|use_tool|>", "", "  ", "I will look it up.", "<|use_tool|>\n", "<tool_call>"}
	reasons := []string{"", "think first", "<think>"}
	for _, cfg := range []ExportConfig{{}, {Template: "qwen3", Thoughts: true}, {Template: "gemma3"}, {Template: "glm4"}} {
		e := buildExport(t, cfg)
		for round := range 2 {
			for _, a := range args {
				for _, text := range texts {
					for _, reason := range reasons {
						for _, checked := range []bool{true, false} {
							m := record.Message{Role: record.RoleAssistant, Content: text, Reasoning: reason,
								Calls: []record.Call{{Name: verify.MetaTool, Arguments: json.RawMessage(a)}}}
							name := fmt.Sprintf("%s round %d args %q text %q reasoning %q checked %v", cfg.Template, round, a, text, reason, checked)
							want, wantErr := buildExport(t, cfg).functionCall(context.Background(), &m, checked)
							got, q, err := e.metaToolCall(context.Background(), &m, checked)
							if fmt.Sprint(err) != fmt.Sprint(wantErr) || got != want {
								t.Fatalf("%s: %+v, %v; want %+v, %v", name, got, err, want, wantErr)
							}
							if err == nil && string(q) != string(jsonout.AppendString(nil, want.Value)) {
								t.Fatalf("%s: quoted %s", name, q)
							}
						}
					}
				}
			}
		}
	}
}

// pieceWriter keeps each Write's bytes apart.
type pieceWriter struct{ pieces [][]byte }

func (w *pieceWriter) Write(p []byte) (int, error) {
	w.pieces = append(w.pieces, bytes.Clone(p))
	return len(p), nil
}

// TestWriteLinesPieces: writeLines writes each rendered record's line
// (samples, and role lines that are bytes already) in order, the same
// bytes as encoding each line on its own, in pieces of at least linesPiece
// bytes but the last; a record Process did not render is an error.
func TestWriteLinesPieces(t *testing.T) {
	jl := buildExport(t, ExportConfig{})
	role := buildExport(t, ExportConfig{Style: "inline", ToolsPlacement: "role"})
	var recs []*record.Record
	var want bytes.Buffer
	for len(recs) == 0 || want.Len() < 3*linesPiece {
		for i, r := range fxSharedRecords(t) {
			e := jl
			if i%5 == 0 {
				e = role
			}
			out, err := e.Process(context.Background(), r)
			if err != nil {
				continue
			}
			switch v := out[0].Rendered.(type) {
			case *sample:
				want.Write(appendLine(nil, v))
			case []byte:
				want.Write(v)
			default:
				t.Fatalf("%s: rendered %T", r.ID, v)
			}
			recs = append(recs, out[0])
		}
	}
	var w pieceWriter
	if err := writeLines(&w, recs); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(w.pieces, nil); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("writeLines wrote %d bytes, not the %d of its lines", len(got), want.Len())
	}
	if len(w.pieces) < 3 {
		t.Fatalf("%d pieces for %d bytes", len(w.pieces), want.Len())
	}
	for i, p := range w.pieces[:len(w.pieces)-1] {
		if len(p) < linesPiece {
			t.Errorf("piece %d of %d: %d bytes", i, len(w.pieces), len(p))
		}
	}
	if err := writeLines(&w, append(recs[:1:1], &record.Record{ID: "raw"})); err == nil || !strings.Contains(err.Error(), "raw was not rendered") {
		t.Errorf("unrendered record: %v", err)
	}
}

// hashWriter is what an atomicfs.File does with the bytes, without the
// file: feed SHA-256.
type hashWriter struct{ h hash.Hash }

func (w hashWriter) Write(p []byte) (int, error) { return w.h.Write(p) }

// BenchmarkWriteLines writes the jsonl lines of the shared records' samples
// into SHA-256, as WriteShard does into its file: direct is writeLines;
// bufio is the way before it (each line encoded into a buffer, then copied
// through a 1 MiB bufio.Writer). MB/s are of the lines.
func BenchmarkWriteLines(b *testing.B) {
	e := mustBuildExport(b, ExportConfig{})
	var recs []*record.Record
	var size int64
	for _, r := range fxSharedRecords(b) {
		if out, err := e.Process(context.Background(), r); err == nil {
			recs = append(recs, out[0])
			size += int64(len(appendLine(nil, out[0].Rendered.(*sample))))
		}
	}
	bufioLines := func(w io.Writer, recs []*record.Record) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		var line []byte
		for _, r := range recs {
			line = appendLine(line[:0], r.Rendered.(*sample))
			if _, err := bw.Write(line); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
	for _, c := range []struct {
		name  string
		write func(io.Writer, []*record.Record) error
	}{{"direct", writeLines}, {"bufio", bufioLines}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			before := cputime.Process()
			for b.Loop() {
				if err := c.write(hashWriter{sha256.New()}, recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cputime.Process()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkExportShard is the export of the fuller chain as a run does it:
// the demo rows after meta_tool, decision_tokens and negatives, written to
// a shard and read back (so, as in a run, equal tools are separate copies,
// each record's in its own decoded memory), then Process on every record
// and writeLines of the shard into SHA-256 (the atomic file's hash). An op
// is one shard; the exporter (its memo) lives across ops as across a run's
// shards, and ops cycle over copies of the shard read separately, so no
// op meets the memory of the one before. MB/s are of the lines.
func BenchmarkExportShard(b *testing.B) {
	recs, lib := fullerBenchRecords(b)
	ctx := context.Background()
	for _, st := range []Stage{
		mtBuild(b, MetaToolConfig{}, mtEnv(lib, noiseOfflineEmbedder(b))),
		buildDecisionTokens(b, DecisionTokensConfig{}),
		buildNegatives(b, NegativesConfig{Target: NegativeTargetToken}, nil),
	} {
		var next []*record.Record
		for _, r := range recs {
			if out, err := st.Process(ctx, r); err == nil {
				next = append(next, out...)
			}
		}
		recs = next
	}
	copies := shardCopies(b, recs, 8)
	e := mustBuildExport(b, ExportConfig{})
	_, n := exportHashed(b, e, copies[0])
	b.SetBytes(n)
	loopCPU(b, len(recs), func(i int) { exportHashed(b, e, copies[i%len(copies)]) })
}

// exportHashed exports in as the runner does (its records passed
// shard.Check) and writes the lines into SHA-256, as the atomic file
// hashes them; it returns the records exported and the bytes written.
func exportHashed(tb testing.TB, e *exporter, in []*record.Record) ([]*record.Record, int64) {
	ctx := context.Background()
	out := make([]*record.Record, 0, len(in))
	for _, r := range in {
		if o, err := e.processChecked(ctx, r); err == nil {
			out = append(out, o...)
		}
	}
	w := &countingHash{h: sha256.New()}
	if err := writeLines(w, out); err != nil {
		tb.Fatal(err)
	}
	return out, w.n
}

// countingHash feeds SHA-256 and counts the bytes.
type countingHash struct {
	h hash.Hash
	n int64
}

func (w *countingHash) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return w.h.Write(p)
}

// TestExportCheckedAsProcess: the export told its record passed
// shard.Check (processChecked, which does not parse the calls' arguments
// again) writes or rejects exactly what Process does, over the demo rows
// through the fuller chain, records with non-object arguments, parallel
// calls and text beside calls, under several templates and styles; and
// the runner tells only a checkedProcessor, only for checked records.
func TestExportCheckedAsProcess(t *testing.T) {
	recs, lib := fullerBenchRecords(t)
	ctx := context.Background()
	for _, st := range []Stage{
		mtBuild(t, MetaToolConfig{}, mtEnv(lib, noiseOfflineEmbedder(t))),
		buildDecisionTokens(t, DecisionTokensConfig{}),
	} {
		var next []*record.Record
		for i, r := range recs {
			if i%2 == 0 {
				next = append(next, r) // without decision tokens too
			}
			if out, err := st.Process(ctx, r); err == nil {
				next = append(next, out...)
			}
		}
		recs = next
	}
	odd := []func(r *record.Record){
		func(r *record.Record) { r.Messages[1].Calls[0].Arguments = []byte(`["a"]`) },
		func(r *record.Record) { r.Messages[1].Calls[0].Arguments = []byte(` {"a": 1} `) },
		func(r *record.Record) { r.Messages[1].Calls[0].Arguments = []byte(`  `) },
		func(r *record.Record) { r.Messages[1].Content = "Let me look." },
	}
	for i, change := range odd {
		for _, base := range []*record.Record{fxSingle(), fxParallel()} {
			r := base.Clone()
			r.ID = fmt.Sprintf("%s-odd%d", r.ID, i)
			change(r)
			recs = append(recs, r)
		}
	}
	recs = append(recs, fxSingle(), fxParallel())
	checked := 0
	for _, cfg := range []ExportConfig{{}, {Template: "qwen3", Thoughts: true}, {Template: "glm4", Parallel: "split"},
		{Style: "inline"}, {Format: "parquet"}} {
		e := mustBuildExport(t, cfg)
		for _, r := range recs {
			if _, err := shard.Check(r); err != nil {
				continue // processChecked is only for records that passed
			}
			checked++
			want, werr := e.Process(ctx, r)
			got, gerr := e.processChecked(ctx, r)
			wr, _ := contract.ReasonOf(werr)
			gr, _ := contract.ReasonOf(gerr)
			if (werr == nil) != (gerr == nil) || wr != gr || len(got) != len(want) {
				t.Fatalf("%+v, %s: processChecked %d records, %v; Process %d, %v", cfg, r.ID, len(got), gerr, len(want), werr)
			}
			for k := range want {
				if a, b := exportLine(t, got[k]), exportLine(t, want[k]); a != b {
					t.Fatalf("%+v, %s: processChecked wrote\n%s\nProcess\n%s", cfg, r.ID, a, b)
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d records compared", checked)
	}
	called := &checkedSpy{}
	for _, c := range []bool{true, false, true} {
		if _, err := safeProcess(ctx, called, recs[0], c); err != nil {
			t.Fatal(err)
		}
	}
	if called.plain != 1 || called.checked != 2 {
		t.Fatalf("safeProcess called Process %d and processChecked %d times, want 1 and 2", called.plain, called.checked)
	}
}

// exportLine is what the export writes for a record Process returned.
func exportLine(t *testing.T, r *record.Record) string {
	t.Helper()
	switch v := r.Rendered.(type) {
	case *sample:
		return string(appendLine(nil, v))
	case []byte:
		return string(v)
	}
	t.Fatalf("%s: rendered as %T", r.ID, r.Rendered)
	return ""
}

// checkedSpy counts which of its methods the runner called.
type checkedSpy struct{ plain, checked int }

func (s *checkedSpy) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	s.plain++
	return []*record.Record{r}, nil
}

func (s *checkedSpy) processChecked(_ context.Context, r *record.Record) ([]*record.Record, error) {
	s.checked++
	return []*record.Record{r}, nil
}

// TestQuotedTexts: a quotedTexts gives jsonout.AppendString's bytes for
// any text, first and again (then the remembered ones), also once its
// budget is spent, when it remembers no new text.
func TestQuotedTexts(t *testing.T) {
	texts := []string{"", "plain", `[{"name":"meta_tool","function_id":0,"results":{"name":"a"}}]`, "潮汐表 \"x\"\n",
		"bad \xff utf8", "line\u2028sep", "bell \a"}
	q := newQuotedTexts()
	for round := range 2 {
		for _, s := range texts {
			if got, want := q.quote(s), jsonout.AppendString(nil, s); !bytes.Equal(got, want) {
				t.Errorf("round %d, %q: %s, want %s", round, s, got, want)
			}
		}
	}
	q.memo.used = quotedTextsBudget
	n := len(q.memo.m)
	if got, want := q.quote("new text"), jsonout.AppendString(nil, "new text"); !bytes.Equal(got, want) || len(q.memo.m) != n {
		t.Errorf("past the budget: %s (%d texts remembered, %d before), want %s, none more", got, len(q.memo.m), n, want)
	}
	if got, want := q.quote(texts[2]), jsonout.AppendString(nil, texts[2]); !bytes.Equal(got, want) {
		t.Errorf("remembered text past the budget: %s, want %s", got, want)
	}
}

// FuzzQuotedTexts holds quotedTexts to jsonout.AppendString.
func FuzzQuotedTexts(f *testing.F) {
	f.Add(`{"name":"a","parameters":{"q":"\u00e9"}}`)
	f.Add("bad \xff")
	q := newQuotedTexts()
	f.Fuzz(func(t *testing.T, s string) {
		want := jsonout.AppendString(nil, s)
		for range 2 {
			if got := q.quote(s); !bytes.Equal(got, want) {
				t.Fatalf("%q: %s, want %s", s, got, want)
			}
		}
	})
}

// TestExportQuotedMetaToolResults: a jsonl export writes a record's lone
// meta_tool result and the turn calling meta_tool from their remembered
// JSON strings, and its line is the one written without them
// (encoding/json's), for records met first and again.
func TestExportQuotedMetaToolResults(t *testing.T) {
	e := mustBuildExport(t, ExportConfig{})
	for round := range 2 {
		out, err := e.Process(context.Background(), fxMetaTool())
		if err != nil {
			t.Fatal(err)
		}
		s := out[0].Rendered.(*sample)
		if len(s.quoted) == 0 || s.quoted[1] == nil || s.Conversations[1].From != "function_call" || s.quoted[2] == nil || s.Conversations[2].From != "observation" {
			t.Fatalf("round %d: the meta_tool call and result were not quoted from the memo: %q", round, s.quoted)
		}
		for i, q := range s.quoted {
			if q != nil && i != 1 && i != 2 {
				t.Errorf("round %d: turn %d (%s) quoted from the memo", round, i, s.Conversations[i].From)
			}
		}
		got := appendLine(nil, s)
		plain := *s
		plain.quoted = nil
		if want := appendLine(nil, &plain); !bytes.Equal(got, want) {
			t.Errorf("round %d:\n got %s\nwant %s", round, got, want)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(struct {
			Conversations []verify.Turn `json:"conversations"`
			System        string        `json:"system"`
			Tools         string        `json:"tools"`
		}{s.Conversations, s.System, s.toolsJSON()})
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("round %d:\n got %s\nwant %s (encoding/json)", round, got, want.Bytes())
		}
	}
}

func TestOnlyMetaToolCalls(t *testing.T) {
	mt, other := record.Call{Name: verify.MetaTool}, record.Call{Name: "get_weather"}
	for _, c := range []struct {
		calls []record.Call
		want  bool
	}{
		{nil, false},
		{[]record.Call{mt}, true},
		{[]record.Call{mt, mt}, true},
		{[]record.Call{mt, other}, false},
		{[]record.Call{other, mt}, false},
		{[]record.Call{other}, false},
	} {
		if got := onlyMetaToolCalls(c.calls); got != c.want {
			t.Errorf("%v: %v, want %v", c.calls, got, c.want)
		}
	}
}

// QA: a reasoning template without thoughts trains with enable_thinking:
// false, and LLaMA-Factory's remove_thought then deletes thought-word spans
// (and leading newlines) from every gpt and function_call turn: an argument
// "<think>a</think>" trained as "" under glm4_7, an answer quoting
// qwen3's thought words lost them. Such samples are rejected; with
// thoughts on (nothing removed) or a template without a reasoning class
// they are written.
func TestExportThinkingOffRejectsRemovedSpans(t *testing.T) {
	// With text beside the calls (a decision token) the calls go inside
	// tool-call words, which the function formatter reads first; without
	// it glm4_7's formatter itself misreads the span (lf_bad_function_call).
	call := fxCalls("get_local_time", `{"city":"<think>a</think>"}`)
	call.Content = "<|use_tool|>"
	args := fxRecord("x:1", []record.Tool{fxTime}, fxUser("time?"), call)
	quote := fxRecord("x:2", nil, fxUser("tags?"), fxSay("Use <think>\nreasoning\n</think>\n\n tags like this."))
	newline := fxRecord("x:3", nil, fxUser("hi"), fxSay("\nHello."))
	tests := []struct {
		cfg    ExportConfig
		rec    *record.Record
		reject bool
	}{
		{ExportConfig{Template: "glm4_7"}, args, true},
		{ExportConfig{Template: "qwen3"}, quote, true},
		{ExportConfig{Template: "qwen3"}, newline, true},
		{ExportConfig{Template: "qwen3"}, args, false}, // qwen3's thought words have newlines: no span
		{ExportConfig{Template: "qwen3", Thoughts: true}, quote, false},
		{ExportConfig{Template: "qwen"}, quote, false},
		{ExportConfig{Template: "glm4_7", Thoughts: true}, args, false},
	}
	for _, tt := range tests {
		_, err := buildExport(t, tt.cfg).Process(context.Background(), tt.rec)
		got, _ := contract.ReasonOf(err)
		if want := map[bool]string{true: verify.ReasonLFThoughtRemoved}[tt.reject]; got != want {
			t.Errorf("%s (thoughts %t) %s: reason %q (%v), want %q", tt.cfg.Template, tt.cfg.Thoughts, tt.rec.ID, got, err, want)
		}
	}
}

// QA: an export that rejected every sample said "no sample reached it (a
// filter or sample quota took every record?)"; it names its rejects.
func TestEmptyExportNamesItsRejects(t *testing.T) {
	root, err := atomicfs.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	e := buildExport(t, ExportConfig{})
	notes, err := e.Finish(root, []manifests.Shard{{Counts: manifests.Counts{In: 106, Rejected: map[string]int64{ReasonLFNoCallText: 106}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "empty export: it rejected every one of the 106 samples that reached it (lf_template_no_call_text=106; see its rejects)"
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
		t.Errorf("notes %q, want one starting %q", notes, want)
	}
}

// The export's cutoff_len note agrees with train_lora.yaml: with no sample
// measured it says none is set (it said "0 of N samples have a measured
// token count; train_lora.yaml's cutoff_len covers those only" over a file
// with no cutoff_len), with some it says which, with all it says nothing.
func TestExportCutoffNote(t *testing.T) {
	for _, c := range []struct {
		name     string
		tokens   []string // verify's tokens tag of each sample, "" for none
		note     string   // the prefix of the cutoff_len note, "" for none
		cutoff   string   // what train_lora.yaml holds
		noCutoff bool
	}{
		{"none measured", []string{"", ""}, "cutoff_len: not measured (no verify stage counted tokens before this export), so train_lora.yaml sets none", "# cutoff_len: not measured", true},
		{"some measured", []string{"900", ""}, "cutoff_len: 1 of 2 samples have a measured token count", "cutoff_len: 2048\n", false},
		{"all measured", []string{"900", "900"}, "", "cutoff_len: 2048\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := buildExport(t, ExportConfig{})
			ctx, ctr := withCounters()
			for _, tok := range c.tokens {
				r := fxSingle()
				if tok != "" {
					r.SetTag("tokens", tok)
				}
				if _, err := e.Process(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			dir, root := tempRoot(t)
			n := int64(len(c.tokens))
			notes, err := e.Finish(root, []manifests.Shard{{Counts: manifests.Counts{In: n, Out: n, Counters: ctr.m}}})
			if err != nil {
				t.Fatal(err)
			}
			train, _ := os.ReadFile(filepath.Join(dir, TrainLoRAFile))
			if !strings.Contains(string(train), c.cutoff) {
				t.Errorf("train_lora.yaml lacks %q:\n%s", c.cutoff, train)
			}
			if set := regexp.MustCompile(`(?m)^cutoff_len:`).Match(train); set == c.noCutoff {
				t.Errorf("train_lora.yaml sets cutoff_len: %v, want %v", set, !c.noCutoff)
			}
			var got []string
			for _, n := range notes {
				if strings.HasPrefix(n, "cutoff_len") {
					got = append(got, n)
				}
			}
			switch {
			case c.note == "" && len(got) > 0:
				t.Errorf("every sample measured, yet the notes say %q", got)
			case c.note != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.note)):
				t.Errorf("cutoff_len notes %q, want one starting %q", got, c.note)
			}
		})
	}
}
