package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/augmentdata/augment/stages/record"
)

// The reader decodes shards column by column and assembles records from
// the repetition and definition levels itself, instead of going through
// parquet-go's reflection-based row reconstruction: that path cost about
// half of Read's CPU (see BenchmarkRead). Every level and count is checked,
// so a damaged shard gives an error, never a wrong record.

// leaf column indexes of the shard schema, looked up by path.
var col = struct {
	id, source, format, row, system                      int
	toolName, toolDesc, toolParams, toolResp             int
	msgRole, msgContent, msgReasoning                    int
	callName, callArgs, resName, resContent              int
	tagKey, tagValue, stepStage, stepProvider, stepModel int
}{
	id: leaf("id"), source: leaf("source"), format: leaf("format"), row: leaf("row"), system: leaf("system"),
	toolName: leaf("tools", "list", "element", "name"), toolDesc: leaf("tools", "list", "element", "description"),
	toolParams: leaf("tools", "list", "element", "parameters"), toolResp: leaf("tools", "list", "element", "response"),
	msgRole: leaf("messages", "list", "element", "role"), msgContent: leaf("messages", "list", "element", "content"),
	msgReasoning: leaf("messages", "list", "element", "reasoning"),
	callName:     leaf("messages", "list", "element", "calls", "list", "element", "name"),
	callArgs:     leaf("messages", "list", "element", "calls", "list", "element", "arguments"),
	resName:      leaf("messages", "list", "element", "results", "list", "element", "name"),
	resContent:   leaf("messages", "list", "element", "results", "list", "element", "content"),
	tagKey:       leaf("tags", "list", "element", "key"), tagValue: leaf("tags", "list", "element", "value"),
	stepStage: leaf("lineage", "list", "element", "stage"), stepProvider: leaf("lineage", "list", "element", "provider"),
	stepModel: leaf("lineage", "list", "element", "model"),
}

func leaf(path ...string) int {
	l, ok := schema.Lookup(path...)
	if !ok {
		panic(fmt.Sprintf("shard schema has no column %v", path)) // the record type changed; caught by every test
	}
	return l.ColumnIndex
}

// column holds one leaf column of a row group: its levels (nil for the
// required top-level columns), and its non-null values, byte arrays as
// data[offs[i]:offs[i+1]].
//
// The values handed out share one copy of the column's bytes per row group
// (strs or raws, made on first use): one allocation per column instead of
// one per value, which was most of Read's allocations. The records of a row
// group are read, used and dropped together, so the shared copy lives about
// as long as separate ones would.
type column struct {
	rep, def []byte
	data     []byte
	offs     []uint32
	ints     []int64

	strs   string // data as one string, for str
	raws   []byte // a copy of data, for raw
	copied bool   // strs or raws is made
}

func (c *column) reset() {
	c.rep, c.def, c.data, c.ints = c.rep[:0], c.def[:0], c.data[:0], c.ints[:0]
	c.offs = append(c.offs[:0], 0)
	c.strs, c.raws, c.copied = "", nil, false
}

func (c *column) len() int { return len(c.offs) - 1 }

// str returns value i as a string.
func (c *column) str(i int) string {
	if !c.copied {
		c.strs, c.copied = string(c.data), true
	}
	return c.strs[c.offs[i]:c.offs[i+1]]
}

// raw returns value i as its own slice (its capacity ends with it, so an
// append never reaches the next value), nil when empty.
func (c *column) raw(i int) json.RawMessage {
	a, b := c.offs[i], c.offs[i+1]
	if a == b {
		return nil
	}
	if !c.copied {
		c.raws, c.copied = bytes.Clone(c.data), true
	}
	return c.raws[a:b:b]
}

