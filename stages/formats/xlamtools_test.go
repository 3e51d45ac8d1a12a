package formats

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// readsDirect reports whether the row parser took row's tool list and
// answers through xlamLiteral.
func readsDirect(t *testing.T, row []byte) bool {
	t.Helper()
	tools, calls := direct2(row)
	return tools && calls
}

// direct2 reports whether the row parser took row's tool list, and its
// answers, through xlamLiteral.
func direct2(row []byte) (tools, calls bool) {
	w := workspaces.New().(*workspace)
	p := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena, Embedded: xlamEmbedded, Literal: w.literal}
	if _, err := p.Parse(); err != nil {
		return false, false
	}
	return w.rowTools != nil, w.haveCalls
}

// xlamTool is a tool list of one tool, f, with the parameters params.
func xlamTool(params string) string {
	return `[{"name": "f", "description": "d", "parameters": ` + params + `}]`
}

// xlamCall is answers of one call of f.
const xlamCall = `[{"name": "f", "arguments": {"a": 1}}]`

// A takenCase is an xlam row of the tools and answers given, and whether
// a reader takes each.
type takenCase struct {
	name           string
	tools, answers string
	takeTools      bool
	takeCalls      bool
}

// checkTaken checks that each case's row gives the same record or reject
// every way (sameEveryWay), and that read (direct2, laid2) takes its tools
// and answers as the case says.
func checkTaken(t *testing.T, who string, read func(row []byte) (tools, calls bool), cases []takenCase) {
	t.Helper()
	for _, c := range cases {
		row := rowJSON("id", 7, "query", "q", "answers", c.answers, "tools", c.tools)
		sameEveryWay(t, "xlam", row)
		tools, calls := read([]byte(row))
		if tools != c.takeTools || calls != c.takeCalls {
			t.Errorf("%s: %s tools %v, calls %v; want %v, %v", c.name, who, tools, calls, c.takeTools, c.takeCalls)
		}
	}
}

