package formats

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// directSystem reports whether the row parser took row's system text
// through systemLiteral.
func directSystem(format string, row []byte) bool {
	w := workspaces.New().(*workspace)
	w.format = format
	p := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena, Hooked: systemKey, Literal: w.sysLiteral}
	if _, err := p.Parse(); err != nil {
		return false
	}
	return w.rowTools != nil
}

// A glaive tool with the given parameters, indented as glaive writes them.
func gToolWith(params string) string {
	return "{\n    \"name\": \"find_book\",\n    \"description\": \"Find a book\",\n    \"parameters\": " + params + "\n}"
}

// A ToolACE tool list of one tool with the given parameters.
func taToolWith(params string) string {
	return `[{"name": "now", "description": "Time", "parameters": ` + params + `, "required": null}]`
}

// TestSystemDirect holds the direct reader of glaive's and ToolACE's
// system texts to the tree on texts at the edges of what it takes: each
// row gives the same record or reject both ways (sameEveryWay), and the
// reader takes the text or leaves it as listed.
func TestSystemDirect(t *testing.T) {
	chat := "USER: Find Dune.\n\n\nASSISTANT: Which edition? <|endoftext|>"
	for _, c := range []struct {
		name   string
		system string
		take   bool
	}{
		{"one tool", gLead + gTool + "\n", true},
		{"two tools, blank lines", gLead + gTool + "\n\n" + gTool2 + "\n\n", true},
		{"two tools, nothing between", gLead + gTool + gTool2, true},
		{"no tools after the lead-in", gLead, true},
		{"empty parameters", gLead + gTool2, true},
		{"no parameters", gLead + `{"name": "f", "description": "d"}`, true},
		{"the same tool twice", gLead + gTool + "\n\n" + gTool, true},
		{"a tool defined twice differently", gLead + gTool + "\n\n" + strings.Replace(gTool, "Find a book", "Find", 1), true},
		{"type names mapped", gLead + gToolWith(`{"type": "dict", "properties": {"a": {"type": "str"}, "b": {"type": "List"}, "c": {"type": "Float"}}}`), true},
		{"sub-schemas, lists, defaults and enums", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -1.50e2}}, "required": ["x"], "additionalProperties": false}}, "b": {"anyOf": [{"type": "string"}, {"type": "null"}, true]}, "c": {"type": "string", "enum": ["x", "y\"z"], "default": {"type": "str", "required": null}}, "d": {"items": [{"type": "string"}, 1]}, "e": {"not": {"type": "string"}, "required": ["q"]}}, "required": ["a", "b"]}`), true},
		{"a parameter called type, properties or required", gLead + gToolWith(`{"type": "object", "properties": {"type": {"type": "string"}, "properties": {"type": "string"}, "required": {"type": "boolean"}}}`), true},
		{"escapes in names and descriptions", gLead + `{"name": "f\"g", "description": "say \"hi\"\n\tnow / \\", "parameters": {"type": "object", "properties": {"x\"y": {"description": "\\"}}}}`, true},
		{"Chinese text", gLead + `{"name": "f", "description": "生成发票", "parameters": {"type": "object", "properties": {"客户": {"type": "string", "description": "客户名称"}}}}`, true},
		{"a tool-level required null", gLead + `{"name": "f", "parameters": {}, "required": null}`, true},
		{"no tools", gNoTools, false},
		{"no lead-in", "SYSTEM: Be brief.", false},
		{"the lead-in without SYSTEM", strings.TrimPrefix(gLead, "SYSTEM: ") + gTool, false},
		{"text after the tools", gLead + gTool + "\n\nAnswer briefly.", false},
		{"a comma between the tools", gLead + gTool + ",\n" + gTool2, false},
		{"text before a tool", gLead + "Tools:\n" + gTool, false},
		{"a tool cut off", gLead + gTool[:40], false},
		{"a tool not an object", gLead + "[" + gTool + "]", false},
		{"an optional type", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "str, optional"}}}`), false},
		{"a Python type", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "List[int]"}}}`), false},
		{"an unknown type", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "thing"}}}`), false},
		{"a type list", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": ["string", "null"]}}}`), false},
		{"required null", gLead + gToolWith(`{"type": "object", "properties": {}, "required": null}`), false},
		{"required null in a property", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "string", "required": null}}}`), false},
		{"required not names", gLead + gToolWith(`{"type": "object", "properties": {}, "required": [1]}`), false},
		{"required not a list", gLead + gToolWith(`{"type": "object", "properties": {}, "required": "a"}`), false},
		{"no type", gLead + gToolWith(`{"properties": {"a": {"type": "string"}}}`), false},
		{"no properties", gLead + gToolWith(`{"type": "object"}`), false},
		{"type not object", gLead + gToolWith(`{"type": "array", "properties": {}}`), false},
		{"properties not objects", gLead + gToolWith(`{"type": "object", "properties": {"a": "string"}}`), false},
		{"a flat map", gLead + gToolWith(`{"a": {"type": "string"}}`), false},
		{"parameters null", gLead + gToolWith(`null`), false},
		{"parameters a list", gLead + gToolWith(`[]`), false},
		{"an OpenAI tool", gLead + `{"type": "function", "function": {"name": "f", "parameters": {}}}`, false},
		{"another tool member", gLead + `{"name": "f", "parameters": {}, "returns": {}}`, false},
		{"a tool-level required list", gLead + `{"name": "f", "parameters": {"type": "object", "properties": {"a": {}}}, "required": ["a"]}`, false},
		{"a tool without a name", gLead + `{"description": "d"}`, false},
		{"an empty name", gLead + `{"name": ""}`, false},
		{"a description null", gLead + `{"name": "f", "description": null}`, false},
		{"a duplicate key", gLead + `{"name": "f", "name": "g"}`, false},
		{"a duplicate key in a schema", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "string", "type": "string"}}}`), false},
		{"a \\u escape", gLead + "{\"name\": \"f\", \"description\": \"caf\\u00e9\"}", false},
		{"too deep for the reader", gLead + gToolWith(`{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string"}}}}}}}}}`), false},
	} {
		row := rowJSON("system", c.system, "chat", chat)
		sameEveryWay(t, "glaive", row)
		if got := directSystem("glaive", []byte(row)); got != c.take {
			t.Errorf("glaive, %s: read directly %v, want %v", c.name, got, c.take)
		}
	}
	for _, c := range []struct {
		name   string
		system string
		take   bool
	}{
		{"the template", taSystem(taTools), true},
		{"the template stripped", toolacePrefix + taTools + toolaceSuffix, true},
		{"no tools", taSystem(`[]`), true},
		{"white space around the list", toolacePrefix + " \n" + taTools + toolaceSuffix, true},
		{"an escaped newline in a description", taSystem(`[{"name": "now", "description": "a. \nShould you decide"}]`), true},
		{"a tool without required", taSystem(`[{"name": "now", "parameters": {"type": "dict", "properties": {}}}]`), true},
		{"white space after the list", taSystem(taTools + " "), false},
		{"text before the template", "You are Tidy.\n" + taSystem(taTools), false},
		{"text after the template", taSystem(taTools) + "Answer in English.", false},
		{"unknown wording", "Tools: " + taTools, false},
		{"the list not JSON", taSystem(`[{"name": "now"`), false},
		{"the list an object", taSystem(`{"name": "now"}`), false},
		{"a tool-level required list", taSystem(`[{"name": "now", "parameters": {"type": "dict", "properties": {"a": {}}}, "required": ["a"]}]`), false},
		{"an optional type", taSystem(taToolWith(`{"type": "dict", "properties": {"a": {"type": "int, optional"}}}`)), false},
		{"a Python type", taSystem(taToolWith(`{"type": "dict", "properties": {"a": {"type": "Optional[int]"}}}`)), false},
	} {
		row := taRow(c.system, "user", "q", "assistant", "Which date?")
		sameEveryWay(t, "toolace", row)
		if got := directSystem("toolace", []byte(row)); got != c.take {
			t.Errorf("toolace, %s: read directly %v, want %v", c.name, got, c.take)
		}
	}
	// Invalid UTF-8, a raw control character and an escaped lead-in are
	// the row parser's to read.
	for _, row := range []string{
		`{"system": "` + jsonForm(gLead) + `{\"name\": \"f\xff\"}", "chat": "USER: x"}`,
		`{"system": "` + jsonForm(gLead) + `{\"name\": \"f` + "\t" + `\"}", "chat": "USER: x"}`,
		`{"system": "\u0053` + jsonForm(gLead)[1:] + `{\"name\": \"f\"}", "chat": "USER: x"}`,
	} {
		sameEveryWay(t, "glaive", row)
		if directSystem("glaive", []byte(row)) {
			t.Errorf("%q: read directly", row)
		}
	}
}

