package stages

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/pycall"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// ToolDCConfig is the `tool_dc:` stage: Tool-DC's Try → Check → Retry
// reasoning traces (seed 003, §3.2–3.3, Algorithm 1, Fig 9–11).
//
//	stages:
//	  - tool_dc:
//	      candidates: 20        # N
//	      grouping: enumerate   # or anchor, with top_k: 5
//
// The target of a record is its first assistant turn with calls, provided
// everything before it is system, user and assistant text (no tool results):
// the only call turn of an xlam row, the first of a ToolACE or glaive
// dialogue. Its calls are the gold calls. Records without such a turn are
// dropped with the filter reason no_target_turn.
//
// For each record the stage
//  1. builds the candidate set T: the tools the gold calls use, then the
//     record's other tools (seeded order) and distractors drawn from the
//     run's tool library (seeded) until T holds N tools — never a tool with
//     the name or the definition (description and parameters) of one
//     already in T, so no distractor is equivalent to a gold tool — and
//     shuffles T with the record's seed, so the gold tools are not always
//     first. |T| is below N only when the library runs out of such tools,
//     and above it only when the gold calls alone use more than N tools;
//  2. Try: asks the teacher once per group of T with only that group's
//     tools in context (prompt tool_dc_try, Fig 9). grouping "enumerate"
//     makes one group per tool (K = N, as Algorithm 1 does to build the
//     training data); grouping "anchor" is §3.2.1's strategic anchor
//     grouping: BM25 over T's names and descriptions ranks T against the
//     request, the top K = min(top_k, |T|) tools form group S0, and each of
//     them anchors one more group S1…SK to which the remaining tools are dealt
//     in turn (the i-th remaining tool in T's order joins group 1 + i mod K),
//     so the groups are disjoint apart from S0 and every tool is tried;
//  3. Check: a Try answer is valid when it holds at least one call and every
//     call passes verify.CheckCall against its group's tools (the function
//     exists in the group, argument keys are declared, required ones are
//     present, values have the declared types). Answers that are empty,
//     "[]", prose, unparseable or truncated are the null output ∅ (the
//     thinking a reasoning model writes before its answer is taken out
//     first, llm.SplitThinking); all but "[]" are counted (try_truncated,
//     try_unparsed) and named in no_valid_candidate's detail;
//  4. Retry: asks once more (prompt tool_dc_retry, Fig 10) with the tools of
//     the valid answers, in T's order and original definitions;
//  5. keeps the record only when verify.MatchCalls finds the Retry calls
//     equal to the gold calls (names, type-tolerant values, omitted
//     arguments equal to defaults, parallel calls in any order), and writes
//     the trace (prompt tool_dc_trace, Fig 11). The target turn's calls
//     stay the gold calls as the record wrote them (Algorithm 1 keeps y*
//     when y* = y_gt: the training target is y_gt, not the Retry's
//     "new york" for "New York" or 12345.0 for 12345).
//
// Cost: with well-formed answers a kept record costs exactly |T| + 1
// requests under enumerate and K + 2 under anchor (K + 1 groups and the
// Retry). Try answers are never re-asked (a bad one is ∅, as in the paper);
// a Retry answer that is truncated or does not parse is re-asked up to
// attempts times, one request each. A record rejected before the Retry costs
// only its Try requests. Every request goes through the llm layer's cache
// with the slots "<id>/try/<tool>" (enumerate), "<id>/try/top" and
// "<id>/try/anchor/<tool>" (anchor), and "<id>/retry".
//
// The output record keeps the input's ID and is cut after the target turn;
// its tools are T in its shuffled order; the target turn's Content is
// cleared, its Calls are the gold calls as the record wrote them (which the
// Retry calls matched, step 5) and its Reasoning is the trace:
// "1. Candidate Selection: … <every Try call> 2. Validation: … <the valid
// tools>. 3. Final Review: …". The trace template's system section becomes
// the record's system prompt, followed by the record's own system text if
// any. The exporter's tool_dc surface renders the turn as
// <think>reasoning</think><tool_call>[calls]</tool_call>.
//
// With trace: thinking (for reasoning models) the turn's Reasoning is instead
// the Retry answer's own thinking (Response.Reasoning, from
// reasoning_content), checked as the reason stage checks a reasoning
// against the Retry calls (reason_no_thinking, reason_empty,
// reason_too_long over max_chars per call, reason_missing_function,
// reason_invented_parameter; the valid tools define the parameters); a
// failing thinking is re-asked like a Retry answer that does not parse, and
// the last failure's reason rejects the record. The thinking is never taken
// from the answer, the trace template is not used, and the record's system
// prompt is kept as it is. The offline provider has no thinking, so this
// needs a real teacher.
//
// Tags: tool_dc=trace (tool_dc=thinking with trace: thinking); tool_dc.grouping; tool_dc.tools (|T|);
// tool_dc.requests (requests this record made, re-asks included, whether
// the cache or the teacher answered them);
// tool_dc.candidates (JSON list of the Try calls, {"name","arguments"}, in
// the order the trace lists them); tool_dc.valid (JSON list of the valid
// tool names); tool_dc.anchors (anchor grouping: JSON list of the anchors).
//
// Reject reasons: ambiguous_tool_name (two different tools share a name),
// bad_tool_schema (a tool's parameters are not JSON), gold_invalid (a gold call fails CheckCall against the
// record's tools), no_valid_candidate (no Try answer passed Check),
// missed_gold_tool (a gold call's tool is not among the valid ones, so the
// Retry cannot match and is not sent), retry_no_call, retry_mismatch, and
// the llm layer's reasons for requests the teacher never answered
// (retry_bad_syntax when every Retry answer failed to parse).
type ToolDCConfig struct {
	// Candidates is N, the number of tools in the candidate set (20 in the
	// paper's extended setting; its scaling study goes to 50). Default 20,
	// at most 50.
	Candidates int `yaml:"candidates" json:"candidates"`
	// Grouping is "enumerate" (default: one Try per tool) or "anchor"
	// (BM25 anchor grouping, K + 1 Try requests).
	Grouping string `yaml:"grouping" json:"grouping"`
	// TopK is K, the number of anchors of anchor grouping; default 5, the
	// paper's choice. Only for grouping anchor.
	TopK int `yaml:"top_k" json:"top_k,omitempty"`
	// Temperature of every request; default 0, as in the paper.
	Temperature *float64 `yaml:"temperature" json:"temperature"`
	// MaxTokens caps each answer; 0 keeps the teacher's setting (the paper
	// uses 512).
	MaxTokens int `yaml:"max_tokens" json:"max_tokens,omitempty"`
	// Attempts is how many times the Retry is asked when its answer is
	// truncated or does not parse (default 2). Try requests are asked once.
	Attempts int `yaml:"attempts" json:"attempts"`
	// TryPrompt, RetryPrompt and TracePrompt override the built-in
	// templates tool_dc_try, tool_dc_retry and tool_dc_trace with txtar files,
	// relative to pipeline.yaml.
	TryPrompt   string `yaml:"try_prompt" json:"try_prompt,omitempty"`
	RetryPrompt string `yaml:"retry_prompt" json:"retry_prompt,omitempty"`
	TracePrompt string `yaml:"trace_prompt" json:"trace_prompt,omitempty"`
	// Trace is where the turn's reasoning comes from: "answer" (the
	// default, also when empty: the trace template rendered from the
	// Try → Check → Retry outcome) or "thinking" (the Retry answer's own
	// thinking).
	Trace string `yaml:"trace" json:"trace,omitempty"`
	// MaxChars caps the thinking per Retry call with trace: thinking
	// (default 2000 characters); only for trace thinking.
	MaxChars int `yaml:"max_chars" json:"max_chars,omitempty"`
}

