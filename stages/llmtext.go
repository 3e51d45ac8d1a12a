package stages

// The text the LLM stages show a teacher and read back: tools, calls and
// dialogues rendered for prompts, and answers taken out of code fences.
// Each prompt's bytes are part of the cache key, so a change here changes
// the answers of every stage that uses it.

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// promptTool is a tool as prompts show it: the OpenAI function shape
// without the response schema (the teacher does not need it).
type promptTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// promptToolsJSON renders tools as an indented JSON list of promptTools;
// parameters that are not JSON are shown as {}.
func promptToolsJSON(tools []record.Tool) string {
	list := make([]promptTool, len(tools))
	for i, t := range tools {
		p := t.Parameters
		if !json.Valid(p) {
			p = json.RawMessage(`{}`)
		}
		list[i] = promptTool{t.Name, t.Description, p}
	}
	return indentJSON(list)
}

// promptCallsJSON renders calls as an indented JSON list of {"name", "arguments"}.
func promptCallsJSON(calls []record.Call) string {
	type call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	list := make([]call, len(calls))
	for i, c := range calls {
		list[i] = call{c.Name, validJSONOr(c.Arguments, "{}")}
	}
	return indentJSON(list)
}

func validJSONOr(b json.RawMessage, fallback string) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage(fallback)
	}
	return b
}

func indentJSON(v any) string {
	b, err := jsonout.Marshal(v)
	if err != nil {
		return "[]"
	}
	var buf bytes.Buffer
	if json.Indent(&buf, b, "", "  ") != nil {
		return string(b)
	}
	return buf.String()
}

// renderDialogue renders a system prompt (if not empty) and messages for a
// prompt, one block per message: "[SYSTEM] …", "[USER] …", "[ASSISTANT] …",
// "[ASSISTANT CALLS] [json]", "[TOOL RESULT name] …". Reasoning is not shown.
func renderDialogue(system string, msgs []record.Message) string {
	var b strings.Builder
	block := func(label, text string) {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("[" + label + "] " + strings.TrimSpace(text))
	}
	if strings.TrimSpace(system) != "" {
		block("SYSTEM", system)
	}
	for _, m := range msgs {
		switch m.Role {
		case record.RoleAssistant:
			if m.Content != "" || len(m.Calls) == 0 {
				block("ASSISTANT", m.Content)
			}
			if len(m.Calls) > 0 {
				c := promptCallsJSON(m.Calls)
				var compact bytes.Buffer
				if json.Compact(&compact, []byte(c)) == nil {
					c = compact.String()
				}
				block("ASSISTANT CALLS", c)
			}
		case record.RoleTool:
			for _, res := range m.Results {
				block("TOOL RESULT "+res.Name, res.Content)
			}
		default:
			block(strings.ToUpper(m.Role), m.Content)
		}
	}
	return b.String()
}

// promptToolLines renders tools as a JSON list of promptTools, one compact
// object per line (tool_dc's prompts); a tool whose parameters are not
// JSON rejects the record under reason.
func promptToolLines(tools []record.Tool, reason string) (string, error) {
	var b strings.Builder
	b.WriteString("[")
	for i, t := range tools {
		if !json.Valid(t.Parameters) {
			return "", contract.Rejectf(reason, "parameters of tool %q are not JSON", t.Name)
		}
		line, err := jsonout.Marshal(promptTool{t.Name, t.Description, t.Parameters})
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]")
	return b.String(), nil
}