func readColumn(cc parquet.ColumnChunk, c *column) error {
	c.reset()
	pages := cc.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if p.Dictionary() != nil {
			parquet.Release(p)
			return errors.New("dictionary-encoded page: shards are written without dictionaries")
		}
		c.rep = append(c.rep, p.RepetitionLevels()...)
		c.def = append(c.def, p.DefinitionLevels()...)
		d := p.Data()
		switch d.Kind() {
		case encoding.ByteArray:
			data, offs := d.ByteArray()
			if len(offs) == 0 {
				break
			}
			if uint64(len(c.data))+uint64(len(data)) > 1<<32-1 {
				parquet.Release(p)
				return errors.New("column chunk larger than 4 GiB")
			}
			first, last := offs[0], offs[len(offs)-1]
			if first > last || int(last) > len(data) {
				parquet.Release(p)
				return errors.New("byte array offsets out of range")
			}
			base := uint32(len(c.data)) - first
			c.data = append(c.data, data[first:last]...)
			at := len(c.offs)
			c.offs = slices.Grow(c.offs, len(offs)-1)[:at+len(offs)-1]
			to := c.offs[at:]
			prev := first
			for k, o := range offs[1:] {
				if o < prev {
					parquet.Release(p)
					return errors.New("byte array offsets decrease")
				}
				to[k] = base + o
				prev = o
			}
		case encoding.Int64:
			c.ints = append(c.ints, d.Int64()...)
		default:
			parquet.Release(p)
			return fmt.Errorf("unexpected physical type %v", d.Kind())
		}
		parquet.Release(p)
	}
}