// toolDCDefaultThinkingChars is the default cap per call on a Retry's
// thinking: reasoning models think at more length than the reason stage's
// three sentences.
const toolDCDefaultThinkingChars = 2000

// Groupings of the Try step.
const (
	ToolDCEnumerate = "enumerate"
	ToolDCAnchor    = "anchor"
)

// Filter and reject reasons of the tool_dc stage.
const (
	ToolDCNoTargetTurn     = "no_target_turn"
	ToolDCAmbiguousTool    = "ambiguous_tool_name"
	ToolDCBadToolSchema    = "bad_tool_schema"
	ToolDCGoldInvalid      = "gold_invalid"
	ToolDCNoValidCandidate = "no_valid_candidate"
	// CounterTryTruncated counts Try answers cut off at the token limit.
	CounterTryTruncated = "try_truncated"
	// CounterTryUnparsed counts Try answers that are neither calls nor
	// "[]": empty, prose, broken call syntax, thinking only.
	CounterTryUnparsed   = "try_unparsed"
	ToolDCMissedGoldTool = "missed_gold_tool"
	ToolDCRetryNoCall    = "retry_no_call"
	ToolDCRetryMismatch  = "retry_mismatch"
	ToolDCRetryBadSyntax = "retry_bad_syntax"
)

// The paper's extended setting has 20 candidate tools; its scaling study
// (Fig 7) stops at 50, beyond which one record costs more requests than
// the method is shown to be worth.
const (
	toolDCDefaultCandidates = 20
	toolDCMaxCandidates     = 50
)

