package stages

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// NegativesConfig is the `negatives:` stage (seed 002, §3.2): it makes
// no-call examples out of records with calls. For a chosen call turn it
// removes the function(s) that turn calls from the listed tools (the others
// stay), cuts the dialogue right before that turn, and ends it with a direct
// answer instead of the calls: the answer token alone (target: token, the
// paper's cheap form: the model learns to emit <|answer|> and, at inference,
// goes on to answer) or a teacher-written reply saying the available tools
// cannot do it (target: teacher).
//
//	stages:
//	  - negatives:
//	      ratio: 0.1
//	      target: token
//
// A call turn is eligible when none of its functions can still be reached
// in the cut dialogue: no earlier turn calls them, no earlier meta_tool
// result returned them, and meta_tool is not listed unless the turn calls
// it (an open-world record reaches every library tool through meta_tool:
// removing a function from the list would not make it unavailable); and,
// unless allow_no_tools is set, at least one listed tool remains
// (get_user_input, which asks the user and calls no function, does not
// count). A turn that only asks the user (get_user_input, verify.Reply) is
// a reply, not a call turn. A record is eligible when it has an eligible
// turn.
//
// When the negative lists get_user_input (meta_tool's get_user_input:
// true, where every plain answer is a get_user_input call keeping its
// text), a teacher reply is written so too: its turn's Content is the text
// and its one call get_user_input({}). The token target stays the token
// alone: it is the decision, not a reply, and a call after it would teach
// asking the user with no text.
//
// A negative of an open-world record's meta_tool turn lists no meta_tool:
// its tag world becomes closed.
//
// The stage returns the input record unchanged followed by its negatives
// (counted as "added"), ordered by the cut position. A negative has the ID
// "<parent>/neg<k>" where k is the index of the message it replaces (so the
// ID is stable when per_record changes), the parent's tags plus
// category=negative, and a lineage step. Which records and turns are used is
// a seeded choice per record (Env.Rand), independent of order.
//
// Run decision_tokens after this stage: it leaves the token target alone and
// gives teacher replies their answer token.
//
// A negative whose tool list, or whose dialogue's meta_tool results, still
// offer a function the replaced turn called is a bug: Process returns a
// systemic error for it instead of writing it.
type NegativesConfig struct {
	// Ratio is the share of eligible records that get negatives, in (0, 1];
	// default 0.1 (seed 002 added 1k negatives to 110k call examples, ~1%).
	Ratio float64 `yaml:"ratio" json:"ratio"`
	// PerRecord is the number of negatives made from one record, each from
	// a different call turn; default 1. Records with fewer eligible turns
	// get fewer.
	PerRecord int `yaml:"per_record" json:"per_record"`
	// Target is "token" (default: the answer is Token alone) or "teacher"
	// (a reply written by the teacher, prompt prompts/negative_reply.tmpl).
	Target string `yaml:"target" json:"target"`
	// Token is the target of target: token; default "<|answer|>", which the
	// decision_tokens stage recognises and does not prefix again.
	Token string `yaml:"token" json:"token"`
	// AllowNoTools also makes negatives whose tool list ends up empty.
	AllowNoTools bool `yaml:"allow_no_tools" json:"allow_no_tools,omitempty"`
	// Prompt overrides prompts/negative_reply.tmpl (target: teacher),
	// relative to pipeline.yaml.
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`
	// Attempts is how many times the teacher is asked for one reply before
	// the record is rejected (default 3).
	Attempts int `yaml:"attempts" json:"attempts"`
	// MaxChars caps a teacher reply's length in characters (Unicode code
	// points); longer replies are re-asked, then rejected
	// (negative_reply_too_long). Default 1000 with target teacher: the
	// prompt asks for a sentence or two, and the export's cutoff_len grows
	// with the longest sample.
	MaxChars int `yaml:"max_chars" json:"max_chars,omitempty"`
}

// Negative targets.
const (
	NegativeTargetToken   = "token"
	NegativeTargetTeacher = "teacher"
)

// Reject reasons for teacher replies that never passed the check.
const (
	NegativeReplyEmpty      = "negative_reply_empty"
	NegativeReplyCallSyntax = "negative_reply_call_syntax"
	NegativeReplyClaimsCall = "negative_reply_claims_call"
	NegativeReplyTooLong    = "negative_reply_too_long"
	NegativeReplyThinking   = "negative_reply_thinking_markup" // <think> markup left after the leading thinking was taken out
)

// negativeMaxChars is max_chars' default with target teacher.
const negativeMaxChars = 1000

func (c *NegativesConfig) defaults() {
	if c.Ratio == 0 {
		c.Ratio = 0.1
	}
	if c.PerRecord == 0 {
		c.PerRecord = 1
	}
	if c.Target == "" {
		c.Target = NegativeTargetToken
	}
	if c.Token == "" {
		c.Token = DefaultAnswerToken
	}
	if c.Attempts == 0 {
		c.Attempts = 3
	}
	if c.MaxChars == 0 && c.Target == NegativeTargetTeacher {
		c.MaxChars = negativeMaxChars
	}
}

func (c *NegativesConfig) validate() []string {
	var probs []string
	if !(c.Ratio > 0 && c.Ratio <= 1) {
		probs = append(probs, fmt.Sprintf("ratio: %v must be in (0, 1]", c.Ratio))
	}
	if c.PerRecord < 1 {
		probs = append(probs, "per_record: must be at least 1")
	}
	if c.Target != NegativeTargetToken && c.Target != NegativeTargetTeacher {
		probs = append(probs, fmt.Sprintf("target: %q is not one of token, teacher", c.Target))
	}
	if strings.TrimSpace(c.Token) == "" {
		probs = append(probs, "token: must not be blank")
	}
	if c.Attempts < 1 {
		probs = append(probs, "attempts: must be at least 1")
	}
	if c.Prompt != "" && c.Target != NegativeTargetTeacher {
		probs = append(probs, "prompt: only used with target: teacher")
	}
	switch {
	case c.MaxChars != 0 && c.Target != NegativeTargetTeacher:
		probs = append(probs, "max_chars: only used with target: teacher")
	case c.MaxChars < 0:
		probs = append(probs, "max_chars: must be positive")
	}
	return probs
}

// version 2: no negatives of get_user_input replies or of turns meta_tool
// still reaches. Its requests keep version 1 (negativesRequests): a reply
// asked for the same cut dialogue is the same, and is not paid again.
// 3: teacher replies lose the thinking written into them
// (llm.SplitThinking) and a fence around the whole reply, and are capped by
// max_chars. 4: get_user_input is no tool left for allow_no_tools: false;
// in a record listing get_user_input a teacher reply is a get_user_input
// call keeping its text, and the offline stand-in does not name
// get_user_input among the tools.
func (c *NegativesConfig) version() int { return 4 }

// negativesRequests is the version in the teacher requests' stage name.
const negativesRequests = 1

func (c *NegativesConfig) build(env *Env) (Stage, error) {
	s := &negatives{cfg: *c, env: env, seed: env.reseeder(), retrieved: newRetrievedNames()}
	if c.Target == NegativeTargetTeacher {
		if env.Teacher == nil {
			return nil, fmt.Errorf("target teacher needs a teacher")
		}
		// The samples: the sample's request cut before its call turn,
		// with its tool and with none left (Tools "[]").
		neg := record.Sample()
		neg.Messages = neg.Messages[:1]
		withTool := negativeData(neg)
		neg.Tools = nil
		tmpl, err := env.Prompt("negative_reply", "prompt", c.Prompt, withTool, negativeData(neg))
		if err != nil {
			return nil, err
		}
		s.tmpl = tmpl
	}
	return s, nil
}

type negatives struct {
	cfg  NegativesConfig
	env  *Env
	tmpl *prompts.Template // target teacher only
	seed reseeder          // Env.Rand's generators, without its allocation and hash of seed and stage
	// retrieved holds the names meta_tool results return: records
	// repeat the same results (meta_tool writes one per library tool).
	retrieved *retrievedNames
	steps     stepper
}

// Concurrency is the teacher's capacity when replies are written by the
// teacher, else one worker per CPU.
// writesTeacherText: only target teacher asks the teacher for the answer.
func (s *negatives) writesTeacherText() bool { return s.tmpl != nil }

func (s *negatives) usesModels() (teacher, embedder bool) { return s.tmpl != nil, false }

func (s *negatives) Concurrency() int {
	if s.tmpl != nil {
		return max(1, s.env.Capacity)
	}
	return runtime.NumCPU()
}

// Process returns r followed by its negatives.
func (s *negatives) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	// The record's draw comes before its eligible turns: the draw is the
	// first use of the record's own rng either way, and with the default
	// ratio nine records in ten are not chosen and need no search of
	// their turns (which reads every meta_tool result).
	// The draw is Env.Rand(r.ID).Float64() from a source on the stack; a
	// chosen record's generator goes on from a copy of it.
	src, drawn := s.draw(r)
	if !drawn {
		return []*record.Record{r}, nil
	}
	turns := negativeTurns(r, s.cfg.AllowNoTools, s.retrieved)
	if len(turns) == 0 {
		return []*record.Record{r}, nil
	}
	rest := src
	perm := rand.New(&rest).Perm(len(turns))
	chosen := make([]int, 0, min(s.cfg.PerRecord, len(turns)))
	for _, i := range perm[:min(s.cfg.PerRecord, len(turns))] {
		chosen = append(chosen, turns[i])
	}
	slices.Sort(chosen)
	out := []*record.Record{r}
	for _, k := range chosen {
		neg, err := s.negative(ctx, r, k)
		if err != nil {
			return nil, err
		}
		out = append(out, neg)
	}
	return out, nil
}

// draw is r's draw: whether r is chosen for negatives, and the source its
// generator goes on from.
func (s *negatives) draw(r *record.Record) (src rand.PCG, drawn bool) {
	s.seed.reseed(&src, r.ID)
	drawn = unitFloat(src.Uint64()) < s.cfg.Ratio
	return src, drawn
}

// passes reports that r is not chosen (passer): Process returns it alone.
func (s *negatives) passes(r *record.Record) bool {
	_, drawn := s.draw(r)
	return !drawn
}

// unitFloat is math/rand/v2's Rand.Float64 of the draw u: [0, 1) in steps
// of 2⁻⁵³ (TestUnitFloat holds it to the library's).
func unitFloat(u uint64) float64 { return float64(u<<11>>11) / (1 << 53) }

// negative builds the negative of r that replaces message k.
func (s *negatives) negative(ctx context.Context, r *record.Record, k int) (*record.Record, error) {
	called := calledNames(r.Messages[k])
	// New lists; the tools, messages, calls and results shared: no stage
	// changes them in place (a deep Clone copied every call's arguments
	// and tool schema, and the runner's check then read the copies again).
	// Memos that outlive the record keep their own copies (Tool.Owned).
	neg := &record.Record{ID: r.ID + "/neg" + strconv.Itoa(k), Source: r.Source, Format: r.Format, Row: r.Row, System: r.System,
		Tools:    make([]record.Tool, 0, len(r.Tools)),
		Messages: make([]record.Message, k, k+1),
		Lineage:  slices.Clip(r.Lineage)}
	for _, t := range r.Tools {
		if !slices.Contains(called, t.Name) {
			neg.Tools = append(neg.Tools, t)
		}
	}
	copy(neg.Messages, r.Messages)
	if err := assertNegative(neg, called); err != nil {
		return nil, err
	}
	provider, model := "rule", ""
	answer := s.cfg.Token
	if s.tmpl != nil {
		text, resp, err := s.reply(ctx, r, neg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", neg.ID, err)
		}
		answer, provider, model = text, resp.Provider, resp.Model
	}
	reply := record.Message{Role: record.RoleAssistant, Content: answer}
	if s.tmpl != nil && asksUser(r) {
		// The record's plain answers are get_user_input calls keeping
		// their text (meta_tool's get_user_input: true): the reply is
		// written as they are, not in a second form.
		reply.Calls = getUserInputCalls()
	}
	neg.Messages = append(neg.Messages, reply)
	tags := []record.Tag{{Key: "category", Value: "negative"}}
	if r.Tag("world") == "open" && slices.Contains(called, verify.MetaTool) {
		tags = append(tags, record.Tag{Key: "world", Value: "closed"})
	}
	neg.Tags = record.WithTags(r.Tags, tags...)
	s.steps.add(neg, s.env.Stage, provider, model)
	return neg, nil
}

// assertNegative checks the invariant of every negative: no function that
// the replaced turn called is listed or returned by meta_tool in the kept
// dialogue. A violation is a bug in the eligibility rules, so it is a
// systemic error, not a reject.
func assertNegative(neg *record.Record, called []string) error {
	scope := toolsInScope(neg, len(neg.Messages))
	for _, name := range called {
		if _, ok := scope[name]; ok {
			return fmt.Errorf("bug: negative %s still offers the called function %q", neg.ID, name)
		}
	}
	return nil
}

// negativeTurns returns the indices of r's call turns that can become
// negatives (see NegativesConfig). Messages are read once, in order: the
// names called and the tools meta_tool returned so far are kept as the scan
// goes. The names meta_tool results return come from names (nil: each
// result is read).
func negativeTurns(r *record.Record, allowNoTools bool, names *retrievedNames) []int {
	var turns []int
	seenUser := false
	unavailable := map[string]bool{} // called before, or returned by an earlier meta_tool result
	for k, m := range r.Messages {
		switch {
		case m.Role == record.RoleUser:
			seenUser = true
		case m.Role == record.RoleAssistant && len(m.Calls) > 0:
			names := calledNames(m)
			if seenUser && !verify.Reply(m.Calls) && negativeTurnOK(r, names, unavailable, allowNoTools) {
				turns = append(turns, k)
			}
			for _, n := range names {
				unavailable[n] = true
			}
		case m.Role == record.RoleTool:
			for _, res := range m.Results {
				if res.Name == verify.MetaTool {
					for _, n := range names.of(res.Content) {
						unavailable[n] = true
					}
				}
			}
		}
	}
	return turns
}

// retrievedNames remembers, per meta_tool result content, the names of
// the tools it returns (formats.MetaToolResult; none when it reads no
// definition), up to retrievedNamesBudget bytes of contents and names. A
// nil *retrievedNames remembers nothing.
type retrievedNames struct{ memo textMemo[[]string] }

// retrievedNamesBudget bounds the bytes a retrievedNames holds; a content
// met when it is spent is read every time.
const retrievedNamesBudget = 4 << 20

func newRetrievedNames() *retrievedNames {
	return &retrievedNames{memo: textMemo[[]string]{budget: retrievedNamesBudget}}
}

// of returns the names of the tools content returns, in order.
func (rn *retrievedNames) of(content string) []string {
	var memo *textMemo[[]string]
	if rn != nil {
		memo = &rn.memo
	}
	return memo.get(content, func(content string) ([]string, int) {
		ts, err := formats.MetaToolResult(content)
		if err != nil || len(ts) == 0 {
			return []string{}, 0
		}
		names, size := make([]string, len(ts)), 0
		for i, t := range ts {
			names[i] = strings.Clone(t.Name)
			size += len(t.Name)
		}
		return names, size
	})
}

func negativeTurnOK(r *record.Record, names []string, unavailable map[string]bool, allowNoTools bool) bool {
	for _, n := range names {
		if unavailable[n] {
			return false
		}
	}
	if !slices.Contains(names, verify.MetaTool) && record.ToolIndex(r.Tools, verify.MetaTool) >= 0 {
		return false
	}
	if allowNoTools {
		return true
	}
	for _, t := range r.Tools {
		// get_user_input asks the user and calls no function (seed 000
		// Fig 6): it is no tool left.
		if t.Name != verify.GetUserInput && !slices.Contains(names, t.Name) {
			return true
		}
	}
	return false
}

// negativePrompt is what prompts/negative_reply.tmpl renders.
type negativePrompt struct {
	Tools    string // the tools left in the negative, indented JSON ("[]" when none)
	Dialogue string // the cut dialogue, one "[ROLE] text" block per message
}

// negativeData is the prompt data of the negative neg.
func negativeData(neg *record.Record) negativePrompt {
	return negativePrompt{
		Tools:    promptToolsJSON(neg.Tools),
		Dialogue: renderDialogue(neg.System, neg.Messages),
	}
}

func (s *negatives) reply(ctx context.Context, parent, neg *record.Record) (string, llm.Response, error) {
	msgs, err := s.tmpl.Render(negativeData(neg))
	if err != nil {
		return "", llm.Response{}, err
	}
	// Every function of the parent counts for the call-syntax check: the
	// reply must not call the removed ones either.
	var names []string
	for _, t := range parent.Tools {
		names = append(names, t.Name)
	}
	for _, m := range parent.Messages {
		names = append(names, calledNames(m)...)
	}
	req := llm.Request{
		Stage:    "negatives@" + strconv.Itoa(negativesRequests),
		Template: s.tmpl.Hash,
		Messages: msgs,
		Slot:     neg.ID,
		Offline:  func() (string, error) { return negativeStandIn(neg), nil },
	}
	parse := func(content string) (string, error) {
		text := llm.StripFence(content)
		return text, checkNegativeReply(text, names, s.cfg.MaxChars)
	}
	return llm.Ask(ctx, s.env.Teacher, req, s.cfg.Attempts, parse)
}

// negativeStandIn is the offline reply: a fixed apology naming the tools
// that are left, if any.
func negativeStandIn(neg *record.Record) string {
	var names []string
	for _, t := range neg.Tools {
		if t.Name != verify.GetUserInput { // asks the user, calls no function
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return "I'm sorry, but I don't have a tool that can do this, so I can't carry out your request directly. If you tell me more about what you need, I can try to help in another way."
	}
	return fmt.Sprintf("I'm sorry, but I can't do that for you here: the tools I have (%s) are not meant for this request. If you tell me more about what you need, I can try to help in another way.", strings.Join(names, ", "))
}

// callMarkers are substrings that only occur in function-call syntax.
var callMarkers = []string{"<functioncall>", "<tool_call>", "</tool_call>", "<|python_tag|>", DefaultUseToolToken}

// jsonCallRe matches a JSON call object's keys: "name": … "arguments"/"parameters":.
var jsonCallRe = regexp.MustCompile(`(?s)"name"\s*:.*"(?:arguments|parameters)"\s*:`)

// claimPhrases are ways of saying a function was (or is being) called;
// matched case-insensitively.
var claimPhrases = []string{
	"i have called", "i've called", "i called", "i'm calling", "i am calling", "let me call", "i will call", "i'll call",
	"i have used the", "i've used the", "i used the", "let me use the", "i will use the", "i'll use the",
	"i have invoked", "i've invoked", "i invoked",
	"i have run the", "i've run the", "i ran the", "i have executed", "i've executed", "i executed",
	"i have looked up", "i've looked up", "i looked up", "let me look up",
	"i have checked", "i've checked", "i checked", "let me check",
	"i have retrieved", "i've retrieved", "i retrieved", "i have fetched", "i've fetched", "i fetched",
	"the tool returned", "the function returned", "the api returned", "according to the tool", "according to the function",
	"here are the results", "the results show",
	"我已经调用", "我已調用", "我调用了", "我調用了", "已调用", "已調用", "让我调用", "讓我調用", "我来调用", "我來調用", "查询结果显示", "查詢結果顯示",
}

// checkNegativeReply accepts a reply that is not empty, has at most
// maxChars characters (0: no cap), holds no thinking markup, contains no
// call syntax (call markers, a JSON object with "name" and "arguments" or
// "parameters", `name(` for any function of the parent record, a reply
// wrapped in [ ]) and claims no call (claimPhrases).
func checkNegativeReply(text string, functions []string, maxChars int) error {
	if text == "" {
		return contract.Rejectf(NegativeReplyEmpty, "the reply is empty")
	}
	if n := utf8.RuneCountInString(text); maxChars > 0 && n > maxChars {
		return contract.Rejectf(NegativeReplyTooLong, "the reply has %d characters; the cap is %d (a sentence or two)", n, maxChars)
	}
	if llm.HasThinkingMarkup(text) {
		return contract.Rejectf(NegativeReplyThinking, "the reply holds <think> markup: give the reply text only")
	}
	for _, m := range callMarkers {
		if strings.Contains(text, m) {
			return contract.Rejectf(NegativeReplyCallSyntax, "the reply contains %q", m)
		}
	}
	if jsonCallRe.MatchString(text) {
		return contract.Rejectf(NegativeReplyCallSyntax, "the reply contains a JSON function call")
	}
	if strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]") {
		return contract.Rejectf(NegativeReplyCallSyntax, "the reply is a bracketed list, the call syntax of ToolACE")
	}
	for _, f := range functions {
		if f == "" {
			continue
		}
		for i := 0; ; {
			j := strings.Index(text[i:], f)
			if j < 0 {
				break
			}
			after := strings.TrimLeft(text[i+j+len(f):], " ")
			if strings.HasPrefix(after, "(") && (i+j == 0 || !isIdentByte(text[i+j-1])) {
				return contract.Rejectf(NegativeReplyCallSyntax, "the reply calls %q", f)
			}
			i += j + len(f)
		}
	}
	lower := strings.ToLower(text)
	for _, p := range claimPhrases {
		if strings.Contains(lower, p) {
			return contract.Rejectf(NegativeReplyClaimsCall, "the reply claims a function call (%q)", p)
		}
	}
	return nil
}
