package jsontree

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
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
			v, err := ParseString(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(Compact(&v)); got != tt.want {
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
		{"{\"k\xff\": 1, \"k\xfe\": 2}", "duplicate key \"k\uFFFD\" (once invalid UTF-8 is replaced by U+FFFD)", false, 10},
		{`{"a": Infinity}`, "unexpected character 'I'", false, 6},
		// The character, not its first byte read as Latin-1.
		{"[1, \u00e9]", "unexpected character 'é'", false, 4},
		{"\uFEFF{}", "unexpected byte order mark (U+FEFF): a BOM may only start the file", false, 0},
		{"[\xff]", "unexpected byte 0xff (not UTF-8)", false, 1},
		{`{"a": 01}`, "expected , or }", false, 7},
		{`{"a": 1.}`, "invalid number", false, 8},
		{`"tab	inside"`, "control character", false, 4},
		{`"bad \x escape"`, `invalid escape \x`, false, 5},
		{`"it\'s"`, `invalid escape \'`, false, 3},
		{`{"a": tru`, "unexpected end of input", true, 9},
		{`{"a": 1} x`, "unexpected data after", false, 9},
		{``, "unexpected end of input", true, 0},
		{strings.Repeat("[", MaxDepth+1), "nesting too deep", false, MaxDepth},
	}
	for _, tt := range tests {
		_, err := ParseString(tt.in)
		je, ok := err.(*Error)
		if !ok {
			t.Errorf("%q: error %v, want a *Error", tt.in, err)
			continue
		}
		if !strings.Contains(je.Msg, tt.msg) || je.EOF != tt.eof || je.Off != tt.off {
			t.Errorf("%q: got %q eof=%v off=%d, want %q eof=%v off=%d", tt.in, je.Msg, je.EOF, je.Off, tt.msg, tt.eof, tt.off)
		}
	}
}

// TestCopyStrings: with CopyStrings no decoded string or number shares
// Data, whether it had escapes or not, and all share one block.
func TestCopyStrings(t *testing.T) {
	in := `{"k1": "plain", "unknown key": "with \"escapes\" \u00e9", "n": -12.5e3, "a": ["x", "y\ny", "bad ` + "\xff" + `"]}`
	want := `{"k1":"plain","unknown key":"with \"escapes\" é","n":-12.5e3,"a":["x","y\ny","bad ` + "\uFFFD" + `"]}`
	data := []byte(in)
	p := Parser{Data: data, CopyStrings: true}
	v, err := p.Parse()
	if err != nil {
		t.Fatal(err)
	}
	// One block, from the first key's text (byte 2) to the end.
	if cap(p.slab) != len(in)-2 {
		t.Errorf("slab of %d bytes, want one of %d", cap(p.slab), len(in)-2)
	}
	for i := range data {
		data[i] = '#'
	}
	if got := string(Compact(&v)); got != want {
		t.Errorf("after Data changed: got %s, want %s", got, want)
	}
	if !p.BadUTF8 {
		t.Error("BadUTF8 not set")
	}
}