// decoder assembles the records of one row group; its buffers are reused
// across row groups and, through decoders, across scans.
type decoder struct {
	cols []column
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

func (d *decoder) decode(rg parquet.RowGroup) ([]record.Record, error) {
	n := rg.NumRows()
	chunks := rg.ColumnChunks()
	if len(chunks) != len(schema.Columns()) {
		return nil, fmt.Errorf("row group has %d columns, want %d", len(chunks), len(schema.Columns()))
	}
	if cap(d.cols) < len(chunks) {
		d.cols = make([]column, len(chunks))
	}
	d.cols = d.cols[:len(chunks)]
	for i, cc := range chunks {
		if err := readColumn(cc, &d.cols[i]); err != nil {
			return nil, fmt.Errorf("column %v: %w", schema.Columns()[i], err)
		}
	}
	// The records own the columns' copies from here on; the pooled decoder
	// must not keep them alive.
	defer func() {
		for i := range d.cols {
			c := &d.cols[i]
			c.strs, c.raws, c.copied = "", nil, false
		}
	}()
	recs := make([]record.Record, n)
	if err := d.scalars(recs); err != nil {
		return nil, err
	}
	if err := d.tools(recs); err != nil {
		return nil, err
	}
	if err := d.messages(recs); err != nil {
		return nil, err
	}
	if err := d.tags(recs); err != nil {
		return nil, err
	}
	if err := d.lineage(recs); err != nil {
		return nil, err
	}
	return recs, nil
}

func (d *decoder) scalars(recs []record.Record) error {
	for _, i := range []int{col.id, col.source, col.format, col.system} {
		if c := &d.cols[i]; c.len() != len(recs) || len(c.rep) != 0 || len(c.def) != 0 {
			return fmt.Errorf("column %v: %d values for %d rows", schema.Columns()[i], c.len(), len(recs))
		}
	}
	if c := &d.cols[col.row]; len(c.ints) != len(recs) {
		return fmt.Errorf("column row: %d values for %d rows", len(c.ints), len(recs))
	}
	id, source, format, system, row := &d.cols[col.id], &d.cols[col.source], &d.cols[col.format], &d.cols[col.system], &d.cols[col.row]
	for i := range recs {
		r := &recs[i]
		r.ID, r.Source, r.Format, r.System, r.Row = id.str(i), source.str(i), format.str(i), system.str(i), row.ints[i]
	}
	return nil
}

// listShape reads the levels of a leaf right inside a list element (max
// repetition level 1) and returns the number of elements of each row.
// maxDef is the leaf's maximum definition level (1, or 2 when the leaf is
// optional).
func listShape(c *column, rows int, maxDef byte) (counts []int32, total int, err error) {
	if len(c.rep) != len(c.def) {
		return nil, 0, errors.New("repetition and definition levels differ in length")
	}
	counts = make([]int32, rows)
	r := -1
	for i, rep := range c.rep {
		def := c.def[i]
		switch {
		case rep == 0:
			r++
			if r >= rows {
				return nil, 0, fmt.Errorf("more than %d rows", rows)
			}
		case rep != 1 || r < 0 || def == 0:
			return nil, 0, fmt.Errorf("level %d/%d at %d", rep, def, i)
		}
		if def > maxDef {
			return nil, 0, fmt.Errorf("definition level %d at %d", def, i)
		}
		if def > 0 {
			counts[r]++
			total++
		}
	}
	if r != rows-1 {
		return nil, 0, fmt.Errorf("%d rows, want %d", r+1, rows)
	}
	return counts, total, nil
}

// sameShape checks that c has the levels of the shape column s: the same
// repetition levels and the same elements present. Leaves of one struct
// always do; a difference means a damaged file.
func sameShape(c, s *column) bool {
	if !bytes.Equal(c.rep, s.rep) || len(c.def) != len(s.def) {
		return false
	}
	for i, d := range c.def {
		if (d > 0) != (s.def[i] > 0) {
			return false
		}
	}
	return true
}

// required checks that the required leaf c of a list element has the
// shape of s and one value per element. s's definition levels are at most
// 1 (listShape checked them), so a leaf with the same levels is right; the
// level-by-level check below only names what is wrong.
func (d *decoder) required(c, s *column, total int, idx int) error {
	if c.len() == total && bytes.Equal(c.rep, s.rep) && bytes.Equal(c.def, s.def) {
		return nil
	}
	if !sameShape(c, s) || c.len() != total {
		return fmt.Errorf("column %v does not match its list (%d values, %d elements)", schema.Columns()[idx], c.len(), total)
	}
	for _, def := range c.def {
		if def > 1 {
			return fmt.Errorf("column %v: definition level %d", schema.Columns()[idx], def)
		}
	}
	return nil
}

// split cuts flat into per-row slices (capacity-limited, so appending to
// one never overwrites the next); rows without elements get nil.
func split[E any](flat []E, counts []int32, set func(i int, s []E)) {
	off := 0
	for i, n := range counts {
		if n > 0 {
			set(i, flat[off:off+int(n):off+int(n)])
			off += int(n)
		}
	}
}

func (d *decoder) tools(recs []record.Record) error {
	name := &d.cols[col.toolName]
	counts, total, err := listShape(name, len(recs), 1)
	if err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	desc, params, resp := &d.cols[col.toolDesc], &d.cols[col.toolParams], &d.cols[col.toolResp]
	for _, i := range []int{col.toolName, col.toolDesc, col.toolParams} {
		if err := d.required(&d.cols[i], name, total, i); err != nil {
			return err
		}
	}
	if !sameShape(resp, name) {
		return errors.New("column tools.response does not match its list")
	}
	flat := make([]record.Tool, total)
	k, v := 0, 0
	for _, def := range resp.def {
		switch def {
		case 0:
			continue
		case 1: // no response schema
		case 2:
			if v >= resp.len() {
				return errors.New("column tools.response: too few values")
			}
			flat[k].Response = resp.raw(v)
			v++
		default:
			return fmt.Errorf("column tools.response: definition level %d", def)
		}
		k++
	}
	if v != resp.len() {
		return errors.New("column tools.response: too many values")
	}
	for i := range flat {
		t := &flat[i]
		t.Name, t.Description, t.Parameters = name.str(i), desc.str(i), params.raw(i)
	}
	split(flat, counts, func(i int, s []record.Tool) { recs[i].Tools = s })
	return nil
}

func (d *decoder) tags(recs []record.Record) error {
	key, value := &d.cols[col.tagKey], &d.cols[col.tagValue]
	counts, total, err := listShape(key, len(recs), 1)
	if err != nil {
		return fmt.Errorf("tags: %w", err)
	}
	for _, i := range []int{col.tagKey, col.tagValue} {
		if err := d.required(&d.cols[i], key, total, i); err != nil {
			return err
		}
	}
	flat := make([]record.Tag, total)
	for i := range flat {
		flat[i] = record.Tag{Key: key.str(i), Value: value.str(i)}
	}
	split(flat, counts, func(i int, s []record.Tag) { recs[i].Tags = s })
	return nil
}

func (d *decoder) lineage(recs []record.Record) error {
	stage, prov, model := &d.cols[col.stepStage], &d.cols[col.stepProvider], &d.cols[col.stepModel]
	counts, total, err := listShape(stage, len(recs), 1)
	if err != nil {
		return fmt.Errorf("lineage: %w", err)
	}
	for _, i := range []int{col.stepStage, col.stepProvider, col.stepModel} {
		if err := d.required(&d.cols[i], stage, total, i); err != nil {
			return err
		}
	}
	flat := make([]record.Step, total)
	for i := range flat {
		flat[i] = record.Step{Stage: stage.str(i), Provider: prov.str(i), Model: model.str(i)}
	}
	split(flat, counts, func(i int, s []record.Step) { recs[i].Lineage = s })
	return nil
}

func (d *decoder) messages(recs []record.Record) error {
	role, content, reasoning := &d.cols[col.msgRole], &d.cols[col.msgContent], &d.cols[col.msgReasoning]
	counts, total, err := listShape(role, len(recs), 1)
	if err != nil {
		return fmt.Errorf("messages: %w", err)
	}
	for _, i := range []int{col.msgRole, col.msgContent, col.msgReasoning} {
		if err := d.required(&d.cols[i], role, total, i); err != nil {
			return err
		}
	}
	flat := make([]record.Message, total)
	for i := range flat {
		m := &flat[i]
		m.Role, m.Content, m.Reasoning = role.str(i), content.str(i), reasoning.str(i)
	}

	callName, callArgs := &d.cols[col.callName], &d.cols[col.callArgs]
	callCounts, calls, err := nestedShape(callName, role, len(recs), total)
	if err != nil {
		return fmt.Errorf("calls: %w", err)
	}
	if !bytes.Equal(callArgs.rep, callName.rep) || !bytes.Equal(callArgs.def, callName.def) ||
		callName.len() != calls || callArgs.len() != calls {
		return errors.New("columns of calls do not match")
	}
	flatCalls := make([]record.Call, calls)
	for i := range flatCalls {
		flatCalls[i] = record.Call{Name: callName.str(i), Arguments: callArgs.raw(i)}
	}
	split(flatCalls, callCounts, func(i int, s []record.Call) { flat[i].Calls = s })

	resName, resContent := &d.cols[col.resName], &d.cols[col.resContent]
	resCounts, results, err := nestedShape(resName, role, len(recs), total)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if !bytes.Equal(resContent.rep, resName.rep) || !bytes.Equal(resContent.def, resName.def) ||
		resName.len() != results || resContent.len() != results {
		return errors.New("columns of results do not match")
	}
	flatRes := make([]record.Result, results)
	for i := range flatRes {
		flatRes[i] = record.Result{Name: resName.str(i), Content: resContent.str(i)}
	}
	split(flatRes, resCounts, func(i int, s []record.Result) { flat[i].Results = s })

	split(flat, counts, func(i int, s []record.Message) { recs[i].Messages = s })
	return nil
}

// nestedShape reads the levels of a leaf of a list inside the messages
// list (max repetition level 2, max definition level 2) and returns the
// number of elements of each message. msgs is the shape column of the
// messages; rows and total are its row and element counts.
func nestedShape(c, msgs *column, rows, total int) (counts []int32, n int, err error) {
	if len(c.rep) != len(c.def) {
		return nil, 0, errors.New("repetition and definition levels differ in length")
	}
	counts = make([]int32, total)
	r, m := -1, -1
	// j walks the message shape: each level of c but a call's or
	// result's second and later (rep 2) must be the level there, present
	// where the message is.
	j := 0
	for i, rep := range c.rep {
		def := c.def[i]
		if rep != 2 {
			if j >= len(msgs.rep) || rep != msgs.rep[j] || (def > 0) != (msgs.def[j] > 0) {
				return nil, 0, errors.New("messages do not match their list")
			}
			j++
		}
		switch {
		case def > 2 || rep > 2:
			return nil, 0, fmt.Errorf("level %d/%d at %d", rep, def, i)
		case rep == 0:
			r++
			if r >= rows {
				return nil, 0, fmt.Errorf("more than %d rows", rows)
			}
			if def > 0 {
				m++
			}
		case r < 0:
			return nil, 0, fmt.Errorf("level %d/%d at %d before the first row", rep, def, i)
		case rep == 1:
			if def == 0 {
				return nil, 0, fmt.Errorf("level %d/%d at %d", rep, def, i)
			}
			m++
		case rep == 2:
			if def != 2 || m < 0 {
				return nil, 0, fmt.Errorf("level %d/%d at %d", rep, def, i)
			}
		}
		if m >= total {
			return nil, 0, fmt.Errorf("more than %d messages", total)
		}
		if def == 2 {
			counts[m]++
			n++
		}
	}
	if r != rows-1 || m != total-1 {
		return nil, 0, fmt.Errorf("%d rows and %d messages, want %d and %d", r+1, m+1, rows, total)
	}
	if j != len(msgs.rep) {
		return nil, 0, errors.New("messages do not match their list")
	}
	return counts, n, nil
}
