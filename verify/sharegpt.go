package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/augmentdata/augment/clip"
)

// ShareGPT is one LLaMA-Factory training sample in the "sharegpt" format
// with tool use (dataset_info.json columns {"messages": "conversations",
// "system": "system", "tools": "tools"}).
type ShareGPT struct {
	Conversations []Turn `json:"conversations" parquet:"conversations,list"`
	System        string `json:"system,omitempty" parquet:"system"`
	Tools         string `json:"tools" parquet:"tools"` // JSON text of a list of tools; "[]" for none
	// Template is the LLaMA-Factory template the sample is for; its
	// function formatter and tool format are simulated. Nil means the
	// "default" template.
	Template *LFTemplate `json:"-" parquet:"-"`
}

// A Turn is one message of a ShareGPT sample. From is "system" (first turn
// only), "human", "gpt", "function_call" or "observation".
type Turn struct {
	From  string `json:"from" parquet:"from"`
	Value string `json:"value" parquet:"value"`
}

// Reject reasons of samples that break LLaMA-Factory's sharegpt rules; they
// are the Kind of the Problems of CheckShareGPT.
const (
	ReasonLFEmpty           = "lf_empty"             // no turns besides the optional system turn
	ReasonLFMissingField    = "lf_missing_field"     // a turn without "from"
	ReasonLFRoleOrder       = "lf_role_order"        // a turn at a position its role may not take
	ReasonLFOddCount        = "lf_odd_count"         // an odd number of turns after the system turn
	ReasonLFBadFunctionCall = "lf_bad_function_call" // a function_call value the template's function formatter cannot read
	ReasonLFNoParallel      = "lf_template_no_parallel"
	ReasonLFBadTools        = "lf_bad_tools" // tools the template's tool formatter cannot read
	// ReasonLFThoughtRemoved: with enable_thinking false, LLaMA-Factory's
	// remove_thought would change a gpt or function_call turn (a span in
	// the template's thought words, a leading newline).
	ReasonLFThoughtRemoved = "lf_thought_removed"
	// ReasonEmptyTurn is augment's own rule, not LLaMA-Factory's (which
	// trains such a turn as it is): a human, gpt or function_call turn with
	// a blank value teaches an empty question or reply.
	ReasonEmptyTurn = "empty_turn"
)

// CheckShareGPT reports every way s breaks the rules LLaMA-Factory applies
// to sharegpt samples (SharegptDatasetConverter, then the template's
// function and tool formatters, FORMATS.md §4 and LFTemplate).
// LLaMA-Factory silently drops samples that break the role or count rules
// and crashes on the rest, so the export rejects a sample with any problem.
// The rules (all LLaMA-Factory's but empty_turn, which is augment's):
//   - an optional first turn "system"; then at least one turn (lf_empty);
//   - counting from 0 after it, even positions are human or observation,
//     odd positions gpt or function_call (lf_role_order), and the number of
//     turns is even (lf_odd_count);
//   - every turn has a role (lf_missing_field), and a non-blank value
//     except observations, which may be empty (empty_turn);
//   - a function_call value reads as the template's function formatter
//     reads it (LFTemplate.ReadFunction: thought words and tool-call words
//     as the template has them, then JSON): an object with "name" (a
//     non-empty string) and "arguments" (an object), or a non-empty list of
//     them (lf_bad_function_call); a list of several only where the
//     template's tool format takes parallel calls (lf_template_no_parallel);
//   - tools is JSON text of a list of objects, each bare {"name", …} or
//     wrapped {"type": "function", "function": {"name", …}}, with a
//     non-empty name and, when present, "parameters" an object whose
//     "properties" is an object, and what the template's tool format reads
//     (LFTemplate.CheckTools) (lf_bad_tools).
//
// Paths are "conversations[i]" (i counts the system turn) or "tools".
// None means LLaMA-Factory will train on the sample as it is.
func CheckShareGPT(s *ShareGPT) []Problem {
	if s == nil {
		return []Problem{{Check: "sharegpt", Kind: ReasonLFEmpty, Path: "conversations", Msg: "no sample"}}
	}
	tpl := s.Template
	if tpl == nil {
		tpl, _ = LookupLFTemplate("default")
	}
	out := CheckTurns(s.Conversations, tpl)
	if err := tpl.CheckTools(s.Tools); err != nil {
		out = append(out, Problem{Check: "sharegpt", Kind: ReasonLFBadTools, Path: "tools", Msg: err.Error()})
	}
	return out
}

// CheckTurns applies CheckShareGPT's rules for the conversation alone, for
// template tpl (nil: "default"); a caller that checks the tools itself uses
// it to avoid parsing them again.
func CheckTurns(conversations []Turn, tpl *LFTemplate) []Problem {
	return checkTurns(conversations, tpl, true)
}

// CheckTurnOrder is CheckTurns without reading the function_call values
// back: for a caller that wrote them and has read each one with
// tpl.ReadFunction already (the export), so each is read once.
func CheckTurnOrder(conversations []Turn, tpl *LFTemplate) []Problem {
	return checkTurns(conversations, tpl, false)
}

