//go:build race

package stages

// raceDetector: the race detector drops a sync.Pool's items at random, so
// allocation counts of code with pooled scratch are not pinned.
const raceDetector = true
