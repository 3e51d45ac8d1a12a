package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/augmentdata/augment/stages/record"
)

// writeParquetGeneric is the writer writeParquet replaced, kept as the
// oracle of TestEncodeSameBytes and FuzzEncode: parquet-go's
// GenericWriter[record.Record], fed batches of 256 records, cut into row
// groups the same way.
func writeParquetGeneric(w io.Writer, recs []*record.Record, o Options) error {
	codec, err := o.codec()
	if err != nil {
		return err
	}
	maxRows := o.RowGroupRows
	if maxRows == 0 {
		maxRows = DefaultRowGroupRows
	}
	version := o.Version
	if version == "" {
		version = "unknown"
	}
	opts := append(slices.Clip(writerOptions),
		parquet.Compression(codec),
		createdBy("augment version "+version),
		parquet.KeyValueMetadata("augment.version", version),
	)
	const writeBatch = 256
	pw := parquet.NewGenericWriter[record.Record](w, opts...)
	batch := make([]record.Record, 0, min(len(recs), writeBatch))
	var rows, size int
	flush := func(cut bool) error {
		if len(batch) > 0 {
			if _, err := pw.Write(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		if cut && rows > 0 {
			rows, size = 0, 0
			return pw.Flush()
		}
		return nil
	}
	for _, r := range recs {
		batch = append(batch, *r)
		rows++
		size += textSize(r)
		var err error
		switch {
		case rows >= maxRows || size >= MaxRowGroupBytes:
			err = flush(true)
		case len(batch) == writeBatch:
			err = flush(false)
		}
		if err != nil {
			return err
		}
	}
	if err := flush(false); err != nil {
		return err
	}
	return pw.Close()
}

// edgeRecords are shapes the other sets leave out: non-nil empty slices
// and JSON values (an empty non-nil response is a present, empty value,
// not a null), messages with calls but no results and the reverse, and
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

// encodeBoth writes recs with writeParquet and with the oracle and fails
// unless the bytes are the same; it returns them.
func encodeBoth(t *testing.T, recs []*record.Record, o Options) []byte {
	t.Helper()
	var got, want bytes.Buffer
	if err := writeParquet(&got, recs, o); err != nil {
		t.Fatal(err)
	}
	if err := writeParquetGeneric(&want, recs, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		i := 0
		for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("%d records, %+v: %d bytes, the generic writer's %d; first difference at byte %d", len(recs), o, got.Len(), want.Len(), i)
	}
	return got.Bytes()
}

// TestEncodeSameBytes checks that the column encoder writes the bytes
// parquet-go's GenericWriter wrote: every codec, row groups cut by count
// (below, at and across the 64-record chunks and the old 256-record
// batches) and by size, pages cut inside row groups.
func TestEncodeSameBytes(t *testing.T) {
	sets := map[string]func(t *testing.T) []*record.Record{
		"fixtures":     func(*testing.T) []*record.Record { return fixtureRecords() },
		"edges":        func(*testing.T) []*record.Record { return edgeRecords() },
		"random":       func(*testing.T) []*record.Record { return randomShapes(3000, 11) },
		"synthetic":    func(*testing.T) []*record.Record { return syntheticRecords(3000, 12) },
		"empty":        func(*testing.T) []*record.Record { return nil },
		"llamafactory": func(t *testing.T) []*record.Record { return llamaFactoryRecords(t) }, // skips without the shared data
	}
	for name, set := range sets {
		t.Run(name, func(t *testing.T) {
			recs := set(t)
			for _, rows := range []int{0, 1, 7, 63, 64, 65, 100, 256, 300, 1000} {
				for _, c := range Compressions {
					if rows != 0 && c != DefaultCompression && name != "random" {
						continue
					}
					t.Run(fmt.Sprintf("rows=%d/%s", rows, c), func(t *testing.T) {
						encodeBoth(t, recs, Options{RowGroupRows: rows, Compression: c, Version: "test"})
					})
				}
			}
		})
	}
	// Pages full inside a chunk, and row groups cut by MaxRowGroupBytes.
	big := syntheticRecords(40, 3)
	for i, r := range big {
		r.Messages = append(r.Messages, record.Message{Role: record.RoleUser, Content: string(bytes.Repeat([]byte{byte('a' + i%26)}, 3<<20))})
	}
	encodeBoth(t, big, Options{})
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

// FuzzEncode writes records built from the input: the bytes must be the
// generic writer's, and reading them back must give the records.
func FuzzEncode(f *testing.F) {
	f.Add(byte(0), []byte{})
	f.Add(byte(3), []byte("\x03abc\x02xy\x01z\x05\x00\x03\x03\x02\x01\x01\x02\x00\x01"))
	f.Add(byte(1), bytes.Repeat([]byte{3, 'a', 'b', 'c', 2, 1, 7}, 40))
	f.Fuzz(func(t *testing.T, rows byte, in []byte) {
		recs := fuzzRecords(in)
		data := encodeBoth(t, recs, Options{RowGroupRows: int(rows % 70)})
		var got []*record.Record
		err := scanReader(bytes.NewReader(data), int64(len(data)), "fuzz.parquet", nil, func(r *record.Record) error {
			got = append(got, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		assertRecordsEqual(t, got, normalized(recs))
	})
}

// BenchmarkEncodeGeneric is BenchmarkEncode with the old writer, for an
// A/B in one run.
func BenchmarkEncodeGeneric(b *testing.B) {
	forEachSet(b, func(b *testing.B, recs []*record.Record) {
		for b.Loop() {
			if err := writeParquetGeneric(io.Discard, recs, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
