package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/augmentdata/augment/clip"
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
// The texts stay raw until checked (see badText). Object and Error are
// read from a body that carries an error instead of choices: {"error":
// {...}} (OpenAI, proxies) or {"object": "error", "message": ...} (vLLM).
type chatCompletion struct {
	Model   string          `json:"model"`
	Object  string          `json:"object"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Message struct {
			Content          json.RawMessage `json:"content"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// decodeChat reads a chat completions answer body into a Response. model
// is reported when the answer names none. The thinking of a reasoning
// model comes from reasoning_content, or reasoning (newer vLLM releases),
// and is kept apart from the answer.
//
// A body with an error in place of choices is an error quoting the
// server's message. Text that JSON decoding would not give back as the
// server sent it (invalid UTF-8 bytes, a lone surrogate escape) is
// decoded all the same, with Response.InvalidText saying where: the
// answer is the teacher's and was paid for, and Ask and the stages treat
// it as an invalid answer (see Response.TextError). An answer without
// usage has Response.NoUsage set.
func decodeChat(body []byte, model string) (Response, error) {
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		if b := bytes.TrimLeft(body, " \t\r\n"); bytes.HasPrefix(b, []byte("data:")) {
			return Response{}, errStreamed
		}
		return Response{}, fmt.Errorf("answer is not a chat completion: %w", err)
	}
	if len(c.Choices) == 0 {
		switch {
		case len(c.Error) > 0 && string(c.Error) != "null":
			return Response{}, errorInPlaceOfChoices(c.Error)
		case c.Object == "error":
			return Response{}, errorInPlaceOfChoices(body)
		}
		return Response{}, errNoChoices
	}
	ch := c.Choices[0]
	if c.Model != "" {
		model = c.Model
	}
	r := Response{
		FinishReason: ch.FinishReason,
		Provider:     ProviderOpenAI,
		Model:        model,
	}
	if c.Usage != nil {
		r.Usage = Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
	} else {
		r.NoUsage = true
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{
		{"content", ch.Message.Content, &r.Content},
		{"reasoning_content", ch.Message.ReasoningContent, &r.Reasoning},
		{"reasoning", ch.Message.Reasoning, nil},
	} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(f.raw, &s); err != nil {
			return Response{}, fmt.Errorf("answer is not a chat completion: message.%s: %w", f.name, err)
		}
		if f.dst == nil { // reasoning: read when reasoning_content is empty
			if r.Reasoning != "" {
				continue
			}
			f.dst = &r.Reasoning
		}
		*f.dst = s
		if p := badText(f.raw); p != "" && r.InvalidText == "" {
			r.InvalidText = "message." + f.name + ": " + p
		}
	}
	return r, nil
}

var (
	errNoChoices = errors.New("answer has no choices")
	errStreamed  = errors.New("the server streamed its answer (Server-Sent Events, \"data: …\" lines); augment does not ask for streaming: check that the endpoint or a proxy in front of it does not force stream mode")
)

// A bodyError is a 200 answer that carries an error object instead of
// choices, quoting the server's message. Its class is what the object's
// code says (a status such as vLLM's 400, or a kind such as
// "invalid_request_error": the same reading as a batch's error lines), else
// invalid_response: a proxy's 400 in a 200 is not asked again.
type bodyError struct {
	class string
	msg   string
}

func (e *bodyError) Error() string { return e.msg }

// errorInPlaceOfChoices is the bodyError of raw, the answer's error object.
func errorInPlaceOfChoices(raw json.RawMessage) error {
	code, _, msg := errorCodeMessage(raw)
	if msg == "" {
		msg = clip.Bytes(string(raw), 400)
	}
	status, _ := strconv.Atoi(code)
	class := batchFailureClass(status, code)
	if class == classBatchError {
		class = classInvalid
	}
	if code != "" {
		return &bodyError{class, fmt.Sprintf("the server answered 200 with an error instead of choices (code %s): %q", code, msg)}
	}
	return &bodyError{class, fmt.Sprintf("the server answered 200 with an error instead of choices: %q", msg)}
}

// badText says why the JSON string raw (quotes included) does not decode
// to the text the server meant: an invalid UTF-8 byte, or a \u escape of
// a lone UTF-16 surrogate; encoding/json turns both into U+FFFD without a
// word. It returns "" for a string that decodes faithfully.
func badText(raw []byte) string {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' {
				v, ok := hex4(raw, i+2)
				if !ok {
					i += 2
					continue
				}
				switch {
				case utf16.IsSurrogate(rune(v)) && v < 0xdc00: // high: a low one must follow
					if w, ok := hex4(raw, i+8); ok && raw[i+6] == '\\' && raw[i+7] == 'u' && w >= 0xdc00 && w <= 0xdfff {
						i += 12
						continue
					}
					return fmt.Sprintf("a lone surrogate escape \\u%04x at byte %d", v, i)
				case utf16.IsSurrogate(rune(v)):
					return fmt.Sprintf("a lone surrogate escape \\u%04x at byte %d", v, i)
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return fmt.Sprintf("an invalid UTF-8 byte 0x%02x at byte %d", c, i)
			}
			i += size
		}
	}
	return ""
}

// hex4 reads the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (uint16, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return uint16(v), err == nil
}
