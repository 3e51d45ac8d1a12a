package llm

import (
	"context"
	"fmt"
	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/stages/contract"
	"slices"
	"strings"
)

// correctionPrompt follows a rejected answer when Ask re-asks. It states the
// problem and asks for a corrected answer, without restating the task.
const correctionPrompt = "That answer could not be used: %s\nReply again with the complete answer, following the required format exactly and adding nothing else."

// maxEcho bounds the rejected answer a re-ask repeats, in bytes (about a
// thousand tokens).
const maxEcho = 4096

// Ask sends req and parses the answer. When the answer was truncated
// (finish_reason "length") it asks again with the next Attempt number and
// twice the effective token limit (Request.Longer); when parse fails it
// asks again with the rejected answer (its first maxEcho bytes) and a short
// correction appended to the conversation. It tries at most attempts times
// in all (at least once).
//
// parse sees the answer after SplitThinking, which takes a reasoning
// model's inline thinking out of it (into Response.Reasoning); an answer
// that is thinking only fails as a parse error would (ReasonThinkingOnly).
//
// It returns the parsed value and the response it came from. After the
// last failed try it returns an *AnswerError whose reason is
// "llm_truncated", the parse error's own RejectReason() when it has one, or
// "llm_invalid_answer"; the runner rejects the record. Errors of c itself
// pass through unchanged: *AnswerError for a request that failed after
// retries (record rejected), fatal errors (IsFatal) and context errors.
//
// Under the offline provider the answer is deterministic, so a failed parse
// is not retried.
func Ask[T any](ctx context.Context, c Client, req Request, attempts int, parse func(content string) (T, error)) (T, Response, error) {
	return AskResponse(ctx, c, req, attempts, func(r Response) (T, error) { return parse(r.Content) })
}

// AskResponse is Ask with a parse that sees the whole response, for stages
// that read the model's thinking (Response.Reasoning) rather than, or as
// well as, its answer. Truncation, re-asks and errors behave as in Ask; a
// re-ask still appends the answer (Content), never the thinking.
func AskResponse[T any](ctx context.Context, c Client, req Request, attempts int, parse func(Response) (T, error)) (T, Response, error) {
	var zero T
	attempts = max(1, attempts)
	cur := req
	var (
		resp    Response
		reason  string
		last    error
		earlier []string // what the attempts before the last one got wrong
	)
	for i := range attempts {
		if last != nil {
			earlier = append(earlier, fmt.Sprintf("attempt %d: %s", i, clip.Bytes(last.Error(), 200)))
		}
		cur.Attempt = req.Attempt + i
		var err error
		resp, err = c.Complete(ctx, cur)
		if err != nil {
			return zero, resp, err
		}
		if resp.FinishReason == "length" {
			reason = "llm_truncated"
			last = fmt.Errorf("answer cut off at the token limit (%d completion tokens)", resp.Usage.CompletionTokens)
			cur = cur.Longer()
		} else {
			var perr error
			if resp, perr = resp.Answer(); perr == nil {
				var v T
				if v, perr = parse(resp); perr == nil {
					return v, resp, nil
				}
			}
			reason, last = "llm_invalid_answer", perr
			if r, ok := contract.ReasonOf(perr); ok && r != "" {
				reason = r
			}
			if resp.Provider == ProviderOffline {
				return zero, resp, &AnswerError{Reason: reason, Stage: cur.Stage, Slot: cur.Slot, Attempts: i + 1, Err: perr}
			}
			echo, problem := resp.Content, clip.Bytes(perr.Error(), 400)
			if len(echo) > maxEcho {
				// A long answer repeated whole could leave the re-ask no
				// room in the context: the start shows what was wrong.
				echo = clip.Bytes(echo, maxEcho)
				problem += fmt.Sprintf(" (the answer was %d bytes; only its first %d are repeated above)", len(resp.Content), len(echo)-len("…"))
			}
			cur.Messages = append(slices.Clip(cur.Messages),
				Message{Role: "assistant", Content: echo},
				Message{Role: "user", Content: fmt.Sprintf(correctionPrompt, problem)})
		}
	}
	if len(earlier) > 0 {
		// The reject names the last problem, then the earlier ones: a
		// teacher that fixes one thing and breaks another shows both.
		last = fmt.Errorf("%w (earlier: %s)", last, strings.Join(earlier, "; "))
	}
	return zero, resp, &AnswerError{Reason: reason, Stage: cur.Stage, Slot: cur.Slot, Attempts: attempts, Err: last}
}
