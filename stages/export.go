package stages

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/pycall"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

// ExportConfig is the `export:` stage: it writes a directory LLaMA-Factory
// can use as its dataset_dir as is — dataset_info.json, one folder of
// sharegpt files (conversations of human / gpt / function_call / observation
// turns, system, and tools as a JSON string of a list) and train_lora.yaml,
// a LoRA run on it.
//
// Samples are written for one LLaMA-Factory template (Template) and every
// sample is checked against LLaMA-Factory's rules for it before it is
// written (the converter's role rules and a simulation of the template's
// function and tool formatters, verify.CheckTurns and
// verify.LFTemplate); a record that would make a sample LLaMA-Factory
// silently drops or crashes on is rejected with the rule it breaks instead.
// Text said with calls (a get_user_input answer, a decision token) is
// written before the calls where the template renders it, and the check
// proves the formatter reads it back; where the template cannot hold it the
// record is rejected (lf_template_no_call_text), never cut silently.
type ExportConfig struct {
	// Dataset is the dataset's name in dataset_info.json and its folder;
	// default "augment_<stage name>".
	Dataset string `yaml:"dataset" json:"dataset"`
	// Format of the data files: jsonl (default) or parquet.
	Format string `yaml:"format" json:"format"`
	// Template is the LLaMA-Factory template the data is for (its
	// `template:`), one of verify.LFTemplateNames; default "default".
	Template string `yaml:"template" json:"template"`
	// Style of assistant call turns:
	//   function_call (default): function_call turns holding JSON
	//     {"name","arguments"} (a list for parallel calls), rendered by the
	//     template's tool format; results are observation turns. Text said
	//     with the calls goes before them inside the template's tool-call
	//     words: "<text><tool_call>{…}</tool_call>".
	//   inline: the calls are written into gpt turns as text in the chosen
	//     Surface, for MT-LLaMA-style and Decision-Token data; the tool
	//     definitions and the surface's call format go into the system
	//     text (ToolsPlacement).
	Style string `yaml:"style" json:"style"`
	// Surface of inline calls:
	//   llama3 (default): reasoning, then <|python_tag|>, then the JSON list of
	//     {"name","parameters"} (Meta-Tool, seed 000 Fig 13);
	//   decision: the turn's text (which holds the decision token when the
	//     decision_tokens stage ran), the reasoning, a blank line, then the calls
	//     in Python-call syntax (MediaTek, seed 002 Fig 1);
	//   tool_dc: <think>reasoning</think><tool_call>[calls in Python-call
	//     syntax]</tool_call> (Tool-DC, seed 003 Fig 11).
	Surface string `yaml:"surface" json:"surface,omitempty"`
	// Thoughts keeps reasoning in function_call style as a leading thought
	// in the template's thought words (qwen3: "<think>\n…\n</think>\n\n").
	// Only templates of a reasoning class train thoughts; for others it is a
	// config error. Without it reasoning is dropped, and the manifest says so.
	Thoughts bool `yaml:"thoughts" json:"thoughts"`
	// Parallel says what to do with a turn of parallel calls when the
	// template's tool format takes one call per turn (glm4): reject
	// (default; reason lf_template_no_parallel) or split it into one call
	// and one observation after another, when its results answer the calls
	// one by one.
	Parallel string `yaml:"parallel" json:"parallel,omitempty"`
	// AllowOffline lets records holding output of the offline teacher (its
	// rule-based stand-ins, provider "offline" in their lineage) be
	// exported; dataset_info.json, train_lora.yaml, the manifest and the run
	// summary then say how many samples hold stand-in text. Without it such
	// a record stops the run with a config error (exit 2).
	AllowOffline bool `yaml:"allow_offline" json:"allow_offline,omitempty"`
	// ToolsPlacement says where the tool definitions go: system (default)
	// or role (style inline only). With system, style function_call fills
	// the tools column, which the template renders into the system turn
	// with its own tool prompt (its call format); style inline writes an
	// empty tools column ("[]") and puts the definitions into the sample's
	// system text with an instruction for the inline surface (Prompt), so
	// that no template prompt asks for a call format the targets do not
	// use. With role: an OpenAI-messages JSONL whose
	// first message has the role "tools" and holds the JSON list of
	// definitions, before the system message (MediaTek, seed 002 Fig 1(b)),
	// with chat_template.jinja beside it for trainers that take a chat
	// template (TRL, axolotl); LLaMA-Factory cannot train on it.
	ToolsPlacement string `yaml:"tools_placement" json:"tools_placement,omitempty"`
	// Model is the model_name_or_path written into train_lora.yaml;
	// without it the file leaves it to the command line.
	Model string `yaml:"model" json:"model,omitempty"`
	// System is the system prompt of records that have none.
	System string `yaml:"system" json:"system,omitempty"`
	// Prompt overrides the surface's built-in system text of inline
	// samples with tools (prompts/export_inline_<surface>.tmpl): a txtar
	// template of one system section (style inline, tools_placement
	// system only).
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`

	// decision is the last decision_tokens stage that runs before this
	// export (Pipeline.defaults), nil where none does: its tokens are the
	// ones the system text of an inline sample names when its record
	// carries the decision_tokens tag, whichever of them the record's own
	// turns start with. They are in the export's fingerprint (wiredParts):
	// a shard whose records decision_tokens passes on unchanged (no
	// text-answer turn) keeps its input digest when they change.
	decision *DecisionTokensConfig
}

// wiredParts is what the export writes from other stages' settings, which
// its JSON config leaves out: the decision tokens its inline system text
// names (style inline, tools_placement system), nothing otherwise, so that
// exports without them keep their keys.
func (c *ExportConfig) wiredParts() []string {
	if c.decision == nil || c.Style != "inline" || c.ToolsPlacement != "system" {
		return nil
	}
	return []string{fmt.Sprintf("decision_tokens answer=%q use_tool=%q", c.decision.AnswerToken, c.decision.UseToolToken)}
}

func (c *ExportConfig) defaults() {
	if c.Format == "" {
		c.Format = "jsonl"
	}
	if c.Style == "" {
		c.Style = "function_call"
	}
	if c.Style == "inline" && c.Surface == "" {
		c.Surface = "llama3"
	}
	if c.Template == "" {
		c.Template = "default"
	}
	if c.Parallel == "" {
		c.Parallel = "reject"
	}
	if c.ToolsPlacement == "" {
		c.ToolsPlacement = "system"
	}
}

// version 2: samples for a named template (thought words, text with calls,
// tool format checks), train_lora.yaml, stand-in marks. 3: parallel calls
// split for a one-call template keep the turn's decision token on every
// call turn; number_out_of_range in the formatter's check. 4: the decision
// surface puts a blank line between a turn's text and its calls, as
// between reasoning and calls. 5: with enable_thinking: false (a reasoning
// template without thoughts) a turn LLaMA-Factory's remove_thought would
// change is rejected (lf_thought_removed); a blank turn is empty_turn, not
// lf_missing_field. 6: inline samples (tools_placement system) write an
// empty tools column and the tool definitions with the surface's call
// format in the system text: LLaMA-Factory rendered its template's own
// tool prompt from the column, asking for a call format the targets do not
// use. 7: train_lora.yaml's cutoff_len covers the samples as
// LLaMA-Factory renders them for the template (tool prose and wrapped,
// indented tools, default system prompt, framing), not verify's count of
// the record, which it undercut by up to 3.5×. 8: that count includes the
// empty system turn LLaMA-Factory renders for a sample without tools or
// system text (its tools column "[]" reads as true). 9: the system text of
// an inline sample whose record went through decision_tokens names both of
// that stage's tokens, not only those its turns start with (which told the
// answer: a negative's text named the answer token alone). 10: the system
// text of an inline sample whose record lists get_user_input says that an
// answer ends with a get_user_input call, not that it is plain text.
func (c *ExportConfig) version() int { return 10 }

func (c *ExportConfig) validate() []string {
	var probs []string
	if c.Format != "jsonl" && c.Format != "parquet" {
		probs = append(probs, fmt.Sprintf("format %q: want jsonl or parquet", c.Format))
	}
	switch c.Style {
	case "function_call":
		if c.Surface != "" {
			probs = append(probs, "surface applies to style inline only")
		}
	case "inline":
		if !slices.Contains([]string{"llama3", "decision", "tool_dc"}, c.Surface) {
			probs = append(probs, fmt.Sprintf("surface %q: want llama3, decision or tool_dc", c.Surface))
		}
		if c.Thoughts {
			probs = append(probs, "thoughts applies to style function_call only (inline surfaces write reasoning themselves)")
		}
	default:
		probs = append(probs, fmt.Sprintf("style %q: want function_call or inline", c.Style))
	}
	tpl, ok := verify.LookupLFTemplate(c.Template)
	switch {
	case !ok:
		probs = append(probs, fmt.Sprintf("template %q: want one of %s (LLaMA-Factory's template names; see the README's table)",
			c.Template, strings.Join(verify.LFTemplateNames(), ", ")))
	case c.Thoughts && c.Style == "function_call" && !tpl.Reasoning:
		var reasoning []string
		for _, t := range verify.LFTemplates() {
			if t.Reasoning {
				reasoning = append(reasoning, t.Name)
			}
		}
		probs = append(probs, fmt.Sprintf("thoughts: template %q does not train thoughts (no reasoning class in LLaMA-Factory); use one of %s, or drop thoughts",
			c.Template, strings.Join(reasoning, ", ")))
	}
	switch c.ToolsPlacement {
	case "system":
	case "role":
		if c.Style != "inline" || c.Format != "jsonl" {
			probs = append(probs, "tools_placement role needs style inline and format jsonl (its assistant turns are text for a chat template)")
		}
	default:
		probs = append(probs, fmt.Sprintf("tools_placement %q: want system or role", c.ToolsPlacement))
	}
	if c.Prompt != "" && (c.Style != "inline" || c.ToolsPlacement != "system") {
		probs = append(probs, "prompt applies to style inline with tools_placement system only (the system text of samples with tools)")
	}
	if c.Parallel != "reject" && c.Parallel != "split" {
		probs = append(probs, fmt.Sprintf("parallel %q: want reject or split", c.Parallel))
	}
	// dataset is checked with the other path names by Parse (CheckName).
	if strings.ContainsAny(c.Model, "\n\r") {
		probs = append(probs, "model: must be one line")
	}
	return probs
}

func (c *ExportConfig) build(env *Env) (Stage, error) {
	e := &exporter{cfg: *c, env: env, results: newQuotedTexts()}
	e.quoting = c.Format == "jsonl" && c.ToolsPlacement == "system"
	if e.cfg.Dataset == "" {
		e.cfg.Dataset = "augment_" + env.Stage
	}
	var ok bool
	if e.tpl, ok = verify.LookupLFTemplate(e.cfg.Template); !ok {
		return nil, fmt.Errorf("unknown template %q", e.cfg.Template)
	}
	if c.Style == "inline" && c.ToolsPlacement == "system" {
		if c.decision != nil {
			e.answerToken, e.useToolToken = c.decision.AnswerToken, c.decision.UseToolToken
		}
		// The template is rendered here, with and without a system text
		// and decision tokens, so that a prompt naming no field of
		// inlineSystem, holding other than one system section, or
		// leaving out the tool definitions (its samples would call
		// functions defined nowhere) fails the build, not the first
		// record or no record at all.
		samples := []any{
			inlineSystem{System: "s", Tools: toolsSentinel, AnswerToken: "<|a|>", UseToolToken: "<|u|>"},
			inlineSystem{Tools: toolsSentinel, AnswerToken: "<|a|>", UseToolToken: "<|u|>"},
			inlineSystem{System: "s", Tools: toolsSentinel},
			inlineSystem{Tools: toolsSentinel},
			inlineSystem{System: "s", Tools: toolsSentinel, AnswerToken: "<|a|>", UseToolToken: "<|u|>", GetUserInput: verify.GetUserInput},
			inlineSystem{Tools: toolsSentinel, GetUserInput: verify.GetUserInput},
		}
		var err error
		if e.system, err = env.Prompt("export_inline_"+c.Surface, "prompt", c.Prompt, samples...); err != nil {
			return nil, err
		}
		for _, d := range samples {
			msgs, err := e.system.Render(d)
			if err != nil {
				return nil, err
			}
			if len(msgs) != 1 || msgs[0].Role != "system" {
				return nil, &keyError{key: "prompt", err: fmt.Errorf("prompt %s: want one system section (the system text of inline samples with tools)", e.system.Name)}
			}
			if !strings.Contains(msgs[0].Content, toolsSentinel) {
				return nil, &keyError{key: "prompt", err: fmt.Errorf("prompt %s: its system section does not always render {{.Tools}}, the tool definitions: an inline sample's tools column is empty, so its system text is the only place that defines the functions it calls", e.system.Name)}
			}
		}
	}
	return e, nil
}

// toolsSentinel stands for the tool definitions in the build's rendering
// of an inline export's prompt, which must show it as it is.
const toolsSentinel = "augment_tool_definitions_sentinel"

// inlineSystem is what the export_inline_* prompts render: the system
// text of an inline sample with tools.
type inlineSystem struct {
	// System is the record's system text, else the export's system; may be
	// empty.
	System string
	// Tools is the JSON list of the sample's tool definitions, ", " and
	// ": " between items and keys (Python's json.dumps layout).
	Tools string
	// AnswerToken and UseToolToken are the decision tokens of the
	// decision_tokens stage before the export, both set for every record
	// that stage marked, whichever of them its turns start with (the
	// instruction must not give the decision away), and both "" for other
	// records.
	AnswerToken, UseToolToken string
	// GetUserInput is the name of the function that asks the user,
	// get_user_input, when the record lists it (meta_tool's
	// get_user_input: true: every answer without other calls is a call of
	// it keeping its text), else "": the instruction then says how an
	// answer is written instead of "answer in plain text".
	GetUserInput string
}

type exporter struct {
	cfg ExportConfig
	tpl *verify.LFTemplate
	env *Env

	// system renders the system text of inline samples with tools (nil
	// unless style inline with tools_placement system).
	system *prompts.Template
	// answerToken and useToolToken are cfg.decision's tokens, "" without it.
	answerToken, useToolToken string

	tools     toolMemo     // each distinct tool's texts
	results   *quotedTexts // meta_tool results and calling turns as JSON strings
	metaCalls callTurns    // function_call turns of one meta_tool call (metaToolCall)
	// quoting says samples are written as JSON lines that splice their
	// tools' quoted texts (toolText.quoted).
	quoting bool

	counterMu   sync.Mutex                        // held to add a key
	counterKeys atomic.Pointer[map[string]string] // decision token → its counter key
	knownTokens atomic.Pointer[[]tokenKeys]       // the first knownTokensMax tokens of counterKeys
}

// sample is one LLaMA-Factory sharegpt row (tools_placement role turns it
// into an OpenAI-messages row, see roleSample).
type sample struct {
	Conversations []verify.Turn `json:"conversations" parquet:"conversations,list"`
	System        string        `json:"system" parquet:"system"`
	// Tools is the tools column, toolsString(tools); left empty when every
	// tool has its quoted text (jsonl rows, which splice those instead):
	// read it through toolsJSON. "[]" for inline samples (tools_placement
	// system), whose tools are in System.
	Tools string `json:"tools" parquet:"tools"`
	// tools are the texts of the record's tools, in order.
	tools []*toolText
	// quoted holds, per turn of Conversations, its value as a JSON string
	// (jsonout.AppendString's) when it was remembered, else nil; nil when
	// no turn's was.
	quoted [][]byte
}

// toolsJSON is the tools column.
func (s *sample) toolsJSON() string {
	if s.Tools == "" {
		return toolsString(s.tools)
	}
	return s.Tools
}

// spliced reports whether s's tools column is written from its tools'
// quoted texts.
func (s *sample) spliced() bool {
	for _, tt := range s.tools {
		if tt.quoted == nil {
			return false
		}
	}
	return s.Tools == ""
}

// Counter keys of the export (manifest counters, summed over shards).
const (
	// CounterStandIn counts samples holding offline-teacher output.
	CounterStandIn = "standin_samples"
	// counterCutoff + "<n>" counts measured samples (the verify stage's
	// tokens tag) whose length as LLaMA-Factory renders them for the
	// template (renderedTokens; the tag when that is more) with a quarter
	// of margin fits in n, a power of two.
	counterCutoff = "cutoff_len_"
	// counterToken + "<token>" counts samples with that decision token.
	counterToken = "special_token_"
)

// ReasonLFNoCallText: the template renders a function_call turn as its
// calls alone, and the turn has text (an answer beside get_user_input, a
// decision token) that would be lost.
const ReasonLFNoCallText = "lf_template_no_call_text"

// Process renders the record as a sample and checks it against
// LLaMA-Factory's rules for the template.
func (e *exporter) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	return e.process(ctx, r, false)
}

// processChecked is Process of a record that passed shard.Check
// (checkedProcessor): its calls' arguments are JSON, which the export
// then does not validate again (only that each is an object).
func (e *exporter) processChecked(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	return e.process(ctx, r, true)
}

// process is Process; checked says r passed shard.Check.
func (e *exporter) process(ctx context.Context, r *record.Record, checked bool) ([]*record.Record, error) {
	standIn := offlineStage(r)
	if standIn != "" && !e.cfg.AllowOffline {
		return nil, &ConfigError{Problems: []string{fmt.Sprintf(
			"export %q: record %s holds stand-in output of the offline teacher (stage %s): rule-based text, not a teacher's. "+
				"Run with a real teacher, or set allow_offline: true on this export to write it marked as stand-in data",
			e.env.Stage, r.ID, standIn)}}
	}
	s, err := e.render(ctx, r, checked)
	if err != nil {
		return nil, err
	}
	if e.cfg.ToolsPlacement == "role" {
		return e.roleSample(ctx, r, s, standIn != "")
	}
	// The tools JSON was rendered by toolsJSON from named tools whose
	// parameters are objects; only the default tool format reads more of
	// them, their parameters.
	// Every function_call turn was read back as the template reads it
	// when it was written (functionCall).
	probs := verify.CheckTurnOrder(s.Conversations, e.tpl)
	if e.tpl.Reasoning && !e.cfg.Thoughts { // train_lora.yaml says enable_thinking: false
		probs = append(probs, e.tpl.CheckThinkingOff(s.Conversations)...)
	}
	// Their check (toolText.params) was made once per distinct tool: dumps
	// repeat the same tools across many records, and the check was most of
	// the export's time with the default tool format.
	for i, tt := range s.tools {
		if tt.params != "" {
			probs = append(probs, verify.Problem{Check: "sharegpt", Kind: verify.ReasonLFBadTools, Path: "tools",
				Msg: fmt.Sprintf("tool %d (%s): %s", i, tt.tool.Name, tt.params)})
			break
		}
	}
	if len(probs) > 0 {
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.String()
		}
		return nil, contract.Rejectf(probs[0].Kind, "%s", strings.Join(msgs, "; "))
	}
	if standIn != "" {
		Count(ctx, CounterStandIn, 1)
	}
	if tag := r.Tag("tokens"); tag != "" { // (Atoi allocates its error)
		if n, err := strconv.Atoi(tag); err == nil && n > 0 {
			Count(ctx, counterCutoff+strconv.Itoa(cutoffFor(max(n, e.renderedTokens(s)))), 1)
		}
	}
	e.countDecisionTokens(ctx, r)
	return rendered(r, s), nil
}

// countDecisionTokens counts, once each under its counter key, the <|…|>
// tokens that start r's assistant turns when the decision_tokens stage
// ran on it.
func (e *exporter) countDecisionTokens(ctx context.Context, r *record.Record) {
	if r.Tag(DecisionTokensTag) != "on" {
		return
	}
	var keys [4]string
	counted := keys[:0]
	for i := range r.Messages {
		m := &r.Messages[i]
		if m.Role != record.RoleAssistant || !strings.HasPrefix(m.Content, "<|") {
			continue
		}
		if key, ok := e.tokenKey(m.Content); ok && !slices.Contains(counted, key) {
			counted = append(counted, key)
			Count(ctx, key, 1)
		}
	}
}

// tokenKey returns the counter key of leadingToken(s), for s starting
// with "<|". A token met before is found as a prefix of s: a token
// leadingToken returned ends at its first "|>" and holds no blank, so a
// text it starts has that token as its leading token.
func (e *exporter) tokenKey(s string) (string, bool) {
	if known := e.knownTokens.Load(); known != nil {
		for _, k := range *known {
			if strings.HasPrefix(s, k.tok) {
				return k.key, true
			}
		}
	}
	tok, ok := leadingToken(s)
	if !ok {
		return "", false
	}
	return e.tokenCounter(tok), true
}

// tokenKeys is a decision token and its counter key.
type tokenKeys struct{ tok, key string }

// knownTokensMax bounds the tokens tokenKey tries as prefixes; the rest
// are found by leadingToken and the map.
const knownTokensMax = 8

// tokenCounter returns counterToken+tok, made once per token. The keys
// are read without a lock (a run has a handful of tokens; a new one copies
// the map).
func (e *exporter) tokenCounter(tok string) string {
	if m := e.counterKeys.Load(); m != nil {
		if key, ok := (*m)[tok]; ok {
			return key
		}
	}
	e.counterMu.Lock()
	defer e.counterMu.Unlock()
	old := e.counterKeys.Load()
	if old != nil {
		if key, ok := (*old)[tok]; ok {
			return key
		}
	}
	m := make(map[string]string, 1)
	if old != nil {
		maps.Copy(m, *old)
	}
	key := counterToken + tok
	tok = strings.Clone(tok)
	m[tok] = key
	e.counterKeys.Store(&m)
	if known := e.knownTokens.Load(); known == nil || len(*known) < knownTokensMax {
		var list []tokenKeys
		if known != nil {
			list = slices.Clone(*known)
		}
		list = append(list, tokenKeys{tok, key})
		e.knownTokens.Store(&list)
	}
	return key
}

// rendered returns r carrying what Process made of it for WriteShard: the
// *sample, or with tools_placement role its JSON line. It is a shallow
// copy of r, so the input record stays as it was and a later export sets
// its own rendering; the copy and the list holding it are one allocation.
// (Samples are encoded in WriteShard into one reused buffer: a line
// allocated per record in Process cost more CPU, in allocation and GC,
// than the encoding itself.)
func rendered(r *record.Record, v any) []*record.Record {
	o := &struct {
		rec  record.Record
		list [1]*record.Record
	}{rec: *r}
	o.rec.Rendered = v
	o.list[0] = &o.rec
	return o.list[:]
}

// Preview returns the sample Process rendered for r, as one JSON line.
func (e *exporter) Preview(r *record.Record) (string, bool) {
	switch v := r.Rendered.(type) {
	case []byte:
		return string(bytes.TrimSuffix(v, []byte("\n"))), true
	case *sample:
		c := *v
		c.Tools = v.toolsJSON()
		b, err := jsonout.Marshal(&c)
		return string(b), err == nil
	}
	return "", false
}

// offlineStage returns the first stage whose lineage entry says the offline
// teacher made or judged r, or "".
func offlineStage(r *record.Record) string {
	for _, st := range r.Lineage {
		if st.Provider == "offline" {
			return st.Stage
		}
	}
	return ""
}

// cutoffFor is the smallest power of two, at least 1024, that holds n
// tokens and a quarter more (n counts o200k tokens; the trained model's
// tokenizer differs by 10–20 %).
func cutoffFor(n int) int {
	c := 1024
	for c < n+n/4 {
		c *= 2
	}
	return c
}

// renderedTokens is how many o200k tokens LLaMA-Factory's rendering of s
// for the template holds (verify.LFTemplate.SampleTokens): the template's
// framing and default system prompt, the tool format's prose and its
// rendering of each tool and call, and every turn's text. It is counted
// only for measured samples (a tokens tag): counting the whole sample
// costs several times the rest of the export. Each tool's count is
// remembered with its text.
func (e *exporter) renderedTokens(s *sample) int {
	tools := 0 // an inline sample's tools are in its system text: s.tools is nil
	for _, tt := range s.tools {
		n := tt.lfTokens.Load() - 1
		if n < 0 {
			n = int64(e.tpl.ToolTokens(tt.obj))
			tt.lfTokens.Store(n + 1)
		}
		tools += int(n)
	}
	return e.tpl.SampleTokens(s.System, len(s.tools) > 0, tools, s.Conversations)
}

// decisionToken is the <|…|> token that starts s, "" for none.
func decisionToken(s string) string {
	if !strings.HasPrefix(s, "<|") {
		return ""
	}
	tok, _ := leadingToken(s)
	return tok
}

// leadingToken returns the <|…|> token that starts s (which starts with
// "<|"): s up to its first "|>", when that holds more than "<|" and no
// space, tab or newline comes before it. It reads s only that far.
func leadingToken(s string) (string, bool) {
	for i := 1; i+1 < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n':
			return "", false
		case '|':
			if s[i+1] == '>' {
				if i <= 2 {
					return "", false
				}
				return s[:i+2], true
			}
		}
	}
	return "", false
}

// render turns a record into a sample; checked says r passed shard.Check.
func (e *exporter) render(ctx context.Context, r *record.Record, checked bool) (*sample, error) {
	s := &sample{System: r.System}
	if s.System == "" {
		s.System = e.cfg.System
	}
	var err error
	if s.tools, err = e.toolTexts(r.Tools); err != nil {
		return nil, contract.Rejectf("export_bad_tool", "%v", err)
	}
	if !e.quoting {
		s.Tools = toolsString(s.tools)
	}
	msgs := r.Messages
	// A dialogue is a training target only up to its last assistant turn.
	last := len(msgs) - 1
	for last >= 0 && msgs[last].Role != record.RoleAssistant {
		last--
	}
	if last < 0 {
		return nil, contract.Rejectf("export_no_assistant_turn", "the dialogue has no assistant turn to learn")
	}
	if last < len(msgs)-1 {
		Note(ctx, "trailing user or tool turns after the last assistant turn are cut (they have no target)")
	}
	s.Conversations = make([]verify.Turn, 0, last+1)
	for i := 0; i <= last; i++ {
		m := &msgs[i]
		switch m.Role {
		case record.RoleSystem:
			if i != 0 || len(s.Conversations) > 0 {
				return nil, contract.Rejectf("export_system_inside", "message %d: system message inside the dialogue", i)
			}
			s.System = m.Content
		case record.RoleUser:
			s.Conversations = append(s.Conversations, verify.Turn{From: "human", Value: m.Content})
		case record.RoleTool:
			v, err := observation(m.Results)
			if err != nil {
				return nil, contract.Rejectf("export_bad_result", "message %d: %v", i, err)
			}
			if e.quoting && len(m.Results) == 1 && m.Results[0].Name == verify.MetaTool {
				if s.quoted == nil {
					s.quoted = make([][]byte, last+1)
				}
				s.quoted[len(s.Conversations)] = e.results.quote(v)
			}
			s.Conversations = append(s.Conversations, verify.Turn{From: "observation", Value: v})
		case record.RoleAssistant:
			if len(m.Calls) > 1 && e.cfg.Style == "function_call" && !e.tpl.Parallel() {
				turns, used, err := e.split(ctx, msgs, i, last, checked, r.Tag(DecisionTokensTag) == "on")
				if err != nil {
					return nil, err
				}
				s.Conversations = append(s.Conversations, turns...)
				i += used
				continue
			}
			if e.quoting && e.cfg.Style == "function_call" && len(m.Calls) == 1 && m.Calls[0].Name == verify.MetaTool {
				t, q, err := e.metaToolCall(ctx, m, checked)
				if err != nil {
					return nil, err
				}
				if s.quoted == nil {
					s.quoted = make([][]byte, last+1)
				}
				s.quoted[len(s.Conversations)] = q
				s.Conversations = append(s.Conversations, t)
				continue
			}
			t, err := e.assistant(ctx, m, checked)
			if err != nil {
				return nil, err
			}
			if e.quoting && onlyMetaToolCalls(m.Calls) {
				if s.quoted == nil {
					s.quoted = make([][]byte, last+1)
				}
				s.quoted[len(s.Conversations)] = e.results.quote(t.Value)
			}
			s.Conversations = append(s.Conversations, t)
		default:
			return nil, contract.Rejectf("export_bad_role", "message %d: role %q", i, m.Role)
		}
	}
	if e.system != nil {
		if err := e.inlineSystemText(r, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// inlineSystemText moves the tool definitions of an inline sample (with
// tools_placement system) from the tools column, which it leaves "[]",
// into its system text, rendered by the surface's prompt. A sample
// without tools keeps its system text as it is (seed 002 Fig 1(a)). The
// template's tool formatter then reads no tools, so none is checked
// against it (lf_bad_tools).
func (e *exporter) inlineSystemText(r *record.Record, s *sample) error {
	s.Tools = "[]"
	if len(s.tools) == 0 {
		return nil
	}
	d := inlineSystem{System: s.System, Tools: spacedList(s.tools)}
	if asksUser(r) {
		d.GetUserInput = verify.GetUserInput
	}
	if r.Tag(DecisionTokensTag) == "on" {
		d.AnswerToken, d.UseToolToken = e.answerToken, e.useToolToken
	}
	msgs, err := e.system.Render(d)
	if err != nil {
		return err
	}
	s.System, s.tools = msgs[0].Content, nil
	return nil
}

// split writes the parallel calls of msgs[i] one by one for a template that
// takes one call per turn: call, its result, next call, …; the turn's text
// and reasoning go with the first call. It needs the tool turn after
// msgs[i] to hold one result per call, in the calls' order; the results are
// taken from it even when it is cut as trailing (the last call then ends
// the sample). used is how many messages after i it consumed. With
// decision tokens (decision), every call turn starts with the turn's token,
// as every call turn of a record decision_tokens marked does.
func (e *exporter) split(ctx context.Context, msgs []record.Message, i, last int, checked, decision bool) (turns []verify.Turn, used int, err error) {
	m := msgs[i]
	if e.cfg.Parallel != "split" {
		return nil, 0, contract.Rejectf(verify.ReasonLFNoParallel, "message %d: %d parallel calls; template %s renders one call per turn (set parallel: split to write them one after another)",
			i, len(m.Calls), e.tpl.Name)
	}
	var res []record.Result
	if i+1 < len(msgs) && msgs[i+1].Role == record.RoleTool {
		res = msgs[i+1].Results
	}
	if len(res) != len(m.Calls) {
		return nil, 0, contract.Rejectf(verify.ReasonLFNoParallel, "message %d: %d parallel calls answered by %d results; they cannot be split into one call and its result at a time (template %s)",
			i, len(m.Calls), len(res), e.tpl.Name)
	}
	for k, c := range m.Calls {
		if res[k].Name != "" && res[k].Name != c.Name {
			return nil, 0, contract.Rejectf(verify.ReasonLFNoParallel, "message %d: result %d is %s's, call %d is %s; the results do not follow the calls (template %s)",
				i, k, res[k].Name, k, c.Name, e.tpl.Name)
		}
	}
	for k, c := range m.Calls {
		one := record.Message{Role: record.RoleAssistant, Calls: []record.Call{c}}
		if k == 0 {
			one.Content, one.Reasoning = m.Content, m.Reasoning
		} else if tok, ok := leadingToken(m.Content); ok && decision {
			one.Content = tok
		}
		t, err := e.assistant(ctx, &one, checked)
		if err != nil {
			return nil, 0, err
		}
		turns = append(turns, t)
		if k < len(m.Calls)-1 || i+1 <= last {
			turns = append(turns, verify.Turn{From: "observation", Value: res[k].Content})
		}
	}
	Note(ctx, "parallel calls are split into one call and its result at a time (template %s takes one call per turn)", e.tpl.Name)
	if i+1 <= last {
		return turns, 1, nil
	}
	return turns, 0, nil
}

// assistant renders an assistant turn; checked says its record passed
// shard.Check.
func (e *exporter) assistant(ctx context.Context, m *record.Message, checked bool) (verify.Turn, error) {
	if len(m.Calls) == 0 {
		text := m.Content
		if m.Reasoning != "" {
			switch {
			case e.cfg.Style == "function_call" && e.cfg.Thoughts:
				text = e.tpl.Thought(m.Reasoning) + text
			case e.cfg.Surface == "tool_dc":
				text = "<think>" + m.Reasoning + "</think>" + text
			case e.cfg.Style == "inline":
				text = joinText(m.Reasoning, text)
			default:
				Note(ctx, "reasoning of text answers is dropped (style function_call without thoughts)")
			}
		}
		return verify.Turn{From: "gpt", Value: text}, nil
	}
	if e.cfg.Style == "function_call" {
		return e.functionCall(ctx, m, checked)
	}
	switch e.cfg.Surface {
	case "llama3":
		v, err := callsJSON(m.Calls, "parameters")
		if err != nil {
			return verify.Turn{}, contract.Rejectf("export_bad_call", "%v", err)
		}
		return verify.Turn{From: "gpt", Value: joinText(m.Content, m.Reasoning) + "<|python_tag|>" + listJSON(v, len(m.Calls))}, nil
	case "decision":
		calls := pycall.Print(m.Calls)
		head := m.Content + m.Reasoning
		if said := strings.TrimPrefix(head, decisionToken(head)); strings.TrimSpace(said) != "" {
			head += "\n\n" // "<|use_tool|>reason\n\n[calls]", "<|answer|>text\n\n[get_user_input()]"
		}
		return verify.Turn{From: "gpt", Value: head + calls}, nil
	default: // tool_dc
		return verify.Turn{From: "gpt", Value: m.Content + "<think>" + m.Reasoning + "</think><tool_call>" + pycall.Print(m.Calls) + "</tool_call>"}, nil
	}
}

// functionCall writes a call turn as a function_call value for the
// template: the thought (with thoughts), then the turn's text, then the
// calls as JSON — bare when there is no text, else inside the template's
// tool-call words, outside which LLaMA-Factory keeps the text before the
// rendered calls. The text and calls are separated by a newline unless the
// text ends in a special token (a decision token). The value is then read
// back as the template's function formatter reads it; a value that does not
// give back exactly the thought, the text and the calls is rejected, so no
// answer or decision token is lost on the way to training.
func (e *exporter) functionCall(ctx context.Context, m *record.Message, checked bool) (verify.Turn, error) {
	thought := ""
	// Calls that are not JSON are rejected before anything else is said
	// of the turn: dropped reasoning is noted for a turn with good calls.
	noteDropped := func() { e.noteCallReasoning(ctx, m) }
	if m.Reasoning != "" && e.cfg.Thoughts {
		thought = e.tpl.Thought(m.Reasoning)
	}
	text := m.Content
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	prefix, open, shut := thought, "", ""
	if text != "" {
		if !e.tpl.CallText {
			if _, err := callsJSON(m.Calls, "arguments"); err != nil {
				return verify.Turn{}, contract.Rejectf("export_bad_call", "%v", err)
			}
			noteDropped()
			return verify.Turn{}, contract.Rejectf(ReasonLFNoCallText, "template %s renders a function_call turn as its calls alone: the text said with them (%.60q) would be lost; use a template with tool-call words or style inline",
				e.tpl.Name, text)
		}
		sep := "\n"
		if strings.HasSuffix(text, "|>") {
			sep = ""
		}
		// The thought comes first, before a decision token in text:
		// reasoning templates keep the thought at the head of the turn
		// (LLaMA-Factory adds an empty one there; Qwen3's chat template
		// drops what precedes <think>), so the token is the first thing
		// written after it (README, decision_tokens).
		prefix = thought + text + sep
		open, shut = e.tpl.ToolCallWords[0], e.tpl.ToolCallWords[1]
	}
	value, js, err := joinCalls(prefix, open, m.Calls, shut, checked)
	if err != nil {
		return verify.Turn{}, contract.Rejectf("export_bad_call", "%v", err)
	}
	noteDropped()
	if e.readsBack(value, prefix, js, m.Calls) {
		return verify.Turn{From: "function_call", Value: value}, nil
	}
	ft, err := e.tpl.ReadFunction(value)
	if err != nil {
		kind := verify.ReasonLFBadFunctionCall
		if len(m.Calls) > 1 && !e.tpl.Parallel() {
			kind = verify.ReasonLFNoParallel
		}
		return verify.Turn{}, contract.Rejectf(kind, "template %s: %v", e.tpl.Name, err)
	}
	same := ft.Prefix == prefix && len(ft.Calls) == len(m.Calls)
	for k := 0; same && k < len(ft.Calls); k++ {
		same = ft.Calls[k].Name == m.Calls[k].Name
	}
	if !same {
		return verify.Turn{}, contract.Rejectf(verify.ReasonLFBadFunctionCall, "template %s reads the call turn back as %q before %d calls, not as written (the text or reasoning holds the template's own words)",
			e.tpl.Name, ft.Prefix, len(ft.Calls))
	}
	return verify.Turn{From: "function_call", Value: value}, nil
}

// noteCallReasoning notes that m's reasoning is dropped, when it has any
// and thoughts are not exported.
func (e *exporter) noteCallReasoning(ctx context.Context, m *record.Message) {
	if m.Reasoning != "" && !e.cfg.Thoughts {
		Note(ctx, "reasoning before calls is dropped (style function_call without thoughts; set thoughts: true with a reasoning template)")
	}
}

// metaToolCall is functionCall of an assistant turn of one meta_tool call
// for quoted samples, with the turn's value as a JSON string; both
// remembered (e.metaCalls) by what functionCall reads of the turn.
func (e *exporter) metaToolCall(ctx context.Context, m *record.Message, checked bool) (verify.Turn, []byte, error) {
	var buf [512]byte
	key := metaCallKey(buf[:0], m, e.cfg.Thoughts, checked)
	if ct, ok := e.metaCalls.lookup(key); ok {
		e.noteCallReasoning(ctx, m)
		return verify.Turn{From: "function_call", Value: ct.value}, ct.quoted, nil
	}
	t, err := e.functionCall(ctx, m, checked)
	if err != nil {
		return verify.Turn{}, nil, err
	}
	ct := e.metaCalls.add(key, t.Value)
	return verify.Turn{From: "function_call", Value: ct.value}, ct.quoted, nil
}

// metaCallKey appends to dst what functionCall's outcome for m depends on
// besides the exporter's settings: its text, its reasoning when thoughts
// are exported, whether its record passed shard.Check, and its calls'
// names and arguments, each but the last after its length.
func metaCallKey(dst []byte, m *record.Message, thoughts, checked bool) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(m.Content)))
	dst = append(dst, m.Content...)
	if thoughts {
		dst = binary.AppendUvarint(dst, uint64(len(m.Reasoning)))
		dst = append(dst, m.Reasoning...)
	}
	if checked {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	for i, c := range m.Calls {
		dst = binary.AppendUvarint(dst, uint64(len(c.Name)))
		dst = append(dst, c.Name...)
		if i < len(m.Calls)-1 {
			dst = binary.AppendUvarint(dst, uint64(len(c.Arguments)))
		}
		dst = append(dst, c.Arguments...)
	}
	return dst
}

// callTurns remembers function_call values and their JSON strings
// (jsonout.AppendString's), by metaCallKey, up to callTurnsBudget bytes of
// keys and texts: meta_tool writes one call's arguments per library tool
// and records repeat them, so their turns (JSON dense in quotes) repeat.
// It keeps its own copies. Safe for concurrent use.
type callTurns struct {
	mu   sync.Mutex
	m    map[string]callTurn
	used int
}

// A callTurn is a function_call value and its JSON string; not to be
// changed.
type callTurn struct {
	value  string
	quoted []byte
}

// callTurnsBudget bounds a callTurns' memory; a turn met after it is full
// is made each time.
const callTurnsBudget = 16 << 20

func (c *callTurns) lookup(key []byte) (callTurn, bool) {
	c.mu.Lock()
	ct, ok := c.m[string(key)]
	c.mu.Unlock()
	return ct, ok
}

// add returns the callTurn of value, remembered under key while the
// budget lasts.
func (c *callTurns) add(key []byte, value string) callTurn {
	ct := callTurn{value: strings.Clone(value)}
	ct.quoted = slices.Clip(jsonout.AppendString(make([]byte, 0, len(value)+len(value)/4+2), value))
	size := len(key) + len(ct.value) + cap(ct.quoted) + 64
	c.mu.Lock()
	defer c.mu.Unlock()
	if known, ok := c.m[string(key)]; ok {
		return known
	}
	if c.used+size <= callTurnsBudget {
		if c.m == nil {
			c.m = map[string]callTurn{}
		}
		c.m[string(key)] = ct
		c.used += size
	}
	return ct
}

// readsBack reports, without parsing JSON, that the template's function
// formatter reads value back as prefix before calls: when the part it parses
// is exactly js, the JSON callsJSON wrote of calls (names as JSON strings,
// arguments checked to be JSON objects), the parse gives back the calls as
// written, so ReadFunction would find them, unless a name is blank or not
// UTF-8 (JSON replaces such bytes) or the calls are parallel for a template
// that takes one. Those, and any other split, go through ReadFunction.
func (e *exporter) readsBack(value, prefix, js string, calls []record.Call) bool {
	if !e.tpl.SplitsAs(value, prefix, js) || len(calls) > 1 && !e.tpl.Parallel() {
		return false
	}
	for _, c := range calls {
		if strings.TrimSpace(c.Name) == "" || !utf8.ValidString(c.Name) {
			return false
		}
	}
	return true
}

// joinText joins non-empty parts with a space.
func joinText(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// listJSON wraps a single call object in a list (llama3 surface always
// writes a list, as in seed 000 Fig 13).
func listJSON(v string, n int) string {
	if n == 1 {
		return "[" + v + "]"
	}
	return v
}

// callsJSON renders calls as {"name","<argsKey>"} objects: one object for a
// single call, a list for parallel calls.
func callsJSON(calls []record.Call, argsKey string) (string, error) {
	b, err := appendCallsJSON(nil, calls, argsKey, false)
	return string(b), err
}

// appendCallsJSON appends callsJSON's text to dst (allocated to fit when
// nil). checked says the calls' arguments are known to be JSON (their
// record passed shard.Check): only that each is an object is checked.
func appendCallsJSON(dst []byte, calls []record.Call, argsKey string, checked bool) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, callsJSONSize(calls, argsKey))
	}
	if len(calls) > 1 {
		dst = append(dst, '[')
	}
	for i, c := range calls {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		args := c.Arguments
		trimmed := bytes.TrimSpace(args)
		if len(trimmed) == 0 {
			args, trimmed = json.RawMessage("{}"), json.RawMessage("{}")
		}
		if trimmed[0] != '{' || !checked && !shard.ValidJSON(args) {
			return nil, fmt.Errorf("call %d (%s): arguments are not a JSON object", i, c.Name)
		}
		dst = append(dst, `{"name": `...)
		dst = jsonout.AppendString(dst, c.Name)
		dst = append(dst, `, "`...)
		dst = append(dst, argsKey...)
		dst = append(dst, `": `...)
		dst = append(dst, args...)
		dst = append(dst, '}')
	}
	if len(calls) > 1 {
		dst = append(dst, ']')
	}
	return dst, nil
}

