package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Parquet rows become the JSON objects the format readers take, one line
// each, keys in the file's column order:
//
//   - groups are objects; LIST-annotated groups (3-level and the legacy
//     2-level layouts) and bare repeated fields are arrays; MAP groups are
//     objects keyed by the key column's text;
//   - strings, enums and UTF-8 binary are strings (binary that is not
//     UTF-8 is base64); JSON columns are embedded as JSON when valid,
//     compacted, else kept as a string; UUIDs are their canonical text;
//   - integers are numbers (unsigned ones too), floats numbers (NaN and
//     infinities null), decimals exact numbers ("12.50"), booleans
//     true/false; dates "2006-01-02", times "15:04:05.999999999",
//     timestamps RFC 3339 (in UTC when adjusted to UTC), INT96 timestamps
//     too;
//   - a null is null, an absent optional group null, an empty list [].
//
// This is the shape the Hub's converted Parquet has for JSON datasets: the
// same column names and nesting as the JSON rows, so a source's format
// reader reads either.

// pnode is a schema node with the levels that locate its values.
type pnode struct {
	name     string
	optional bool
	repeated bool
	def, rep int // max definition and repetition level at this node
	col      int // leaf: column index; group: -1
	typ      parquet.Type
	kids     []*pnode
	first    int   // column of the first leaf below (or of itself)
	leaves   []int // every leaf column below (or itself)
	kind     int   // how a group is written
}

const (
	asObject = iota
	asList   // LIST: the one repeated child holds the elements
	asMap    // MAP: the one repeated child holds key and value
)

func buildNode(n parquet.Node, name string, parentDef, parentRep int, col *int) *pnode {
	p := &pnode{name: name, optional: n.Optional(), repeated: n.Repeated(), def: parentDef, rep: parentRep, col: -1, typ: n.Type()}
	if p.optional || p.repeated {
		p.def++
	}
	if p.repeated {
		p.rep++
	}
	if n.Leaf() {
		p.col = *col
		*col++
		p.first = p.col
		p.leaves = []int{p.col}
		return p
	}
	for _, f := range n.Fields() {
		k := buildNode(f, f.Name(), p.def, p.rep, col)
		p.kids = append(p.kids, k)
		p.leaves = append(p.leaves, k.leaves...)
	}
	if len(p.kids) > 0 {
		p.first = p.kids[0].first
	}
	lt := n.Type().LogicalType()
	ct := n.Type().ConvertedType()
	isList := lt != nil && isLogical[*format.ListType](lt) || ct != nil && *ct == deprecated.List
	isMap := lt != nil && isLogical[*format.MapType](lt) || ct != nil && (*ct == deprecated.Map || *ct == deprecated.MapKeyValue)
	if len(p.kids) == 1 && p.kids[0].repeated {
		switch {
		case isList:
			p.kind = asList
		case isMap && !p.kids[0].leafNode() && len(p.kids[0].kids) == 2:
			p.kind = asMap
		}
	}
	return p
}

func isLogical[T any](lt *format.LogicalType) bool {
	_, ok := lt.Value.(T)
	return ok
}

func (p *pnode) leafNode() bool { return p.col >= 0 }

// listElement is the node whose values are a LIST's elements: the repeated
// child itself, or its single field in the standard 3-level layout (the
// backward-compatibility rules of the Parquet spec decide).
func (p *pnode) listElement() (rep *pnode, elem *pnode) {
	r := p.kids[0]
	if r.leafNode() || len(r.kids) != 1 || r.name == "array" || r.name == p.name+"_tuple" {
		return r, nil
	}
	return r, r.kids[0]
}

// assembler writes one row at a time: cols holds each leaf column's values
// of the row and pos the next unread one.
type assembler struct {
	w    *bufio.Writer
	cols [][]parquet.Value
	pos  []int
	row  int64
}

var errShortRow = errors.New("a column has fewer values than the schema needs")

