package verify

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/augmentdata/augment/jsonout"
)

// How long LLaMA-Factory's rendering of a sample is, in o200k_base tokens
// (Tokens), for one template: the length its supervised processor compares
// with cutoff_len (the sum of every turn's source and target ids), which
// truncates a longer sample silently. The rendering (LLaMA-Factory at
// commit ff6d4d1, template.py, formatter.py, tool_utils.py) is:
//
//   - the template's prefix (a BOS token for most), then, when the sample
//     has a system prompt, tools, or the template a default system prompt
//     (qwen's), the system turn: the system prompt (or the default) and
//     the tool format's text of the tools column — its fixed prose around
//     the list, and each tool as the format writes it (wrapped as
//     {"type": "function", "function": tool} by most, pretty-printed with
//     indent=4 by llama3's and glm4's, always with json.dumps' ", " and
//     ": " separators);
//   - every turn inside the template's framing for its role, a
//     function_call turn as the text kept before the calls and the calls
//     as the tool format writes them (json.dumps of the arguments again,
//     or markup per argument);
//   - an empty thought added to every assistant turn without one, for
//     templates of the ReasoningTemplate class, and an EOS token at the
//     end for templates with efficient_eos.
//
// LLaMA-Factory's fixed texts are not written here: they are counts, in
// lfFrames and lfToolFormats, each measured by rendering the text with
// LLaMA-Factory's own code (the prose with no tools, a tool or call with
// empty names, a property or argument with empty keys) and counting it
// with Tokens, special tokens (<|…|>, [INST], <start_of_turn>, BOS, EOS …)
// one token each, as the model's tokenizer has them. Texts are counted
// part by part (framing, each turn, each tool), so a count is at least
// the count of the joined text but for a token at a seam.

// lfFrame is a template's fixed text in tokens: around the first turn
// (prefix), around the system text (system), around each turn of a role,
// after the last turn (end, efficient_eos' EOS); the default system
// prompt; the empty thought of a reasoning template.
type lfFrame struct {
	prefix, system, user, assistant, function, observation, end int
	defaultSystem, emptyThought                                 int
}

// lfFrames are the templates' frames, measured as the package comment
// says from the slots of their register_template calls.
var lfFrames = map[string]lfFrame{
	"breeze":        {prefix: 1, system: 0, user: 5, assistant: 0, function: 0, observation: 5, end: 1},
	"chatml":        {prefix: 0, system: 5, user: 8, assistant: 2, function: 2, observation: 8},
	"default":       {prefix: 0, system: 5, user: 7, assistant: 2, function: 2, observation: 7},
	"deepseek3":     {prefix: 1, system: 0, user: 2, assistant: 1, function: 1, observation: 2},
	"deepseekr1":    {prefix: 1, system: 0, user: 2, assistant: 1, function: 1, observation: 2, emptyThought: 6},
	"gemma3":        {prefix: 1, system: 1, user: 8, assistant: 2, function: 2, observation: 8},
	"glm4":          {prefix: 2, system: 2, user: 3, assistant: 1, function: 0, observation: 3, end: 1},
	"glm4_moe":      {prefix: 2, system: 2, user: 3, assistant: 1, function: 0, observation: 3, end: 1, emptyThought: 6},
	"glm4_7":        {prefix: 2, system: 2, user: 3, assistant: 1, function: 0, observation: 3, end: 1, emptyThought: 3},
	"llama3":        {prefix: 1, system: 5, user: 9, assistant: 1, function: 1, observation: 10},
	"llama4":        {prefix: 1, system: 5, user: 9, assistant: 1, function: 1, observation: 10},
	"mistral":       {prefix: 1, system: 1, user: 3, assistant: 2, function: 3, observation: 7},
	"mistral_small": {prefix: 1, system: 2, user: 2, assistant: 1, function: 2, observation: 7},
	"phi4":          {prefix: 0, system: 4, user: 7, assistant: 1, function: 1, observation: 7},
	"qwen":          {prefix: 0, system: 5, user: 8, assistant: 2, function: 2, observation: 17, defaultSystem: 16},
	"qwen3":         {prefix: 0, system: 5, user: 8, assistant: 2, function: 2, observation: 17, emptyThought: 6},
	"qwen3_nothink": {prefix: 0, system: 5, user: 8, assistant: 2, function: 2, observation: 17},
	"qwen3_5":       {prefix: 0, system: 5, user: 8, assistant: 2, function: 2, observation: 17, emptyThought: 6},
}

// lfToolFormat is a tool format's fixed text in tokens: the prose around
// the tool list (llama3's holds the date: its count is the most over the
// days of 2024–2035); per tool (tool: the default format's labels,
// glm4's heading and closing sentence); for the default format per
// property and its required, enum and items notes; per call and per
// argument of the markup formats (default, glm4_moe, qwen3_5) and of
// qwen's <tool_call> block.
type lfToolFormat struct {
	prose, tool                  int
	param, required, enum, items int
	call, arg                    int
	wrap, indent, sep            bool
}

