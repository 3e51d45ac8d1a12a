package stages

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/internal/nodetest"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
)

// fig1Record is seed 002 Fig 1's example: one tool, the default system
// prompt, a weather question and the decision-token call of Fig 1(g).
func fig1Record() *record.Record {
	r := fxRecord("fig1", []record.Tool{fxTool("get_current_weather", "Get the current weather in a given location",
		`{"type":"object","properties":{"location":{"type":"string","description":"The city and state"}},"required":["location"]}`)},
		fxUser("What is the weather like in Boston?"),
		record.Message{Role: record.RoleAssistant, Content: "<|use_tool|>", Calls: []record.Call{{Name: "get_current_weather", Arguments: json.RawMessage(`{"location":"Boston"}`)}}})
	r.System = "You are a helpful assistant."
	return r
}

// Fig 1(b) with the tool's closing brace, which the figure leaves out.
const fig1b = `<s><|im_start|>tools\n[{"name": "get_current_weather", "description": "Get the current weather in a given location", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The city and state"}}, "required": ["location"]}}]<|im_end|><|im_start|>system\nYou are a helpful assistant.<|im_end|><|im_start|>user\nWhat is the weather like in Boston?<|im_end|><|im_start|>assistant\n`

func TestExportToolsRole(t *testing.T) {
	e := buildExport(t, ExportConfig{Style: "inline", Surface: "decision", ToolsPlacement: "role"})
	r := fig1Record()
	out, err := e.Process(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var rendered struct{ Messages []chatMessage }
	if err := json.Unmarshal(out[0].Rendered.([]byte), &rendered); err != nil {
		t.Fatal(err)
	}
	msgs := rendered.Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "tools,system,user,assistant" || msgs[3].Content != `<|use_tool|>[get_current_weather(location="Boston")]` {
		t.Fatalf("messages: %+v", msgs)
	}
	dir, root := tempRoot(t)
	refs, _, err := e.WriteShard(context.Background(), root, "fig-00000", out)
	if err != nil || len(refs) != 1 {
		t.Fatal(refs, err)
	}
	row, _ := os.ReadFile(filepath.Join(dir, refs[0].Path))
	var got struct{ Messages []chatMessage }
	if err := json.Unmarshal(row, &got); err != nil || len(got.Messages) != 4 || got.Messages[0].Content != msgs[0].Content {
		t.Fatalf("row %s: %v", row, err)
	}
	if _, err := e.Finish(root, []manifests.Shard{{Counts: manifests.Counts{In: 1, Out: 1}}}); err != nil {
		t.Fatal(err)
	}
	tpl, err := os.ReadFile(filepath.Join(dir, ChatTemplateFile))
	if err != nil || string(tpl) != ChatTemplate {
		t.Fatalf("%s: %v", ChatTemplateFile, err)
	}
	for _, bad := range []ExportConfig{{ToolsPlacement: "role"}, {Style: "inline", ToolsPlacement: "role", Format: "parquet"}, {ToolsPlacement: "user"}} {
		bad.defaults()
		if len(bad.validate()) == 0 {
			t.Errorf("%+v validates", bad)
		}
	}

	// The template renders the prompt exactly as Fig 1(b), and the
	// completion as Fig 1(g), with @huggingface/jinja when it is installed.
	node, modules := nodetest.Need(t, "AUGMENT_JINJA_NODE_MODULES", "@huggingface/jinja; the chat template is not rendered")
	render := func(msgs []chatMessage, gen bool) string {
		in, _ := json.Marshal(map[string]any{"template": string(tpl), "messages": msgs, "add_generation_prompt": gen, "bos_token": "<s>"})
		cmd := exec.Command(node, filepath.Join("testdata", "jinja_render.mjs"))
		cmd.Env = append(os.Environ(), "AUGMENT_JINJA_NODE_MODULES="+modules)
		cmd.Stdin = strings.NewReader(string(in))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("jinja_render.mjs: %v\n%s", err, stderr.String())
		}
		return string(out)
	}
	want := strings.ReplaceAll(fig1b, `\n`, "\n")
	if got := render(got.Messages[:3], true); got != want {
		t.Errorf("prompt:\n got %q\nwant %q", got, want)
	}
	if got := render(got.Messages, false); got != want+`<|use_tool|>[get_current_weather(location="Boston")]<|im_end|>` {
		t.Errorf("sample:\n got %q", got)
	}
}
