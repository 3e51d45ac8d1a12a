package stages

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// VerifyConfig is the `verify:` stage, a thin adapter over package verify:
// it runs the configured checkers on every record and rejects (or tags) the
// records with problems.
//
//	stages:
//	  - verify:
//	      checks: [roles, calls_resolved, args_schema, judge_hallucination]
//	      action: reject
//	      max_tokens: 4096
//
// Every configured check runs on every record, in the configured order. A
// record with problems is rejected with reason "verify:<check>", naming the
// first check (in configured order) that found one, and the reject's detail
// lists every problem of every check as a JSON array of verify.Problem
// objects. With action: tag the record is kept instead and gets the tag
// "verify.<check>=fail" for each failing check (absent means passed).
//
// With count_tokens (default on) every record gets the tag tokens=<n>,
// verify.RecordTokens' count of the record as the model sees it; max_tokens
// rejects records above it with reason too_long, whatever the action (the
// verify reasons come first when a record has problems too).
//
// Counters (in the manifest, per shard and in the totals): "check.<name>" is the number of records on
// which that check found problems, "kind.<kind>" the number of problems of
// each verify kind (the format, dialogue and judge kinds listed in the verify
// package doc; never MatchCalls' match kinds, which need gold calls), "too_long" the records over max_tokens, and
// "judge.<judge>=<value>" the judgements of each LLM judge by answer (0/1 for
// the Meta-Tool judges, the score 0–2 for the ComplexEval ones, or
// "unparseable"; see verify.LLMEnv.Judged) — the report's score histograms.
type VerifyConfig struct {
	// Checks lists the checkers to run, by name (verify.Checkers); required.
	Checks []string `yaml:"checks" json:"checks"`
	// Action is "reject" (default) or "tag".
	Action string `yaml:"action" json:"action"`
	// Attempts is how many times a judge is asked for one judgement before
	// the answer counts as unreadable (a judge_unparseable problem); default 3.
	Attempts int `yaml:"attempts" json:"attempts"`
	// Prompts overrides the judges' prompt templates, by template name
	// (judge_hallucination, judge_consistency, judge_multistep,
	// judge_completeness, judge_correctness) → txtar file relative to
	// pipeline.yaml. equiv_value is refused: verify never asks it (the
	// translate stage does; see its equiv_prompt).
	Prompts map[string]string `yaml:"prompts" json:"prompts,omitempty"`
	// MinCompleteness and MinCorrectness are the lowest passing scores (1 or
	// 2) of judge_completeness and judge_correctness; default 2 (unset: an
	// explicit 0 is refused, not taken for unset).
	MinCompleteness *int `yaml:"min_completeness" json:"min_completeness"`
	MinCorrectness  *int `yaml:"min_correctness" json:"min_correctness"`
	// CountTokens sets the tag tokens=<n> on every record; default true.
	CountTokens *bool `yaml:"count_tokens" json:"count_tokens"`
	// MaxTokens rejects records with more tokens (reason too_long); 0 means
	// no limit. Needs count_tokens.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens,omitempty"`
	// Tokenizer is the student model's Hugging Face tokenizer.json (a
	// byte-level BPE: Llama 3.x, Qwen 2.5/3), relative to pipeline.yaml;
	// when set, tokens are counted with it (verify.StudentTokens) instead of
	// o200k. Either count is of the record's texts, not of LLaMA-Factory's
	// rendering, which is longer (see the export's cutoff_len).
	Tokenizer string `yaml:"tokenizer" json:"tokenizer,omitempty"`
	// ChatTemplate is the framing counted with Tokenizer: llama3, chatml
	// (Qwen) or none (default).
	ChatTemplate string `yaml:"chat_template" json:"chat_template,omitempty"`
	// TokenizerSHA256 is filled in when the stage is built, so a changed
	// tokenizer file changes the config hash.
	TokenizerSHA256 string `yaml:"-" json:"tokenizer_sha256,omitempty"`
}

// Verify stage actions.
const (
	VerifyActionReject = "reject"
	VerifyActionTag    = "tag"
)

// TooLong is the reject reason of records over max_tokens.
const TooLong = "too_long"

func (c *VerifyConfig) defaults() {
	if c.Action == "" {
		c.Action = VerifyActionReject
	}
	if c.Attempts == 0 {
		c.Attempts = 3
	}
	if c.MinCompleteness == nil {
		c.MinCompleteness = new(2)
	}
	if c.MinCorrectness == nil {
		c.MinCorrectness = new(2)
	}
	if c.CountTokens == nil {
		on := true
		c.CountTokens = &on
	}
	if c.Tokenizer != "" && c.ChatTemplate == "" {
		c.ChatTemplate = verify.TemplateNone
	}
}

