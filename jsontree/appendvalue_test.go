package jsontree

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendAgrees checks Parser.AppendValue against Value and AppendCompact on
// text s, read from offset at with the options of opt: it succeeds exactly
// when Value does, writes what AppendCompact writes of Value's result, and
// leaves Pos and the flags as Value does; when it gives up, Value then
// read on the same Parser fails as it fails alone.
func appendAgrees(t *testing.T, s string, at int, opt Parser) {
	t.Helper()
	tree := opt
	tree.Data, tree.Pos = []byte(s), at
	v, err := tree.Value()
	flat := opt
	flat.Data, flat.Pos = []byte(s), at
	got, ok := flat.AppendValue([]byte("x"))
	if ok != (err == nil) {
		t.Fatalf("%q (%+v): AppendValue ok %v, Value error %v", s, opt, ok, err)
	}
	if !ok {
		// The caller reads again with Value, on the same Parser: what
		// AppendValue left (depth, stack) must not change the outcome.
		flat.Pos = at
		if _, err2 := flat.Value(); fmt.Sprint(err2) != fmt.Sprint(err) || flat.depth != tree.depth || flat.stack != nil {
			t.Fatalf("%q (%+v): Value after AppendValue gave up: %v (depth %d), alone: %v (depth %d)", s, opt, err2, flat.depth, err, tree.depth)
		}
		return
	}
	want := string(AppendCompact([]byte("x"), &v))
	if string(got) != want || flat.Pos != tree.Pos || flat.depth != 0 ||
		flat.BadUTF8 != tree.BadUTF8 || flat.LoneSurrogate != tree.LoneSurrogate || flat.SawSingleQuote != tree.SawSingleQuote {
		t.Fatalf("%q (%+v): AppendValue %q at %d (flags %v %v %v), Value %q at %d (flags %v %v %v)", s, opt,
			got, flat.Pos, flat.BadUTF8, flat.LoneSurrogate, flat.SawSingleQuote,
			want, tree.Pos, tree.BadUTF8, tree.LoneSurrogate, tree.SawSingleQuote)
	}
}

// appendOptions are the Parser options AppendValue is compared under.
func appendOptions(s string) []Parser {
	opts := []Parser{{}, {CopyStrings: true}, {SingleQuoteEscape: true}, {DuplicateKeys: true}}
	if utf8.ValidString(s) {
		opts = append(opts, Parser{ValidUTF8: true}, Parser{ValidUTF8: true, SingleQuoteEscape: true})
	}
	return opts
}

func TestAppendValue(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	for _, s := range []string{
		`{"recipes": [{"name": "Stir Fry", "ingredients": ["chicken", "rice"]}, {"n": 1.5e3}]}`,
		` {"a" : "x\"y\\z\n", "b":[ true ,false, null, -0, 12.50 ] } tail`,
		`{"a": "\u00e9\ud83d\ude00", "\u0062": "生成", "c": "\ud800"}`,
		`{"it\'s": '{"a": 1}'}`, `"it\'s"`,
		`{"a": 1, "a": 2}`, `{"a": 1, "\u0061": 2}`, `{"a": {"a": 1}, "b": {"a": 2}}`,
		"\"bad \xff byte\"", "{\"k\xc3\": 1}",
		"[]", "{}", "[ ]", "{ }", "[1,]", "{,}", `{"a" 1}`, `{"a": 1,}`, `[1 2]`, `{"a": 1 "b": 2}`,
		"", " ", "[", "{", `{"a"`, `{"a":`, `"abc`, `tru`, `nul`, `truex`, `-`, `01`, `1.`, `1e`, `1.5e+`,
		"\"tab\there\"", `"\x"`, `"\u12"`, `{1: 2}`, `[1, {"a": [}]`,
		`[1e5, 1E+5, -0.0e-0, 0.5E-10, 100]`, `-01`, `1e+`, `.5`, `+1`, `"a\/b\u002F"`, `"\uD83D\uDE00\udc00x"`,
		"\r\n\t [\r\n{ } ,\t[ ],{\"a\":{}} ]\n", `{"":""}`, `{"a":[{}],"b":[[]]}`, "\"\u2028 <&>\"", "\"\xe2\x80\xa8\"",
		deep, "[" + deep + "]", "{\"a\": " + deep[1:len(deep)-1] + "}",
	} {
		for _, opt := range appendOptions(s) {
			appendAgrees(t, s, 0, opt)
		}
	}
	// From an offset, as glaive's calls read the value after a key.
	appendAgrees(t, `{"name": "f", "arguments": {"x": [1, "y"]}}`, 27, Parser{})
}

func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{`{"recipes": [{"name": "a", "n": [1, 2.5e-3, true, null]}]}`, `{"a": "x\"\u00e9\ud800", "a": 1}`, ` [ {}, [], "生成" ] `, `{"it\'s": 1}`, "\"\xff\""} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, s string, at uint8) {
		for _, opt := range appendOptions(s) {
			appendAgrees(t, s, int(at)%(len(s)+1), opt)
		}
	})
}

func BenchmarkAppendValue(b *testing.B) {
	text := []byte(`{"recipes": [{"name": "Chicken and Bell Pepper Stir Fry", "ingredients": ["chicken", "bell peppers", "rice"], "instructions": "Cut the chicken into small pieces. Slice the bell peppers."}, {"name": "Chicken and Rice Casserole", "rating": 4.5, "vegan": false}]}`)
	for _, way := range []string{"tree", "flat"} {
		b.Run(way, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			buf := make([]byte, 0, 1024)
			for range b.N {
				p := Parser{Data: text, ValidUTF8: true}
				if way == "tree" {
					v, err := p.Value()
					if err != nil {
						b.Fatal(err)
					}
					buf = AppendCompact(buf[:0], &v)
				} else {
					var ok bool
					if buf, ok = p.AppendValue(buf[:0]); !ok {
						b.Fatal("gave up")
					}
				}
			}
			_ = fmt.Sprint(len(buf))
		})
	}
}

// TestAppendValueIn checks that the containers a caller read itself count
// toward MaxDepth: a value that fits alone may be too deep inside them.
func TestAppendValueIn(t *testing.T) {
	for _, c := range []struct {
		n, outer int
		ok       bool
	}{{MaxDepth, 0, true}, {MaxDepth - 2, 2, true}, {MaxDepth - 1, 2, false}, {0, MaxDepth, true}, {1, MaxDepth, false}} {
		s := strings.Repeat("[", c.n) + "1" + strings.Repeat("]", c.n)
		p := Parser{Data: []byte(s)}
		if _, ok := p.AppendValueIn(nil, c.outer); ok != c.ok {
			t.Errorf("%d arrays inside %d: ok %v, want %v", c.n, c.outer, ok, c.ok)
		}
		if p.depth != 0 {
			t.Errorf("%d arrays inside %d: depth %d left", c.n, c.outer, p.depth)
		}
	}
}
