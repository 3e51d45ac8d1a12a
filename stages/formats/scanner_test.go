package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// scanAll returns every row and the final error (nil at a clean EOF).
func scanAll(s *Scanner) ([]string, error) {
	var rows []string
	for {
		row, i, err := s.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
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
	return &Scanner{r: r, buf: make([]byte, 7)}
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

func TestScannerErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		rows   int   // rows returned before the error
		row    int64 // ScanError.Row
		offset int64
		msg    string
	}{
		{"not JSON", "hello", 0, 0, 0, "neither a JSON array nor JSON Lines"},
		{"truncated array", `[{"a":1},{"b":`, 1, 1, 9, "ends inside the row"},
		{"array not closed", `[{"a":1}`, 1, 1, 8, "before the array's closing ]"},
		{"array not closed after comma", `[{"a":1},`, 1, 1, 9, "ends after a comma"},
		{"truncated inside string", `[{"a":"xy`, 0, 0, 1, "ends inside a string"},
		{"garbage between elements", `[{"a":1} x {"b":2}]`, 1, 1, 9, `expected , or ] after row 0, found 'x'`},
		{"missing comma", `[{"a":1} {"b":2}]`, 1, 1, 9, "expected , or ]"},
		{"trailing comma", `[{"a":1},]`, 1, 1, 9, "trailing comma"},
		{"element not an object", `[{"a":1}, 7]`, 1, 1, 10, "must be an object, found '7'"},
		{"data after the array", `[{"a":1}] {"b":2}`, 1, 1, 10, "after the array's closing ]"},
		{"unbalanced", `[{"a":[1}]`, 0, 0, 8, "unbalanced '}'"},
		{"lines: two rows on one line", `{"a":1} {"b":2}`, 1, 1, 8, "after row 0 on the same line"},
		{"lines: line ends inside a string", "{\"a\":\"x\n{\"b\":2}\n", 0, 0, 7, "line ends inside a string"},
		{"lines: truncated last row", "{\"a\":1}\n{\"b\":{\"c\":2}\n", 1, 1, 8, "ends inside the row"},
		{"lines: non-object row", "{\"a\":1}\n[1]\n", 1, 1, 8, "must be an object"},
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

// FuzzScanner checks the scanner against encoding/json on arrays of
// objects: the same rows when the input is valid, never a panic otherwise,
// and the same result whatever the read sizes.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{`[{"a":1},{"b":"}\""}]`, "{\"a\":1}\n\n{\"b\":[{}]}\n", `[{"a":1},`, `[]`, "\xEF\xBB\xBF[{}]", `{"a":"\\"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := scanAll(NewScanner(strings.NewReader(s)))
		var se *ScanError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("error %v is not a *ScanError", err)
		}
		rows2, err2 := scanAll(newTinyScanner(iotest.OneByteReader(strings.NewReader(s))))
		if strings.Join(rows, "\x00") != strings.Join(rows2, "\x00") || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("read sizes change the result: %q %v vs %q %v", rows, err, rows2, err2)
		}
		var ref []json.RawMessage
		if json.Unmarshal([]byte(s), &ref) == nil && strings.HasPrefix(strings.TrimSpace(s), "[") {
			objects := true
			for _, r := range ref {
				objects = objects && len(r) > 0 && r[0] == '{'
			}
			if !objects {
				return
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
		for _, r := range rows {
			if r[0] != '{' || r[len(r)-1] != '}' {
				t.Fatalf("row %q is not framed as an object", r)
			}
		}
	})
}
