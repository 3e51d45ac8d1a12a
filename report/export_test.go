package report

import "github.com/augmentdata/augment/manifests"

// ScanDist reads the records of refs less those in skip, as the report
// reads a run dir without partials, with the token sample of
// SampleBelow(rows).
func (r *Run) ScanDist(refs []manifests.FileRef, skip map[string]bool, rows int64) (*Dist, error) {
	return scan(r.Dir, refs, skip, &r.tokens, SampleBelow(rows))
}

// RejectedIDs are the IDs the stage s rejected.
func (r *Run) RejectedIDs(s *Stage) (map[string]bool, error) { return rejectedIDs(r.Dir, s) }
