package shard

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/augmentdata/augment/stages/record"
)

// This file writes a shard's Parquet bytes straight from the records: one
// walk over them appends each leaf column's values and its repetition and
// definition levels to per-column buffers, which are cut into pages and
// row groups, encoded with parquet-go's own value and level encoders,
// compressed with the shard's codec, and framed with parquet-go's footer
// structs (format) and Thrift encoder. No reflection, no parquet.Value per
// value, no reordering: the values are copied once, into the page.
//
// The bytes are the ones parquet-go v0.32.0's GenericWriter[record.Record]
// wrote with the shard layout (TestEncodeSameBytes and FuzzEncode keep
// that writer as their oracle), so the choices below follow it exactly:
//
//   - Data pages v1: RLE levels, each section prefixed with its 4-byte
//     length; strings and JSON as DELTA_LENGTH_BYTE_ARRAY (the lengths
//     delta-packed, then the bytes: parquet-go's default for BYTE_ARRAY),
//     row as PLAIN int64; a CRC-32 of the (compressed) page body in the
//     header; no statistics in page headers (Data page v1: see guard.go).
//   - A column's page is cut when its buffer holds pageCut bytes or more,
//     checked after every checkRows rows of a row group (GenericWriter
//     copies rows in slices of 64 and checks each column's buffer after
//     each slice): so a page never splits a record. The buffer's size
//     counts the values (4 bytes more per byte array), and for repeated
//     columns one byte per repetition and per definition level and 8 bytes
//     per row.
//   - Column chunks in schema order, pages of a chunk in order; after the
//     last row group, the column indexes of every row group, then their
//     offset indexes, then the footer.
//   - ColumnMetaData: the encodings (values, and RLE for columns with
//     levels), encoding stats, null count, min/max (full values) for the
//     columns with page bounds, size statistics (byte-array bytes, level
//     histograms). The column index holds per-page null flags and counts,
//     min/max truncated to columnIndexLimit bytes (max rounded up) for the
//     columns with page bounds and empty values for the others, the
//     boundary order and per-page level histograms.
//
// One difference on purpose: a tool's empty response is always NULL (see
// encodeParquet).

const (
	// pageBufferSize is the page buffer size writeParquet always used
	// (parquet.PageBufferSize): 1 MiB pages compress better than 256 KiB.
	pageBufferSize = 1 << 20
	// pageCut is the buffer size at which a column's page is cut: 98 % of
	// the page buffer, rounded down, as parquet-go computes it.
	pageCut = pageBufferSize * 98 / 100
	// checkRows is how often (in rows of a row group) page sizes are
	// checked.
	checkRows = 64
	// columnIndexLimit is the length to which min/max values of byte
	// arrays are truncated in column indexes (parquet-go's default).
	columnIndexLimit = 16
	// maxPageSize bounds one page's uncompressed size (the Thrift header
	// holds an int32).
	maxPageSize = math.MaxInt32
)

// The leaf columns of record.Record, in schema order; initLayout checks
// them against the schema.
const (
	colID = iota
	colSource
	colFormat
	colRow
	colSystem
	colToolName
	colToolDescription
	colToolParameters
	colToolResponse
	colRole
	colContent
	colReasoning
	colCallName
	colCallArguments
	colResultName
	colResultContent
	colTagKey
	colTagValue
	colStage
	colProvider
	colModel
	numColumns
)

// The level lists of the repeated columns: the leaves of one list's
// elements have the same levels, so the encoder appends them once per
// list (the responses, optional, have their own definition levels).
const (
	lvTools = iota
	lvResponse
	lvMessages
	lvCalls
	lvResults
	lvTags
	lvLineage
	numLevels
)

// levelsOf is the level list of each repeated column.
var levelsOf = [numColumns]int{
	colToolName: lvTools, colToolDescription: lvTools, colToolParameters: lvTools, colToolResponse: lvResponse,
	colRole: lvMessages, colContent: lvMessages, colReasoning: lvMessages,
	colCallName: lvCalls, colCallArguments: lvCalls, colResultName: lvResults, colResultContent: lvResults,
	colTagKey: lvTags, colTagValue: lvTags, colStage: lvLineage, colProvider: lvLineage, colModel: lvLineage,
}

// leafColumn is what the encoder needs to know of one leaf column.
type leafColumn struct {
	path           []string
	kind           parquet.Kind // ByteArray or Int64
	maxRep, maxDef byte
	bounds         bool              // min/max in the column index and the chunk's statistics
	encoding       format.Encoding   // of the values
	encodings      []format.Encoding // of the chunk: values and levels
}

// fileLayout is the part of every shard's footer that depends only on the
// schema.
type fileLayout struct {
	leaves       [numColumns]leafColumn
	schema       []format.SchemaElement
	columnOrders []format.ColumnOrder
}

var layout = sync.OnceValue(initLayout)

// deltaLengths encodes the lengths of DELTA_LENGTH_BYTE_ARRAY values.
var deltaLengths delta.BinaryPackedEncoding

// pageBounds reports whether the column at path gets page bounds (min and
// max in the column index): only the top-level scalar columns people
// filter on (id, source, format, row). Min/max of message text or JSON
// help no reader.
func pageBounds(path []string) bool {
	return len(path) == 1 && path[0] != "system"
}

