package stages

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// DecisionTokensConfig is the `decision_tokens:` stage (seed 002, §3.2): every
// assistant turn starts with a decision token, <|answer|> before a text
// answer and <|use_tool|> before function calls, so the model decides
// between answering and calling before it writes anything else. A turn
// whose only calls are get_user_input (meta_tool's get_user_input: true)
// answers the user and invokes no tool (seed 000, Fig 6): it gets
// <|answer|>, so the token still tells replies from tool use.
//
// Convention shared with the export stage: the token is written at the start
// of Message.Content (a call turn without text gets Content = the use-tool
// token) and the record gets the tag decision_tokens=on. The exporter's
// inline renderer emits Content, then Reasoning, then the calls, which gives
// "<|use_tool|>reasoning\n\n[calls]" and "<|answer|>text".
//
// The stage is idempotent: a turn that already starts with its token is left
// alone, and a turn that starts with the other token (say a call turn
// beginning with the answer token) gets that token replaced, so every
// assistant turn carries exactly one token, the right one. A record that
// needs no change is passed on untouched, without a lineage step.
//
// Place the stage after the stages that write assistant turns (reason,
// negatives), so their prompts show the dialogue without tokens and their
// new turns get tokens too.
//
// The tokens must be added to the tokenizer as special tokens when training
// (LLaMA-Factory: new_special_tokens), so each is one token as in the paper.
type DecisionTokensConfig struct {
	// AnswerToken starts text answers; default "<|answer|>".
	AnswerToken string `yaml:"answer_token" json:"answer_token"`
	// UseToolToken starts call turns; default "<|use_tool|>".
	UseToolToken string `yaml:"use_tool_token" json:"use_tool_token"`
}

// Default decision tokens (seed 002, Fig 1).
const (
	DefaultAnswerToken  = "<|answer|>"
	DefaultUseToolToken = "<|use_tool|>"
)

// DecisionTokensTag is the tag key the stage sets to "on".
const DecisionTokensTag = "decision_tokens"

func (c *DecisionTokensConfig) defaults() {
	if c.AnswerToken == "" {
		c.AnswerToken = DefaultAnswerToken
	}
	if c.UseToolToken == "" {
		c.UseToolToken = DefaultUseToolToken
	}
}

func (c *DecisionTokensConfig) validate() []string {
	var probs []string
	for _, f := range []struct{ key, tok string }{{"answer_token", c.AnswerToken}, {"use_tool_token", c.UseToolToken}} {
		if strings.TrimSpace(f.tok) != f.tok {
			probs = append(probs, fmt.Sprintf("%s: %q has surrounding white space", f.key, f.tok))
		}
	}
	if strings.HasPrefix(c.AnswerToken, c.UseToolToken) || strings.HasPrefix(c.UseToolToken, c.AnswerToken) {
		probs = append(probs, fmt.Sprintf("answer_token %q and use_tool_token %q must differ and neither may be a prefix of the other", c.AnswerToken, c.UseToolToken))
	}
	return probs
}

func (c *DecisionTokensConfig) version() int { return 2 }

func (c *DecisionTokensConfig) build(env *Env) (Stage, error) {
	return &decisionTokens{answer: c.AnswerToken, useTool: c.UseToolToken, stage: env.Stage, on: record.Tag{Key: DecisionTokensTag, Value: "on"}}, nil
}

type decisionTokens struct {
	answer, useTool string
	stage           string
	on              record.Tag // the tag the stage sets
	steps           stepper
}

