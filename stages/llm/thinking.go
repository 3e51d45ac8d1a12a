package llm

import (
	"strings"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/contract"
)

// ReasonThinkingOnly rejects an answer that is a reasoning model's thinking
// and nothing after it: an unclosed leading <think> block, or an empty
// answer with thinking in reasoning_content (a server that stopped or cut
// the model before it closed its thinking). Stages re-ask it like any
// answer that does not parse.
const ReasonThinkingOnly = "llm_thinking_only"

// Thinking markup of reasoning models that write their thinking into the
// answer.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// SplitThinking is the one rule for a reasoning model's thinking written
// into its answer, which a server without a reasoning parser (vLLM,
// SGLang) leaves there. It returns r with the answer (Content) trimmed and
// the thinking that led it taken out:
//
//   - a leading <think>…</think> block (Qwen3 and most reasoning models);
//   - the text up to a </think> that starts a line (or the answer) with no
//     <think> before it: DeepSeek-R1 and QwQ, whose chat template pre-fills
//     "<think>\n", so the answer holds "thinking\n</think>\n\nanswer".
//
// The thinking taken out becomes Reasoning, as a reasoning parser would
// have returned it (after any reasoning the server did return, separated
// by a blank line). Thinking markup anywhere else (a <think> further on,
// a </think> inside a line, as JSON strings hold it) is the answer's text
// and stays. An answer that is thinking only returns r split as far as it
// goes and an error with reason ReasonThinkingOnly: a <think> that is never
// closed, or an empty answer after thinking.
//
// Every answer a stage reads goes through this rule: Ask and AskResponse
// apply it before the stage's parse; stages that call Client.Complete
// directly apply it themselves. Cached answers are stored as the server
// sent them, so the rule applies to them as well.
func SplitThinking(r Response) (Response, error) {
	s := strings.TrimSpace(r.Content)
	var thinking string
	unclosed := false
	if rest, ok := strings.CutPrefix(s, thinkOpen); ok {
		if before, after, closed := strings.Cut(rest, thinkClose); closed {
			thinking, s = before, after
		} else {
			thinking, s, unclosed = rest, "", true
		}
	} else if i := lineStartClose(s); i >= 0 && !strings.Contains(s[:i], thinkOpen) {
		thinking, s = s[:i], s[i+len(thinkClose):]
	}
	r.Content = strings.TrimSpace(s)
	if thinking = strings.TrimSpace(thinking); thinking != "" {
		if r.Reasoning == "" {
			r.Reasoning = thinking
		} else {
			r.Reasoning += "\n\n" + thinking
		}
	}
	switch {
	case unclosed:
		return r, contract.Rejectf(ReasonThinkingOnly, "the answer is thinking only: a <think> block of %d characters that is never closed (no %s), and no answer after it", utf8.RuneCountInString(thinking), thinkClose)
	case r.Content == "" && strings.TrimSpace(r.Reasoning) != "":
		return r, contract.Rejectf(ReasonThinkingOnly, "the teacher sent its thinking (%d characters) but no answer after it", utf8.RuneCountInString(strings.TrimSpace(r.Reasoning)))
	}
	return r, nil
}

// Answer is r as a stage reads it: its text checked (TextError, an answer
// that decoding filled with U+FFFD) and a reasoning model's inline thinking
// taken out (SplitThinking). Ask applies it before the stage's parse;
// stages that call Client.Complete themselves apply it too. Its error is a
// contract.Reject naming the reason.
func (r Response) Answer() (Response, error) {
	if err := r.TextError(); err != nil {
		return r, err
	}
	return SplitThinking(r)
}

// lineStartClose returns the index of the first </think> in s that starts
// s or a line of it (after blanks), or -1.
func lineStartClose(s string) int {
	for i := 0; ; {
		j := strings.Index(s[i:], thinkClose)
		if j < 0 {
			return -1
		}
		at := i + j
		if strings.TrimLeft(s[strings.LastIndexByte(s[:at], '\n')+1:at], " \t") == "" {
			return at
		}
		i = at + len(thinkClose)
	}
}

// HasThinkingMarkup reports whether s holds <think> or </think>: in a text
// answer after SplitThinking, thinking the rule could not tell from the
// answer (a stage that stores the text rejects it).
func HasThinkingMarkup(s string) bool {
	return strings.Contains(s, thinkOpen) || strings.Contains(s, thinkClose)
}

// StripFence returns the body of a ``` fenced block if s is one, else s
// trimmed: a JSON answer or a text answer (a reply, a reasoning) that a
// chat model wrapped whole in a fence. A language tag on the opening line
// (```json, ```python) is dropped; an opening line with blanks in it is
// the body's first line, not a tag. A fence that is not closed is no
// fence. Every stage reads a fenced answer by this one rule.
func StripFence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	s = strings.TrimSuffix(s[3:], "```")
	if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.ContainsAny(strings.TrimSpace(s[:nl]), " \t") {
		s = s[nl+1:]
	}
	return strings.TrimSpace(s)
}
