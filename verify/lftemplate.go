package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/augmentdata/augment/jsontree"
)

// An LFTemplate is what an export needs to know of one LLaMA-Factory chat
// template (the `template:` of a training run) to write samples it can
// train on. The facts come from LLaMA-Factory's data code at commit ff6d4d1
// (template.py, formatter.py, tool_utils.py):
//
//   - every template has thought words, ("<think>\n", "\n</think>\n\n")
//     unless it names others, and tool-call words ("<tool_call>",
//     "</tool_call>");
//   - the function formatter of a function_call turn first looks for the
//     first tool-call-words block: when there is one, the JSON inside it is
//     parsed and everything else of the value is written before the calls as
//     it is; otherwise it removes the first thought-words block (an exact
//     match), parses the rest as JSON and writes the thought back before
//     the calls. Templates of the Llama2Template class (mistral, gemma3,
//     …) give their function formatter neither, so the whole value must be
//     JSON;
//   - the JSON is one call {"name", "arguments"} or a list of them; the
//     tool format then renders the calls, and glm4's refuses more than one
//     ("GLM-4 does not support parallel functions.");
//   - the tools column is parsed with json.loads and rendered by the tool
//     format; the default format reads parameters.properties of every tool
//     and each property as an object;
//   - templates of the ReasoningTemplate class train thoughts: an assistant
//     turn without the thought words gets an empty thought, and
//     enable_thinking: false removes thoughts.
type LFTemplate struct {
	Name string
	// Reasoning is true for templates of a reasoning class, the only ones
	// where a thought is trained as a thought (and enable_thinking applies).
	Reasoning bool
	// ThoughtWords open and close a thought.
	ThoughtWords [2]string
	// ToolFormat names the tool utils that render the tool list and calls:
	// default, glm4, glm4_moe, llama3, mistral, qwen or qwen3_5.
	ToolFormat string
	// CallText is true when the function formatter receives the thought and
	// tool-call words, so a function_call value can carry a thought and text
	// before its calls; false for the Llama2Template class.
	CallText bool
	// ToolCallWords wrap the calls when a function_call value carries text.
	ToolCallWords [2]string
}

// Parallel reports whether the template's tool format renders several
// calls in one turn.
func (t *LFTemplate) Parallel() bool { return t.ToolFormat != "glm4" }

// Thought writes reasoning in the template's thought words.
func (t *LFTemplate) Thought(reasoning string) string {
	return t.ThoughtWords[0] + reasoning + t.ThoughtWords[1]
}

var (
	lfThink     = [2]string{"<think>\n", "\n</think>\n\n"}
	lfToolCall  = [2]string{"<tool_call>", "</tool_call>"}
	lfTemplates = []LFTemplate{
		{Name: "breeze", ThoughtWords: lfThink, ToolFormat: "default", CallText: true},
		{Name: "chatml", ThoughtWords: lfThink, ToolFormat: "default", CallText: true},
		{Name: "default", ThoughtWords: lfThink, ToolFormat: "default", CallText: true},
		{Name: "deepseek3", ThoughtWords: lfThink, ToolFormat: "default", CallText: true},
		{Name: "deepseekr1", Reasoning: true, ThoughtWords: lfThink, ToolFormat: "default", CallText: true},
		{Name: "gemma3", ThoughtWords: lfThink, ToolFormat: "default"},
		{Name: "glm4", ThoughtWords: lfThink, ToolFormat: "glm4", CallText: true},
		{Name: "glm4_moe", Reasoning: true, ThoughtWords: lfThink, ToolFormat: "glm4_moe", CallText: true},
		{Name: "glm4_7", Reasoning: true, ThoughtWords: [2]string{"<think>", "</think>"}, ToolFormat: "glm4_moe", CallText: true},
		{Name: "llama3", ThoughtWords: lfThink, ToolFormat: "llama3", CallText: true},
		{Name: "llama4", ThoughtWords: lfThink, ToolFormat: "llama3", CallText: true},
		{Name: "mistral", ThoughtWords: lfThink, ToolFormat: "mistral"},
		{Name: "mistral_small", ThoughtWords: lfThink, ToolFormat: "mistral", CallText: true},
		{Name: "phi4", ThoughtWords: lfThink, ToolFormat: "default", CallText: true},
		{Name: "qwen", ThoughtWords: lfThink, ToolFormat: "qwen", CallText: true},
		{Name: "qwen3", Reasoning: true, ThoughtWords: lfThink, ToolFormat: "qwen", CallText: true},
		{Name: "qwen3_nothink", ThoughtWords: lfThink, ToolFormat: "qwen", CallText: true},
		{Name: "qwen3_5", Reasoning: true, ThoughtWords: lfThink, ToolFormat: "qwen3_5", CallText: true},
	}
)

