package jsontree

import (
	"encoding/json"
	"strings"
	"testing"
	"unsafe"
)

// laidAgrees reads the literal "t" of row whole with a Laid (AppendValue,
// then the literal's end) and checks it against the two passes and
// Inner: when the Laid takes the literal, its text decodes to a value
// whose compact form is what the Laid wrote, the one-pass decoder and
// Inner would take it too (an array or object), and the rest of the row
// decodes as without the hook; when it does not, an Inner read after the
// Laid's attempt agrees with the two passes (innerAgreesAfter). It reports
// whether the Laid took the literal.
func laidAgrees(t *testing.T, row []byte) bool {
	t.Helper()
	old := Parser{Data: row, CopyStrings: true}
	want, werr := old.Parse()
	var got []byte
	data := append([]byte(nil), row...)
	np := Parser{Data: data, CopyStrings: true, Hooked: func(k string) bool { return k == "t" }, Literal: func(k string, r Inner) (Value, bool) {
		l := r.Laid()
		from := l
		b, ok := l.AppendValue(nil)
		if ok {
			// The value's text, read again from where it starts, is
			// the value again.
			again := r.Laid()
			if text := l.Since(from); !again.Again(text) || again.i != l.i || again.depth != l.depth {
				t.Fatalf("%q: Again(Since) of a value read does not read it (%q)", row, text)
			}
		}
		if !ok || l.Peek() != '"' {
			return Value{}, false
		}
		if !r.Took(l) || !r.End() {
			t.Fatalf("%q: a Laid at the literal's end, Took or End failed", row)
		}
		got = b
		return Value{Kind: Null}, true
	}}
	v, err := np.Parse()
	clear(data)
	tv := v.Get("t")
	if err != nil || tv == nil || tv.Kind != Null {
		// Declined: the Inner reads as if the Laid had not tried.
		for depth := 1; depth <= 3; depth++ {
			innerAgreesAfter(t, row, depth, func(r Inner) {
				l := r.Laid()
				l.AppendValue(nil)
			})
		}
		return false
	}
	if werr != nil || want.Get("t") == nil || want.Get("t").Kind != String {
		t.Fatalf("%q: the Laid took a literal of a row that does not decode so: %v", row, werr)
	}
	inner, ierr := ParseString(want.Get("t").Str)
	if ierr != nil || old.BadUTF8 || old.LoneSurrogate {
		t.Fatalf("%q: the Laid took text that does not decode (%v)", row, ierr)
	}
	if string(got) != string(Compact(&inner)) {
		t.Fatalf("%q: the Laid wrote %s, the two passes give %s", row, got, Compact(&inner))
	}
	if (inner.Kind == Array || inner.Kind == Object) && !innerAgrees(t, row, 2) {
		t.Fatalf("%q: the Laid took a literal Inner leaves", row)
	}
	*want.Get("t") = Value{Kind: Null}
	if string(Compact(&v)) != string(Compact(&want)) {
		t.Fatalf("%q: the rest of the row: %s, want %s", row, Compact(&v), Compact(&want))
	}
	return true
}

func TestLaid(t *testing.T) {
	for _, c := range []struct {
		text     string
		taken    bool
		rawEmbed string // the literal's raw body instead of text, when set
	}{
		{text: `[{"name": "f", "arguments": {"a": [1, -2.5e3, true, false, null], "b": "x"}}]`, taken: true},
		{text: `{"城市": "台北", "n": {}, "l": [], "e": ""}`, taken: true},
		{text: `[[[[[[[[[[[[1]]]]]]]]]]]]`, taken: true},
		{text: strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), taken: true}, // at the nesting limit
		{text: strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)},          // past it
		{text: `[0, -0, 1E+5, 2e-3, 10.25]`, taken: true},
		{text: `"a string"`, taken: true},
		{text: `42`, taken: true},
		{text: `[]`, taken: true},
		{text: `[1,2]`},          // another layout
		{text: `{"a":1}`},        // another layout
		{text: ` [1]`},           // white space before
		{text: `[1] `},           // white space after
		{text: "[1,\n2]"},        // a line break
		{text: `["say \"hi\""]`}, // an inner escape
		{text: `["a/b"]`, rawEmbed: `[\"a\/b\"]`},
		{text: `{"a": "\u00e9"}`},
		{text: "[\"tab\tinside\"]"},
		{text: `{"a": 1, "a": 2}`},
		{text: `{"a": {"b": 1, "b": 2}}`},
		{text: `{"a": {"b": 1}, "b": 2}`, taken: true}, // the same key in two objects
		{text: `[01]`},
		{text: `[1.]`},
		{text: `[-]`},
		{text: `[tru]`},
		{text: `[1, ]`},
		{text: `[1] [2]`},
		{text: "[\"\xff\"]", rawEmbed: "[\\\"\xff\\\"]"},
		{text: `[1]`, rawEmbed: `[1`},
		{text: `[1]`, rawEmbed: `[1, 2`},
	} {
		row := embeddedRow(c.text)
		if c.rawEmbed != "" {
			row = []byte(`{"a": 1, "t": "` + c.rawEmbed + `", "z": null}`)
		}
		if got := laidAgrees(t, row); got != c.taken {
			t.Errorf("%s: taken %v, want %v", row, got, c.taken)
		}
	}
}

