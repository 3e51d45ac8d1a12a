package jsontree

import (
	"encoding/json"
	"fmt"
	"testing"
)

// walkInner reads one value through r (the outermost with depth ≥ 1, as
// Inner reads only arrays and objects there): containers down to depth levels
// token by token (Begin, More, and Key or, at odd depths, AppendKey),
// deeper ones and scalars with AppendValue, strings (at even depths) with
// String. It appends the value
// compact to b.
func walkInner(r Inner, b []byte, depth int) []byte {
	switch c := r.Peek(); {
	case depth > 0 && (c == '[' || c == '{'):
		k, open, close := Array, byte('['), byte(']')
		if c == '{' {
			k, open, close = Object, '{', '}'
		}
		if !r.Begin(k) {
			return b
		}
		b = append(b, open)
		for n := 0; r.More(); n++ {
			if n > 0 {
				b = append(b, ',')
			}
			switch {
			case k == Object && depth%2 == 1:
				b, _ = r.AppendKey(b)
			case k == Object:
				b = append(AppendString(b, r.Key()), ':')
			}
			b = walkAgain(r, b, depth-1)
		}
		return append(b, close)
	case c == '\\' && depth%2 == 0:
		return AppendString(b, r.String())
	}
	return r.AppendValue(b)
}

// walkAgain is walkInner for an element of a container, which it reads
// a second time from its text (Again of Since, from where the first
// reading started) when the first took it: the second reading must end
// where the first did. It panics when not (walkInner has no testing.T).
func walkAgain(r Inner, b []byte, depth int) []byte {
	at := r.Start()
	before := *r.p
	b = walkInner(r, b, depth)
	text := r.Since(at)
	if at < 0 || text == "" || !r.OK() {
		return b
	}
	after := *r.p
	*r.p = before
	if !r.Again(text) || r.p.Pos != after.Pos || r.p.depth != after.depth || r.p.in.n != after.in.n {
		panic(fmt.Sprintf("Again(%q) does not read the value again", text))
	}
	*r.p = after
	return b
}

// innerAgrees decodes row, {"t": <lit>, …}, with a Literal hook that reads
// "t" through an Inner (walkInner to depth levels) and checks it against
// the two passes: when the hook takes the literal, the text decodes to an
// array or object whose compact form is what the hook wrote, and the rest
// of the row decodes as without the hook; when it does not, the row
// decodes exactly as without it. It reports whether the hook took it.
func innerAgrees(t *testing.T, row []byte, depth int) bool {
	t.Helper()
	return innerAgreesAfter(t, row, depth, nil)
}

// innerAgreesAfter is innerAgrees with before, when not nil, reading
// through the Inner first, which must leave it as it was (a Laid that does
// not reach Took).
func innerAgreesAfter(t *testing.T, row []byte, depth int, before func(Inner)) bool {
	t.Helper()
	old := Parser{Data: row, CopyStrings: true}
	want, werr := old.Parse()
	// Without the hook, or when it declines, "t" is read by the one-pass
	// decoder (which FuzzEmbedded holds to the two passes).
	one := Parser{Data: row, CopyStrings: true, Embedded: func(k string) bool { return k == "t" }}
	wantOne, _ := one.Parse()
	var got []byte
	var arena Arena
	data := append([]byte(nil), row...)
	np := Parser{Data: data, CopyStrings: true, Arena: &arena, Embedded: func(k string) bool { return k == "t" }, Literal: func(k string, r Inner) (Value, bool) {
		if k != "t" {
			return Value{}, false
		}
		if before != nil {
			before(r)
		}
		got = walkInner(r, nil, depth)
		return Value{Kind: Null}, r.End()
	}}
	v, err := np.Parse()
	clear(data)
	taken := err == nil && v.Get("t") != nil && v.Get("t").Kind == Null && want.Get("t") != nil && want.Get("t").Kind == String
	if !taken {
		if (werr == nil) != (err == nil) || werr != nil && werr.Error() != err.Error() {
			t.Fatalf("%q: errors differ: without the hook %v, with %v", row, werr, err)
		}
		if werr == nil && string(Compact(&v)) != string(Compact(&wantOne)) {
			t.Fatalf("%q: without the hook %s, with %s", row, Compact(&wantOne), Compact(&v))
		}
		return false
	}
	if werr != nil {
		t.Fatalf("%q: the hook took the literal of a row that does not decode: %v", row, werr)
	}
	inner, ierr := ParseString(want.Get("t").Str)
	if ierr != nil || (inner.Kind != Array && inner.Kind != Object) || old.BadUTF8 || old.LoneSurrogate {
		t.Fatalf("%q: the hook took a literal the one-pass decoder leaves (%v)", row, ierr)
	}
	if string(got) != string(Compact(&inner)) {
		t.Fatalf("%q: the hook wrote %s, the two passes give %s", row, got, Compact(&inner))
	}
	*want.Get("t") = Value{Kind: Null}
	if string(Compact(&v)) != string(Compact(&want)) {
		t.Fatalf("%q: the rest of the row: %s, want %s", row, Compact(&v), Compact(&want))
	}
	return true
}

