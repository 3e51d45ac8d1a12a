package translate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/jsontree"
)

func TestParseTree(t *testing.T) {
	cases := []struct {
		in   string
		ok   bool
		kind jsontree.Kind
	}{
		{`{}`, true, jsontree.Object},
		{` {"a": [1, 2.5e3, -0], "b": {"c": null}, "d": true, "e": false} `, true, jsontree.Object},
		{`[]`, true, jsontree.Array},
		{`"x\"y\u8f6f"`, true, jsontree.String},
		{`-12.5E+2`, true, jsontree.Number},
		{`null`, true, jsontree.Null},
		{`{"a": 1, "a": 2}`, true, jsontree.Object}, // repeated keys: the answer checks report them
		{``, false, 0},
		{`{"a": }`, false, 0},
		{`{"a": 1} {}`, false, 0},
		{`[1, 2,]`, false, 0},
		{`{'a': 1}`, false, 0},
		{`nul`, false, 0},
	}
	for _, c := range cases {
		n, err := parseTree([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("parseTree(%q): err %v, want ok=%v", c.in, err, c.ok)
			continue
		}
		if c.ok && n.Kind != c.kind {
			t.Errorf("parseTree(%q): kind %v, want %v", c.in, n.Kind, c.kind)
		}
	}
	src := []byte(`{"z": 1, "a": "x\"y", "m": [true]}`)
	n, err := parseTree(src)
	if err != nil {
		t.Fatal(err)
	}
	if e := stringEdit(src, n.Get("a"), ""); n.Get("a").Str != `x"y` || e.start != 14 || e.end != 20 {
		t.Errorf("string node %+v, edit %+v", n.Get("a"), e)
	}
}

func TestSplice(t *testing.T) {
	src := []byte(`{"b": "two", "a":   "one\u0021",  "n": 1.50}`)
	n, err := parseTree(src)
	if err != nil {
		t.Fatal(err)
	}
	got := splice(src, []edit{
		stringEdit(src, n.Get("a"), "一 & <一>"),
		stringEdit(src, n.Get("b"), `二"`),
	})
	want := `{"b": "二\"", "a":   "一 & <一>",  "n": 1.50}`
	if string(got) != want {
		t.Errorf("splice:\n got %s\nwant %s", got, want)
	}
	if out := splice(src, nil); string(out) != string(src) {
		t.Errorf("no edits changed the text")
	}
}

// FuzzParseTree: parseTree accepts what encoding/json accepts (but nesting
// deeper than jsontree.MaxDepth), and rewriting every string with itself
// keeps the value. encoding/json replaces each invalid UTF-8 byte with
// U+FFFD, jsontree each run of them, so the value is compared with
// encoding/json's only for valid UTF-8.
func FuzzParseTree(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x","b":[1,"y",{"c":null}]}`, `"\ud83d\ude00"`, `[1e5, -2, true]`, ` {"k" : "v" } `, `{"a":`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseTree(b)
		if (err == nil) != json.Valid(b) {
			p := jsontree.Parser{Data: b, DuplicateKeys: true}
			_, perr := p.Parse()
			if je, ok := perr.(*jsontree.Error); ok && je.Msg == "nesting too deep" {
				return
			}
			t.Fatalf("parseTree error %v, json.Valid %v", err, json.Valid(b))
		}
		if err != nil {
			return
		}
		var edits []edit
		var walk func(*jsontree.Value)
		walk = func(v *jsontree.Value) {
			if v.Kind == jsontree.String {
				edits = append(edits, stringEdit(b, v, v.Str))
			}
			for i := range v.Elems {
				walk(&v.Elems[i].Val)
			}
		}
		walk(n)
		out := splice(b, edits)
		if utf8.Valid(b) {
			want, err := decodeNumbers(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeNumbers(out)
			if err != nil {
				t.Fatalf("spliced text is not JSON: %q", out)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("splice changed the value: %q → %q", b, out)
			}
		}
		m, err := parseTree(out)
		if err != nil || !jsontree.Equal(n, m) {
			t.Fatalf("the value changed after a no-op splice: %q → %q", b, out)
		}
	})
}

// decodeNumbers decodes b with numbers as their literals, so that numbers
// beyond float64 (1E700) compare too.
func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
