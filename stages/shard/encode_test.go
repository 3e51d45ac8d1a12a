package shard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/augmentdata/augment/stages/record"
)

// writeParquetGeneric is the writer the column encoder replaced, kept as
// the oracle of TestEncodeSameBytes and FuzzEncode: parquet-go's
// GenericWriter[record.Record] with writerOptions, fed batches of 256
// records, row groups cut at RowGroupRows records or MaxRowGroupBytes of
// text, empty non-nil responses written as NULL.
func writeParquetGeneric(w io.Writer, recs []*record.Record, o Options) error {
	codec, err := o.codec()
	if err != nil {
		return err
	}
	maxRows, version := o.rowGroupRows(), o.version()
	opts := append(slices.Clip(writerOptions),
		parquet.Compression(codec),
		createdBy("augment version "+version),
		parquet.KeyValueMetadata("augment.version", version),
	)
	const writeBatch = 256
	pw := parquet.NewGenericWriter[record.Record](w, opts...)
	batch := make([]record.Record, 0, min(len(recs), writeBatch))
	var rows, size int // in the current row group
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
		for i, t := range r.Tools {
			if t.Response != nil && len(t.Response) == 0 {
				tools := slices.Clone(r.Tools)
				for j := i; j < len(tools); j++ {
					if len(tools[j].Response) == 0 {
						tools[j].Response = nil
					}
				}
				batch[len(batch)-1].Tools = tools
				break
			}
		}
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

// writerOptions are the GenericWriter options of the shard layout (see
// encode.go) besides the codec and the metadata: 1 MiB pages, data pages
// v1, no page statistics, page bounds only where pageBounds says.
var writerOptions = func() []parquet.WriterOption {
	opts := []parquet.WriterOption{
		schema,
		parquet.DataPageVersion(1),
		parquet.PageBufferSize(pageBufferSize),
		parquet.DataPageStatistics(false),
	}
	for _, path := range schema.Columns() {
		if !pageBounds(path) {
			opts = append(opts, parquet.SkipPageBounds(path...))
		}
	}
	return opts
}()

// createdBy sets the created_by field verbatim; parquet.CreatedBy formats
// it without the space before "(build …)".
type createdBy string

func (c createdBy) ConfigureWriter(cfg *parquet.WriterConfig) { cfg.CreatedBy = string(c) }

// parquetGoResponseRuns marks the responses of one batch of tools that
// parquet-go v0.32.0's GenericWriter writes as values: its optional-value
// writer (writeRowsFuncOfOptional) walks a bitmap of the present values
// run by run, and a run of values starting at bit y of a 64-bit word is
// taken to fill the rest of the word when the bits from y on are exactly
// y ones, so that NULLs after such a run are written as empty values.
// GenericWriter hands it the elements of a list after the first as one
// batch (tools[1:]).
func parquetGoResponseRuns(present []bool) {
	n := len(present)
	words := make([]uint64, (n+63)/64)
	for i, p := range present {
		if p {
			words[i/64] |= 1 << (i % 64)
		}
	}
	for i := 0; i < n; {
		x, y := i/64, i%64
		// A run of NULLs from i.
		if y != 0 && words[x]>>y == 0 {
			x, y = x+1, 0
		} else if y != 0 {
			y += bits.TrailingZeros64(words[x] >> y)
			goto nulls
		}
		for x < len(words) && words[x] == 0 {
			x++
		}
		if x < len(words) {
			y = bits.TrailingZeros64(words[x])
		}
	nulls:
		if j := min(x*64+y, n); i < j {
			i = j
		}
		// A run of values from i: the misjudged shape first.
		if y != 0 && words[x]>>y == 1<<y-1 {
			x, y = x+1, 0
		} else if y != 0 {
			y += bits.TrailingZeros64(^(words[x] >> y))
			goto values
		}
		for x < len(words) && words[x] == ^uint64(0) {
			x++
		}
		if x < len(words) {
			y = bits.TrailingZeros64(^words[x])
		}
	values:
		if j := min(x*64+y, n); i < j {
			for k := i; k < j; k++ {
				present[k] = true
			}
			i = j
		}
	}
}

// encodeBoth writes recs with the column encoder (replaying the oracle's
// NULL runs, see parquetGoResponseRuns) and with the oracle and fails
// unless the bytes are the same; it returns them.
func encodeBoth(t *testing.T, recs []*record.Record, o Options) []byte {
	t.Helper()
	var got, want bytes.Buffer
	if err := encodeParquet(&got, recs, o, parquetGoResponseRuns); err != nil {
		t.Fatal(err)
	}
	if err := writeParquetGeneric(&want, recs, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		g, w := got.Bytes(), want.Bytes()
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		t.Fatalf("%d records, %+v: %d bytes, the generic writer's %d; first difference at byte %d:\n got %q\nwant %q\n%s",
			len(recs), o, len(g), len(w), i, g[i:min(len(g), i+48)], w[i:min(len(w), i+48)], footerDiff(g, w))
	}
	return got.Bytes()
}

// footerDiff describes the first difference of the footers of two
// Parquet files, as indented JSON lines.
func footerDiff(got, want []byte) string {
	dump := func(data []byte) []string {
		if len(data) < 12 {
			return []string{"too short"}
		}
		n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
		var md format.FileMetaData
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(data)-8-n:len(data)-8], &md); err != nil {
			return []string{err.Error()}
		}
		b, _ := json.MarshalIndent(&md, "", " ")
		return strings.Split(string(b), "\n")
	}
	g, w := dump(got), dump(want)
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("footer line %d: got %s, want %s\n%s", i, g[i], w[i], strings.Join(w[max(0, i-12):i+1], "\n"))
		}
	}
	if len(g) != len(w) {
		return fmt.Sprintf("footer: %d lines, want %d", len(g), len(w))
	}
	return "same footer"
}