func TestInner(t *testing.T) {
	for _, c := range []struct {
		text     string
		taken    bool
		rawEmbed string // the literal's raw body instead of text, when set
	}{
		{text: `[{"name": "f", "arguments": {"a": [1, -2.5e3, true, false, null], "b": "x"}}]`, taken: true},
		{text: `{"k": "with \"quotes\" and \\ and \/ and \n\t\r\b\f", "n": {}}`, taken: true},
		{text: " \n\t[ 1 , {\"城市\": \"台北\"} ]\r\n ", taken: true},
		{text: `[]`, taken: true},
		{text: `{}`, taken: true},
		{text: `[[[[[[[[[[1]]]]]]]]]]`, taken: true}, // deeper than Inner's own levels: AppendValue
		{text: `{"a": "\u00e9"}`},                    // an inner \u escape
		{text: "[\"tab\tinside\"]"},
		{text: `"a string"`},
		{text: `42`},
		{text: `[1, 2`},
		{text: `[1, ]`},
		{text: `{"a": 1, }`},
		{text: `{"a": 1, "a": 2}`},
		{text: `{"a": {"b": 1, "b": 2}}`},
		{text: `[1] x`},
		{text: `[1] [2]`},
		{text: `{"a": 1}`, rawEmbed: `{\"a\": \u0031}`},
		{text: `["/"]`, rawEmbed: `[\"\/\"]`, taken: true},
		{text: "[\"\xff\"]", rawEmbed: "[\\\"\xff\\\"]"},
		{text: `[1]`, rawEmbed: "[1\t]"},
		{text: `[1]`, rawEmbed: `[1`},
	} {
		row := embeddedRow(c.text)
		if c.rawEmbed != "" {
			row = []byte(`{"a": 1, "t": "` + c.rawEmbed + `", "z": null}`)
		}
		for depth := 1; depth <= 4; depth++ {
			if got := innerAgrees(t, row, depth); got != c.taken {
				t.Errorf("%s, depth %d: taken %v, want %v", row, depth, got, c.taken)
			}
		}
	}
}

// TestInnerAgain checks Start, Ahead, Since and Again: the text of a
// value read, read again where it stands next, after white space
// (reading moves over it), and not elsewhere (reading stays before the
// value).
func TestInnerAgain(t *testing.T) {
	read := false
	row := []byte(`{"t": "[{\"a\": [1]},\n {\"a\": [1]}, {\"a\": [2]}, {\"a\": [1]"}`)
	p := Parser{Data: row, CopyStrings: true, Hooked: func(k string) bool { return k == "t" }, Literal: func(k string, r Inner) (Value, bool) {
		if !r.Begin(Array) || !r.More() {
			t.Fatal("no [")
		}
		at := r.Start()
		if got := r.Ahead(4); got != `{\"a` {
			t.Errorf("Ahead(4): %q", got)
		}
		r.AppendValue(nil)
		text := r.Since(at)
		if text != `{\"a\": [1]}` {
			t.Fatalf("Since: %q", text)
		}
		for i, want := range []bool{true, false, false} {
			if !r.More() {
				t.Fatalf("element %d: no more", i+1)
			}
			start := r.Start()
			got := r.Again(text)
			if got != want || (got && r.p.Pos != start+len(text)) || (!got && r.p.Pos != start) {
				t.Errorf("element %d: Again %v (want %v), moved %d bytes", i+1, got, want, r.p.Pos-start)
			}
			if !got {
				r.AppendValue(nil)
			}
		}
		if r.Again("") || r.Since(r.p.Pos) != "" {
			t.Error("Again of no text, or Since of where it stands")
		}
		read = true
		return Value{}, false
	}}
	if _, err := p.Parse(); err != nil || !read {
		t.Fatal(err, read)
	}
}