func (a *assembler) peek(col int) (parquet.Value, error) {
	if a.pos[col] >= len(a.cols[col]) {
		return parquet.Value{}, errShortRow
	}
	return a.cols[col][a.pos[col]], nil
}

// skip consumes the single value every leaf below n has when n is null or
// an empty list.
func (a *assembler) skip(n *pnode) {
	for _, c := range n.leaves {
		a.pos[c]++
	}
}

// more reports whether the repeated node n has another element in this
// row: the next value of its first leaf repeats at n's level.
func (a *assembler) more(n *pnode) bool {
	c := n.first
	return a.pos[c] < len(a.cols[c]) && a.cols[c][a.pos[c]].RepetitionLevel() == n.rep
}

// write writes the value of field n; its parent is present.
func (a *assembler) write(n *pnode) error {
	v, err := a.peek(n.first)
	if err != nil {
		return err
	}
	d := v.DefinitionLevel()
	if n.repeated { // a bare repeated field: an array of its values
		if d < n.def {
			a.skip(n)
			a.w.WriteString("[]")
			return nil
		}
		return a.elements(n, func() error { return a.present(n) })
	}
	if n.optional && d < n.def {
		a.skip(n)
		a.w.WriteString("null")
		return nil
	}
	return a.present(n)
}

// elements writes the repeated node r's elements as an array.
func (a *assembler) elements(r *pnode, one func() error) error {
	a.w.WriteByte('[')
	for i := 0; ; i++ {
		if i > 0 {
			a.w.WriteByte(',')
		}
		if err := one(); err != nil {
			return err
		}
		if !a.more(r) {
			break
		}
	}
	a.w.WriteByte(']')
	return nil
}

// present writes n, known to be present, as one value.
func (a *assembler) present(n *pnode) error {
	if n.leafNode() {
		v := a.cols[n.col][a.pos[n.col]]
		a.pos[n.col]++
		return a.leaf(n, v)
	}
	switch n.kind {
	case asList, asMap:
		r, elem := n.listElement()
		v, err := a.peek(r.first)
		if err != nil {
			return err
		}
		if v.DefinitionLevel() < r.def {
			a.skip(n)
			if n.kind == asMap {
				a.w.WriteString("{}")
			} else {
				a.w.WriteString("[]")
			}
			return nil
		}
		if n.kind == asMap {
			return a.mapEntries(r)
		}
		return a.elements(r, func() error {
			if elem != nil {
				return a.write(elem)
			}
			return a.present(r)
		})
	}
	a.w.WriteByte('{')
	for i, k := range n.kids {
		if i > 0 {
			a.w.WriteByte(',')
		}
		a.str(k.name)
		a.w.WriteByte(':')
		if err := a.write(k); err != nil {
			return err
		}
	}
	a.w.WriteByte('}')
	return nil
}

// mapEntries writes a MAP's key_value entries as an object.
func (a *assembler) mapEntries(r *pnode) error {
	a.w.WriteByte('{')
	for i := 0; ; i++ {
		if i > 0 {
			a.w.WriteByte(',')
		}
		key, val := r.kids[0], r.kids[1]
		if !key.leafNode() {
			return fmt.Errorf("map %q: the key is a group", r.name)
		}
		kv := a.cols[key.col][a.pos[key.col]]
		a.pos[key.col]++
		// Keys are written as strings: their text, or their JSON.
		if key.typ.Kind() == parquet.ByteArray || key.typ.Kind() == parquet.FixedLenByteArray {
			kb := kv.ByteArray()
			if !utf8.Valid(kb) {
				return fmt.Errorf("map %q: a key is not UTF-8", r.name)
			}
			a.str(string(kb))
		} else {
			var sb bytes.Buffer
			sub := assembler{w: bufio.NewWriter(&sb)}
			if err := sub.leaf(key, kv); err != nil {
				return err
			}
			sub.w.Flush()
			if k := sb.String(); strings.HasPrefix(k, `"`) {
				a.w.WriteString(k)
			} else {
				a.str(k)
			}
		}
		a.w.WriteByte(':')
		if err := a.write(val); err != nil {
			return err
		}
		if !a.more(r) {
			break
		}
	}
	a.w.WriteByte('}')
	return nil
}

