//go:build !unix

package zhconv

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