// lfToolFormats: how each tool format writes a tool — wrap: as
// {"type": "function", "function": tool}; indent: json.dumps with indent=4
// (else json.dumps' one-line layout); sep: a separator token between tools
// or after each (a newline, mistral's ", ").
var lfToolFormats = map[string]lfToolFormat{
	"default":  {prose: 67, tool: 12, param: 5, required: 2, enum: 5, items: 6, call: 7},
	"glm4":     {prose: 55, tool: 18, indent: true},
	"glm4_moe": {prose: 116, call: 5, arg: 14, wrap: true, sep: true},
	"llama3":   {prose: 68, wrap: true, indent: true, sep: true},
	"mistral":  {prose: 3, wrap: true, sep: true},
	"qwen":     {prose: 87, call: 9, wrap: true, sep: true},
	"qwen3_5":  {prose: 193, call: 15, arg: 7, sep: true},
}

// ToolTokens is how many tokens the template's tool format writes for one
// tool given as its object in the tools column (compact JSON
// {"name", "description", "parameters"[, "response"]}), the separator
// after it included; 0 for a tool it cannot read (which the export
// rejects before).
func (t *LFTemplate) ToolTokens(obj []byte) int {
	f := lfToolFormats[t.ToolFormat]
	if t.ToolFormat == "default" {
		return defaultToolTokens(obj, f)
	}
	var b []byte
	if f.wrap {
		b = append(b, `{"type":"function","function":`...)
		b = append(b, obj...)
		b = append(b, '}')
	} else {
		b = obj
	}
	indent := ""
	if f.indent {
		indent = "    "
	}
	n := Tokens(string(PyLayout(nil, b, indent)))
	if f.sep {
		n++
	}
	if t.ToolFormat == "glm4" {
		var tool struct{ Name string }
		_ = json.Unmarshal(obj, &tool)
		n += f.tool + Tokens(tool.Name)
	}
	return n
}

