package jsonout

import (
	"encoding/json"
	"testing"
)

func TestMarshal(t *testing.T) {
	v := map[string]any{"d": "a < b && c > d", "raw": json.RawMessage(`{"x": 1}`), "n": []int{1}}
	for _, tc := range []struct {
		indent, want string
	}{
		{"", `{"d":"a < b && c > d","n":[1],"raw":{"x":1}}`},
		{"  ", "{\n  \"d\": \"a < b && c > d\",\n  \"n\": [\n    1\n  ],\n  \"raw\": {\n    \"x\": 1\n  }\n}"},
	} {
		got, err := MarshalIndent(v, tc.indent)
		if err != nil || string(got) != tc.want {
			t.Errorf("MarshalIndent(%q) = %s, %v; want %s", tc.indent, got, err, tc.want)
		}
	}
	if got, _ := Marshal("<tag>"); string(got) != `"<tag>"` {
		t.Errorf("Marshal escapes HTML: %s", got)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("Marshal of a func: no error")
	}
}
