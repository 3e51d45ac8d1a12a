package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/augmentdata/augment/manifests"
)

// lfcheck is a testscript command: `lfcheck DIR [min]` loads DIR the way
// LLaMA-Factory loads a dataset_dir (dataset_info.json, then every file of
// each dataset's folder) and applies, to every sample, its sharegpt
// converter's rules and then the function and tool formatters of the
// template named by DIR/train_lora.yaml ("default" without one). It fails
// on the first sample LLaMA-Factory would drop or crash on, on a
// get_user_input call whose answer text is missing, on a sample with
// decision tokens where an answer or a call turn lacks its token, on a
// sample whose gpt turns hold calls as text (an inline surface) while its
// tools column lists tools (the template then renders its own tool prompt,
// which asks for another call format), and when fewer than min samples
// (default 1) were found.
//
// It is written from LLaMA-Factory's SharegptDatasetConverter,
// FunctionFormatter, ToolFormatter and tool utils (data/converter.py,
// formatter.py, tool_utils.py, template.py at commit ff6d4d1), with its own
// table of templates, independently of verify.CheckShareGPT and
// verify.LFTemplate (which the exporter uses), so that the two can disagree.
func lfcheck(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: lfcheck DIR [min]")
	}
	dir := ts.MkAbs(args[0])
	min := 1
	if len(args) > 1 {
		fmt.Sscan(args[1], &min)
	}
	st, err := lfCheckDirStats(dir)
	if err == nil && st.samples < min {
		err = fmt.Errorf("%d samples, want at least %d", st.samples, min)
	}
	if neg {
		if err == nil {
			ts.Fatalf("lfcheck: %d samples all valid, want a failure", st.samples)
		}
		return
	}
	if err != nil {
		ts.Fatalf("lfcheck: %v", err)
	}
	ts.Logf("lfcheck: %d samples pass LLaMA-Factory's rules for template %s (%+v)", st.samples, st.template, st)
}

// lfTemplate is what lfcheck knows of a LLaMA-Factory template.
type lfTemplate struct {
	think      [2]string // thought words
	toolFormat string    // tool utils name
	words      bool      // the function formatter gets thought and tool-call words (not the Llama2Template class)
}

var (
	lfDefaultThink   = [2]string{"<think>\n", "\n</think>\n\n"}
	lfCheckTemplates = map[string]lfTemplate{
		"breeze":        {lfDefaultThink, "default", true},
		"chatml":        {lfDefaultThink, "default", true},
		"default":       {lfDefaultThink, "default", true},
		"deepseek3":     {lfDefaultThink, "default", true},
		"deepseekr1":    {lfDefaultThink, "default", true},
		"gemma3":        {lfDefaultThink, "default", false},
		"glm4":          {lfDefaultThink, "glm4", true},
		"glm4_moe":      {lfDefaultThink, "glm4_moe", true},
		"glm4_7":        {[2]string{"<think>", "</think>"}, "glm4_moe", true},
		"llama3":        {lfDefaultThink, "llama3", true},
		"llama4":        {lfDefaultThink, "llama3", true},
		"mistral":       {lfDefaultThink, "mistral", false},
		"mistral_small": {lfDefaultThink, "mistral", true},
		"phi4":          {lfDefaultThink, "default", true},
		"qwen":          {lfDefaultThink, "qwen", true},
		"qwen3":         {lfDefaultThink, "qwen", true},
		"qwen3_nothink": {lfDefaultThink, "qwen", true},
		"qwen3_5":       {lfDefaultThink, "qwen3_5", true},
	}
	lfToolCallRe = regexp.MustCompile(`(?s)` + regexp.QuoteMeta("<tool_call>") + `(.*?)` + regexp.QuoteMeta("</tool_call>"))
	lfDecision   = [2]string{"<|answer|>", "<|use_tool|>"}
)