// TestLaidKeep reads strings with Str and keeps them with Keep: the kept
// copies outlive the row's bytes, and a Laid the hook drops leaves the
// Inner where it was.
func TestLaidKeep(t *testing.T) {
	data := []byte(`{"t": "{\"k\": \"値\", \"e\": \"\"} ", "u": "x"}`)
	var kept []string
	p := Parser{Data: data, CopyStrings: true, Hooked: func(string) bool { return true }, Literal: func(k string, r Inner) (Value, bool) {
		if k != "t" {
			return Value{}, false
		}
		dropped := r.Laid()
		if !dropped.Open('{') || dropped.Lit("x") {
			t.Fatal("Lit")
		}
		l := r.Laid()
		for i := range 2 {
			ok1 := l.Lit(", ")
			if i == 0 {
				ok1 = l.Open('{')
			}
			if i == 0 && l.Lit(", ") {
				t.Error("Lit moved where the text is not")
			}
			key, ok2 := l.Str()
			ok3 := l.Lit(": ")
			val, ok4 := l.Str()
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return Value{}, false
			}
			kept = append(kept, r.Keep(key), r.Keep(val))
		}
		if !l.Close('}') {
			return Value{}, false
		}
		// White space before the closing quote: End reads it.
		if l.Peek() != ' ' || !r.Took(l) || !r.End() {
			return Value{}, false
		}
		return Value{Kind: Null}, true
	}}
	v, err := p.Parse()
	clear(data)
	if err != nil || v.Get("t").Kind != Null || v.Get("u").Str != "x" {
		t.Fatalf("%s, %v", Compact(&v), err)
	}
	if got := strings.Join(kept, "|"); got != "k|値|e|" {
		t.Errorf("kept %q", got)
	}
	// Took fails once the Inner has moved, and inside a container, the
	// Inner's or the Laid's.
	p = Parser{Data: []byte(`{"t": "[1] [2]"}`), CopyStrings: true, Hooked: func(string) bool { return true }, Literal: func(k string, r Inner) (Value, bool) {
		l := r.Laid()
		if !r.Begin(Array) || r.Took(l) {
			t.Error("Took inside a container")
		}
		return Value{}, false
	}}
	if _, err := p.Parse(); err != nil {
		t.Fatal(err)
	}
	p = Parser{Data: []byte(`{"t": "[1] [2]"}`), CopyStrings: true, Hooked: func(string) bool { return true }, Literal: func(k string, r Inner) (Value, bool) {
		l := r.Laid()
		if !l.Open('[') || l.Close(']') || r.Took(l) {
			t.Error("Took with a container of the Laid's open, or Close without its bracket")
		}
		return Value{}, false
	}}
	if _, err := p.Parse(); err != nil {
		t.Fatal(err)
	}
}

// TestLaidAgain checks Since and Again: the text of a value read, read
// again where it stands next (reading moves over it) and not elsewhere
// (reading stays).
func TestLaidAgain(t *testing.T) {
	read := false
	row := []byte(`{"t": "[{\"a\": [1]}, {\"a\": [1]}, {\"a\": [2]}, {\"a\": [1]"}`)
	p := Parser{Data: row, CopyStrings: true, Hooked: func(k string) bool { return k == "t" }, Literal: func(k string, r Inner) (Value, bool) {
		l := r.Laid()
		if s := l.Since(l); s != "" {
			t.Errorf("Since of the Laid itself: %q", s)
		}
		if !l.Open('[') {
			t.Fatal("no [")
		}
		from := l
		if _, ok := l.AppendValue(nil); !ok {
			t.Fatal("first element not read")
		}
		text := l.Since(from)
		if text != `{\"a\": [1]}` {
			t.Fatalf("Since: %q", text)
		}
		if s := from.Since(l); s != "" {
			t.Errorf("Since of a later copy: %q", s)
		}
		for i, want := range []bool{true, false, false} {
			if more, ok := l.Next(']'); !more || !ok {
				t.Fatalf("element %d: no \", \"", i+1)
			}
			at := l.i
			got := l.Again(text)
			if got != want || (got && l.i != at+len(text)) || (!got && l.i != at) {
				t.Errorf("element %d: Again %v (want %v), moved %d bytes", i+1, got, want, l.i-at)
			}
			if !got {
				l.AppendValue(nil)
			}
		}
		if l.Again("") {
			t.Error("Again of no text")
		}
		read = true
		return Value{}, false
	}}
	if _, err := p.Parse(); err != nil || !read {
		t.Fatal(err, read)
	}
}