// TestXLAMDirect holds the direct reader to the tree on rows at the edges
// of what it takes: each row gives the same record or reject all three
// ways (sameEveryWay), and the reader takes or leaves the tools and the
// answers as listed.
func TestXLAMDirect(t *testing.T) {
	tool, call := xlamTool, xlamCall
	checkTaken(t, "direct", direct2, []takenCase{
		{"flat, every kind of type", tool(`{"a": {"description": "x", "type": "str"}, "b": {"type": "List[int]"}, "c": {"type": "Optional[Dict[str, Any]]"}, "d": {"type": "Union[int, float], optional", "default": 1.50}, "e": {"type": "integer"}, "f": {"type": "Tuple[float, float]"}, "g": {"type": "weird thing"}, "h": {}}`), call, true, true},
		{"defaults of every kind", tool(`{"a": {"type": "str", "default": {"k": [1, "two", null, true, false, -0.5e3]}}, "b": {"default": "with \"quotes\", \\ and\nlines\t/"}}`), call, true, true},
		{"escapes in names and descriptions", `[{"name": "f", "description": "say \"hi\"\n\tnow \/ \\", "parameters": {"x\"y": {"description": "\\"}}}]`, call, true, true},
		{"Chinese text", `[{"name": "f", "description": "生成发票", "parameters": {"客户": {"description": "客户名称", "type": "str"}}}]`, `[{"name": "f", "arguments": {"客户": "约翰"}}]`, true, true},
		{"no parameters, empty map, empty list", `[{"name": "f"}, {"name": "g", "parameters": {}}]`, `[]`, true, true},
		{"no tools", `[]`, `[]`, true, true},
		{"a parameter called type", tool(`{"type": {"type": "str"}}`), call, true, true},
		{"the same tool twice", `[{"name": "f", "parameters": {}}, {"name": "f", "parameters": {}}]`, call, true, true},
		{"a parameter called properties", tool(`{"properties": {"type": "str"}}`), call, false, true},
		{"a JSON Schema", tool(`{"type": "object", "properties": {"a": {"type": "string"}}}`), call, false, true},
		{"a sub-schema", tool(`{"a": {"type": "array", "items": {"type": "str"}}}`), call, false, true},
		{"required in a parameter", tool(`{"a": {"type": "str", "required": true}}`), call, false, true},
		{"required null in a parameter", tool(`{"a": {"type": "str", "required": null}}`), call, false, true},
		{"a type list", tool(`{"a": {"type": ["str", "null"]}}`), call, false, true},
		{"parameters null", tool(`null`), call, false, true},
		{"parameters a list", tool(`[1]`), call, false, true},
		{"a parameter not an object", tool(`{"a": "str"}`), call, false, true},
		{"an OpenAI tool", `[{"type": "function", "function": {"name": "f", "parameters": {}}}]`, call, false, true},
		{"a tool-level required", `[{"name": "f", "parameters": {"a": {"type": "str"}}, "required": ["a"]}]`, call, false, true},
		{"a tool without a name", `[{"description": "d"}]`, call, false, true},
		{"an empty name", `[{"name": ""}]`, call, false, true},
		{"a description null", `[{"name": "f", "description": null}]`, call, false, true},
		{"a duplicate key", `[{"name": "f", "name": "g"}]`, call, false, true},
		{"a duplicate parameter", tool(`{"a": {}, "a": {}}`), call, false, true},
		{"a \\u escape", `[{"name": "f", "description": "caf\u00e9"}]`, call, false, true},
		{"not JSON", `[{"name": "f"`, `[{`, false, false},
		{"tools an object", `{"name": "f"}`, call, false, true},
		{"arguments in a string", tool(`{}`), `[{"name": "f", "arguments": "{"a": 1}"}]`, true, false},
		{"arguments missing", tool(`{}`), `[{"name": "f"}]`, true, false},
		{"another member in a call", tool(`{}`), `[{"name": "f", "arguments": {}, "id": 1}]`, true, false},
		{"a duplicate key in the arguments", tool(`{}`), `[{"name": "f", "arguments": {"a": 1, "a": 2}}]`, true, false},
		{"deep arguments", tool(`{}`), `[{"name": "f", "arguments": {"a": [[[[[[[[[[[{"b": []}]]]]]]]]]]]}}]`, true, true},
		{"an undeclared call", tool(`{}`), `[{"name": "g", "arguments": {}}]`, true, true},
		{"a call by another spelling", `[{"name": "to-do"}]`, `[{"name": "TO_DO", "arguments": {}}]`, true, true},
	})
	// Invalid UTF-8 and a raw control character are the one-pass
	// decoder's to leave.
	for _, row := range []string{
		`{"id": 1, "query": "q", "answers": "[]", "tools": "[{"name": "fÿ"}]"}`,
		`{"id": 1, "query": "q", "answers": "[]", "tools": "[{"name": "f` + "	" + `"}]"}`,
	} {
		sameEveryWay(t, "xlam", row)
		if tools, _ := direct2([]byte(row)); tools {
			t.Errorf("%q: read directly", row)
		}
	}
}

// xlamSampleRows are the fixture's xlam rows and, when the shared data is
// there, the shared xlam dumps' rows (the bench harness's).
func xlamSampleRows(t *testing.T) [][]byte {
	t.Helper()
	rows := fixtureRows(t, "xlam.json")
	if dir := sharedDataOrEmpty(); dir != "" {
		for _, lang := range []string{"en", "zh"} {
			data, err := os.ReadFile(filepath.Join(dir, "derived", "xlam_format_glaive_toolcall_"+lang+"_demo.json"))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, scanRows(t, data)...)
		}
	}
	return rows
}

// TestXLAMDirectTaken checks that the direct reader takes the tool lists
// of the fixture and of the shared dumps' rows (the bench harness's), not
// only that it agrees with the tree when it does.
func TestXLAMDirectTaken(t *testing.T) {
	rows := xlamSampleRows(t)
	n := 0
	for _, row := range rows {
		if readsDirect(t, row) {
			n++
		}
		sameEveryWay(t, "xlam", string(row))
	}
	t.Logf("%d of %d rows read directly", n, len(rows))
	if n < len(rows)*9/10 {
		t.Errorf("only %d of %d rows read directly", n, len(rows))
	}
}

