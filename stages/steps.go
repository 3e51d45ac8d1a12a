package stages

import (
	"slices"
	"sync/atomic"

	"github.com/augmentdata/augment/stages/record"
)

// stepper adds a stage's lineage step to the records it makes. Records
// that passed the same stages have equal lineages, so the list it last
// made is given again to every record whose lineage, with the step, equals
// it (a new list per record was an allocation per record per stage).
//
// A list given out is shared by many records: nothing changes a lineage in
// place (AddStep on it copies, its capacity being its length). The zero
// value is ready; it is safe for concurrent use.
type stepper struct {
	last atomic.Pointer[[]record.Step]
}

// add sets r.Lineage to r's lineage followed by the step (stage,
// provider, model): what r.AddStep would make, without a list of its own.
func (s *stepper) add(r *record.Record, stage, provider, model string) {
	step := record.Step{Stage: stage, Provider: provider, Model: model}
	n := len(r.Lineage)
	if p := s.last.Load(); p != nil {
		if l := *p; len(l) == n+1 && l[n] == step && slices.Equal(l[:n], r.Lineage) {
			r.Lineage = l
			return
		}
	}
	l := make([]record.Step, n+1)
	copy(l, r.Lineage)
	l[n] = step
	s.last.Store(&l)
	r.Lineage = l
}
