package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// LLMEnv is what the LLM-backed checks (the judges and Equivalent) need.
// The zero value of every field but Client means its default.
type LLMEnv struct {
	// Client answers the judges' requests; under provider "offline" it calls
	// each request's Offline stand-in. The judges fail without one;
	// Equivalent then decides by its rules alone.
	Client llm.Client
	// Stage is the name of the pipeline stage running the checks; it starts
	// the request slots ("<stage>/<record id>/judge_…/m3").
	Stage string
	// Slot is the place in the run of the values Equivalent compares (e.g.
	// "translate/toolace:17/m3/c0"); Equivalent appends "/equiv/<param>".
	Slot string
	// Model overrides the teacher's model; "" keeps it.
	Model string
	// Temperature of judge requests; nil means 0, so that judging is as
	// repeatable as the model allows.
	Temperature *float64
	// Prompts replaces built-in templates by name ("judge_hallucination",
	// "equiv_value", …; see PromptNames).
	Prompts map[string]*prompts.Template
	// Attempts is how many times one judgement is asked for, counting the
	// first ask, before unreadable answers become a "judge_unparseable"
	// problem (llm.Ask's re-asking). 0 means 3.
	Attempts int
	// MinCompleteness and MinCorrectness are the lowest passing ComplexEval
	// scores (0–2) of judge_completeness and judge_correctness; 0 means 2
	// (only fully complete and correct answers pass).
	MinCompleteness int
	MinCorrectness  int
	// Judged, when set, is told every judgement a judge made: judge is
	// its name, value its answer — "0" or "1" (a problem found) for the
	// Meta-Tool judges, the score "0", "1" or "2" for the ComplexEval
	// ones, or "unparseable" when no readable answer came. The verify stage
	// counts them so the report can plot each judge's scores.
	Judged func(ctx context.Context, judge, value string)
}

func (env LLMEnv) judged(ctx context.Context, judge, value string) {
	if env.Judged != nil {
		env.Judged(ctx, judge, value)
	}
}

func (env LLMEnv) attempts() int {
	if env.Attempts <= 0 {
		return 3
	}
	return env.Attempts
}

func minScore(v int) int {
	if v <= 0 || v > 2 {
		return 2
	}
	return v
}

// judgeVersion is part of every judge request's stage ("name@version");
// bump it when a judge's data or parsing changes meaning.
const judgeVersion = 1

// PromptNames lists the built-in prompt templates verify uses; each can be
// replaced through LLMEnv.Prompts.
func PromptNames() []string {
	return []string{
		"judge_hallucination", "judge_consistency", "judge_multistep",
		"judge_completeness", "judge_correctness", "equiv_value",
	}
}

// PromptSamples returns the data to render the prompt template name (one
// of PromptNames) against when it is loaded, so that an override that
// cannot render fails then (prompts.Template.Check): data made from
// record.Sample as the checks make it, every field set, and for the
// ComplexEval judges also the same without the system text (Context is
// then empty, as for a record's first request). It returns nil for other
// names.
func PromptSamples(name string) []any {
	r := record.Sample()
	switch name {
	case "judge_hallucination", "judge_consistency", "judge_multistep":
		return []any{turnDataOf(r, 1)}
	case "judge_completeness", "judge_correctness":
		full := answerDataOf(r, exchanges(r)[0])
		r.System = ""
		return []any{full, answerDataOf(r, exchanges(r)[0])}
	case "equiv_value":
		return []any{equivData{Param: "get_weather.city", Value1: `"Taipei"`, Value2: `"台北"`}}
	}
	return nil
}

var builtins sync.Map // name → *prompts.Template

func (env LLMEnv) template(name string) (*prompts.Template, error) {
	if t := env.Prompts[name]; t != nil {
		return t, nil
	}
	if t, ok := builtins.Load(name); ok {
		return t.(*prompts.Template), nil
	}
	t, err := prompts.Builtin(name)
	if err != nil {
		return nil, err
	}
	builtins.Store(name, t)
	return t, nil
}

// ReasonUnparseable is the reject reason, and the Problem kind, of a
// judgement for which no readable answer came within LLMEnv.Attempts asks.
const ReasonUnparseable = "judge_unparseable"

// JudgedUnparseable is the value LLMEnv.Judged gets for a judgement
// without a readable answer.
const JudgedUnparseable = "unparseable"

// parseError marks an answer a judge could not read; llm.Ask re-asks and
// finally reports ReasonUnparseable.
type parseError struct{ err error }