func checkTurns(conversations []Turn, tpl *LFTemplate, readCalls bool) []Problem {
	if tpl == nil {
		tpl, _ = LookupLFTemplate("default")
	}
	var out []Problem
	add := func(kind, path, format string, args ...any) {
		out = append(out, Problem{Check: "sharegpt", Kind: kind, Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	off := 0
	if len(conversations) > 0 && conversations[0].From == "system" {
		off = 1
	}
	turns := conversations[off:]
	if len(turns) == 0 {
		add(ReasonLFEmpty, "conversations", "the sample has no turns besides the system prompt")
	}
	for k := range turns {
		t := &turns[k]
		i := k + off
		if t.From == "" {
			add(ReasonLFMissingField, indexPath("conversations", i), `turn %d has no "from"`, i)
			continue
		}
		var inOrder bool
		if k%2 == 0 {
			inOrder = t.From == "human" || t.From == "observation"
		} else {
			inOrder = t.From == "gpt" || t.From == "function_call"
		}
		if !inOrder {
			want := [2]string{"human", "observation"}
			if k%2 == 1 {
				want = [2]string{"gpt", "function_call"}
			}
			add(ReasonLFRoleOrder, indexPath("conversations", i), "turn %d is %q where LLaMA-Factory expects %s or %s", i, t.From, want[0], want[1])
		}
		if t.From != "observation" && blank(t.Value) {
			add(ReasonEmptyTurn, indexPath("conversations", i), "turn %d (%s) has an empty value (LLaMA-Factory would train on it as it is; augment does not write empty turns)", i, t.From)
			continue
		}
		if t.From == "function_call" && readCalls {
			if _, err := tpl.ReadFunction(t.Value); err != nil {
				kind := ReasonLFBadFunctionCall
				if _, ok := err.(errNoParallel); ok {
					kind = ReasonLFNoParallel
				}
				add(kind, indexPath("conversations", i), "turn %d: %v", i, err)
			}
		}
	}
	if len(turns)%2 == 1 {
		add(ReasonLFOddCount, "conversations", "%d turns after the system prompt; LLaMA-Factory needs an even number (the sample must end on gpt or function_call)", len(turns))
	}
	return out
}

// CheckThinkingOff reports the gpt and function_call turns of
// conversations that a training run with enable_thinking: false would not
// train as written: LLaMA-Factory's reasoning templates then pass every
// such turn through remove_thought, which deletes each span from the
// template's opening to its closing thought words and then the turn's
// leading newlines. The export writes enable_thinking: false for a
// reasoning template without thoughts, so it rejects such samples.
func (t *LFTemplate) CheckThinkingOff(conversations []Turn) []Problem {
	var out []Problem
	off := 0
	if len(conversations) > 0 && conversations[0].From == "system" {
		off = 1
	}
	for k := 1; k+off < len(conversations); k += 2 {
		v := conversations[k+off].Value
		what := "a leading newline"
		if match, _, ok := firstBlock(v, t.ThoughtWords); ok {
			what = fmt.Sprintf("the thought-words span %q", clip.Runes(match, 60))
		} else if !strings.HasPrefix(v, "\n") {
			continue
		}
		out = append(out, Problem{Check: "sharegpt", Kind: ReasonLFThoughtRemoved, Path: indexPath("conversations", k+off),
			Msg: fmt.Sprintf("turn %d (%s): template %s trains with enable_thinking: false, which removes %s from it (LLaMA-Factory's remove_thought), so it would not train as written",
				k+off, conversations[k+off].From, t.Name, what)})
	}
	return out
}

// blank reports whether s is empty or all white space, as
// strings.TrimSpace(s) == "" does, reading s only up to its first other
// character (TrimSpace also read its end, from memory no other check of the
// export's touches then).
func blank(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c != ' ' && (c < '\t' || c > '\r') {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			return false
		}
		i += n
	}
	return true
}

// checkTools returns what is wrong with a tools value, or "".
func checkTools(tools string) string {
	if strings.TrimSpace(tools) == "" {
		return `tools is empty; write "[]" for a sample without tools`
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(tools), &list); err != nil || !bytes.HasPrefix(bytes.TrimSpace([]byte(tools)), []byte("[")) {
		return "tools is not JSON text of a list"
	}
	// Typed decoding with raw nested values: the export checks every
	// sample, and building maps of whole schemas dominated its profile.
	type shape struct {
		Type       string          `json:"type"`
		Function   json.RawMessage `json:"function"`
		Name       json.RawMessage `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	for j, raw := range list {
		var t shape
		if rawKind(raw) != "object" || json.Unmarshal(raw, &t) != nil {
			return fmt.Sprintf("tool %d is not a JSON object", j)
		}
		if t.Type == "function" {
			if rawKind(t.Function) == "object" {
				var f shape
				if json.Unmarshal(t.Function, &f) != nil {
					return fmt.Sprintf(`tool %d has a broken "function" object`, j)
				}
				t = f
			} else if len(t.Name) == 0 {
				return fmt.Sprintf(`tool %d has "type": "function" but no "function" object`, j)
			}
		}
		var name string
		if json.Unmarshal(t.Name, &name) != nil || strings.TrimSpace(name) == "" {
			return fmt.Sprintf(`tool %d has no "name" string`, j)
		}
		if len(t.Parameters) == 0 {
			continue
		}
		if k := rawKind(t.Parameters); k != "object" {
			return fmt.Sprintf(`"parameters" of tool %q must be a JSON object, got %s`, name, k)
		}
		var params struct {
			Properties json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(t.Parameters, &params) != nil {
			return fmt.Sprintf(`"parameters" of tool %q is not a JSON object`, name)
		}
		if k := rawKind(params.Properties); len(params.Properties) > 0 && k != "object" {
			return fmt.Sprintf(`"parameters.properties" of tool %q must be a JSON object, got %s`, name, k)
		}
	}
	return ""
}

// rawKind names the JSON kind of raw from its first byte, as jsonKind
// does for decoded values.
func rawKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
