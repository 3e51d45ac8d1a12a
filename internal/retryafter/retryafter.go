// Package retryafter reads how long a server asks a client to wait before
// trying again: the Retry-After header (RFC 9110: seconds or an HTTP date)
// and the Retry-After-Ms header some OpenAI-compatible servers send. The
// teacher layer and the storage readers both wait by it.
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWait bounds a stated wait, so that an absurd header cannot overflow;
// callers compare the wait with their own, much shorter, limits.
const maxWait = 24 * time.Hour

// Parse returns the wait h states at now, and whether it states one.
// Retry-After-Ms wins when it holds a positive number of milliseconds.
// Retry-After may be a number of seconds, whole or not (servers write
// "0.5"), or an HTTP date, a date already past being no wait. Negative,
// non-finite and unreadable values state nothing.
func Parse(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, ok := number(h.Get("Retry-After-Ms")); ok && ms > 0 {
		return wait(ms / 1000), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, ok := number(v); ok {
		return wait(s), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(maxWait, max(0, t.Sub(now))), true
	}
	return 0, false
}

// number reads v as a finite number that is not negative.
func number(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	return f, true
}

// wait is s seconds, bounded by maxWait.
func wait(s float64) time.Duration {
	if s >= maxWait.Seconds() {
		return maxWait
	}
	return time.Duration(s * float64(time.Second))
}
