package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// ReasonConfig is the `reason:` stage: a teacher writes a short reasoning
// before every assistant turn that calls functions (meta_tool calls
// included) and the stage stores it in Message.Reasoning. Turns that only
// call get_user_input are replies whose text speaks for itself and get none.
//
//	stages:
//	  - reason:
//	      style: meta_tool      # or mediatek
//	      max_chars: 600
//	      source: answer        # or thinking
//
// Styles:
//   - meta_tool (seed 000, A.2, Fig 8 and Fig 13): three sentences addressed
//     to the user as "you": what you need now, which function and why, which
//     parameters with which values. Prompt prompts/reason_meta_tool.tmpl;
//     the answer is the reasoning text.
//   - mediatek (seed 002, §3.3 and App A): a few-shot prompt whose answer is
//     the JSON object {"reason": "…"}. Prompt prompts/reason_mediatek.tmpl.
//
// The teacher sees the record's tools and the dialogue up to and including
// the call turn, without the reasoning of earlier turns: each call turn's
// request depends only on the input record, so the requests of one record
// are sent in parallel and each is cached on its own (the paper's prompt does
// not need earlier reasoning either).
//
// Every answer is validated (see reasonProblem) and re-asked up to attempts
// times; a record whose answers never pass is rejected with the reason of the
// last failure: reason_empty, reason_bad_json (mediatek), reason_too_long,
// reason_missing_function, reason_invented_parameter or reason_no_thinking
// (source thinking) (or an llm_* reason
// for a request the teacher never answered).
//
// Source "thinking" distils a reasoning model's own thinking instead of its
// answer: the same prompt is sent, and the reasoning stored is the thinking
// the server returns apart from the answer (Response.Reasoning, from
// reasoning_content or reasoning), under the same checks; the answer itself
// is ignored. An answer without thinking is reason_no_thinking (re-asked
// like any failed check) and is never taken as the thinking. The mediatek
// style's JSON applies to the answer, so with source thinking the
// thinking is checked as plain text. The offline provider has no thinking,
// so this source needs a real teacher.
//
// Records without call turns pass through unchanged, and so do call turns
// that already carry reasoning unless overwrite is set.
type ReasonConfig struct {
	// Style is "meta_tool" (default) or "mediatek".
	Style string `yaml:"style" json:"style"`
	// Prompt overrides the style's built-in prompt with a txtar template
	// file, relative to pipeline.yaml.
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`
	// Attempts is how many times one call turn is asked before the record
	// is rejected (default 3).
	Attempts int `yaml:"attempts" json:"attempts"`
	// MaxChars caps the reasoning's length in characters (Unicode code
	// points) per call of the turn: a turn with three calls allows
	// 3 × max_chars. Default 600 (the paper's examples run 250–350 per call).
	MaxChars int `yaml:"max_chars" json:"max_chars"`
	// Overwrite replaces reasoning that a call turn already has (e.g. from
	// the source or an earlier stage); by default such turns are kept.
	Overwrite bool `yaml:"overwrite" json:"overwrite,omitempty"`
	// Source is where the reasoning comes from: "answer" (the default,
	// also when empty: the teacher's answer) or "thinking" (the teacher's own thinking, for
	// reasoning models).
	Source string `yaml:"source" json:"source,omitempty"`
}

// Sources of distilled reasoning (reason's source, tool_dc's trace).
const (
	SourceAnswer   = "answer"
	SourceThinking = "thinking"
)

// Reasoning styles.
const (
	ReasonStyleMetaTool = "meta_tool"
	ReasonStyleMediaTek = "mediatek"
)

// Reject reasons of the reason stage.
const (
	ReasonEmpty             = "reason_empty"
	ReasonBadJSON           = "reason_bad_json"
	ReasonTooLong           = "reason_too_long"
	ReasonMissingFunction   = "reason_missing_function"
	ReasonInventedParameter = "reason_invented_parameter"
	ReasonNoThinking        = "reason_no_thinking"
	ReasonThinkingMarkup    = "reason_thinking_markup" // <think> markup left in the answer (a leading block is dropped)
)

func (c *ReasonConfig) defaults() {
	if c.Style == "" {
		c.Style = ReasonStyleMetaTool
	}
	if c.Attempts == 0 {
		c.Attempts = 3
	}
	if c.MaxChars == 0 {
		c.MaxChars = 600
	}
}

func (c *ReasonConfig) validate() []string {
	var probs []string
	if c.Style != ReasonStyleMetaTool && c.Style != ReasonStyleMediaTek {
		probs = append(probs, fmt.Sprintf("style: %q is not one of %s, %s", c.Style, ReasonStyleMetaTool, ReasonStyleMediaTek))
	}
	if c.Attempts < 1 {
		probs = append(probs, "attempts: must be at least 1")
	}
	if c.MaxChars < 1 {
		probs = append(probs, "max_chars: must be positive")
	}
	if c.Source != "" && c.Source != SourceAnswer && c.Source != SourceThinking {
		probs = append(probs, fmt.Sprintf("source: %q is not one of %s, %s", c.Source, SourceAnswer, SourceThinking))
	}
	return probs
}

// version 2: get_user_input replies get no reasoning. 3: a leading
// <think>…</think> block of the answer is dropped, other thinking markup
// rejected. 4: the shared rule (llm.SplitThinking) also takes out
// DeepSeek-R1's thinking, an answer that is thinking only is
// llm_thinking_only, and a fence around the whole text is dropped.
// Requests keep version 2 (reasonRequests): no answer is paid again.
func (c *ReasonConfig) version() int { return 4 }

// reasonRequests is the version in the teacher requests' stage name.
const reasonRequests = 2

func (c *ReasonConfig) build(env *Env) (Stage, error) {
	if env.Teacher == nil {
		return nil, errors.New("reason: no teacher configured")
	}
	if c.Source == SourceThinking && env.Provider == llm.ProviderOffline {
		return nil, errors.New("reason: source thinking needs a teacher that returns its thinking (reasoning_content); the offline provider has none")
	}
	tmpl, err := env.Prompt("reason_"+c.Style, "prompt", c.Prompt, reasonData(record.Sample(), 1))
	if err != nil {
		return nil, err
	}
	return &reasoner{cfg: *c, env: env, tmpl: tmpl}, nil
}

type reasoner struct {
	cfg  ReasonConfig
	env  *Env
	tmpl *prompts.Template
}

func (s *reasoner) Concurrency() int { return max(1, s.env.Capacity) }

func (s *reasoner) writesTeacherText() bool { return true }

func (s *reasoner) usesModels() (teacher, embedder bool) { return true, false }

// Process asks for the reasoning of every call turn of r (in parallel) and
// returns r with Message.Reasoning set on each. The record is rejected when
// any turn fails; the error reported is that of the earliest failing turn,
// so the reject does not depend on which answer arrived first. Errors that
// are not rejects (fatal teacher errors, cancellation) win over rejects.
func (s *reasoner) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	var turns []int
	for k, m := range r.Messages {
		if m.Role == record.RoleAssistant && len(m.Calls) > 0 && !verify.Reply(m.Calls) && (s.cfg.Overwrite || m.Reasoning == "") {
			turns = append(turns, k)
		}
	}
	if len(turns) == 0 {
		return []*record.Record{r}, nil
	}
	texts := make([]string, len(turns))
	resps := make([]llm.Response, len(turns))
	errs := make([]error, len(turns))
	var wg sync.WaitGroup
	for i, k := range turns {
		wg.Go(func() {
			texts[i], resps[i], errs[i] = s.ask(ctx, r, k)
		})
	}
	wg.Wait()
	var reject error
	for i, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("messages[%d]: %w", turns[i], err)
		if _, ok := contract.ReasonOf(err); !ok {
			return nil, err
		}
		if reject == nil {
			reject = err
		}
	}
	if reject != nil {
		return nil, reject
	}
	out := r.Clone()
	for i, k := range turns {
		out.Messages[k].Reasoning = texts[i]
	}
	out.AddStep(s.env.Stage, resps[0].Provider, resps[0].Model)
	return []*record.Record{out}, nil
}

// reasonPrompt is what the reason templates render.
type reasonPrompt struct {
	Tools    string // the record's tools as an indented JSON list
	History  string // the dialogue before the call turn, one "[ROLE] text" block per message
	Turn     string // the call turn, rendered the same way
	Dialogue string // History and Turn together
	Calls    string // the turn's calls as an indented JSON list of {"name", "arguments"}
	Names    string // the called functions, quoted and comma-separated
}

// reasonData is the prompt data of the call turn k of r.
func reasonData(r *record.Record, k int) reasonPrompt {
	data := reasonPrompt{
		Tools:   promptToolsJSON(r.Tools),
		History: renderDialogue(r.System, r.Messages[:k]),
		Turn:    renderDialogue("", r.Messages[k:k+1]),
		Calls:   promptCallsJSON(r.Messages[k].Calls),
		Names:   quotedNames(calledNames(r.Messages[k])),
	}
	data.Dialogue = strings.TrimSpace(data.History + "\n\n" + data.Turn)
	return data
}

func (s *reasoner) ask(ctx context.Context, r *record.Record, k int) (string, llm.Response, error) {
	msgs, err := s.tmpl.Render(reasonData(r, k))
	if err != nil {
		return "", llm.Response{}, err
	}
	req := llm.Request{
		Stage:    "reason@" + strconv.Itoa(reasonRequests),
		Template: s.tmpl.Hash,
		Messages: msgs,
		Slot:     fmt.Sprintf("%s/turn%d", r.ID, k),
		Offline: func() (string, error) {
			text := reasonStandIn(r, k)
			if s.cfg.Style == ReasonStyleMediaTek {
				return reasonJSON(text), nil
			}
			return text, nil
		},
	}
	if s.cfg.Style == ReasonStyleMediaTek {
		req.JSONSchema = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"],"additionalProperties":false}`)
	}
	v := newReasonValidator(r, k, s.cfg.MaxChars)
	parse := func(resp llm.Response) (string, error) {
		text := resp.Content // llm.SplitThinking took out a leading thinking block
		switch {
		case s.cfg.Source == SourceThinking:
			if text = strings.TrimSpace(resp.Reasoning); text == "" {
				return "", contract.Rejectf(ReasonNoThinking, "the teacher returned no thinking (reasoning_content) with its answer")
			}
		case llm.HasThinkingMarkup(text):
			return "", contract.Rejectf(ReasonThinkingMarkup, "the answer holds <think> markup besides a leading thinking block: give the reasoning only")
		case s.cfg.Style == ReasonStyleMediaTek:
			var err error
			if text, err = parseReasonJSON(text); err != nil {
				return "", err
			}
		default:
			text = llm.StripFence(text) // a fence around the whole text is not part of it
		}
		if err := v.check(text); err != nil {
			return "", err
		}
		return text, nil
	}
	return llm.AskResponse(ctx, s.env.Teacher, req, s.cfg.Attempts, parse)
}