func (c *VerifyConfig) validate() []string {
	var probs []string
	if len(c.Checks) == 0 {
		names := make([]string, len(verify.Checkers))
		for i, ch := range verify.Checkers {
			names[i] = ch.Name
		}
		probs = append(probs, "checks: list at least one of "+strings.Join(names, ", "))
	}
	seen := map[string]bool{}
	for i, name := range c.Checks {
		if _, ok := verify.Lookup(name); !ok {
			probs = append(probs, fmt.Sprintf("checks[%d]: unknown check %q", i, name))
		}
		if seen[name] {
			probs = append(probs, fmt.Sprintf("checks[%d]: %q is listed twice", i, name))
		}
		seen[name] = true
	}
	if c.Action != VerifyActionReject && c.Action != VerifyActionTag {
		probs = append(probs, fmt.Sprintf("action: %q is not one of reject, tag", c.Action))
	}
	if c.Attempts < 1 {
		probs = append(probs, "attempts: must be at least 1")
	}
	known := slices.DeleteFunc(verify.PromptNames(), func(name string) bool { return name == "equiv_value" })
	for _, name := range slices.Sorted(maps.Keys(c.Prompts)) {
		if name == "equiv_value" {
			probs = append(probs, fmt.Sprintf("prompts: %q is not a prompt verify asks: the call-equivalence question is asked by the translate stage; set its equiv_prompt instead", name))
		} else if !slices.Contains(known, name) {
			probs = append(probs, fmt.Sprintf("prompts: %q is not one of %s", name, strings.Join(known, ", ")))
		}
		if c.Prompts[name] == "" {
			probs = append(probs, fmt.Sprintf("prompts.%s: path is empty", name))
		}
	}
	for _, m := range []struct {
		key string
		v   *int
	}{{"min_completeness", c.MinCompleteness}, {"min_correctness", c.MinCorrectness}} {
		if m.v != nil && (*m.v < 1 || *m.v > 2) {
			probs = append(probs, fmt.Sprintf("%s: must be 1 or 2, got %d", m.key, *m.v))
		}
	}
	if c.MaxTokens < 0 {
		probs = append(probs, "max_tokens: must be ≥ 0")
	}
	if c.MaxTokens > 0 && c.CountTokens != nil && !*c.CountTokens {
		probs = append(probs, "max_tokens: needs count_tokens: true")
	}
	if c.ChatTemplate != "" && !slices.Contains(verify.Templates, c.ChatTemplate) {
		probs = append(probs, fmt.Sprintf("chat_template: %q is not one of %s", c.ChatTemplate, strings.Join(verify.Templates, ", ")))
	}
	if c.ChatTemplate != "" && c.Tokenizer == "" {
		probs = append(probs, "chat_template: needs tokenizer")
	}
	return probs
}

func (c *VerifyConfig) version() int { return 8 } // 2: judges skip get_user_input replies; 3: meta_tool results read in Fig 12's envelope too; 4: token counts in 4 KiB pieces (a forced cut in a longer run may shift max_tokens by one); 5: a judge answer's keys match case-sensitively; 6: completeness and correctness judge a get_user_input reply's text as the answer; 7: a judge answer's leading thinking is taken out (llm.SplitThinking); 8: judge scores 2.0 accepted, enum numbers compared exactly, parameter paths in messages written once, tokens count the tools' response schemas

func (c *VerifyConfig) build(env *Env) (Stage, error) {
	s := &verifyStage{cfg: *c, env: env, countTokens: c.CountTokens == nil || *c.CountTokens}
	if c.Tokenizer != "" {
		tok, sum, err := loadTokenizer(env.Dir, c.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		s.student, c.TokenizerSHA256 = tok, sum
		s.cfg.TokenizerSHA256 = sum
	}
	for _, name := range c.Checks {
		ch, ok := verify.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("unknown check %q", name)
		}
		s.checkers = append(s.checkers, ch)
		if ch.CheckLLM != nil {
			s.judges = true
		}
	}
	if s.judges && env.Teacher == nil {
		return nil, fmt.Errorf("the judges in checks need a teacher")
	}
	tmpls := map[string]*prompts.Template{}
	for _, name := range slices.Sorted(maps.Keys(c.Prompts)) {
		t, err := env.Prompt(name, "prompts."+name, c.Prompts[name], verify.PromptSamples(name)...)
		if err != nil {
			return nil, err
		}
		tmpls[name] = t
	}
	s.llmEnv = verify.LLMEnv{
		Client:          env.Teacher,
		Stage:           env.Stage,
		Prompts:         tmpls,
		Attempts:        c.Attempts,
		MinCompleteness: *c.MinCompleteness,
		MinCorrectness:  *c.MinCorrectness,
		Judged: func(ctx context.Context, judge, value string) {
			Count(ctx, "judge."+judge+"="+value, 1)
		},
	}
	return s, nil
}

