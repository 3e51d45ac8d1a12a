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
	var rows []string
	for _, answers := range []string{
		`[{"name": "f", "arguments": {"a": "x"}}, {"name": "f", "arguments": {"a": "y"}}]`,   // by the layout
		`[{"name": "f", "arguments": {"a": "x"}}, {"arguments": {"a": "y"}, "name": "f"}]`,   // then through Inner
		`[{"name": "f", "arguments": {"a": "x"}}, {"name": "f", "arguments": "{\"a\": 1}"}]`, // then through the tree
	} {
		rows = append(rows, rowJSON("id", 1, "query", "q", "answers", answers, "tools", tools))
	}
	recs, freed := parsedFromBuffer(t, "xlam", rows)
	for i, r := range recs {
		if got := len(r.Messages[1].Calls); got != 2 {
			t.Fatalf("%s: %d calls", rows[i], got)
		}
	}
	if !freed {
		t.Error("an xlam record keeps the buffer its row was read from")
	}
}

// parsedFromBuffer parses each row of format (laidOut) from one 8 MiB
// buffer in turn and reports whether the buffer is freed once the records
// are all that is left of it.
func parsedFromBuffer(t *testing.T, format string, rows []string) ([]*record.Record, bool) {
	t.Helper()
	var recs []*record.Record
	wp := func() weak.Pointer[byte] {
		big := make([]byte, 8<<20)
		for _, row := range rows {
			n := copy(big, row)
			r, err := parse(format, "s", 1, big[:n:n], laidOut)
			if err != nil {
				t.Fatalf("%s: %v", row, err)
			}
			recs = append(recs, r)
		}
		return weak.Make(&big[0])
	}()
	runtime.GC()
	runtime.GC()
	freed := wp.Value() == nil
	runtime.KeepAlive(recs)
	return recs, freed
}

// TestFlatRecordsPinNoRow: glaive's and ToolACE's records keep none of the
// row's bytes when their readers without a tree (flatText, flatObject,
// flatResults) took the texts, nor when they gave up part-way (the tree
// then read the texts, or kept a response that is not JSON as text).
func TestFlatRecordsPinNoRow(t *testing.T) {
	sys := gLead + gTool + "\n"
	glaive := []string{
		gRow(sys, "USER: Dune?", gCall(`'{"title": "Dune", "n": [1, {"a": "it\'s"}]}'`), `FUNCTION RESPONSE: {"found": "yes \"B-12\""}`, "ASSISTANT: Here. <|endoftext|>"),
		gRow(sys, "USER: Dune?", gCall(`"{\"title\": \"Dune\"}"`), `FUNCTION RESPONSE: {"a": 1, "a": 2}`, "ASSISTANT: Here. <|endoftext|>"),
	}
	toolace := []string{
		taRow(taSystem(taTools), "user", "Tides?", "assistant", `[Tide Table(harbour="Rock"), now()]`,
			"tool", `[{"name": "Tide Table", "results": {"high": "05:12"}}, {"name": "now", "results": "noon \"sharp\""}]`),
		taRow(taSystem(taTools), "user", "Tides?", "assistant", `[Tide Table(harbour="Rock"), now()]`,
			"tool", `[{"name": "Tide Table", "results": {"high": "05:12"}, "x": 1}, {"name": "now", "results": "noon"}]`),
	}
	if _, freed := parsedFromBuffer(t, "glaive", glaive); !freed {
		t.Error("a glaive record keeps the buffer its row was read from")
	}
	if _, freed := parsedFromBuffer(t, "toolace", toolace); !freed {
		t.Error("a ToolACE record keeps the buffer its row was read from")
	}
}
