//go:build !unix

package jsontree

import "time"

// cpuTime is not measured here: the benchmarks then report no CPU figure.
func cpuTime() time.Duration { return 0 }
