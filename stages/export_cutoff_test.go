package stages

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// fxManyTools: one call among n tools with nested parameters and no system
// prompt, so that most of its rendering is the tool list.
func fxManyTools(n int) *record.Record {
	var tools []record.Tool
	for i := range n {
		tools = append(tools, record.Tool{
			Name:        fmt.Sprintf("lookup_item_%d", i),
			Description: "Looks up an item of the catalogue by its code.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"The item code."},` +
				`"filter":{"type":"object","properties":{"color":{"type":"string","enum":["red","green","blue"]},"size":{"type":"integer"}}},` +
				`"tags":{"type":"array","items":{"type":"string"}}},"required":["code"]}`),
		})
	}
	return fxRecord("fx:many-tools", tools,
		fxUser("Find item A-113 in green."),
		fxCalls("lookup_item_3", `{"code":"A-113","filter":{"color":"green"}}`),
		fxResults("lookup_item_3", `{"found":true,"stock":4}`),
		fxSay("Item A-113 in green is in stock: 4 left."))
}

// TestExportCutoffCoversRendering: the cutoff_len an export counts for a
// measured sample holds the sample as LLaMA-Factory renders it for the
// template. fxManyTools(8) measures 799 tokens (verify.RecordTokens), for
// which the old rule (the tag and a quarter, to a power of two) gave 1024;
// rendered, it is up to 1717 tokens. The rendered lengths are facts: the
// sample as each export wrote it, rendered by LLaMA-Factory's own data
// code at commit ff6d4d1 (converter, template encode_multiturn) and
// counted with o200k_base, each special token one.
func TestExportCutoffCoversRendering(t *testing.T) {
	rendered := map[string]int{
		"breeze": 644, "chatml": 658, "deepseek3": 643, "deepseekr1": 654, "default": 653, "gemma3": 655,
		"glm4": 1717, "glm4_7": 1280, "glm4_moe": 1286, "llama3": 1700, "llama4": 1700, "mistral": 1148,
		"mistral_small": 1148, "phi4": 657, "qwen": 1271, "qwen3": 1267, "qwen3_5": 1300, "qwen3_nothink": 1255,
	}
	r := fxManyTools(8)
	tag := verify.RecordTokens(r)
	if tag != 799 {
		t.Fatalf("verify counts fxManyTools(8) as %d tokens, the facts above were taken at 799", tag)
	}
	r.SetTag("tokens", strconv.Itoa(tag))
	for _, name := range verify.LFTemplateNames() {
		t.Run(name, func(t *testing.T) {
			want, ok := rendered[name]
			if !ok {
				t.Fatalf("no rendered length recorded for template %s", name)
			}
			e := buildExport(t, ExportConfig{Template: name})
			ctx, ctr := withCounters()
			out, err := e.Process(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			cutoff := 0
			for k := range ctr.m {
				if v, ok := strings.CutPrefix(k, counterCutoff); ok {
					cutoff, _ = strconv.Atoi(v)
				}
			}
			if cutoff < want {
				t.Errorf("cutoff_len %d, but LLaMA-Factory renders the sample as %d tokens (verify counted %d)", cutoff, want, tag)
			}
			// The count is the rendering's, a little over it (each part
			// counted apart), not the tag's nor a blanket margin.
			if got := e.renderedTokens(renderedSample(t, out[0])); got < want || got > want+want/20 {
				t.Errorf("renderedTokens %d, LLaMA-Factory's rendering %d (want within 5 %% above)", got, want)
			}
		})
	}
}
