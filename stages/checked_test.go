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

// TestCheckedToolsPairs holds the slots to pairs: three tools whose
// parameters' addresses hash to one pair leave the last two remembered,
// the last first, and remembering a remembered tool again neither
// duplicates nor drops one.
func TestCheckedToolsPairs(t *testing.T) {
	var c checkedTools
	var same []record.Tool // tools of one pair
	keep := map[int][]record.Tool{}
	for i := 0; len(same) < 3; i++ {
		tl := fxTool(fmt.Sprint("t", i), "d", `{"type":"object"}`)
		k := c.index(tl.Parameters)
		keep[k] = append(keep[k], tl)
		if len(keep[k]) == 3 {
			same = keep[k]
		}
	}
	found := func(tl record.Tool) bool { k := c.find(tl.Parameters); return k >= 0 && c.slot[k].tool.Name == tl.Name }
	c.remember(same[0])
	c.remember(same[1])
	if !found(same[0]) || !found(same[1]) {
		t.Fatal("two tools of one pair are not both remembered")
	}
	c.remember(same[0]) // second → first
	c.remember(same[0])
	c.remember(same[2]) // pushes out same[1], remembered least recently
	if !found(same[0]) || !found(same[2]) || found(same[1]) {
		t.Fatalf("remembered %v and %v, want %s and %s", c.slot[c.index(same[0].Parameters)].tool.Name, c.slot[c.index(same[0].Parameters)+1].tool.Name, same[2].Name, same[0].Name)
	}
	if k := c.index(same[0].Parameters); c.slot[k].tool.Name != same[2].Name {
		t.Errorf("the last remembered tool is not first in its pair")
	}
}
