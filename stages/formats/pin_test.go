package formats

import (
	"runtime"
	"testing"
	"weak"

	"github.com/augmentdata/augment/stages/record"
)

// TestXLAMRecordPinsNoRow: an xlam record keeps none of the row's bytes,
// however its readers got to it (by the layout, through Inner after the
// layout gave up part-way, or through the tree): the buffer the row was
// read from, as ingest's batch of rows, is freed once the records are all
// that is left.
func TestXLAMRecordPinsNoRow(t *testing.T) {
	tools := `[{"name": "f", "description": "d", "parameters": {"a": {"type": "str"}}}]`
	var recs []*record.Record
	wp := func() weak.Pointer[byte] {
		big := make([]byte, 8<<20)
		for _, answers := range []string{
			`[{"name": "f", "arguments": {"a": "x"}}, {"name": "f", "arguments": {"a": "y"}}]`,   // by the layout
			`[{"name": "f", "arguments": {"a": "x"}}, {"arguments": {"a": "y"}, "name": "f"}]`,   // then through Inner
			`[{"name": "f", "arguments": {"a": "x"}}, {"name": "f", "arguments": "{\"a\": 1}"}]`, // then through the tree
		} {
			row := append(big[:0:0], rowJSON("id", 1, "query", "q", "answers", answers, "tools", tools)...)
			n := copy(big, row)
			r, err := parse("xlam", "s", 1, big[:n:n], laidOut)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(r.Messages[1].Calls); got != 2 {
				t.Fatalf("%s: %d calls", answers, got)
			}
			recs = append(recs, r)
		}
		return weak.Make(&big[0])
	}()
	runtime.GC()
	runtime.GC()
	if wp.Value() != nil {
		t.Error("an xlam record keeps the buffer its row was read from")
	}
	runtime.KeepAlive(recs)
}

// TestFlatRecordsPinNoRow: glaive's and ToolACE's records keep none of the
// row's bytes when their readers without a tree (flatText, flatObject,
// flatResults) took the texts, nor when they gave up part-way (the tree
// then read the texts, or kept a response that is not JSON as text).
func TestFlatRecordsPinNoRow(t *testing.T) {
	sys := gLead + gTool + "\n"
	rows := []struct{ format, row string }{
		{"glaive", gRow(sys, "USER: Dune?", gCall(`'{"title": "Dune", "n": [1, {"a": "it\'s"}]}'`), `FUNCTION RESPONSE: {"found": "yes \"B-12\""}`, "ASSISTANT: Here. <|endoftext|>")},
		{"glaive", gRow(sys, "USER: Dune?", gCall(`"{\"title\": \"Dune\"}"`), `FUNCTION RESPONSE: {"a": 1, "a": 2}`, "ASSISTANT: Here. <|endoftext|>")},
		{"toolace", taRow(taSystem(taTools), "user", "Tides?", "assistant", `[Tide Table(harbour="Rock"), now()]`,
			"tool", `[{"name": "Tide Table", "results": {"high": "05:12"}}, {"name": "now", "results": "noon \"sharp\""}]`)},
		{"toolace", taRow(taSystem(taTools), "user", "Tides?", "assistant", `[Tide Table(harbour="Rock"), now()]`,
			"tool", `[{"name": "Tide Table", "results": {"high": "05:12"}, "x": 1}, {"name": "now", "results": "noon"}]`)},
	}
	var recs []*record.Record
	wp := func() weak.Pointer[byte] {
		big := make([]byte, 8<<20)
		for _, c := range rows {
			n := copy(big, c.row)
			r, err := parse(c.format, "s", 1, big[:n:n], laidOut)
			if err != nil {
				t.Fatalf("%s: %v", c.row, err)
			}
			recs = append(recs, r)
		}
		return weak.Make(&big[0])
	}()
	runtime.GC()
	runtime.GC()
	if wp.Value() != nil {
		t.Error("a glaive or ToolACE record keeps the buffer its row was read from")
	}
	runtime.KeepAlive(recs)
}
