package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/format"
)

// parquet-go v0.32.0 trusts the sizes a file declares and allocates before
// reading: a Thrift list in the footer at its declared length, a page
// buffer at the size in its page header, level buffers at the page's value
// count. One flipped byte can then ask for gigabytes (or hundreds of them)
// and kill the process. The guards below walk the Thrift compact encoding
// of the footer and of every page header without decoding it and refuse
// what the file cannot hold, so a damaged shard is an error, not a crash.
//
// Page bodies are covered by the CRC-32 parquet-go writes in every page
// header and checks before decompressing; shards use data page v1, whose
// levels sit inside the checksummed, compressed body (v2 keeps them outside
// the compression, where a shifted level length in the header would make
// the level decoder read garbage as run lengths).

// checkFooter fails when a list, map or binary in the footer claims more
// bytes than are left. A nil error says nothing else about the footer's
// validity; parquet-go still checks it.
func checkFooter(f io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes is too short for a Parquet file", size)
	}
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("reading footer length: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return fmt.Errorf("invalid magic footer %q", tail[4:])
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return fmt.Errorf("footer length %d exceeds the file", n)
	}
	footer := make([]byte, n)
	if _, err := f.ReadAt(footer, size-8-n); err != nil {
		return fmt.Errorf("reading footer: %w", err)
	}
	c := compactWalker{b: footer}
	if err := c.structure(0, 0); err != nil {
		return fmt.Errorf("damaged footer at byte %d: %w", len(footer)-len(c.b), err)
	}
	return nil
}

// Field paths in a Thrift PageHeader (parent field << 16 | field).
const (
	phUncompressed = 2
	phCompressed   = 3
	phCRC          = 4
	phDataV1Values = 5<<16 | 1
	phDictValues   = 7<<16 | 1
	phDataV2Values = 8<<16 | 1
)

// checkPages walks the page headers of every column chunk of md and fails
// when a chunk lies outside the file, or a page has no checksum, claims
// more bytes than its chunk holds (compressed, or uncompressed: a chunk's
// totals include its page headers) or more values than its chunk.
func checkPages(f io.ReaderAt, size int64, md *format.FileMetaData) error {
	var buf []byte
	for g, rg := range md.RowGroups {
		for c, col := range rg.Columns {
			m := &col.MetaData
			start := m.DataPageOffset
			if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < start {
				start = m.DictionaryPageOffset
			}
			end := start + m.TotalCompressedSize
			if start < 4 || m.TotalCompressedSize < 0 || m.TotalUncompressedSize < 0 || end > size || end < start {
				return fmt.Errorf("row group %d column %d: chunk [%d, %d) outside the file", g, c, start, end)
			}
			for off := start; off < end; {
				var h pageHeader
				var err error
				if buf, h, err = readPageHeader(f, off, end, buf); err != nil {
					return fmt.Errorf("row group %d column %d: page header at %d: %w", g, c, off, err)
				}
				compressed, uncompressed := h.fields[phCompressed], h.fields[phUncompressed]
				values := max(h.fields[phDataV1Values], h.fields[phDataV2Values], h.fields[phDictValues])
				switch _, crc := h.fields[phCRC]; {
				case !crc:
					return fmt.Errorf("row group %d column %d: page at %d has no checksum", g, c, off)
				case compressed < 0 || off+h.n+compressed > end || uncompressed < 0 || uncompressed > m.TotalUncompressedSize:
					return fmt.Errorf("row group %d column %d: page at %d declares %d bytes (%d uncompressed), chunk holds %d (%d)",
						g, c, off, compressed, uncompressed, end-off-h.n, m.TotalUncompressedSize)
				case values < 0 || values > m.NumValues:
					return fmt.Errorf("row group %d column %d: page at %d declares %d values, chunk holds %d",
						g, c, off, values, m.NumValues)
				}
				off += h.n + compressed
			}
		}
	}
	return nil
}

// pageHeader holds the i32 fields of a page header by path, and the
// header's own length n.
type pageHeader struct {
	fields map[int32]int64
	n      int64
}

