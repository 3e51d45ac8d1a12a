package jsontree

import (
	"math"
	"strconv"
)

// InfiniteNumber returns the first number of the JSON text s that a float64
// cannot hold, or "". Python's json.loads reads such a number (one with a
// fraction or an exponent, e.g. 1e400) as ±inf and json.dumps writes it back
// as Infinity, which is not JSON; Go's ParseFloat reads it as ±Inf too.
// Numbers without a fraction or exponent are integers to Python, of any
// size, and are never returned. s must be valid JSON.
func InfiniteNumber[T ~string | ~[]byte](s T) string {
	if !floatDigits(s) {
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
				if f, err := strconv.ParseFloat(string(s[i:j]), 64); err != nil && math.IsInf(f, 0) {
					return string(s[i:j])
				}
			}
			i = j
		default:
			i++
		}
	}
	return ""
}

// floatDigits reports whether s holds a digit followed by '.', 'e' or 'E':
// text without one has no number with a fraction or an exponent, which
// spares most texts the scan.
func floatDigits[T ~string | ~[]byte](s T) bool {
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c == '.' || c == 'e' || c == 'E') && s[i-1] >= '0' && s[i-1] <= '9' {
			return true
		}
	}
	return false
}
