package stages

import (
	"bytes"
	"context"
	"testing"

	"github.com/augmentdata/augment/stages/llm"
)

// A stage asks its records' requests in parallel, so the preview receives
// them in any order; check shows the same first request for the same
// pipeline each time (regression QA: 6 of 10 runs showed one noise request,
// 4 another).
func TestPreviewPrintsInSlotOrder(t *testing.T) {
	ask := func(slot, text string) llm.Request {
		return llm.Request{Stage: "noise@1", Template: "t1", Slot: slot,
			Messages: []llm.Message{{Role: "user", Content: text}},
			Offline:  func() (string, error) { return "ok " + text, nil }}
	}
	reqs := []llm.Request{ask("r1/call0", "first call"), ask("r1/call1", "second call"), ask("r2/call0", "third call")}
	print := func(order ...int) string {
		c := &previewClient{}
		for _, i := range order {
			if _, err := c.Complete(context.Background(), reqs[i]); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		c.print(&b, 2, 10)
		return b.String()
	}
	want := print(0, 1, 2)
	if !bytes.Contains([]byte(want), []byte("first call")) {
		t.Fatalf("preview does not show the first slot's request:\n%s", want)
	}
	for _, order := range [][]int{{2, 1, 0}, {1, 2, 0}, {2, 0, 1}} {
		if got := print(order...); got != want {
			t.Errorf("asked in order %v, the preview reads\n%s\nwant\n%s", order, got, want)
		}
	}
}
