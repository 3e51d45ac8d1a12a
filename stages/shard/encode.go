package shard

import (
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/augmentdata/augment/stages/record"
)

// The writer hands parquet-go each leaf column's values with their
// repetition and definition levels already worked out (the mirror of
// decode.go), through ColumnWriter.WriteRowValues, instead of
// GenericWriter[record.Record].Write, whose reflection-based walk of the
// nested lists cost about a third of the encoding (see BenchmarkEncode).
// The bytes written are the same as that writer's (TestEncodeSameBytes):
// the same values reach the same column buffers in the same chunks of
// rows, so pages are cut at the same places.

// chunkRows is how many records are encoded before their values are
// handed to the column writers, each of which then flushes its page when
// the page holds PageBufferSize bytes. It must stay GenericWriter.Write's
// chunk (64 rows, counted from the start of the row group): the page
// boundaries, and so the file's bytes, depend on it.
const chunkRows = 64

// Levels of the shard schema's leaves. A list leaf (tools, messages,
// tags, lineage and their fields) has repetition level 0 at a record's
// first element and 1 at the next ones, definition level 1 for an
// element and 0 for an empty list (one null). Tool.Response adds a
// definition level (2 when present). Calls and results are lists inside
// a message: repetition level 2 after their first element, definition
// level 2 for an element, 1 for a message without any, 0 for a record
// without messages.
const (
	defElem     = 1 // an element of a top-level list
	defResponse = 2 // a tool's response schema is present
	defNested   = 2 // an element of a message's calls or results
	repNested   = 2 // the next element of a message's calls or results
)

// encoder collects the values of a chunk of records, per leaf column.
type encoder struct {
	vals [][]parquet.Value
}

func newEncoder() *encoder {
	return &encoder{vals: make([][]parquet.Value, len(schema.Columns()))}
}

// bytesOf returns s's bytes without copying; parquet-go only reads them
// (the column buffers copy what they are given).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (e *encoder) str(c int, s string, rep, def int) {
	e.vals[c] = append(e.vals[c], parquet.ByteArrayValue(bytesOf(s)).Level(rep, def, c))
}

func (e *encoder) raw(c int, b []byte, rep, def int) {
	e.vals[c] = append(e.vals[c], parquet.ByteArrayValue(b).Level(rep, def, c))
}

func (e *encoder) null(c int, rep, def int) {
	e.vals[c] = append(e.vals[c], parquet.NullValue().Level(rep, def, c))
}

// add appends r's values to every column.
func (e *encoder) add(r *record.Record) {
	e.str(col.id, r.ID, 0, 0)
	e.str(col.source, r.Source, 0, 0)
	e.str(col.format, r.Format, 0, 0)
	e.vals[col.row] = append(e.vals[col.row], parquet.Int64Value(r.Row).Level(0, 0, col.row))
	e.str(col.system, r.System, 0, 0)

	if len(r.Tools) == 0 {
		for _, c := range [...]int{col.toolName, col.toolDesc, col.toolParams, col.toolResp} {
			e.null(c, 0, 0)
		}
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		rep := min(i, 1)
		e.str(col.toolName, t.Name, rep, defElem)
		e.str(col.toolDesc, t.Description, rep, defElem)
		e.raw(col.toolParams, t.Parameters, rep, defElem)
		// Null only when nil: an empty non-nil response is an empty value,
		// as GenericWriter wrote it.
		if t.Response == nil {
			e.null(col.toolResp, rep, defElem)
		} else {
			e.raw(col.toolResp, t.Response, rep, defResponse)
		}
	}

	if len(r.Messages) == 0 {
		for _, c := range [...]int{col.msgRole, col.msgContent, col.msgReasoning, col.callName, col.callArgs, col.resName, col.resContent} {
			e.null(c, 0, 0)
		}
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		rep := min(i, 1)
		e.str(col.msgRole, m.Role, rep, defElem)
		e.str(col.msgContent, m.Content, rep, defElem)
		e.str(col.msgReasoning, m.Reasoning, rep, defElem)
		if len(m.Calls) == 0 {
			e.null(col.callName, rep, defElem)
			e.null(col.callArgs, rep, defElem)
		}
		for j := range m.Calls {
			c := &m.Calls[j]
			rep := rep
			if j > 0 {
				rep = repNested
			}
			e.str(col.callName, c.Name, rep, defNested)
			e.raw(col.callArgs, c.Arguments, rep, defNested)
		}
		if len(m.Results) == 0 {
			e.null(col.resName, rep, defElem)
			e.null(col.resContent, rep, defElem)
		}
		for j := range m.Results {
			res := &m.Results[j]
			rep := rep
			if j > 0 {
				rep = repNested
			}
			e.str(col.resName, res.Name, rep, defNested)
			e.str(col.resContent, res.Content, rep, defNested)
		}
	}

	if len(r.Tags) == 0 {
		e.null(col.tagKey, 0, 0)
		e.null(col.tagValue, 0, 0)
	}
	for i, t := range r.Tags {
		rep := min(i, 1)
		e.str(col.tagKey, t.Key, rep, defElem)
		e.str(col.tagValue, t.Value, rep, defElem)
	}

	if len(r.Lineage) == 0 {
		e.null(col.stepStage, 0, 0)
		e.null(col.stepProvider, 0, 0)
		e.null(col.stepModel, 0, 0)
	}
	for i, s := range r.Lineage {
		rep := min(i, 1)
		e.str(col.stepStage, s.Stage, rep, defElem)
		e.str(col.stepProvider, s.Provider, rep, defElem)
		e.str(col.stepModel, s.Model, rep, defElem)
	}
}

// flush hands the collected values to the column writers (each flushes a
// page once its buffer is full) and empties the encoder.
func (e *encoder) flush(cws []*parquet.ColumnWriter) error {
	for c, vs := range e.vals {
		if len(vs) == 0 {
			continue
		}
		if _, err := cws[c].WriteRowValues(vs); err != nil {
			return err
		}
		clear(vs) // drop references to the records
		e.vals[c] = vs[:0]
	}
	return nil
}