func (c *ToolDCConfig) defaults() {
	if c.Candidates == 0 {
		c.Candidates = toolDCDefaultCandidates
	}
	if c.Grouping == "" {
		c.Grouping = ToolDCEnumerate
	}
	if c.Grouping == ToolDCAnchor && c.TopK == 0 {
		c.TopK = 5
	}
	if c.Temperature == nil {
		zero := 0.0
		c.Temperature = &zero
	}
	if c.Attempts == 0 {
		c.Attempts = 2
	}
	if c.Trace == SourceThinking && c.MaxChars == 0 {
		c.MaxChars = toolDCDefaultThinkingChars
	}
}

func (c *ToolDCConfig) validate() []string {
	var probs []string
	if c.Candidates < 1 || c.Candidates > toolDCMaxCandidates {
		probs = append(probs, fmt.Sprintf("candidates: %d is not between 1 and %d", c.Candidates, toolDCMaxCandidates))
	}
	switch c.Grouping {
	case ToolDCEnumerate:
		if c.TopK != 0 {
			probs = append(probs, "top_k: applies to grouping anchor only")
		}
	case ToolDCAnchor:
		if c.TopK < 1 || c.TopK > c.Candidates {
			probs = append(probs, fmt.Sprintf("top_k: %d is not between 1 and candidates (%d)", c.TopK, c.Candidates))
		}
	default:
		probs = append(probs, fmt.Sprintf("grouping: %q is not one of %s, %s", c.Grouping, ToolDCEnumerate, ToolDCAnchor))
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2) {
		probs = append(probs, fmt.Sprintf("temperature: %v is not between 0 and 2", *c.Temperature))
	}
	if c.MaxTokens < 0 {
		probs = append(probs, "max_tokens: must not be negative")
	}
	if c.Attempts < 1 {
		probs = append(probs, "attempts: must be at least 1")
	}
	switch c.Trace {
	case "", SourceAnswer:
		if c.MaxChars != 0 {
			probs = append(probs, "max_chars: applies to trace thinking only")
		}
	case SourceThinking:
		if c.MaxChars < 1 {
			probs = append(probs, "max_chars: must be positive")
		}
	default:
		probs = append(probs, fmt.Sprintf("trace: %q is not one of %s, %s", c.Trace, SourceAnswer, SourceThinking))
	}
	return probs
}

// readsLibrary: the stage draws from the run's tool library (libraryReader).
func (c *ToolDCConfig) readsLibrary() {}

// toolDCRequests is the version in the teacher requests' stage name
// (cached answers are keyed by it). 2: the prompts list tools as compact
// JSON (a quarter fewer prompt bytes, and a larger share of them a cached
// prefix).
const toolDCRequests = 2

// version is toolDCRequests plus the changes of the stage's output that
// leave cached answers valid: +1 since Try answers cut off at the token
// limit are counted (try_truncated) and named in no_valid_candidate; +2
// since a kept record's calls are the gold calls as written, not the
// Retry's values that matched them; +3 since the thinking written into an
// answer is taken out (llm.SplitThinking) and Try answers that do not
// parse are counted (try_unparsed); +4 since retry_mismatch details name
// the first differing element and show each value around the difference,
// and numbers beyond float64 precision are compared exactly.
func (c *ToolDCConfig) version() int { return toolDCRequests + 4 }