// initLayout derives the footer's schema and column orders from the
// record schema, and checks that its leaf columns are the ones the
// encoder's walk (encoder.add) fills, in that order: a changed record type
// panics here, in every test, rather than writing a wrong file.
func initLayout() *fileLayout {
	l := new(fileLayout)
	cols := schema.Columns()
	if len(cols) != numColumns {
		panic(fmt.Sprintf("shard: the record schema has %d leaf columns, the encoder knows %d", len(cols), numColumns))
	}
	want := [numColumns]struct {
		name   string
		rep    byte
		def    byte
		int64_ bool
	}{
		colID: {"id", 0, 0, false}, colSource: {"source", 0, 0, false}, colFormat: {"format", 0, 0, false},
		colRow: {"row", 0, 0, true}, colSystem: {"system", 0, 0, false},
		colToolName: {"tools.list.element.name", 1, 1, false}, colToolDescription: {"tools.list.element.description", 1, 1, false},
		colToolParameters: {"tools.list.element.parameters", 1, 1, false}, colToolResponse: {"tools.list.element.response", 1, 2, false},
		colRole: {"messages.list.element.role", 1, 1, false}, colContent: {"messages.list.element.content", 1, 1, false},
		colReasoning:     {"messages.list.element.reasoning", 1, 1, false},
		colCallName:      {"messages.list.element.calls.list.element.name", 2, 2, false},
		colCallArguments: {"messages.list.element.calls.list.element.arguments", 2, 2, false},
		colResultName:    {"messages.list.element.results.list.element.name", 2, 2, false},
		colResultContent: {"messages.list.element.results.list.element.content", 2, 2, false},
		colTagKey:        {"tags.list.element.key", 1, 1, false}, colTagValue: {"tags.list.element.value", 1, 1, false},
		colStage: {"lineage.list.element.stage", 1, 1, false}, colProvider: {"lineage.list.element.provider", 1, 1, false},
		colModel: {"lineage.list.element.model", 1, 1, false},
	}
	for i, path := range cols {
		leaf, _ := schema.Lookup(path...)
		typ := leaf.Node.Type()
		c := leafColumn{
			path:   path,
			kind:   typ.Kind(),
			maxRep: byte(leaf.MaxRepetitionLevel),
			maxDef: byte(leaf.MaxDefinitionLevel),
			bounds: pageBounds(path),
		}
		w := want[i]
		if leaf.ColumnIndex != i || strings.Join(path, ".") != w.name || c.maxRep != w.rep || c.maxDef != w.def ||
			(c.kind == parquet.Int64) != w.int64_ || (c.kind != parquet.Int64 && c.kind != parquet.ByteArray) ||
			c.bounds != (i <= colRow) { // encoder.add tracks the bounds of id, source, format and row
			panic(fmt.Sprintf("shard: leaf column %d of the record schema is %s (levels %d/%d, %s), the encoder expects %s (%d/%d)",
				i, strings.Join(path, "."), c.maxRep, c.maxDef, c.kind, w.name, w.rep, w.def))
		}
		c.encoding = format.Plain
		if c.kind == parquet.ByteArray {
			c.encoding = format.DeltaLengthByteArray
		}
		c.encodings = []format.Encoding{c.encoding}
		if c.maxDef > 0 {
			c.encodings = append(c.encodings, format.RLE)
		}
		slices.Sort(c.encodings)
		l.leaves[i] = c
		l.columnOrders = append(l.columnOrders, *typ.ColumnOrder())
	}
	var walk func(name string, n parquet.Node, root bool)
	walk = func(name string, n parquet.Node, root bool) {
		typ := n.Type()
		e := format.SchemaElement{Name: name, FieldID: int32(n.ID())}
		if !root {
			switch {
			case n.Required():
				e.RepetitionType = thrift.New(format.Required)
			case n.Optional():
				e.RepetitionType = thrift.New(format.Optional)
			case n.Repeated():
				e.RepetitionType = thrift.New(format.Repeated)
			}
		}
		if lt := typ.LogicalType(); lt != nil {
			e.LogicalType = *lt
		}
		if n := int32(typ.Length()); n > 0 {
			e.TypeLength.Set(n)
		}
		if !n.Leaf() {
			e.NumChildren.Set(int32(len(n.Fields())))
		}
		if pt := typ.PhysicalType(); pt != nil {
			e.Type.Set(*pt)
		}
		if ct := typ.ConvertedType(); ct != nil {
			e.ConvertedType.Set(*ct)
		}
		l.schema = append(l.schema, e)
		for _, f := range n.Fields() {
			walk(f.Name(), f, false)
		}
	}
	walk(schema.Name(), schema, true)
	return l
}

