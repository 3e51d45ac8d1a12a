package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// edgeRecords are shapes the other sets leave out: non-nil empty slices
// and JSON values (an empty non-nil response must be written as NULL, as
// a nil one is), messages with calls but no results and the reverse, and
// lists right after empty ones.
func edgeRecords() []*record.Record {
	js := json.RawMessage(`{"a":1}`)
	return []*record.Record{
		{ID: "e0", Tools: []record.Tool{{Name: "t", Parameters: js, Response: json.RawMessage{}}, {Name: "u", Parameters: json.RawMessage{}}}},
		{ID: "e1", Messages: []record.Message{{Role: "assistant", Calls: []record.Call{{Name: "c", Arguments: js}, {Name: "d"}}}, {Role: "tool", Results: []record.Result{{Name: "c"}}}}},
		{ID: "e2", Messages: []record.Message{{Role: "user"}, {Role: "assistant", Calls: []record.Call{}, Results: []record.Result{}}}},
		{ID: "e3", Messages: []record.Message{{Calls: []record.Call{{}}, Results: []record.Result{{}, {}, {}}}}, Tags: []record.Tag{{}}, Lineage: []record.Step{{}, {}}},
		{},
	}
}

// TestRoundTripEdges writes and reads back the shapes the other sets leave
// out, and Arrow must see them as written (writeShard): on main an empty
// non-nil Tool.Response reached the file as "" where Arrow expects NULL.
func TestRoundTripEdges(t *testing.T) {
	recs := edgeRecords()
	got, err := Read(writeShard(t, recs, Options{Checked: true}))
	if err != nil {
		t.Fatal(err)
	}
	assertRecordsEqual(t, got, normalized(recs))
	if r := recs[0].Tools[0].Response; r == nil || len(r) != 0 {
		t.Errorf("Write changed the caller's record: response %#v", r)
	}
}

// fuzzRecords builds records from fuzz input: each byte in turn picks a
// list length, a string's length or whether a value is nil.
func fuzzRecords(in []byte) []*record.Record {
	next := func() int {
		if len(in) == 0 {
			return 0
		}
		b := in[0]
		in = in[1:]
		return int(b)
	}
	str := func() string {
		n := min(next()%8, len(in))
		s := string(in[:n])
		in = in[n:]
		return s
	}
	raw := func() json.RawMessage {
		switch n := next(); n % 4 {
		case 0:
			return nil
		case 1:
			return json.RawMessage{}
		default:
			return json.RawMessage(fmt.Sprintf(`{"k":%q}`, str()))
		}
	}
	var recs []*record.Record
	for len(in) > 0 {
		r := &record.Record{ID: str(), Source: str(), Format: str(), Row: int64(next()) - 100, System: str()}
		for range next() % 4 {
			r.Tools = append(r.Tools, record.Tool{Name: str(), Description: str(), Parameters: raw(), Response: raw()})
		}
		for range next() % 5 {
			m := record.Message{Role: str(), Content: str(), Reasoning: str()}
			for range next() % 4 {
				m.Calls = append(m.Calls, record.Call{Name: str(), Arguments: raw()})
			}
			for range next() % 4 {
				m.Results = append(m.Results, record.Result{Name: str(), Content: str()})
			}
			r.Messages = append(r.Messages, m)
		}
		for range next() % 3 {
			r.Tags = append(r.Tags, record.Tag{Key: str(), Value: str()})
		}
		for range next() % 3 {
			r.Lineage = append(r.Lineage, record.Step{Stage: str(), Provider: str(), Model: str()})
		}
		recs = append(recs, r)
	}
	return recs
}

// FuzzWriteRoundTrip writes records built from the input, in row groups of
// 1 to 69 records (or the default), and reads them back: they must come
// back equal (up to Normalize), whatever their text.
func FuzzWriteRoundTrip(f *testing.F) {
	f.Add(byte(0), []byte{})
	f.Add(byte(3), []byte("\x03abc\x02xy\x01z\x05\x00\x03\x03\x02\x01\x01\x02\x00\x01"))
	f.Add(byte(1), bytes.Repeat([]byte{3, 'a', 'b', 'c', 2, 1, 7}, 40))
	f.Fuzz(func(t *testing.T, rows byte, in []byte) {
		recs := fuzzRecords(in)
		var buf bytes.Buffer
		if err := writeParquet(&buf, recs, Options{RowGroupRows: int(rows % 70)}); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		assertRecordsEqual(t, readBytes(t, data), normalized(recs))
	})
}

// readBytes reads every record of the shard whose bytes are data.
func readBytes(t *testing.T, data []byte) []*record.Record {
	t.Helper()
	var got []*record.Record
	err := scanReader(bytes.NewReader(data), int64(len(data)), "fuzz.parquet", nil, func(r *record.Record) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