func (c *ToolDCConfig) build(env *Env) (Stage, error) {
	if env.Teacher == nil {
		return nil, errors.New("no teacher configured")
	}
	if env.Library == nil {
		return nil, errors.New("no tool library to draw distractors from")
	}
	if c.Trace == SourceThinking && env.Provider == llm.ProviderOffline {
		return nil, errors.New("trace thinking needs a teacher that returns its thinking (reasoning_content); the offline provider has none")
	}
	s := &toolDC{cfg: *c, env: env, stage: fmt.Sprintf("tool_dc@%d", toolDCRequests)}
	// The samples: the sample record's request, with its system text and
	// without (Context is empty then), and its calls as the trace's.
	r := record.Sample()
	question := toolDCQuestion(r.Messages[:1])
	withSystem, err := toolDCData(r.Tools, question, r.System)
	if err != nil {
		return nil, err
	}
	noSystem, err := toolDCData(r.Tools, question, "")
	if err != nil {
		return nil, err
	}
	calls := pycall.Print(r.Messages[1].Calls)
	trace := toolDCTrace{Candidates: calls, Valid: tdcNames(r.Tools), Final: calls}
	if s.try, err = env.Prompt("tool_dc_try", "try_prompt", c.TryPrompt, withSystem, noSystem); err != nil {
		return nil, err
	}
	if s.retry, err = env.Prompt("tool_dc_retry", "retry_prompt", c.RetryPrompt, withSystem, noSystem); err != nil {
		return nil, err
	}
	if s.trace, err = env.Prompt("tool_dc_trace", "trace_prompt", c.TracePrompt, trace); err != nil {
		return nil, err
	}
	// Catch a trace template that renders no reasoning before any request
	// is paid for.
	if _, _, err := s.renderTrace(trace.Candidates, trace.Valid, trace.Final); err != nil {
		return nil, &keyError{key: "trace_prompt", err: err}
	}
	return s, nil
}

type toolDC struct {
	cfg               ToolDCConfig
	env               *Env
	stage             string
	try, retry, trace *prompts.Template
}

// Concurrency is the teacher's capacity: each record's Try requests are
// themselves sent in parallel under the same bound.
func (s *toolDC) Concurrency() int { return max(1, s.env.Capacity) }

func (s *toolDC) writesTeacherText() bool { return true }

func (s *toolDC) usesModels() (teacher, embedder bool) { return true, false }

// toolDCPrompt is what the Try and Retry templates render.
type toolDCPrompt struct {
	Tools    string // the group's tools as a compact JSON list of {name, description, parameters}
	Question string // the request: the user turn, or a transcript of the turns before the target
	Context  string // the record's system text, possibly empty
}

// toolDCTrace is what the trace template renders.
type toolDCTrace struct {
	Candidates string // every Try call, Python-call syntax
	Valid      string // the valid tools, "[a, b]"
	Final      string // the Retry calls, Python-call syntax
}

// A tdcGroup is one Try request's share of the candidate set.
type tdcGroup struct {
	slot  string
	tools []record.Tool
}

// A tdcTry is the outcome of one Try request.
type tdcTry struct {
	calls     []record.Call // nil for the null output
	valid     bool
	truncated bool   // the answer was cut off at the token limit (no calls)
	unparsed  bool   // the answer did not parse (no calls)
	why       string // why it did not parse
	err       error
}