// FuzzInner checks Inner against the two passes (innerAgrees), reading
// the text token by token to several depths.
func FuzzInner(f *testing.F) {
	for _, s := range []string{`[{"name": "f", "arguments": {"a": [1, 2.5], "b": "x\"y\\z"}}]`, `{"a": "\n\u00e9\ud83d\ude00"}`, " [1,\n2] ", `{"a":{"b":[]}}`, `{"a":1,"b":{"a":2,"b":[{"a":3}]}}`} {
		f.Add(s, false, uint8(2))
	}
	for _, s := range []string{`[\"a\\\\\"]`, `{\"a\": \"\\\/\"}`, `[1\n,\t2]`, `[\u005b]`, `{\"k\": \"v\\u00e9\"}`} {
		f.Add(s, true, uint8(1))
	}
	f.Fuzz(func(t *testing.T, s string, raw bool, depth uint8) {
		row := embeddedRow(s)
		if raw {
			row = []byte(`{"t": "` + s + `"}`)
		}
		innerAgrees(t, row, int(depth%12)+1)
		if !raw {
			q, _ := json.Marshal(s)
			innerAgrees(t, []byte(`{"t":`+string(q)+`}`), int(depth%12)+1)
		}
	})
}

// TestInnerText checks Hooked and Inner.Text: fixed text around several
// outermost values, read from the literal's bytes as they stand, and a
// literal the hook declines decoded as the string it is.
func TestInnerText(t *testing.T) {
	// read reads "t" as: Text(lead), the values (walkInner) while one
	// starts, Text(tail), End.
	read := func(row, lead, tail string) (got string, v Value, err error) {
		p := Parser{Data: []byte(row), CopyStrings: true, Hooked: func(k string) bool { return k == "t" }, Literal: func(k string, r Inner) (Value, bool) {
			if !r.Text(lead) {
				return Value{}, false
			}
			var b []byte
			for c := r.Peek(); c == '[' || c == '{'; c = r.Peek() {
				b = walkInner(r, b, 2)
			}
			if !r.Text(tail) || !r.End() {
				return Value{}, false
			}
			got = string(b)
			return Value{Kind: Null}, true
		}}
		v, err = p.Parse()
		return got, v, err
	}
	for _, c := range []struct {
		row, lead, tail string
		want            string // what the hook wrote; "" when it declines
	}{
		{`{"t": "Tools:\n[1, 2] {\"a\": \"b\"}\n\n[]. Done.", "u": 1}`, `Tools:\n`, `. Done.`, `[1,2]{"a":"b"}[]`},
		{`{"t": "Tools:\n{\"a\": 1}{\"b\": 2} \n"}`, `Tools:\n`, ``, `{"a":1}{"b":2}`},
		{`{"t": "only text"}`, `only text`, ``, ``},
		{`{"t": "Tools:\n \n"}`, `Tools:\n`, ``, ``},
		{`{"t": "Tools:\u000a[1]"}`, `Tools:\n`, ``, "-"},          // the lead-in escaped otherwise
		{`{"t": "Tools:\n[1] x"}`, `Tools:\n`, ``, "-"},            // other text after the values
		{`{"t": "Tools:\n[1]. Done"}`, `Tools:\n`, `. Done.`, "-"}, // the tail cut short
		{`{"t": "[1]"}`, ``, `x`, "-"},
		{`{"t": "Tool"}`, `Tools:\n`, ``, "-"},
	} {
		got, v, err := read(c.row, c.lead, c.tail)
		if err != nil {
			t.Fatalf("%s: %v", c.row, err)
		}
		want, werr := Parse([]byte(c.row))
		if werr != nil {
			t.Fatal(werr)
		}
		taken := v.Get("t").Kind == Null
		switch {
		case c.want == "-" && taken:
			t.Errorf("%s: taken, wrote %q", c.row, got)
		case c.want == "-":
			// Declined: the string, not Embedded's one-pass decoding.
			if string(Compact(&v)) != string(Compact(&want)) {
				t.Errorf("%s: declined, read %s, want %s", c.row, Compact(&v), Compact(&want))
			}
		case !taken || got != c.want:
			t.Errorf("%s: taken %v, wrote %q, want %q", c.row, taken, got, c.want)
		}
	}
	// A declined literal holding JSON stays a string with Hooked.
	p := Parser{Data: []byte(`{"t": "[1]"}`), CopyStrings: true, Hooked: func(string) bool { return true }, Literal: func(string, Inner) (Value, bool) { return Value{}, false }}
	if v, err := p.Parse(); err != nil || v.Get("t").Kind != String {
		t.Errorf("declined: %v, %v", v.Get("t"), err)
	}
	// Text inside a container fails.
	p = Parser{Data: []byte(`{"t": "[x]"}`), CopyStrings: true, Hooked: func(string) bool { return true }, Literal: func(_ string, r Inner) (Value, bool) {
		return Value{Kind: Null}, r.Begin(Array) && r.Text("x") && !r.More() && r.End()
	}}
	if v, err := p.Parse(); err != nil || v.Get("t").Kind != String {
		t.Errorf("Text inside a container: %v, %v", v.Get("t"), err)
	}
}