func TestSingleQuoteEscapeOption(t *testing.T) {
	p := Parser{Data: []byte(`{"t": "it\'s"}`), SingleQuoteEscape: true}
	v, err := p.Value()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(Compact(&v)); got != `{"t":"it's"}` || !p.SawSingleQuote {
		t.Errorf("got %s sawSQ=%v", got, p.SawSingleQuote)
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
		v, err := ParseString(s)
		std := json.Valid([]byte(s))
		if err != nil {
			if _, ok := err.(*Error); !ok {
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
		c := Compact(&v)
		fuzzArena.Reset()
		ap := Parser{Data: []byte(s), Arena: &fuzzArena}
		if av, err := ap.Parse(); err != nil || string(Compact(&av)) != string(c) {
			t.Fatalf("with an arena: %v, %q; without: %q", err, Compact(&av), c)
		}
		// CopyStrings: the same values, none of them sharing Data.
		data := []byte(s)
		cp := Parser{Data: data, CopyStrings: true}
		cv, err := cp.Parse()
		clear(data)
		if err != nil || string(Compact(&cv)) != string(c) {
			t.Fatalf("with CopyStrings: %v, %q; without: %q", err, Compact(&cv), c)
		}
		if !json.Valid(c) {
			t.Fatalf("compact output %q is not valid JSON", c)
		}
		// ValidUTF8 on valid text (the compact output is): the same values.
		vp := Parser{Data: c, ValidUTF8: true}
		if vv, err := vp.Parse(); err != nil || string(Compact(&vv)) != string(c) || vp.BadUTF8 {
			t.Fatalf("with ValidUTF8: %v, %q; without: %q", err, Compact(&vv), c)
		}
		v2, err := Parse(c)
		if err != nil {
			t.Fatalf("compact output %q does not re-parse: %v", c, err)
		}
		if c2 := Compact(&v2); string(c2) != string(c) {
			t.Fatalf("compact not stable: %q then %q", c, c2)
		}
	})
}

func TestSpans(t *testing.T) {
	src := []byte(` {"z": 1.50, "a": "x\"y", "m": [true, null, {"k": false}], "e": {}} `)
	p := Parser{Data: src, Spans: true}
	v, err := p.Parse()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range v.Elems {
		keys = append(keys, m.Key)
	}
	if strings.Join(keys, ",") != "z,a,m,e" {
		t.Errorf("keys %q: source order lost", keys)
	}
	spans := []struct {
		v    *Value
		want string
	}{
		{&v, `{"z": 1.50, "a": "x\"y", "m": [true, null, {"k": false}], "e": {}}`},
		{v.Get("z"), `1.50`},
		{v.Get("a"), `"x\"y"`},
		{v.Get("m"), `[true, null, {"k": false}]`},
		{&v.Get("m").Elems[0].Val, `true`},
		{&v.Get("m").Elems[1].Val, `null`},
		{v.Get("m").Elems[2].Val.Get("k"), `false`},
		{v.Get("e"), `{}`},
	}
	for _, s := range spans {
		a, b := s.v.Span(src)
		if got := string(src[a:b]); got != s.want {
			t.Errorf("span %q, want %q", got, s.want)
		}
	}
	if a, b := v.Get("a").Span(src); a != 18 || b != 24 {
		t.Errorf("string span %d:%d, want 18:24", a, b)
	}
}

func TestDuplicateKeysOption(t *testing.T) {
	p := Parser{Data: []byte(`{"a": 1, "a": 2}`), DuplicateKeys: true}
	v, err := p.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Elems) != 2 || v.Get("a").Str != "1" {
		t.Errorf("got %s", Compact(&v))
	}
}