func (s *toolDC) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	k := toolDCTarget(r.Messages)
	if k < 0 {
		return nil, &contract.Filter{Reason: ToolDCNoTargetTurn}
	}
	gold := r.Messages[k].Calls
	own, err := tdcDistinctTools(r.Tools)
	if err != nil {
		return nil, err
	}
	for i, c := range gold {
		if ps := verify.CheckCall(own, c); len(ps) > 0 {
			return nil, contract.Rejectf(ToolDCGoldInvalid, "gold call %d (%s): %s", i, c.Name, ps[0].Msg)
		}
	}
	rng := s.env.Rand(r.ID)
	cands, err := s.candidateSet(own, gold, rng)
	if err != nil {
		return nil, err
	}
	question := toolDCQuestion(r.Messages[:k])
	groups, anchors := s.groups(r.ID, cands, question)

	var requests atomic.Int64
	client := llm.ClientFunc(func(ctx context.Context, req llm.Request) (llm.Response, error) {
		requests.Add(1)
		return s.env.Teacher.Complete(ctx, req)
	})

	// Try: every group in parallel. Errors are reported in group order, so
	// the reject does not depend on which answer came back first; an error
	// that is not a reject (fatal, cancelled) wins.
	tries := make([]tdcTry, len(groups))
	slots := make(chan struct{}, max(1, s.env.Capacity))
	var wg sync.WaitGroup
	for i := range groups {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			tries[i] = s.tryGroup(ctx, client, groups[i], gold, question, r.System)
		})
	}
	wg.Wait()
	var reject error
	for i, t := range tries {
		if t.err == nil {
			continue
		}
		err := fmt.Errorf("try %s: %w", groups[i].slot, t.err)
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

	// Check, gathered: the candidate calls (deduplicated, in group order)
	// and the tools of the valid answers (in T's order).
	var candidates []record.Call
	seen := map[string]bool{}
	validName := map[string]bool{}
	truncated, unparsed := 0, 0
	for _, t := range tries {
		if t.truncated {
			truncated++
		}
		if t.unparsed {
			unparsed++
		}
		for _, c := range t.calls {
			if key := pycall.Print([]record.Call{c}); !seen[key] {
				seen[key] = true
				candidates = append(candidates, c)
			}
			if t.valid {
				validName[c.Name] = true
			}
		}
	}
	var valid []record.Tool
	for _, t := range cands {
		if validName[t.Name] {
			valid = append(valid, t)
		}
	}
	if truncated > 0 {
		// A Try is asked once (the paper's single inference per tool),
		// so a token limit too low shows here and in the counters.
		Count(ctx, CounterTryTruncated, int64(truncated))
	}
	if unparsed > 0 {
		Count(ctx, CounterTryUnparsed, int64(unparsed))
	}
	if len(valid) == 0 {
		var why []string
		if truncated > 0 {
			why = append(why, fmt.Sprintf("%d of the answers cut off at the token limit: raise teacher.max_tokens", truncated))
		}
		if unparsed > 0 {
			why = append(why, fmt.Sprintf("%d of the answers did not parse, the first: %s", unparsed, firstUnparsed(tries)))
		}
		cut := ""
		if len(why) > 0 {
			cut = " (" + strings.Join(why, "; ") + ")"
		}
		return nil, contract.Rejectf(ToolDCNoValidCandidate, "%d Try requests gave %d candidate calls, none passed the check%s", len(groups), len(candidates), cut)
	}
	for _, c := range gold {
		if !validName[c.Name] {
			return nil, contract.Rejectf(ToolDCMissedGoldTool, "gold function %q is not among the valid tools %s", c.Name, tdcNames(valid))
		}
	}

	retry, resp, err := s.retryCalls(ctx, client, r.ID, valid, gold, question, r.System)
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	calls := retry.calls
	if len(calls) == 0 {
		return nil, contract.Rejectf(ToolDCRetryNoCall, "the Retry over %s made no call", tdcNames(valid))
	}
	if m := verify.MatchCalls(cands, gold, calls); !m.OK {
		var msgs []string
		for _, p := range m.Problems {
			msgs = append(msgs, p.Kind+": "+p.Msg)
		}
		return nil, contract.Rejectf(ToolDCRetryMismatch, "Retry %s does not match the gold calls: %s", pycall.Print(calls), strings.Join(msgs, "; "))
	}

	system, body, tag := "", retry.thinking, "thinking"
	if s.cfg.Trace != SourceThinking {
		if system, body, err = s.renderTrace(pycall.Print(candidates), tdcNames(valid), pycall.Print(gold)); err != nil {
			return nil, err
		}
		tag = "trace"
	}
	out := r.Clone()
	out.Messages = out.Messages[:k+1]
	out.Tools = make([]record.Tool, len(cands))
	for i, t := range cands {
		out.Tools[i] = t.Clone()
	}
	turn := &out.Messages[k]
	turn.Content = ""
	turn.Reasoning = body // turn.Calls: the gold calls, cloned with r
	if system != "" {
		out.System = strings.TrimSpace(system + "\n\n" + r.System)
	}
	validList := make([]string, len(valid))
	for i, t := range valid {
		validList[i] = t.Name
	}
	// pycall.Parse gives JSON arguments, so these encode; an error is a bug.
	candTag, err := tdcJSON(candidates)
	if err != nil {
		return nil, fmt.Errorf("candidate calls: %w", err)
	}
	validTag, err := tdcJSON(validList)
	if err != nil {
		return nil, err
	}
	out.SetTag("tool_dc", tag)
	out.SetTag("tool_dc.grouping", s.cfg.Grouping)
	out.SetTag("tool_dc.tools", strconv.Itoa(len(cands)))
	out.SetTag("tool_dc.requests", strconv.FormatInt(requests.Load(), 10))
	out.SetTag("tool_dc.candidates", candTag)
	out.SetTag("tool_dc.valid", validTag)
	if anchors != nil {
		anchorTag, err := tdcJSON(anchors)
		if err != nil {
			return nil, err
		}
		out.SetTag("tool_dc.anchors", anchorTag)
	}
	out.AddStep(s.env.Stage, resp.Provider, resp.Model)
	return []*record.Record{out}, nil
}