// FuzzLaid checks Laid against the two passes and Inner (laidAgrees), on
// texts held in a string and on raw literal bodies.
func FuzzLaid(f *testing.F) {
	for _, s := range []string{`[{"name": "f", "arguments": {"a": [1, 2.5], "b": "x"}}]`, `{"a": {"b": [], "c": {}}, "d": -0.5e+3}`, `[true, false, null, "生成"]`, `[1,2]`, `{"a": 1, "a": 2}`} {
		f.Add(s, false)
	}
	for _, s := range []string{`[\"a\", \"b\"]`, `{\"a\": \"\\\/\"}`, `[1, 2] `, `[\u005b]`, `{\"k\": \"v\"}\n`} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, raw bool) {
		row := embeddedRow(s)
		if raw {
			row = []byte(`{"t": "` + s + `"}`)
		}
		laidAgrees(t, row)
		if !raw {
			q, _ := json.Marshal(s)
			laidAgrees(t, []byte(`{"t":`+string(q)+`}`))
		}
	})
}

// TestBlock checks Parser.Block: room from the free part of the block the
// strings were copied into, which the strings before keep and the strings
// decoded after do not overwrite, or a block of its own.
func TestBlock(t *testing.T) {
	data := []byte(`{"a": "first", "b": "second"}`)
	p := Parser{Data: data, CopyStrings: true, Pos: 6}
	s, err := p.ReadString()
	if err != nil || s != "first" {
		t.Fatal(s, err)
	}
	// The slab has room for the rest of Data from "first" on: the block
	// comes right after it, and "second" right after the block.
	b := p.Block(3)
	if cap(b) != 3 || len(b) != 0 || unsafe.Pointer(unsafe.SliceData(b)) != unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), 5) {
		t.Fatalf("Block(3): len %d cap %d, not after the string", len(b), cap(b))
	}
	b = append(b, "xyz"...)
	p.Pos = 20
	s2, err := p.ReadString()
	if err != nil || s != "first" || s2 != "second" || string(b) != "xyz" || unsafe.Pointer(unsafe.StringData(s2)) != unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), 3) {
		t.Fatalf("after a later string: %q %q %q (%v)", s, s2, b, err)
	}
	big := p.Block(1 << 10)
	if cap(big) != 1<<10 || len(big) != 0 {
		t.Fatalf("Block past the free room: len %d cap %d", len(big), cap(big))
	}
	if z := p.Block(0); z == nil || len(z) != 0 {
		t.Fatalf("Block(0): %v", z)
	}
	var q Parser // nothing copied yet: a block of its own
	if e := q.Block(5); cap(e) != 5 {
		t.Fatalf("Block on a fresh Parser: cap %d", cap(e))
	}
}

// TestLaidKeepOneBlock: strings a hook keeps in the order they stand in
// the text share one block, each copy right after the one before, as
// KeptString's do (the block has room for the rest of the row from each
// string on), however many the text holds.
func TestLaidKeepOneBlock(t *testing.T) {
	var elems []string
	for i := range 12 {
		elems = append(elems, `\"`+strings.Repeat(string(rune('a'+i)), 40)+`\"`)
	}
	data := []byte(`{"t": "[` + strings.Join(elems, ", ") + `]"}`)
	var kept []string
	p := Parser{Data: data, CopyStrings: true, Hooked: func(string) bool { return true }, Literal: func(k string, r Inner) (Value, bool) {
		l := r.Laid()
		if !l.Open('[') {
			return Value{}, false
		}
		var views []string
		for more := true; more; {
			s, ok := l.Str()
			if !ok {
				return Value{}, false
			}
			views = append(views, s)
			if more, ok = l.Next(']'); !ok {
				return Value{}, false
			}
		}
		for _, s := range views {
			kept = append(kept, r.Keep(s))
		}
		if !r.Took(l) || !r.End() {
			return Value{}, false
		}
		return Value{Kind: Null}, true
	}}
	if _, err := p.Parse(); err != nil || len(kept) != len(elems) {
		t.Fatalf("%d kept, %v", len(kept), err)
	}
	for i := 1; i < len(kept); i++ {
		if unsafe.StringData(kept[i]) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(kept[i-1])), len(kept[i-1]))) {
			t.Fatalf("kept string %d is not right after string %d: a block of its own", i, i-1)
		}
	}
}