// Process prefixes every assistant turn of r with its decision token.
// The new texts of a record are written one after another into a block
// shared with the records processed before it (texts), not allocated one
// by one: a separate string per turn was most of the stage's cost.
func (s *decisionTokens) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	size, first := 0, -1 // the bytes of the new texts, the first turn to change
	for k := range r.Messages {
		m := &r.Messages[k]
		if want, other, ok := s.tokens(m); ok {
			if first < 0 {
				first = k
			}
			size += len(want) + len(strings.TrimPrefix(m.Content, other))
		}
	}
	if first < 0 {
		if r.Tag(DecisionTokensTag) == "on" {
			return []*record.Record{r}, nil
		}
		out, list := relabelled(r, s.on)
		s.steps.add(out, s.stage, "rule", "")
		return list, nil
	}
	out, list := changed(r, s.on)
	t := texts.Get().(*textRoom)
	b := t.room(size)
	for k := first; k < len(r.Messages); k++ {
		m := &r.Messages[k]
		want, other, ok := s.tokens(m)
		if !ok {
			continue
		}
		rest := strings.TrimPrefix(m.Content, other)
		if rest == "" {
			out.Messages[k].Content = want // as want + "" is: no copy
			continue
		}
		at := b.Len()
		b.WriteString(want)
		b.WriteString(rest)
		out.Messages[k].Content = b.String()[at:]
	}
	texts.Put(t)
	s.steps.add(out, s.stage, "rule", "")
	return list, nil
}

// tokens tells whether m is an assistant turn that does not start with
// its decision token, want; other is the token to replace if it starts
// with that one instead.
func (s *decisionTokens) tokens(m *record.Message) (want, other string, ok bool) {
	if m.Role != record.RoleAssistant {
		return "", "", false
	}
	want, other = s.answer, s.useTool
	if len(m.Calls) > 0 && !verify.Reply(m.Calls) {
		want, other = s.useTool, s.answer
	}
	return want, other, !strings.HasPrefix(m.Content, want)
}

// textBlock is the size of the blocks the stage's new texts are written
// into. A block lives as long as any text in it: the records of a shard
// are made and dropped together, and memos keep copies of what they keep
// ("Memos keep their own copies", testdata/bench/PERFORMANCE.md).
const textBlock = 64 << 10

// textRoom is the block being filled; what it holds was handed out and is
// never written again (a strings.Builder only appends, and Grow gives a
// block without clearing it first, as a string concatenation does).
type textRoom struct{ b *strings.Builder }

// texts holds textRooms between records; Process takes one, so no two
// records write into one block at once.
var texts = sync.Pool{New: func() any { return new(textRoom) }}

// room returns a builder with room for n more bytes: t's block when it has
// that room, else a new block, or the record's own one when its texts
// alone would fill more than a quarter of a block.
func (t *textRoom) room(n int) *strings.Builder {
	if t.b != nil && t.b.Cap()-t.b.Len() >= n {
		return t.b
	}
	b := new(strings.Builder)
	if n > textBlock/4 {
		b.Grow(n)
		return b
	}
	b.Grow(textBlock)
	t.b = b
	return b
}

// changed copies what a rule stage changes of r — its list of messages
// (their Content, their lists of calls), its tags and its lineage — and
// shares the rest (tools, calls, results), which neither such a stage nor
// the runner changes in place: a deep Clone was most of such a stage's
// work. Like Clone it drops Rendered. The copy's tags are r's with set
// set (see relabelled). list is the copy as a stage's one output.
func changed(r *record.Record, set ...record.Tag) (c *record.Record, list []*record.Record) {
	c, list = relabelled(r, set...)
	c.Messages = slices.Clone(r.Messages)
	return c, list
}

// relabelled is changed without the copy of the messages, for a stage
// that replaces the list of messages when it changes it. The copy and the
// list holding it are one allocation. Its tags are record.WithTags(r.Tags, set):
// a new list when set is not empty, else r's own, which the stage
// replaces (record.WithTags) rather than changes (SetTag). Its lineage
// is r's, clipped: the stage adds its step with a stepper (AddStep would
// copy it).
func relabelled(r *record.Record, set ...record.Tag) (c *record.Record, list []*record.Record) {
	o := &struct {
		rec  record.Record
		list [1]*record.Record
	}{rec: *r}
	c = &o.rec
	c.Rendered = nil
	c.Tags = record.WithTags(r.Tags, set...)
	c.Lineage = slices.Clip(r.Lineage)
	o.list[0] = c
	return c, o.list[:]
}