func sharedDataOrEmpty() string {
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data")
	}
	if _, err := os.Stat(filepath.Join(dir, "FORMATS.md")); err != nil {
		return ""
	}
	return dir
}

// laid2 reports whether the readers of json.dumps's layout (laidTools,
// laidCalls) take row's tool list, and its answers.
func laid2(row []byte) (tools, calls bool) {
	w := workspaces.New().(*workspace)
	p := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena, Embedded: xlamEmbedded, Literal: func(k string, r jsontree.Inner) (jsontree.Value, bool) {
		ok := false
		switch k {
		case "tools":
			_, ok = w.laidTools(r)
			tools = ok
		case "answers":
			_, ok = w.laidCalls(r)
			calls = ok
		}
		return jsontree.Value{Kind: jsontree.Array}, ok
	}}
	if _, err := p.Parse(); err != nil {
		return false, false
	}
	return tools, calls
}

// TestXLAMLaid holds the readers of json.dumps's layout to the others on
// rows at the edges of what they take (sameEveryWay compares every way),
// and checks which they take.
func TestXLAMLaid(t *testing.T) {
	tool, call := xlamTool, xlamCall
	checkTaken(t, "laid", laid2, []takenCase{
		{"every kind of type", tool(`{"a": {"description": "x", "type": "str"}, "b": {"type": "List[int]"}, "c": {"type": "Optional[Dict[str, Any]]"}, "d": {"type": "Union[int, float], optional", "default": 1.50}, "e": {"type": "integer"}, "f": {"type": "Tuple[float, float]"}, "g": {"type": "weird thing"}, "h": {}, "i": {"type": "STR, Optional"}}`), call, true, true},
		{"defaults of every kind", tool(`{"a": {"type": "str", "default": {"k": [1, "two", null, true, false, -0.5e3]}}, "b": {"default": ""}, "c": {"default": "x", "description": "y"}}`), call, true, true},
		{"two tools, two calls", `[{"name": "f", "description": "", "parameters": {}}, {"name": "g", "description": "生成发票", "parameters": {"客户": {"type": "str, optional", "default": "约翰"}}}]`, `[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"客户": {"a": [{"b": []}]}}}]`, true, true},
		{"no tools, no calls", `[]`, `[]`, true, true},
		{"the same tool twice", `[{"name": "f", "description": "", "parameters": {}}, {"name": "f", "description": "", "parameters": {}}]`, call, true, true},
		{"a parameter called type", tool(`{"type": {"type": "str"}}`), call, true, true},
		{"an undeclared call", tool(`{}`), `[{"name": "g", "arguments": {}}]`, true, true},
		// The Inner readers' (or the tree's), not these:
		{"another layout", `[{"name":"f","description":"d","parameters":{}}]`, `[{"name":"f","arguments":{}}]`, false, false},
		{"members in another order", `[{"description": "d", "name": "f", "parameters": {}}]`, `[{"arguments": {}, "name": "f"}]`, false, false},
		{"no description", `[{"name": "f", "parameters": {}}]`, call, false, true},
		{"an escape in a description", tool(`{}`)[:len(`[{"name": "f", "description": "`)] + `say \"hi\"", "parameters": {}}]`, call, false, true},
		{"an escape in a value", tool(`{}`), `[{"name": "f", "arguments": {"a": "x\ny"}}]`, true, false},
		{"a parameter called properties", tool(`{"properties": {"type": "str"}}`), call, false, true},
		{"a duplicate parameter", tool(`{"a": {}, "a": {}}`), call, false, true},
		{"a duplicate member", tool(`{"a": {"type": "str", "type": "int"}}`), call, false, true},
		{"another parameter member", tool(`{"a": {"type": "str", "enum": ["x"]}}`), call, false, true},
		{"a sub-schema", tool(`{"a": {"type": "array", "items": {"type": "str"}}}`), call, false, true},
		{"a type not a string", tool(`{"a": {"type": ["str", "null"]}}`), call, false, true},
		{"an empty name", `[{"name": "", "description": "", "parameters": {}}]`, `[{"name": "", "arguments": {}}]`, false, false},
		{"arguments in a string", tool(`{}`), `[{"name": "f", "arguments": "{}"}]`, true, false},
		{"a duplicate argument", tool(`{}`), `[{"name": "f", "arguments": {"a": 1, "a": 2}}]`, true, false},
		{"another member in a call", tool(`{}`), `[{"name": "f", "arguments": {}, "id": 1}]`, true, false},
		{"a \\u escape", tool(`{}`), `[{"name": "f", "arguments": {"a": "caf\u00e9"}}]`, true, false},
		// At the nesting limit, counted from the text's top as the others
		// count it (a default is four levels down, arguments two).
		{"a default nested to the limit", tool(`{"a": {"default": ` + nested(508) + `}}`), call, true, true},
		{"a default nested past the limit", tool(`{"a": {"default": ` + nested(509) + `}}`), call, false, true},
		{"arguments nested to the limit", tool(`{}`), `[{"name": "f", "arguments": {"a": ` + nested(509) + `}}]`, true, true},
		{"arguments nested past the limit", tool(`{}`), `[{"name": "f", "arguments": {"a": ` + nested(510) + `}}]`, true, false},
	})
	// White space at the literal's end, invalid UTF-8 and a raw control
	// character are left to the others.
	for _, row := range []string{
		`{"id": 1, "query": "q", "answers": "[] ", "tools": "[]\n"}`,
		`{"id": 1, "query": "q", "answers": "[]", "tools": "[{\"name\": \"f` + "\xff" + `\", \"description\": \"\", \"parameters\": {}}]"}`,
		`{"id": 1, "query": "q", "answers": "[]", "tools": "[{\"name\": \"f` + "\t" + `\", \"description\": \"\", \"parameters\": {}}]"}`,
	} {
		sameEveryWay(t, "xlam", row)
		if tools, _ := laid2([]byte(row)); tools {
			t.Errorf("%q: read by its layout", row)
		}
	}
}

