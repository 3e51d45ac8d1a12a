//go:build race

package shard

import (
	"encoding/json"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// TestNormalizeWritesOnlyChanges: a stage's output may share lists with
// its input (a negative shares its parent's calls), and the runner
// normalizes the output (chain.go) while the input's shard write may still
// read the input. Normalize must then not write into what it shares: the
// race detector catches a write of even the same value.
func TestNormalizeWritesOnlyChanges(t *testing.T) {
	calls := []record.Call{{Name: "f", Arguments: json.RawMessage(`{"a":1}`)}, {Name: "g"}}
	parent := &record.Record{ID: "p", Messages: []record.Message{{Role: record.RoleAssistant, Calls: calls}}}
	Normalize(parent)
	// The output: its own lists (the tools empty, so not yet normalized),
	// its messages copies of the parent's, sharing their calls.
	out := &record.Record{ID: "p/neg", Tools: []record.Tool{}, Messages: []record.Message{parent.Messages[0]}}

	read := make(chan int)
	go func() { // the input's write, reading its calls
		n := 0
		for _, c := range parent.Messages[0].Calls {
			n += len(c.Name) + len(c.Arguments)
		}
		read <- n
	}()
	Normalize(out)
	if n := <-read; n != 9 {
		t.Fatalf("read %d bytes of the parent's calls, want 9", n)
	}
	if out.Tools != nil {
		t.Error("the output's empty tools are not nil")
	}
}