// callsJSONSize is about the size of callsJSON's text (a little more for
// names to escape).
func callsJSONSize(calls []record.Call, argsKey string) int {
	n := 2
	for _, c := range calls {
		n += 24 + len(argsKey) + len(c.Name) + len(c.Name)/8 + len(c.Arguments)
	}
	return n
}

// joinCalls returns prefix+open+callsJSON(calls, "arguments")+shut as one
// string, made in one allocation, and the calls' part of it (checked: see
// appendCallsJSON).
func joinCalls(prefix, open string, calls []record.Call, shut string, checked bool) (value, js string, err error) {
	b := make([]byte, 0, len(prefix)+len(open)+callsJSONSize(calls, "arguments")+len(shut))
	b = append(append(b, prefix...), open...)
	start := len(b)
	if b, err = appendCallsJSON(b, calls, "arguments", checked); err != nil {
		return "", "", err
	}
	end := len(b)
	b = append(b, shut...)
	value = unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
	return value, value[start:end], nil
}

// observation renders a tool turn: the result itself for one call, a JSON
// list of the results for parallel calls (JSON results embedded as JSON).
func observation(results []record.Result) (string, error) {
	if len(results) == 1 {
		return results[0].Content, nil
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, res := range results {
		if i > 0 {
			buf.WriteString(", ")
		}
		c := strings.TrimSpace(res.Content)
		if c != "" && shard.ValidJSON([]byte(c)) {
			buf.WriteString(c)
			continue
		}
		b, err := jsonout.Marshal(res.Content)
		if err != nil {
			return "", err
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.String(), nil
}

// toolsJSON renders tools as LLaMA-Factory's templates print them: a JSON
// list of {"name", "description", "parameters"[, "response"]}. The schemas
// are embedded as they are (compact JSON, checked when their shard was
// written), so only the strings are encoded here. A tool without a name or
// whose parameters are not a JSON object is an error: LLaMA-Factory's tool
// formatters would fail on it.
func toolsJSON(tools []record.Tool) (string, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := appendToolJSON(&b, i, t); err != nil {
			return "", err
		}
	}
	b.WriteByte(']')
	return b.String(), nil
}

// appendToolJSON writes tool i of a list as toolsJSON does.
func appendToolJSON(b *bytes.Buffer, i int, t record.Tool) error {
	if strings.TrimSpace(t.Name) == "" {
		return fmt.Errorf("tool %d has no name", i)
	}
	params := bytes.TrimSpace(t.Parameters)
	if len(params) == 0 {
		params = []byte(`{"type":"object","properties":{}}`)
	}
	if params[0] != '{' {
		return fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
	}
	b.WriteString(`{"name":`)
	writeJSONString(b, t.Name)
	b.WriteString(`,"description":`)
	writeJSONString(b, t.Description)
	b.WriteString(`,"parameters":`)
	b.Write(params)
	if resp := bytes.TrimSpace(t.Response); len(resp) > 0 {
		b.WriteString(`,"response":`)
		b.Write(resp)
	}
	b.WriteByte('}')
	return nil
}

// A toolText is one tool as the export writes it: obj, its object in the
// tools list (appendToolJSON); quoted, obj inside the JSON string of the
// tools column (writeJSONString(obj) without its quotes); and params, what
// the template's CheckToolParams says of its parameters ("" when nothing).
// JSON string escaping goes character by character (invalid UTF-8 byte by
// byte), and every object ends in '}', so no character spans two pieces:
// the tools string [obj,obj] is written as "[quoted,quoted]", the same
// bytes as escaping the whole list.
type toolText struct {
	tool   record.Tool // the definition, to tell tools of one key apart
	obj    []byte
	quoted []byte // nil when the samples are not JSON lines
	// spaced is obj in Python's json.dumps layout (spacedJSON) for the
	// system text of inline samples; nil for other exports, which have
	// quoted and params instead.
	spaced []byte
	params string
	// lfTokens is 1 + the template's ToolTokens of obj once a measured
	// sample counted it (renderedTokens), else 0.
	lfTokens atomic.Int64
}

// A toolMemo remembers the toolText of each distinct tool, up to
// toolMemoBudget bytes of texts: after meta_tool every record lists its own
// draw of the library's tools, so whole lists do not repeat but their
// tools do, and escaping them (JSON full of quotes) was the export's
// largest cost. Tools are looked up by the lengths of their fields, which
// the record's tool list holds (hashing a name or description reads text
// of the record's that comparing reads again), and compared in full.
//
// The memo keeps only its own copies of the definitions it remembers
// (made once, when a tool is admitted, and counted in the budget), never a
// record's memory: a record's strings may be views of a whole row group's
// decoded columns, which one remembered tool would keep alive, past the
// budget. (It no longer finds a tool met again in the same memory by
// address: that needed the memory kept, and comparing bytes instead costs
// no more than noise.) The zero value is ready; safe for concurrent use.
type toolMemo struct {
	mu sync.Mutex
	// slots hold the definitions met, in the slot of their lengths
	// (lenSlot), up to toolMemoVariants a slot; made with the first.
	slots []([]*toolText)
	used  int
}

// lenSlot is the toolMemo slot of tools with t's field lengths.
func lenSlot(t *record.Tool) int {
	h := uint64(len(t.Name)) | uint64(len(t.Description))<<16 ^ uint64(len(t.Parameters))<<32 ^ uint64(len(t.Response))<<48
	return int((h * 0x9e3779b97f4a7c15) >> (64 - toolMemoSlotBits))
}

const (
	// toolMemoBudget bounds the memo's memory; a tool met after it is full
	// is rendered each time.
	toolMemoBudget = 64 << 20
	// toolMemoSlotBits: the memo has 1<<toolMemoSlotBits slots.
	toolMemoSlotBits = 14
	// toolMemoVariants bounds the definitions remembered in one slot
	// (tools whose field lengths are the same or share the slot).
	toolMemoVariants = 16
)

// lookup returns the remembered text of t, or nil. Callers hold m.mu.
func (m *toolMemo) lookup(t *record.Tool) *toolText {
	if m.slots == nil {
		return nil
	}
	for _, tt := range m.slots[lenSlot(t)] {
		if tt.tool.Equal(t) {
			return tt
		}
	}
	return nil
}

// toolTexts renders tools, each through the memo.
func (e *exporter) toolTexts(tools []record.Tool) ([]*toolText, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	m := &e.tools
	texts := make([]*toolText, len(tools))
	missing := false
	m.mu.Lock()
	for i := range tools {
		if texts[i] = m.lookup(&tools[i]); texts[i] == nil {
			missing = true
		}
	}
	m.mu.Unlock()
	if !missing {
		return texts, nil
	}
	for i := range tools {
		if texts[i] != nil {
			continue
		}
		tt, err := e.newToolText(i, tools[i])
		if err != nil {
			return nil, err
		}
		texts[i] = tt
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots == nil {
		m.slots = make([][]*toolText, 1<<toolMemoSlotBits)
	}
	for _, tt := range texts {
		t := &tt.tool
		size := len(tt.obj) + len(tt.quoted) + len(tt.spaced) + len(tt.params) + len(t.Name) + len(t.Description) + len(t.Parameters) + len(t.Response) + 160
		k := lenSlot(t)
		if m.used+size > toolMemoBudget || len(m.slots[k]) >= toolMemoVariants || m.lookup(&tt.tool) != nil {
			continue
		}
		// The memo outlives the record: it keeps its own copy of the
		// definition, not views of the record's (decoder's) memory.
		tt.tool = tt.tool.Owned()
		m.slots[k] = append(m.slots[k], tt)
		m.used += size
	}
	return texts, nil
}

// onlyMetaToolCalls reports whether calls are meta_tool calls, one or more.
func onlyMetaToolCalls(calls []record.Call) bool {
	for _, c := range calls {
		if c.Name != verify.MetaTool {
			return false
		}
	}
	return len(calls) > 0
}

// quotedTexts remembers texts as JSON strings (jsonout.AppendString), up
// to quotedTextsBudget bytes of texts and their quoted forms: the export
// quotes meta_tool results and the turns calling meta_tool through it, as
// meta_tool writes one result and one call's arguments per library tool
// and records repeat them (dense in quotes, they cost their samples' lines
// more than their length says).
type quotedTexts struct{ memo textMemo[[]byte] }

// quotedTextsBudget bounds a quotedTexts' memory; a text met after it is
// full is quoted each time.
const quotedTextsBudget = 16 << 20

func newQuotedTexts() *quotedTexts {
	return &quotedTexts{memo: textMemo[[]byte]{budget: quotedTextsBudget}}
}

// quote returns text as a JSON string, remembered while the budget lasts.
// The bytes returned are not to be changed.
func (q *quotedTexts) quote(text string) []byte {
	return q.memo.get(text, func(text string) ([]byte, int) {
		b := slices.Clip(jsonout.AppendString(make([]byte, 0, len(text)+len(text)/4+2), text))
		return b, cap(b)
	})
}

// spacedList is the JSON list of texts' tools in Python's json.dumps
// layout: spacedJSON(toolsString(texts)), from their spaced texts.
func spacedList(texts []*toolText) string {
	return joinTools(texts, ", ", func(tt *toolText) []byte { return tt.spaced })
}

// toolsString is the tools column of texts' tools: toolsJSON's string.
func toolsString(texts []*toolText) string {
	return joinTools(texts, ",", func(tt *toolText) []byte { return tt.obj })
}

// joinTools writes the JSON list of one text of each tool, sep between.
func joinTools(texts []*toolText, sep string, text func(*toolText) []byte) string {
	n := 2
	for _, tt := range texts {
		n += len(text(tt)) + len(sep)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('[')
	for i, tt := range texts {
		if i > 0 {
			b.WriteString(sep)
		}
		b.Write(text(tt))
	}
	b.WriteByte(']')
	return b.String()
}

// newToolText renders tool i of a list.
func (e *exporter) newToolText(i int, t record.Tool) (*toolText, error) {
	var b bytes.Buffer
	if err := appendToolJSON(&b, i, t); err != nil {
		return nil, err
	}
	tt := &toolText{tool: t, obj: b.Bytes()}
	if e.system != nil { // the tools go into the system text, not the tools column
		tt.spaced = []byte(spacedJSON(string(tt.obj)))
		return tt, nil
	}
	if e.quoting {
		q := jsonout.AppendString(make([]byte, 0, len(tt.obj)+len(tt.obj)/4+2), string(tt.obj))
		tt.quoted = q[1 : len(q)-1]
	}
	if len(bytes.TrimSpace(t.Parameters)) > 0 && e.tpl.ToolFormat == "default" {
		if err := e.tpl.CheckToolParams(t.Parameters); err != nil {
			tt.params = err.Error()
		}
	}
	return tt, nil
}

// writeJSONString writes s as a JSON string exactly as encoding/json does
// without HTML escaping (jsonout.AppendString), into the buffer's free
// space in one piece: a Write per escape was most of its time on tool
// lists, which are JSON text full of quotes.
func writeJSONString(b *bytes.Buffer, s string) {
	b.Grow(len(s) + len(s)/8 + 2)
	b.Write(jsonout.AppendString(b.AvailableBuffer(), s))
}

// WriteShard writes one data file of the dataset folder from the records
// Process returned (each carries its rendering in Rendered).
func (e *exporter) WriteShard(_ context.Context, dir *atomicfs.Root, name string, recs []*record.Record) ([]manifests.FileRef, []shard.Reject, error) {
	file := e.cfg.Dataset + "/part-" + name + "." + e.cfg.Format
	f, err := dir.Create(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Abort()
	if e.cfg.Format == "parquet" {
		err = e.writeParquet(f, recs)
	} else {
		err = writeLines(f, recs)
	}
	if err != nil {
		return nil, nil, err
	}
	ref := manifests.FileRef{Path: dir.Rel(file), SHA256: f.SHA256(), Rows: int64(len(recs)), Bytes: f.Size()}
	return []manifests.FileRef{ref}, nil, f.Commit()
}

// writeLines writes the samples Process rendered as JSON lines. Lines are
// appended straight to one buffer (appendLine), taken from linesBuffers
// and given back, and written to f (which hashes them) in pieces of about
// linesPiece bytes: no other copy of a line is made.
func writeLines(f io.Writer, recs []*record.Record) error {
	bp := linesBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		if cap(b) <= 4*linesPiece { // not one grown by a huge line
			*bp = b[:0]
			linesBuffers.Put(bp)
		}
	}()
	for _, r := range recs {
		switch v := r.Rendered.(type) {
		case *sample:
			b = appendLine(b, v)
		case []byte:
			b = append(b, v...)
		default:
			return fmt.Errorf("record %s was not rendered", r.ID)
		}
		if len(b) >= linesPiece {
			if _, err := f.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if len(b) == 0 {
		return nil
	}
	_, err := f.Write(b)
	return err
}

// linesPiece is the size from which writeLines writes what it encoded.
const linesPiece = 1 << 20

// linesBuffers holds writeLines' buffers between shards: a new one per
// shard was 1.25 MiB to allocate and clear each time.
var linesBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, linesPiece+linesPiece/4)
	return &b
}}

func (e *exporter) writeParquet(f *atomicfs.File, recs []*record.Record) error {
	rows := make([]sample, len(recs))
	for i, r := range recs {
		s, ok := r.Rendered.(*sample)
		if !ok {
			return fmt.Errorf("record %s was not rendered", r.ID)
		}
		rows[i] = *s
		rows[i].Tools = s.toolsJSON()
	}
	w := parquet.NewGenericWriter[sample](f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(1000))
	if _, err := w.Write(rows); err != nil {
		return err
	}
	return w.Close()
}

// appendLine appends s as one JSON line, byte for byte what encoding/json
// writes without HTML escaping (TestAppendLineMatchesEncodingJSON holds
// it to that); by hand, because encoding the samples was a tenth of
// ingest→export. The tools string is spliced from its tools' quoted texts
// when it has them.
func appendLine(b []byte, s *sample) []byte {
	n := 64 + len(s.System) + len(s.Tools) + len(s.Tools)/4
	for _, tt := range s.tools {
		n += len(tt.quoted) + 1
	}
	for _, t := range s.Conversations {
		n += 24 + len(t.Value) + len(t.Value)/16
	}
	b = slices.Grow(b, n)
	b = append(b, `{"conversations":[`...)
	for i, t := range s.Conversations {
		if i > 0 {
			b = append(b, ',')
		}
		switch t.From { // the heads of the four roles spelled out (encoding From was 7 % of a line)
		case "human":
			b = append(b, `{"from":"human","value":`...)
		case "gpt":
			b = append(b, `{"from":"gpt","value":`...)
		case "function_call":
			b = append(b, `{"from":"function_call","value":`...)
		case "observation":
			b = append(b, `{"from":"observation","value":`...)
		default:
			b = append(b, `{"from":`...)
			b = jsonout.AppendString(b, t.From)
			b = append(b, `,"value":`...)
		}
		if i < len(s.quoted) && s.quoted[i] != nil {
			b = append(b, s.quoted[i]...)
		} else {
			b = jsonout.AppendString(b, t.Value)
		}
		b = append(b, '}')
	}
	b = append(b, `],"system":`...)
	b = jsonout.AppendString(b, s.System)
	b = append(b, `,"tools":`...)
	b = appendTools(b, s)
	return append(b, "}\n"...)
}

// appendTools appends the tools column as jsonout.AppendString does,
// spliced from its tools' quoted texts when it has them.
func appendTools(b []byte, s *sample) []byte {
	if !s.spliced() {
		return jsonout.AppendString(b, s.toolsJSON())
	}
	b = append(b, `"[`...)
	for i, tt := range s.tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, tt.quoted...)
	}
	return append(b, `]"`...)
}

// Finish writes dataset_info.json, which names the dataset folder (and,
// under "augment", which LLaMA-Factory ignores, the template and how many
// samples hold stand-in text), and train_lora.yaml.
func (e *exporter) Finish(dir *atomicfs.Root, shards []manifests.Shard) ([]string, error) {
	var total manifests.Counts
	for _, sh := range shards {
		total.Add(sh.Counts)
	}
	notes, err := e.finishFiles(dir, total)
	if total.Out == 0 {
		// No error: an empty sample is a valid run, but not a dataset.
		msg := "empty export: no sample reached it (a filter or sample quota took every record?), so there is nothing to train on"
		if n := manifests.Sum(total.Rejected); n > 0 {
			msg = fmt.Sprintf("empty export: it rejected every one of the %d samples that reached it (%s; see its rejects), so there is nothing to train on",
				n, manifests.FormatCounts(total.Rejected))
		}
		if e.env != nil && e.env.Log != nil {
			e.env.Log.Warn(msg) // the stage's logger names the stage
		}
		notes = append(notes, msg)
	}
	return notes, err
}

// finishFiles writes the index files of the export whose shards add up to
// total, and returns its notes.
func (e *exporter) finishFiles(dir *atomicfs.Root, total manifests.Counts) ([]string, error) {
	if e.cfg.ToolsPlacement == "role" {
		return e.finishRole(dir, total)
	}
	st := exportStats{samples: total.Out, standIn: total.Counters[CounterStandIn]}
	for k, n := range total.Counters {
		if v, ok := strings.CutPrefix(k, counterCutoff); ok && n > 0 {
			if c, err := strconv.Atoi(v); err == nil && c > st.cutoff {
				st.cutoff = c
			}
			st.measured += n
		}
		if tok, ok := strings.CutPrefix(k, counterToken); ok && n > 0 {
			st.tokens = append(st.tokens, tok)
		}
	}
	slices.Sort(st.tokens)
	meta := map[string]any{"template": e.cfg.Template, "samples": st.samples}
	var notes []string
	if st.standIn > 0 {
		meta["stand_in_samples"] = st.standIn
		meta["stand_in"] = standInText
		notes = append(notes, fmt.Sprintf("stand-in data: %d of %d samples hold offline-teacher output (allow_offline: true); dataset_info.json and train_lora.yaml say so", st.standIn, st.samples))
	}
	info := map[string]any{
		e.cfg.Dataset: map[string]any{
			"file_name":  e.cfg.Dataset,
			"formatting": "sharegpt",
			"columns":    map[string]string{"messages": "conversations", "system": "system", "tools": "tools"},
			"augment":    meta,
		},
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	if _, err = dir.WriteFile("dataset_info.json", append(b, '\n')); err != nil {
		return nil, err
	}
	if _, err = dir.WriteFile(TrainLoRAFile, e.trainLoRA(st)); err != nil {
		return nil, err
	}
	notes = append(notes, fmt.Sprintf("LLaMA-Factory: dataset_dir=%s dataset=%s template=%s; train with: cd %s && llamafactory-cli train %s",
		dir.Base(), e.cfg.Dataset, e.cfg.Template, dir.Base(), TrainLoRAFile))
	switch {
	case st.measured == 0 && st.samples > 0:
		// As train_lora.yaml and the card say: no cutoff_len at all.
		notes = append(notes, "cutoff_len: not measured (no verify stage counted tokens before this export), so train_lora.yaml sets none: run a verify stage before the export to have one that keeps every sample whole")
	case st.measured < st.samples:
		notes = append(notes, fmt.Sprintf("cutoff_len: %d of %d samples have a measured token count (verify's tokens tag); train_lora.yaml's cutoff_len covers those only", st.measured, st.samples))
	}
	return notes, nil
}

// standInText says what stand-in samples are, in dataset_info.json and
// card.json.
const standInText = "samples holding output of augment's offline teacher: rule-based stand-in text (reasoning, rewordings, negatives) and rule-based judges, not a teacher model's; for trying the pipeline, not for training a model to use"

// TrainLoRAFile is the LoRA training config the export writes beside
// dataset_info.json.
const TrainLoRAFile = "train_lora.yaml"

// exportStats is what Finish learns from the shards' counters.
type exportStats struct {
	samples, standIn, measured int64
	cutoff                     int      // 0 when no sample was measured
	tokens                     []string // decision tokens seen
}

// trainLoRA writes a LoRA SFT config for llamafactory-cli train, to be run
// from the export directory (dataset_dir "."). Keys are LLaMA-Factory's
// (hparams at ff6d4d1): add_special_tokens registers the decision tokens as
// special tokens (and turns on resize_vocab), enable_thinking is written
// for reasoning templates (true when thoughts are exported).
func (e *exporter) trainLoRA(st exportStats) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# LoRA SFT on the %s dataset of this directory, written by augment's export.\n", e.cfg.Dataset)
	w("# Run from this directory: llamafactory-cli train %s\n", TrainLoRAFile)
	if st.standIn > 0 {
		w("# STAND-IN DATA: %d of %d samples hold output of augment's offline teacher (rule-based\n", st.standIn, st.samples)
		w("# text, not a teacher model's): fine for trying the run, not for a model you mean to use.\n")
	}
	w("\n### model\n")
	if e.cfg.Model != "" {
		w("model_name_or_path: %s\n", yamlString(e.cfg.Model))
	} else {
		w("# model_name_or_path: not set (export.model); give it on the command line: model_name_or_path=…\n")
	}
	if len(st.tokens) > 0 {
		w("add_special_tokens: %s\n", yamlString(strings.Join(st.tokens, ",")))
	}
	w("\n### method\nstage: sft\ndo_train: true\nfinetuning_type: lora\nlora_rank: 8\nlora_target: all\n")
	w("\n### dataset\ndataset_dir: .\ndataset: %s\ntemplate: %s\n", yamlString(e.cfg.Dataset), e.cfg.Template)
	if e.tpl.Reasoning {
		w("enable_thinking: %t\n", e.cfg.Thoughts)
	}
	if st.cutoff > 0 {
		w("cutoff_len: %d\n", st.cutoff)
	} else {
		w("# cutoff_len: not measured (run a verify stage, which counts tokens, before the export)\n")
	}
	w("preprocessing_num_workers: 8\n")
	w("\n### output\noutput_dir: saves/%s-lora\nlogging_steps: 10\nsave_steps: 500\nplot_loss: true\noverwrite_output_dir: true\nreport_to: none\n", e.cfg.Dataset)
	w("\n### train\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 8\nlearning_rate: 1.0e-4\nnum_train_epochs: 3.0\nlr_scheduler_type: cosine\nwarmup_ratio: 0.1\nbf16: true\n")
	return b.Bytes()
}

// yamlString quotes s as a YAML double-quoted scalar (JSON string syntax).
func yamlString(s string) string {
	q, _ := jsonout.Marshal(s)
	return string(q)
}