func TestEqual(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1.0}`, true},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`"x"`, `"\u0078"`, true},
		{`true`, `false`, false},
		{`1`, `"1"`, false},
		{`null`, `null`, true},
		{`1e2`, `100`, true},
		{`{"a":1,"a":2}`, `{"a":1,"a":2}`, true},
		{`{"a":1,"a":2}`, `{"a":2,"a":1}`, false},
	}
	for _, c := range cases {
		pa := Parser{Data: []byte(c.a), DuplicateKeys: true}
		pb := Parser{Data: []byte(c.b), DuplicateKeys: true}
		a, err1 := pa.Parse()
		b, err2 := pb.Parse()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := Equal(&a, &b); got != c.want {
			t.Errorf("Equal(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

// FuzzSpans: every value's span re-parses to an equal value.
func FuzzSpans(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x\"]",{"b":null}],"c":"\ud83d\ude00"}`, ` [ true , -1.5e3 ] `, `"s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src := []byte(s)
		p := Parser{Data: src, DuplicateKeys: true, Spans: true}
		v, err := p.Parse()
		if err != nil {
			return
		}
		var walk func(v *Value)
		walk = func(v *Value) {
			a, b := v.Span(src)
			q := Parser{Data: src[a:b], DuplicateKeys: true}
			w, err := q.Parse()
			if err != nil || !Equal(v, &w) {
				t.Fatalf("span %q of %q: %v", src[a:b], s, err)
			}
			for i := range v.Elems {
				walk(&v.Elems[i].Val)
			}
		}
		walk(&v)
	})
}

// fuzzArena is reused across fuzz inputs, as the readers reuse theirs.
var fuzzArena Arena

func TestArena(t *testing.T) {
	big := "[" + strings.Repeat("1,", arenaBlock) + "2]" // longer than a block
	texts := []string{
		`{"a":[1,{"b":[true,null]}],"c":"d"}`,
		`[[],[{}],[[1,2],[3]]]`,
		big,
		strings.Repeat(`{"k":[1,2,3],"l":{"m":"n"}},`, 300) + "0", // several blocks, then an error
		`{"x":{"y":{"z":[1]}}}`,
	}
	var a Arena
	for round := range 3 { // the second and third reuse the blocks
		var trees []Value
		var want []string
		for _, s := range texts {
			plain, perr := ParseString(s)
			p := Parser{Data: []byte(s), Arena: &a}
			v, err := p.Parse()
			if (err == nil) != (perr == nil) {
				t.Fatalf("round %d %.30q: error %v with the arena, %v without", round, s, err, perr)
			}
			if err != nil {
				continue
			}
			trees = append(trees, v)
			want = append(want, string(Compact(&plain)))
		}
		// Growing one tree's member list must not overwrite another's.
		for i := range trees {
			if trees[i].Kind == Object || trees[i].Kind == Array {
				trees[i].Elems = append(trees[i].Elems, Member{Key: "new", Val: NewString("v")})
				if len(trees[i].Elems[0].Val.Elems) > 0 {
					e := &trees[i].Elems[0].Val
					e.Elems = append(e.Elems, Member{Key: "new2", Val: NewString("w")})
				}
			}
		}
		for i := range trees {
			if trees[i].Kind != Object && trees[i].Kind != Array {
				continue
			}
			tr := trees[i]
			tr.Elems = tr.Elems[:len(tr.Elems)-1]
			if len(tr.Elems[0].Val.Elems) > 0 {
				e := tr.Elems[0].Val
				e.Elems = e.Elems[:len(e.Elems)-1]
				tr.Elems = append([]Member{{Key: tr.Elems[0].Key, Val: e}}, tr.Elems[1:]...)
			}
			if got := string(Compact(&tr)); got != want[i] {
				t.Fatalf("round %d tree %d: got %.80s, want %.80s", round, i, got, want[i])
			}
		}
		a.Reset()
	}
	if len(a.blocks) > arenaKeep {
		t.Errorf("Reset kept %d blocks, want at most %d", len(a.blocks), arenaKeep)
	}
}

// TestReadStringPositions puts each kind of special content at every offset
// of strings of several lengths, so that it falls at each byte of the
// eight-byte words ReadString scans, and after the string's end too.
func TestReadStringPositions(t *testing.T) {
	tokens := []struct {
		name, raw, want   string
		bad, lone, errant bool
	}{
		{name: "escaped quote", raw: `\"`, want: `"`},
		{name: "escaped backslash", raw: `\\`, want: `\`},
		{name: "newline escape", raw: `\n`, want: "\n"},
		{name: "unicode escape", raw: `\u00e9`, want: "é"},
		{name: "surrogate pair", raw: `\ud83d\ude00`, want: "😀"},
		{name: "lone surrogate", raw: `\udc00`, want: "\uFFFD", lone: true},
		{name: "two-byte UTF-8", raw: "é", want: "é"},
		{name: "three-byte UTF-8", raw: "台北", want: "台北"},
		{name: "four-byte UTF-8", raw: "😀", want: "😀"},
		{name: "invalid byte", raw: "\xff", want: "\uFFFD", bad: true},
		{name: "truncated sequence", raw: "\xe5\x8f", want: "\uFFFD", bad: true},
		{name: "DEL is plain", raw: "\x7f", want: "\x7f"},
		{name: "space is plain", raw: " ", want: " "},
		{name: "byte 0x1f", raw: "\x1f", errant: true},
		{name: "tab unescaped", raw: "\t", errant: true},
		{name: "NUL", raw: "\x00", errant: true},
	}
	for _, tok := range tokens {
		t.Run(tok.name, func(t *testing.T) {
			for n := range 20 {
				for at := 0; at <= n; at++ {
					pre, post := strings.Repeat("a", at), strings.Repeat("b", n-at)
					// Text after the closing quote sits in the same words.
					for _, after := range []string{"", `"`, "\\", "\xff", "\x01", "é,1]"} {
						in := `"` + pre + tok.raw + post + `"` + after
						p := Parser{Data: []byte(in)}
						s, err := p.ReadString()
						if tok.errant {
							if err == nil {
								t.Fatalf("%q: no error", in)
							}
							continue
						}
						if err != nil {
							t.Fatalf("%q: %v", in, err)
						}
						if want := pre + tok.want + post; s != want || p.Pos != len(in)-len(after) {
							t.Fatalf("%q: got %q at %d, want %q at %d", in, s, p.Pos, want, len(in)-len(after))
						}
						if p.BadUTF8 != tok.bad || p.LoneSurrogate != tok.lone {
							t.Fatalf("%q: BadUTF8 %v LoneSurrogate %v, want %v %v", in, p.BadUTF8, p.LoneSurrogate, tok.bad, tok.lone)
						}
					}
				}
			}
		})
	}
}