// str writes s as a JSON string: '"', '\\' and control characters escaped,
// everything else as UTF-8.
func (a *assembler) str(s string) {
	const hexDigits = "0123456789abcdef"
	w := a.w
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			w.WriteByte('\\')
			w.WriteByte(c)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		default:
			w.WriteString(`\u00`)
			w.WriteByte(hexDigits[c>>4])
			w.WriteByte(hexDigits[c&15])
		}
		start = i + 1
	}
	w.WriteString(s[start:])
	w.WriteByte('"')
}

// leaf writes one present leaf value.
func (a *assembler) leaf(n *pnode, v parquet.Value) error {
	if v.IsNull() {
		a.w.WriteString("null")
		return nil
	}
	var lt format.LogicalTypeValue
	if t := n.typ.LogicalType(); t != nil {
		lt = t.Value
	}
	ct := n.typ.ConvertedType()
	switch v.Kind() {
	case parquet.Boolean:
		a.w.WriteString(strconv.FormatBool(v.Boolean()))
	case parquet.Int32, parquet.Int64:
		i := v.Int64()
		if v.Kind() == parquet.Int32 {
			i = int64(v.Int32())
		}
		return a.integer(lt, ct, i, v.Kind() == parquet.Int32)
	case parquet.Int96:
		i := v.Int96()
		nanos := int64(uint64(i[1])<<32 | uint64(i[0]))
		day := int64(int32(i[2]))
		t := time.Unix((day-2440588)*86400, nanos).UTC()
		a.str(t.Format(time.RFC3339Nano))
	case parquet.Float:
		a.float(float64(v.Float()), 32)
	case parquet.Double:
		a.float(v.Double(), 64)
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return a.bytes(lt, v.ByteArray())
	default:
		return fmt.Errorf("column %q: unsupported physical type %s", n.name, v.Kind())
	}
	return nil
}

func (a *assembler) float(f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		a.w.WriteString("null")
		return
	}
	a.w.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
}

func (a *assembler) integer(lt format.LogicalTypeValue, ct *deprecated.ConvertedType, i int64, is32 bool) error {
	switch t := lt.(type) {
	case *format.IntType:
		if !t.IsSigned {
			u := uint64(i)
			if is32 {
				u = uint64(uint32(i))
			}
			a.w.WriteString(strconv.FormatUint(u, 10))
			return nil
		}
	case *format.DecimalType:
		a.w.WriteString(decimal(big.NewInt(i), int(t.Scale)))
		return nil
	case *format.DateType:
		a.str(time.Unix(i*86400, 0).UTC().Format("2006-01-02"))
		return nil
	case *format.TimeType:
		d := time.Duration(i) * unitOf(t.Unit)
		a.str(time.Unix(0, 0).UTC().Add(d).Format("15:04:05.999999999"))
		return nil
	case *format.TimestampType:
		var ts time.Time
		switch unitOf(t.Unit) {
		case time.Millisecond:
			ts = time.UnixMilli(i)
		case time.Microsecond:
			ts = time.UnixMicro(i)
		default:
			ts = time.Unix(0, i)
		}
		if t.IsAdjustedToUTC {
			a.str(ts.UTC().Format(time.RFC3339Nano))
		} else {
			a.str(ts.UTC().Format("2006-01-02T15:04:05.999999999"))
		}
		return nil
	}
	if ct != nil {
		switch *ct {
		case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32, deprecated.Uint64:
			u := uint64(i)
			if is32 {
				u = uint64(uint32(i))
			}
			a.w.WriteString(strconv.FormatUint(u, 10))
			return nil
		}
	}
	a.w.WriteString(strconv.FormatInt(i, 10))
	return nil
}