// toolDCTarget returns the index of the record's target turn: the first
// assistant turn with calls, when the turns before it are system, user and
// assistant text turns, at least one of them a non-empty user turn. It
// returns -1 when there is none.
func toolDCTarget(msgs []record.Message) int {
	user := false
	for i, m := range msgs {
		switch m.Role {
		case record.RoleUser:
			user = user || strings.TrimSpace(m.Content) != ""
		case record.RoleSystem:
		case record.RoleAssistant:
			if len(m.Calls) > 0 {
				if user {
					return i
				}
				return -1
			}
		default:
			return -1
		}
	}
	return -1
}

// toolDCQuestion renders the turns before the target as the request: the
// user's text alone when it is the only turn, else a transcript with one
// "User: …", "Assistant: …" or "System: …" paragraph per non-empty turn.
func toolDCQuestion(msgs []record.Message) string {
	if len(msgs) == 1 {
		return strings.TrimSpace(msgs[0].Content)
	}
	var parts []string
	for _, m := range msgs {
		text := strings.TrimSpace(m.Content)
		if text == "" {
			continue
		}
		label := "User"
		switch m.Role {
		case record.RoleAssistant:
			label = "Assistant"
		case record.RoleSystem:
			label = "System"
		}
		parts = append(parts, label+": "+text)
	}
	return strings.Join(parts, "\n\n")
}

// tdcDistinctTools drops exact duplicates from a record's tool list and
// rejects two different tools under one name: a call could not say which it
// means.
func tdcDistinctTools(tools []record.Tool) ([]record.Tool, error) {
	var out []record.Tool
	byName := map[string]string{}
	for _, t := range tools {
		key := toollib.DefKey(t)
		if prev, ok := byName[t.Name]; ok {
			if prev != key {
				return nil, contract.Rejectf(ToolDCAmbiguousTool, "two different tools are named %q", t.Name)
			}
			continue
		}
		byName[t.Name] = key
		out = append(out, t)
	}
	return out, nil
}