func (e *parseError) Error() string        { return e.err.Error() }
func (e *parseError) RejectReason() string { return ReasonUnparseable }

// unparseable reports whether err says the judge gave no usable answer
// (unreadable, cut off, or thinking without an answer every time) rather
// than that it could not be asked.
func unparseable(err error) (*llm.AnswerError, bool) {
	var ae *llm.AnswerError
	if errors.As(err, &ae) && (ae.Reason == ReasonUnparseable || ae.Reason == "llm_truncated" || ae.Reason == llm.ReasonThinkingOnly) {
		return ae, true
	}
	return nil, false
}

// ask renders the template name against data and asks env.Client through
// llm.Ask, which re-asks (showing the model its unreadable answer) up to
// env.Attempts times; parse reads the answer after the thinking a
// reasoning model wrote into it (llm.SplitThinking). The error is the
// client's, or an *llm.AnswerError (ReasonUnparseable, "llm_truncated" or
// llm.ReasonThinkingOnly) when no answer could be used.
func ask[T any](ctx context.Context, env LLMEnv, name, slot string, data any, offline func() (string, error), parse func(string) (T, error)) (T, error) {
	var zero T
	if env.Client == nil {
		return zero, fmt.Errorf("verify: %s needs an LLM client", name)
	}
	t, err := env.template(name)
	if err != nil {
		return zero, err
	}
	msgs, err := t.Render(data)
	if err != nil {
		return zero, err
	}
	temp := 0.0
	if env.Temperature != nil {
		temp = *env.Temperature
	}
	req := llm.Request{
		Stage:       name + "@" + strconv.Itoa(judgeVersion),
		Template:    t.Hash,
		Model:       env.Model,
		Messages:    msgs,
		Temperature: &temp,
		Slot:        slot,
		Offline:     offline,
	}
	v, _, err := llm.Ask(ctx, env.Client, req, env.attempts(), func(s string) (T, error) {
		v, err := parse(s)
		if err != nil {
			return v, &parseError{err}
		}
		return v, nil
	})
	if err != nil {
		return zero, fmt.Errorf("verify: %s: %w", name, err)
	}
	return v, nil
}

// parseBinary reads a Meta-Tool judge answer: "1" (a problem) or "0" (none),
// allowing surrounding white space and one pair of quotes or backticks.
func parseBinary(answer string) (bool, error) {
	s := strings.TrimSpace(answer)
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'' || s[0] == '`') && s[len(s)-1] == s[0] {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	switch s {
	case "1":
		return true, nil
	case "0":
		return false, nil
	}
	return false, errors.New(`the answer must be the single character "1" or "0"`)
}

// parseScore reads a ComplexEval judge answer: the JSON object
// {"score": 0|1|2, "reason": "…"}, optionally inside one ```json fence.
// As ComplexFuncBench's runner (response_runner.py, `score not in [0, 1,
// 2]` in Python, where 2.0 == 2), the score is any JSON number equal to 0,
// 1 or 2 (2.0 and 2e0 count as 2; "2", true and 1.5 do not), and the reason
// is not checked: a reason that is not a string is kept as its JSON text.
func parseScore(answer string) (scored, error) {
	var v struct {
		Score  json.RawMessage `json:"score"`
		Reason json.RawMessage `json:"reason"`
	}
	if err := strictObject(answer, &v); err != nil {
		return scored{}, err
	}
	if v.Score == nil {
		return scored{}, errors.New(`the object has no "score"`)
	}
	var reason string
	if json.Unmarshal(v.Reason, &reason) != nil && string(v.Reason) != "null" {
		reason = string(v.Reason) // absent stays ""
	}
	if c := v.Score[0]; c == '-' || c >= '0' && c <= '9' { // a number, not "2"
		if f, err := strconv.ParseFloat(string(v.Score), 64); err == nil && (f == 0 || f == 1 || f == 2) {
			return scored{score: int(f), reason: reason}, nil
		}
	}
	return scored{}, fmt.Errorf(`"score" must be the number 0, 1 or 2, not %s`, v.Score)
}

type scored struct {
	score  int
	reason string
}