func init() {
	for i := range lfTemplates {
		lfTemplates[i].ToolCallWords = lfToolCall
	}
}

// LFTemplates lists the templates an export can be written for, by name.
func LFTemplates() []LFTemplate { return append([]LFTemplate(nil), lfTemplates...) }

// LookupLFTemplate returns the template called name.
func LookupLFTemplate(name string) (*LFTemplate, bool) {
	for i := range lfTemplates {
		if lfTemplates[i].Name == name {
			t := lfTemplates[i]
			return &t, true
		}
	}
	return nil, false
}

// LFTemplateNames lists the names of LFTemplates.
func LFTemplateNames() []string {
	names := make([]string, len(lfTemplates))
	for i, t := range lfTemplates {
		names[i] = t.Name
	}
	return names
}

// A FunctionTurn is a function_call value as the template's function
// formatter reads it: Prefix is what it writes before the calls (the
// thought, and with tool-call words any text), Calls what it parsed.
type FunctionTurn struct {
	Prefix string
	Calls  []FunctionCall
}

// A FunctionCall is one parsed call; Arguments is its JSON object.
type FunctionCall struct {
	Name      string
	Arguments json.RawMessage
}

// errNoParallel marks a value with several calls for a template whose tool
// format takes one.
type errNoParallel struct{ name, format string }

func (e errNoParallel) Error() string {
	return fmt.Sprintf("template %s (tool format %s) renders one call per turn; LLaMA-Factory raises on parallel calls", e.name, e.format)
}

// ReadFunction reads a function_call value as LLaMA-Factory's function
// formatter does for this template, and returns what the formatter would
// raise on as an error: no JSON where it looks for it, a call that is not an
// object with a "name" string and an object "arguments" (stricter than
// LLaMA-Factory where its tool formats differ), an empty list, or parallel
// calls for a template that takes one call.
func (t *LFTemplate) ReadFunction(value string) (FunctionTurn, error) {
	prefix, jsonPart := t.SplitFunction(value)
	ft := FunctionTurn{Prefix: prefix}
	calls, err := parseCalls(jsonPart)
	if err != nil {
		return ft, err
	}
	if len(calls) > 1 && !t.Parallel() {
		return ft, errNoParallel{t.Name, t.ToolFormat}
	}
	ft.Calls = calls
	return ft, nil
}

// SplitFunction is the first step of ReadFunction: it cuts a function_call
// value into the text the formatter keeps before the calls (Prefix) and the
// part it parses as the JSON of the calls.
func (t *LFTemplate) SplitFunction(value string) (prefix, jsonPart string) {
	jsonPart = value
	if t.CallText {
		if match, inner, ok := firstBlock(value, t.ToolCallWords); ok {
			return strings.ReplaceAll(value, match, ""), inner
		} else if match, _, ok := firstBlock(value, t.ThoughtWords); ok {
			return match, strings.ReplaceAll(value, match, "")
		}
	}
	return "", jsonPart
}

// SplitsAs reports whether SplitFunction(value) is (prefix, jsonPart),
// without making the prefix it would make by cutting the block out of
// value (the export asks this of every call turn it writes).
func (t *LFTemplate) SplitsAs(value, prefix, jsonPart string) bool {
	if t.CallText {
		if match, inner, ok := firstBlock(value, t.ToolCallWords); ok {
			return inner == jsonPart && cutAllIs(value, match, prefix)
		} else if match, _, ok := firstBlock(value, t.ThoughtWords); ok {
			return match == prefix && cutAllIs(value, match, jsonPart)
		}
	}
	return prefix == "" && value == jsonPart
}

// cutAllIs reports whether strings.ReplaceAll(s, old, "") == want.
func cutAllIs(s, old, want string) bool {
	if old == "" {
		return s == want
	}
	for {
		i := strings.Index(s, old)
		if i < 0 {
			return s == want
		}
		if len(want) < i || want[:i] != s[:i] {
			return false
		}
		s, want = s[i+len(old):], want[i:]
	}
}

