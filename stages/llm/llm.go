// Package llm is the teacher-model layer: every LLM-backed stage sends its
// chat completions and embeddings through a Client or Embedder from here.
package llm

import (
	"context"
	"encoding/json"

	"github.com/augmentdata/augment/stages/contract"
)

// A Message is one chat message of a request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// A Request is one chat completion a stage wants answered.
//
// Everything that is serialised is part of the cache key, so two requests
// that would get the same answer from the same model share one cache entry
// whichever endpoint serves them. Offline is not serialised.
type Request struct {
	Stage    string    `json:"stage"`    // stage name and version, e.g. "reason@1"
	Template string    `json:"template"` // hash of the prompt template(s) used
	Model    string    `json:"model"`    // "" means the teacher's configured model
	Messages []Message `json:"messages"`
	// Sampling settings; nil means the teacher's configured value. A
	// temperature of 0 is sent as 0 (go-openai would drop it).
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Seed        *int     `json:"seed,omitempty"`
	// MaxCompletionTokens and ReasoningEffort are sent as
	// max_completion_tokens and reasoning_effort when set (OpenAI's
	// reasoning models); 0 and "" mean the teacher's configured values.
	MaxCompletionTokens int    `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string `json:"reasoning_effort,omitempty"`
	// ExtraBody is a JSON object merged into the request body (server
	// specific parameters); nil means the teacher's extra_body.
	ExtraBody json.RawMessage `json:"extra_body,omitempty"`
	// JSONSchema, when set, asks for a JSON answer matching it (response_format
	// json_schema where the server supports it). Callers validate locally
	// regardless.
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	// Attempt numbers re-asks of the same prompt (0 for the first ask), so a
	// re-ask is a distinct, separately cached request.
	Attempt int `json:"attempt,omitempty"`
	// longer counts Longer calls whose doubling the teacher still has to
	// apply to the token limits it fills in (see Teacher.effective).
	longer int

	// Slot names the logical place of this request in the run, stable across
	// runs ("<record id>/turn3/call0"); not part of the cache key. When a
	// request misses the cache, the layer compares it with the last request
	// seen for the same slot to explain what changed (augment run --explain).
	Slot string `json:"-"`

	// Offline produces the answer when the provider is "offline": a
	// deterministic, rule-based stand-in for the teacher written by the stage
	// that knows the task. Nil means the stage cannot run without a real model.
	Offline func() (string, error) `json:"-"`
}

// maxLonger bounds the doublings of Longer.
const maxLonger = 8

// Longer returns req asking for twice the token limit, for a re-ask after
// an answer cut off at it (finish_reason "length"): the limits req sets
// itself are doubled here, and the teacher doubles the configured limits
// it fills in for req's unset ones; either way the teacher bounds the
// result by what the served context (max_model_len) leaves beside the
// prompt. Only the token limit changes, so the re-ask is a new request
// while the first ask keeps its body and its cache entry.
func (r Request) Longer() Request {
	if r.longer >= maxLonger {
		return r
	}
	r.longer++
	if r.MaxTokens > 0 {
		r.MaxTokens *= 2
	}
	if r.MaxCompletionTokens > 0 {
		r.MaxCompletionTokens *= 2
	}
	return r
}

// A Response is a completed chat request.
type Response struct {
	Content string `json:"content"`
	// Reasoning is the model's thinking when the server returns it apart
	// from the answer (reasoning_content or reasoning: vLLM's reasoning
	// parsers, DeepSeek-R1, Qwen3, gpt-oss). It is never part of Content.
	Reasoning    string `json:"reasoning,omitempty"`
	FinishReason string `json:"finish_reason"` // "stop", "length", …
	Usage        Usage  `json:"usage"`
	Provider     string `json:"provider"` // "offline", "openai", …
	Model        string `json:"model"`    // the model that answered
	Cached       bool   `json:"-"`        // served from the request cache
	// InvalidText, when set, says where the server's answer held text that
	// is not valid Unicode (an invalid UTF-8 byte, a lone surrogate escape):
	// decoding replaced it with U+FFFD, so Content or Reasoning is not what
	// was sent. See TextError.
	InvalidText string `json:"invalid_text,omitempty"`
	// NoUsage is set when the server reported no usage for the answer: its
	// tokens and cost are unknown, and not counted (see Stats.NoUsage).
	NoUsage bool `json:"no_usage,omitempty"`
}

// ReasonInvalidUTF8 is the reject reason of a record whose answers kept
// holding text that is not valid Unicode (see Response.InvalidText).
const ReasonInvalidUTF8 = "llm_invalid_utf8"

// TextError returns a reject error (reason ReasonInvalidUTF8) when the
// answer's text is not what the server sent (InvalidText), else nil. Ask
// treats it as an invalid answer; stages that call Complete themselves
// check it before reading the answer.
func (r Response) TextError() error {
	if r.InvalidText == "" {
		return nil
	}
	return contract.Rejectf(ReasonInvalidUTF8, "the answer is not valid UTF-8 text (%s); write plain Unicode text", r.InvalidText)
}

// Usage counts tokens as reported by the server.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// A Client answers chat requests. Implementations are safe for concurrent use.
//
// An error means the request could not be answered after the client's own
// retries; its class says whether the run should stop (see IsFatal).
type Client interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// An Embedder turns texts into vectors, one per text, in order.
// Implementations are safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ClientFunc adapts a function to a Client; handy for tests.
type ClientFunc func(ctx context.Context, req Request) (Response, error)

// Complete calls f.
func (f ClientFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }
