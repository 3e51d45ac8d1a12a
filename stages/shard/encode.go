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

// nulls[c][rep][def] is the null of column c at those levels: nulls are
// the same every time, so they are made once.
var nulls = func() [][3][3]parquet.Value {
	n := make([][3][3]parquet.Value, len(schema.Columns()))
	for c := range n {
		for rep := range 3 {
			for def := range 3 {
				n[c][rep][def] = parquet.NullValue().Level(rep, def, c)
			}
		}
	}
	return n
}()

// bytesOf returns s's bytes without copying; parquet-go only reads them
// (the column buffers copy what they are given).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// top appends a value of a top-level required column. Its levels are 0,
// the zero value's: the column buffer of such a column reads nothing else
// of a Value than its data.
func (e *encoder) top(c int, v parquet.Value) { e.vals[c] = append(e.vals[c], v) }

// str is s as a value of column c at those levels.
func str(s string, rep, def, c int) parquet.Value {
	return parquet.ByteArrayValue(bytesOf(s)).Level(rep, def, c)
}

func (e *encoder) null(c int, rep, def int) {
	e.vals[c] = append(e.vals[c], nulls[c][rep][def])
}

// add appends r's values to every column.
func (e *encoder) add(r *record.Record) {
	e.top(col.id, parquet.ByteArrayValue(bytesOf(r.ID)))
	e.top(col.source, parquet.ByteArrayValue(bytesOf(r.Source)))
	e.top(col.format, parquet.ByteArrayValue(bytesOf(r.Format)))
	e.top(col.row, parquet.Int64Value(r.Row))
	e.top(col.system, parquet.ByteArrayValue(bytesOf(r.System)))

	v := e.vals
	if len(r.Tools) == 0 {
		for _, c := range [...]int{col.toolName, col.toolDesc, col.toolParams, col.toolResp} {
			e.null(c, 0, 0)
		}
	} else {
		name, desc, params, resp := v[col.toolName], v[col.toolDesc], v[col.toolParams], v[col.toolResp]
		for i := range r.Tools {
			t := &r.Tools[i]
			rep := min(i, 1)
			name = append(name, str(t.Name, rep, defElem, col.toolName))
			desc = append(desc, str(t.Description, rep, defElem, col.toolDesc))
			params = append(params, parquet.ByteArrayValue(t.Parameters).Level(rep, defElem, col.toolParams))
			// Null only when nil: an empty non-nil response is an empty
			// value, as GenericWriter wrote it.
			if t.Response == nil {
				resp = append(resp, nulls[col.toolResp][rep][defElem])
			} else {
				resp = append(resp, parquet.ByteArrayValue(t.Response).Level(rep, defResponse, col.toolResp))
			}
		}
		v[col.toolName], v[col.toolDesc], v[col.toolParams], v[col.toolResp] = name, desc, params, resp
	}

	if len(r.Messages) == 0 {
		for _, c := range [...]int{col.msgRole, col.msgContent, col.msgReasoning, col.callName, col.callArgs, col.resName, col.resContent} {
			e.null(c, 0, 0)
		}
	} else {
		role, content, reasoning := v[col.msgRole], v[col.msgContent], v[col.msgReasoning]
		callName, callArgs, resName, resContent := v[col.callName], v[col.callArgs], v[col.resName], v[col.resContent]
		for i := range r.Messages {
			m := &r.Messages[i]
			rep := min(i, 1)
			role = append(role, str(m.Role, rep, defElem, col.msgRole))
			content = append(content, str(m.Content, rep, defElem, col.msgContent))
			reasoning = append(reasoning, str(m.Reasoning, rep, defElem, col.msgReasoning))
			if len(m.Calls) == 0 {
				callName = append(callName, nulls[col.callName][rep][defElem])
				callArgs = append(callArgs, nulls[col.callArgs][rep][defElem])
			}
			for j := range m.Calls {
				c := &m.Calls[j]
				rep := rep
				if j > 0 {
					rep = repNested
				}
				callName = append(callName, str(c.Name, rep, defNested, col.callName))
				callArgs = append(callArgs, parquet.ByteArrayValue(c.Arguments).Level(rep, defNested, col.callArgs))
			}
			if len(m.Results) == 0 {
				resName = append(resName, nulls[col.resName][rep][defElem])
				resContent = append(resContent, nulls[col.resContent][rep][defElem])
			}
			for j := range m.Results {
				res := &m.Results[j]
				rep := rep
				if j > 0 {
					rep = repNested
				}
				resName = append(resName, str(res.Name, rep, defNested, col.resName))
				resContent = append(resContent, str(res.Content, rep, defNested, col.resContent))
			}
		}
		v[col.msgRole], v[col.msgContent], v[col.msgReasoning] = role, content, reasoning
		v[col.callName], v[col.callArgs], v[col.resName], v[col.resContent] = callName, callArgs, resName, resContent
	}

	if len(r.Tags) == 0 {
		e.null(col.tagKey, 0, 0)
		e.null(col.tagValue, 0, 0)
	} else {
		key, value := v[col.tagKey], v[col.tagValue]
		for i := range r.Tags {
			t := &r.Tags[i]
			rep := min(i, 1)
			key = append(key, str(t.Key, rep, defElem, col.tagKey))
			value = append(value, str(t.Value, rep, defElem, col.tagValue))
		}
		v[col.tagKey], v[col.tagValue] = key, value
	}

	if len(r.Lineage) == 0 {
		e.null(col.stepStage, 0, 0)
		e.null(col.stepProvider, 0, 0)
		e.null(col.stepModel, 0, 0)
	} else {
		stage, provider, model := v[col.stepStage], v[col.stepProvider], v[col.stepModel]
		for i := range r.Lineage {
			s := &r.Lineage[i]
			rep := min(i, 1)
			stage = append(stage, str(s.Stage, rep, defElem, col.stepStage))
			provider = append(provider, str(s.Provider, rep, defElem, col.stepProvider))
			model = append(model, str(s.Model, rep, defElem, col.stepModel))
		}
		v[col.stepStage], v[col.stepProvider], v[col.stepModel] = stage, provider, model
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