// candidateSet returns T, shuffled (see ToolDCConfig).
func (s *toolDC) candidateSet(own []record.Tool, gold []record.Call, rng *rand.Rand) ([]record.Tool, error) {
	n := s.cfg.Candidates
	goldName := map[string]bool{}
	for _, c := range gold {
		goldName[c.Name] = true
	}
	var set, others []record.Tool
	for _, t := range own {
		if goldName[t.Name] {
			set = append(set, t)
		} else {
			others = append(others, t)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	for _, t := range others {
		if len(set) >= n {
			break
		}
		set = append(set, t)
	}
	if len(set) < n {
		lib, err := s.env.Library()
		if err != nil {
			return nil, err
		}
		set = append(set, tdcDistractors(lib, set, n-len(set), rng)...)
	}
	rng.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
	return set, nil
}

// tdcDistractors draws up to need tools from lib at random, none sharing a
// name or a definition with a tool of set or with each other; the draw
// (toollib.DrawAll) searches a small library whole.
func tdcDistractors(lib *toollib.Library, set []record.Tool, need int, rng *rand.Rand) []record.Tool {
	names := map[string]bool{}
	defs := map[string]bool{}
	for _, t := range set {
		names[t.Name] = true
		defs[toollib.DefKey(t)] = true
	}
	drawn := toollib.DrawAll(rng, len(lib.Tools), need, 4*need+32, func(i int) bool {
		t := lib.Tools[i]
		key := toollib.DefKey(t)
		if names[t.Name] || defs[key] {
			return false
		}
		names[t.Name] = true
		defs[key] = true
		return true
	})
	picked := make([]record.Tool, len(drawn))
	for k, i := range drawn {
		picked[k] = lib.Tools[i]
	}
	return picked
}

// groups splits T into the Try groups, and returns the anchors of anchor
// grouping (nil for enumerate).
func (s *toolDC) groups(id string, cands []record.Tool, question string) ([]tdcGroup, []string) {
	if s.cfg.Grouping == ToolDCEnumerate {
		gs := make([]tdcGroup, len(cands))
		for i, t := range cands {
			gs[i] = tdcGroup{slot: id + "/try/" + t.Name, tools: []record.Tool{t}}
		}
		return gs, nil
	}
	k := min(s.cfg.TopK, len(cands))
	rank := toollib.NewToolBM25(cands).Rank(question)
	top := tdcGroup{slot: id + "/try/top"}
	inTop := make([]bool, len(cands))
	gs := make([]tdcGroup, k+1)
	anchors := make([]string, k)
	for i, h := range rank[:k] {
		t := cands[h.Doc]
		inTop[h.Doc] = true
		top.tools = append(top.tools, t)
		anchors[i] = t.Name
		gs[i+1] = tdcGroup{slot: id + "/try/anchor/" + t.Name, tools: []record.Tool{t}}
	}
	gs[0] = top
	next := 0
	for i, t := range cands {
		if inTop[i] {
			continue
		}
		g := &gs[1+next%k]
		g.tools = append(g.tools, t)
		next++
	}
	return gs, anchors
}

// firstUnparsed says why the first Try answer that did not parse did not,
// in group order.
func firstUnparsed(tries []tdcTry) string {
	for _, t := range tries {
		if t.unparsed {
			return clip.Bytes(t.why, 160)
		}
	}
	return ""
}

// tryGroup sends one Try request and checks its answer.
func (s *toolDC) tryGroup(ctx context.Context, c llm.Client, g tdcGroup, gold []record.Call, question, system string) tdcTry {
	req, err := s.request(s.try, g.slot, g.tools, question, system, gold)
	if err != nil {
		return tdcTry{err: err}
	}
	resp, err := c.Complete(ctx, req)
	if err != nil {
		return tdcTry{err: err}
	}
	if resp.FinishReason == "length" {
		return tdcTry{truncated: true}
	}
	// Not asked again (one inference per tool): an answer that is not
	// calls is the null output, counted apart from a "[]".
	resp, err = resp.Answer()
	if err != nil {
		return tdcTry{unparsed: true, why: err.Error()}
	}
	if resp.Content == "" {
		// Not even "[]": e.g. a server that sends calls as
		// message.tool_calls, which augment does not read.
		return tdcTry{unparsed: true, why: "the answer is empty (not even [])"}
	}
	calls, err := parseToolDCAnswer(resp.Content)
	if err != nil {
		return tdcTry{unparsed: true, why: err.Error()}
	}
	if len(calls) == 0 {
		return tdcTry{}
	}
	for _, call := range calls {
		if len(verify.CheckCall(g.tools, call)) > 0 {
			return tdcTry{calls: calls}
		}
	}
	return tdcTry{calls: calls, valid: true}
}

// retryCalls sends the Retry request over the valid tools.
func (s *toolDC) retryCalls(ctx context.Context, c llm.Client, id string, valid []record.Tool, gold []record.Call, question, system string) (tdcRetry, llm.Response, error) {
	req, err := s.request(s.retry, id+"/retry", valid, question, system, gold)
	if err != nil {
		return tdcRetry{}, llm.Response{}, err
	}
	scope := make(map[string]record.Tool, len(valid))
	for _, t := range valid {
		scope[t.Name] = t
	}
	return llm.AskResponse(ctx, c, req, s.cfg.Attempts, func(resp llm.Response) (tdcRetry, error) {
		calls, err := parseToolDCAnswer(resp.Content)
		if err != nil {
			return tdcRetry{}, contract.Rejectf(ToolDCRetryBadSyntax, "%v", err)
		}
		if s.cfg.Trace != SourceThinking || len(calls) == 0 {
			return tdcRetry{calls: calls}, nil
		}
		thinking := strings.TrimSpace(resp.Reasoning)
		if thinking == "" {
			return tdcRetry{}, contract.Rejectf(ReasonNoThinking, "the teacher returned no thinking (reasoning_content) with its Retry answer")
		}
		if err := newCallsValidator(calls, scope, s.cfg.MaxChars).check(thinking); err != nil {
			return tdcRetry{}, err
		}
		return tdcRetry{calls: calls, thinking: thinking}, nil
	})
}

// A tdcRetry is a parsed Retry answer: its calls and, with trace thinking,
// the checked thinking that came with them.
type tdcRetry struct {
	calls    []record.Call
	thinking string
}

// request builds a Try or Retry request over tools. Its offline stand-in is
// the oracle: it answers with the gold calls of the listed tools, in gold
// order, or [] when none is listed.
func (s *toolDC) request(t *prompts.Template, slot string, tools []record.Tool, question, system string, gold []record.Call) (llm.Request, error) {
	data, err := toolDCData(tools, question, system)
	if err != nil {
		return llm.Request{}, err
	}
	msgs, err := t.Render(data)
	if err != nil {
		return llm.Request{}, err
	}
	listed := map[string]bool{}
	for _, t := range tools {
		listed[t.Name] = true
	}
	return llm.Request{
		Stage:       s.stage,
		Template:    t.Hash,
		Messages:    msgs,
		Temperature: s.cfg.Temperature,
		MaxTokens:   s.cfg.MaxTokens,
		Slot:        slot,
		Offline: func() (string, error) {
			var calls []record.Call
			for _, c := range gold {
				if listed[c.Name] {
					calls = append(calls, c)
				}
			}
			if len(calls) == 0 {
				return "[]", nil
			}
			return pycall.Print(calls), nil
		},
	}, nil
}

// toolDCData is the data of a Try or Retry prompt listing tools.
func toolDCData(tools []record.Tool, question, system string) (toolDCPrompt, error) {
	list, err := promptToolLines(tools, ToolDCBadToolSchema)
	if err != nil {
		return toolDCPrompt{}, err
	}
	return toolDCPrompt{Tools: list, Question: question, Context: strings.TrimSpace(system)}, nil
}

// parseToolDCAnswer reads a Try or Retry answer: calls in Python-call
// syntax, optionally inside a Markdown code fence (llm.StripFence). An empty answer or "[]"
// is no call (nil, nil); anything else that does not parse is an error.
func parseToolDCAnswer(content string) ([]record.Call, error) {
	s := llm.StripFence(content)
	if s == "" || s == "[]" {
		return nil, nil
	}
	return pycall.Parse(s)
}

// renderTrace renders the trace template: the system text (may be empty)
// and the reasoning, which must not be.
func (s *toolDC) renderTrace(candidates, valid, final string) (system, body string, err error) {
	msgs, err := s.trace.Render(toolDCTrace{Candidates: candidates, Valid: valid, Final: final})
	if err != nil {
		return "", "", err
	}
	for _, m := range msgs {
		switch m.Role {
		case "system":
			system = m.Content
		case "assistant":
			body = m.Content
		}
	}
	if body == "" {
		return "", "", fmt.Errorf("prompt %s: no assistant section, or it renders empty; it is the reasoning of the trace", s.trace.Name)
	}
	return system, body, nil
}

// tdcNames renders tool names as the trace lists them: "[a, b]".
func tdcNames(tools []record.Tool) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// tdcJSON renders v for a tag, without HTML escaping.
func tdcJSON(v any) (string, error) {
	b, err := jsonout.Marshal(v)
	return string(b), err
}
