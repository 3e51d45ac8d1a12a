package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ra := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	for _, c := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{ra("0"), 0, true},
		{ra("7"), 7 * time.Second, true},
		{ra(" 120 "), 2 * time.Minute, true},
		{ra("0.5"), 500 * time.Millisecond, true},
		{ra("Fri, 27 Nov 2026 12:00:30 GMT"), 30 * time.Second, true},
		{ra("Fri, 27 Nov 2026 11:00:00 GMT"), 0, true}, // past: no wait
		{ra("99999999999999"), maxWait, true},
		{http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"1250"}}, 1250 * time.Millisecond, true},
		{http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"0"}}, 7 * time.Second, true},
		{http.Header{"Retry-After-Ms": {"soon"}}, 0, false},
		{ra(""), 0, false}, {ra("-1"), 0, false}, {ra("soon"), 0, false},
		{ra("NaN"), 0, false}, {ra("Inf"), 0, false}, {ra("1e400"), 0, false},
		{http.Header{}, 0, false},
	} {
		got, ok := Parse(c.h, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%v) = %v, %v; want %v, %v", c.h, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParse: any pair of headers gives a wait within [0, maxWait], or none;
// whole seconds written canonically give that many seconds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"7", "0.25", "Wed, 21 Oct 2015 07:28:00 GMT", "", "1e400", "NaN", " 120 "} {
		f.Add(s, "")
		f.Add("", s)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		if ra != "" {
			h.Set("Retry-After", ra)
		}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		d, ok := Parse(h, now)
		if d < 0 || d > maxWait || !ok && d != 0 {
			t.Fatalf("Parse(%q, %q) = %v, %v", ra, ms, d, ok)
		}
		if ms == "" && ok && strings.Trim(strings.TrimSpace(ra), "0123456789") == "" && d < maxWait {
			again, ok2 := Parse(http.Header{"Retry-After": {strconv.Itoa(int(d / time.Second))}}, now)
			if !ok2 || again != d {
				t.Fatalf("Parse(%q) = %v; its canonical form gives %v, %v", ra, d, again, ok2)
			}
		}
	})
}
