package stages

import (
	"fmt"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// TestCheckedToolsChecksAsCheck holds checkChanged to shard.Check: outputs
// made from a checked record by shuffling its tools and adding others, some
// not valid, get Check's verdict, first and again (an invalid tool is never
// remembered as checked), and concurrently.
func TestCheckedToolsChecksAsCheck(t *testing.T) {
	rec := fxRecord("r1", []record.Tool{fxTool("a", "A", `{"type":"object","properties":{}}`), fxTool("b", "B", `{"type":"object"}`), fxTool("c", "C", `{}`)},
		fxUser("hi"), fxCalls("a", `{"x":1}`), fxResults("a", `ok`), fxSay("done"))
	if _, err := shard.Check(rec); err != nil {
		t.Fatal(err)
	}
	lib := []record.Tool{fxTool("lib1", "one", `{"type":"object"}`), fxTool("lib2", "two", `{"type":"object","properties":{"q":{"type":"string"}}}`),
		fxTool("badjson", "x", `{"type":`), fxTool("bad\xff", "x", `{}`), fxTool("baddesc", "x\xfe", `{}`), {Name: "badresp", Description: "r", Parameters: []byte(`{}`), Response: []byte(`{"a":`)}}
	pick := func(idx ...int) []record.Tool {
		var out []record.Tool
		for _, i := range idx {
			if i < 0 {
				out = append(out, lib[-i-1])
			} else {
				out = append(out, rec.Tools[i])
			}
		}
		return out
	}
	cases := [][]record.Tool{
		pick(2, 0, 1), pick(-1, 2, -2, 0), pick(-2, -1), pick(1, -3, 0), pick(-4, 0), pick(-5), pick(0, -6), pick(-1, -2, 2, 1, 0),
		pick(0, 1, 2), pick(-3), nil,
	}
	var c checkedTools
	check := func(tools []record.Tool) error {
		out := *rec
		out.Tools = tools
		wantReason, wantErr := shard.Check(&out)
		gotReason, gotErr := c.checkChanged(&out, rec)
		if gotReason != wantReason || (gotErr == nil) != (wantErr == nil) {
			return fmt.Errorf("tools %v: checkChanged says %q (%v), Check says %q (%v)", names(tools), gotReason, gotErr, wantReason, wantErr)
		}
		return nil
	}
	for round := range 3 {
		for _, tools := range cases {
			if err := check(tools); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(cases))
	for range 8 {
		wg.Go(func() {
			for _, tools := range cases {
				if err := check(tools); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func names(tools []record.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}