// TestSystemDirectTaken checks that the direct reader takes the system
// text of every fixture row and shared-dump row (the bench harness's, and
// glaive's raw rows) that lists tools after the template, not only that
// it agrees with the tree when it does.
func TestSystemDirectTaken(t *testing.T) {
	check := func(t *testing.T, format string, rows [][]byte) {
		t.Helper()
		n, want := 0, 0
		for i, row := range rows {
			sameEveryWay(t, format, string(row))
			rec, err := parse(format, "f", 1, row, twoPasses)
			if err != nil || len(rec.Tools) == 0 {
				continue // rows without tools: the template without them
			}
			want++
			if directSystem(format, row) {
				n++
			} else {
				t.Errorf("%s row %d: not read directly", format, i)
			}
		}
		t.Logf("%s: %d of %d rows with tools read directly (%d rows)", format, n, want, len(rows))
		if want == 0 {
			t.Errorf("%s: no row with tools", format)
		}
	}
	t.Run("fixtures", func(t *testing.T) {
		check(t, "glaive", fixtureRows(t, "glaive.jsonl"))
		check(t, "toolace", fixtureRows(t, "toolace.json"))
	})
	t.Run("shared", func(t *testing.T) {
		dir := sharedData(t)
		read := func(name string) [][]byte {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return scanRows(t, data)
		}
		for _, format := range []string{"glaive", "toolace"} {
			name := format
			if format == "glaive" {
				name = "glaive_v2"
			}
			var rows [][]byte
			for _, lang := range []string{"en", "zh"} {
				rows = append(rows, read(filepath.Join("derived", name+"_format_glaive_toolcall_"+lang+"_demo.json"))...)
			}
			if format == "glaive" {
				rows = append(rows, read(filepath.Join("glaive", "glaive_v2_rows_dataflow.jsonl"))...)
			}
			check(t, format, rows)
		}
	})
}

