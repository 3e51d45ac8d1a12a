package verify

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

func mustTemplate(t testing.TB, name string) *LFTemplate {
	t.Helper()
	tpl, ok := LookupLFTemplate(name)
	if !ok {
		t.Fatalf("no template %q", name)
	}
	return tpl
}

// ReadFunction follows LLaMA-Factory's FunctionFormatter: the tool-call
// block first (its outside is kept as text), else the exact thought words,
// then JSON, then the tool format's limits.
func TestLFTemplateReadFunction(t *testing.T) {
	one := `{"name": "w", "arguments": {"city": "Paris"}}`
	two := "[" + one + ", " + one + "]"
	tests := []struct {
		tpl, value string
		prefix     string // want, when err is ""
		calls      int
		err        string // substring of the error; "" for none
	}{
		{"qwen", one, "", 1, ""},
		{"qwen", "  " + two + "\n", "", 2, ""},
		{"qwen3", "<think>\nwhy\n</think>\n\n" + one, "<think>\nwhy\n</think>\n\n", 1, ""},
		{"qwen3", "<think>why</think>" + one, "", 0, "not JSON"},
		{"glm4_7", "<think>why</think>" + one, "<think>why</think>", 1, ""},
		{"qwen", "<|use_tool|><tool_call>" + one + "</tool_call>", "<|use_tool|>", 1, ""},
		{"qwen3", "<think>\nwhy\n</think>\n\nI will look.\n<tool_call>" + two + "</tool_call>", "<think>\nwhy\n</think>\n\nI will look.\n", 2, ""},
		// The outside of the block is kept wherever it is.
		{"llama3", "<tool_call>" + one + "</tool_call>after", "after", 1, ""},
		// Llama2Template-class templates parse the whole value.
		{"mistral", one, "", 1, ""},
		{"mistral", "<|use_tool|><tool_call>" + one + "</tool_call>", "", 0, "not JSON"},
		{"gemma3", "<think>\nwhy\n</think>\n\n" + one, "", 0, "not JSON"},
		// The block ends at the first close word, even inside a string.
		{"qwen", `<tool_call>{"name": "w", "arguments": {"q": "</tool_call>"}}</tool_call>`, "", 0, "not JSON"},
		{"glm4", two, "", 0, "parallel"},
		{"glm4", "[" + one + "]", "", 1, ""},
		{"qwen", one + "]", "", 0, "not JSON"},
		{"qwen", "[]", "", 0, "empty list"},
		{"qwen", `{"name": "w"}`, "", 0, `no "arguments"`},
		{"qwen", `{"name": "w", "arguments": "{}"}`, "", 0, "must be a JSON object"},
		{"qwen", `{"arguments": {}}`, "", 0, `no "name"`},
		{"qwen", `["w"]`, "", 0, "must be a JSON object"},
		// json.loads reads 1e400 as inf, json.dumps writes Infinity.
		{"qwen", `{"name": "w", "arguments": {"n": 1e400}}`, "", 0, "hold 1e400, beyond a float's range"},
		{"qwen", `{"name": "w", "arguments": {"n": 1e308, "big": 123456789012345678901234567890}}`, "", 1, ""},
	}
	for _, tt := range tests {
		ft, err := mustTemplate(t, tt.tpl).ReadFunction(tt.value)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s %q: %v", tt.tpl, tt.value, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s %q: error %v, want %q", tt.tpl, tt.value, err, tt.err)
		case tt.err == "" && (ft.Prefix != tt.prefix || len(ft.Calls) != tt.calls):
			t.Errorf("%s %q: prefix %q, %d calls; want %q, %d", tt.tpl, tt.value, ft.Prefix, len(ft.Calls), tt.prefix, tt.calls)
		}
	}
}

