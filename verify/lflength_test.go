package verify

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestPyLayout: JSON laid out as Python's json.dumps writes it (the
// expected texts are json.dumps' output for the same values, with
// ensure_ascii=False, and with indent=4).
func TestPyLayout(t *testing.T) {
	src := `{"type":"object","properties":{"a":{"type":"string","enum":["x, y: z"]},"b":[]},"c":{},"d":[1,2.5,true,null,"é"]}`
	for _, c := range []struct{ src, indent, want string }{
		{src, "", `{"type": "object", "properties": {"a": {"type": "string", "enum": ["x, y: z"]}, "b": []}, "c": {}, "d": [1, 2.5, true, null, "é"]}`},
		{src, "    ", "{\n    \"type\": \"object\",\n    \"properties\": {\n        \"a\": {\n            \"type\": \"string\",\n            \"enum\": [\n                \"x, y: z\"\n            ]\n        },\n        \"b\": []\n    },\n    \"c\": {},\n    \"d\": [\n        1,\n        2.5,\n        true,\n        null,\n        \"é\"\n    ]\n}"},
		{`{ "a" : [ ] , "b" : "q\"uote, \\" }`, "", `{"a": [], "b": "q\"uote, \\"}`},
		{`[]`, "    ", `[]`},
		{`"s"`, "    ", `"s"`},
	} {
		if got := string(PyLayout(nil, []byte(c.src), c.indent)); got != c.want {
			t.Errorf("PyLayout(%s, %q):\n got %q\nwant %q", c.src, c.indent, got, c.want)
		}
	}
}

// FuzzPyLayout: laying out valid JSON keeps its value.
func FuzzPyLayout(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"c, d: e"}],"f":{}}`))
	f.Add([]byte(`[ "x\\", "y" ]`))
	f.Fuzz(func(t *testing.T, src []byte) {
		if !json.Valid(src) {
			return
		}
		var want bytes.Buffer
		_ = json.Compact(&want, src)
		for _, indent := range []string{"", "    "} {
			out := PyLayout(nil, src, indent)
			var got bytes.Buffer
			if err := json.Compact(&got, out); err != nil || got.String() != want.String() {
				t.Fatalf("PyLayout(%q, %q) = %q: not the same JSON (%v)", src, indent, out, err)
			}
		}
	})
}

// TestLFLengthFacts: every template an export can be written for has its
// frame and its tool format's counts.
func TestLFLengthFacts(t *testing.T) {
	for _, tpl := range LFTemplates() {
		if _, ok := lfFrames[tpl.Name]; !ok {
			t.Errorf("template %s: no frame in lfFrames", tpl.Name)
		}
		if _, ok := lfToolFormats[tpl.ToolFormat]; !ok {
			t.Errorf("template %s: tool format %s not in lfToolFormats", tpl.Name, tpl.ToolFormat)
		}
	}
}
