package shard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	rec := &record.Record{ID: "glaive:3", Source: "glaive", Format: "glaive", Row: 3,
		Messages: []record.Message{{Role: record.RoleUser, Content: "x < y && y > z"}}}
	rows := []Reject{
		{Stage: "ingest", ID: "glaive:2", Source: "glaive", Row: 2, Reason: "bad_call_json",
			Detail: "turn 3: unexpected '}'", Raw: `{"system": "<b>", "chat": "USER: hi\n"}`},
		{Stage: "verify", ID: "glaive:3", Source: "glaive", Row: 3, Reason: "unknown_tool",
			Detail: "call to get_x, not in tools", Record: rec},
	}
	path := filepath.Join(dir, "rejects-00000.jsonl")
	ref, err := writeRejectsAt(t, path, rows)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"stage":"ingest","id":"glaive:2","source":"glaive","row":2,"reason":"bad_call_json","detail":"turn 3: unexpected '}'","raw":"{\"system\": \"<b>\", \"chat\": \"USER: hi\\n\"}"}
{"stage":"verify","id":"glaive:3","source":"glaive","row":3,"reason":"unknown_tool","detail":"call to get_x, not in tools","record":{"id":"glaive:3","source":"glaive","format":"glaive","row":3,"system":"","tools":[],"messages":[{"role":"user","content":"x < y && y > z"}],"tags":[],"lineage":[]}}
`
	got, _ := os.ReadFile(path)
	if string(got) != want {
		t.Errorf("rejects file:\n%s\nwant:\n%s", got, want)
	}
	if ref.Path != filepath.Base(path) || ref.Rows != 2 || ref.Bytes != int64(len(want)) || len(ref.SHA256) != 64 {
		t.Errorf("ref = %+v", ref)
	}
	if rec.Tools != nil || rec.Tags != nil {
		t.Error("WriteRejects changed the caller's record")
	}

	var back []Reject
	if err := ScanJSONL(path, func(r Reject) error { back = append(back, r); return nil }); err != nil {
		t.Fatal(err)
	}
	Normalize(back[1].Record)
	if !reflect.DeepEqual(back, rows) {
		t.Errorf("read back %+v", back)
	}
}

// TestWriteRejectsEmpty pins the decision that an empty rejects list still
// writes (an empty file), replacing any older one.
func TestWriteRejectsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rejects.jsonl")
	if _, err := writeRejectsAt(t, path, []Reject{{Stage: "s", Reason: "r"}}); err != nil {
		t.Fatal(err)
	}
	ref, err := writeRejectsAt(t, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 0 {
		t.Fatalf("after empty write: %q, %v", b, err)
	}
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if ref.Rows != 0 || ref.Bytes != 0 || ref.SHA256 != emptySHA256 {
		t.Errorf("ref = %+v", ref)
	}
}

type sample struct {
	Conversations []map[string]string `json:"conversations"`
	Tools         string              `json:"tools,omitempty"`
	Extra         json.RawMessage     `json:"extra,omitempty"`
}

func TestWriteJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.jsonl")
	rows := []sample{
		{Conversations: []map[string]string{{"from": "human", "value": "a<b>&c"}, {"from": "gpt", "value": "ok"}}, Tools: `[{"name":"f"}]`},
		{Conversations: []map[string]string{{"value": "\u2028 line sep", "from": "human"}}, Extra: json.RawMessage("{ \"k\" :\n [1, 2] }")},
	}
	ref, err := writeJSONLAt(t, path, rows)
	if err != nil {
		t.Fatal(err)
	}
	// Map keys sorted, no HTML escaping, raw JSON compacted and embedded.
	want := `{"conversations":[{"from":"human","value":"a<b>&c"},{"from":"gpt","value":"ok"}],"tools":"[{\"name\":\"f\"}]"}
{"conversations":[{"from":"human","value":"\u2028 line sep"}],"extra":{"k":[1,2]}}
`
	got, _ := os.ReadFile(path)
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if ref.Rows != 2 || ref.Bytes != int64(len(want)) {
		t.Errorf("ref = %+v", ref)
	}
}

func TestWriteJSONLBadValue(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	rows := []sample{{Tools: "ok"}, {Extra: json.RawMessage(`{"unterminated":`)}}
	_, err := writeJSONLAt(t, path, rows)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonBadJSON || e.Row != 1 {
		t.Fatalf("err = %v", err)
	}
	assertNoFiles(t, dir)

	if _, err := writeJSONLAt(t, filepath.Join(dir, "ch.jsonl"), []any{make(chan int)}); reasonOf(err) != ReasonBadJSON {
		t.Errorf("unsupported type: %v", err)
	}
	assertNoFiles(t, dir)
}

func TestScanJSONL(t *testing.T) {
	type kv struct {
		K string `json:"k"`
		V int    `json:"v"`
	}
	long := strings.Repeat("x", 600<<10) // longer than the reader's buffer
	for _, tc := range []struct {
		name    string
		in      string
		want    []kv
		reason  string
		badLine int64
	}{
		{"two lines", "{\"k\":\"a\",\"v\":1}\n{\"k\":\"b\",\"v\":2}\n", []kv{{"a", 1}, {"b", 2}}, "", 0},
		{"no final newline", "{\"k\":\"a\",\"v\":1}\n{\"k\":\"b\"}", []kv{{"a", 1}, {"b", 0}}, "", 0},
		{"crlf", "{\"k\":\"a\"}\r\n", []kv{{"a", 0}}, "", 0},
		{"empty file", "", nil, "", 0},
		{"long line", `{"k":"` + long + `","v":7}` + "\n" + `{"v":8}` + "\n", []kv{{long, 7}, {"", 8}}, "", 0},
		{"unknown field ignored", `{"k":"a","zz":[1]}` + "\n", []kv{{"a", 0}}, "", 0},
		{"blank line", "{\"k\":\"a\"}\n\n{\"k\":\"b\"}\n", nil, ReasonBadJSON, 1},
		{"two values on a line", "{\"k\":\"a\"} {\"k\":\"b\"}\n", nil, ReasonBadJSON, 0},
		{"bad json", "{\"k\":\"a\"}\n{\"k\":\n", nil, ReasonBadJSON, 1},
		{"wrong type", "{\"k\":\"a\"}\n{\"k\":\"b\"}\n{\"v\":\"x\"}\n", nil, ReasonBadJSON, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []kv
			err := scanJSONL(bufio.NewReaderSize(strings.NewReader(tc.in), 64<<10), "in.jsonl", func(v kv) error {
				got = append(got, v)
				return nil
			})
			if tc.reason != "" {
				var e *Error
				if !errors.As(err, &e) || e.Reason != tc.reason || e.Row != tc.badLine {
					t.Fatalf("err = %v, want %s at line %d", err, tc.reason, tc.badLine)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %d values %.80v", len(got), got)
			}
		})
	}
}

func TestScanJSONLStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := scanJSONL(bufio.NewReader(strings.NewReader("1\n2\n3\n")), "x", func(int) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Fatalf("err %v after %d calls", err, n)
	}
}

// FuzzJSONLRoundTrip feeds arbitrary bytes to the JSONL parser (it must
// not panic, and must report a line number within the input) and, for
// every value it accepts, checks that writing the values back and parsing
// them again gives the same values.
func FuzzJSONLRoundTrip(f *testing.F) {
	f.Add([]byte("{\"id\":\"a\",\"tools\":[{\"name\":\"f\",\"parameters\":{}}]}\n"))
	f.Add([]byte("{\"id\":\"b\",\"messages\":[{\"role\":\"assistant\",\"calls\":[{\"name\":\"f\",\"arguments\":{\"x\":1}}]}]}\n{}\n"))
	f.Add([]byte("\n"))
	f.Add([]byte("{\"id\":\"\\u00e9<>&\",\"row\":-1}\r\n{\"tags\":[{\"key\":\"k\",\"value\":\"v\"}]}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var recs []*record.Record
		err := scanJSONL(bufio.NewReaderSize(bytes.NewReader(in), 16), "in", func(r *record.Record) error {
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason != ReasonBadJSON {
				t.Fatalf("non-data error: %v", err)
			}
			if e.Row < 0 || e.Row > int64(bytes.Count(in, []byte("\n"))) {
				t.Fatalf("line %d out of range", e.Row)
			}
			return
		}
		var buf bytes.Buffer
		if err := encodeJSONL(&buf, "out", recs, nil); err != nil {
			t.Fatalf("re-encoding accepted input: %v", err)
		}
		var again []*record.Record
		if err := scanJSONL(bufio.NewReader(&buf), "out", func(r *record.Record) error {
			again = append(again, r)
			return nil
		}); err != nil {
			t.Fatalf("re-parsing own output: %v\n%s", err, buf.Bytes())
		}
		first, _ := json.Marshal(recs)
		second, _ := json.Marshal(again)
		if !bytes.Equal(first, second) {
			t.Fatalf("round trip changed values:\n%s\n%s", first, second)
		}
	})
}