// encColumn is one leaf column's state in an encoder: the page being filled
// and the pages of the current row group's chunk.
type encColumn struct {
	leaf *leafColumn

	// The page being filled. Byte arrays are kept as references to the
	// records' own bytes and copied once, into the page body, when the
	// page is written.
	vals  []byte    // int64 values, PLAIN
	runs  []textRef // byte-array values, nulls left out, in runs (see value)
	end   uintptr   // where the last run ends
	lens  []int32   // the byte arrays' lengths
	size  int       // bytes of the byte arrays
	n     int       // values of a column without levels
	first int       // the page's first row in the row group
	// The column's levels (nil for a column without): the page's are
	// lv.reps[lvAt:] and lv.defs[lvAt:].
	lv   *levelList
	lvAt int
	// min and max of the page's values (columns with bounds).
	minStr, maxStr string
	minInt, maxInt int64

	// The current row group's chunk.
	chunk                []byte // encoded pages
	pages                []format.PageLocation
	numValues, nulls     int64
	uncompressed         int64 // page headers and uncompressed bodies
	unencoded            int64 // bytes of the byte-array values, lengths excluded
	repHist, defHist     []int64
	pageRepHist          []int64
	pageDefHist          []int64
	nullPages            []bool
	nullCounts           []int64
	minValues, maxValues [][]byte // per page, truncated (bounds) or empty
	minStat, maxStat     []byte   // of the chunk, in full (bounds)
	indexBytes           []byte   // backing store of minValues and maxValues
	statsSet             bool
}

// levelList holds the repetition and definition levels of the current row
// group's values of one or more columns.
type levelList struct {
	reps, defs []byte
}

func (l *levelList) add(rep, def byte) {
	l.reps = append(l.reps, rep)
	l.defs = append(l.defs, def)
}

// An encoder writes one shard. Encoders are pooled: their buffers are
// reused by the next shard, so memory stays at about one row group; reset
// drops a buffer grown past keepBytes (a shard of huge values) rather
// than keep it for the shards after.
type encoder struct {
	// The records being written: they hold the text the columns' runs
	// refer to, and keep it alive. Held by the (heap) encoder, they and
	// all they refer to are on the heap, where nothing moves (a string
	// on a goroutine's stack could move with it).
	recs []*record.Record

	cols   [numColumns]encColumn
	lv     [numLevels]levelList
	codec  compress.Codec
	packed bool // the codec compresses (not "none")

	rows    int // rows in the current row group
	written int // bytes of the values of the row group's pages written

	responseRuns func(present []bool) // see encodeParquet
	present      []bool

	levels  []byte // RLE-encoded levels
	page    []byte // an uncompressed page body with levels
	packBuf []byte // a compressed page body
	header  bytes.Buffer
	thrift  *thrift.Encoder
	out     *bufio.Writer // buffers the file's writes

	// The metadata of the row groups written so far.
	rowGroups   []format.RowGroup
	columnIndex [][]format.ColumnIndex
	offsetIndex [][]format.OffsetIndex
}

var encoders = sync.Pool{New: func() any {
	l := layout()
	e := new(encoder)
	for i := range e.cols {
		c := &e.cols[i]
		c.leaf = &l.leaves[i]
		if c.leaf.maxRep > 0 {
			c.repHist = make([]int64, c.leaf.maxRep+1)
		}
		if c.leaf.maxDef > 0 {
			c.defHist = make([]int64, c.leaf.maxDef+1)
			c.lv = &e.lv[levelsOf[i]]
		}
	}
	e.thrift = thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&e.header))
	e.out = bufio.NewWriterSize(nil, outBuffer)
	return e
}}

// encodeParquet writes recs as a Parquet file to w with the layout o
// asks for: row groups of at most o.RowGroupRows records, cut early once
// they hold MaxRowGroupBytes of text (encoder.text); pages compressed with
// o's codec; key/value metadata augment.version and created_by "augment
// version <version>".
//
// A tool's response is NULL when empty. responseRuns, nil but in tests,
// may change which of the responses of tools[1:] of a record are written
// as values (empty ones as ""): parquet-go v0.32.0's GenericWriter wrote
// a run of NULLs after a run of values as values when the runs had a
// certain shape (parquetGoResponseRuns in encode_test.go), and the oracle
// test replays that.
func encodeParquet(w io.Writer, recs []*record.Record, o Options, responseRuns func(present []bool)) error {
	codec, err := o.codec()
	if err != nil {
		return err
	}
	maxRows, version := o.rowGroupRows(), o.version()
	e := encoders.Get().(*encoder)
	defer func() {
		e.reset()
		encoders.Put(e)
	}()
	e.recs = recs
	e.codec = codec
	e.packed = codec.CompressionCodec() != format.Uncompressed
	e.responseRuns = responseRuns
	// The column chunks, page indexes and footer go out through one
	// buffer: a few large writes instead of one per column chunk.
	e.out.Reset(w)
	out := &countingWriter{w: e.out}

	for _, r := range recs {
		e.add(r)
		e.rows++
		switch {
		case e.rows >= maxRows || e.text() >= MaxRowGroupBytes:
			if err := e.writeRowGroup(out); err != nil {
				return err
			}
		case e.rows%checkRows == 0:
			if err := e.cutFullPages(); err != nil {
				return err
			}
		}
	}
	if err := e.writeRowGroup(out); err != nil {
		return err
	}
	if err := e.writeFooter(out, version); err != nil {
		return err
	}
	return e.out.Flush()
}

// text is the size of the current row group's values: the bytes of its
// text and JSON plus 8 per record (the row number), about their size in
// memory.
func (e *encoder) text() int {
	n := e.written
	for i := range e.cols {
		c := &e.cols[i]
		n += c.size + len(c.vals)
	}
	return n
}