// lfStats is what lfCheckDirStats saw.
type lfStats struct {
	template      string
	samples       int
	functionCalls int // function_call turns
	withText      int // of them, with text before the calls
	userInput     int // get_user_input calls, each with its answer text
	thoughts      int // turns with a thought in the template's words
	decision      int // samples with decision tokens
	parallel      int // function_call turns with several calls
}

func lfCheckDir(dir string) (int, error) {
	st, err := lfCheckDirStats(dir)
	return st.samples, err
}

func lfCheckDirStats(dir string) (lfStats, error) {
	st := lfStats{template: "default"}
	if b, err := os.ReadFile(filepath.Join(dir, "train_lora.yaml")); err == nil {
		if m := regexp.MustCompile(`(?m)^template: *(\S+)`).FindSubmatch(b); m != nil {
			st.template = string(m[1])
		}
	}
	tpl, ok := lfCheckTemplates[st.template]
	if !ok {
		return st, fmt.Errorf("template %q is not in lfcheck's table", st.template)
	}
	b, err := os.ReadFile(filepath.Join(dir, "dataset_info.json"))
	if err != nil {
		return st, err
	}
	var info map[string]struct {
		FileName   string            `json:"file_name"`
		Formatting string            `json:"formatting"`
		Columns    map[string]string `json:"columns"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return st, fmt.Errorf("dataset_info.json: %w", err)
	}
	for name, d := range info {
		if d.Formatting != "sharegpt" {
			return st, fmt.Errorf("%s: formatting %q", name, d.Formatting)
		}
		msgCol, toolsCol := d.Columns["messages"], d.Columns["tools"]
		if msgCol == "" {
			msgCol = "conversations"
		}
		files, err := filepath.Glob(filepath.Join(dir, d.FileName, "*"))
		if err != nil || len(files) == 0 {
			return st, fmt.Errorf("%s: no files in %s", name, d.FileName)
		}
		ext := filepath.Ext(files[0])
		for _, f := range files {
			if filepath.Ext(f) != ext {
				return st, fmt.Errorf("%s: mixed file types %s and %s (LLaMA-Factory loads one type per folder)", name, ext, filepath.Ext(f))
			}
			if ext != ".jsonl" {
				return st, fmt.Errorf("%s: lfcheck reads jsonl only, got %s", f, ext)
			}
			if err := lfCheckFile(f, msgCol, toolsCol, tpl, &st); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

func lfCheckFile(path, msgCol, toolsCol string, tpl lfTemplate, st *lfStats) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		st.samples++
		var row map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if err := lfCheckSample(row, msgCol, toolsCol, tpl, st); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
	return sc.Err()
}

// lfCheckSample applies the converter's rules (optional leading system
// message; then human|observation at even and gpt|function_call at odd
// positions; an even, non-zero count), the template's function formatter
// on function_call values, its tool formatter on the tools, and the
// get_user_input and decision-token rules.
func lfCheckSample(row map[string]json.RawMessage, msgCol, toolsCol string, tpl lfTemplate, st *lfStats) error {
	var msgs []map[string]any
	if err := json.Unmarshal(row[msgCol], &msgs); err != nil {
		return fmt.Errorf("%s: %v", msgCol, err)
	}
	if len(msgs) > 0 && msgs[0]["from"] == "system" {
		msgs = msgs[1:]
	}
	if len(msgs) == 0 || len(msgs)%2 != 0 {
		return fmt.Errorf("invalid message count %d", len(msgs))
	}
	type said struct {
		from, text string // text: what the model writes besides thought and calls
		reply      bool   // a function_call turn whose calls all ask the user (get_user_input)
	}
	var turns []said
	decision := false
	inline := -1 // the first gpt turn holding calls as text
	for i, m := range msgs {
		from, ok1 := m["from"].(string)
		value, ok2 := m["value"].(string)
		if !ok1 || !ok2 {
			return fmt.Errorf("message %d lacks from/value (KeyError in LLaMA-Factory)", i)
		}
		even := from == "human" || from == "observation"
		odd := from == "gpt" || from == "function_call"
		if (i%2 == 0 && !even) || (i%2 == 1 && !odd) {
			return fmt.Errorf("invalid role tag %q at position %d", from, i)
		}
		var text string
		reply := false
		switch from {
		case "function_call":
			prefix, names, err := lfFunction(value, tpl)
			if err != nil {
				return fmt.Errorf("message %d: %v", i, err)
			}
			st.functionCalls++
			if len(names) > 1 {
				st.parallel++
			}
			thought := lfThought(prefix, tpl)
			if thought != "" {
				st.thoughts++
			}
			text = strings.TrimSpace(strings.TrimPrefix(prefix, thought))
			if text != "" {
				st.withText++
			}
			reply = !slices.ContainsFunc(names, func(n string) bool { return n != "get_user_input" })
			for _, name := range names {
				if name != "get_user_input" {
					continue
				}
				st.userInput++
				answer := strings.TrimSpace(strings.TrimPrefix(text, lfDecision[0]))
				if answer == "" {
					return fmt.Errorf("message %d: get_user_input without the answer text it stands for", i)
				}
			}
		case "gpt":
			thought := lfThought(value, tpl)
			if thought != "" {
				st.thoughts++
			}
			text = strings.TrimPrefix(value, thought)
			if inline < 0 && lfInlineCalls(value) {
				inline = i
			}
		default:
			continue
		}
		if strings.Contains(text, lfDecision[0]) || strings.Contains(text, lfDecision[1]) {
			decision = true
		}
		turns = append(turns, said{from, text, reply})
	}
	if decision {
		st.decision++
		for i, t := range turns {
			// A turn that only asks the user answers: decision_tokens
			// gives it the answer token.
			ok := strings.HasPrefix(t.text, lfDecision[0]) || strings.HasPrefix(t.text, lfDecision[1])
			if t.from == "function_call" {
				ok = strings.HasPrefix(t.text, lfDecision[1])
				if t.reply {
					ok = strings.HasPrefix(t.text, lfDecision[0])
				}
			}
			if !ok {
				return fmt.Errorf("assistant turn %d (%s) of a decision-token sample starts without its token: %.60q", i, t.from, t.text)
			}
		}
	}
	if toolsCol != "" {
		var s string
		if raw, ok := row[toolsCol]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
			if err := lfTools(s, tpl); err != nil {
				return fmt.Errorf("tools: %v", err)
			}
			var list []any
			if inline >= 0 && json.Unmarshal([]byte(s), &list) == nil && len(list) > 0 {
				return fmt.Errorf("message %d holds calls as text, yet the tools column lists %d tools: the template renders its own tool prompt, asking for its call format, not the one the targets use", inline, len(list))
			}
		}
	}
	return nil
}

// lfInlineCalls reports whether a gpt value holds calls written as text by
// an inline surface: <|python_tag|> (llama3), <tool_call> (tool_dc), or a
// use-tool decision token (decision).
func lfInlineCalls(value string) bool {
	return strings.Contains(value, "<|python_tag|>") || strings.Contains(value, "<tool_call>") || strings.HasPrefix(value, lfDecision[1])
}

// lfThought returns the thought that starts s in the template's words, or "".
func lfThought(s string, tpl lfTemplate) string {
	if !strings.HasPrefix(s, tpl.think[0]) {
		return ""
	}
	end := strings.Index(s[len(tpl.think[0]):], tpl.think[1])
	if end < 0 {
		return ""
	}
	return s[:len(tpl.think[0])+end+len(tpl.think[1])]
}

// lfFunction does what FunctionFormatter.apply does with a function_call
// value: the first <tool_call>…</tool_call> block, whose outside is kept
// before the calls; else the first thought (exact thought words) removed;
// then json.loads; then the calls' keys and the tool format's limits. It
// returns the kept text and the call names.
func lfFunction(value string, tpl lfTemplate) (prefix string, names []string, err error) {
	jsonPart := value
	if tpl.words {
		if m := lfToolCallRe.FindStringSubmatch(value); m != nil {
			prefix, jsonPart = strings.ReplaceAll(value, m[0], ""), m[1]
		} else {
			re := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(tpl.think[0]) + `(.*?)` + regexp.QuoteMeta(tpl.think[1]))
			if m := re.FindString(value); m != "" {
				prefix, jsonPart = m, strings.ReplaceAll(value, m, "")
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(jsonPart))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || strings.TrimSpace(jsonPart[dec.InputOffset():]) != "" {
		return "", nil, fmt.Errorf("invalid JSON format in function message: %.80q", value)
	}
	calls, ok := v.([]any)
	if !ok {
		calls = []any{v}
	}
	if len(calls) == 0 {
		return "", nil, fmt.Errorf("empty call list")
	}
	if len(calls) > 1 && tpl.toolFormat == "glm4" {
		return "", nil, fmt.Errorf("GLM-4 does not support parallel functions")
	}
	for _, c := range calls {
		m, ok := c.(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("call is not an object")
		}
		name, ok := m["name"].(string)
		if !ok {
			return "", nil, fmt.Errorf("call without a name")
		}
		if _, ok := m["arguments"].(map[string]any); !ok {
			return "", nil, fmt.Errorf("call %s: arguments is not an object", name)
		}
		names = append(names, name)
	}
	return prefix, names, nil
}

// lfTools does what ToolFormatter.apply does with the tools column: JSON;
// then, for the default tool format, every tool's parameters.properties
// read as an object of objects, required as a container, enum joined as
// strings and items read as an object; glm4 reads every tool's name.
func lfTools(s string, tpl lfTemplate) error {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return fmt.Errorf("invalid JSON format in tool description: %v", err)
	}
	tools, ok := v.([]any)
	if !ok {
		return fmt.Errorf("tools is a %T, not a list", v)
	}
	for i, t := range tools {
		tool, ok := t.(map[string]any)
		if !ok {
			return fmt.Errorf("tool %d is not an object", i)
		}
		if tool["type"] == "function" {
			if tool, ok = tool["function"].(map[string]any); !ok {
				return fmt.Errorf("tool %d: function is not an object", i)
			}
		}
		switch tpl.toolFormat {
		case "glm4":
			if _, ok := tool["name"]; !ok {
				return fmt.Errorf("tool %d has no name", i)
			}
		case "default":
			if err := lfDefaultTool(tool); err != nil {
				return fmt.Errorf("tool %d: %v", i, err)
			}
		}
	}
	return nil
}

func lfDefaultTool(tool map[string]any) error {
	if _, ok := tool["name"].(string); !ok {
		return fmt.Errorf("name is not a string")
	}
	params, ok := tool["parameters"].(map[string]any)
	if !ok {
		return fmt.Errorf("no parameters object")
	}
	props, ok := params["properties"].(map[string]any)
	if !ok {
		return fmt.Errorf("no parameters.properties object")
	}
	if req, ok := params["required"]; ok {
		switch req.(type) {
		case []any, string, map[string]any:
		default:
			return fmt.Errorf("required is a %T", req)
		}
	}
	for name, p := range props {
		param, ok := p.(map[string]any)
		if !ok {
			return fmt.Errorf("property %s is not an object", name)
		}
		if e, ok := param["enum"]; ok && lfTruthy(e) {
			switch x := e.(type) {
			case string, map[string]any:
			case []any:
				for _, m := range x {
					if _, ok := m.(string); !ok {
						return fmt.Errorf("property %s: enum member %v is not a string", name, m)
					}
				}
			default:
				return fmt.Errorf("property %s: enum is a %T", name, e)
			}
		}
		if it, ok := param["items"]; ok && lfTruthy(it) {
			if _, ok := it.(map[string]any); !ok {
				return fmt.Errorf("property %s: items is a %T", name, it)
			}
		}
	}
	return nil
}

// lfTruthy is Python's truth of a decoded JSON value.
func lfTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// lfWriteDir writes a one-dataset LLaMA-Factory directory for template
// holding the given sample lines.
func lfWriteDir(t *testing.T, template string, samples ...string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"dataset_info.json": `{"d": {"file_name": "d", "formatting": "sharegpt", "columns": {"messages": "conversations", "system": "system", "tools": "tools"}}}`,
		"train_lora.yaml":   "dataset: d\ntemplate: " + template + "\n",
		"d/part-0.jsonl":    strings.Join(samples, "\n") + "\n",
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lfSample is one sharegpt line of from, value pairs with tools.
func lfSample(tools string, fv ...string) string {
	var conv []map[string]string
	for i := 0; i+1 < len(fv); i += 2 {
		conv = append(conv, map[string]string{"from": fv[i], "value": fv[i+1]})
	}
	b, _ := json.Marshal(map[string]any{"conversations": conv, "system": "", "tools": tools})
	return string(b)
}

// The checker catches what crashes LLaMA-Factory's formatters or loses what
// the model should learn, and passes the forms the export writes (issues
// 16 and 17).
func TestLFCheckFormatters(t *testing.T) {
	tools := `[{"name": "w", "description": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]`
	call := `{"name": "w", "arguments": {"city": "Paris"}}`
	two := "[" + call + ", " + call + "]"
	gui := `{"name": "get_user_input", "arguments": {}}`
	tests := []struct {
		name, template, sample, err string
	}{
		{"qwen3 thought in its words", "qwen3", lfSample(tools, "human", "q", "function_call", "<think>\nwhy\n</think>\n\n"+call), ""},
		{"qwen3 thought without the newlines (the demo's old export)", "qwen3", lfSample(tools, "human", "q", "function_call", "<think>why</think>"+call), "invalid JSON format"},
		{"glm4_7 thought without newlines", "glm4_7", lfSample(tools, "human", "q", "function_call", "<think>why</think>"+call), ""},
		{"glm4 one call", "glm4", lfSample(tools, "human", "q", "function_call", call, "observation", "sunny", "gpt", "ok"), ""},
		{"glm4 parallel calls", "glm4", lfSample(tools, "human", "q", "function_call", two, "observation", "[1, 2]", "gpt", "ok"), "parallel"},
		{"qwen parallel calls", "qwen", lfSample(tools, "human", "q", "function_call", two, "observation", "[1, 2]", "gpt", "ok"), ""},
		{"get_user_input with its answer", "qwen", lfSample(tools, "human", "q", "function_call", "It is sunny.\n<tool_call>"+gui+"</tool_call>"), ""},
		{"get_user_input without its answer (the old export)", "qwen", lfSample(tools, "human", "q", "function_call", gui), "without the answer text"},
		{"text before calls where the template cannot hold it", "mistral", lfSample(tools, "human", "q", "function_call", "It is sunny.\n<tool_call>"+gui+"</tool_call>"), "invalid JSON format"},
		{"both decision tokens", "qwen", lfSample(tools, "human", "q", "function_call", "<|use_tool|><tool_call>"+call+"</tool_call>", "observation", "sunny", "gpt", "<|answer|>Sunny."), ""},
		{"use_tool dropped from the call turn (the old export)", "qwen", lfSample(tools, "human", "q", "function_call", call, "observation", "sunny", "gpt", "<|answer|>Sunny."), "without its token"},
		{"default tool format needs properties", "default", lfSample(`[{"name": "w", "parameters": {"type": "object"}}]`, "human", "q", "gpt", "a"), "properties"},
		{"qwen tool format does not", "qwen", lfSample(`[{"name": "w", "parameters": {"type": "object"}}]`, "human", "q", "gpt", "a"), ""},
		{"default tool format joins enum members as strings", "default", lfSample(`[{"name": "w", "parameters": {"type": "object", "properties": {"n": {"enum": [1, 2]}}}}]`, "human", "q", "gpt", "a"), "enum"},
		{"role order", "qwen", lfSample(tools, "human", "q", "human", "q"), "invalid role tag"},
		{"inline llama3 calls with the tools column (the old inline export)", "llama3", lfSample(tools, "human", "q", "gpt", `<|python_tag|>[{"name": "w", "parameters": {"city": "Paris"}}]`), "renders its own tool prompt"},
		{"inline decision calls with the tools column", "breeze", lfSample(tools, "human", "q", "gpt", `<|use_tool|>[w(city="Paris")]`), "renders its own tool prompt"},
		{"inline tool_dc calls with the tools column", "qwen", lfSample(tools, "human", "q", "gpt", `<think></think><tool_call>[w(city="Paris")]</tool_call>`), "renders its own tool prompt"},
		{"inline calls with an empty tools column", "qwen", lfSample("[]", "human", "q", "gpt", `<think></think><tool_call>[w(city="Paris")]</tool_call>`), ""},
	}
	for _, tt := range tests {
		_, err := lfCheckDirStats(lfWriteDir(t, tt.template, tt.sample))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.err)
		}
	}
}

// TestExportRefusesStandIn: the demo's exports hold the offline teacher's
// stand-in text; without allow_offline the export stops the run with a
// config error (exit 2) that says so (issue 17, point 3).
func TestExportRefusesStandIn(t *testing.T) {
	demo, err := filepath.Abs("../../testdata/demo/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "-set", "output.dir="+filepath.Join(dir, "out"),
		"-set", "stages.5.export.allow_offline=false", demo)
	if code != 2 || !strings.Contains(stderr, "stand-in output of the offline teacher") || !strings.Contains(stderr, "allow_offline: true") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "05-mt_llama", "dataset_info.json")); err == nil {
		t.Error("the refused export wrote dataset_info.json")
	}
}

// TestLFCheckRealRows runs the real rows of ../shared/data (LLaMA-Factory's
// demos, the derived ToolACE/glaive/xlam dumps, glaive rows, converted
// ToolACE rows) through meta_tool with get_user_input, the offline reason
// stand-ins and decision tokens, and exports them for several templates.
// Every export passes the independent checker for its template; the
// records a template cannot hold are rejected with the rule, not written:
// glm4 parallel calls (split when results follow them), text beside calls
// for mistral.
func TestLFCheckRealRows(t *testing.T) {
	shared := sharedData()
	if shared == "" {
		t.Skip("needs ../shared/data beside the repository (or AUGMENT_SHARED_DATA)")
	}
	var y strings.Builder
	y.WriteString("seed: 3\noutput: {dir: out, shard_size: 500}\nsources:\n")
	for _, s := range [][3]string{
		{"lf_en", "llamafactory/glaive_toolcall_en_demo.json", "sharegpt"},
		{"lf_zh", "llamafactory/glaive_toolcall_zh_demo.json", "sharegpt"},
		{"lf_reason", "llamafactory/reason_tool_use_demo_50.jsonl", "sharegpt"},
		{"toolace_en", "derived/toolace_format_glaive_toolcall_en_demo.json", "toolace"},
		{"glaive_en", "derived/glaive_v2_format_glaive_toolcall_en_demo.json", "glaive"},
		{"xlam_en", "derived/xlam_format_glaive_toolcall_en_demo.json", "xlam"},
		{"glaive_rows", "glaive/glaive_v2_rows_dataflow.jsonl", "glaive"},
		{"toolace_conv", "toolace/toolace_first100_sharegpt_partially_converted.json", "sharegpt"},
	} {
		fmt.Fprintf(&y, "  - {name: %s, path: %q, format: %s}\n", s[0], filepath.Join(shared, s[1]), s[2])
	}
	y.WriteString(`stages:
  - meta_tool: {open_world_ratio: 0.5, hard_ratio: 0.5, min_tools: 5, get_user_input: true}
  - reason: {style: meta_tool}
  - verify: {checks: [roles]}
  - {name: qwen3, export: {template: qwen3, thoughts: true, allow_offline: true}}
  - {name: glm4_split, export: {template: glm4, parallel: split, allow_offline: true}}
  - {name: glm4, export: {template: glm4, allow_offline: true}}
  - {name: llama3, export: {template: llama3, allow_offline: true}}
  - {name: mistral, export: {template: mistral, allow_offline: true}}
  - {name: default, export: {template: default, allow_offline: true}}
  - decision_tokens: {}
  - {name: qwen_decision, export: {template: qwen, allow_offline: true}}
  - {name: glm47_decision, export: {template: glm4_7, thoughts: true, allow_offline: true}}
  - {name: inline_decision, export: {style: inline, surface: decision, template: breeze, allow_offline: true}}
`)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(y.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	out := filepath.Join(dir, "out")
	in := e2eManifest(t, out, "03-verify").Totals.Out
	stats := map[string]lfStats{}
	infos, _ := filepath.Glob(filepath.Join(out, "*", "dataset_info.json"))
	for _, info := range infos {
		stage := filepath.Base(filepath.Dir(info))
		st, err := lfCheckDirStats(filepath.Dir(info))
		if err != nil {
			t.Errorf("%s: %v", stage, err)
		}
		m := e2eManifest(t, out, stage)
		if int64(st.samples) != m.Totals.Out || m.Totals.Out+manifests.Sum(m.Totals.Rejected) != in {
			t.Errorf("%s: %d samples checked, manifest %+v, %d in", stage, st.samples, m.Totals, in)
		}
		stats[stage] = st
		t.Logf("%s: %d of %d records; rejected %v; %+v", stage, st.samples, in, m.Totals.Rejected, st)
	}
	if len(stats) != 9 {
		t.Fatalf("%d exports checked, want 9", len(stats))
	}
	rejected := func(stage string) map[string]int64 { return e2eManifest(t, out, stage).Totals.Rejected }
	for _, stage := range []string{"04-qwen3", "07-llama3", "09-default", "11-qwen_decision", "12-glm47_decision", "13-inline_decision"} {
		if r := rejected(stage); len(r) > 0 {
			t.Errorf("%s rejected %v", stage, r)
		}
	}
	if st := stats["04-qwen3"]; st.userInput == 0 || st.thoughts == 0 || st.parallel == 0 || st.withText < st.userInput {
		t.Errorf("qwen3: %+v", st)
	}
	glm4, split := rejected("06-glm4"), rejected("05-glm4_split")
	if len(glm4) != 1 || glm4["lf_template_no_parallel"] == 0 || len(split) != 1 || split["lf_template_no_parallel"] >= glm4["lf_template_no_parallel"] {
		t.Errorf("glm4 rejected %v; with parallel: split %v", glm4, split)
	}
	if stats["05-glm4_split"].parallel != 0 || stats["06-glm4"].parallel != 0 {
		t.Error("a glm4 export holds parallel calls")
	}
	if r := rejected("08-mistral"); len(r) != 1 || r["lf_template_no_call_text"] == 0 {
		t.Errorf("mistral rejected %v", r)
	}
	for _, stage := range []string{"11-qwen_decision", "12-glm47_decision", "13-inline_decision"} {
		if st := stats[stage]; st.decision != st.samples {
			t.Errorf("%s: %d of %d samples with decision tokens", stage, st.decision, st.samples)
		}
	}
	if st := stats["11-qwen_decision"]; st.userInput == 0 || st.withText != st.functionCalls {
		t.Errorf("qwen with decision tokens: %+v", st)
	}
}
