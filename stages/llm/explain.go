package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// explainMiss logs and counts why req (not in the cache) differs from the
// last request answered for its slot.
func (s *StageClient) explainMiss(req Request, canon []byte) {
	cause, detail := "no_slot", "the request has no slot, so there is nothing to compare with"
	if req.Slot != "" {
		prev, ok, err := s.t.cache.lastForSlot(stageName(req.Stage), slotKey(req))
		switch {
		case err != nil:
			cause, detail = "unknown", err.Error()
		case !ok:
			cause, detail = "new_slot", "no earlier answer for this slot"
		default:
			cause, detail = ExplainChange(prev, canon)
		}
	}
	s.st.addMiss(cause)
	s.t.log.Info("llm cache miss", "stage", s.name, "slot", req.Slot, "attempt", req.Attempt, "cause", cause, "change", detail)
}

// ExplainChange compares two canonical requests as stored in the cache
// (CacheEntry.Request) and says what changed: cause is the first changed
// part as a stable code ("stage_version", "template", "model",
// "messages", "temperature", "top_p", "max_tokens", "seed", "schema",
// "response_format", "attempt"; "none" if they are equal) and detail
// describes every change for people.
func ExplainChange(prev, cur []byte) (cause, detail string) {
	var a, b canonicalRequest
	if err := json.Unmarshal(prev, &a); err != nil {
		return "unknown", "earlier request unreadable: " + err.Error()
	}
	if err := json.Unmarshal(cur, &b); err != nil {
		return "unknown", "request unreadable: " + err.Error()
	}
	var causes, details []string
	note := func(c, d string) {
		causes = append(causes, c)
		details = append(details, d)
	}
	if a.Stage != b.Stage {
		note("stage_version", fmt.Sprintf("stage version %s → %s", a.Stage, b.Stage))
	}
	if a.Template != b.Template {
		note("template", fmt.Sprintf("prompt template hash %s → %s", orUnset(a.Template), orUnset(b.Template)))
	}
	if a.Model != b.Model {
		note("model", fmt.Sprintf("model %s → %s", orUnset(a.Model), orUnset(b.Model)))
	}
	if d := diffMessages(a.Messages, b.Messages); d != "" {
		note("messages", d)
	}
	if fa, fb := fmtFloat(a.Temperature), fmtFloat(b.Temperature); fa != fb {
		note("temperature", fmt.Sprintf("temperature %s → %s", fa, fb))
	}
	if fa, fb := fmtFloat(a.TopP), fmtFloat(b.TopP); fa != fb {
		note("top_p", fmt.Sprintf("top_p %s → %s", fa, fb))
	}
	if a.MaxTokens != b.MaxTokens {
		note("max_tokens", fmt.Sprintf("max_tokens %s → %s", fmtInt(a.MaxTokens), fmtInt(b.MaxTokens)))
	}
	if fa, fb := fmtIntPtr(a.Seed), fmtIntPtr(b.Seed); fa != fb {
		note("seed", fmt.Sprintf("seed %s → %s", fa, fb))
	}
	if !bytes.Equal(a.JSONSchema, b.JSONSchema) {
		note("schema", fmt.Sprintf("JSON schema changed (%d → %d bytes)", len(a.JSONSchema), len(b.JSONSchema)))
	}
	if a.Format != b.Format {
		note("response_format", fmt.Sprintf("structured_output %s → %s", orUnset(a.Format), orUnset(b.Format)))
	}
	if a.Attempt != b.Attempt {
		note("attempt", fmt.Sprintf("attempt %d → %d", a.Attempt, b.Attempt))
	}
	if len(causes) == 0 {
		return "none", "identical to the last answered request for this slot (its entry may have been lost in a crash)"
	}
	return causes[0], strings.Join(details, "; ")
}

// diffMessages describes the first changed message and how many changed.
func diffMessages(a, b []Message) string {
	var parts []string
	if len(a) != len(b) {
		parts = append(parts, fmt.Sprintf("%d → %d messages", len(a), len(b)))
	}
	changed, first := 0, ""
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			continue
		}
		changed++
		if first != "" {
			continue
		}
		if a[i].Role != b[i].Role {
			first = fmt.Sprintf("message %d role %s → %s", i, a[i].Role, b[i].Role)
		} else {
			first = fmt.Sprintf("message %d (%s) %s", i, a[i].Role, diffText(a[i].Content, b[i].Content))
		}
	}
	if first != "" {
		parts = append(parts, first)
	}
	if changed > 1 {
		parts = append(parts, fmt.Sprintf("%d messages differ in all", changed))
	}
	return strings.Join(parts, ", ")
}

// diffText shows where two texts first differ, with a little context.
func diffText(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	// Back to the start of the character that byte i continues in either
	// text (a[:i] == b[:i]; i may be the end of one of them).
	for i > 0 && (continuesRune(a, i) || continuesRune(b, i)) {
		i--
	}
	const ctx = 24
	from := max(0, i-ctx)
	for from > 0 && !utf8.RuneStart(a[from]) {
		from--
	}
	clip := func(s string) string {
		end := min(len(s), i+ctx)
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out := s[from:end]
		if from > 0 {
			out = "…" + out
		}
		if end < len(s) {
			out += "…"
		}
		return strconv.Quote(out)
	}
	return fmt.Sprintf("changed at byte %d: %s → %s", i, clip(a), clip(b))
}

// continuesRune reports whether byte i of s continues a valid character
// that starts before it (false past the end of s).
func continuesRune(s string, i int) bool {
	if i >= len(s) || utf8.RuneStart(s[i]) {
		return false
	}
	for j := i - 1; j >= 0 && j >= i-utf8.UTFMax+1; j-- {
		if utf8.RuneStart(s[j]) {
			_, n := utf8.DecodeRuneInString(s[j:])
			return j+n > i
		}
	}
	return false
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

func fmtFloat(f *float64) string {
	if f == nil {
		return "(server default)"
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

func fmtInt(n int) string {
	if n == 0 {
		return "(server default)"
	}
	return strconv.Itoa(n)
}

func fmtIntPtr(n *int) string {
	if n == nil {
		return "(unset)"
	}
	return strconv.Itoa(*n)
}