// outBuffer is the size of the encoder's output buffer.
const outBuffer = 256 << 10

// keepBytes bounds each buffer a pooled encoder keeps.
const keepBytes = 16 << 20

// reset empties e for the next file, keeping its buffers up to keepBytes.
func (e *encoder) reset() {
	for i := range e.cols {
		c := &e.cols[i]
		c.resetChunk()
		c.resetPage(0)
		c.vals, c.runs, c.lens, c.chunk = trimmed(c.vals), trimmed(c.runs), trimmed(c.lens), trimmed(c.chunk)
	}
	e.resetLevels()
	for i := range e.lv {
		l := &e.lv[i]
		l.reps, l.defs = trimmed(l.reps), trimmed(l.defs)
	}
	e.page, e.packBuf, e.levels = trimmed(e.page), trimmed(e.packBuf), trimmed(e.levels)
	if e.header.Cap() > keepBytes {
		e.header = bytes.Buffer{}
	}
	e.out.Reset(nil) // keep no file
	e.recs = nil
	e.codec = nil
	e.responseRuns = nil
	e.rows, e.written = 0, 0
	e.rowGroups = nil
	e.columnIndex = nil
	e.offsetIndex = nil
}

// trimmed returns b emptied, or nil when it holds more than keepBytes.
func trimmed[S ~[]E, E any](b S) S {
	var e E
	if cap(b)*int(unsafe.Sizeof(e)) > keepBytes {
		return nil
	}
	return b[:0]
}

// countingWriter tracks the file offset.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return n, err
}

// add appends r's values and levels to the columns.
func (e *encoder) add(r *record.Record) {
	c, lv := &e.cols, &e.lv
	c[colID].boundString(r.ID)
	c[colSource].boundString(r.Source)
	c[colFormat].boundString(r.Format)
	c[colRow].boundInt64(r.Row)
	c[colSystem].scalar(r.System)

	tools, resp := &lv[lvTools], &lv[lvResponse]
	if len(r.Tools) == 0 {
		tools.add(0, 0)
		resp.add(0, 0)
	}
	var present []bool
	if e.responseRuns != nil && len(r.Tools) > 1 {
		present = e.present[:0]
		for _, t := range r.Tools[1:] {
			present = append(present, len(t.Response) > 0)
		}
		e.responseRuns(present)
		e.present = present
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		rep := repOf(i, 0, 1)
		tools.add(rep, 1)
		c[colToolName].value(t.Name)
		c[colToolDescription].value(t.Description)
		c[colToolParameters].value(bytesString(t.Parameters))
		if len(t.Response) > 0 || (present != nil && i > 0 && present[i-1]) {
			resp.add(rep, 2)
			c[colToolResponse].value(bytesString(t.Response))
		} else {
			resp.add(rep, 1)
		}
	}

	msgs, calls, results := &lv[lvMessages], &lv[lvCalls], &lv[lvResults]
	if len(r.Messages) == 0 {
		msgs.add(0, 0)
		calls.add(0, 0)
		results.add(0, 0)
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		rep := repOf(i, 0, 1)
		msgs.add(rep, 1)
		c[colRole].value(m.Role)
		c[colContent].value(m.Content)
		c[colReasoning].value(m.Reasoning)
		if len(m.Calls) == 0 {
			calls.add(rep, 1)
		}
		for j := range m.Calls {
			call := &m.Calls[j]
			calls.add(repOf(j, rep, 2), 2)
			c[colCallName].value(call.Name)
			c[colCallArguments].value(bytesString(call.Arguments))
		}
		if len(m.Results) == 0 {
			results.add(rep, 1)
		}
		for j := range m.Results {
			res := &m.Results[j]
			results.add(repOf(j, rep, 2), 2)
			c[colResultName].value(res.Name)
			c[colResultContent].value(res.Content)
		}
	}

	tags := &lv[lvTags]
	if len(r.Tags) == 0 {
		tags.add(0, 0)
	}
	for i := range r.Tags {
		t := &r.Tags[i]
		tags.add(repOf(i, 0, 1), 1)
		c[colTagKey].value(t.Key)
		c[colTagValue].value(t.Value)
	}

	steps := &lv[lvLineage]
	if len(r.Lineage) == 0 {
		steps.add(0, 0)
	}
	for i := range r.Lineage {
		s := &r.Lineage[i]
		steps.add(repOf(i, 0, 1), 1)
		c[colStage].value(s.Stage)
		c[colProvider].value(s.Provider)
		c[colModel].value(s.Model)
	}
}

// repOf is the repetition level of the i-th element of a list whose first
// element repeats at first and the others at depth.
func repOf(i int, first, depth byte) byte {
	if i == 0 {
		return first
	}
	return depth
}

// bytesString views b as a string without copying; the encoder only
// copies it into its pages.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// stringBytes views s as bytes without copying, to be read only.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// value appends a byte array; a repeated column's levels are appended to
// its level list. Its length goes to lens, its bytes join the last run
// when they lie right after it in memory (as the values of one column do
// in records a shard's reader made, one string per column and row group,
// and in the records stages make from them), else start a run: the page
// body is then copied run by run (appendRuns).
func (c *encColumn) value(s string) {
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	if p == c.end && len(c.runs) > 0 {
		c.runs[len(c.runs)-1].n += len(s)
	} else {
		c.runs = append(c.runs, textRef{p, len(s)})
	}
	c.end = p + uintptr(len(s))
	c.lens = append(c.lens, int32(len(s)))
	c.size += len(s)
}

