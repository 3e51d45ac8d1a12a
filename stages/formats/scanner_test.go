package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/augmentdata/augment/jsontree"
)

// scanAll returns every row and the final error (nil at a clean EOF). A
// row the scanner skipped is listed as "!reason@line:raw".
func scanAll(s *Scanner) ([]string, error) {
	var rows []string
	for {
		row, i, err := s.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		var re *RowError
		if errors.As(err, &re) {
			if re.Row != i {
				return rows, errors.New("row error index differs from the returned index")
			}
			row = []byte(fmt.Sprintf("!%s@%d:%s", re.Reason, re.Line, re.Raw))
		} else if err != nil {
			return rows, err
		}
		if i != int64(len(rows)) {
			return rows, errors.New("index out of sequence")
		}
		rows = append(rows, string(row))
	}
}

// newTinyScanner uses a small buffer so rows cross refills and grow it.
func newTinyScanner(r io.Reader) *Scanner {
	return &Scanner{r: r, buf: make([]byte, 7), maxRow: DefaultMaxRowBytes}
}

func TestScanner(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"array", `[{"a":1},{"b":[2,{"c":"}"}]}]`, []string{`{"a":1}`, `{"b":[2,{"c":"}"}]}`}},
		{"array with space and BOM", "\xEF\xBB\xBF \n[\n  {\"a\": 1} ,\n  {\"b\": 2}\n]\n", []string{`{"a": 1}`, `{"b": 2}`}},
		{"empty array", " [ ] ", nil},
		{"empty input", "", nil},
		{"only space", " \n\t", nil},
		{"lines", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}},
		{"lines: blank lines skipped, CRLF, no final newline", "\n{\"a\":1}\r\n\r\n\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}},
		{"lines: trailing spaces", "{\"a\":1}  \t\n{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}},
		{"lines: pretty-printed objects", "{\n \"a\": 1\n}\n{\n \"b\": [\n 2\n ]\n}\n", []string{"{\n \"a\": 1\n}", "{\n \"b\": [\n 2\n ]\n}"}},
		{"braces and quotes inside strings", `[{"a":"{[\"]}\\","b":"\\\\\"}"}]`, []string{`{"a":"{[\"]}\\","b":"\\\\\"}"}`}},
		{"escaped backslash before quote", `{"a":"x\\"}` + "\n" + `{"b":"\\\\"}`, []string{`{"a":"x\\"}`, `{"b":"\\\\"}`}},
		{"unicode", `[{"城市":"台北 😀"}]`, []string{`{"城市":"台北 😀"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, sc := range []*Scanner{
				NewScanner(strings.NewReader(tt.in)),
				newTinyScanner(iotest.OneByteReader(strings.NewReader(tt.in))),
				newTinyScanner(iotest.DataErrReader(strings.NewReader(tt.in))),
			} {
				got, err := scanAll(sc)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

// TestScannerErrors: damage that cannot be skipped ends the scan with a
// sticky *ScanError at the offset from which nothing is read.
func TestScannerErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		rows   int   // rows returned before the error
		row    int64 // ScanError.Row
		offset int64
		msg    string
	}{
		{"truncated array", `[{"a":1},{"b":`, 1, 1, 9, "ends inside the row"},
		{"array not closed", `[{"a":1}`, 1, 1, 8, "before the array's closing ]"},
		{"array not closed after comma", `[{"a":1},`, 1, 1, 9, "ends after a comma"},
		{"truncated inside string", `[{"a":"xy`, 0, 0, 1, "ends inside a string"},
		{"garbage between elements", `[{"a":1} x {"b":2}]`, 1, 1, 9, `expected , or ] after row 0, found 'x'`},
		{"missing comma", `[{"a":1} {"b":2}]`, 1, 1, 9, "expected , or ]"},
		{"trailing comma", `[{"a":1},]`, 1, 1, 9, "trailing comma"},
		{"element not an object", `[{"a":1}, 7]`, 1, 1, 10, "must be an object, found '7'"},
		{"data after the array", `[{"a":1}] {"b":2}`, 1, 1, 10, "after the array's closing ]"},
		{"unbalanced", `[{"a":[1}]`, 0, 0, 1, "unbalanced '}'"},
		{"compact layout: no safe resume", `[{"a":1},{"b":[1},{"c":3}]`, 1, 1, 9, "layout gives no safe place"},
		{"mixed separators", "[{\"a\":1},\n{\"b\":2}, {\"c\":[}, {\"d\":4}]", 2, 2, 19, "layout gives no safe place"},
		{"no next element", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":", 2, 2, 20, "no element follows"},
		{"UTF-16 LE", "\xFF\xFE[\x00{\x00}\x00]\x00", 0, 0, 0, "the dump is UTF-16 (it starts with a UTF-16 byte order mark); augment reads UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)"},
		{"UTF-16 BE", "\xFE\xFF\x00[", 0, 0, 0, "the dump is UTF-16"},
		{"UTF-32 LE", "\xFF\xFE\x00\x00[\x00\x00\x00", 0, 0, 0, "the dump is UTF-32"},
		{"UTF-32 BE", "\x00\x00\xFE\xFF\x00\x00\x00[", 0, 0, 0, "the dump is UTF-32"},
		{"UTF-16 LE without a mark", "[\x00{\x00}\x00]\x00", 0, 0, 0, `the dump looks like UTF-16 or UTF-32 (a NUL byte beside its first "[")`},
		{"UTF-16 BE lines without a mark", "\x00{\x00}\x00\n", 0, 0, 0, "the dump looks like UTF-16"},
		{"indent 0: nested lines look like elements", "[\n{\n\"a\": [\n{\n\"x\": 1\n}\n]\n},\n{\n\"b\": [\n{\"y\": 1\n]\n},\n{\"c\": 3}\n]", 1, 1, 27, "layout gives no safe place"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, sc := range []*Scanner{NewScanner(strings.NewReader(tt.in)), newTinyScanner(iotest.OneByteReader(strings.NewReader(tt.in)))} {
				rows, err := scanAll(sc)
				var se *ScanError
				if !errors.As(err, &se) {
					t.Fatalf("got rows %q and error %v, want a *ScanError", rows, err)
				}
				if len(rows) != tt.rows || se.Row != tt.row || se.Offset != tt.offset || !strings.Contains(se.Msg, tt.msg) {
					t.Fatalf("got %d rows, %v; want %d rows, row %d offset %d %q", len(rows), err, tt.rows, tt.row, tt.offset, tt.msg)
				}
				if _, _, again := sc.Next(); again != err {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
			}
		})
	}
}

// TestScannerSkips: a broken JSON Lines line, an array element that the
// layout lets the scanner skip, and a row over the limit each cost one row.
func TestScannerSkips(t *testing.T) {
	deep := `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`
	long := `{"a":"` + strings.Repeat(`x\"`, 40) + `"}`
	tests := []struct {
		name   string
		in     string
		maxRow int
		want   []string
	}{
		{"lines: two objects on one line", "{\"a\":1} {\"b\":2}\n{\"c\":3}", 0,
			[]string{`{"a":1} {"b":2}`, `{"c":3}`}},
		{"lines: text and non-objects are rows for Parse", "hello\n[1]\n{\"a\":1}\n", 0,
			[]string{"hello", "[1]", `{"a":1}`}},
		{"lines: line ends inside a string", "{\"a\":\"x\n{\"b\":2}\n", 0,
			[]string{`!bad_json@1:{"a":"x`, `{"b":2}`}},
		{"lines: CRLF line cut inside a string", "{\"a\":\"x\r\n{\"b\":2}\r\n", 0,
			[]string{`!bad_json@1:{"a":"x`, `{"b":2}`}},
		{"lines: line cut after a value", "{\"a\":1}\n{\"b\":{\"c\":2\n{\"d\":3}\n\n{\"e\":4}\n", 0,
			[]string{`{"a":1}`, `!bad_json@2:{"b":{"c":2`, `{"d":3}`, `{"e":4}`}},
		{"lines: line cut after a comma in an object", "{\"a\":1,\n{\"d\":3}\n", 0,
			[]string{`!bad_json@1:{"a":1,`, `{"d":3}`}},
		{"lines: line cut after a comma in an array", "{\"a\":[1,\n{\"d\":3}\n{\"e\":4}\n", 0,
			[]string{`!bad_json@1:{"a":[1,`, `{"d":3}`, `{"e":4}`}},
		{"lines: unbalanced", "{\"a\":1]}\n{\"b\":2}", 0,
			[]string{`!bad_json@1:{"a":1]}`, `{"b":2}`}},
		{"lines: 600 deep", deep + "\n{\"b\":1}\n", 0,
			[]string{"!bad_json@1:" + deep, `{"b":1}`}},
		{"lines: truncated last line", "{\"a\":1}\n{\"b\":{\"c\":2}", 0,
			[]string{`{"a":1}`, `!bad_json@2:{"b":{"c":2}`}},
		{"lines: pretty-printed object, then a cut line", "{\n \"a\": [\n  1\n ]\n}\n{\"b\":\n", 0,
			[]string{"{\n \"a\": [\n  1\n ]\n}", `!bad_json@6:{"b":`}},
		{"lines: row over the limit", long + "\n{\"b\":2}\n", 50,
			[]string{"!row_too_large@1:" + long[:50], `{"b":2}`}},
		{"lines: text line over the limit", strings.Repeat("z", 80) + "\n{\"b\":2}\n", 50,
			[]string{"!row_too_large@1:" + strings.Repeat("z", 50), `{"b":2}`}},
		{"array: element over the limit", "[" + long + ",{\"b\":2}]", 50,
			[]string{"!row_too_large@1:" + long[:50], `{"b":2}`}},
		{"array, one element per line: cut element", "[\n{\"a\":1},\n{\"b\":[1,\n{\"c\":3},\n{\"d\":4}\n]\n", 0,
			[]string{`{"a":1}`, `!bad_framing@3:{"b":[1`, `{"c":3}`, `{"d":4}`}},
		{"array, indent 2: cut element", "[\n  {\n    \"a\": 1\n  },\n  {\n    \"b\": \"tru\n  },\n  {\n    \"c\": [\n      {\"x\": 1},\n      {\"y\": 2}\n    ]\n  }\n]\n", 0,
			[]string{"{\n    \"a\": 1\n  }", "!bad_framing@5:{\n    \"b\": \"tru\n  }", "{\n    \"c\": [\n      {\"x\": 1},\n      {\"y\": 2}\n    ]\n  }"}},
		{"array: text between elements", "[\n{\"a\":1},\n{\"b\":2} x,\n{\"c\":3}\n]", 0,
			[]string{`{"a":1}`, `{"b":2}`, `!bad_framing@3:x`, `{"c":3}`}},
		{"array: element not an object", "[\n{\"a\":1},\n{\"b\":2},\n7,\n{\"c\":3}\n]", 0,
			[]string{`{"a":1}`, `{"b":2}`, `!bad_framing@4:7`, `{"c":3}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, sc := range []*Scanner{NewScanner(strings.NewReader(tt.in)), newTinyScanner(iotest.OneByteReader(strings.NewReader(tt.in)))} {
				sc.SetMaxRowBytes(tt.maxRow)
				got, err := scanAll(sc)
				if err != nil {
					t.Fatalf("rows %q, error %v", got, err)
				}
				if strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
					t.Fatalf("got  %q\nwant %q", got, tt.want)
				}
			}
		})
	}
}

// chunkReader returns at most n bytes a read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// TestScannerReadSizes: with a small row limit, skipping a broken array
// element depends on the bytes only, not on how much each read brings (the
// scanner once looked further for the next element when a read had
// buffered it, and learnt a separator longer than the limit only then).
func TestScannerReadSizes(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		rows   []string
		offset int64  // of the *ScanError, when msg is set
		msg    string // the *ScanError's message, "" for none
	}{
		{"next element just within the limit", "[\n{},\n{\"a\":]xxxxxxxxx},\n{\"b\":1}]",
			[]string{"{}", `!bad_framing@3:{"a":]xxxxxxxxx}`, `{"b":1}`}, 0, ""},
		{"next element one byte beyond the limit", "[\n{},\n{\"a\":]xxxxxxxxxx},\n{\"b\":1}]",
			[]string{"{}"}, 6, "unbalanced ']'; no next element within max_row_bytes (16)"},
		{"next element beyond the limit, then a cut element", "[\n{},\n{\"a\":]xxxxxxxxxxxxxxxxxxxxxxx},\n{\"b\":",
			[]string{"{}"}, 6, "unbalanced ']'; no next element within max_row_bytes (16)"},
		{"separator longer than the limit", "[{}\n                        ,{}\n                        ,{\"a\":]},{}]",
			[]string{"{}", "{}"}, 57, "unbalanced ']'; the rest of the array is not read (its layout gives no safe place"},
		{"compact layout: no resync", "[{} , {\"\"0[}0000000", []string{"{}"}, 6, "unbalanced '}'; the rest of the array is not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			readers := []func(string) *Scanner{
				func(s string) *Scanner { return NewScanner(strings.NewReader(s)) },
				func(s string) *Scanner { return newTinyScanner(iotest.OneByteReader(strings.NewReader(s))) },
			}
			for n := 2; n <= 9; n++ {
				readers = append(readers, func(s string) *Scanner { return newTinyScanner(chunkReader{strings.NewReader(s), n}) })
			}
			for k, newScanner := range readers {
				sc := newScanner(tt.in)
				sc.SetMaxRowBytes(16)
				rows, err := scanAll(sc)
				var se *ScanError
				switch {
				case strings.Join(rows, "\x00") != strings.Join(tt.rows, "\x00"):
					t.Fatalf("reader %d: got %q, want %q (error %v)", k, rows, tt.rows, err)
				case tt.msg == "" && err != nil:
					t.Fatalf("reader %d: %v", k, err)
				case tt.msg != "" && (!errors.As(err, &se) || se.Offset != tt.offset || !strings.Contains(se.Msg, tt.msg)):
					t.Fatalf("reader %d: got error %v, want offset %d %q", k, err, tt.offset, tt.msg)
				}
			}
		})
	}
}

func TestScannerReaderError(t *testing.T) {
	boom := errors.New("disk on fire")
	sc := NewScanner(io.MultiReader(strings.NewReader(`[{"a":1},{"b"`), iotest.ErrReader(boom)))
	rows, err := scanAll(sc)
	if len(rows) != 1 || !errors.Is(err, boom) {
		t.Fatalf("got %q, %v", rows, err)
	}
}

func TestScannerLargeRows(t *testing.T) {
	// Rows much larger than the buffer force it to grow; many rows force refills.
	big := `{"s":"` + strings.Repeat(`ab\"{[`, 300_000) + `"}`
	var in bytes.Buffer
	in.WriteString("[")
	for i := range 50 {
		if i > 0 {
			in.WriteString(",\n")
		}
		if i%10 == 3 {
			in.WriteString(big)
		} else {
			in.WriteString(`{"i":` + strings.Repeat("1", i+1) + `}`)
		}
	}
	in.WriteString("]")
	rows, err := scanAll(NewScanner(bytes.NewReader(in.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	var ref []json.RawMessage
	if err := json.Unmarshal(in.Bytes(), &ref); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(ref) {
		t.Fatalf("%d rows, want %d", len(rows), len(ref))
	}
	for i := range rows {
		if rows[i] != string(ref[i]) {
			t.Fatalf("row %d differs", i)
		}
	}
}

// FuzzScanner checks the scanner against encoding/json: the same rows for
// a valid array of objects and for valid JSON Lines, never a panic
// otherwise, only *RowError and *ScanError for damage, and the same result
// whatever the read sizes, also with a small row limit.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{`[{"a":1},{"b":"}\""}]`, "{\"a\":1}\n\n{\"b\":[{}]}\n", `[{"a":1},`, `[]`, "\xEF\xBB\xBF[{}]", `{"a":"\\"}`,
		"{\"a\":1\n{\"b\":2}\n", "\xFF\xFE{\x00}\x00\n\x00", "\x00\x00\xFE\xFF", "[\n  {\"a\":1},\n  {\"b\":[},\n  {\"c\":3}\n]", `[{"a":"x\\\\\"y"},{"b":2}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var first []string
		var firstErr error
		for i, maxRow := range []int{0, 0, 16, 16} {
			var sc *Scanner
			if i%2 == 0 {
				sc = NewScanner(strings.NewReader(s))
			} else {
				sc = newTinyScanner(iotest.OneByteReader(strings.NewReader(s)))
			}
			sc.SetMaxRowBytes(maxRow)
			rows, err := scanAll(sc)
			var se *ScanError
			if err != nil && !errors.As(err, &se) {
				t.Fatalf("error %v is not a *ScanError", err)
			}
			if i%2 == 0 {
				first, firstErr = rows, err
			} else if strings.Join(rows, "\x00") != strings.Join(first, "\x00") || (err == nil) != (firstErr == nil) || err != nil && err.Error() != firstErr.Error() {
				t.Fatalf("read sizes change the result (limit %d): %q %v vs %q %v", maxRow, first, firstErr, rows, err)
			}
			if maxRow != 0 {
				continue
			}
			if wideBOM(s) {
				var se *ScanError
				if len(rows) > 0 || !errors.As(err, &se) || se.Offset != 0 {
					t.Fatalf("a UTF-16 or UTF-32 dump gave rows %q and error %v, want no rows and a ScanError at byte 0", rows, err)
				}
				continue
			}
			array := strings.HasPrefix(strings.TrimLeft(strings.TrimPrefix(s, "\xEF\xBB\xBF"), " \t\r\n"), "[")
			for _, r := range rows {
				if array && r[0] != '!' && (r[0] != '{' || r[len(r)-1] != '}') {
					t.Fatalf("row %q is not framed as an object", r)
				}
			}
			if array {
				checkArray(t, s, rows, err)
			} else {
				checkLines(t, s, rows, err)
			}
		}
	})
}

// checkArray: a valid array of objects gives encoding/json's elements.
func checkArray(t *testing.T, s string, rows []string, err error) {
	var ref []json.RawMessage
	if json.Unmarshal([]byte(s), &ref) != nil {
		return
	}
	for _, r := range ref {
		if len(r) == 0 || r[0] != '{' {
			return
		}
	}
	if err != nil {
		t.Fatalf("valid array rejected: %v", err)
	}
	if len(rows) != len(ref) {
		t.Fatalf("%d rows, encoding/json finds %d", len(rows), len(ref))
	}
	for i := range rows {
		if rows[i] != string(ref[i]) {
			t.Fatalf("row %d: %q vs %q", i, rows[i], ref[i])
		}
	}
}

// wideBOM reports whether s starts as a UTF-16 or UTF-32 dump does (a
// byte order mark, or '[' or '{' beside a NUL), which the Scanner refuses
// at byte 0.
func wideBOM(s string) bool {
	for _, bom := range []string{"\xFE\xFF", "\xFF\xFE", "\x00\x00\xFE\xFF", "[\x00", "{\x00", "\x00[", "\x00{"} {
		if strings.HasPrefix(s, bom) {
			return true
		}
	}
	return false
}

// checkLines: JSON Lines whose every non-blank line is one JSON object give
// those lines; any input gives no sticky error.
func checkLines(t *testing.T, s string, rows []string, err error) {
	if err != nil {
		t.Fatalf("JSON Lines gave a sticky error: %v", err)
	}
	var want []string
	for _, l := range strings.Split(strings.TrimPrefix(s, "\xEF\xBB\xBF"), "\n") {
		l = strings.Trim(l, " \t\r")
		if l == "" {
			continue
		}
		var m map[string]json.RawMessage
		if l[0] != '{' || json.Unmarshal([]byte(l), &m) != nil || strings.ContainsAny(l, "\v\f\u0085\u00a0") {
			return
		}
		want = append(want, l)
	}
	if strings.Join(rows, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("JSON Lines: got %q, want %q", rows, want)
	}
}

// FuzzClosingQuote holds closingQuote to a byte-by-byte search for a
// quote after an even number of backslashes, from every start and with
// both carries.
func FuzzClosingQuote(f *testing.F) {
	for _, s := range []string{`abc"`, `0123456789abcdef"x"`, `01234567"`, `"#"#"#`, "no quote at all, not one",
		`[{\"name\": \"a\", \"b\": 1}]"`, `\\\\"`, `\\\"0123456789abcdef0123456789"`, `0123456789abcdef0123456789\"ab"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		for start := 0; start <= len(b); start += max(1, len(b)/4) {
			for carry := range 2 {
				for i := start; i <= len(b); i++ {
					want := len(b)
					for q := i; q < len(b); q++ {
						if b[q] != '"' {
							continue
						}
						n := 0
						for k := q - 1; k >= start && b[k] == '\\'; k-- {
							n++
						}
						if n == q-start {
							n += carry
						}
						if n%2 == 0 {
							want = q
							break
						}
					}
					if got := closingQuote(b, i, start, carry); got != want {
						t.Fatalf("%q from %d (start %d, carry %d): %d, want %d", s, i, start, carry, got, want)
					}
				}
			}
		}
	})
}

// scanQuick scans s with SetQuick and reports, besides scanAll's rows and
// error, whether a quick row was not framed (the caller then reads again
// without SetQuick). It fails t when a quick row that jsontree parses is
// not framed: ingest checks Framed only for rows Parse rejects.
func scanQuick(t *testing.T, sc *Scanner) (rows []string, err error, doubt bool) {
	sc.SetQuick(true)
	for {
		row, i, err := sc.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil, doubt
		}
		var re *RowError
		if errors.As(err, &re) {
			row = []byte(fmt.Sprintf("!%s@%d:%s", re.Reason, re.Line, re.Raw))
		} else if err != nil {
			return rows, err, doubt
		}
		if i != int64(len(rows)) {
			t.Fatal("index out of sequence")
		}
		if sc.Quick() {
			framed := Framed(row)
			jp := jsontree.Parser{Data: row}
			if v, perr := jp.Parse(); perr == nil && v.Kind == jsontree.Object && !framed {
				t.Fatalf("quick row %q parses but is not framed", row)
			}
			doubt = doubt || !framed
		}
		rows = append(rows, string(row))
	}
}

// FuzzScannerQuick: with SetQuick, unless a quick row is not framed (a
// restart), the rows, skipped rows and final error are the full scan's,
// whatever the read sizes and the row limit.
func FuzzScannerQuick(f *testing.F) {
	for _, s := range []string{"[\n{\"a\":1},\n{\"b\":2},\n{\"c\":3}\n]", "[\n{\"a\":1},\n{\"b\":{\"c\":1},\n{\"d\":4}\n]",
		"[\n{\"a\":1},\n{\"b\":\"x\\\"},\n{\"c\":3}\n]", "[\n{\"a\":1},\n{\"b\":2}, {\"c\":3},\n{\"d\":4}\n]",
		"[\n{\"a\":1},\n{\"b\":2},\n{\"c\":\"},\n{\"\n]", "[\n{\"a\":1} ,\n{\"b\":2} ,\n{\"c\":3}x ,\n{}]",
		"[{\"a\":1},\n{\"b\":2},\n{\"c\":[}],\n{}\n]", "[\n{},\n{}},\n{},\n{}\n,]", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":3},"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, s string, limit uint8) {
		readers := []func() *Scanner{
			func() *Scanner { return NewScanner(strings.NewReader(s)) },
			func() *Scanner { return newTinyScanner(iotest.OneByteReader(strings.NewReader(s))) },
			func() *Scanner { return newTinyScanner(chunkReader{strings.NewReader(s), 5}) },
		}
		for _, newScanner := range readers {
			full := newScanner()
			full.SetMaxRowBytes(int(limit))
			want, wantErr := scanAll(full)
			quick := newScanner()
			quick.SetMaxRowBytes(int(limit))
			got, err, doubt := scanQuick(t, quick)
			if doubt {
				continue
			}
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("quick: %q %v\nfull:  %q %v", got, err, want, wantErr)
			}
		}
	})
}

// TestScannerQuick: once the layout is one element per line, rows are cut
// at the separator (Quick); the rows and errors are the full scan's, and a
// cut row that is not the full scan's fails Framed.
func TestScannerQuick(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		quick int  // rows cut at the separator, reading the input at once
		doubt bool // a cut row is not framed
	}{
		{"one per line", "[\n{\"a\":1},\n{\"b\":\"}\\\"{\"},\n{\"c\":[{}]},\n{\"d\":4}\n]\n", 2, false},
		{"separator with spaces", "[\n  {\"a\":1} ,\n  {\"b\":2} ,\n  {\"c\":3} ,\n  {\"d\":4}\n]", 2, false},
		{"pretty-printed: never", "[\n  {\n    \"a\": 1\n  },\n  {\n    \"b\": 2\n  },\n  {\n    \"c\": 3\n  }\n]", 0, false},
		{"compact: never", `[{"a":1},{"b":2},{"c":3}]`, 0, false},
		{"row Parse rejects, framed", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":tru},\n{\"d\":4}\n]", 2, false},
		{"line without its brace: full scan", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":[3],\n{\"d\":4}\n]", 1, false},
		{"unclosed object", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":{\"x\":3},\n{\"d\":4}\n]", 2, true},
		{"two objects on a line", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":3}, {\"x\":5},\n{\"d\":4}\n]", 2, true},
		{"string left open", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":\"x\\\"},\n{\"d\":4}\n]", 2, true},
		{"row over the limit: full scan", "[\n{\"a\":1},\n{\"b\":2},\n{\"c\":\"xxxxxxxxxxxxxxxxxxxxxxxx\"},\n{\"d\":4}\n]", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, newScanner := range []func() *Scanner{
				func() *Scanner { return NewScanner(strings.NewReader(tt.in)) },
				// A row is cut only when its line is buffered: rarely here.
				func() *Scanner { return newTinyScanner(iotest.OneByteReader(strings.NewReader(tt.in))) },
			} {
				full := newScanner()
				full.SetMaxRowBytes(24)
				want, wantErr := scanAll(full)
				sc := newScanner()
				sc.SetMaxRowBytes(24)
				sc.SetQuick(true)
				quick, doubt := 0, false
				var got []string
				var err error
				for {
					row, _, e := sc.Next()
					if e != nil {
						var re *RowError
						if !errors.As(e, &re) {
							if !errors.Is(e, io.EOF) {
								err = e
							}
							break
						}
						row = []byte(fmt.Sprintf("!%s@%d:%s", re.Reason, re.Line, re.Raw))
					}
					if sc.Quick() {
						quick++
						doubt = doubt || !Framed(row)
					}
					got = append(got, string(row))
				}
				if k == 0 && (quick != tt.quick || doubt != tt.doubt) {
					t.Fatalf("%d quick rows, doubt %v; want %d, %v (rows %q)", quick, doubt, tt.quick, tt.doubt, got)
				}
				if !doubt && (strings.Join(got, "\x00") != strings.Join(want, "\x00") || fmt.Sprint(err) != fmt.Sprint(wantErr)) {
					t.Fatalf("quick: %q %v\nfull:  %q %v", got, err, want, wantErr)
				}
			}
		})
	}
}

// damagedErr stands for storage.DamagedError: a compressed dump's bytes
// that cannot be decoded past a point.
type damagedErr struct{}

func (damagedErr) Error() string { return "the gzip stream ends early" }
func (damagedErr) Damaged() bool { return true }

// cutReader returns its data with the error in the same call, as a
// decompressor does when its input ends inside a block.
type cutReader struct {
	data string
	err  error
	done bool
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, r.err
	}
	r.done = true
	return copy(p, r.data), r.err
}

// TestScannerDamagedInput: the rows in the bytes read together with a
// damage error are still framed; the damage is then a ScanError at the
// start of the row it cut, and any other read error stays an error of
// the reading.
func TestScannerDamagedInput(t *testing.T) {
	data := "{\"a\":1}\n{\"b\":2}\n{\"c\":"
	rows, err := scanAll(NewScanner(&cutReader{data: data, err: damagedErr{}}))
	var se *ScanError
	if strings.Join(rows, " ") != `{"a":1} {"b":2}` || !errors.As(err, &se) || se.Offset != 16 || se.Row != 2 ||
		!strings.Contains(se.Msg, "the gzip stream ends early after 21 bytes of rows; nothing after that can be read") {
		t.Errorf("rows %q, error %v; want the two whole rows, then a ScanError at byte 16", rows, err)
	}
	rows, err = scanAll(NewScanner(&cutReader{data: data, err: io.ErrClosedPipe}))
	if len(rows) != 2 || errors.As(err, &se) || !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("rows %q, error %v; want the two rows, then the read error itself", rows, err)
	}
}
