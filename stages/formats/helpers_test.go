package formats

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// render writes a record compactly for table tests: the system text, tool
// names, one line per message, and the tags.
func render(r *record.Record) string {
	var b strings.Builder
	if r.System != "" {
		b.WriteString("system: " + r.System + "\n")
	}
	if len(r.Tools) > 0 {
		var names []string
		for _, t := range r.Tools {
			names = append(names, t.Name)
		}
		b.WriteString("tools: " + strings.Join(names, ", ") + "\n")
	}
	for _, m := range r.Messages {
		b.WriteString(m.Role + ":")
		if m.Reasoning != "" {
			b.WriteString(" (" + m.Reasoning + ")")
		}
		if m.Content != "" {
			b.WriteString(" " + m.Content)
		}
		for _, c := range m.Calls {
			b.WriteString(" -> " + c.Name + string(c.Arguments))
		}
		for i, res := range m.Results {
			if i > 0 {
				b.WriteString(" |")
			}
			b.WriteString(" " + res.Name + "=" + res.Content)
		}
		b.WriteString("\n")
	}
	for _, t := range r.Tags {
		b.WriteString("#" + t.Key + "=" + t.Value + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// rowJSON encodes members (key, value, key, value …) as a JSON object in
// that order.
func rowJSON(kv ...any) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i])
		v, err := json.Marshal(kv[i+1])
		if err != nil {
			panic(err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}

// raw is a JSON text that rowJSON embeds as it is.
type raw string

func (r raw) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// parseCase is one table-test row: either want (the rendered record) or
// reason (the reject reason) with a fragment of the detail.
type parseCase struct {
	name   string
	row    string
	want   string
	reason string
	detail string
}

func runParseCases(t *testing.T, format string, cases []parseCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Parse(format, "src", 7, []byte(tt.row))
			if tt.reason != "" {
				var pe *contract.Reject
				if !errors.As(err, &pe) {
					t.Fatalf("got %v, want reject %s", err, tt.reason)
				}
				if pe.Reason != tt.reason || !strings.Contains(pe.Detail, tt.detail) || pe.RejectReason() != tt.reason {
					t.Fatalf("got %v\nwant %s containing %q", err, tt.reason, tt.detail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec.ID != "src:7" || rec.Source != "src" || rec.Row != 7 || rec.Format != format || rec.Lineage != nil {
				t.Fatalf("identity fields: %+v", rec)
			}
			if got := render(rec); got != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