// parseReasonJSON reads a mediatek answer: one JSON object with the single
// key "reason" holding a string, optionally inside a ``` code fence.
func parseReasonJSON(content string) (string, error) {
	body := llm.StripFence(content)
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var v struct {
		Reason *string `json:"reason"`
	}
	if err := dec.Decode(&v); err != nil {
		return "", contract.Rejectf(ReasonBadJSON, "answer is not a JSON object with the single key \"reason\": %v", err)
	}
	if dec.More() {
		return "", contract.Rejectf(ReasonBadJSON, "answer has text after the JSON object")
	}
	if v.Reason == nil {
		return "", contract.Rejectf(ReasonBadJSON, "answer has no \"reason\" key")
	}
	return strings.TrimSpace(*v.Reason), nil
}

func reasonJSON(text string) string {
	b, _ := jsonout.Marshal(map[string]string{"reason": text})
	return string(b)
}

// reasonValidator checks one reasoning against its call turn.
//
// The checks, in order (the first failing one is reported):
//  1. reason_empty: the text is empty after trimming.
//  2. reason_too_long: more than max_chars × (number of calls of the turn)
//     Unicode code points.
//  3. reason_missing_function: some called function's name does not occur
//     in the text (case-insensitive substring; meta_tool counts like any
//     other function).
//  4. reason_invented_parameter: the text mentions, in code-like syntax, a
//     parameter name that none of the called functions defines. A mention
//     is `name=` (an identifier directly followed by one "=", as in
//     Python-style calls) outside double-quoted spans, `'name':` outside
//     double-quoted spans, or `"name":` (a double-quoted identifier followed
//     by a colon). Text of the calls' string argument values is removed
//     first, so a value like "https://x?id=3" is not a mention. Defined
//     names are the property names (at any depth) of the called tools'
//     parameter schemas, taken from the record's tools or from tool
//     definitions returned by earlier meta_tool calls, plus the argument
//     keys (at any depth) of the calls themselves. Prose mentions ("the
//     units parameter") are not checked here; the verify stage's
//     hallucination judge covers them.
type reasonValidator struct {
	names   []string        // called functions, distinct, in call order
	defined map[string]bool // parameter names the called tools define
	values  []string        // string argument values, longest first
	limit   int
}

