package jsontree

import (
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// InfiniteNumber returns the first number of the JSON text s that a float64
// cannot hold, or "". Python's json.loads reads such a number (one with a
// fraction or an exponent, e.g. 1e400) as ±inf and json.dumps writes it back
// as Infinity, which is not JSON; Go's ParseFloat reads it as ±Inf too.
// Numbers without a fraction or exponent are integers to Python, of any
// size, and are never returned. s must be valid JSON.
func InfiniteNumber(s string) string {
	if !mayOverflow(s) {
		return ""
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i++
		case c == '-' || c >= '0' && c <= '9':
			j, fraction, exponent := i+1, false, false
			for ; j < len(s); j++ {
				if d := s[j]; d == '.' {
					fraction = true
				} else if d == 'e' || d == 'E' {
					exponent = true
				} else if d != '+' && d != '-' && (d < '0' || d > '9') {
					break
				}
			}
			// Without an exponent, only more digits than float64's
			// largest value has can overflow.
			if exponent || fraction && j-i > 309 {
				if f, err := strconv.ParseFloat(s[i:j], 64); err != nil && math.IsInf(f, 0) {
					return s[i:j]
				}
			}
			i = j
		default:
			i++
		}
	}
	return ""
}

// InfiniteNumberIn is InfiniteNumber of the JSON text b.
func InfiniteNumberIn(b []byte) string {
	return strings.Clone(InfiniteNumber(unsafe.String(unsafe.SliceData(b), len(b))))
}

// mayOverflow reports whether s may hold a number beyond a float's range:
// one with an exponent (a digit before an 'e' or 'E') or, in a text long
// enough, a run of more than 308 digits. Most texts have neither, and the
// search for the two letters runs a word at a time.
func mayOverflow(s string) bool {
	for _, e := range []byte{'e', 'E'} {
		for i := 0; ; {
			j := strings.IndexByte(s[i:], e)
			if j < 0 {
				break
			}
			if i += j; i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
				return true
			}
			i++
		}
	}
	if len(s) <= 309 {
		return false
	}
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			if run++; run > 308 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}
