package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The chat request body is built here, by augment, for both modes: online
// requests send these bytes (wireTransport puts them in place of
// go-openai's own encoding, which cannot carry a temperature of 0 or a
// server's extra parameters) and batch files hold them as each line's
// "body". So the same request asks the same thing whichever way it goes.

// reservedBodyFields are the body fields augment sets; extra_body may not
// set them.
var reservedBodyFields = map[string]bool{
	"model": true, "messages": true, "temperature": true, "top_p": true, "max_tokens": true,
	"max_completion_tokens": true, "seed": true, "response_format": true, "reasoning_effort": true,
	"n": true, "stream": true,
}

// chatWire is the fixed part of a chat completions body, in the order the
// fields are written.
type chatWire struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	Seed                *int            `json:"seed,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
}

// chatBody returns the JSON body of the effective request req, asking for
// structured output the way format says. The extra body's fields follow
// the fixed ones, in key order.
func chatBody(req Request, format string) ([]byte, error) {
	w := chatWire{
		Model: req.Model, Messages: req.Messages, Temperature: req.Temperature, TopP: req.TopP,
		MaxTokens: req.MaxTokens, MaxCompletionTokens: req.MaxCompletionTokens,
		ReasoningEffort: req.ReasoningEffort, Seed: req.Seed,
	}
	if len(req.JSONSchema) > 0 {
		switch format {
		case StructuredJSONSchema:
			// Not strict: OpenAI's strict mode rejects schemas outside its
			// subset, and answers are validated locally anyway.
			var b bytes.Buffer
			b.WriteString(`{"type":"json_schema","json_schema":{"name":"answer","schema":`)
			b.Write(req.JSONSchema)
			b.WriteString(`}}`)
			w.ResponseFormat = b.Bytes()
		case StructuredJSONObject:
			w.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("stage %s: request body: %w", req.Stage, err)
	}
	body := bytes.TrimRight(buf.Bytes(), "\n")
	if len(req.ExtraBody) == 0 {
		return body, nil
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(req.ExtraBody, &extra); err != nil {
		return nil, fmt.Errorf("stage %s: extra_body is not a JSON object: %w", req.Stage, err)
	}
	body = body[:len(body)-1] // drop the closing brace
	for _, k := range sortedKeys(extra) {
		if reservedBodyFields[k] {
			return nil, fmt.Errorf("stage %s: extra_body sets %q, which augment sets itself", req.Stage, k)
		}
		kb, _ := json.Marshal(k)
		body = append(append(append(append(body, ','), kb...), ':'), extra[k]...)
	}
	return append(body, '}'), nil
}

// chatCompletion is the part of a chat completions answer augment reads.
type chatCompletion struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			Reasoning        string  `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// decodeChat reads a chat completions answer body into a Response. model
// is reported when the answer names none. The thinking of a reasoning
// model comes from reasoning_content, or reasoning (newer vLLM releases),
// and is kept apart from the answer.
func decodeChat(body []byte, model string) (Response, error) {
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return Response{}, fmt.Errorf("answer is not a chat completion: %w", err)
	}
	if len(c.Choices) == 0 {
		return Response{}, errNoChoices
	}
	ch := c.Choices[0]
	if c.Model != "" {
		model = c.Model
	}
	r := Response{
		Reasoning:    ch.Message.ReasoningContent,
		FinishReason: ch.FinishReason,
		Usage:        Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens},
		Provider:     ProviderOpenAI,
		Model:        model,
	}
	if ch.Message.Content != nil {
		r.Content = *ch.Message.Content
	}
	if r.Reasoning == "" {
		r.Reasoning = ch.Message.Reasoning
	}
	return r, nil
}

var errNoChoices = errors.New("answer has no choices")