// strictObject decodes answer, which must be one JSON object and nothing
// else, optionally wrapped in a single Markdown code fence (llm.StripFence),
// into v, a pointer to a struct. Its keys are matched exactly: a key that
// differs from a field's name in case only is an error (encoding/json would
// take it for the field).
func strictObject(answer string, v any) error {
	s := llm.StripFence(answer)
	if !strings.HasPrefix(s, "{") {
		return errors.New("the answer must be a JSON object")
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("the answer is not a valid JSON object: %w", err)
	}
	if strings.TrimSpace(s[d.InputOffset():]) != "" {
		return errors.New("the answer has text after the JSON object")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s[:d.InputOffset()]), &keys); err != nil {
		return fmt.Errorf("the answer is not a valid JSON object: %w", err)
	}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		for k := range keys {
			if k != name && strings.EqualFold(k, name) {
				return fmt.Errorf("the answer has the key %q, not %q (keys are case-sensitive)", k, name)
			}
		}
	}
	return nil
}

// The Meta-Tool judges (seed 000, A.3 and Fig 9) look at every assistant
// turn that makes calls, each in the context of the dialogue before it (the
// "last round" of the paper's prompts is the judged turn), because the
// augmenting stages change every call turn, not only the last. Each judged
// turn costs one request per judge.
var (
	JudgeHallucination = &Checker{
		Name:    "judge_hallucination",
		Answers: []string{"0", "1"},
		Doc: "LLM judge (Meta-Tool): a call turn uses a tool or an argument value the dialogue never mentioned. " +
			"Offline stand-in: a called tool not available at that point, or an argument value that occurs nowhere before " +
			"the turn, even approximately, and is not the parameter's default or enum value; a number also counts as found " +
			"as a percentage (0.15 for 15%), a date or time when all its numbers occur, an upper-case code (USD, AAPL) always, " +
			"long or Chinese text when most of its words or character pairs occur.",
		CheckLLM: func(ctx context.Context, env LLMEnv, r *record.Record) ([]Problem, error) {
			return judgeCallTurns(ctx, env, r, "judge_hallucination", "hallucination",
				"the call turn uses a tool or an argument value the dialogue does not mention", offlineHallucination)
		},
	}
	JudgeConsistency = &Checker{
		Name:    "judge_consistency",
		Answers: []string{"0", "1"},
		Doc: "LLM judge (Meta-Tool): a call turn contradicts the dialogue before it, e.g. a value the user gave is written wrongly. " +
			"Offline stand-in: an argument string that is a near miss (small edit distance, not exact) of text in the dialogue, " +
			"or reasoning that names another listed tool instead of the one called.",
		CheckLLM: func(ctx context.Context, env LLMEnv, r *record.Record) ([]Problem, error) {
			return judgeCallTurns(ctx, env, r, "judge_consistency", "inconsistent",
				"the call turn is inconsistent with the dialogue before it", offlineConsistency)
		},
	}
	JudgeMultiStep = &Checker{
		Name:    "judge_multistep",
		Answers: []string{"0", "1"},
		Doc: "LLM judge (Meta-Tool): a call turn lacks reasoning that analyses the request, names the tool and sets its parameters. " +
			"Offline stand-in: reasoning present that names every called tool and, for calls with arguments, at least one " +
			"parameter name or value.",
		CheckLLM: func(ctx context.Context, env LLMEnv, r *record.Record) ([]Problem, error) {
			return judgeCallTurns(ctx, env, r, "judge_multistep", "no_multi_step",
				"the call turn lacks multi-step reasoning (intent, tool, parameters)", offlineMultiStep)
		},
	}
	JudgeCompleteness = &Checker{
		Name:    "judge_completeness",
		Answers: []string{"0", "1", "2"},
		Doc: "LLM judge (ComplexEval): the final answer to a user request addresses all of it (score 0-2, below LLMEnv.MinCompleteness fails). " +
			"Offline stand-in: 2 when each tool result of the exchange is reflected in the answer (one of its values appears), " +
			"1 when some are, 0 when none; answers without tool results score 2 when non-empty.",
		CheckLLM: func(ctx context.Context, env LLMEnv, r *record.Record) ([]Problem, error) {
			return judgeAnswers(ctx, env, r, "judge_completeness", "incomplete", "completeness", minScore(env.MinCompleteness), false, offlineCompleteness)
		},
	}
	JudgeCorrectness = &Checker{
		Name:    "judge_correctness",
		Answers: []string{"0", "1", "2"},
		Doc: "LLM judge (ComplexEval): a final answer agrees with the tool results before it (score 0-2, below LLMEnv.MinCorrectness fails); " +
			"answers without tool results in their exchange are not judged. Offline stand-in: the numbers in the answer " +
			"(other than 0-10) must occur in the tool results, user turns or system prompt: 2 all, 1 some, 0 none.",
		CheckLLM: func(ctx context.Context, env LLMEnv, r *record.Record) ([]Problem, error) {
			return judgeAnswers(ctx, env, r, "judge_correctness", "incorrect", "correctness", minScore(env.MinCorrectness), true, offlineCorrectness)
		},
	}
)