// firstBlock finds the first open…close block of s as Python's re.search
// with a non-greedy DOTALL group does: the first open that has a close
// after it, and the first close after that open.
func firstBlock(s string, words [2]string) (match, inner string, ok bool) {
	i := strings.Index(s, words[0])
	if i < 0 {
		return "", "", false
	}
	start := i + len(words[0])
	j := strings.Index(s[start:], words[1])
	if j < 0 {
		return "", "", false
	}
	return s[i : start+j+len(words[1])], s[start : start+j], true
}

// parseCalls parses a JSON call or list of calls as json.loads would take
// them, into typed values: the export reads every call turn back, and
// decoding arguments into maps was most of that.
func parseCalls(s string) ([]FunctionCall, error) {
	type shape struct {
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var items []*shape
	var err error
	list := strings.HasPrefix(strings.TrimLeft(s, " \t\n\r"), "[")
	if list {
		err = json.Unmarshal([]byte(s), &items)
	} else {
		items = []*shape{nil}
		err = json.Unmarshal([]byte(s), &items[0])
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return nil, fmt.Errorf("not JSON (LLaMA-Factory: Invalid JSON format in function message): %w", err)
	case err != nil:
		return nil, fmt.Errorf("a call must be a JSON object with \"name\" and \"arguments\": %w", err)
	case list && len(items) == 0:
		return nil, fmt.Errorf("function_call value is an empty list")
	}
	calls := make([]FunctionCall, len(items))
	for j, c := range items {
		what := "the call"
		if list {
			what = fmt.Sprintf("call %d", j)
		}
		if c == nil {
			return nil, fmt.Errorf("%s must be a JSON object with \"name\" and \"arguments\", got null", what)
		}
		var name string
		if rawKind(c.Name) != "string" || json.Unmarshal(c.Name, &name) != nil || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("%s has no \"name\" string", what)
		}
		if len(c.Arguments) == 0 {
			return nil, fmt.Errorf("%s (%q) has no \"arguments\"", what, name)
		}
		if k := rawKind(c.Arguments); k != "object" {
			return nil, fmt.Errorf("\"arguments\" of %s (%q) must be a JSON object, got %s", what, name, k)
		}
		if n := jsontree.InfiniteNumberIn(c.Arguments); n != "" {
			return nil, fmt.Errorf("\"arguments\" of %s (%q) hold %s, beyond a float's range: LLaMA-Factory reads it as infinity and writes Infinity, which is not JSON", what, name, n)
		}
		calls[j] = FunctionCall{Name: name, Arguments: c.Arguments}
	}
	return calls, nil
}

// CheckTools reports what LLaMA-Factory's tool formatter for this template
// would raise on in a tools value, or nil. The generic shape (a JSON list of
// named tool objects) is checkTools'; the default tool format also reads
// parameters.properties of every tool as an object of objects, "required"
// as a list, "enum" as a list of strings and "items" as an object.
func (t *LFTemplate) CheckTools(tools string) error {
	if msg := checkTools(tools); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	if t.ToolFormat != "default" {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(tools), &list); err != nil {
		return err
	}
	for j, raw := range list {
		if msg := defaultToolFormat(raw); msg != "" {
			return fmt.Errorf("tool %d: %s (template %s renders tools with the default tool format)", j, msg, t.Name)
		}
	}
	return nil
}

