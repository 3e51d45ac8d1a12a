package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

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
