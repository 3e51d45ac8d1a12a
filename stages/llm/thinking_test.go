package llm

import (
	"context"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
)

func TestSplitThinking(t *testing.T) {
	const answer = "I'm sorry, but the tools I have cannot do this."
	for _, tt := range []struct {
		name                string
		content, reasoning  string
		answer, wantThought string
		reject              bool
	}{
		{"no thinking", "  " + answer + "\n", "", answer, "", false},
		{"closed block (Qwen3)", "<think>\nOkay, let me see.\n</think>\n\n" + answer, "", answer, "Okay, let me see.", false},
		{"closed block, no blank line", "<think>hmm</think>" + answer, "", answer, "hmm", false},
		{"empty block (enable_thinking off)", "<think>\n\n</think>\n\n" + answer, "", answer, "", false},
		{"R1 form: template pre-filled <think>", "Okay, let me see.\n</think>\n\n" + answer, "", answer, "Okay, let me see.", false},
		{"R1 form, indented close", "Okay.\n  </think>\n" + answer, "", answer, "Okay.", false},
		{"R1 form, answer starts with the close", "</think>\n\n" + answer, "", answer, "", false},
		{"after the server's reasoning", "<think>more</think>" + answer, "first", answer, "first\n\nmore", false},
		{"server's reasoning kept", answer, "parsed thinking", answer, "parsed thinking", false},
		{"unclosed block", "<think>\nOkay, let me see. " + answer, "", "", "Okay, let me see. " + answer, true},
		{"closed block, no answer", "<think>all thinking</think>\n\n", "", "", "all thinking", true},
		{"content null, all in reasoning_content", "", "Okay.\n" + answer, "", "Okay.\n" + answer, true},
		{"empty, no thinking: the stage decides", "  ", "", "", "", false},
		// Thinking-like text inside the answer stays.
		{"markup later in the text", answer + " Models write <think>…</think> first.", "", answer + " Models write <think>…</think> first.", "", false},
		{"close inside a line", "Write </think> to end thinking.", "", "Write </think> to end thinking.", "", false},
		{"close in a JSON string", `{"content":"step\n</think>\n\nanswer"}`, "", `{"content":"step\n</think>\n\nanswer"}`, "", false},
		{"open tag before the close", "Tags: <think>\nand\n</think>\nend", "", "Tags: <think>\nand\n</think>\nend", "", false},
		{"second block stays", "<think>a</think> b\n</think> c", "", "b\n</think> c", "a", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := Response{Content: tt.content, Reasoning: tt.reasoning, FinishReason: "stop", Model: "m"}
			got, err := SplitThinking(in)
			if got.Content != tt.answer || got.Reasoning != tt.wantThought {
				t.Errorf("answer %q, thinking %q; want %q, %q", got.Content, got.Reasoning, tt.answer, tt.wantThought)
			}
			if got.FinishReason != "stop" || got.Model != "m" {
				t.Errorf("other fields changed: %+v", got)
			}
			reason, _ := contract.ReasonOf(err)
			if tt.reject != (reason == ReasonThinkingOnly) || (!tt.reject && err != nil) {
				t.Errorf("error %v, want a %s reject: %v", err, ReasonThinkingOnly, tt.reject)
			}
		})
	}
}

// FuzzSplitThinking: the answer is a trimmed part of the content; thinking
// is taken out only from the answer's start, so what is left is the
// content's tail; an error comes only with an empty answer.
func FuzzSplitThinking(f *testing.F) {
	for _, s := range []string{"x", "<think>a</think>b", "<think>", "a\n</think>b", " <think> </think> ", "a</think>b"} {
		f.Add(s, "")
	}
	f.Add("", "thinking")
	f.Fuzz(func(t *testing.T, content, reasoning string) {
		got, err := SplitThinking(Response{Content: content, Reasoning: reasoning})
		if got.Content != strings.TrimSpace(got.Content) || !strings.HasSuffix(strings.TrimSpace(content), got.Content) {
			t.Fatalf("%q: answer %q is not a trimmed tail of it", content, got.Content)
		}
		if !strings.HasPrefix(got.Reasoning, reasoning) {
			t.Fatalf("%q: the server's reasoning %q became %q", content, reasoning, got.Reasoning)
		}
		if err != nil && got.Content != "" {
			t.Fatalf("%q: error %v with answer %q", content, err, got.Content)
		}
		if strings.HasPrefix(got.Content, thinkOpen) {
			t.Fatalf("%q: answer %q still starts with thinking", content, got.Content)
		}
	})
}

// Ask applies the rule before the stage's parse: the parse never sees the
// thinking, a thinking-only answer is re-asked under its own reason, and
// the re-ask sends the answer back without the thinking.
func TestAskSplitsThinking(t *testing.T) {
	answers := []string{"<think>\nstill thinking", "reasoning\n</think>\n\n42"}
	var reqs []Request
	c := ClientFunc(func(_ context.Context, req Request) (Response, error) {
		reqs = append(reqs, req)
		return Response{Content: answers[min(len(reqs)-1, len(answers)-1)], FinishReason: "stop"}, nil
	})
	var seen []string
	parse := func(s string) (string, error) {
		seen = append(seen, s)
		if s != "42" {
			return "", contract.Rejectf("bad", "want 42")
		}
		return s, nil
	}
	v, resp, err := Ask(context.Background(), c, Request{}, 3, parse)
	if err != nil || v != "42" || resp.Reasoning != "reasoning" {
		t.Fatalf("Ask = %q, %+v, %v", v, resp, err)
	}
	if len(seen) != 1 || len(reqs) != 2 {
		t.Errorf("parse saw %q in %d requests", seen, len(reqs))
	}
	if m := reqs[1].Messages; len(m) != 2 || m[0].Content != "" || !strings.Contains(m[1].Content, "thinking only") {
		t.Errorf("re-ask messages %+v", m)
	}

	answers = []string{"<think>never closed"}
	reqs = nil
	_, _, err = Ask(context.Background(), c, Request{}, 2, parse)
	if r, _ := contract.ReasonOf(err); r != ReasonThinkingOnly || len(reqs) != 2 {
		t.Errorf("thinking only: %v after %d requests, want %s after 2", err, len(reqs), ReasonThinkingOnly)
	}
}

func TestStripFence(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"  plain answer ", "plain answer"},
		{"```json\n{\"a\": 1}\n```", `{"a": 1}`},
		{"```\nI'm sorry, I can't do that.\n```", "I'm sorry, I can't do that."},
		{"```text\r\nI'm sorry.\r\n```", "I'm sorry."},
		{"```I'm sorry.```", "I'm sorry."},
		// An opening line with blanks is text, not a language tag.
		{"```I'm sorry, I can't.\nTry a map app.```", "I'm sorry, I can't.\nTry a map app."},
		{"Use ```code``` here", "Use ```code``` here"},
		{"```json\n{}", "```json\n{}"},
		{"``````", ""},
	} {
		if got := StripFence(tt.in); got != tt.want {
			t.Errorf("StripFence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzStripFence: the body is a trimmed part of the input, and a text
// without a fence is only trimmed.
func FuzzStripFence(f *testing.F) {
	for _, s := range []string{"x", "```json\n{}\n```", "```a b\nc```", "``````", "```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := StripFence(s)
		if got != strings.TrimSpace(got) || !strings.Contains(s, got) {
			t.Fatalf("%q: body %q is not a trimmed part of it", s, got)
		}
		if !strings.HasPrefix(strings.TrimSpace(s), "```") && got != strings.TrimSpace(s) {
			t.Fatalf("%q: unfenced text changed to %q", s, got)
		}
	})
}
