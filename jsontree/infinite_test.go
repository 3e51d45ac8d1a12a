package jsontree

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestInfiniteNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"n": 1e400}`, "1e400"},
		{`{"n": -1.5E+309}`, "-1.5E+309"},
		{`[1, 2.5, {"a": [3e10, 1.8e308]}]`, "1.8e308"},
		{`{"n": 1.7976931348623157e308}`, ""},
		{`{"n": 1e-400}`, ""}, // underflow reads as 0.0: JSON still
		{`{"n": 1}`, ""},
		{`{"big": 123456789012345678901234567890123456789012345678901234567890}`, ""}, // an int to Python
		{`{"s": "1e400", "t": "x\"1e400"}`, ""},
		{`{"s": "\\", "n": 2e999}`, "2e999"},
		{`"abc"`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := InfiniteNumber(tt.in); got != tt.want {
			t.Errorf("InfiniteNumber(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzInfiniteNumber holds InfiniteNumber to a decoding of the whole value:
// it names a number exactly when the value holds a float-form number that
// ParseFloat reads as infinite.
func FuzzInfiniteNumber(f *testing.F) {
	for _, s := range []string{`{"n": 1e400}`, `[1.5, "2e999", -3E+400]`, `{"a": {"b": [1e308, 1e309]}}`, `"x\"1e999"`, `123456789e-5`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		want := firstInfinite(t, s)
		if got := InfiniteNumber(s); got != want {
			t.Fatalf("InfiniteNumber(%q) = %q, want %q", s, got, want)
		}
	})
}

// firstInfinite walks the decoded value in document order.
func firstInfinite(t *testing.T, s string) string {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		str := n.String()
		float := false
		for i := range len(str) {
			if c := str[i]; c == '.' || c == 'e' || c == 'E' {
				float = true
			}
		}
		if f, err := n.Float64(); float && err != nil && math.IsInf(f, 0) {
			return str
		}
	}
}