// scalar appends a byte array of a column without levels.
func (c *encColumn) scalar(s string) {
	c.value(s)
	c.n++
}

// boundString appends a value of a column with bounds.
func (c *encColumn) boundString(s string) {
	c.scalar(s)
	switch {
	case c.n == 1:
		c.minStr, c.maxStr = s, s
	case s < c.minStr:
		c.minStr = s
	case s > c.maxStr:
		c.maxStr = s
	}
}

// boundInt64 appends a PLAIN int64 of a column with bounds.
func (c *encColumn) boundInt64(v int64) {
	c.vals = binary.LittleEndian.AppendUint64(c.vals, uint64(v))
	c.n++
	if c.n == 1 {
		c.minInt, c.maxInt = v, v
	} else {
		c.minInt = min(c.minInt, v)
		c.maxInt = max(c.maxInt, v)
	}
}

// count is the number of values of the page being filled, nulls
// included.
func (c *encColumn) count() int {
	if c.lv != nil {
		return len(c.lv.reps) - c.lvAt
	}
	return c.n
}

// bufferSize is the size parquet-go's column buffer would report for the
// page being filled, holding rows rows.
func (c *encColumn) bufferSize(rows int) int {
	if c.leaf.maxRep > 0 {
		return len(c.vals) + c.size + 4*len(c.lens) + 2*(len(c.lv.reps)-c.lvAt) + 8*rows
	}
	return len(c.vals) + c.size + 4*len(c.lens)
}

