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
