package shard

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/augmentdata/augment/stages/record"
)

// arrowTypes is the Arrow schema every shard must have. Arrow v17 names
// the list item field "list" (and marks it nullable) for the standard
// 3-level layout; it reads the JSON logical type as binary.
var arrowTypes = map[string]string{
	"id":       "utf8",
	"source":   "utf8",
	"format":   "utf8",
	"row":      "int64",
	"system":   "utf8",
	"tools":    "list<list: struct<name: utf8, description: utf8, parameters: binary, response: binary>, nullable>",
	"messages": "list<list: struct<role: utf8, content: utf8, reasoning: utf8, calls: list<list: struct<name: utf8, arguments: binary>, nullable>, results: list<list: struct<name: utf8, content: utf8>, nullable>>, nullable>",
	"tags":     "list<list: struct<key: utf8, value: utf8>, nullable>",
	"lineage":  "list<list: struct<stage: utf8, provider: utf8, model: utf8>, nullable>",
}

// arrowCheck reads the shard at path with Arrow's Parquet reader, an
// implementation independent of parquet-go, and checks the schema (real
// lists of structs, JSON logical types) and every value against want.
func arrowCheck(t *testing.T, path string, want []*record.Record) {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("arrow: open %s: %v", path, err)
	}
	defer rdr.Close()

	// Parquet-level annotations: LIST groups and JSON leaves.
	root := rdr.MetaData().Schema.Root()
	for _, name := range []string{"tools", "messages", "tags", "lineage"} {
		i := root.FieldIndexByName(name)
		if i < 0 {
			t.Fatalf("arrow: no column %s", name)
		}
		if _, ok := root.Field(i).LogicalType().(pqschema.ListLogicalType); !ok {
			t.Errorf("arrow: %s has logical type %v, want LIST", name, root.Field(i).LogicalType())
		}
	}
	jsonLeaves := map[string]bool{}
	for i := 0; i < rdr.MetaData().Schema.NumColumns(); i++ {
		c := rdr.MetaData().Schema.Column(i)
		if _, ok := c.LogicalType().(pqschema.JSONLogicalType); ok {
			jsonLeaves[c.Path()] = true
		}
	}
	wantJSON := map[string]bool{
		"tools.list.element.parameters":                      true,
		"tools.list.element.response":                        true,
		"messages.list.element.calls.list.element.arguments": true,
	}
	if !reflect.DeepEqual(jsonLeaves, wantJSON) {
		t.Errorf("arrow: JSON columns %v, want %v", jsonLeaves, wantJSON)
	}

	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("arrow: %v", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("arrow: read table: %v", err)
	}
	defer tbl.Release()
	sch := tbl.Schema()
	if sch.NumFields() != len(arrowTypes) {
		t.Errorf("arrow: %d columns, want %d: %v", sch.NumFields(), len(arrowTypes), sch)
	}
	for i, f := range sch.Fields() {
		if got := f.Type.String(); got != arrowTypes[f.Name] {
			t.Errorf("arrow: column %d %s type\n got %s\nwant %s", i, f.Name, got, arrowTypes[f.Name])
		}
	}
	if tbl.NumRows() != int64(len(want)) {
		t.Fatalf("arrow: %d rows, want %d", tbl.NumRows(), len(want))
	}

	rows := make([]map[string]any, len(want))
	for i := range rows {
		rows[i] = map[string]any{}
	}
	for c := 0; c < int(tbl.NumCols()); c++ {
		name := sch.Field(c).Name
		row := 0
		for _, chunk := range tbl.Column(c).Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				rows[row][name] = arrowValue(chunk, i)
				row++
			}
		}
	}
	for i, r := range want {
		if w := recordValue(r); !reflect.DeepEqual(rows[i], w) {
			t.Fatalf("arrow: row %d\n got %.800v\nwant %.800v", i, rows[i], w)
		}
	}
}

// arrowValue turns one Arrow value into plain Go values: lists become
// []any, structs map[string]any, nulls nil.
func arrowValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, arrowValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		out := make(map[string]any, a.NumField())
		for k := 0; k < a.NumField(); k++ {
			out[st.Field(k).Name] = arrowValue(a.Field(k), i)
		}
		return out
	default:
		return fmt.Sprintf("unexpected arrow type %s", a.DataType())
	}
}

// recordValue is what arrowValue should give for r, written from the
// record's fields directly.
func recordValue(r *record.Record) map[string]any {
	list := func(n int, f func(i int) map[string]any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	return map[string]any{
		"id": r.ID, "source": r.Source, "format": r.Format, "row": r.Row, "system": r.System,
		"tools": list(len(r.Tools), func(i int) map[string]any {
			t := r.Tools[i]
			var resp any
			if len(t.Response) > 0 {
				resp = string(t.Response)
			}
			return map[string]any{"name": t.Name, "description": t.Description, "parameters": string(t.Parameters), "response": resp}
		}),
		"messages": list(len(r.Messages), func(i int) map[string]any {
			m := r.Messages[i]
			return map[string]any{
				"role": m.Role, "content": m.Content, "reasoning": m.Reasoning,
				"calls": list(len(m.Calls), func(j int) map[string]any {
					return map[string]any{"name": m.Calls[j].Name, "arguments": string(m.Calls[j].Arguments)}
				}),
				"results": list(len(m.Results), func(j int) map[string]any {
					return map[string]any{"name": m.Results[j].Name, "content": m.Results[j].Content}
				}),
			}
		}),
		"tags": list(len(r.Tags), func(i int) map[string]any {
			return map[string]any{"key": r.Tags[i].Key, "value": r.Tags[i].Value}
		}),
		"lineage": list(len(r.Lineage), func(i int) map[string]any {
			s := r.Lineage[i]
			return map[string]any{"stage": s.Stage, "provider": s.Provider, "model": s.Model}
		}),
	}
}

// TestArrowRealData writes the LLaMA-Factory demo dialogues (real en and
// zh text) and checks them through Arrow and parquet-go.
func TestArrowRealData(t *testing.T) {
	recs := llamaFactoryRecords(t)
	path := writeShard(t, recs, Options{RowGroupRows: 128})
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	assertRecordsEqual(t, got, normalized(recs))
}