// cutFullPages writes out the page of every column whose buffer is full.
func (e *encoder) cutFullPages() error {
	for i := range e.cols {
		c := &e.cols[i]
		if c.bufferSize(e.rows-c.first) >= pageCut {
			if err := e.writePage(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// resetPage empties the page being filled; its first row is first.
func (c *encColumn) resetPage(first int) {
	c.vals = c.vals[:0]
	c.runs, c.lens, c.end = c.runs[:0], c.lens[:0], 0
	c.size = 0
	c.minStr, c.maxStr = "", ""
	c.n = 0
	if c.lv != nil {
		c.lvAt = len(c.lv.reps)
	}
	c.first = first
}

// writePage encodes, compresses and appends the page being filled to the
// column's chunk, and records its statistics.
func (e *encoder) writePage(c *encColumn) error {
	n := c.count()
	if n == 0 {
		return nil
	}
	var reps, defs []byte
	if c.lv != nil {
		reps, defs = c.lv.reps[c.lvAt:], c.lv.defs[c.lvAt:]
	}
	leaf := c.leaf
	rows := e.rows - c.first
	body := c.vals
	nulls := 0
	if leaf.maxDef > 0 || leaf.kind == parquet.ByteArray {
		e.page = e.page[:0]
		if leaf.maxDef > 0 {
			// Data page v1: each level section prefixed by its length.
			var err error
			for _, lv := range [...]struct {
				levels []byte
				width  int
			}{{reps, bitWidth(leaf.maxRep)}, {defs, bitWidth(leaf.maxDef)}} {
				enc := rle.Encoding{BitWidth: lv.width}
				if e.levels, err = enc.EncodeLevels(e.levels, lv.levels); err != nil {
					return fmt.Errorf("encoding levels of %s: %w", strings.Join(leaf.path, "."), err)
				}
				e.page = binary.LittleEndian.AppendUint32(e.page, uint32(len(e.levels)))
				e.page = append(e.page, e.levels...)
			}
			nulls = len(defs) - bytes.Count(defs, []byte{leaf.maxDef})
		}
		if leaf.kind == parquet.ByteArray {
			// DELTA_LENGTH_BYTE_ARRAY: the lengths delta-encoded, then
			// the bytes.
			var err error
			if e.levels, err = deltaLengths.EncodeInt32(e.levels, c.lens); err != nil {
				return fmt.Errorf("encoding lengths of %s: %w", strings.Join(leaf.path, "."), err)
			}
			e.page = append(e.page, e.levels...)
			e.page = appendRuns(e.page, c.runs, c.size)
		} else {
			e.page = append(e.page, c.vals...)
		}
		body = e.page
	}
	uncompressed := len(body)
	if uncompressed > maxPageSize {
		return fmt.Errorf("page size limit exceeded: %d>%d", uncompressed, maxPageSize)
	}

	packed := body
	if e.packed {
		var err error
		if e.packBuf, err = e.codec.Encode(e.packBuf[:0], body); err != nil {
			return fmt.Errorf("compressing parquet data page: %w", err)
		}
		packed = e.packBuf
	}
	at := len(c.chunk)
	c.chunk = appendPageHeader(c.chunk, int32(uncompressed), int32(len(packed)),
		int32(crc32.ChecksumIEEE(packed)), int32(n), leaf.encoding)
	hlen := len(c.chunk) - at
	c.chunk = append(c.chunk, packed...)

	// The column index and the chunk's statistics.
	c.nullPages = append(c.nullPages, n == nulls)
	c.nullCounts = append(c.nullCounts, int64(nulls))
	if leaf.bounds {
		var lo, hi []byte
		if leaf.kind == parquet.Int64 {
			lo = binary.LittleEndian.AppendUint64(nil, uint64(c.minInt))
			hi = binary.LittleEndian.AppendUint64(nil, uint64(c.maxInt))
		} else {
			lo, hi = stringBytes(c.minStr), stringBytes(c.maxStr)
		}
		c.addIndexBounds(lo, hi)
		c.addStatBounds(lo, hi)
	} else {
		c.addIndexBounds(nil, nil)
	}
	c.numValues += int64(n)
	c.nulls += int64(nulls)
	c.pages = append(c.pages, format.PageLocation{
		Offset:             int64(at),
		CompressedPageSize: int32(hlen + len(packed)),
		FirstRowIndex:      int64(c.first),
	})
	if leaf.kind == parquet.ByteArray {
		c.unencoded += int64(c.size)
	}
	if leaf.maxRep > 0 {
		c.pageRepHist = appendHistogram(c.pageRepHist, c.repHist, reps, leaf.maxRep)
	}
	if leaf.maxDef > 0 {
		c.pageDefHist = appendHistogram(c.pageDefHist, c.defHist, defs, leaf.maxDef)
	}
	c.uncompressed += int64(hlen + uncompressed)
	e.written += c.size + len(c.vals)
	c.resetPage(c.first + rows)
	return nil
}

func bitWidth(maxLevel byte) int { return bits.Len8(maxLevel) }

// appendPageHeader appends the header of a data page (v1; levels RLE) as
// parquet-go's Thrift compact encoder writes a format.PageHeader: the
// fields in order, each as its id's delta to the previous field's and its
// type (0x15: delta 1, i32; 0x1c: delta 1, struct), i32 values as zigzag
// varints; the CRC, optional, left out when 0; in the data page header an
// empty statistics struct, whose null_count is written even when 0
// (0x36: delta 3, i64). TestPageHeader holds it to the encoder.
func appendPageHeader(b []byte, uncompressed, compressed, crc, numValues int32, enc format.Encoding) []byte {
	b = append(b, 0x15, 0x00) // 1: type DATA_PAGE
	b = append(b, 0x15)
	b = appendZigzag32(b, uncompressed)
	b = append(b, 0x15)
	b = appendZigzag32(b, compressed)
	if crc != 0 {
		b = append(b, 0x15)
		b = appendZigzag32(b, crc)
		b = append(b, 0x1c) // 5: data_page_header
	} else {
		b = append(b, 0x2c)
	}
	b = append(b, 0x15)
	b = appendZigzag32(b, numValues)
	b = append(b, 0x15)
	b = appendZigzag32(b, int32(enc))
	b = append(b, 0x15)
	b = appendZigzag32(b, int32(format.RLE)) // definition levels
	b = append(b, 0x15)
	b = appendZigzag32(b, int32(format.RLE)) // repetition levels
	return append(b, 0x1c, 0x36, 0x00, 0x00, // 5: statistics {3: null_count 0}
		0x00, 0x00) // the ends of data_page_header and of the header
}

// appendZigzag32 appends v as Thrift's compact protocol writes an i32.
func appendZigzag32(b []byte, v int32) []byte {
	return binary.AppendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31)))
}

// textRef refers to values' bytes in a record without holding a
// pointer: the records the encoder holds (encoder.recs) keep their text
// alive and in place, so the encoder's run lists need neither write
// barriers when filled nor scanning by the GC, and are not cleared when
// emptied. A textRef is read only while its records are held.
type textRef struct {
	p uintptr
	n int
}

// appendRuns appends the bytes of runs (size in all) to b.
//
// A run may span two allocations that happen to be adjacent; every byte
// of it belongs to one of the values, so reading it is sound, but the
// race detector's pointer checks would object (and to pointers made from
// a textRef): hence nocheckptr.
//
//go:nocheckptr
func appendRuns(b []byte, runs []textRef, size int) []byte {
	b = slices.Grow(b, size)
	for _, r := range runs {
		if r.n > 0 {
			b = append(b, unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(nil), r.p)), r.n)...)
		}
	}
	return b
}

// appendHistogram counts levels into the chunk's histogram and appends
// the page's own to pages.
func appendHistogram(pages, chunk []int64, levels []byte, maxLevel byte) []int64 {
	at := len(pages)
	pages = append(pages, make([]int64, int(maxLevel)+1)...)
	rest := len(levels)
	for l := byte(1); l <= maxLevel; l++ {
		n := bytes.Count(levels, []byte{l})
		pages[at+int(l)] = int64(n)
		rest -= n
	}
	pages[at] = int64(rest)
	for i := range chunk {
		chunk[i] += pages[at+i]
	}
	return pages
}

