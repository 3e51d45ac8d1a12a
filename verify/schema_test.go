package verify

import "testing"

// decodeJSON takes one JSON value and JSON's own whitespace after it, as
// encoding/json.Valid does: other spaces (\v, U+00A0) are trailing data.
func TestDecodeJSONTrailing(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{}`, true},
		{"{} \t\r\n", true},
		{` [1, 2] `, true},
		{"{}\v", false},
		{"{}\u00a0", false},
		{`{} {}`, false},
		{`{} x`, false},
	} {
		_, err := decodeJSON([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("decodeJSON(%q): error %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
