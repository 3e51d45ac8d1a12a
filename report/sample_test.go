package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPrettySampleKeepsCharacters: a reject shown in report.html reads as
// the rejects file holds it, <, > and & included (the page's template
// escapes them for HTML), not as JSON's \u003c, \u003e and \u0026.
func TestPrettySampleKeepsCharacters(t *testing.T) {
	tests := []struct {
		name string
		rl   RejectLine
		want []string
	}{
		{"sql", RejectLine{Stage: "dedup", ID: "lfen:6", Reason: "duplicate", Detail: "a >= b",
			Record: json.RawMessage(`{"id":"lfen:6","messages":[{"role":"user","content":"WHERE purchase_date >= %s AND a < b & c"}]}`)},
			[]string{`"content": "WHERE purchase_date >= %s AND a < b & c"`, `"detail": "a >= b"`}},
		{"html", RejectLine{Stage: "verify", ID: "x:1", Reason: "roles",
			Record: json.RawMessage(`{"content":"</pre><script>alert(1)</script>"}`)},
			[]string{`"content": "</pre><script>alert(1)</script>"`}},
		{"raw row", RejectLine{Stage: "ingest", ID: "x:2", Reason: "bad", Raw: `{"q":"1 < 2 && 3 > 2"}`},
			[]string{`"q": "1 < 2 && 3 > 2"`, "raw row as read:"}},
		{"escapes as read stay", RejectLine{Stage: "ingest", ID: "x:3", Reason: "bad", Raw: `{"q":"\u003c"}`},
			[]string{`"q": "\u003c"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clipped := prettySample(tt.rl)
			if clipped {
				t.Fatal("clipped")
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("sample lacks %s:\n%s", w, got)
				}
			}
			line, _, _ := strings.Cut(got, "\n\nraw row as read:\n")
			if !json.Valid([]byte(line)) {
				t.Errorf("the reject line is not JSON:\n%s", line)
			}
			if tt.rl.Raw == "" && strings.Contains(got, `\u00`) {
				t.Errorf("sample holds JSON escapes:\n%s", got)
			}
		})
	}
}