// FuzzReadString checks ReadString against encoding/json on string
// literals that encoding/json decodes the same way (valid UTF-8, no lone
// surrogates).
func FuzzReadString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b\\c\/d"`, `"\u00e9\ud83d\ude00 台北 0123456789abcdef"`, "\"\x7f\x1f\"", `"\udc00"`, "\"\xff\"",
		// Escapes every few bytes, across word boundaries (copyRun
		// decodes the one-character ones itself), and cut short.
		`"{\n    \"name\": \"f\",\n        \"type\": \"string\"\n}\n\n{\"a\":1}"`, `"0123456789abcde\n\t\r\b\f\/\\\"x\u00e9\n"`,
		`"0123456\n89abcdef0123456\"`, `"0123456789abcdef\`, `"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\q"`, "\"\\n\x01\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p := Parser{Data: []byte(in)}
		if len(in) == 0 || in[0] != '"' {
			return
		}
		s, err := p.ReadString()
		// CopyStrings (one pass, copying as it scans) and SingleQuoteEscape:
		// the same outcome as the two-step path, into a slab that already
		// holds a string (which must stay as it was).
		for _, sq := range []bool{false, true} {
			q := Parser{Data: []byte(in), SingleQuoteEscape: sq}
			qs, qerr := q.ReadString()
			c := Parser{Data: []byte("\"held\"" + in), CopyStrings: true, SingleQuoteEscape: sq}
			held, _ := c.ReadString()
			cs, cerr := c.ReadString()
			ce, _ := cerr.(*Error)
			qe, _ := qerr.(*Error)
			if ce != nil && qe != nil && ce.Msg == qe.Msg && ce.EOF == qe.EOF && ce.Off-6 == qe.Off {
				ce, qe = nil, nil // the same error, 6 bytes further on
			}
			if cs != qs || ce != qe || c.Pos-6 != q.Pos || held != "held" ||
				c.BadUTF8 != q.BadUTF8 || c.LoneSurrogate != q.LoneSurrogate || c.SawSingleQuote != q.SawSingleQuote {
				t.Fatalf("%q (single quotes %v): CopyStrings gives %q, %v at %d; without %q, %v at %d", in, sq, cs, cerr, c.Pos-6, qs, qerr, q.Pos)
			}
		}
		var want string
		werr := json.Unmarshal([]byte(in[:max(p.Pos, 1)]), &want)
		switch {
		case err != nil:
			if p.Pos <= len(in) && werr == nil && json.Valid([]byte(in[:p.Pos])) && !strings.Contains(err.Error(), "escape") {
				t.Fatalf("%q: we fail (%v), encoding/json decodes %q", in, err, want)
			}
		case p.BadUTF8 || p.LoneSurrogate:
			if !strings.Contains(s, "\uFFFD") {
				t.Fatalf("%q: repaired text %q has no U+FFFD", in, s)
			}
		case werr != nil:
			t.Fatalf("%q: we decode %q, encoding/json fails: %v", in, s, werr)
		case s != want:
			t.Fatalf("%q: we decode %q, encoding/json %q", in, s, want)
		}
	})
}

// appendStringRef is AppendString one byte at a time, the reference for
// its word-at-a-time skip.
func appendStringRef(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\r':
				b = append(b, `\r`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c == '\b':
				b = append(b, `\b`...)
			case c == '\f':
				b = append(b, `\f`...)
			case c < 0x20:
				b = append(b, fmt.Sprintf(`\u%04x`, c)...)
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// TestAppendStringPositions puts each byte that needs care at every offset
// of strings of several lengths (each byte of the skipped words).
func TestAppendStringPositions(t *testing.T) {
	for _, tok := range []string{`"`, `\`, "\n", "\x01", "\x1f", "\x7f", " ", "é", "台北", "😀", "\xff", "\xe5\x8f", "\u2028",
		"\xed\xa0\x80", "\xe0\x80\x80", "\xe0\xa0\x80", "\xef\xbf\xbf", "\xe1\x80", "台\xe1", "台\n北", "\xe1\x80\xc0"} {
		for n := range 20 {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + tok + strings.Repeat("b", n-at)
				if got, want := string(AppendString(nil, s)), string(appendStringRef(nil, s)); got != want {
					t.Fatalf("%q: got %s, want %s", s, got, want)
				}
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"plain ascii text", "a\"b\\c\nd\x01e", "台北 and é", "\xff\xfe", "0123456789abcdef\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendString(nil, s)), string(appendStringRef(nil, s)); got != want {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// TestValueAfterTooDeep: a Parser that gave up on text nested too deeply
// reads the next value as a fresh one would (the failing container used
// to stay counted, so a value nested to the limit then failed).
func TestValueAfterTooDeep(t *testing.T) {
	for _, open := range []string{"[", `{"a":`} {
		p := Parser{Data: []byte(strings.Repeat(open, MaxDepth+1))}
		if _, err := p.Value(); err == nil {
			t.Fatalf("%s × %d: no error", open, MaxDepth+1)
		}
		p.Data, p.Pos = []byte(strings.Repeat("[", MaxDepth)+strings.Repeat("]", MaxDepth)), 0
		if _, err := p.Value(); err != nil {
			t.Errorf("after %s × %d: %v", open, MaxDepth+1, err)
		}
	}
}

// TestValidText holds validText to utf8.ValidString: every rune and every
// lead byte with every second byte, alone and inside ASCII and Chinese
// text of more than a word, cut at every offset.
func TestValidText(t *testing.T) {
	check := func(s string) {
		if got, want := validText(s), utf8.ValidString(s); got != want {
			t.Fatalf("% x: validText %v, utf8.ValidString %v", s, got, want)
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r += 7 {
		check(string(r))
		check("abcdefghij" + string(r) + "台北abcdefghij")
	}
	for c := 0x80; c < 0x100; c++ {
		for d := 0; d < 0x100; d++ {
			for _, tail := range []string{"", "\x80", "\x80\x80", "\xbf\xbf\xbf", "abcdefgh"} {
				check(string([]byte{byte(c), byte(d)}) + tail)
				check("台北 abcdefgh" + string([]byte{byte(c), byte(d)}) + tail)
				check("台北" + string([]byte{byte(c), byte(d)}) + tail) // ending a run of three-byte characters
			}
		}
	}
	text := strings.Repeat("台北 is great, 東京はどこですか？ plain words here. ", 5)
	for i := range len(text) {
		check(text[i:])
		check(text[:i])
	}
}

func FuzzValidText(f *testing.F) {
	for _, s := range []string{"台北 is great", "\xed\xa0\x80", "\xe0\x80\x80abcdefgh", "abcdefghijk\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validText(s), utf8.ValidString(s); got != want {
			t.Fatalf("% x: validText %v, utf8.ValidString %v", s, got, want)
		}
	})
}

func BenchmarkValidText(b *testing.B) {
	s := strings.Repeat("你好，请帮我查一下台北明天的天气。I need the forecast for Taipei (#12). 谢谢！", 40)
	b.SetBytes(int64(len(s)))
	for range b.N {
		if !validText(s) {
			b.Fatal("not valid")
		}
	}
}

// TestSkipSpace checks that SkipSpace stops at every byte but JSON's four
// white space bytes, after none, one and several of them, and at the end.
func TestSkipSpace(t *testing.T) {
	for c := range 256 {
		space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
		for _, lead := range []string{"", " ", "\t", "\r\n", " \t\n\r  "} {
			p := Parser{Data: []byte(lead + string([]byte{byte(c)}) + "x")}
			p.SkipSpace()
			want := len(lead)
			if space {
				want++
			}
			if p.Pos != want {
				t.Fatalf("%q: Pos %d, want %d", p.Data, p.Pos, want)
			}
		}
	}
	for _, s := range []string{"", " ", " \t\r\n"} {
		p := Parser{Data: []byte(s)}
		if p.SkipSpace(); p.Pos != len(s) {
			t.Errorf("%q: Pos %d, want %d", s, p.Pos, len(s))
		}
	}
}

// Objects past wideKeys members check duplicates in a key set: a repeat
// far from its first is still found, and objects of the same keys side by
// side, or one inside another, do not see each other's keys.
func TestWideObjectKeys(t *testing.T) {
	obj := func(prefix string, n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %d", fmt.Sprintf("%s%d", prefix, i), i)
		}
		b.WriteString(extra + "}")
		return b.String()
	}
	for _, tt := range []struct {
		name, in string
		dup      string // "" for no error
	}{
		{"wide, no repeat", obj("k", 500, ""), ""},
		{"wide, repeat of the first key at the end", obj("k", 500, `, "k0": 1`), `duplicate key "k0"`},
		{"wide, repeat just past the threshold", obj("k", wideKeys+1, `, "k3": 1`), `duplicate key "k3"`},
		{"same keys side by side", "[" + obj("k", 300, "") + ", " + obj("k", 300, "") + "]", ""},
		{"same keys nested", obj("k", 200, `, "inner": `+obj("k", 200, "")+`, "k199": 0`), `duplicate key "k199"`},
		{"nested wide, then the outer repeats", `{"a": 1, "in": ` + obj("k", 100, "") + `, "b": 2, "a": 3}`, `duplicate key "a"`},
	} {
		_, err := ParseString(tt.in)
		if tt.dup == "" && err != nil || tt.dup != "" && (err == nil || !strings.Contains(err.Error(), tt.dup)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.dup)
		}
	}
}

func BenchmarkWideObject(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 20000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"param_%d":{"type":"string","description":"p"}`, i)
	}
	sb.WriteString("}")
	in := sb.String()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ParseString(in); err != nil {
			b.Fatal(err)
		}
	}
}
