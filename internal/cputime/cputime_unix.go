//go:build unix

// Package cputime reads the CPU time this process has used, the figure
// benchmarks report beside wall time: steadier on a machine shared with
// other work.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user and system) the process has used so far.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
