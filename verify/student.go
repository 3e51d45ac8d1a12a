package verify

import (
	"fmt"
	"strings"

	"github.com/augmentdata/augment/stages/record"
)

// A Counter counts the tokens of a text, e.g. an *hftok.Tokenizer loaded
// from the student model's tokenizer.json.
type Counter interface{ Count(text string) int }

// Chat templates whose framing StudentTokens counts.
const (
	TemplateNone   = "none"   // the texts alone
	TemplateLlama3 = "llama3" // Llama 3 / 3.1: <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>, tool results as ipython
	TemplateChatML = "chatml" // Qwen 2 / 2.5 / 3: <|im_start|>role\n…<|im_end|>\n, calls in <tool_call>, results in <tool_response>
)

// Templates lists the values StudentTokens accepts.
var Templates = []string{TemplateNone, TemplateLlama3, TemplateChatML}

// StudentTokens counts a record as the student model sees it: the texts of
// RecordTokens (the system prompt with the tools as compact JSON; each
// turn's reasoning, content and calls as compact JSON; tool results),
// framed by the chat template and counted with tok, so the template's
// special tokens count one each when tok lists them. What no template
// string here covers is not counted: the fixed instruction prose some
// templates add around tool definitions (Llama 3.1's "Environment: ipython"
// preamble, Qwen's tool-use instructions) and the generation prompt.
func StudentTokens(r *record.Record, tok Counter, template string) (int, error) {
	system, turns := recordTexts(r)
	var sb strings.Builder
	msg := func(role, text string) {
		switch template {
		case TemplateLlama3:
			fmt.Fprintf(&sb, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", role, text)
		case TemplateChatML:
			fmt.Fprintf(&sb, "<|im_start|>%s\n%s<|im_end|>\n", role, text)
		default:
			sb.WriteString(text)
		}
	}
	switch template {
	case TemplateNone, TemplateChatML:
	case TemplateLlama3:
		sb.WriteString("<|begin_of_text|>")
	default:
		return 0, fmt.Errorf("chat template %q is not one of %s", template, strings.Join(Templates, ", "))
	}
	n := 0
	flush := func() { // count message by message: memory stays one message
		n += tok.Count(sb.String())
		sb.Reset()
	}
	if system != "" {
		msg(record.RoleSystem, system)
		flush()
	}
	for i, m := range r.Messages {
		text := turns[i]
		role := m.Role
		switch {
		case m.Role == record.RoleTool && template == TemplateLlama3:
			role = "ipython"
		case m.Role == record.RoleTool && template == TemplateChatML:
			role = record.RoleUser
			var parts []string
			for _, res := range m.Results {
				parts = append(parts, "<tool_response>\n"+res.Content+"\n</tool_response>")
			}
			text = strings.Join(parts, "\n")
		case m.Role == record.RoleAssistant && template == TemplateChatML && len(m.Calls) > 0:
			text = strings.TrimSuffix(m.Reasoning+"\n"+m.Content, "\n")
			text = strings.TrimPrefix(text, "\n")
			for _, c := range m.Calls {
				if text != "" {
					text += "\n"
				}
				text += "<tool_call>\n" + callJSON(c) + "\n</tool_call>"
			}
		}
		msg(role, text)
		flush()
	}
	return n, nil
}

// recordTexts returns the text of the system message (the system prompt,
// then the tools as a compact JSON list of {name, description, parameters})
// and of every message: an assistant turn's reasoning, content and calls
// (compact JSON {name, arguments}) joined by newlines, a tool turn's results
// joined by newlines, others their content.
func recordTexts(r *record.Record) (string, []string) {
	system := systemText(r)
	texts := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		var parts []string
		for _, s := range []string{m.Reasoning, m.Content} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		for _, c := range m.Calls {
			parts = append(parts, callJSON(c))
		}
		for _, res := range m.Results {
			parts = append(parts, res.Content)
		}
		texts[i] = strings.Join(parts, "\n")
	}
	return system, texts
}