// defaultToolFormat returns what the default tool format cannot render in
// one tool (already known to be a named object), or "".
func defaultToolFormat(raw json.RawMessage) string {
	var tool struct {
		Type       string          `json:"type"`
		Function   json.RawMessage `json:"function"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(raw, &tool) != nil {
		return "not a JSON object"
	}
	if tool.Type == "function" {
		if json.Unmarshal(tool.Function, &tool) != nil {
			return `"function" is not an object`
		}
	}
	return defaultToolParams(tool.Parameters)
}

// CheckToolParams reports what the template's tool format cannot render in
// the parameters of one tool given as a bare {"name", "parameters", …}
// object with a non-empty name, or nil. Only the default tool format reads
// the parameters.
func (t *LFTemplate) CheckToolParams(params json.RawMessage) error {
	if t.ToolFormat != "default" {
		return nil
	}
	if msg := defaultToolParams(params); msg != "" {
		return fmt.Errorf("%s (template %s renders tools with the default tool format)", msg, t.Name)
	}
	return nil
}

// defaultToolParams returns what the default tool format cannot render in a
// tool's parameters, or "": it reads parameters.properties as an object of
// objects, "required" with the in operator, each property's truthy "enum"
// joined as strings and truthy "items" as an object. One typed decode: the
// export checks every sample.
func defaultToolParams(raw json.RawMessage) string {
	type prop struct {
		Enum  json.RawMessage `json:"enum"`
		Items json.RawMessage `json:"items"`
	}
	var params struct {
		Properties map[string]*prop `json:"properties"`
		Required   json.RawMessage  `json:"required"`
	}
	if rawKind(raw) != "object" {
		return `no "parameters" object`
	}
	// The formatter meets the properties in the document's order and
	// stops at the first it cannot render; so does this check, which
	// keeps a record's reject the same from run to run.
	names, kinds := propertyOrder(raw)
	if err := json.Unmarshal(raw, &params); err != nil {
		for i, k := range kinds {
			if k != "object" && k != "null" {
				return fmt.Sprintf("property %q is not an object", names[i])
			}
		}
		return `no "parameters.properties" object`
	}
	if params.Properties == nil {
		return `no "parameters.properties" object`
	}
	if k := rawKind(params.Required); len(params.Required) > 0 && k != "array" && k != "object" && k != "string" {
		return fmt.Sprintf(`"parameters.required" is a JSON %s`, k)
	}
	if len(names) != len(params.Properties) { // repeated keys: sorted, as no order is right
		names = slices.Sorted(maps.Keys(params.Properties))
	}
	for _, name := range names {
		p := params.Properties[name]
		if p == nil {
			return fmt.Sprintf("property %q is not an object", name)
		}
		if truthy(p.Enum) {
			switch rawKind(p.Enum) {
			case "array":
				var members []json.RawMessage
				_ = json.Unmarshal(p.Enum, &members)
				for _, m := range members {
					if rawKind(m) != "string" {
						return fmt.Sprintf("property %q: enum member %s is not a string", name, bytes.TrimSpace(m))
					}
				}
			case "string", "object":
			default:
				return fmt.Sprintf("property %q: enum is a JSON %s", name, rawKind(p.Enum))
			}
		}
		if truthy(p.Items) && rawKind(p.Items) != "object" {
			return fmt.Sprintf("property %q: items is a JSON %s, not an object", name, rawKind(p.Items))
		}
	}
	return ""
}

// propertyOrder returns the keys of parameters.properties in the raw
// parameters (a JSON object) in document order, with the JSON kind of each
// value; none when properties is not an object or a key repeats.
func propertyOrder(raw json.RawMessage) (names, kinds []string) {
	p := jsontree.Parser{Data: raw, DuplicateKeys: true}
	v, err := p.Parse()
	if err != nil {
		return nil, nil
	}
	props := v.Get("properties")
	if props == nil || props.Kind != jsontree.Object {
		return nil, nil
	}
	var seen map[string]struct{} // for a wide tool (tens of thousands of parameters happen)
	if len(props.Elems) > 64 {
		seen = make(map[string]struct{}, len(props.Elems))
	}
	for _, m := range props.Elems {
		var dup bool
		if seen != nil {
			_, dup = seen[m.Key]
			seen[m.Key] = struct{}{}
		} else {
			dup = slices.Contains(names, m.Key)
		}
		if dup {
			return nil, nil
		}
		names, kinds = append(names, m.Key), append(kinds, m.Val.Kind.String())
	}
	return names, kinds
}

// truthy reports whether a JSON value is true in Python's sense.
func truthy(raw json.RawMessage) bool {
	switch s := string(bytes.TrimSpace(raw)); s {
	case "", "null", "false", `""`, "[]", "{}", "0":
		return false
	default:
		if rawKind(raw) == "number" {
			var f float64
			return json.Unmarshal(raw, &f) != nil || f != 0
		}
		if k := rawKind(raw); k == "array" || k == "object" {
			var v any
			if json.Unmarshal(raw, &v) == nil {
				switch x := v.(type) {
				case []any:
					return len(x) > 0
				case map[string]any:
					return len(x) > 0
				}
			}
		}
		return true
	}
}
