package verify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// recorder counts runes and keeps every text it was given.
type recorder struct{ texts []string }

func (c *recorder) Count(s string) int { c.texts = append(c.texts, s); return len([]rune(s)) }

func TestStudentTokensFraming(t *testing.T) {
	r := &record.Record{
		System: "Be brief.",
		Tools:  []record.Tool{{Name: "w", Description: "Weather.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
		Messages: []record.Message{
			{Role: record.RoleUser, Content: "Paris?"},
			{Role: record.RoleAssistant, Reasoning: "Look it up.", Calls: []record.Call{{Name: "w", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
			{Role: record.RoleTool, Results: []record.Result{{Name: "w", Content: `{"t":20}`}}},
			{Role: record.RoleAssistant, Content: "20 °C."},
		},
	}
	sys := `Be brief.` + "\n\n" + `[{"name":"w","description":"Weather.","parameters":{"type":"object","properties":{}}}]`
	for _, tc := range []struct {
		template string
		want     []string
	}{
		{TemplateNone, []string{sys, "Paris?", "Look it up.\n" + `{"name":"w","arguments":{"city":"Paris"}}`, `{"t":20}`, "20 °C."}},
		{TemplateLlama3, []string{
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" + sys + "<|eot_id|>",
			"<|start_header_id|>user<|end_header_id|>\n\nParis?<|eot_id|>",
			"<|start_header_id|>assistant<|end_header_id|>\n\nLook it up.\n" + `{"name":"w","arguments":{"city":"Paris"}}` + "<|eot_id|>",
			"<|start_header_id|>ipython<|end_header_id|>\n\n" + `{"t":20}` + "<|eot_id|>",
			"<|start_header_id|>assistant<|end_header_id|>\n\n20 °C.<|eot_id|>",
		}},
		{TemplateChatML, []string{
			"<|im_start|>system\n" + sys + "<|im_end|>\n",
			"<|im_start|>user\nParis?<|im_end|>\n",
			"<|im_start|>assistant\nLook it up.\n<tool_call>\n" + `{"name":"w","arguments":{"city":"Paris"}}` + "\n</tool_call><|im_end|>\n",
			"<|im_start|>user\n<tool_response>\n" + `{"t":20}` + "\n</tool_response><|im_end|>\n",
			"<|im_start|>assistant\n20 °C.<|im_end|>\n",
		}},
	} {
		c := &recorder{}
		n, err := StudentTokens(r, c, tc.template)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(c.texts, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s:\n got %q\nwant %q", tc.template, c.texts, tc.want)
		}
		if want := len([]rune(strings.Join(tc.want, ""))); n != want {
			t.Errorf("%s: %d, want %d", tc.template, n, want)
		}
	}
	if _, err := StudentTokens(r, &recorder{}, "mistral"); err == nil {
		t.Error("an unknown template must fail")
	}
}