// turnData is what the Meta-Tool judge templates render.
type turnData struct {
	Tools   string // the tools listed in the record, as an indented JSON list
	History string // the dialogue before the judged turn, as text
	Turn    string // the judged assistant turn, as text
}

// turnDataOf is the data of a Meta-Tool judge's prompt on turn i of r.
func turnDataOf(r *record.Record, i int) turnData {
	return turnData{Tools: toolsText(r.Tools), History: renderDialogue(r, 0, i), Turn: renderDialogue(r, i, i+1)}
}

// judgeCallTurns asks judge name about every assistant call turn of r
// except get_user_input replies; a "1" becomes a Problem of kind at that turn. offline reports whether the
// stand-in finds a problem in turn i.
func judgeCallTurns(ctx context.Context, env LLMEnv, r *record.Record, name, kind, msg string, offline func(r *record.Record, i int) bool) ([]Problem, error) {
	var turns []int
	for i, m := range r.Messages {
		if m.Role == record.RoleAssistant && len(m.Calls) > 0 && !Reply(m.Calls) {
			turns = append(turns, i)
		}
	}
	verdicts, errs := askAll(turns, func(i int) (bool, error) {
		data := turnDataOf(r, i)
		stand := func() (string, error) {
			if offline(r, i) {
				return "1", nil
			}
			return "0", nil
		}
		return ask(ctx, env, name, slotFor(env, r, name, i), data, stand, parseBinary)
	})
	var out []Problem
	for k, i := range turns {
		bad, err := verdicts[k], errs[k]
		if ae, ok := unparseable(err); ok {
			env.judged(ctx, name, JudgedUnparseable)
			out = append(out, Problem{Check: name, Kind: ReasonUnparseable, Path: msgPath(i), Msg: ae.Error()})
			continue
		}
		if err != nil {
			return nil, err
		}
		if bad {
			env.judged(ctx, name, "1")
			out = append(out, Problem{Check: name, Kind: kind, Path: msgPath(i), Msg: fmt.Sprintf("%s answered 1: %s", name, msg)})
		} else {
			env.judged(ctx, name, "0")
		}
	}
	return out, nil
}

// answerData is what the ComplexEval judge templates render.
type answerData struct {
	Context  string // the dialogue before the user's request (completeness)
	Query    string // the user's request (completeness)
	History  string // the dialogue before the answer (correctness)
	Response string // the answer judged
}

// answerDataOf is the data of a ComplexEval judge's prompt on exchange x
// of r.
func answerDataOf(r *record.Record, x exchange) answerData {
	return answerData{
		Context:  renderDialogue(r, 0, x.user),
		Query:    r.Messages[x.user].Content,
		History:  renderDialogue(r, 0, x.answer),
		Response: r.Messages[x.answer].Content,
	}
}

// An exchange is one user request and the assistant's final text answer to
// it (the last text-only assistant turn before the next user turn).
type exchange struct {
	user, answer int
	results      bool // a tool turn lies between them
}

func exchanges(r *record.Record) []exchange {
	var out []exchange
	cur := exchange{user: -1, answer: -1}
	flush := func() {
		if cur.user >= 0 && cur.answer >= 0 {
			out = append(out, cur)
		}
	}
	for i, m := range r.Messages {
		switch m.Role {
		case record.RoleUser:
			flush()
			cur = exchange{user: i, answer: -1}
		case record.RoleTool:
			cur.results = true
		case record.RoleAssistant:
			// A reply that asks the user (get_user_input, with
			// meta_tool's get_user_input: true every answer is one) is
			// the answer the user reads.
			if (len(m.Calls) == 0 || Reply(m.Calls)) && strings.TrimSpace(m.Content) != "" {
				cur.answer = i
			}
		}
	}
	flush()
	return out
}

