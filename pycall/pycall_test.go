package pycall

import (
	"strings"
	"testing"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // "name|arguments"
	}{
		{"one call", `[get_weather(city="Paris")]`, []string{`get_weather|{"city":"Paris"}`}},
		{"no brackets", `get_weather(city="Paris", days=3)`, []string{`get_weather|{"city":"Paris","days":3}`}},
		{"no arguments", `[now()]`, []string{`now|{}`}},
		{"name with spaces", `[Market Trends API(trend_type="MARKET_INDEXES", country="us")]`, []string{`Market Trends API|{"trend_type":"MARKET_INDEXES","country":"us"}`}},
		{"name with parentheses", `[User Feed (Video Posts) V2(user_id="42", limit=10)]`, []string{`User Feed (Video Posts) V2|{"user_id":"42","limit":10}`}},
		{"name with punctuation", `[ferry.schedule-v2:beta(port="Rock")]`, []string{`ferry.schedule-v2:beta|{"port":"Rock"}`}},
		{"parallel calls", `[a(x=1), Tide Table(h="P"),a(x=2)]`, []string{`a|{"x":1}`, `Tide Table|{"h":"P"}`, `a|{"x":2}`}},
		{"trailing commas", `[a(x=1,), b(),]`, []string{`a|{"x":1}`, `b|{}`}},
		{"white space and newlines", "[\n  a( x = 1 ,\n y = 'z' )\n]", []string{`a|{"x":1,"y":"z"}`}},
		{"strings holding , = ) ] (", `[f(q="a, b = c) ] (d", r='x)]')]`, []string{`f|{"q":"a, b = c) ] (d","r":"x)]"}`}},
		{"escapes", `[f(a="say \"hi\"", b='it\'s', c="tab\there\nnew", d="back\\slash", e="\x41\u00e9\U0001F600", f="\101\0")]`,
			[]string{`f|{"a":"say \"hi\"","b":"it's","c":"tab\there\nnew","d":"back\\slash","e":"Aé😀","f":"A\u0000"}`}},
		{"unknown escape keeps the backslash", `[f(p="C:\data\q")]`, nil},
		{"raw unicode", `[查询天气(城市="台北", 说明="晴天 ☀")]`, []string{`查询天气|{"城市":"台北","说明":"晴天 ☀"}`}},
		{"True False None and JSON literals", `[f(a=True, b=False, c=None, d=true, e=false, f=null)]`, []string{`f|{"a":true,"b":false,"c":null,"d":true,"e":false,"f":null}`}},
		{"numbers", `[f(a=-3, b=+4, c=1.5e-3, d=-2.0E+10, e=.5, f=7., g=1_000, h=007, i=0, j=-0.0)]`,
			[]string{`f|{"a":-3,"b":4,"c":1.5e-3,"d":-2.0e+10,"e":0.5,"f":7.0,"g":1000,"h":7,"i":0,"j":-0.0}`}},
		{"nested lists and dicts", `[f(x=[1, [2, 3], {"k": [None]}], d={'a': {"b": (1, 2)}, "c": []})]`,
			[]string{`f|{"x":[1,[2,3],{"k":[null]}],"d":{"a":{"b":[1,2]},"c":[]}}`}},
		{"tuples", `[f(a=(), b=(1,), c=(1, 'x'), d=(5))]`, []string{`f|{"a":[],"b":[1],"c":[1,"x"],"d":5}`}},
		{"triple quotes and concatenation", `[f(a="""x "y" z""", b='a' "b" 'c', c='''multi
line''')]`, []string{`f|{"a":"x \"y\" z","b":"abc","c":"multi\nline"}`}},
		{"key order kept", `[f(z=1, a=2, m=3)]`, []string{`f|{"z":1,"a":2,"m":3}`}},
		{"keyword names with dashes and dots", `[f(content-type="json", a.b=1)]`, []string{`f|{"content-type":"json","a.b":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if calls[0].Name != "f" || string(calls[0].Arguments) != `{"p":"C:\\data\\q"}` {
					t.Fatalf("got %s %s", calls[0].Name, calls[0].Arguments)
				}
				return
			}
			var got []string
			for _, c := range calls {
				got = append(got, c.Name+"|"+string(c.Arguments))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
			// Printing and parsing again gives the same calls.
			again, err := Parse(Print(calls))
			if err != nil || !sameCalls(calls, again) {
				t.Fatalf("round trip of %s: %v %v", Print(calls), again, err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{``, "expected a call"},
		{`[]`, "empty call list"},
		{`[f(1, x=2)]`, "positional arguments are not allowed"},
		{`[f(x)]`, "positional"},
		{`[f(x=1, x=2)]`, `argument "x" repeated`},
		{`[f(x=Paris)]`, "expected a literal value"},
		{`[f(x=inf)]`, "expected a literal value"},
		{`[f(x=1+2)]`, "expected , or ) after an argument"},
		{`[f(x=0x10)]`, "invalid number"},
		{`[f(x=1j)]`, "invalid number"},
		{`[f(x={1: 2})]`, "dict keys must be strings"},
		{`[f(x={"a": 1, "a": 2})]`, `dict key "a" repeated`},
		{`[f(x={"a": 1, 'a': 2})]`, `dict key "a" repeated`},
		// Two different invalid bytes are both U+FFFD in JSON: the message
		// names what was written, not only the replacement.
		{"[f(x={'k\xff': 1, 'k\xfe': 2})]", `dict keys "'k\xff'" and "'k\xfe'" are one key once invalid UTF-8 is replaced: "k�"`},
		{"[f(x={'k\xff': 1, 'k\xff': 2})]", `dict key "k�" repeated`},
		{`[f(x={"a" 1})]`, "expected : after a dict key"},
		{`[f(x="abc)]`, "unexpected end inside a string"},
		{`[f(x=[1, 2)]`, "expected , or ] in a list"},
		{`[f(x=1)`, "no closing ]"},
		{`[f(x=1)] trailing`, "unexpected text after the calls"},
		{`f(x=1) g(y=2)`, "unexpected text after a call"},
		{`[f(x=1) g(y=2)]`, "unexpected text after a call"},
		{`["f"(x=1)]`, "expected a call"},
		{`[f(x==1)]`, "positional"},
		{`[f(x="\u12")]`, `invalid \u escape`},
		{`[f(x=` + strings.Repeat("[", jsontree.MaxDepth+1), "nesting too deep"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v, want %q", tt.in, err, tt.msg)
		}
	}
}

func TestPrint(t *testing.T) {
	calls := []record.Call{
		{Name: "Tide Table", Arguments: []byte(`{"harbour":"Port \"Isaac\"","days":[1,2.50],"opts":{"a":null,"b":true},"note":"ünï\n"}`)},
		{Name: "now", Arguments: []byte(`{}`)},
	}
	want := `[Tide Table(harbour="Port \"Isaac\"", days=[1, 2.50], opts={"a": None, "b": True}, note="ünï\n"), now()]`
	if got := Print(calls); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := Print([]record.Call{{Name: "f", Arguments: []byte(`[1]`)}}); got != `[f([1])]` {
		t.Fatalf("non-object arguments: %s", got)
	}
}

func sameCalls(a, b []record.Call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || string(a[i].Arguments) != string(b[i].Arguments) {
			return false
		}
	}
	return true
}

// sameAsReference fails t unless Parse's calls and error for s are the
// reference reader's (reference_test.go): the same names and argument
// bytes, each call's arguments with no capacity past their end, the same
// error text.
func sameAsReference(t *testing.T, s string, calls []record.Call, err error) {
	t.Helper()
	want, wantErr := refParse(s)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, reference %v", s, err, wantErr)
	}
	if !sameCalls(calls, want) {
		t.Fatalf("%q: calls %v, reference %v", s, calls, want)
	}
	for _, c := range calls {
		if cap(c.Arguments) != len(c.Arguments) {
			t.Fatalf("%q: arguments %q have room past their end (%d > %d)", s, c.Arguments, cap(c.Arguments), len(c.Arguments))
		}
	}
}

// TestParseMatchesReference holds Parse to the tree-building reader on
// texts that reach each error and edge: a retried name, a parenthesised
// value that turns out a tuple, nine and more keys, keys equal only once
// decoded, quotes inside triple quotes, escapes, numbers.
func TestParseMatchesReference(t *testing.T) {
	texts := []string{
		`[User Feed (Video Posts) V2(user_id="42", limit=10)]`,
		`[f(a=(1), b=(1, 2), c=((1), (2,)), d=(("x") "y"))]`,
		`[f(a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9, j=10, a=11)]`,
		`[f(a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9, j=10)]`,
		`[f(d={'k': 1, "k": 2})]`, `[f(d={'\x6b': 1, "k": 2})]`, `[f(d={"a" "b": 1, 'ab': 2})]`,
		`[f(d={'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5, 'f': 6, 'g': 7, 'h': 8, 'i': 9, 'a': 10})]`,
		`[f(d={(1): 2})]`, `[f(d={"k" 2})]`, `[f(d={"k": 2 "j": 3})]`, `[f(d={"k": 2`,
		`[f(a="""it's "q" ""quoted"" """, b='''a''b''')]`, `[f(a="""x""`,
		`[f(a='\q\7\78\u00e9\ud83d\ude00\ud83d', b="\
x")]`,
		"[f(a=\"caf\xe9 \xff\", b='\x01\t')]", `[f(a=00.50, b=-0_1, c=1__0, d=1e, e=1.e5, f=+.5E-0_1)]`,
		`[f(g=-)]`, `[f(h=1x)]`, `[f(x=1)(y=2)]`, `[a(x=1), b(y=)]`, `[a(x=1) b()]`, `[a b(x=1)]`,
		`f(x=1)`, `f(x=1) `, `(x=1)`, `[f(=1)]`, `[f(x=[1, 2,], y=(3, 4,), z={})]`, `[f(x=[,])]`, `[f(x=(,))]`,
	}
	for _, s := range texts {
		calls, err := Parse(s)
		sameAsReference(t, s, calls, err)
	}
}

// FuzzParse: the same calls and errors as the reference reader; never panics; whatever parses prints and parses back
// to the same calls, with arguments that are compact JSON objects.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`[Market Trends API(trend_type="MARKET_INDEXES", country="us")]`,
		`[User Feed (Video Posts) V2(user_id="42")]`,
		`f(a=[1, (2,), {'k': None}], b='it\'s', c=1_0.5e-3)`,
		`[a(), b(x="""q"""), c(y=True)]`,
		`[f(x="\U0001F600\x41\101")]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		calls, err := Parse(s)
		sameAsReference(t, s, calls, err)
		if err != nil {
			return
		}
		for _, c := range calls {
			v, err := jsontree.Parse(c.Arguments)
			if err != nil || v.Kind != jsontree.Object || string(jsontree.Compact(&v)) != string(c.Arguments) {
				t.Fatalf("arguments %q are not a compact JSON object", c.Arguments)
			}
		}
		printed := Print(calls)
		again, err := Parse(printed)
		if err != nil {
			t.Fatalf("printed %q does not parse: %v", printed, err)
		}
		if !sameCalls(calls, again) {
			t.Fatalf("round trip changed the calls: %q", printed)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	s := `[Tide Table Lookup(harbour="Port Isaac", date="2024-06-02"), ferry.schedule(from_port='Padstow', to_port="Rock", max_results=3, filters={'wheelchair': True, 'ids': [1, 2.5e3, -7]})]`
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for range b.N {
		if _, err := Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}