// systemToolsWith reads the system text of a row of format with
// systemLiteral and the workspace w (whose memo carries over from row to
// row): the tools, and whether it took the text.
func systemToolsWith(w *workspace, format string, row []byte) ([]record.Tool, bool) {
	w.format = format
	w.rowTools = nil
	p := jsontree.Parser{Data: row, CopyStrings: true, Arena: &w.arena, Hooked: systemKey, Literal: w.sysLiteral}
	_, err := p.Parse()
	tools := slices.Clone(w.rowTools)
	w.rowTools, w.json = nil, w.json[:0]
	return tools, err == nil && tools != nil
}

// TestSchemaToolMemo reads rows one after another with one workspace, so
// that readSchemaTool meets tools it read before (its memo): each row's
// tools are what the two passes read, a tool read again comes from the
// memo, text that only starts like a remembered tool is read as it
// stands, and a tool at the top of glaive's text is not taken for one in
// ToolACE's list.
func TestSchemaToolMemo(t *testing.T) {
	w := workspaces.New().(*workspace)
	fromMemo := func(tl record.Tool) bool {
		for _, m := range w.schemaMemo {
			for _, ms := range m {
				for _, e := range ms {
					if unsafe.StringData(e.tool.Name) == unsafe.StringData(tl.Name) {
						return true
					}
				}
			}
		}
		return false
	}
	chat := "USER: Find Dune.\n\n\nASSISTANT: Which edition? <|endoftext|>"
	glaive := func(system string) string { return rowJSON("system", system, "chat", chat) }
	toolace := func(system string) string { return taRow(system, "user", "q", "assistant", "Which date?") }
	gFlat := strings.ReplaceAll(gTool, "\n", "")
	for _, c := range []struct {
		name, format, row string
		took              bool
		memo              []bool // by tool, when took
	}{
		{"first read", "glaive", glaive(gLead + gTool + "\n"), true, []bool{false}},
		{"read again", "glaive", glaive(gLead + gTool + "\n"), true, []bool{true}},
		{"again, after a new tool", "glaive", glaive(gLead + gTool2 + "\n\n" + gTool), true, []bool{false, true}},
		{"both again", "glaive", glaive(gLead + gTool + "\n\n" + gTool2), true, []bool{true, true}},
		{"a remembered tool, then text", "glaive", glaive(gLead + gTool + "\n\nAnswer briefly."), false, nil},
		{"a remembered tool's start, then another member", "glaive", glaive(gLead + gTool[:len(gTool)-1] + `, "returns": {}}`), false, nil},
		{"a tool on one line", "glaive", glaive(gLead + gFlat), true, []bool{false}},
		{"the same text in a list: not the top's", "toolace", toolace(taSystem("[" + gFlat + "]")), true, []bool{false}},
		{"in a list, again", "toolace", toolace(taSystem("[" + gFlat + "]")), true, []bool{true}},
		{"ToolACE's tools", "toolace", toolace(taSystem(taTools)), true, nil},
		{"ToolACE's tools again", "toolace", toolace(taSystem(taTools)), true, []bool{true}},
	} {
		got, took := systemToolsWith(w, c.format, []byte(c.row))
		checkMemoRead(t, c.name, c.format, c.row, got, took, c.took, c.memo, fromMemo)
	}
}
