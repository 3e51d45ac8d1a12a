package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A Schema is a compiled JSON Schema for structured answers: its JSON goes
// into Request.JSONSchema (sent as response_format where the teacher is
// configured for it) and ParseJSON validates answers against it locally,
// whatever the server did.
type Schema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
}

// CompileSchema compiles a JSON Schema document (draft 2020-12 unless it
// names another with $schema). Remote $refs are not fetched.
func CompileSchema(doc []byte) (*Schema, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(compact.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	const loc = "mem:///answer.json"
	if err := c.AddResource(loc, v); err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	return &Schema{raw: compact.Bytes(), compiled: s}, nil
}

// JSON is the compacted schema document, for Request.JSONSchema.
func (s *Schema) JSON() json.RawMessage { return s.raw }

// ParseJSON returns a parser for Ask that takes the JSON value out of an
// answer, checks it against s (nil skips the check) and decodes it into T.
// It accepts a bare JSON value, one inside a ``` fence, and ignores a
// leading <think>…</think> block and text around the value. Its errors are
// *contract.Reject with reason "llm_invalid_json" (no JSON value found, or
// it does not fit the Go type) or "llm_schema_mismatch" (valid JSON that
// breaks the schema), wrapping the cause.
func ParseJSON[T any](s *Schema) func(content string) (T, error) {
	return func(content string) (T, error) {
		var out T
		raw, err := ExtractJSON(content)
		if err != nil {
			return out, &contract.Reject{Reason: "llm_invalid_json", Err: err}
		}
		if s != nil {
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				return out, &contract.Reject{Reason: "llm_invalid_json", Err: err}
			}
			if err := s.compiled.Validate(inst); err != nil {
				return out, &contract.Reject{Reason: "llm_schema_mismatch", Err: err}
			}
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return out, &contract.Reject{Reason: "llm_invalid_json", Err: err}
		}
		return out, nil
	}
}

// ExtractJSON returns the first complete JSON object or array in an
// answer, skipping a leading <think>…</think> block, code fences and
// surrounding prose.
func ExtractJSON(content string) ([]byte, error) {
	s := strings.TrimSpace(content)
	if strings.HasPrefix(s, "<think>") {
		if i := strings.Index(s, "</think>"); i >= 0 {
			s = strings.TrimSpace(s[i+len("</think>"):])
		}
	}
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s[3:], "json")
		if i := strings.LastIndex(s, "```"); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
	}
	var firstErr error
	// Try the first few candidate openings only: answers are short, and a
	// pathological one must not cost quadratic time.
	for off, tries := 0, 0; off < len(s) && tries < 32; tries++ {
		i := strings.IndexAny(s[off:], "{[")
		if i < 0 {
			break
		}
		off += i
		dec := json.NewDecoder(strings.NewReader(s[off:]))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == nil {
			return raw, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		off++
	}
	if firstErr != nil {
		return nil, fmt.Errorf("no complete JSON value in the answer: %w", firstErr)
	}
	return nil, errors.New("no JSON object or array in the answer")
}