// readPageHeader reads the page header at off (ending before end), growing
// buf until the header fits.
func readPageHeader(f io.ReaderAt, off, end int64, buf []byte) ([]byte, pageHeader, error) {
	for want := int64(4096); ; want *= 4 {
		want = min(want, end-off)
		if int64(cap(buf)) < want {
			buf = make([]byte, want)
		}
		b := buf[:want]
		if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
			return buf, pageHeader{}, err
		}
		c := compactWalker{b: b, fields: map[int32]int64{}}
		err := c.structure(0, 0)
		if err == nil {
			return buf, pageHeader{fields: c.fields, n: want - int64(len(c.b))}, nil
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errShort) || want == end-off {
			return buf, pageHeader{}, err
		}
	}
}

// Thrift compact protocol type codes.
const (
	ctBoolTrue  = 1
	ctBoolFalse = 2
	ctByte      = 3
	ctI16       = 4
	ctI32       = 5
	ctI64       = 6
	ctDouble    = 7
	ctBinary    = 8
	ctList      = 9
	ctSet       = 10
	ctMap       = 11
	ctStruct    = 12
)

// maxDepth bounds nesting; the Parquet footer nests a handful of levels.
const maxDepth = 64

var errShort = errors.New("declared length exceeds the bytes left")

// compactWalker skips over Thrift compact-encoded values in b. When fields
// is not nil it records the i32 fields of the outermost struct and of the
// structs directly in it, keyed by path (parent field << 16 | field).
type compactWalker struct {
	b      []byte
	fields map[int32]int64
}

func (c *compactWalker) byte1() (byte, error) {
	if len(c.b) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	v := c.b[0]
	c.b = c.b[1:]
	return v, nil
}

func (c *compactWalker) varint() (uint64, error) {
	v, n := binary.Uvarint(c.b)
	if n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if n < 0 {
		return 0, errors.New("bad varint")
	}
	c.b = c.b[n:]
	return v, nil
}

// zigzag decodes a Thrift compact signed integer.
func zigzag(v uint64) int64 { return int64(v>>1) ^ -int64(v&1) }

func (c *compactWalker) skip(n uint64) error {
	if n > uint64(len(c.b)) {
		return errShort
	}
	c.b = c.b[n:]
	return nil
}

// structure walks a struct's fields up to its stop byte; path is the
// struct's own path (0 for the outermost).
func (c *compactWalker) structure(depth int, path int32) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	var id int16
	for {
		h, err := c.byte1()
		if err != nil {
			return err
		}
		if h == 0 { // stop
			return nil
		}
		if delta := h >> 4; delta != 0 {
			id += int16(delta)
		} else { // long form: the field id follows as a zigzag varint
			v, err := c.varint()
			if err != nil {
				return err
			}
			id = int16(zigzag(v))
		}
		fieldPath := path<<16 | int32(uint16(id))
		switch t := h & 0x0f; {
		case t == ctBoolTrue || t == ctBoolFalse: // the value is the type
		case t == ctI32 && depth <= 1 && c.fields != nil:
			v, err := c.varint()
			if err != nil {
				return err
			}
			c.fields[fieldPath] = zigzag(v)
		case t == ctStruct:
			if err := c.structure(depth+1, fieldPath); err != nil {
				return err
			}
		default:
			if err := c.value(t, depth); err != nil {
				return err
			}
		}
	}
}

func (c *compactWalker) value(t byte, depth int) error {
	switch t {
	case ctBoolTrue, ctBoolFalse, ctByte: // a bool inside a list is one byte
		return c.skip(1)
	case ctI16, ctI32, ctI64:
		_, err := c.varint()
		return err
	case ctDouble:
		return c.skip(8)
	case ctBinary:
		n, err := c.varint()
		if err != nil {
			return err
		}
		return c.skip(n)
	case ctList, ctSet:
		h, err := c.byte1()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = c.varint(); err != nil {
				return err
			}
		}
		if n > uint64(len(c.b)) { // every element takes at least one byte
			return errShort
		}
		for range n {
			if err := c.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case ctMap:
		n, err := c.varint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := c.byte1()
		if err != nil {
			return err
		}
		if n > uint64(len(c.b))/2 {
			return errShort
		}
		for range n {
			if err := c.value(kv>>4, depth+1); err != nil {
				return err
			}
			if err := c.value(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case ctStruct:
		return c.structure(depth+1, -1)
	default:
		return fmt.Errorf("unknown type code %d", t)
	}
}