// defaultToolTokens is ToolTokens for the default tool format: labels,
// the name (twice: once more in the list of tool names), description,
// and per property its name, type, description, enum members and items'
// type.
func defaultToolTokens(obj []byte, f lfToolFormat) int {
	var tool struct {
		Name        string          `json:"name"`
		Description json.RawMessage `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(obj, &tool) != nil {
		return 0
	}
	name := Tokens(tool.Name)
	n := f.tool + 2*name + 1 + Tokens(pyStr(tool.Description))
	var params struct {
		Properties map[string]struct {
			Type        json.RawMessage `json:"type"`
			Description json.RawMessage `json:"description"`
			Enum        json.RawMessage `json:"enum"`
			Items       json.RawMessage `json:"items"`
		} `json:"properties"`
		Required json.RawMessage `json:"required"`
	}
	if json.Unmarshal(tool.Parameters, &params) != nil {
		return n
	}
	var required []string
	_ = json.Unmarshal(params.Required, &required)
	for key, p := range params.Properties {
		n += f.param + Tokens(key) + Tokens(pyStr(p.Type)) + Tokens(pyStr(p.Description))
		for _, r := range required {
			if r == key {
				n += f.required
				break
			}
		}
		if truthy(p.Enum) {
			var members []string
			_ = json.Unmarshal(p.Enum, &members)
			n += f.enum + 2*len(members)
			for _, m := range members {
				n += Tokens(m)
			}
		}
		if truthy(p.Items) {
			var items struct {
				Type json.RawMessage `json:"type"`
			}
			_ = json.Unmarshal(p.Items, &items)
			n += f.items + Tokens(pyStr(items.Type))
		}
	}
	return n
}

// pyStr is how Python's str.format writes a JSON value: a string as its
// text, anything else (here) as its JSON, a close stand-in for Python's
// repr; "" for nothing.
func pyStr(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// ToolsTokens is the tool format's fixed prose around a non-empty tool
// list.
func (t *LFTemplate) ToolsTokens() int { return lfToolFormats[t.ToolFormat].prose }

// FunctionTokens is how many tokens the function formatter writes for a
// function_call value, its framing left out: the text kept before the
// calls, then the calls as the tool format writes them. A value it cannot
// read is counted as it is.
func (t *LFTemplate) FunctionTokens(value string) int {
	prefix, jsonPart := t.SplitFunction(value)
	calls, err := parseCalls(jsonPart)
	if err != nil {
		return Tokens(value)
	}
	return Tokens(prefix) + t.callsTokens(calls)
}

// callsTokens is how many tokens the tool format writes for calls.
func (t *LFTemplate) callsTokens(calls []FunctionCall) int {
	f := lfToolFormats[t.ToolFormat]
	var b []byte
	switch t.ToolFormat {
	case "llama3", "mistral":
		key := `,"parameters":`
		if t.ToolFormat == "mistral" {
			key = `,"arguments":`
		}
		list := len(calls) > 1 || t.ToolFormat == "mistral"
		if list {
			b = append(b, '[')
		}
		for i, c := range calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jsonout.AppendString(b, c.Name)
			b = append(b, key...)
			b = append(b, c.Arguments...)
			b = append(b, '}')
		}
		if list {
			b = append(b, ']')
		}
		return Tokens(string(PyLayout(nil, b, "")))
	case "qwen":
		n := 0
		for _, c := range calls {
			b = append(b[:0], `{"name":`...)
			b = jsonout.AppendString(b, c.Name)
			b = append(b, `,"arguments":`...)
			b = append(b, c.Arguments...)
			b = append(b, '}')
			n += f.call + Tokens(string(PyLayout(nil, b, "")))
		}
		return n
	case "glm4":
		n := 0
		for _, c := range calls {
			n += Tokens(c.Name + "\n" + string(PyLayout(nil, c.Arguments, "")))
		}
		return n
	}
	// Markup formats: per call its name and fixed text; per argument its
	// key, its value (a string as it is, else json.dumps) and fixed text;
	// the default format writes the arguments as json.dumps.
	n := 0
	for _, c := range calls {
		n += f.call + Tokens(c.Name) + 1
		if t.ToolFormat == "default" {
			n += Tokens(string(PyLayout(nil, c.Arguments, "")))
			continue
		}
		forEachMember(c.Arguments, func(key string, value json.RawMessage) {
			n += f.arg + Tokens(key) + Tokens(pyValue(value))
		})
	}
	return n
}

// pyValue is an argument's value as the markup formats write it: a string
// as its text, anything else as json.dumps writes it.
func pyValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(PyLayout(nil, raw, ""))
}

// forEachMember calls fn with each member of a JSON object, in order.
func forEachMember(obj json.RawMessage, fn func(key string, value json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return
		}
		fn(key, v)
	}
}

// PyLayout appends src, a JSON text, to dst in the layout of Python's
// json.dumps: with indent "" one line with ", " and ": " separators,
// else one member per line indented by indent per level, empty
// containers as {} and []. Strings are copied as they are.
func PyLayout(dst, src []byte, indent string) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			dst = append(dst, src[i:min(j+1, len(src))]...)
			i = j
		case '{', '[':
			k := i + 1
			for k < len(src) && strings.IndexByte(" \t\n\r", src[k]) >= 0 {
				k++
			}
			if k < len(src) && (src[k] == '}' || src[k] == ']') {
				dst = append(dst, c, src[k])
				i = k
				continue
			}
			dst = append(dst, c)
			if indent != "" {
				depth++
				newline()
			}
		case '}', ']':
			if indent != "" {
				depth--
				newline()
			}
			dst = append(dst, c)
		case ',':
			dst = append(dst, ',')
			if indent != "" {
				newline()
			} else {
				dst = append(dst, ' ')
			}
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// lfSeam is the token SampleTokens adds per turn for its seams: a turn's
// text counted apart from its framing can merge with it into a token more
// (a count of the text with the special tokens cut out, a stand-in for the
// model's tokenizer, does so where a word ends a turn and a role name starts
// the next).
const lfSeam = 1

// SampleTokens is how many tokens LLaMA-Factory's rendering of a sharegpt
// sample for the template holds (see above): system is its system column,
// tools the sum of ToolTokens over its tools (ignored when it has none,
// hasTools false), turns its conversations. The sample's tools column is
// never empty (the export writes "[]" for none).
func (t *LFTemplate) SampleTokens(system string, hasTools bool, tools int, turns []Turn) int {
	fr := lfFrames[t.Name]
	n := fr.prefix + fr.end
	sys := Tokens(system)
	if system == "" {
		sys = fr.defaultSystem
	}
	if hasTools {
		sys += t.ToolsTokens() + tools
	}
	// The system turn is rendered even when both are empty: the export's
	// tools column is never empty ("[]" for none), and LLaMA-Factory's
	// `if system or tools` reads the column's text, so "[]" is true.
	n += fr.system + sys
	for _, turn := range turns {
		n += lfSeam
		switch turn.From {
		case "human":
			n += fr.user + Tokens(turn.Value)
		case "observation":
			n += fr.observation + Tokens(turn.Value)
		case "gpt":
			n += fr.assistant + Tokens(turn.Value) + t.emptyThought(turn.Value, fr)
		case "function_call":
			n += fr.function + t.FunctionTokens(turn.Value) + t.emptyThought(turn.Value, fr)
		default:
			n += Tokens(turn.Value)
		}
	}
	return n
}

// emptyThought is the empty thought a reasoning template adds to an
// assistant turn holding neither of its thought words.
func (t *LFTemplate) emptyThought(value string, fr lfFrame) int {
	if !t.Reasoning || strings.Contains(value, strings.TrimSpace(t.ThoughtWords[0])) || strings.Contains(value, strings.TrimSpace(t.ThoughtWords[1])) {
		return 0
	}
	return fr.emptyThought
}