// wildRecords returns n records of random shape: every list nil, empty or
// of 1 to 4 elements, JSON values nil, empty or present, text empty, ASCII
// or not, now and then long (so 1 MiB pages fill inside a row group).
func wildRecords(n int, seed uint64) []*record.Record {
	rng := rand.New(rand.NewPCG(seed, 3))
	pieces := []string{"a", "xé", "長い", "🧪", "<&>", "\"q\"", " ", "\\", "\x00"}
	str := func() string {
		switch rng.IntN(8) {
		case 0:
			return ""
		case 1:
			return strings.Repeat(pieces[rng.IntN(len(pieces))], 1+rng.IntN(20000))
		}
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	raw := func() json.RawMessage {
		switch rng.IntN(5) {
		case 0:
			return nil
		case 1:
			return json.RawMessage{}
		}
		return json.RawMessage(fmt.Sprintf(`{"k":%q}`, str()))
	}
	count := func() int {
		switch k := rng.IntN(6); k {
		case 0:
			return -1 // nil
		default:
			return k - 1
		}
	}
	out := make([]*record.Record, n)
	for i := range out {
		r := &record.Record{ID: str(), Source: str(), Format: str(), Row: int64(rng.Uint64()), System: str()}
		if k := count(); k >= 0 {
			r.Tools = make([]record.Tool, k)
			for j := range r.Tools {
				r.Tools[j] = record.Tool{Name: str(), Description: str(), Parameters: raw(), Response: raw()}
			}
		}
		if k := count(); k >= 0 {
			r.Messages = make([]record.Message, k)
			for j := range r.Messages {
				m := record.Message{Role: str(), Content: str(), Reasoning: str()}
				if k := count(); k >= 0 {
					m.Calls = make([]record.Call, k)
					for c := range m.Calls {
						m.Calls[c] = record.Call{Name: str(), Arguments: raw()}
					}
				}
				if k := count(); k >= 0 {
					m.Results = make([]record.Result, k)
					for c := range m.Results {
						m.Results[c] = record.Result{Name: str(), Content: str()}
					}
				}
				r.Messages[j] = m
			}
		}
		if k := count(); k >= 0 {
			r.Tags = make([]record.Tag, k)
			for j := range r.Tags {
				r.Tags[j] = record.Tag{Key: str(), Value: str()}
			}
		}
		if k := count(); k >= 0 {
			r.Lineage = make([]record.Step, k)
			for j := range r.Lineage {
				r.Lineage[j] = record.Step{Stage: str(), Provider: str(), Model: str()}
			}
		}
		out[i] = r
	}
	return out
}

// TestEncodeSameBytes checks that writeParquet writes the bytes
// parquet-go's GenericWriter wrote: every codec, row groups cut by count
// (below, at and across the 256-record batches) and by MaxRowGroupBytes,
// pages cut inside row groups, zero records.
func TestEncodeSameBytes(t *testing.T) {
	sets := map[string]func(t *testing.T) []*record.Record{
		"fixtures":     func(*testing.T) []*record.Record { return fixtureRecords() },
		"edges":        func(*testing.T) []*record.Record { return edgeRecords() },
		"shapes":       func(*testing.T) []*record.Record { return randomShapes(3000, 11) },
		"wild":         func(*testing.T) []*record.Record { return wildRecords(700, 13) },
		"synthetic":    func(*testing.T) []*record.Record { return syntheticRecords(3000, 12) },
		"empty":        func(*testing.T) []*record.Record { return nil },
		"llamafactory": func(t *testing.T) []*record.Record { return llamaFactoryRecords(t) }, // skips without the shared data
		// Records a shard's reader made: each column's values lie end to
		// end in memory (encColumn.value joins them in runs).
		"read back": func(t *testing.T) []*record.Record {
			var b bytes.Buffer
			if err := writeParquet(&b, wildRecords(700, 14), Options{RowGroupRows: 300}); err != nil {
				t.Fatal(err)
			}
			return readBytes(t, b.Bytes())
		},
	}
	for _, name := range []string{"fixtures", "edges", "shapes", "wild", "synthetic", "empty", "llamafactory", "read back"} {
		t.Run(name, func(t *testing.T) {
			recs := sets[name](t)
			for _, rows := range []int{0, 1, 7, 255, 256, 257, 1000} {
				for _, c := range Compressions {
					if rows != 0 && c != DefaultCompression && name != "wild" && name != "edges" {
						continue
					}
					t.Run(fmt.Sprintf("rows=%d/%s", rows, c), func(t *testing.T) {
						encodeBoth(t, recs, Options{RowGroupRows: rows, Compression: c, Version: "test"})
					})
				}
			}
		})
	}
	t.Run("many", func(t *testing.T) {
		// Row groups of many small records: several pages for every
		// column, id's bounds ascending and row's descending from page to
		// page, source's unordered, format's equal.
		recs := make([]*record.Record, 150_000)
		for i := range recs {
			recs[i] = &record.Record{ID: fmt.Sprintf("many:%07d", i), Source: fmt.Sprintf("%016d", i*7919%150_000*(i/40_000%2)),
				Format: "glaive", Row: int64(-i), Tags: []record.Tag{{Key: "k", Value: "v"}}}
		}
		for _, rows := range []int{200_000, 140_000} {
			encodeBoth(t, recs, Options{RowGroupRows: rows})
		}
	})
	t.Run("big", func(t *testing.T) {
		// Pages filled by one value, and row groups cut by MaxRowGroupBytes.
		big := syntheticRecords(40, 3)
		for i, r := range big {
			r.Messages = append(r.Messages, record.Message{Role: record.RoleUser, Content: strings.Repeat(string(rune('a'+i%26)), 3<<20)})
			r.Tools[0].Description = strings.Repeat("é", i<<14)
		}
		for _, c := range Compressions {
			encodeBoth(t, big, Options{Compression: c})
		}
	})
}

// responseRunRecords have tools whose responses are present and absent
// (nil or empty) in the runs parquet-go's GenericWriter mishandled (see
// parquetGoResponseRuns): it wrote the last tool's NULL response of the
// first record as an empty value, which Arrow read as "" and DuckDB
// refused as JSON.
func responseRunRecords() []*record.Record {
	js := func(s string) json.RawMessage { return json.RawMessage(`{"type":"` + s + `"}`) }
	tools := func(resp ...json.RawMessage) []record.Tool {
		out := make([]record.Tool, len(resp))
		for i, r := range resp {
			out[i] = record.Tool{Name: fmt.Sprint("t", i), Parameters: js("object"), Response: r}
		}
		return out
	}
	empty := json.RawMessage{}
	return []*record.Record{
		{ID: "r0", Tools: tools(js("a"), nil, js("b"), nil)},
		{ID: "r1", Tools: tools(nil, nil, nil, js("c"), js("d"), nil, nil)},
		{ID: "r2", Tools: tools(js("e"), empty, js("f"), empty, nil)},
		{ID: "r3", Tools: tools(nil, js("g"), nil, nil, js("h"), js("i"), nil)},
	}
}

// TestResponseNullRuns writes tools whose absent responses GenericWriter
// wrote as empty values: every reader must see them NULL (writeShard
// reads the shard with Arrow, Read with parquet-go), and the bytes differ
// from the oracle's only there.
func TestResponseNullRuns(t *testing.T) {
	recs := responseRunRecords()
	got, err := Read(writeShard(t, recs, Options{Checked: true}))
	if err != nil {
		t.Fatal(err)
	}
	assertRecordsEqual(t, got, normalized(recs))
	var plain, replayed bytes.Buffer
	if err := writeParquet(&plain, recs, Options{}); err != nil {
		t.Fatal(err)
	}
	replayed.Write(encodeBoth(t, recs, Options{}))
	if bytes.Equal(plain.Bytes(), replayed.Bytes()) {
		t.Error("no record of the set has the response runs GenericWriter mishandled")
	}
}

// TestEncodeConcurrent writes shards from several goroutines at once, as
// the runner does: pooled encoders must not share state (run with -race).
func TestEncodeConcurrent(t *testing.T) {
	sets := [][]*record.Record{fixtureRecords(), randomShapes(500, 3), wildRecords(100, 4), syntheticRecords(500, 5)}
	want := make([][]byte, len(sets))
	for i, recs := range sets {
		var b bytes.Buffer
		if err := writeParquet(&b, recs, Options{RowGroupRows: 100}); err != nil {
			t.Fatal(err)
		}
		want[i] = b.Bytes()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(sets))
	for range 4 {
		for i, recs := range sets {
			wg.Go(func() {
				var b bytes.Buffer
				if err := writeParquet(&b, recs, Options{RowGroupRows: 100}); err != nil {
					errs <- err
				} else if !bytes.Equal(b.Bytes(), want[i]) {
					errs <- fmt.Errorf("set %d: other bytes when written concurrently", i)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzEncode writes records built from the input in row groups of 1 to 69
// records (or the default): the bytes must be the generic writer's, and
// reading them back must give the records.
func FuzzEncode(f *testing.F) {
	f.Add(byte(0), byte(0), []byte{})
	f.Add(byte(3), byte(1), []byte("\x03abc\x02xy\x01z\x05\x00\x03\x03\x02\x01\x01\x02\x00\x01"))
	f.Add(byte(1), byte(2), bytes.Repeat([]byte{3, 'a', 'b', 'c', 2, 1, 7}, 40))
	f.Fuzz(func(t *testing.T, rows, codec byte, in []byte) {
		recs := fuzzRecords(in)
		data := encodeBoth(t, recs, Options{RowGroupRows: int(rows % 70), Compression: Compressions[int(codec)%len(Compressions)]})
		assertRecordsEqual(t, readBytes(t, data), normalized(recs))
	})
}

// textSize approximates the bytes r takes in a row group, as the oracle
// counts them (the encoder sums its columns instead: encoder.text).
func textSize(r *record.Record) int {
	n := len(r.ID) + len(r.Source) + len(r.Format) + len(r.System) + 8
	for _, t := range r.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + len(t.Response)
	}
	for _, m := range r.Messages {
		n += len(m.Role) + len(m.Content) + len(m.Reasoning)
		for _, c := range m.Calls {
			n += len(c.Name) + len(c.Arguments)
		}
		for _, res := range m.Results {
			n += len(res.Name) + len(res.Content)
		}
	}
	for _, t := range r.Tags {
		n += len(t.Key) + len(t.Value)
	}
	for _, s := range r.Lineage {
		n += len(s.Stage) + len(s.Provider) + len(s.Model)
	}
	return n
}

// TestColumnRuns holds encColumn.value and appendRuns to plain
// concatenation: strings end to end in one string, in separate
// allocations that happen to be adjacent (a run across two allocations:
// run with -race, whose pointer checks appendRuns opts out of), empty ones
// and unrelated ones.
func TestColumnRuns(t *testing.T) {
	block := "alphabetagammadelta"
	sets := [][]string{
		nil,
		{""},
		{"", "", block[3:5]},
		{block[0:5], block[5:9], block[9:14], block[14:]},
		{block[0:5], "", block[5:9], block[9:9], block[9:14], "x", block[14:], block[0:5]},
		{"tool", block[5:9], "name", block[9:14]},
		{block[5:9], block[0:5], block[5:9], block[9:9]},
	}
	// Separately allocated 16-byte strings: the allocator puts many of
	// them side by side.
	var adjacent []string
	for i := range 256 {
		adjacent = append(adjacent, strings.Clone(fmt.Sprintf("%016d", i)))
	}
	sets = append(sets, adjacent)
	var c encColumn
	for i, strs := range sets {
		c.resetPage(0)
		for _, s := range strs {
			c.value(s)
		}
		got := appendRuns([]byte("head"), c.runs, c.size)
		if want := "head" + strings.Join(strs, ""); string(got) != want || c.size != len(want)-4 {
			t.Errorf("set %d: got %q (size %d), want %q", i, got, c.size, want)
		}
		if len(c.lens) != len(strs) {
			t.Fatalf("set %d: %d lengths for %d values", i, len(c.lens), len(strs))
		}
		for k, s := range strs {
			if int(c.lens[k]) != len(s) {
				t.Errorf("set %d: length %d is %d, want %d", i, k, c.lens[k], len(s))
			}
		}
	}
	if len(c.runs) >= len(adjacent) {
		t.Logf("no two of %d strings were adjacent", len(adjacent))
	}
}

// TestPageHeader holds appendPageHeader to parquet-go's Thrift encoder of
// format.PageHeader, for sizes, CRCs (0 is left out) and counts at the
// edges of the varints' lengths.
func TestPageHeader(t *testing.T) {
	var buf bytes.Buffer
	enc := thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&buf))
	ints := []int32{0, 1, 63, 64, 8191, 8192, 1<<20 - 1, 1 << 20, 1<<27 - 1, 1 << 27, math.MaxInt32}
	crcs := append([]int32{-1, -64, -65, math.MinInt32}, ints...)
	for _, size := range ints {
		for _, crc := range crcs {
			for _, e := range []format.Encoding{format.Plain, format.DeltaLengthByteArray} {
				n := size/3 + 1
				h := format.PageHeader{
					Type: format.DataPage, UncompressedPageSize: size, CompressedPageSize: size / 2, CRC: crc,
					DataPageHeader: thrift.New(format.DataPageHeader{NumValues: n, Encoding: e,
						DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE}),
				}
				buf.Reset()
				if err := enc.Encode(&h); err != nil {
					t.Fatal(err)
				}
				got := appendPageHeader(nil, size, size/2, crc, n, e)
				if !bytes.Equal(got, buf.Bytes()) {
					t.Fatalf("size %d, crc %d, %v: % x, want % x", size, crc, e, got, buf.Bytes())
				}
			}
		}
	}
}
