package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// tools_placement: role (seed 002 §3.1, Fig 1(b)): the tool definitions
// are a message of their own, role "tools", before the system message, in a
// ChatML template; the paper found relevance detection better this way
// than with the definitions in the system role. LLaMA-Factory's templates
// put the tools column into the system turn, so this export is an
// OpenAI-messages JSONL for trainers that apply a chat template of their
// own, with that template beside it.

// chatMessage is one message of a role-placement row.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatTemplateFile is the Jinja chat template of a role-placement export.
const ChatTemplateFile = "chat_template.jinja"

// ChatTemplate renders messages as in seed 002 Fig 1: the tokenizer's BOS,
// then every message as <|im_start|>role\ncontent<|im_end|> with no
// separator between messages (the figure shows none), the "tools" message
// first when there are tools; the generation prompt opens an assistant turn.
// The decision tokens are part of the assistant text, so the tokenizer must
// have <|im_start|>, <|im_end|>, <|answer|> and <|use_tool|> as special
// tokens.
const ChatTemplate = `{#- augment export, tools_placement: role. ChatML with a "tools" role holding the JSON list
    of tool definitions before the system message, and decision tokens at the start of assistant
    turns (MediaTek, seed 002 Fig 1(b), (e), (g)). -#}
{{- bos_token -}}
{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}
`

// roleSample turns a rendered inline sample into a messages row: tools (as
// JSON with ", " and ": " separators, as the figure prints them), system,
// then user / assistant / tool messages.
func (e *exporter) roleSample(ctx context.Context, r *record.Record, s *sample, standIn bool) ([]*record.Record, error) {
	var msgs []chatMessage
	if len(r.Tools) > 0 {
		msgs = append(msgs, chatMessage{"tools", spacedJSON(s.toolsJSON())})
	}
	if s.System != "" {
		msgs = append(msgs, chatMessage{"system", s.System})
	}
	role := map[string]string{"human": "user", "gpt": "assistant", "observation": "tool"}
	for i, t := range s.Conversations {
		name, ok := role[t.From]
		if !ok {
			return nil, contract.Rejectf("export_bad_role", "turn %d: %q has no role in a messages row", i, t.From)
		}
		if name != "tool" && strings.TrimSpace(t.Value) == "" {
			return nil, contract.Rejectf("export_empty_turn", "turn %d (%s) is empty", i, name)
		}
		msgs = append(msgs, chatMessage{name, t.Value})
	}
	if standIn {
		Count(ctx, CounterStandIn, 1)
	}
	var b bytes.Buffer
	appendMessages(&b, msgs)
	return rendered(r, b.Bytes()), nil
}

// spacedJSON is compact JSON in Python's json.dumps layout (a space after
// every ':' and ',' outside strings).
func spacedJSON(compact string) string {
	return string(verify.PyLayout(make([]byte, 0, len(compact)+len(compact)/8), []byte(compact), ""))
}

// appendMessages writes a role-placement row as one JSON line.
func appendMessages(b *bytes.Buffer, msgs []chatMessage) {
	b.WriteString(`{"messages":[`)
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":`)
		writeJSONString(b, m.Role)
		b.WriteString(`,"content":`)
		writeJSONString(b, m.Content)
		b.WriteByte('}')
	}
	b.WriteString("]}\n")
}

// finishRole writes chat_template.jinja and card.json (what the folder
// holds, the template file, how many samples hold stand-in text).
func (e *exporter) finishRole(dir *atomicfs.Root, total manifests.Counts) ([]string, error) {
	if _, err := dir.WriteFile(ChatTemplateFile, []byte(ChatTemplate)); err != nil {
		return nil, err
	}
	card := map[string]any{
		"dataset":         e.cfg.Dataset,
		"files":           e.cfg.Dataset + "/part-*.jsonl",
		"format":          `OpenAI messages ({"messages": [{"role", "content"}]}); roles tools, system, user, assistant, tool`,
		"chat_template":   ChatTemplateFile,
		"tools_placement": "role: the JSON list of tool definitions is the first message, role tools (seed 002 Fig 1(b))",
		"samples":         total.Out,
	}
	notes := []string{fmt.Sprintf("tools_placement role: %s/part-*.jsonl are OpenAI-messages rows for %s (TRL, axolotl); LLaMA-Factory cannot train on them", e.cfg.Dataset, ChatTemplateFile)}
	if n := total.Counters[CounterStandIn]; n > 0 {
		card["stand_in_samples"] = n
		card["stand_in"] = standInText
		notes = append(notes, fmt.Sprintf("stand-in data: %d of %d samples hold offline-teacher output (allow_offline: true); card.json says so", n, total.Out))
	}
	b, err := json.MarshalIndent(card, "", "  ")
	if err != nil {
		return nil, err
	}
	_, err = dir.WriteFile("card.json", append(b, '\n'))
	return notes, err
}