// nested is n arrays, one inside the other.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestXLAMLaidTaken checks that the readers of json.dumps's layout take
// the tool lists and answers of the fixture and of the shared dumps' rows
// (the bench harness's).
func TestXLAMLaidTaken(t *testing.T) {
	rows := xlamSampleRows(t)
	n := 0
	for _, row := range rows {
		if tools, calls := laid2(row); tools && calls {
			n++
		}
	}
	t.Logf("%d of %d rows read by their layout", n, len(rows))
	if n < len(rows)*9/10 {
		t.Errorf("only %d of %d rows read by their layout", n, len(rows))
	}
}

// laidToolsWith reads the tool list of the xlam row with laidTools and
// the workspace w (whose memo carries over from row to row): the tools,
// and whether laidTools took the list.
func laidToolsWith(w *workspace, row []byte) ([]record.Tool, bool) {
	var tools []record.Tool
	took := false
	p := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena, Embedded: xlamEmbedded, Literal: func(k string, r jsontree.Inner) (jsontree.Value, bool) {
		if k != "tools" {
			return jsontree.Value{}, false
		}
		ts, ok := w.laidTools(r)
		took, tools = ok, slices.Clone(ts)
		return jsontree.Value{Kind: jsontree.Array}, ok
	}}
	if _, err := p.Parse(); err != nil {
		return nil, false
	}
	w.json = w.json[:0]
	return tools, took
}