func unitOf(u format.TimeUnit) time.Duration {
	switch u.Value.(type) {
	case *format.MilliSeconds:
		return time.Millisecond
	case *format.MicroSeconds:
		return time.Microsecond
	}
	return time.Nanosecond
}

// decimal writes unscaled × 10^-scale exactly.
func decimal(unscaled *big.Int, scale int) string {
	s := unscaled.String()
	if scale <= 0 {
		return s + zeros(-scale)
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) <= scale {
		s = zeros(scale-len(s)+1) + s
	}
	s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	if neg {
		s = "-" + s
	}
	return s
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

func (a *assembler) bytes(lt format.LogicalTypeValue, b []byte) error {
	switch t := lt.(type) {
	case *format.JsonType:
		var sb bytes.Buffer
		if json.Compact(&sb, b) == nil {
			a.w.Write(sb.Bytes())
			return nil
		}
	case *format.DecimalType:
		// Big-endian two's complement.
		n := new(big.Int).SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		a.w.WriteString(decimal(n, int(t.Scale)))
		return nil
	case *format.UUIDType:
		if len(b) == 16 {
			h := fmt.Sprintf("%x", b)
			a.str(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
			return nil
		}
	case *format.Float16Type:
		if len(b) == 2 {
			a.float(float64(half(binary.LittleEndian.Uint16(b))), 32)
			return nil
		}
	}
	if utf8.Valid(b) {
		a.str(string(b))
		return nil
	}
	a.str(base64.StdEncoding.EncodeToString(b))
	return nil
}

// half converts an IEEE 754 half-precision float.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int32(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		f := float32(frac) / 1024 * float32(math.Pow(2, -14))
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | frac<<13)
}

// parquetJSONL streams the rows of a Parquet file as JSON Lines. Closing
// the reader stops the conversion.
func parquetJSONL(ctx context.Context, ra io.ReaderAt, size int64) (*parquetReader, error) {
	f, err := parquet.OpenFile(ra, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	col := 0
	root := buildNode(f.Schema(), "", 0, 0, &col)
	if root.leafNode() || len(root.kids) == 0 {
		return nil, errors.New("the Parquet schema has no columns")
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeRows(ctx, f, root, col, pw))
	}()
	return &parquetReader{PipeReader: pr, rows: f.NumRows()}, nil
}

// parquetReader reads the JSON Lines of a Parquet file's rows.
type parquetReader struct {
	*io.PipeReader
	rows int64
}

func writeRows(ctx context.Context, f *parquet.File, root *pnode, ncols int, out io.Writer) error {
	a := &assembler{w: bufio.NewWriterSize(out, 64<<10), cols: make([][]parquet.Value, ncols), pos: make([]int, ncols)}
	rows := make([]parquet.Row, 64)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				if err := a.writeRow(root, row); err != nil {
					rr.Close()
					return fmt.Errorf("parquet row %d: %w", a.row, err)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				rr.Close()
				return fmt.Errorf("parquet row %d: %w", a.row, err)
			}
			if ctx.Err() != nil {
				rr.Close()
				return ctx.Err()
			}
		}
		rr.Close()
	}
	return a.w.Flush()
}

func (a *assembler) writeRow(root *pnode, row parquet.Row) error {
	for i := range a.cols {
		a.cols[i] = a.cols[i][:0]
		a.pos[i] = 0
	}
	for _, v := range row {
		c := v.Column()
		if c < 0 || c >= len(a.cols) {
			return fmt.Errorf("value for unknown column %d", c)
		}
		a.cols[c] = append(a.cols[c], v)
	}
	if err := a.present(root); err != nil {
		return err
	}
	for c := range a.cols {
		if a.pos[c] != len(a.cols[c]) {
			return fmt.Errorf("column %d has %d values, the schema used %d", c, len(a.cols[c]), a.pos[c])
		}
	}
	a.row++
	return a.w.WriteByte('\n')
}