func newReasonValidator(r *record.Record, k int, maxChars int) *reasonValidator {
	return newCallsValidator(r.Messages[k].Calls, toolsInScope(r, k), maxChars)
}

// newCallsValidator checks a reasoning for calls, whose tools are looked up
// in scope; maxChars is the cap per call.
func newCallsValidator(calls []record.Call, scope map[string]record.Tool, maxChars int) *reasonValidator {
	turn := record.Message{Calls: calls}
	v := &reasonValidator{names: calledNames(turn), defined: map[string]bool{}, limit: maxChars * len(turn.Calls)}
	for _, name := range v.names {
		if t, ok := scope[name]; ok {
			schemaPropertyNames(t.Parameters, v.defined)
		}
	}
	for _, c := range turn.Calls {
		var args any
		if json.Unmarshal(c.Arguments, &args) == nil {
			collectKeysAndStrings(args, v.defined, &v.values)
		}
	}
	// Longest first, so a value containing a shorter one is removed whole.
	sortByLenDesc(v.values)
	return v
}

func (v *reasonValidator) check(text string) error {
	if strings.TrimSpace(text) == "" {
		return contract.Rejectf(ReasonEmpty, "the reasoning is empty")
	}
	if n := utf8.RuneCountInString(text); n > v.limit {
		return contract.Rejectf(ReasonTooLong, "the reasoning has %d characters; the cap for this turn is %d", n, v.limit)
	}
	lower := strings.ToLower(text)
	for _, name := range v.names {
		if !strings.Contains(lower, strings.ToLower(name)) {
			return contract.Rejectf(ReasonMissingFunction, "the reasoning does not name the called function %q", name)
		}
	}
	scrubbed := text
	for _, s := range v.values {
		if s != "" {
			scrubbed = strings.ReplaceAll(scrubbed, s, " ")
		}
	}
	for _, p := range paramMentions(scrubbed) {
		if !v.defined[p] {
			return contract.Rejectf(ReasonInventedParameter, "the reasoning mentions parameter %q, which %s does not define", p, strings.Join(quoteAll(v.names), " / "))
		}
	}
	return nil
}

