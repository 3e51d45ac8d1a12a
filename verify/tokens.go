package verify

import (
	"encoding/json"
	"sync"

	"github.com/tiktoken-go/tokenizer"

	"github.com/augmentdata/augment/stages/record"
)

// TokenEncoding is the BPE that Tokens counts with. It is OpenAI's, not the
// trained model's (Llama, Qwen): counts are for budgets and length filters,
// typically within 10–20% of the student's tokenizer on English and JSON.
const TokenEncoding = "o200k_base"

// encoder loads the BPE once, from tables compiled into the binary (no
// network). tiktoken-go/tokenizer counts the same tokens as the reference
// tiktoken-go and is about 2.7 times faster here.
var encoder = sync.OnceValue(func() tokenizer.Codec {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		// The tables are compiled in; failing to load them is a build
		// defect, not a data problem.
		panic("verify: loading the " + TokenEncoding + " tables: " + err.Error())
	}
	return enc
})

// Tokens counts the tokens of text in the o200k_base encoding. Special-token
// text such as "<|endoftext|>" is counted as ordinary text. Safe for
// concurrent use; the first call loads the tables.
func Tokens(text string) int {
	if text == "" {
		return 0
	}
	n, err := encoder().Count(text)
	if err != nil {
		return 0
	}
	return n
}

// Per-message framing of chat templates (role header and end marker) and
// the reply primer, as in OpenAI's published counting recipe.
const (
	tokensPerMessage = 3
	tokensReply      = 3
)

// RecordTokens counts a whole record as a chat model would see it, by
// OpenAI's recipe: each message costs tokensPerMessage plus its role and its
// text; the system message holds the system prompt followed by the tools as
// a compact JSON list of {"name", "description", "parameters"}; an assistant
// turn's text is its reasoning, content and each call as compact JSON
// {"name", "arguments"}; a tool turn's text is its results' contents; the
// reply primer adds tokensReply. Template-specific wrappers (Llama 3's
// tool preamble, Qwen's <tool_call> tags) are not counted, so the figure is
// a slight underestimate for those templates.
func RecordTokens(r *record.Record) int {
	n := tokensReply
	system := r.System
	if len(r.Tools) > 0 {
		type tool struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Parameters  any    `json:"parameters"`
		}
		ts := make([]tool, len(r.Tools))
		for i, t := range r.Tools {
			ts[i] = tool{Name: t.Name, Description: t.Description, Parameters: rawOrString(t.Parameters)}
		}
		if b, err := marshal(ts); err == nil {
			if system != "" {
				system += "\n\n"
			}
			system += string(b)
		}
	}
	if system != "" {
		n += tokensPerMessage + Tokens(record.RoleSystem) + Tokens(system)
	}
	for _, m := range r.Messages {
		n += tokensPerMessage + Tokens(m.Role) + Tokens(m.Content) + Tokens(m.Reasoning)
		for _, c := range m.Calls {
			n += Tokens(callJSON(c))
		}
		for _, res := range m.Results {
			n += Tokens(res.Content)
		}
	}
	return n
}

// rawOrString keeps valid JSON as it is and turns anything else into a JSON
// string, so that marshalling never fails on bad data.
func rawOrString(b []byte) any {
	if len(b) == 0 {
		return map[string]any{}
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}
