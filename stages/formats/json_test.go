package formats

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseJSONCompact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"key order kept", `{"b": 1, "a": {"z": true, "y": null}}`, `{"b":1,"a":{"z":true,"y":null}}`},
		{"number literals kept", `[1.0, -0, 1e5, 2.50E-3, 12345678901234567890]`, `[1.0,-0,1e5,2.50E-3,12345678901234567890]`},
		{"escapes decoded and re-escaped canonically", `"a\/b \u00e9 \"q\" \\ \n\t\u0001"`, `"a/b é \"q\" \\ \n\t\u0001"`},
		{"non-ASCII kept raw", `{"城市": "台北"}`, `{"城市":"台北"}`},
		{"HTML characters not escaped", `"<a&b>"`, `"<a&b>"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"lone surrogate", `"\ud83d!"`, `"` + "\uFFFD" + `!"`},
		{"invalid UTF-8 replaced", "\"a\xffb\"", `"a` + "\uFFFD" + `b"`},
		{"white space everywhere", " \n\t{ \"a\" :\r\n [ 1 , 2 ] } \n", `{"a":[1,2]}`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseJSONString(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(compact(&v)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		in  string
		msg string
		eof bool
		off int
	}{
		{`{"a": 1`, "unexpected end of input", true, 7},
		{`{"a": "b`, "unexpected end of input inside a string", true, 8},
		{`[1, 2,]`, "unexpected character", false, 6},
		{`{"a" 1}`, "expected :", false, 5},
		{`{"a": 1, "a": 2}`, `duplicate key "a"`, false, 9},
		{`{"a": Infinity}`, "unexpected character", false, 6},
		{`{"a": 01}`, "expected , or }", false, 7},
		{`{"a": 1.}`, "invalid number", false, 8},
		{`"tab	inside"`, "control character", false, 4},
		{`"bad \x escape"`, `invalid escape \x`, false, 5},
		{`"it\'s"`, `invalid escape \'`, false, 3},
		{`{"a": tru`, "unexpected end of input", true, 9},
		{`{"a": 1} x`, "unexpected data after", false, 9},
		{``, "unexpected end of input", true, 0},
		{strings.Repeat("[", maxDepth+1), "nesting too deep", false, maxDepth},
	}
	for _, tt := range tests {
		_, err := parseJSONString(tt.in)
		je, ok := err.(*jsonError)
		if !ok {
			t.Errorf("%q: error %v, want a *jsonError", tt.in, err)
			continue
		}
		if !strings.Contains(je.msg, tt.msg) || je.eof != tt.eof || je.off != tt.off {
			t.Errorf("%q: got %q eof=%v off=%d, want %q eof=%v off=%d", tt.in, je.msg, je.eof, je.off, tt.msg, tt.eof, tt.off)
		}
	}
}

func TestSingleQuoteEscapeOption(t *testing.T) {
	p := jparser{data: []byte(`{"t": "it\'s"}`), sqEscape: true}
	v, err := p.value()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(compact(&v)); got != `{"t":"it's"}` || !p.sawSQ {
		t.Errorf("got %s sawSQ=%v", got, p.sawSQ)
	}
}

// FuzzParseJSON checks the decoder against encoding/json: both accept the
// same texts (except duplicate keys, which we refuse) and compacting is
// stable.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9"]}`, `[true,false,null]`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, `-0.0e+1`, `{"a" :{ }}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseJSONString(s)
		std := json.Valid([]byte(s))
		if err != nil {
			if _, ok := err.(*jsonError); !ok {
				t.Fatalf("error type %T", err)
			}
			if std && !strings.Contains(err.Error(), "duplicate key") && !strings.Contains(err.Error(), "nesting") {
				t.Fatalf("encoding/json accepts %q, we say %v", s, err)
			}
			return
		}
		if !std {
			t.Fatalf("we accept %q, encoding/json does not", s)
		}
		c := compact(&v)
		if !json.Valid(c) {
			t.Fatalf("compact output %q is not valid JSON", c)
		}
		v2, err := parseJSON(c)
		if err != nil {
			t.Fatalf("compact output %q does not re-parse: %v", c, err)
		}
		if c2 := compact(&v2); string(c2) != string(c) {
			t.Fatalf("compact not stable: %q then %q", c, c2)
		}
	})
}

// TestRepairTags: text Parse had to replace with U+FFFD is tagged, never
// changed silently.
func TestRepairTags(t *testing.T) {
	tests := []struct {
		name, row, content, repairs string
	}{
		{"clean", `{"messages":[{"role":"user","content":"caf\u00e9"}]}`, "café", ""},
		{"invalid UTF-8 bytes", "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9 \xff\xfe ok\"}]}", "caf\uFFFD \uFFFD ok", "invalid_utf8"},
		{"lone surrogate escape", `{"messages":[{"role":"user","content":"a\ud800b"}]}`, "a\uFFFDb", "lone_surrogate"},
		{"both, sorted", "{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00\xc3\"}]}", "\uFFFD\uFFFD", "invalid_utf8,lone_surrogate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := Parse("openai", "s", 0, []byte(tt.row))
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Messages[0].Content; got != tt.content {
				t.Errorf("content %q, want %q", got, tt.content)
			}
			if got := rec.Tag("repairs"); got != tt.repairs {
				t.Errorf("repairs %q, want %q", got, tt.repairs)
			}
		})
	}
}