// paramMentions returns the parameter names text mentions in code-like
// syntax (see reasonValidator), in order of appearance.
func paramMentions(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '"':
			end := strings.IndexByte(text[i+1:], '"')
			if end < 0 {
				return out
			}
			inner := text[i+1 : i+1+end]
			i += end + 2
			if isIdent(inner) && nextNonSpace(text, i) == ':' {
				out = append(out, inner)
			}
		case c == '\'':
			end := strings.IndexByte(text[i+1:], '\'')
			if end >= 0 && isIdent(text[i+1:i+1+end]) && nextNonSpace(text, i+end+2) == ':' {
				out = append(out, text[i+1:i+1+end])
				i += end + 2
				continue
			}
			i++
		case isIdentStart(c) && (i == 0 || !isIdentByte(text[i-1])):
			j := i + 1
			for j < len(text) && isIdentByte(text[j]) {
				j++
			}
			if j < len(text) && text[j] == '=' && (j+1 == len(text) || text[j+1] != '=') {
				out = append(out, text[i:j])
			}
			i = j
		default:
			i++
		}
	}
	return out
}

func nextNonSpace(s string, i int) byte {
	for ; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' {
			return s[i]
		}
	}
	return 0
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentByte(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return true
}

// schemaPropertyNames adds every property name of a JSON Schema, at any
// depth (properties, items, additionalProperties, anyOf/oneOf/allOf), to into.
func schemaPropertyNames(schema json.RawMessage, into map[string]bool) {
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		if props, ok := obj["properties"].(map[string]any); ok {
			for name, sub := range props {
				into[name] = true
				walk(sub)
			}
		}
		walk(obj["items"])
		walk(obj["additionalProperties"])
		for _, key := range []string{"anyOf", "oneOf", "allOf"} {
			if list, ok := obj[key].([]any); ok {
				for _, sub := range list {
					walk(sub)
				}
			}
		}
	}
	walk(v)
}