// The default tool format reads parameters.properties of every tool; the
// JSON-dumping formats take any named tool object.
func TestLFTemplateCheckTools(t *testing.T) {
	tests := []struct {
		tpl, tools string
		ok         bool
		msg        string // in the error, when given
	}{
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]}},"required":["a"]}}]`, true, ""},
		{"default", `[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]`, true, ""},
		{"default", `[]`, true, ""},
		{"default", `[{"name":"f","parameters":{"type":"object"}}]`, false, ""},
		{"qwen", `[{"name":"f","parameters":{"type":"object"}}]`, true, ""},
		{"default", `[{"name":"f"}]`, false, ""},
		{"llama3", `[{"name":"f"}]`, true, ""},
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"a":"string"}}}]`, false, ""},
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"a":{"enum":[1,2]}}}}]`, false, ""},
		{"qwen", `[{"name":"f","parameters":{"type":"object","properties":{"a":{"enum":[1,2]}}}}]`, true, ""},
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"a":{"enum":[]}}}}]`, true, ""},
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"a":{"items":["x"]}}}}]`, false, ""},
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{},"required":null}}]`, false, ""},
		{"glm4", `{"name":"f"}`, false, ""},
		// The first property the formatter cannot render, in document order.
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"z":{"type":"string"},"b":"string","a":"string"}}}]`, false, `tool 0: property "b" is not an object`},
		{"default", `[{"name":"f","parameters":{"type":"object","properties":{"z":{"enum":[1]},"b":{"items":[1]}}}}]`, false, `tool 0: property "z": enum member 1 is not a string`},
	}
	for _, tt := range tests {
		err := mustTemplate(t, tt.tpl).CheckTools(tt.tools)
		if (err == nil) != tt.ok || tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)) {
			t.Errorf("%s %s: %v, want ok=%v %s", tt.tpl, tt.tools, err, tt.ok, tt.msg)
		}
	}
}

func FuzzLFTemplateReadFunction(f *testing.F) {
	f.Add("qwen3", "<think>\nr\n</think>\n\n{\"name\": \"f\", \"arguments\": {}}")
	f.Add("qwen", "t<tool_call>[{\"name\": \"f\", \"arguments\": {}}]</tool_call>")
	f.Add("glm4", "[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]")
	f.Fuzz(func(t *testing.T, name, value string) {
		tpl, ok := LookupLFTemplate(name)
		if !ok {
			tpl = mustTemplate(t, "qwen3")
		}
		ft, err := tpl.ReadFunction(value)
		if err != nil {
			return
		}
		if len(ft.Calls) == 0 || len(ft.Calls) > 1 && !tpl.Parallel() {
			t.Fatalf("%d calls accepted for %s", len(ft.Calls), tpl.Name)
		}
		for _, c := range ft.Calls {
			if rawKind(c.Arguments) != "object" || strings.TrimSpace(c.Name) == "" {
				t.Fatalf("bad call accepted: %+v", c)
			}
		}
		if len(ft.Prefix) > len(value) {
			t.Fatalf("prefix longer than the value")
		}
	})
}

// The README's table of templates is LFTemplates, row for row.
func TestREADMETemplateTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const open, end = "<!-- lf-templates", "<!-- /lf-templates -->"
	i, j := strings.Index(string(b), open), strings.Index(string(b), end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %s … %s block", open, end)
	}
	lines := strings.Split(strings.TrimSpace(string(b[i:j])), "\n")
	if len(lines) < 3 {
		t.Fatalf("README.md template table: %q", lines)
	}
	got := strings.Join(lines[3:], "\n")
	want := strings.Join(templateRows(), "\n")
	if got != want {
		t.Errorf("README.md's template table is not verify.LFTemplates; want these rows:\n%s", want)
	}
}

func templateRows() []string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	words := func(w [2]string) string {
		q := func(s string) string { return "`" + strings.Trim(strconv.Quote(s), `"`) + "`" }
		return q(w[0]) + " … " + q(w[1])
	}
	var rows []string
	for _, tpl := range LFTemplates() {
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s | `%s` | %s | %s |", tpl.Name, yes(tpl.Reasoning), words(tpl.ThoughtWords),
			tpl.ToolFormat, yes(tpl.Parallel()), yes(tpl.CallText)))
	}
	return rows
}

// FuzzSplitsAs holds SplitsAs to SplitFunction for every template: it is
// true exactly for SplitFunction's own answer, and for no other prefix or
// JSON part (nor ones off by a byte).
func FuzzSplitsAs(f *testing.F) {
	for _, v := range []string{`{"name": "a", "arguments": {}}`, "hi\n<tool_call>{\"name\": \"a\"}</tool_call>",
		"<|answer|><tool_call>[{}]</tool_call> x <tool_call>y</tool_call>", "<think>\nr\n</think>\n\n{}",
		"a<think>b</think>c<think>b</think>", "<tool_call></tool_call><tool_call></tool_call>", "", "<tool_call>", "</tool_call>"} {
		f.Add(v, "", "")
	}
	f.Fuzz(func(t *testing.T, value, prefix, jsonPart string) {
		for _, tpl := range LFTemplates() {
			p, j := tpl.SplitFunction(value)
			if !tpl.SplitsAs(value, p, j) {
				t.Fatalf("%s: SplitsAs(%q, %q, %q) false for SplitFunction's own answer", tpl.Name, value, p, j)
			}
			if got, want := tpl.SplitsAs(value, prefix, jsonPart), p == prefix && j == jsonPart; got != want {
				t.Fatalf("%s: SplitsAs(%q, %q, %q) = %v; SplitFunction gives %q, %q", tpl.Name, value, prefix, jsonPart, got, p, j)
			}
			for _, q := range []string{p + "x", p + "<tool_call>", strings.TrimSuffix(p, p[max(len(p)-1, 0):])} {
				if q != p && tpl.SplitsAs(value, q, j) {
					t.Fatalf("%s: SplitsAs(%q, %q, %q) true; SplitFunction gives prefix %q", tpl.Name, value, q, j, p)
				}
			}
		}
	})
}

// TestCutAllIs holds cutAllIs to strings.ReplaceAll.
func TestCutAllIs(t *testing.T) {
	ss := []string{"", "a", "ab", "aab", "abab", "ba", "aaa", "xabyabz", "<t>x</t>y<t>x</t>"}
	for _, s := range ss {
		for _, old := range []string{"", "a", "ab", "aa", "<t>x</t>"} {
			for _, want := range append(ss, "xyz", "y", "b", "bb", "aab") {
				if got, ok := cutAllIs(s, old, want), strings.ReplaceAll(s, old, "") == want; got != ok {
					t.Errorf("cutAllIs(%q, %q, %q) = %v, want %v", s, old, want, got, ok)
				}
			}
		}
	}
}

// propertyOrder reads wide tools (a set past 64 properties) as narrow
// ones: names in document order, none when a name repeats.
func TestPropertyOrderWide(t *testing.T) {
	params := func(n int, extra string) json.RawMessage {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
		}
		b.WriteString(extra + "}}")
		return json.RawMessage(b.String())
	}
	for _, n := range []int{3, 64, 65, 5000} {
		names, kinds := propertyOrder(params(n, ""))
		if len(names) != n || names[n-1] != fmt.Sprintf("p%d", n-1) || kinds[0] != "object" {
			t.Errorf("%d properties: %d names, last %q", n, len(names), names[len(names)-1])
		}
		if names, _ := propertyOrder(params(n, `,"p0":{}`)); names != nil {
			t.Errorf("%d properties and a repeat: %d names, want none", n, len(names))
		}
	}
}
