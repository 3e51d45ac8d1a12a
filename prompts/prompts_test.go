package prompts

import (
	"strings"
	"testing"
)

// Every built-in template parses and has a description.
func TestBuiltins(t *testing.T) {
	names := Names()
	if len(names) < 10 {
		t.Fatalf("only %d built-in prompts: %v", len(names), names)
	}
	for _, name := range names {
		tm, err := Builtin(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tm.Doc == "" || tm.Hash == "" || len(tm.msgs) == 0 {
			t.Errorf("%s: no description, hash or message", name)
		}
	}
	if _, err := Builtin("no_such_prompt"); err == nil {
		t.Error("an unknown built-in must be an error")
	}
}

func TestParseAndRender(t *testing.T) {
	tests := []struct {
		name, text string
		data       any
		want       []string // role: content
		err        string
	}{
		{name: "roles and data", text: "doc\n-- system --\nBe brief.\n-- user --\nTools: {{json .Tools}}\n\n-- assistant --\nok\n-- user --\n{{.Q}}\n",
			data: map[string]any{"Tools": []string{"a<b"}, "Q": "why?"},
			want: []string{"system: Be brief.", `user: Tools: ["a<b"]`, "assistant: ok", "user: why?"}},
		{name: "pretty", text: "-- user --\n{{pretty .}}", data: map[string]int{"a": 1}, want: []string{"user: {\n  \"a\": 1\n}"}},
		{name: "missing key is an error", text: "-- user --\n{{.Nope}}", data: map[string]any{}, err: "map has no entry"},
		{name: "unknown role", text: "-- tool --\nx", err: `want system, user or assistant`},
		{name: "no sections", text: "just text", err: "no messages"},
		{name: "bad template", text: "-- user --\n{{.X", err: "unclosed action"},
		{name: "broken marker", text: "-- --", err: "malformed section marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := Parse(tt.name, []byte(tt.text))
			var msgs []string
			if err == nil {
				ms, rerr := tm.Render(tt.data)
				err = rerr
				for _, m := range ms {
					msgs = append(msgs, m.Role+": "+m.Content)
				}
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(msgs, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q\nwant %q", msgs, tt.want)
			}
		})
	}
	a, _ := Parse("a", []byte("-- user --\nx"))
	b, _ := Parse("b", []byte("-- user --\ny"))
	if a.Hash == b.Hash {
		t.Error("different texts must have different hashes")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("doc\n-- system --\nBe brief.\n-- user --\n{{.Q}}\n"))
	f.Add([]byte("-- user --\n{{json .}}"))
	f.Fuzz(func(t *testing.T, text []byte) {
		tm, err := Parse("fuzz", text)
		if err != nil {
			return
		}
		tm.Render(map[string]any{"Q": "x"}) // may fail on missing keys, must not panic
	})
}

// Check renders every sample: a template is refused on the first sample it
// cannot render, and without a sample it cannot be checked at all.
func TestCheck(t *testing.T) {
	type data struct{ A, B string }
	tests := []struct {
		name, text string
		samples    []any
		err        string
	}{
		{name: "renders", text: "-- user --\n{{.A}}{{if .B}} {{.B}}{{end}}", samples: []any{data{"a", "b"}, data{A: "a"}}},
		{name: "unknown field", text: "-- user --\n{{.A}} {{.C}}", samples: []any{data{"a", "b"}}, err: "can't evaluate field C"},
		{name: "in a branch only a full sample takes", text: "-- user --\n{{if .B}}{{.C}}{{end}}", samples: []any{data{}, data{"a", "b"}}, err: "can't evaluate field C"},
		{name: "in a branch only an empty field takes", text: "-- user --\n{{if not .B}}{{.C}}{{end}}", samples: []any{data{"a", "b"}, data{A: "a"}}, err: "can't evaluate field C"},
		{name: "no sample", text: "-- user --\nx", err: "no sample data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := Parse("p.tmpl", []byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			err = tm.Check(tt.samples...)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "prompt p.tmpl: ") {
				t.Fatalf("error %v, want %q after the prompt's name", err, tt.err)
			}
		})
	}
}
