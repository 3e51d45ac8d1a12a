package stages

import (
	"slices"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// stepper.add gives what AddStep gives, sharing the list between records
// of equal lineage, and a list it gave out is not changed by a later step
// of one of its records.
func TestStepper(t *testing.T) {
	ingest := record.Step{Stage: "00-ingest", Provider: "rule"}
	tests := []struct {
		name                   string
		lineage                []record.Step
		stage, provider, model string
	}{
		{"first step", nil, "00-ingest", "rule", ""},
		{"rule step", []record.Step{ingest}, "01-meta_tool", "rule", ""},
		{"teacher step", []record.Step{ingest}, "02-reason", "openai", "gpt-x"},
		{"other lineage", []record.Step{{Stage: "00-ingest", Provider: "offline"}}, "01-meta_tool", "rule", ""},
		{"same step again", []record.Step{ingest}, "01-meta_tool", "rule", ""},
	}
	var s stepper
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := &record.Record{Lineage: slices.Clone(tt.lineage)}
			want.AddStep(tt.stage, tt.provider, tt.model)
			a := &record.Record{Lineage: slices.Clone(tt.lineage)}
			b := &record.Record{Lineage: slices.Clone(tt.lineage)}
			s.add(a, tt.stage, tt.provider, tt.model)
			s.add(b, tt.stage, tt.provider, tt.model)
			if !slices.Equal(a.Lineage, want.Lineage) || !slices.Equal(b.Lineage, want.Lineage) {
				t.Fatalf("lineages %+v, %+v, want %+v", a.Lineage, b.Lineage, want.Lineage)
			}
			if &a.Lineage[0] != &b.Lineage[0] || cap(a.Lineage) != len(a.Lineage) {
				t.Errorf("equal lineages not one list of its exact length (cap %d)", cap(a.Lineage))
			}
			// A later stage's step copies the shared list.
			a.AddStep("03-next", "rule", "")
			if !slices.Equal(b.Lineage, want.Lineage) {
				t.Errorf("a step added to one record changed another: %+v", b.Lineage)
			}
		})
	}
}
