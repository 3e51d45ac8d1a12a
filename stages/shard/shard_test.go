package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/parquet-go/parquet-go"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
)

// writeShard writes recs to a new shard and checks it with Arrow.
func writeShard(t *testing.T, recs []*record.Record, o Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "part-00000.parquet")
	if _, err := writeAt(t, path, recs, o); err != nil {
		t.Fatalf("Write: %v", err)
	}
	arrowCheck(t, path, recs)
	return path
}

func assertRecordsEqual(t *testing.T, got, want []*record.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Fatalf("record %d differs:\n got %.600s\nwant %.600s", i, g, w)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []*record.Record
		o    Options
	}{
		{"fixtures", fixtureRecords(), Options{Version: "test"}},
		{"fixtures one row per group", fixtureRecords(), Options{Version: "test", RowGroupRows: 1}},
		{"synthetic several groups", syntheticRecords(1000, 1), Options{RowGroupRows: 300}},
		{"empty", nil, Options{}},
		{"zstd", syntheticRecords(500, 2), Options{Compression: CompressionZstd, RowGroupRows: 200}},
		{"uncompressed", syntheticRecords(500, 3), Options{Compression: CompressionNone, RowGroupRows: 200}},
		{"fixtures zstd", fixtureRecords(), Options{Compression: CompressionZstd}},
		{"fixtures uncompressed", fixtureRecords(), Options{Compression: CompressionNone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := normalized(tc.recs)
			path := writeShard(t, tc.recs, tc.o)
			got, err := Read(path)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			assertRecordsEqual(t, got, want)

			var scanned []*record.Record
			if err := Scan(path, func(r *record.Record) error { scanned = append(scanned, r); return nil }); err != nil {
				t.Fatalf("Scan: %v", err)
			}
			assertRecordsEqual(t, scanned, want)
		})
	}
}

// TestRoundTripNilAndEmpty pins the documented normalisation: nil and
// empty lists are the same on disk and come back as nil; an absent
// response schema comes back nil.
func TestRoundTripNilAndEmpty(t *testing.T) {
	got, err := Read(writeShard(t, fixtureRecords(), Options{}))
	if err != nil {
		t.Fatal(err)
	}
	e := got[2]
	if e.Tools != nil || e.Tags != nil || e.Lineage != nil {
		t.Errorf("empty lists came back non-nil: %#v %#v %#v", e.Tools, e.Tags, e.Lineage)
	}
	if e.Messages[0].Calls != nil || e.Messages[0].Results != nil {
		t.Errorf("empty calls/results came back non-nil")
	}
	if got[0].Tools[1].Response != nil {
		t.Errorf("absent response came back as %q", got[0].Tools[1].Response)
	}
	if string(got[0].Tools[0].Response) != `{"type":"object","properties":{"temp_c":{"type":"number"}}}` {
		t.Errorf("response = %s", got[0].Tools[0].Response)
	}
	if got[2].Row != 1<<62+3 {
		t.Errorf("row = %d", got[2].Row)
	}
}

// TestReadRecordsAreIndependent checks Read does not hand out records that
// share memory: changing one must not change another.
func TestReadRecordsAreIndependent(t *testing.T) {
	recs := syntheticRecords(300, 2)
	got, err := Read(writeShard(t, recs, Options{RowGroupRows: 100}))
	if err != nil {
		t.Fatal(err)
	}
	want := normalized(recs)
	for _, r := range got {
		r.Messages[0].Content = "changed"
		r.Tools[0].Parameters[0] = 'X'
		r.Tags[0].Value = "changed"
	}
	for i, r := range got {
		w := want[i].Clone()
		w.Messages[0].Content = "changed"
		w.Tools[0].Parameters[0] = 'X'
		w.Tags[0].Value = "changed"
		Normalize(w)
		if !reflect.DeepEqual(r, w) {
			t.Fatalf("record %d was changed through another record", i)
		}
	}
}