type verifyStage struct {
	cfg         VerifyConfig
	env         *Env
	checkers    []*verify.Checker
	judges      bool // some checker is an LLM judge
	llmEnv      verify.LLMEnv
	countTokens bool
	student     verify.Counter // the student's tokenizer, when configured
}

// Concurrency is the teacher's capacity when a judge runs, else one worker
// per CPU.
func (s *verifyStage) Concurrency() int {
	if s.judges {
		return max(1, s.env.Capacity)
	}
	return runtime.NumCPU()
}

// writesTeacherText: a judge's verdict is the teacher's (the lineage step
// names its provider).
func (s *verifyStage) writesTeacherText() bool { return s.judges }

func (s *verifyStage) usesModels() (teacher, embedder bool) { return s.judges, false }

// Process runs every configured check on r. Errors of an LLM judge that
// carry a reject reason (the teacher never answered for this record) reject
// the record; other judge errors are systemic.
func (s *verifyStage) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	// The judges ask at once (their requests do not depend on each
	// other: a batch-mode teacher gets them all in one round); the
	// results are read in the checks' order.
	found := make([][]verify.Problem, len(s.checkers))
	errs := make([]error, len(s.checkers))
	var wg sync.WaitGroup
	for i, ch := range s.checkers {
		if ch.Check != nil {
			found[i] = ch.Check(r)
			continue
		}
		wg.Go(func() { found[i], errs[i] = ch.CheckLLM(ctx, s.llmEnv, r) })
	}
	wg.Wait()
	var problems []verify.Problem
	var failed []string
	for i, ch := range s.checkers {
		ps := found[i]
		if err := errs[i]; err != nil {
			return nil, fmt.Errorf("check %s: %w", ch.Name, err)
		}
		if len(ps) > 0 {
			failed = append(failed, ch.Name)
			problems = append(problems, ps...)
		}
	}
	tokens := -1
	switch {
	case s.countTokens && s.student != nil:
		var err error
		if tokens, err = verify.StudentTokens(r, s.student, s.cfg.ChatTemplate); err != nil {
			return nil, err
		}
	case s.countTokens:
		tokens = verify.RecordTokens(r)
	}
	tooLong := s.cfg.MaxTokens > 0 && tokens > s.cfg.MaxTokens
	count(ctx, failed, problems, tooLong)

	if len(failed) > 0 && s.cfg.Action == VerifyActionReject {
		detail, err := jsonout.Marshal(problems)
		if err != nil {
			return nil, err
		}
		return nil, &contract.Reject{Reason: "verify:" + failed[0], Detail: fmt.Sprintf("%d problem(s): %s", len(problems), detail)}
	}
	if tooLong {
		return nil, contract.Rejectf(TooLong, "%d tokens, more than max_tokens %d", tokens, s.cfg.MaxTokens)
	}
	out := r
	change := func() {
		if out == r {
			out = r.Clone()
		}
	}
	if tokens >= 0 && r.Tag("tokens") != strconv.Itoa(tokens) {
		change()
		out.SetTag("tokens", strconv.Itoa(tokens))
	}
	for _, name := range failed {
		if r.Tag("verify."+name) != "fail" {
			change()
			out.SetTag("verify."+name, "fail")
		}
	}
	if out != r {
		provider, model := "rule", ""
		if s.judges {
			provider, model = s.env.Provider, s.env.Model
		}
		out.AddStep(s.env.Stage, provider, model)
	}
	return []*record.Record{out}, nil
}

// count adds the record's findings to the shard's counters (see VerifyConfig).
func count(ctx context.Context, failed []string, problems []verify.Problem, tooLong bool) {
	for _, name := range failed {
		Count(ctx, "check."+name, 1)
	}
	for _, p := range problems {
		Count(ctx, "kind."+p.Kind, 1)
	}
	if tooLong {
		Count(ctx, TooLong, 1)
	}
}