// collectKeysAndStrings adds every object key of a decoded JSON value to
// keys and appends every string it holds to strs.
func collectKeysAndStrings(v any, keys map[string]bool, strs *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			keys[k] = true
			collectKeysAndStrings(sub, keys, strs)
		}
	case []any:
		for _, sub := range v {
			collectKeysAndStrings(sub, keys, strs)
		}
	case string:
		*strs = append(*strs, v)
	}
}

func sortByLenDesc(s []string) {
	// Insertion sort keeps equal lengths in their (deterministic) input
	// order; the lists are short.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(s[j]) > len(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// calledNames returns the distinct function names called in m, in call order.
func calledNames(m record.Message) []string {
	var names []string
	for _, c := range m.Calls {
		if !containsString(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

func quotedNames(names []string) string { return strings.Join(quoteAll(names), ", ") }

// toolsInScope returns the tool definitions usable at message k: the
// record's tools, plus the definitions returned by meta_tool calls before
// message k (read by formats.MetaToolResult, in either result format of the
// meta_tool stage). A later definition of a name does not replace an
// earlier one.
func toolsInScope(r *record.Record, k int) map[string]record.Tool {
	scope := make(map[string]record.Tool, len(r.Tools))
	for _, t := range r.Tools {
		if _, ok := scope[t.Name]; !ok {
			scope[t.Name] = t
		}
	}
	for _, t := range retrievedTools(r.Messages[:min(k, len(r.Messages))]) {
		if _, ok := scope[t.Name]; !ok {
			scope[t.Name] = t
		}
	}
	return scope
}

// retrievedTools returns the tool definitions that meta_tool results in msgs
// hand to the assistant, in order. Results that are not definitions are
// skipped (verify's calls_resolved reports them).
func retrievedTools(msgs []record.Message) []record.Tool {
	var out []record.Tool
	for _, m := range msgs {
		if m.Role != record.RoleTool {
			continue
		}
		for _, res := range m.Results {
			if res.Name != verify.MetaTool {
				continue
			}
			if ts, err := formats.MetaToolResult(res.Content); err == nil {
				out = append(out, ts...)
			}
		}
	}
	return out
}

// reasonStandIn writes the offline stand-in reasoning for call turn k in the
// three-sentence pattern of seed 000 Fig 13: what you asked, which
// function(s) and why, which parameters with which values. It passes the
// stage's own validation (names every function, quotes values in double
// quotes, no code-like parameter syntax) unless the turn is too long for the
// cap.
func reasonStandIn(r *record.Record, k int) string {
	turn := r.Messages[k]
	scope := toolsInScope(r, k)

	// 1. The user's current state.
	var ask string
	var returned []string
	for i := k - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == record.RoleUser {
			ask = m.Content
			break
		}
		if m.Role == record.RoleTool {
			for j := len(m.Results) - 1; j >= 0; j-- {
				if n := m.Results[j].Name; !containsString(returned, n) {
					returned = append([]string{n}, returned...)
				}
			}
		}
	}
	var b strings.Builder
	end := ". "
	if ask = oneLine(ask); ask != "" {
		q := quoteForReason(ask, 160)
		b.WriteString("You asked: " + q)
		if last, _ := utf8.DecodeLastRuneInString(strings.TrimSuffix(q, `"`)); strings.ContainsRune(".!?。！？", last) {
			end = " " // the quote already ends the sentence
		}
	} else {
		b.WriteString("You want help with the conversation so far")
	}
	if len(returned) > 0 {
		fmt.Fprintf(&b, ", and I now have the results of %s", andList(returned, func(n string) string { return "the " + n + " function" }))
		end = ". "
	}
	b.WriteString(end)

	// 2. Which function(s) and why.
	names := calledNames(turn)
	why := func(n string) string {
		if n == verify.MetaTool {
			return "none of the functions I have can do this and meta_tool finds one that matches a description"
		}
		if d := oneLine(scope[n].Description); d != "" {
			return "its description, " + quoteForReason(strings.TrimRight(d, "."), 120) + ", fits your request"
		}
		return "it fits your request"
	}
	if len(names) == 1 {
		times := ""
		if len(turn.Calls) > 1 {
			times = fmt.Sprintf(" %d times", len(turn.Calls))
		}
		fmt.Fprintf(&b, "To help you, I will call the %s function%s because %s. ", names[0], times, why(names[0]))
	} else {
		fmt.Fprintf(&b, "To help you, I will call %s: %s. ",
			andList(names, func(n string) string { return "the " + n + " function" }),
			strings.Join(mapStrings(names, func(n string) string { return n + " because " + why(n) }), "; "))
	}

	// 3. Which parameters with which values.
	if len(turn.Calls) == 1 {
		b.WriteString(upperFirst(argSentence(turn.Calls[0])) + ".")
	} else {
		parts := make([]string, len(turn.Calls))
		for i, c := range turn.Calls {
			parts[i] = fmt.Sprintf("for call %d (%s) %s", i+1, c.Name, argSentence(c))
		}
		b.WriteString(upperFirst(strings.Join(parts, "; ")) + ".")
	}
	return b.String()
}

// argSentence says which values a call sets: `I will set a to "x" and b to 3`.
func argSentence(c record.Call) string {
	fields, ok := orderedFields(c.Arguments)
	if !ok {
		return "I will pass the arguments " + shortJSON(c.Arguments)
	}
	if len(fields) == 0 {
		return "it needs no parameters"
	}
	return "I will set " + andList(fields, func(f jsonField) string { return f.key + " to " + shortJSON(f.value) })
}

// shortJSON renders a JSON value for prose: strings in double quotes (inner
// double quotes turned into single ones), cut to 40 characters; short lists
// and objects as compact JSON, long ones by their size.
func shortJSON(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	var s string
	if json.Unmarshal(v, &s) == nil {
		return quoteForReason(s, 40)
	}
	var compact bytes.Buffer
	if json.Compact(&compact, v) != nil {
		return "the value given"
	}
	text := compact.String()
	if utf8.RuneCountInString(text) <= 40 {
		return text
	}
	switch text[0] {
	case '[':
		var list []json.RawMessage
		_ = json.Unmarshal(v, &list)
		return fmt.Sprintf("a list of %d %s", len(list), plural(len(list), "value"))
	case '{':
		fields, _ := orderedFields(v)
		return fmt.Sprintf("an object with %d %s", len(fields), plural(len(fields), "field"))
	}
	return "the value given"
}

// quoteForReason puts s (on one line, at most n characters) in double quotes,
// replacing double quotes inside by single ones.
func quoteForReason(s string, n int) string {
	s = strings.ReplaceAll(oneLine(s), `"`, `'`)
	if utf8.RuneCountInString(s) > n {
		rs := []rune(s)
		s = strings.TrimSpace(string(rs[:n-1])) + "…"
	}
	return `"` + s + `"`
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func upperFirst(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r >= 'a' && r <= 'z' {
		return string(r-'a'+'A') + s[size:]
	}
	return s
}

func mapStrings[T any](list []T, f func(T) string) []string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = f(x)
	}
	return out
}

// andList joins items as "a", "a and b", "a, b and c".
func andList[T any](items []T, f func(T) string) string {
	s := mapStrings(items, f)
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// jsonField is one key of a JSON object with its raw value.
type jsonField struct {
	key   string
	value json.RawMessage
}

// orderedFields returns the fields of a JSON object in source order; ok is
// false when b is not an object.
func orderedFields(b json.RawMessage) ([]jsonField, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []jsonField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		out = append(out, jsonField{key, raw})
	}
	return out, true
}
