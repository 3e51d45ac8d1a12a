//go:build !unix

// Package cputime reads the CPU time this process has used, the figure
// benchmarks report beside wall time: steadier on a machine shared with
// other work.
package cputime

import "time"

// Process is 0 here: CPU time is not measured outside Unix, and benchmarks
// then report no CPU figure.
func Process() time.Duration { return 0 }
