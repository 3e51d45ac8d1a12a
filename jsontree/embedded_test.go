package jsontree

import (
	"encoding/json"
	"strings"
	"testing"
)

// embeddedBoth decodes row, {"t": <lit>, …}, with and without Embedded
// (for "t"); it fails the test unless both give the same outcome: the same
// error, or the same tree with "t" decoded from its text when that text is
// an array or object. It reports whether Embedded decoded "t" in one pass.
func embeddedBoth(t *testing.T, row []byte) (onePass bool) {
	t.Helper()
	old := Parser{Data: row, CopyStrings: true}
	want, werr := old.Parse()
	var arena Arena
	data := append([]byte(nil), row...)
	np := Parser{Data: data, CopyStrings: true, Arena: &arena, Embedded: func(k string) bool { return k == "t" }}
	got, err := np.Parse()
	clear(data) // CopyStrings: nothing may point into the row
	if werr != nil || err != nil {
		if werr == nil || err == nil || werr.Error() != err.Error() || IsEOF(werr) != IsEOF(err) {
			t.Fatalf("%q: errors differ: two passes %v, one pass %v", row, werr, err)
		}
		return false
	}
	if old.BadUTF8 != np.BadUTF8 || old.LoneSurrogate != np.LoneSurrogate {
		t.Fatalf("%q: repairs differ", row)
	}
	m := got.Get("t")
	onePass = m != nil && (m.Kind == Array || m.Kind == Object)
	// The second pass, as a reader makes it: a string holding an array or
	// object is decoded.
	for _, v := range []*Value{&want, &got} {
		if m := v.Get("t"); m != nil && m.Kind == String {
			inner := StringParser(m.Str)
			if d, err := inner.Parse(); err == nil && (d.Kind == Array || d.Kind == Object) {
				*m = d
			}
		}
	}
	if g, w := string(Compact(&got)), string(Compact(&want)); g != w {
		t.Fatalf("%q: one pass %s, two passes %s", row, g, w)
	}
	return onePass
}

// embeddedRow is {"a": 1, "t": <s as a JSON string>, "z": null}.
func embeddedRow(s string) []byte {
	q, _ := json.Marshal(s)
	return []byte(`{"a": 1, "t": ` + string(q) + `, "z": null}`)
}

func TestEmbedded(t *testing.T) {
	for _, c := range []struct {
		text     string
		onePass  bool
		rawEmbed string // the literal's raw body instead of text, when set
	}{
		{text: `[{"name": "f", "arguments": {"a": [1, -2.5e3, true, false, null], "b": "x"}}]`, onePass: true},
		{text: `{"k": "with \"quotes\" and \\ and \/ and \n\t\r\b\f", "n": {}}`, onePass: true},
		{text: " \n\t[ 1 , {\"城市\": \"台北\"} ]\r\n ", onePass: true},
		{text: `[]`, onePass: true},
		{text: `{"a": "\u00e9"}`},   // an inner \u escape: two passes
		{text: "[\"tab\tinside\"]"}, // a control character in an inner string
		{text: `"a string"`},        // not an array or object
		{text: `42`},
		{text: `[1, 2`},                                      // truncated
		{text: `{"a": 1, "a": 2}`},                           // duplicate key
		{text: `[1] x`},                                      // data after the value
		{text: `{"a": 1}`, rawEmbed: `{\"a\": \u0031}`},      // an outer \u escape
		{text: `["/"]`, rawEmbed: `[\"\/\"]`, onePass: true}, // an outer \/
		{text: "[\"\xff\"]", rawEmbed: "[\\\"\xff\\\"]"},     // invalid UTF-8
		{text: `[1]`, rawEmbed: "[1\t]"},                     // a raw tab: the row is invalid
		{text: `[1]`, rawEmbed: `[1`},                        // the row is truncated
	} {
		row := embeddedRow(c.text)
		if c.rawEmbed != "" {
			row = []byte(`{"a": 1, "t": "` + c.rawEmbed + `", "z": null}`)
		}
		if got := embeddedBoth(t, row); got != c.onePass {
			t.Errorf("%s: one pass %v, want %v", row, got, c.onePass)
		}
	}
	// Only top-level members are decoded in one pass.
	p := Parser{Data: []byte(`{"o": {"t": "[1]"}}`), CopyStrings: true, Embedded: func(string) bool { return true }}
	v, err := p.Parse()
	if err != nil || v.Get("o").Get("t").Kind != String {
		t.Errorf("nested member: %v, %s", err, Compact(&v))
	}
}

// FuzzEmbedded checks the one-pass decoder against the two passes, on
// texts held in a string (the usual escapes) and on raw literal bodies.
func FuzzEmbedded(f *testing.F) {
	for _, s := range []string{`[{"name": "f", "arguments": {"a": [1, 2.5], "b": "x\"y\\z"}}]`, `{"a": "\n\u00e9\ud83d\ude00"}`, " [1,\n2] ", `{"a":{"b":[]}}`} {
		f.Add(s, false)
	}
	for _, s := range []string{`[\"a\\\\\"]`, `{\"a\": \"\\\/\"}`, `[1\n,\t2]`, `[\u005b]`, `{\"k\": \"v\\u00e9\"}`} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, raw bool) {
		row := embeddedRow(s)
		if raw {
			row = []byte(`{"t": "` + s + `"}`)
		}
		embeddedBoth(t, row)
		if !raw && strings.ContainsAny(s, "[{") {
			// Also as the only member.
			q, _ := json.Marshal(s)
			embeddedBoth(t, []byte(`{"t":`+string(q)+`}`))
		}
	})
}
