package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// writeParquet writes rows with parquet-go's struct mapping.
func writeParquet[T any](t testing.TB, rows []T, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, append([]parquet.WriterOption{parquet.MaxRowsPerRowGroup(2)}, opts...)...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func convert(t testing.TB, b []byte) []string {
	t.Helper()
	r, err := parquetJSONL(context.Background(), bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		return nil
	}
	if !bytes.HasSuffix(out, []byte("\n")) {
		t.Fatalf("output does not end in a newline: %q", out)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

type turn struct {
	From  string `parquet:"from" json:"from"`
	Value string `parquet:"value" json:"value"`
}

// The shapes of the Hub's converted Parquet of ToolACE and xlam.
type toolaceRow struct {
	System        string `parquet:"system" json:"system"`
	Conversations []turn `parquet:"conversations,list" json:"conversations"`
}

type xlamRow struct {
	ID      int64  `parquet:"id" json:"id"`
	Query   string `parquet:"query" json:"query"`
	Answers string `parquet:"answers" json:"answers"`
	Tools   string `parquet:"tools" json:"tools"`
}

func TestParquetDatasetShapes(t *testing.T) {
	ta := []toolaceRow{
		{System: "You are an expert…\n[{\"name\": \"f\"}]", Conversations: []turn{{"user", "hi \"there\""}, {"assistant", "[f(a=1)]"}}},
		{System: "", Conversations: []turn{}},
		{System: "s", Conversations: []turn{{"user", "一"}}},
	}
	got := convert(t, writeParquet(t, ta))
	want := []string{
		`{"system":"You are an expert…\n[{\"name\": \"f\"}]","conversations":[{"from":"user","value":"hi \"there\""},{"from":"assistant","value":"[f(a=1)]"}]}`,
		`{"system":"","conversations":[]}`,
		`{"system":"s","conversations":[{"from":"user","value":"一"}]}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("toolace rows:\n got %q\nwant %q", got, want)
	}
	xl := []xlamRow{{ID: 7, Query: "q", Answers: `[{"name": "f", "arguments": {"x": 2.50}}]`, Tools: `[]`}}
	got = convert(t, writeParquet(t, xl))
	want = []string{`{"id":7,"query":"q","answers":"[{\"name\": \"f\", \"arguments\": {\"x\": 2.50}}]","tools":"[]"}`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("xlam rows:\n got %q\nwant %q", got, want)
	}
}

type inner struct {
	A *string `parquet:"a,optional" json:"a"`
	B []int32 `parquet:"b,list" json:"b"`
}

type kitchen struct {
	S     string            `parquet:"s" json:"s"`
	Opt   *string           `parquet:"opt,optional" json:"opt"`
	I8    int8              `parquet:"i8" json:"i8"`
	U32   uint32            `parquet:"u32" json:"u32"`
	U64   uint64            `parquet:"u64" json:"u64"`
	F     float32           `parquet:"f" json:"f"`
	D     float64           `parquet:"d" json:"d"`
	B     bool              `parquet:"b" json:"b"`
	Bytes []byte            `parquet:"bytes" json:"-"`
	Nest  *inner            `parquet:"nest,optional" json:"nest"`
	Lists [][]string        `parquet:"lists,list" json:"lists"`
	Bare  []turn            `parquet:"bare" json:"bare"` // legacy: a bare repeated group
	M     map[string]int64  `parquet:"m" json:"m"`
	TS    time.Time         `parquet:"ts,timestamp(millisecond)" json:"-"`
	JS    string            `parquet:"js,json" json:"-"`
	Tags  map[string]string `parquet:"tags" json:"tags"`
}

func ptr[T any](v T) *T { return &v }

func TestParquetKinds(t *testing.T) {
	rows := []kitchen{
		{S: "x", Opt: ptr("o"), I8: -3, U32: 4000000000, U64: 1 << 63, F: 1.5, D: 0.1, B: true, Bytes: []byte("text"),
			Nest: &inner{A: ptr("a"), B: []int32{1, 2}}, Lists: [][]string{{"p", "q"}, {}, {"r"}}, Bare: []turn{{"f", "v"}},
			M: map[string]int64{"k": 1}, TS: time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC), JS: `{ "z": [1, 2.50] }`, Tags: map[string]string{}},
		{S: "", Bytes: []byte{0xff, 0xfe}, Lists: nil, JS: `not json`, TS: time.Unix(0, 0)},
		{S: "n", Nest: &inner{}, JS: `null`},
	}
	got := convert(t, writeParquet(t, rows))
	want := []string{
		`{"s":"x","opt":"o","i8":-3,"u32":4000000000,"u64":9223372036854775808,"f":1.5,"d":0.1,"b":true,"bytes":"text","nest":{"a":"a","b":[1,2]},"lists":[["p","q"],[],["r"]],"bare":[{"from":"f","value":"v"}],"m":{"k":1},"ts":"2024-05-06T07:08:09.123Z","js":{"z":[1,2.50]},"tags":{}}`,
		`{"s":"","opt":null,"i8":0,"u32":0,"u64":0,"f":0,"d":0,"b":false,"bytes":"//4=","nest":null,"lists":[],"bare":[],"m":{},"ts":"1970-01-01T00:00:00Z","js":"not json","tags":{}}`,
		`{"s":"n","opt":null,"i8":0,"u32":0,"u64":0,"f":0,"d":0,"b":false,"bytes":"","nest":{"a":null,"b":[]},"lists":[],"bare":[],"m":{},"ts":"0001-01-01T00:00:00Z","js":null,"tags":{}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, got[i], want[i])
		}
		if !json.Valid([]byte(got[i])) {
			t.Errorf("row %d is not JSON: %s", i, got[i])
		}
	}
}

func TestParquetEmptyAndBroken(t *testing.T) {
	if got := convert(t, writeParquet[xlamRow](t, nil)); len(got) != 0 {
		t.Errorf("no rows: got %q", got)
	}
	b := writeParquet(t, []xlamRow{{ID: 1}})
	if _, err := parquetJSONL(context.Background(), bytes.NewReader(b[:len(b)/2]), int64(len(b)/2)); err == nil {
		t.Error("a truncated file opened without error")
	}
}

// FuzzParquetRows: rows built from arbitrary text and shapes come back as
// one JSON line each, equal to encoding/json's rendering of the same rows.
func FuzzParquetRows(f *testing.F) {
	f.Add("hello", "wörld", uint8(2), uint8(1), int64(5), true)
	f.Add("", "\x00\"\\\n", uint8(0), uint8(3), int64(-1), false)
	f.Fuzz(func(t *testing.T, a, b string, nTurns, nList uint8, n int64, opt bool) {
		a, b = strings.ToValidUTF8(a, "?"), strings.ToValidUTF8(b, "?")
		type row struct {
			Name  string   `parquet:"name" json:"name"`
			N     int64    `parquet:"n" json:"n"`
			Opt   *string  `parquet:"opt,optional" json:"opt"`
			Turns []turn   `parquet:"turns,list" json:"turns"`
			List  []string `parquet:"list,list" json:"list"`
			Inner *inner   `parquet:"inner,optional" json:"inner"`
		}
		var rows []row
		for i := range 3 {
			r := row{Name: a, N: n + int64(i), Turns: []turn{}, List: []string{}}
			if opt != (i%2 == 0) {
				r.Opt = &b
				r.Inner = &inner{A: &a, B: []int32{int32(n), int32(i)}}
			}
			for j := range int(nTurns % 5) {
				r.Turns = append(r.Turns, turn{From: a, Value: b + string(rune('0'+j))})
			}
			for range int(nList%4) + i {
				r.List = append(r.List, b)
			}
			rows = append(rows, r)
		}
		got := convert(t, writeParquet(t, rows))
		if len(got) != len(rows) {
			t.Fatalf("%d lines for %d rows", len(got), len(rows))
		}
		for i, line := range got {
			var have, want any
			if err := json.Unmarshal([]byte(line), &have); err != nil {
				t.Fatalf("row %d: %v: %s", i, err, line)
			}
			if rows[i].Inner != nil && rows[i].Inner.B == nil {
				rows[i].Inner.B = []int32{}
			}
			wb, _ := json.Marshal(rows[i])
			json.Unmarshal(wb, &want)
			if !reflect.DeepEqual(have, want) {
				t.Fatalf("row %d:\n got %s\nwant %s", i, line, wb)
			}
		}
	})
}