func TestSchema(t *testing.T) {
	path := writeShard(t, fixtureRecords(), Options{Version: "1.2.3", RowGroupRows: 2})
	pf := openShardFile(t, path)
	md := pf.Metadata()
	if md.CreatedBy != "augment version 1.2.3" {
		t.Errorf("created_by = %q", md.CreatedBy)
	}
	if v, _ := pf.Lookup("augment.version"); v != "1.2.3" {
		t.Errorf("augment.version = %q", v)
	}
	if len(md.RowGroups) != 2 || md.RowGroups[0].NumRows != 2 || md.RowGroups[1].NumRows != 1 {
		t.Errorf("row groups: %d", len(md.RowGroups))
	}
	for _, rg := range md.RowGroups {
		for _, c := range rg.Columns {
			if got := c.MetaData.Codec.String(); got != "SNAPPY" { // DefaultCompression
				t.Errorf("column %v codec %s", c.MetaData.PathInSchema, got)
			}
		}
	}
	// The leaf columns and their logical types, as parquet-go reads them back.
	var leaves []string
	for _, path := range pf.Schema().Columns() {
		leaf, _ := pf.Schema().Lookup(path...)
		desc := strings.Join(path, ".")
		if lt := leaf.Node.Type().LogicalType(); lt != nil {
			desc += " " + lt.String()
		}
		if leaf.Node.Optional() {
			desc += " optional"
		}
		leaves = append(leaves, desc)
	}
	want := []string{
		"id STRING", "source STRING", "format STRING", "row INT(64,true)", "system STRING",
		"tools.list.element.name STRING", "tools.list.element.description STRING",
		"tools.list.element.parameters JSON", "tools.list.element.response JSON optional",
		"messages.list.element.role STRING", "messages.list.element.content STRING", "messages.list.element.reasoning STRING",
		"messages.list.element.calls.list.element.name STRING", "messages.list.element.calls.list.element.arguments JSON",
		"messages.list.element.results.list.element.name STRING", "messages.list.element.results.list.element.content STRING",
		"tags.list.element.key STRING", "tags.list.element.value STRING",
		"lineage.list.element.stage STRING", "lineage.list.element.provider STRING", "lineage.list.element.model STRING",
	}
	if !slices.Equal(leaves, want) {
		t.Errorf("leaf columns:\n%s\nwant:\n%s", strings.Join(leaves, "\n"), strings.Join(want, "\n"))
	}
}