// judgeAnswers scores the final answer of every exchange of r (only those
// with tool results when needResults) with judge name; a score below pass
// becomes a Problem of kind at the answer.
func judgeAnswers(ctx context.Context, env LLMEnv, r *record.Record, name, kind, what string, pass int, needResults bool, offline func(r *record.Record, x exchange) int) ([]Problem, error) {
	var xs []exchange
	for _, x := range exchanges(r) {
		if !needResults || x.results {
			xs = append(xs, x)
		}
	}
	scores, errs := askAll(xs, func(x exchange) (scored, error) {
		data := answerDataOf(r, x)
		stand := func() (string, error) {
			b, err := json.Marshal(struct {
				Score  int    `json:"score"`
				Reason string `json:"reason"`
			}{offline(r, x), "offline rule-based estimate"})
			return string(b), err
		}
		return ask(ctx, env, name, slotFor(env, r, name, x.answer), data, stand, parseScore)
	})
	var out []Problem
	for k, x := range xs {
		s, err := scores[k], errs[k]
		if ae, ok := unparseable(err); ok {
			env.judged(ctx, name, JudgedUnparseable)
			out = append(out, Problem{Check: name, Kind: ReasonUnparseable, Path: msgPath(x.answer), Msg: ae.Error()})
			continue
		}
		if err != nil {
			return nil, err
		}
		env.judged(ctx, name, strconv.Itoa(s.score))
		if s.score < pass {
			out = append(out, Problem{Check: name, Kind: kind, Path: msgPath(x.answer),
				Msg: fmt.Sprintf("%s scored %d, below %d: %s", what, s.score, pass, clip.Runes(s.reason, 200))})
		}
	}
	return out, nil
}

// askAll asks about every item at once and returns the answers and errors
// in the items' order. The asks of a record do not depend on each other:
// sent together, they all wait on one round of a batch-mode teacher, where
// asked one after another each would wait for the round before.
func askAll[I, T any](items []I, ask func(I) (T, error)) ([]T, []error) {
	vals, errs := make([]T, len(items)), make([]error, len(items))
	var wg sync.WaitGroup
	for k, it := range items {
		wg.Go(func() { vals[k], errs[k] = ask(it) })
	}
	wg.Wait()
	return vals, errs
}

func slotFor(env LLMEnv, r *record.Record, name string, i int) string {
	return env.Stage + "/" + r.ID + "/" + name + "/m" + strconv.Itoa(i)
}

// renderDialogue writes messages [from, to) of r as plain text for a judge,
// one block per turn; the record's system prompt opens a dialogue that
// starts at 0. Long contents are clipped.
func renderDialogue(r *record.Record, from, to int) string {
	var b strings.Builder
	line := func(who, text string) {
		b.WriteString(who)
		b.WriteString(": ")
		b.WriteString(clip.Runes(strings.TrimSpace(text), 3000))
		b.WriteString("\n")
	}
	if from == 0 && strings.TrimSpace(r.System) != "" {
		line("SYSTEM", r.System)
	}
	for _, m := range r.Messages[from:min(to, len(r.Messages))] {
		switch m.Role {
		case record.RoleAssistant:
			if strings.TrimSpace(m.Reasoning) != "" {
				line("ASSISTANT (reasoning)", m.Reasoning)
			}
			if strings.TrimSpace(m.Content) != "" || len(m.Calls) == 0 {
				line("ASSISTANT", m.Content)
			}
			for _, c := range m.Calls {
				line("ASSISTANT (call)", callJSON(c))
			}
		case record.RoleTool:
			for _, res := range m.Results {
				line("TOOL RESULT ("+res.Name+")", res.Content)
			}
		default:
			line(strings.ToUpper(m.Role), m.Content)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// toolsText writes tools as an indented JSON list of {"name",
// "description", "parameters"}.
func toolsText(tools []record.Tool) string {
	type tool struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Parameters  any    `json:"parameters"`
	}
	ts := make([]tool, len(tools))
	for i, t := range tools {
		ts[i] = tool{Name: t.Name, Description: t.Description, Parameters: rawOrString(t.Parameters)}
	}
	b, err := jsonout.MarshalIndent(ts, "  ")
	if err != nil {
		return "[]"
	}
	return string(b)
}

// callJSON writes a call as {"name": …, "arguments": …}; arguments that are
// not valid JSON are shown as a string.
func callJSON(c record.Call) string {
	b := make([]byte, 0, 32+len(c.Name)+len(c.Arguments))
	b = append(b, `{"name":`...)
	b = jsonout.AppendString(b, c.Name)
	b = append(b, `,"arguments":`...)
	if shard.ValidJSON(c.Arguments) {
		b = appendCompact(b, c.Arguments)
	} else {
		b = jsonout.AppendString(b, string(c.Arguments))
	}
	return string(append(b, '}'))
}
