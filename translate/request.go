package translate

import (
	"encoding/json"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/record"
)

// The request object follows seed 002 Appendix B: "functions" lists the
// tools (read-only context), "conversations" the turns, and an assistant
// turn's "tool_calls" its calls. Tool turns carry "results", one per call of
// the turn they answer; a result that is a JSON object or array is sent as
// that JSON value (so its keys are visibly structure), any other result as a
// string. Empty text fields are left out.
//
// Tool results are translated too, since Appendix B translates the whole
// conversation except "functions"; their keys and locked values are checked
// like arguments, but their free text needs no equivalence judge: no call
// depends on it. A meta_tool result that returns tool definitions is sent
// like any result but must come back exactly (see scope).
type wireRecord struct {
	Functions     []wireTool `json:"functions"`
	System        string     `json:"system,omitempty"`
	Conversations []wireTurn `json:"conversations"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireTurn struct {
	Role      string       `json:"role"`
	Content   string       `json:"content,omitempty"`
	Reasoning string       `json:"reasoning,omitempty"`
	ToolCalls []wireCall   `json:"tool_calls,omitempty"`
	Results   []wireResult `json:"results,omitempty"`
}

type wireCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type wireResult struct {
	Name    string `json:"name"`
	Content any    `json:"content"` // json.RawMessage or string
}

// toWire builds the request object for r; r must have passed checkSource.
func toWire(r *record.Record) wireRecord {
	w := wireRecord{Functions: make([]wireTool, len(r.Tools)), System: r.System, Conversations: make([]wireTurn, len(r.Messages))}
	for i, t := range r.Tools {
		w.Functions[i] = wireTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	for i, m := range r.Messages {
		turn := wireTurn{Role: m.Role, Content: m.Content, Reasoning: m.Reasoning}
		for _, c := range m.Calls {
			turn.ToolCalls = append(turn.ToolCalls, wireCall{Name: c.Name, Arguments: c.Arguments})
		}
		for _, res := range m.Results {
			var content any = res.Content
			if isStructured(res.Content) {
				content = json.RawMessage(res.Content)
			}
			turn.Results = append(turn.Results, wireResult{Name: res.Name, Content: content})
		}
		w.Conversations[i] = turn
	}
	return w
}

// encode renders v as JSON without HTML escaping; indent "" is compact.
// answerSchema is the JSON Schema of the answer for r, sent with the request
// so servers with structured output generate the locked shape: the same
// number of turns with the same roles, text fields only where the source has
// text, exactly as many calls per turn with names from that turn, and as
// many results. Argument objects and functions are left open here; the local
// checks compare them with the source.
func answerSchema(w wireRecord) json.RawMessage {
	str := map[string]any{"type": "string"}
	turns := make([]any, len(w.Conversations))
	for i, t := range w.Conversations {
		props := map[string]any{"role": map[string]any{"const": t.Role}}
		required := []string{"role"}
		if t.Content != "" {
			props["content"] = str
			required = append(required, "content")
		}
		if t.Reasoning != "" {
			props["reasoning"] = str
			required = append(required, "reasoning")
		}
		if len(t.ToolCalls) > 0 {
			names := make([]any, 0, len(t.ToolCalls))
			for _, c := range t.ToolCalls {
				names = appendUnique(names, c.Name)
			}
			props["tool_calls"] = map[string]any{
				"type": "array", "minItems": len(t.ToolCalls), "maxItems": len(t.ToolCalls),
				"items": map[string]any{
					"type": "object", "additionalProperties": false, "required": []string{"name", "arguments"},
					"properties": map[string]any{"name": map[string]any{"enum": names}, "arguments": map[string]any{"type": "object"}},
				},
			}
			required = append(required, "tool_calls")
		}
		if len(t.Results) > 0 {
			names := make([]any, 0, len(t.Results))
			for _, r := range t.Results {
				names = appendUnique(names, r.Name)
			}
			props["results"] = map[string]any{
				"type": "array", "minItems": len(t.Results), "maxItems": len(t.Results),
				"items": map[string]any{
					"type": "object", "additionalProperties": false, "required": []string{"name", "content"},
					"properties": map[string]any{"name": map[string]any{"enum": names}, "content": map[string]any{}},
				},
			}
			required = append(required, "results")
		}
		turns[i] = map[string]any{"type": "object", "additionalProperties": false, "required": required, "properties": props}
	}
	props := map[string]any{
		"functions":     map[string]any{"type": "array", "minItems": len(w.Functions), "maxItems": len(w.Functions)},
		"conversations": map[string]any{"type": "array", "minItems": len(turns), "maxItems": len(turns), "prefixItems": turns, "items": false},
	}
	required := []string{"functions", "conversations"}
	if w.System != "" {
		props["system"] = str
		required = append(required, "system")
	}
	b, _ := jsonout.MarshalIndent(map[string]any{ // maps of plain values always encode; keys come out sorted
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object", "additionalProperties": false, "required": required, "properties": props,
	}, "")
	return b
}

func appendUnique(xs []any, s string) []any {
	for _, x := range xs {
		if x == s {
			return xs
		}
	}
	return append(xs, s)
}

// PromptSamples returns the data to render a translate template against
// when it is loaded (prompts.Template.Check): the request of record.Sample,
// re-asked with feedback, and asked the first time (Feedback empty).
func PromptSamples() []any {
	w := toWire(record.Sample())
	return []any{
		promptData{Lang: langName, Data: w, Feedback: []string{`messages[0].content: the answer is not in Traditional Chinese`}},
		promptData{Lang: langName, Data: w},
	}
}