// addIndexBounds records a page's min and max in the column index: byte
// arrays truncated to columnIndexLimit bytes, the max rounded up.
func (c *encColumn) addIndexBounds(lo, hi []byte) {
	if c.leaf.kind == parquet.ByteArray {
		if len(lo) > columnIndexLimit {
			lo = lo[:columnIndexLimit]
		}
		if len(hi) > columnIndexLimit {
			at := len(c.indexBytes)
			c.indexBytes = append(c.indexBytes, hi[:columnIndexLimit]...)
			hi = c.indexBytes[at:]
			roundUp(hi)
		}
	}
	c.minValues = append(c.minValues, c.keep(lo))
	c.maxValues = append(c.maxValues, c.keep(hi))
}

// keep copies b into the column's index store, as a non-nil slice.
func (c *encColumn) keep(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	at := len(c.indexBytes)
	c.indexBytes = append(c.indexBytes, b...)
	return c.indexBytes[at:len(c.indexBytes):len(c.indexBytes)]
}

// roundUp increments the big-endian number b by one, or leaves all bytes
// 0xff when that overflows (how truncated maxima are made upper bounds).
func roundUp(b []byte) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return
		}
	}
	for i := range b {
		b[i] = 0xff
	}
}

// addStatBounds merges a page's min and max into the chunk's statistics.
func (c *encColumn) addStatBounds(lo, hi []byte) {
	if !c.statsSet {
		c.statsSet = true
		c.minStat = append(c.minStat[:0], lo...)
		c.maxStat = append(c.maxStat[:0], hi...)
		return
	}
	if c.compare(hi, c.maxStat) > 0 {
		c.maxStat = append(c.maxStat[:0], hi...)
	}
	if c.compare(lo, c.minStat) < 0 {
		c.minStat = append(c.minStat[:0], lo...)
	}
}