// TestXLAMToolMemo reads rows one after another with one workspace, so
// that laidTool meets tools it read before (its memo): each row's tools
// are what the two passes read, a tool read again comes from the memo,
// and text that only starts like a remembered tool, or differs from it
// after its name, is read as it stands.
func TestXLAMToolMemo(t *testing.T) {
	w := workspaces.New().(*workspace)
	row := func(tools string) string {
		q, _ := json.Marshal(tools)
		return `{"id": 1, "query": "q", "answers": "[]", "tools": ` + string(q) + `}`
	}
	fromMemo := func(tl record.Tool) bool {
		for _, m := range w.toolMemo[tl.Name] {
			if unsafe.StringData(m.tool.Name) == unsafe.StringData(tl.Name) {
				return true
			}
		}
		return false
	}
	f := `{"name": "f", "description": "d", "parameters": {"a": {"type": "str", "description": "x"}}}`
	fOther := `{"name": "f", "description": "d", "parameters": {"a": {"type": "int", "description": "x"}}}`
	g := `{"name": "g", "description": "生成", "parameters": {"b": {"type": "List[int], optional", "default": [1]}}}`
	for _, c := range []struct {
		name  string
		tools string
		took  bool
		memo  []bool // by tool, when took
	}{
		{"first read", `[` + f + `]`, true, []bool{false}},
		{"read again", `[` + f + `]`, true, []bool{true}},
		{"again, beside a new tool", `[` + g + `, ` + f + `]`, true, []bool{false, true}},
		{"both again", `[` + f + `, ` + g + `]`, true, []bool{true, true}},
		{"the same name, other parameters", `[` + fOther + `]`, true, []bool{false}},
		{"the other of the name again", `[` + g + `, ` + fOther + `]`, true, []bool{true, true}},
		{"the first of the name again", `[` + f + `]`, true, []bool{true}},
		{"a remembered tool, then text of another layout", `[` + f + `,{"name": "h", "description": "", "parameters": {}}]`, false, nil},
		{"a remembered tool's text, then more of the object", `[` + f[:len(f)-1] + `, "x": 1}]`, false, nil},
		{"a remembered tool's start, cut short", `[` + f[:len(f)-2], false, nil},
	} {
		r := row(c.tools)
		if strings.Contains(c.name, "cut short") {
			r = `{"id": 1, "query": "q", "answers": "[]", "tools": "` + strings.ReplaceAll(c.tools, `"`, `\"`) + `"}`
		}
		got, took := laidToolsWith(w, []byte(r))
		checkMemoRead(t, c.name, "xlam", r, got, took, c.took, c.memo, fromMemo)
	}
	// A name's variants past maxToolsOfName are read, not remembered.
	for i := range maxToolsOfName + 2 {
		tool := `{"name": "v", "description": "` + strconv.Itoa(i) + `", "parameters": {}}`
		for range 2 {
			got, took := laidToolsWith(w, []byte(row(`[`+tool+`]`)))
			if !took || len(got) != 1 || got[0].Description != strconv.Itoa(i) {
				t.Fatalf("variant %d: %v %+v", i, took, got)
			}
		}
	}
	if n := len(w.toolMemo["v"]); n != maxToolsOfName {
		t.Errorf("%d variants of a name remembered, want %d", n, maxToolsOfName)
	}
}

// checkMemoRead holds what a workspace with a tool memo read from row
// (took, and the tools got) to the case's want and to the two passes'
// reading, and each tool's coming from the memo (fromMemo) to memo.
func checkMemoRead(t *testing.T, name, format, row string, got []record.Tool, took, wantTook bool, memo []bool, fromMemo func(record.Tool) bool) {
	t.Helper()
	if took != wantTook {
		t.Errorf("%s: took %v, want %v", name, took, wantTook)
	}
	sameEveryWay(t, format, row)
	if !took {
		return
	}
	want, err := parse(format, "f", 1, []byte(row), twoPasses)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want.Tools)
	if string(a) != string(b) {
		t.Errorf("%s: read %s, the two passes %s", name, a, b)
	}
	for i, m := range memo {
		if fromMemo(got[i]) != m {
			t.Errorf("%s: tool %d from the memo: %v, want %v", name, i, !m, m)
		}
	}
}
