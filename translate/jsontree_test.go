package translate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseTree(t *testing.T) {
	cases := []struct {
		in   string
		ok   bool
		kind byte
	}{
		{`{}`, true, '{'},
		{` {"a": [1, 2.5e3, -0], "b": {"c": null}, "d": true, "e": false} `, true, '{'},
		{`[]`, true, '['},
		{`"x\"y\u8f6f"`, true, '"'},
		{`-12.5E+2`, true, '0'},
		{`null`, true, 'n'},
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
		if c.ok && n.kind != c.kind {
			t.Errorf("parseTree(%q): kind %c, want %c", c.in, n.kind, c.kind)
		}
	}
	n, err := parseTree([]byte(`{"z": 1, "a": "x\"y", "m": [true]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n.keys, []string{"z", "a", "m"}) {
		t.Errorf("keys %q: source order lost", n.keys)
	}
	if s := n.get("a"); s.str != `x"y` || s.start != 14 || s.end != 20 {
		t.Errorf("string node %+v", s)
	}
}

func TestSameValue(t *testing.T) {
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
	}
	for _, c := range cases {
		a, _ := parseTree([]byte(c.a))
		b, _ := parseTree([]byte(c.b))
		if got := sameValue(a, b); got != c.want {
			t.Errorf("sameValue(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func TestSplice(t *testing.T) {
	src := []byte(`{"b": "two", "a":   "one\u0021",  "n": 1.50}`)
	n, err := parseTree(src)
	if err != nil {
		t.Fatal(err)
	}
	got := splice(src, []edit{
		{start: n.get("a").start, end: n.get("a").end, value: "一 & <一>"},
		{start: n.get("b").start, end: n.get("b").end, value: `二"`},
	})
	want := `{"b": "二\"", "a":   "一 & <一>",  "n": 1.50}`
	if string(got) != want {
		t.Errorf("splice:\n got %s\nwant %s", got, want)
	}
	if out := splice(src, nil); string(out) != string(src) {
		t.Errorf("no edits changed the text")
	}
}

// FuzzParseTree: on valid JSON, parseTree agrees with encoding/json, and
// rewriting every string with itself keeps the value.
func FuzzParseTree(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x","b":[1,"y",{"c":null}]}`, `"\ud83d\ude00"`, `[1e5, -2, true]`, ` {"k" : "v" } `, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseTree(b)
		if (err == nil) != json.Valid(b) {
			t.Fatalf("parseTree error %v, json.Valid %v", err, json.Valid(b))
		}
		if err != nil {
			return
		}
		var edits []edit
		var walk func(*node)
		walk = func(n *node) {
			if n.kind == '"' {
				edits = append(edits, edit{start: n.start, end: n.end, value: n.str})
			}
			for _, k := range n.kids {
				walk(k)
			}
		}
		walk(n)
		out := splice(b, edits)
		// Numbers as written: valid JSON may hold numbers no float64 holds.
		var want, got any
		if err := decodeNumbers(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeNumbers(out, &got); err != nil {
			t.Fatalf("spliced text is not JSON: %q", out)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("splice changed the value: %q → %q", b, out)
		}
		m, _ := parseTree(out)
		if !sameValue(n, m) {
			t.Fatalf("sameValue disagrees after a no-op splice: %q", b)
		}
	})
}

// decodeNumbers is json.Unmarshal keeping numbers as json.Number.
func decodeNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}