// compare orders two PLAIN values of the column.
func (c *encColumn) compare(a, b []byte) int {
	if c.leaf.kind == parquet.Int64 {
		x, y := int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return bytes.Compare(a, b)
}

// resetChunk empties the column's chunk for the next row group.
func (c *encColumn) resetChunk() {
	c.chunk = c.chunk[:0]
	c.pages = c.pages[:0]
	c.numValues, c.nulls, c.uncompressed, c.unencoded = 0, 0, 0, 0
	clear(c.repHist)
	clear(c.defHist)
	c.pageRepHist = c.pageRepHist[:0]
	c.pageDefHist = c.pageDefHist[:0]
	c.nullPages = c.nullPages[:0]
	c.nullCounts = c.nullCounts[:0]
	c.minValues = c.minValues[:0]
	c.maxValues = c.maxValues[:0]
	c.indexBytes = nil // the footer's column indexes keep the old one
	c.statsSet = false
}

// resetLevels empties the level lists for the next row group.
func (e *encoder) resetLevels() {
	for i := range e.lv {
		l := &e.lv[i]
		l.reps, l.defs = l.reps[:0], l.defs[:0]
	}
	for i := range e.cols {
		e.cols[i].lvAt = 0
	}
}

// writeRowGroup writes the pages of the current row group's columns as
// one row group and keeps its metadata for the footer. No rows, no row
// group.
func (e *encoder) writeRowGroup(out *countingWriter) error {
	if e.rows == 0 {
		return nil
	}
	for i := range e.cols {
		if err := e.writePage(&e.cols[i]); err != nil {
			return err
		}
	}
	if out.n == 0 {
		if _, err := io.WriteString(out, "PAR1"); err != nil {
			return err
		}
	}
	rg := format.RowGroup{
		Columns:        make([]format.ColumnChunk, numColumns),
		NumRows:        int64(e.rows),
		SortingColumns: []format.SortingColumn{},
		FileOffset:     out.n,
		Ordinal:        int16(len(e.rowGroups)),
	}
	colIndex := make([]format.ColumnIndex, numColumns)
	offIndex := make([]format.OffsetIndex, numColumns)
	for i := range e.cols {
		c := &e.cols[i]
		leaf := c.leaf
		start := out.n
		if _, err := out.Write(c.chunk); err != nil {
			return err
		}
		pages := slices.Clone(c.pages)
		for j := range pages {
			pages[j].Offset += start
		}
		md := format.ColumnMetaData{
			Type:                  format.Type(leaf.kind),
			Encoding:              leaf.encodings,
			PathInSchema:          leaf.path,
			Codec:                 e.codec.CompressionCodec(),
			NumValues:             c.numValues,
			TotalUncompressedSize: c.uncompressed,
			TotalCompressedSize:   int64(len(c.chunk)),
			DataPageOffset:        start,
			Statistics:            format.Statistics{NullCount: c.nulls},
			EncodingStats:         []format.PageEncodingStats{{PageType: format.DataPage, Encoding: leaf.encoding, Count: int32(len(c.pages))}},
			SizeStatistics: format.SizeStatistics{
				UnencodedByteArrayDataBytes: c.unencoded,
				RepetitionLevelHistogram:    slices.Clone(c.repHist),
				DefinitionLevelHistogram:    slices.Clone(c.defHist),
			},
		}
		if c.statsSet {
			md.Statistics.MinValue = slices.Clone(c.minStat)
			md.Statistics.MaxValue = slices.Clone(c.maxStat)
			if md.Statistics.MinValue == nil {
				md.Statistics.MinValue = []byte{}
			}
			if md.Statistics.MaxValue == nil {
				md.Statistics.MaxValue = []byte{}
			}
		}
		rg.Columns[i] = format.ColumnChunk{MetaData: md}
		rg.TotalByteSize += c.uncompressed
		rg.TotalCompressedSize += int64(len(c.chunk))

		ci := format.ColumnIndex{
			NullPages:     slices.Clone(c.nullPages),
			NullCounts:    slices.Clone(c.nullCounts),
			MinValues:     slices.Clone(c.minValues),
			MaxValues:     slices.Clone(c.maxValues),
			BoundaryOrder: boundaryOrder(c),
		}
		if len(c.pageRepHist) > 0 {
			ci.RepetitionLevelHistogram = slices.Clone(c.pageRepHist)
		}
		if len(c.pageDefHist) > 0 {
			ci.DefinitionLevelHistogram = slices.Clone(c.pageDefHist)
		}
		colIndex[i] = ci
		offIndex[i] = format.OffsetIndex{PageLocations: pages}
		c.resetChunk()
		c.resetPage(0)
	}
	e.resetLevels()
	e.rowGroups = append(e.rowGroups, rg)
	e.columnIndex = append(e.columnIndex, colIndex)
	e.offsetIndex = append(e.offsetIndex, offIndex)
	e.rows, e.written = 0, 0
	return nil
}

// boundaryOrder tells how the pages' min and max values are ordered.
func boundaryOrder(c *encColumn) format.BoundaryOrder {
	var lo, hi int
	if c.leaf.kind == parquet.Int64 {
		lo, hi = orderOfInt64s(c.minValues), orderOfInt64s(c.maxValues)
	} else {
		lo, hi = orderOfBytes(c.minValues), orderOfBytes(c.maxValues)
	}
	if lo == hi {
		switch {
		case lo > 0:
			return format.Ascending
		case lo < 0:
			return format.Descending
		}
	}
	return format.Unordered
}

// orderOfInt64s is +1 when the PLAIN int64 values never decrease (and
// there are two or more), -1 when they never increase, else 0.
func orderOfInt64s(vals [][]byte) int {
	if len(vals) < 2 {
		return 0
	}
	asc, desc := true, true
	for i := 1; i < len(vals); i++ {
		a := int64(binary.LittleEndian.Uint64(vals[i-1]))
		b := int64(binary.LittleEndian.Uint64(vals[i]))
		if a > b {
			asc = false
		}
		if a < b {
			desc = false
		}
	}
	switch {
	case asc:
		return 1
	case desc:
		return -1
	}
	return 0
}

// orderOfBytes is +1 when the values never decrease, -1 when they never
// increase, 0 otherwise or for fewer than two values; a list of equal
// values counts as ascending.
func orderOfBytes(vals [][]byte) int {
	if len(vals) < 2 {
		return 0
	}
	i := 1
	for i < len(vals) && bytes.Equal(vals[i], vals[0]) {
		i++
	}
	if i == len(vals) {
		return 1
	}
	vals = vals[i-1:]
	asc, desc := true, true
	for k := 1; k < len(vals); k++ {
		switch bytes.Compare(vals[k-1], vals[k]) {
		case 1:
			asc = false
		case -1:
			desc = false
		}
	}
	switch {
	case bytes.Compare(vals[0], vals[1]) < 0 && asc:
		return 1
	case bytes.Compare(vals[0], vals[1]) > 0 && desc:
		return -1
	}
	return 0
}

// writeFooter writes the page indexes, the footer and the closing magic.
func (e *encoder) writeFooter(out *countingWriter, version string) error {
	if out.n == 0 {
		if _, err := io.WriteString(out, "PAR1"); err != nil {
			return err
		}
	}
	l := layout()
	e.header.Reset()
	base := out.n
	for i, idx := range e.columnIndex {
		for j := range idx {
			c := &e.rowGroups[i].Columns[j]
			c.ColumnIndexOffset = base + int64(e.header.Len())
			if err := e.thrift.Encode(&idx[j]); err != nil {
				return err
			}
			c.ColumnIndexLength = int32(base + int64(e.header.Len()) - c.ColumnIndexOffset)
		}
	}
	for i, idx := range e.offsetIndex {
		for j := range idx {
			c := &e.rowGroups[i].Columns[j]
			c.OffsetIndexOffset = base + int64(e.header.Len())
			if err := e.thrift.Encode(&idx[j]); err != nil {
				return err
			}
			c.OffsetIndexLength = int32(base + int64(e.header.Len()) - c.OffsetIndexOffset)
		}
	}
	var rows int64
	for _, rg := range e.rowGroups {
		rows += rg.NumRows
	}
	meta := format.FileMetaData{
		Version:          2,
		Schema:           l.schema,
		NumRows:          rows,
		RowGroups:        e.rowGroups,
		KeyValueMetadata: []format.KeyValue{{Key: "augment.version", Value: version}},
		CreatedBy:        "augment version " + version,
		ColumnOrders:     l.columnOrders,
	}
	start := e.header.Len()
	if err := e.thrift.Encode(&meta); err != nil {
		return err
	}
	e.header.Write(binary.LittleEndian.AppendUint32(nil, uint32(e.header.Len()-start)))
	e.header.WriteString("PAR1")
	_, err := out.Write(e.header.Bytes())
	return err
}