func TestDeterministic(t *testing.T) {
	recs := append(fixtureRecords(), syntheticRecords(500, 3)...)
	dir := t.TempDir()
	var refs [2][]manifests.FileRef
	for i, name := range []string{"a.parquet", "b.parquet"} {
		var err error
		if refs[i], err = writeAt(t, filepath.Join(dir, name), recs, Options{Version: "v", RowGroupRows: 128, JSONL: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pair := range [][2]string{{"a.parquet", "b.parquet"}, {"a.jsonl", "b.jsonl"}} {
		a, _ := os.ReadFile(filepath.Join(dir, pair[0]))
		b, _ := os.ReadFile(filepath.Join(dir, pair[1]))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s and %s differ (%d vs %d bytes)", pair[0], pair[1], len(a), len(b))
		}
	}
	if refs[0][0].SHA256 != refs[1][0].SHA256 || refs[0][1].SHA256 != refs[1][1].SHA256 {
		t.Errorf("hashes differ: %v %v", refs[0], refs[1])
	}
}

func TestWriteRefs(t *testing.T) {
	recs := fixtureRecords()
	dir := t.TempDir()
	root := rootOf(t, filepath.Join(dir, "x"))
	refs, err := Write(root.Sub("stage"), "s.parquet", recs, Options{JSONL: true})
	if err != nil {
		t.Fatal(err)
	}
	// Paths are relative to the top of the root, whatever Sub wrote them.
	if len(refs) != 2 || refs[0].Path != "stage/s.parquet" || refs[1].Path != "stage/s.jsonl" {
		t.Fatalf("refs = %+v", refs)
	}
	for _, r := range refs {
		sum, err := atomicfs.HashFile(filepath.Join(dir, r.Path))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(dir, r.Path))
		if r.SHA256 != sum || r.Bytes != st.Size() || r.Rows != int64(len(recs)) {
			t.Errorf("ref %+v; file sha %s size %d", r, sum, st.Size())
		}
	}
	refs, err = Write(root, "s.parquet", recs, Options{})
	if err != nil || len(refs) != 1 {
		t.Fatalf("without JSONL: %v %+v", err, refs)
	}
	if _, err := os.Stat(filepath.Join(dir, MirrorPath(refs[0].Path))); !os.IsNotExist(err) {
		t.Errorf("mirror written without Options.JSONL: %v", err)
	}
}

// TestMirror checks the JSONL mirror: one record per line in order, the
// record's JSON tags, [] for empty top-level lists, raw JSON embedded, no
// HTML escaping, and it decodes back to the records.
func TestMirror(t *testing.T) {
	recs := fixtureRecords()
	path := filepath.Join(t.TempDir(), "s.parquet")
	if _, err := writeAt(t, path, recs, Options{JSONL: true}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(MirrorPath(path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("%d lines for %d records", len(lines), len(recs))
	}
	wantMinimal := `{"id":"glaive:0","source":"","format":"","row":0,"system":"","tools":[],"messages":[],"tags":[],"lineage":[]}`
	if lines[1] != wantMinimal {
		t.Errorf("minimal record line:\n got %s\nwant %s", lines[1], wantMinimal)
	}
	for _, want := range []string{
		`"description":"Weather for <city> & \"region\""`,
		`"arguments":{"city":"台北","days":3}`,
		`"calls":[{"name":"get_weather"`,
		`{"name":"no_args","description":"","parameters":{"type":"object","properties":{}}}`,
	} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line lacks %s", want)
		}
	}
	var got []*record.Record
	if err := ScanJSONL(MirrorPath(path), func(r *record.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		Normalize(r)
	}
	assertRecordsEqual(t, got, normalized(recs))
}

func TestMirrorPath(t *testing.T) {
	for in, want := range map[string]string{
		"out/ingest/part-00001.parquet": "out/ingest/part-00001.jsonl",
		"x":                             "x.jsonl",
		"a.parquet.parquet":             "a.parquet.jsonl",
	} {
		if got := MirrorPath(in); got != want {
			t.Errorf("MirrorPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func reasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestWriteRejectsBadRecords(t *testing.T) {
	valid := func() *record.Record { return fixtureRecords()[0] }
	for _, tc := range []struct {
		name   string
		mutate func(r *record.Record)
		reason string
	}{
		{"empty parameters", func(r *record.Record) { r.Tools[0].Parameters = nil }, ReasonInvalidJSON},
		{"bad parameters", func(r *record.Record) { r.Tools[0].Parameters = json.RawMessage(`{"type":`) }, ReasonInvalidJSON},
		{"bad response", func(r *record.Record) { r.Tools[0].Response = json.RawMessage(`nope`) }, ReasonInvalidJSON},
		{"empty arguments", func(r *record.Record) { r.Messages[2].Calls[1].Arguments = json.RawMessage{} }, ReasonInvalidJSON},
		{"two values in arguments", func(r *record.Record) { r.Messages[2].Calls[0].Arguments = json.RawMessage(`{} {}`) }, ReasonInvalidJSON},
		{"utf8 id", func(r *record.Record) { r.ID = "a\xffb" }, ReasonInvalidUTF8},
		{"utf8 content", func(r *record.Record) { r.Messages[1].Content = "truncated \xe5\x8f" }, ReasonInvalidUTF8},
		{"utf8 result", func(r *record.Record) { r.Messages[3].Results[1].Content = "\xc3" }, ReasonInvalidUTF8},
		{"utf8 tag", func(r *record.Record) { r.Tags[0].Value = "\x80" }, ReasonInvalidUTF8},
		{"utf8 lineage", func(r *record.Record) { r.Lineage[1].Model = "\xff" }, ReasonInvalidUTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := valid()
			tc.mutate(r)
			path := filepath.Join(t.TempDir(), "s.parquet")
			_, err := writeAt(t, path, []*record.Record{valid(), r}, Options{JSONL: true})
			if reasonOf(err) != tc.reason {
				t.Fatalf("err = %v, want reason %s", err, tc.reason)
			}
			var e *Error
			if errors.As(err, &e); e.Row != 1 || !strings.Contains(err.Error(), fmt.Sprintf("%q", r.ID)) {
				t.Errorf("error does not name row 1 and the record: %v", err)
			}
			assertNoFiles(t, filepath.Dir(path))
		})
	}
	t.Run("nil record", func(t *testing.T) {
		_, err := writeAt(t, filepath.Join(t.TempDir(), "s.parquet"), []*record.Record{valid(), nil}, Options{})
		if reasonOf(err) != ReasonNilRecord {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("negative row group size", func(t *testing.T) {
		_, err := writeAt(t, filepath.Join(t.TempDir(), "s.parquet"), nil, Options{RowGroupRows: -1})
		if reasonOf(err) != ReasonBadOptions {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unknown compression", func(t *testing.T) {
		_, err := writeAt(t, filepath.Join(t.TempDir(), "s.parquet"), nil, Options{Compression: "lz4_raw"})
		if reasonOf(err) != ReasonBadOptions {
			t.Fatalf("err = %v", err)
		}
	})
}

// assertNoFiles fails when dir holds any file, final or temporary.
func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestWriteAtomic makes the last step of a Write fail (the mirror cannot
// be renamed into place because a directory holds its name) and checks that
// the old shard is untouched and no temporary file is left.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.parquet")
	if _, err := writeAt(t, path, fixtureRecords()[:1], Options{}); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	if err := os.Mkdir(MirrorPath(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := writeAt(t, path, syntheticRecords(50, 4), Options{JSONL: true}); err == nil {
		t.Fatal("Write succeeded although the mirror's name is a directory")
	}
	now, _ := os.ReadFile(path)
	if !bytes.Equal(old, now) {
		t.Error("failed Write replaced the old shard")
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"s.jsonl", "s.parquet"}; !slices.Equal(names, want) {
		t.Errorf("dir holds %v, want %v", names, want)
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeShard(t, syntheticRecords(200, 5), Options{RowGroupRows: 50})
	data, _ := os.ReadFile(good)

	notParquet := filepath.Join(dir, "text.parquet")
	os.WriteFile(notParquet, []byte("id,source\n1,2\n"), 0o644)
	truncated := filepath.Join(dir, "truncated.parquet")
	os.WriteFile(truncated, data[:len(data)/2], 0o644)

	// A valid Parquet file with another schema.
	other := filepath.Join(dir, "other.parquet")
	f, _ := os.Create(other)
	w := parquet.NewGenericWriter[struct {
		ID string `parquet:"id"`
	}](f)
	w.Write([]struct {
		ID string `parquet:"id"`
	}{{"x"}})
	w.Close()
	f.Close()

	// The same shard with a data page's bytes overwritten: the footer
	// still parses, the pages do not.
	corrupt := filepath.Join(dir, "corrupt.parquet")
	bad := slices.Clone(data)
	for i := 4; i < len(bad)/3; i++ {
		bad[i] ^= 0x5a
	}
	os.WriteFile(corrupt, bad, 0o644)

	for _, tc := range []struct {
		path, reason string
	}{
		{notParquet, ReasonNotParquet},
		{truncated, ReasonNotParquet},
		{other, ReasonSchemaMismatch},
		{corrupt, ReasonCorrupt},
	} {
		_, err := Read(tc.path)
		if reasonOf(err) != tc.reason {
			t.Errorf("%s: err = %v, want reason %s", filepath.Base(tc.path), err, tc.reason)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing.parquet")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestScanStopsOnCallbackError(t *testing.T) {
	path := writeShard(t, syntheticRecords(500, 6), Options{RowGroupRows: 100})
	stop := errors.New("stop here")
	n := 0
	err := Scan(path, func(r *record.Record) error {
		n++
		if n == 150 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("err = %v, want the callback's error unchanged", err)
	}
	if n != 150 {
		t.Errorf("callback ran %d times after the error", n-150)
	}
}

// FuzzRead feeds damaged shards to the reader: it must return records or
// an *Error, never panic or hang.
func FuzzRead(f *testing.F) {
	for _, recs := range [][]*record.Record{fixtureRecords()[1:], randomShapes(20, 1)} {
		var buf bytes.Buffer
		if err := writeParquet(&buf, recs, Options{RowGroupRows: 7}); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		err := scanReader(bytes.NewReader(in), int64(len(in)), "fuzz.parquet", nil, func(r *record.Record) error { return nil })
		var pe panicError
		if errors.As(err, &pe) {
			t.Fatalf("panic: %v", err)
		}
		if err != nil && reasonOf(err) == "" {
			t.Fatalf("error without a reason: %v", err)
		}
	})
}

// TestRowGroupBytes checks that large records cut row groups by size, so
// a reader's memory stays bounded.
func TestRowGroupBytes(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB, shared by all records
	var recs []*record.Record
	for i := range 30 {
		recs = append(recs, &record.Record{ID: fmt.Sprint(i), Messages: []record.Message{{Role: record.RoleUser, Content: big}}})
	}
	path := filepath.Join(t.TempDir(), "big.parquet")
	if _, err := writeAt(t, path, recs, Options{}); err != nil {
		t.Fatal(err)
	}
	pf := openShardFile(t, path)
	var sizes []int64
	for _, rg := range pf.RowGroups() {
		sizes = append(sizes, rg.NumRows())
	}
	if want := []int64{22, 8}; !slices.Equal(sizes, want) {
		t.Errorf("row groups of %v rows, want %v", sizes, want)
	}
	n := 0
	if err := Scan(path, func(r *record.Record) error {
		if r.ID != fmt.Sprint(n) || r.Messages[0].Content != big {
			t.Fatalf("record %d differs", n)
		}
		n++
		return nil
	}); err != nil || n != 30 {
		t.Fatalf("scan: %v after %d records", err, n)
	}
}

// TestScanStreams damages the last row group only: Scan must deliver the
// records of the earlier row groups before reporting the damage, since it
// decodes one row group at a time.
func TestScanStreams(t *testing.T) {
	recs := syntheticRecords(300, 9)
	path := writeShard(t, recs, Options{RowGroupRows: 100})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rgs := pf.Metadata().RowGroups
	last := rgs[len(rgs)-1].Columns[col.msgContent].MetaData
	data[last.DataPageOffset+last.TotalCompressedSize-1] ^= 0xff // inside the page body: checksum mismatch
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := normalized(recs)
	n := 0
	err = Scan(path, func(r *record.Record) error {
		if !reflect.DeepEqual(r, want[n]) {
			t.Fatalf("record %d differs", n)
		}
		n++
		return nil
	})
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonCorrupt || e.Row != 200 || n != 200 {
		t.Fatalf("after %d records: %v", n, err)
	}
}

// randomShapes returns records whose every list has 0 to 3 elements and
// whose optional values are present or not at random, to exercise the
// level handling of the reader.
func randomShapes(n int, seed uint64) []*record.Record {
	rng := rand.New(rand.NewPCG(seed, 2))
	str := func() string { return strings.Repeat("xé", rng.IntN(3)) }
	js := func() json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, rng.IntN(100))) }
	out := make([]*record.Record, n)
	for i := range out {
		r := &record.Record{ID: fmt.Sprint(i), Source: str(), Format: str(), Row: rng.Int64(), System: str()}
		for range rng.IntN(4) {
			t := record.Tool{Name: str(), Description: str(), Parameters: js()}
			if rng.IntN(2) == 0 {
				t.Response = js()
			}
			r.Tools = append(r.Tools, t)
		}
		for range rng.IntN(4) {
			m := record.Message{Role: str(), Content: str(), Reasoning: str()}
			for range rng.IntN(4) {
				m.Calls = append(m.Calls, record.Call{Name: str(), Arguments: js()})
			}
			for range rng.IntN(4) {
				m.Results = append(m.Results, record.Result{Name: str(), Content: str()})
			}
			r.Messages = append(r.Messages, m)
		}
		for range rng.IntN(4) {
			r.Tags = append(r.Tags, record.Tag{Key: str(), Value: str()})
		}
		for range rng.IntN(4) {
			r.Lineage = append(r.Lineage, record.Step{Stage: str(), Provider: str(), Model: str()})
		}
		out[i] = r
	}
	return out
}

func TestRoundTripRandomShapes(t *testing.T) {
	for _, tc := range []struct{ n, rows int }{{200, 1}, {1000, 7}, {2000, 1000}} {
		recs := randomShapes(tc.n, uint64(tc.rows))
		got, err := Read(writeShard(t, recs, Options{RowGroupRows: tc.rows}))
		if err != nil {
			t.Fatal(err)
		}
		assertRecordsEqual(t, got, normalized(recs))
	}
}

// openShardFile opens a shard with parquet-go for metadata checks; the file
// is closed when the test ends.
func openShardFile(t *testing.T, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return pf
}
