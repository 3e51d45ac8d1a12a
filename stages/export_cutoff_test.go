package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
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
// code at commit ff6d4d1 (converter, template encode_multiturn), its text
// with the special tokens cut out counted with o200k_base, each special
// token one (TestExportCutoffAgainstLLaMAFactory does the same when
// LLaMA-Factory is at hand).
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

// QA: a sample without tools or system text was counted without a system
// turn, 3 tokens under LLaMA-Factory's rendering for llama3, chatml and the
// qwen3 templates: the export writes "[]" as its tools column, and
// LLaMA-Factory's `if system or tools` takes that text as true, so it
// renders an empty system turn. The rendered lengths are facts measured as
// in TestExportCutoffCoversRendering.
func TestExportCountsEmptySystemTurn(t *testing.T) {
	rendered := map[string]int{"llama3": 25, "chatml": 24, "qwen3": 30, "qwen3_5": 30, "qwen3_nothink": 24, "default": 22, "phi4": 21}
	r := fxRecord("fx:plain", nil, fxUser("Hi!"), fxSay("Hello! How can I help?"))
	r.SetTag("tokens", strconv.Itoa(verify.RecordTokens(r)))
	for name, want := range rendered {
		e := buildExport(t, ExportConfig{Template: name})
		out, err := e.Process(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.renderedTokens(renderedSample(t, out[0])); got < want {
			t.Errorf("%s: counted %d tokens, LLaMA-Factory renders %d", name, got, want)
		}
	}
}

// lfSpecial matches the special tokens of LLaMA-Factory's templates, which
// a model's tokenizer reads as one token each.
var lfSpecial = regexp.MustCompile(`<\|[A-Za-z_0-9]+\|>|<BOS>|<EOS>|<｜[^｜]+｜>|\[gMASK\]|<sop>|\[/?INST\]|\[/?TOOL_CALLS\]|\[/?TOOL_RESULTS\]|\[/?AVAILABLE_TOOLS\]|\[/?SYSTEM_PROMPT\]|<start_of_turn>|<end_of_turn>`)

// TestExportCutoffAgainstLLaMAFactory renders the samples of fixture records
// for every template, in function_call and inline style, with LLaMA-Factory's own code (testdata/lf_render.py,
// when AUGMENT_LLAMAFACTORY_PYTHONPATH makes `llamafactory` importable) and
// checks the export's count against the rendering's o200k count (special
// tokens one each): never under, at most a tenth (or 5 tokens) over, and
// within the cutoff_len counted.
func TestExportCutoffAgainstLLaMAFactory(t *testing.T) {
	path := os.Getenv("AUGMENT_LLAMAFACTORY_PYTHONPATH")
	if path == "" {
		t.Skip("AUGMENT_LLAMAFACTORY_PYTHONPATH not set (a PYTHONPATH under which llamafactory.data.template imports); samples are not rendered")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	recs := []*record.Record{fxManyTools(8), fxSingle(), fxParallel(), fxMultiTurn(), fxMetaTool(), fxChat(), fxRecord("fx:plain", nil, fxUser("Hi!"), fxSay("Hello! How can I help?"))}
	var cfgs []ExportConfig
	for _, name := range verify.LFTemplateNames() {
		cfgs = append(cfgs, ExportConfig{Template: name, Parallel: "split"}, ExportConfig{Template: name, Style: "inline"})
	}
	for _, cfg := range cfgs {
		name := cfg.Template
		e := buildExport(t, cfg)
		var in bytes.Buffer
		var samples []*sample
		var cutoffs []int
		for _, r := range recs {
			r = r.Clone()
			r.SetTag("tokens", strconv.Itoa(verify.RecordTokens(r)))
			ctx, ctr := withCounters()
			out, err := e.Process(ctx, r)
			if _, ok := contract.ReasonOf(err); ok {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			s := renderedSample(t, out[0])
			row, _ := json.Marshal(map[string]any{"template": name, "system": s.System, "tools": s.toolsJSON(), "conversations": s.Conversations})
			in.Write(append(row, '\n'))
			samples = append(samples, s)
			for k := range ctr.m {
				if v, ok := strings.CutPrefix(k, counterCutoff); ok {
					c, _ := strconv.Atoi(v)
					cutoffs = append(cutoffs, c)
				}
			}
		}
		cmd := exec.Command(python, filepath.Join("testdata", "lf_render.py"))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+path)
		cmd.Stdin = &in
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: lf_render.py: %v\n%s", name, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(samples) || len(cutoffs) != len(samples) {
			t.Fatalf("%s: %d samples, %d renderings, %d cutoffs", name, len(samples), len(lines), len(cutoffs))
		}
		for i, line := range lines {
			var text string
			if err := json.Unmarshal([]byte(line), &text); err != nil {
				t.Fatal(err)
			}
			want := len(lfSpecial.FindAllString(text, -1))
			for _, part := range lfSpecial.Split(text, -1) {
				want += verify.Tokens(part)
			}
			got := e.renderedTokens(samples[i])
			if got < want || got > want+max(want/10, 5) || cutoffs[i] < want {
				t.Errorf("%s sample %d: counted %d (cutoff_len %d), LLaMA-Factory renders %d tokens", name, i, got, cutoffs[i], want)
			}
		}
	}
}
