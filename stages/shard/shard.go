// Package shard reads and writes the files a stage hands to the next one:
// Parquet shards of records (with an optional JSONL mirror), rejects files
// and arbitrary JSONL outputs.
//
// Parquet shards use the record package's struct tags as their schema, so
// tools, messages, calls, results, tags and lineage are standard 3-level
// LIST columns of structs that DuckDB, Arrow and pandas read as nested data,
// and the JSON-text fields carry the JSON logical type.
//
// Every file is written atomically through atomicfs.File: either the whole
// new file is visible under its final name or nothing is. The same input
// always gives the same bytes.
package shard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/swar"
	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
)

// DefaultRowGroupRows is the row-group size used when Options.RowGroupRows
// is zero. A reader holds about one row group in memory at a time.
const DefaultRowGroupRows = 4096

// Ext and MirrorExt are the file extensions of a shard and its JSONL mirror.
const (
	Ext       = ".parquet"
	MirrorExt = ".jsonl"
)

// Options control how Write lays out a shard.
type Options struct {
	// Version is the augment version; the file's created_by becomes
	// "augment version <Version>" and the key/value metadata holds
	// augment.version. Empty means "unknown".
	Version string
	// RowGroupRows is the number of records per row group; 0 means
	// DefaultRowGroupRows. Negative values are an error. A row group is
	// also cut once it holds MaxRowGroupBytes.
	RowGroupRows int
	// JSONL also writes the JSONL mirror at MirrorPath(path).
	JSONL bool
	// Compression names the codec of the shard's pages, one of
	// Compressions; empty means DefaultCompression. Readers need nothing
	// to know it: each column chunk names its codec.
	Compression string
	// Checked says every record already passed Check (the runner checks
	// each record to reject it alone), so Write does not check again.
	Checked bool
}

// Reason codes of *Error, stable for logs, manifests and tests.
const (
	ReasonNilRecord      = "nil_record"      // Write got a nil *record.Record
	ReasonInvalidJSON    = "invalid_json"    // a JSON-text field is not one valid JSON value
	ReasonInvalidUTF8    = "invalid_utf8"    // a text field is not valid UTF-8
	ReasonBadOptions     = "bad_options"     // Options out of range
	ReasonNotParquet     = "not_parquet"     // the file is not a readable Parquet file
	ReasonSchemaMismatch = "schema_mismatch" // the shard's schema is not record.Record's
	ReasonCorrupt        = "corrupt_shard"   // pages or values could not be decoded
	ReasonBadJSON        = "bad_json"        // a value could not be encoded or a JSONL line decoded
)

// An Error is a failure caused by the data or the file rather than by the
// system (I/O errors from the OS are returned as they are, wrapped with the
// path). Reason is one of the Reason* codes.
type Error struct {
	Path   string
	Reason string
	Row    int64 // the record or line the error is about (0-based), or -1
	Err    error
}

func (e *Error) Error() string {
	if e.Row >= 0 {
		return fmt.Sprintf("%s: row %d: %s: %v", e.Path, e.Row, e.Reason, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Path, e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// RejectReason lets callers classify the error like other rejects.
func (e *Error) RejectReason() string { return e.Reason }

// MirrorPath returns the path of the JSONL mirror of the shard at path:
// the ".parquet" suffix (if any) replaced by ".jsonl".
func MirrorPath(path string) string {
	return strings.TrimSuffix(path, Ext) + MirrorExt
}

// The compression codecs a shard may use, by the names pipeline.yaml
// gives them (output.compression). DuckDB, Arrow/pandas and parquet-go all
// read each. BenchmarkCodecs measures them: against zstd at its fastest
// level, snappy (the fast encoder, as pyarrow writes it) takes 35-40% less
// CPU to encode and 15-40% less to decode, for files 26-32% larger; no
// compression takes 70% less to encode, for files 3.4-4.4× larger. LZ4_RAW
// is left out: parquet-go v0.32.0 writes an empty page when pierrec/lz4
// finds a page incompressible (its CompressBlock returns 0), a file no
// reader can read.
const (
	CompressionSnappy = "snappy" // pyarrow's default
	CompressionZstd   = "zstd"   // the smallest files
	CompressionNone   = "none"
)

// fastSnappy is parquet-go's SNAPPY codec with klauspost's fast Snappy
// encoder (s2.EncodeSnappy) instead of the "better" one its snappy.Encode
// uses: 27-48% less encoding CPU (BenchmarkCodecs/snappy) for files 9-16%
// larger. Both write standard Snappy blocks; decoding is the same.
type fastSnappy struct{ snappy.Codec }

func (*fastSnappy) Encode(dst, src []byte) ([]byte, error) { return s2.EncodeSnappy(dst, src), nil }

// DefaultCompression is the codec of Options.Compression "".
const DefaultCompression = CompressionSnappy

// Compressions lists the valid Options.Compression names.
var Compressions = []string{CompressionSnappy, CompressionZstd, CompressionNone}

// codecs are shared by all writers (zstd pools its encoders and decoders).
var codecs = map[string]compress.Codec{
	CompressionSnappy: &fastSnappy{},
	CompressionZstd:   &zstd.Codec{Level: zstd.SpeedFastest},
	CompressionNone:   &uncompressed.Codec{},
}

// schema is the Parquet schema of a shard.
var schema = parquet.SchemaOf(record.Record{})

// Write writes recs as a Parquet shard named name in dir and, when o.JSONL
// is set, its JSONL mirror MirrorPath(name) beside it. Zero records give a
// valid, empty shard. Every file goes through dir (a confined root), so
// name cannot lead outside it.
//
// Every record must pass Check; otherwise Write returns an *Error
// (ReasonNilRecord, ReasonInvalidJSON or ReasonInvalidUTF8, Row = the
// record's index) before creating any file.
//
// It returns one FileRef per file written (the shard first, then the
// mirror) with Path relative to dir's top directory (dir.Rel), the
// SHA-256 and size of the bytes, and Rows = len(recs). Both files are
// written in full under temporary names before either is renamed into
// place, the mirror first: on error the old files stay, except when the
// shard's own rename fails after the mirror's succeeded (then the new
// mirror sits beside the old shard; the runner's manifest, written last,
// records neither).
func Write(dir *atomicfs.Root, name string, recs []*record.Record, o Options) ([]manifests.FileRef, error) {
	path := dir.Path(name)
	if o.RowGroupRows < 0 {
		return nil, &Error{Path: path, Reason: ReasonBadOptions, Row: -1, Err: fmt.Errorf("RowGroupRows %d < 0", o.RowGroupRows)}
	}
	if _, err := o.codec(); err != nil {
		return nil, &Error{Path: path, Reason: ReasonBadOptions, Row: -1, Err: err}
	}
	for i, r := range recs {
		if r == nil {
			return nil, &Error{Path: path, Reason: ReasonNilRecord, Row: int64(i), Err: errors.New("nil record")}
		}
		if o.Checked {
			continue
		}
		if reason, err := Check(r); err != nil {
			return nil, &Error{Path: path, Reason: reason, Row: int64(i), Err: err}
		}
	}
	pf, err := dir.Create(name)
	if err != nil {
		return nil, err
	}
	defer pf.Abort()
	if err := writeParquet(pf, recs, o); err != nil {
		return nil, wrapPath(path, err)
	}
	refs := []manifests.FileRef{ref(dir.Rel(name), pf, len(recs))}

	var jf *atomicfs.File
	if o.JSONL {
		mname := MirrorPath(name)
		if jf, err = dir.Create(mname); err != nil {
			return nil, err
		}
		defer jf.Abort()
		if err := encodeJSONL(jf, dir.Path(mname), recs, mirrorRecord); err != nil {
			return nil, err
		}
		refs = append(refs, ref(dir.Rel(mname), jf, len(recs)))
		if err := jf.Commit(); err != nil {
			return nil, err
		}
	}
	if err := pf.Commit(); err != nil {
		return nil, err
	}
	return refs, nil
}

// Check reports whether r can be written to a shard that every reader
// accepts: all text is valid UTF-8 (DuckDB refuses a STRING column holding
// anything else) and Tool.Parameters and Call.Arguments are each one valid
// JSON value, as is Tool.Response when not empty (DuckDB refuses a shard
// whose JSON columns hold anything else, including ""). A nil error means
// writable; otherwise reason is ReasonInvalidUTF8 or ReasonInvalidJSON and
// the error names the field and the record ID.
func Check(r *record.Record) (reason string, err error) { return check(r, nil, nil) }

// CheckChanged is Check for a record a stage made from prev, a record that
// passed Check: the text and JSON that r shares with prev, by memory (the
// same string, the same bytes at the same place of the record), passed
// already and are not checked again. It gives Check's answer as long as
// the bytes prev shares were not changed in place since prev was checked:
// strings cannot be, and stages never change their input records (they
// change copies; the runner's contract). A nil prev checks r in full, as
// Check.
func CheckChanged(r, prev *record.Record) (reason string, err error) {
	if prev == nil {
		return check(r, nil, nil)
	}
	return check(r, prev, prev.Tools)
}

// CheckChangedTools is CheckChanged with prevTools, tools that passed
// Check, in place of prev's: r's tools are set against them, position by
// position. A caller that lines up r's tools with checked ones sharing
// their memory (a stage reorders tools, or adds some from a library)
// passes them here rather than a copy of prev with them.
func CheckChangedTools(r, prev *record.Record, prevTools []record.Tool) (reason string, err error) {
	return check(r, prev, prevTools)
}

// check is Check, skipping what r shares with prev (with prevTools for
// its tools) when prev is not nil.
func check(r, prev *record.Record, prevTools []record.Tool) (reason string, err error) {
	bad := func(reason, field string) (string, error) {
		return reason, fmt.Errorf("record %q: %s", r.ID, field)
	}
	if prev == nil {
		prev = &noRecord
	}
	switch {
	case !validText(r.ID, prev.ID):
		return bad(ReasonInvalidUTF8, "id")
	case !validText(r.Source, prev.Source):
		return bad(ReasonInvalidUTF8, "source")
	case !validText(r.Format, prev.Format):
		return bad(ReasonInvalidUTF8, "format")
	case !validText(r.System, prev.System):
		return bad(ReasonInvalidUTF8, "system")
	}
	if !sameSlice(r.Tools, prevTools) {
		for i := range r.Tools {
			t, was := &r.Tools[i], &noTool
			if i < len(prevTools) {
				was = &prevTools[i]
			}
			switch {
			case !validText(t.Name, was.Name) || !validText(t.Description, was.Description):
				return bad(ReasonInvalidUTF8, fmt.Sprintf("tools[%d] name or description", i))
			case !sameBytes(t.Parameters, was.Parameters) && !ValidJSON(t.Parameters):
				return bad(ReasonInvalidJSON, fmt.Sprintf("tools[%d].parameters", i))
			case len(t.Response) > 0 && !sameBytes(t.Response, was.Response) && !ValidJSON(t.Response):
				return bad(ReasonInvalidJSON, fmt.Sprintf("tools[%d].response", i))
			}
		}
	}
	if !sameSlice(r.Messages, prev.Messages) {
		j := 0 // prev's next message not lined up yet
		for i := range r.Messages {
			m, was := &r.Messages[i], &noMessage
			if k := lineUp(r.Messages, i, prev.Messages, j); k >= 0 {
				was, j = &prev.Messages[k], k+1
			}
			if !validText(m.Role, was.Role) || !validText(m.Content, was.Content) || !validText(m.Reasoning, was.Reasoning) {
				return bad(ReasonInvalidUTF8, fmt.Sprintf("messages[%d] role, content or reasoning", i))
			}
			if !sameSlice(m.Calls, was.Calls) {
				for j := range m.Calls {
					c, cw := &m.Calls[j], &noCall
					if j < len(was.Calls) {
						cw = &was.Calls[j]
					}
					if !validText(c.Name, cw.Name) {
						return bad(ReasonInvalidUTF8, fmt.Sprintf("messages[%d].calls[%d].name", i, j))
					}
					if !sameBytes(c.Arguments, cw.Arguments) && !ValidJSON(c.Arguments) {
						return bad(ReasonInvalidJSON, fmt.Sprintf("messages[%d].calls[%d].arguments", i, j))
					}
				}
			}
			if !sameSlice(m.Results, was.Results) {
				for j := range m.Results {
					res, rw := &m.Results[j], &noResult
					if j < len(was.Results) {
						rw = &was.Results[j]
					}
					if !validText(res.Name, rw.Name) || !validText(res.Content, rw.Content) {
						return bad(ReasonInvalidUTF8, fmt.Sprintf("messages[%d].results[%d]", i, j))
					}
				}
			}
		}
	}
	// Tags are sorted by key in both records (SetTag inserts in order), so
	// each tag is set against prev's tag of the same key when there is one.
	j := 0
	for i := range r.Tags {
		t := &r.Tags[i]
		if j < len(prev.Tags) && sameString(t.Key, prev.Tags[j].Key) && sameString(t.Value, prev.Tags[j].Value) {
			j++ // prev's tag, copied: the next tag's key is greater
			continue
		}
		for j < len(prev.Tags) && prev.Tags[j].Key < t.Key {
			j++
		}
		was := &noTag
		if j < len(prev.Tags) {
			was = &prev.Tags[j]
		}
		if !validText(t.Key, was.Key) || !validText(t.Value, was.Value) {
			return bad(ReasonInvalidUTF8, fmt.Sprintf("tags[%d]", i))
		}
	}
	for i := range r.Lineage {
		s, was := &r.Lineage[i], &noStep
		if i < len(prev.Lineage) {
			was = &prev.Lineage[i]
			if sameString(s.Stage, was.Stage) && sameString(s.Provider, was.Provider) && sameString(s.Model, was.Model) {
				continue
			}
		}
		if !validText(s.Stage, was.Stage) || !validText(s.Provider, was.Provider) || !validText(s.Model, was.Model) {
			return bad(ReasonInvalidUTF8, fmt.Sprintf("lineage[%d]", i))
		}
	}
	return "", nil
}

// The empty values a field of r is set against when prev has none there
// (check reads them, never writes them).
var (
	noRecord  record.Record
	noTool    record.Tool
	noMessage record.Message
	noCall    record.Call
	noResult  record.Result
	noTag     record.Tag
	noStep    record.Step
)

// lineUp returns the index of the message of prev, at j or after, that
// r's message i is set against, or -1 (none: all of it is checked). A
// stage's output keeps its input's messages in order, some replaced
// (decision_tokens' new texts), some put in between (meta_tool's inserted
// turns) or cut: message i goes with the first of prev's next few messages
// that shares text or lists with it by memory; one sharing nothing
// replaces prev's message j when the messages after both line up (or it is
// the last), and is new otherwise. Which message it is set against decides
// only how much is checked again (what it shares with a checked message),
// never what passes.
func lineUp(r []record.Message, i int, prev []record.Message, j int) int {
	for k := j; k < len(prev) && k < j+4; k++ {
		if sharesMemory(&r[i], &prev[k]) {
			return k
		}
	}
	if j < len(prev) && (i+1 == len(r) || j+1 < len(prev) && sharesMemory(&r[i+1], &prev[j+1])) {
		return j
	}
	return -1
}

// sharesMemory reports whether m and p share non-empty text or lists in
// memory (roles, a handful of constants, do not count).
func sharesMemory(m, p *record.Message) bool {
	return sameText(m.Content, p.Content) || sameText(m.Reasoning, p.Reasoning) ||
		len(m.Calls) > 0 && sameSlice(m.Calls, p.Calls) || len(m.Results) > 0 && sameSlice(m.Results, p.Results)
}

// sameText reports whether s and t are the same non-empty text in memory.
func sameText(s, t string) bool {
	return len(s) > 0 && len(s) == len(t) && unsafe.StringData(s) == unsafe.StringData(t)
}

// sameString reports whether s and t are the same text in memory, or
// both empty.
func sameString(s, t string) bool {
	return len(s) == len(t) && (len(s) == 0 || unsafe.StringData(s) == unsafe.StringData(t))
}

// validText reports whether s is valid UTF-8, known when it is was, a text
// that passed (the same bytes in memory). When s is new text put before
// was (a decision token before a turn's text), only the new text is
// checked: was's bytes at the end compare faster than they validate, and
// valid UTF-8 joined to valid UTF-8 is valid (a valid text cannot start
// with a continuation byte, so an invalid front stays invalid joined).
// The empty text and was itself are answered here, where the check calls
// it: the second test is sameText spelled out, which keeps validText
// within the compiler's inlining budget (calling sameText puts it over);
// validNew reads the bytes.
func validText(s, was string) bool {
	return len(s) == 0 || len(s) == len(was) && unsafe.StringData(s) == unsafe.StringData(was) || validNew(s, was)
}

// validNew is validText for s that is not empty and not was.
func validNew(s, was string) bool {
	if n := len(s) - len(was); len(was) >= minSuffix && n > 0 && s[n:] == was {
		return validUTF8(s[:n])
	}
	return validUTF8(s)
}

// validUTF8 is utf8.ValidString(s), with the new texts a stage writes
// into most records (tag keys and values, lineage steps, roles, tool
// names, decision tokens: 4 to 16 bytes of ASCII) answered by swar.ASCII's
// two overlapping reads.
func validUTF8(s string) bool {
	if n := len(s); n >= 4 && n <= 16 && swar.ASCII(s) {
		return true
	}
	return utf8.ValidString(s)
}

// minSuffix is the shortest checked text validText looks for at the end
// of a new one: below it, validating is as cheap as comparing.
const minSuffix = 32

// sameSlice reports whether the lists a and b are the same elements in
// memory; two empty lists are (they hold nothing to check).
func sameSlice[S ~[]E, E any](a, b S) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameBytes reports whether the JSON values a and b are the same bytes in
// memory; an empty value never is (it is not JSON: ValidJSON must say so).
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

func ref(path string, f *atomicfs.File, rows int) manifests.FileRef {
	return manifests.FileRef{Path: path, SHA256: f.SHA256(), Rows: int64(rows), Bytes: f.Size()}
}

func wrapPath(path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// MaxRowGroupBytes bounds a row group by the text its records hold (about
// their size in memory): a row group is cut at RowGroupRows records or once
// it holds this much, whichever comes first, so a reader's memory stays
// bounded even for shards of very large records.
const MaxRowGroupBytes = 64 << 20

// codec returns the codec o.Compression names.
func (o Options) codec() (compress.Codec, error) {
	name := o.Compression
	if name == "" {
		name = DefaultCompression
	}
	c, ok := codecs[name]
	if !ok {
		return nil, fmt.Errorf("compression %q is not one of %s", o.Compression, strings.Join(Compressions, ", "))
	}
	return c, nil
}

// rowGroupRows is o.RowGroupRows, DefaultRowGroupRows when 0.
func (o Options) rowGroupRows() int {
	if o.RowGroupRows == 0 {
		return DefaultRowGroupRows
	}
	return o.RowGroupRows
}

// version is the writer version a shard's metadata names, "unknown" when
// o.Version is empty.
func (o Options) version() string {
	if o.Version == "" {
		return "unknown"
	}
	return o.Version
}

// writeParquet encodes recs into w with the column encoder of encode.go.
// It writes the bytes parquet-go's GenericWriter[record.Record] wrote with
// this layout (TestEncodeSameBytes keeps that writer as its oracle) for a
// fraction of its CPU: GenericWriter copied each record into
// reflection-compiled column buffers, then reordered and copied them again
// into pages; the exported per-column path (ColumnWriter.WriteRowValues
// with one parquet.Value per leaf value) was slower still. One difference
// on purpose: an absent (nil or empty) tool response is always NULL, where
// GenericWriter wrote some as empty JSON (see encodeParquet).
func writeParquet(w io.Writer, recs []*record.Record, o Options) error {
	return encodeParquet(w, recs, o, nil)
}

// Read returns all records of the shard at path, in order. Empty lists and
// empty JSON values come back as nil (see Scan).
func Read(path string) ([]*record.Record, error) {
	var out []*record.Record
	err := scan(path, func(n int64) { out = slices.Grow(out, int(n)) }, func(r *record.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Scan calls fn for each record of the shard at path, in order, holding
// about one row group in memory. Each call gets a freshly allocated record
// that fn may keep or change. If fn returns an error the scan stops and
// Scan returns that error unchanged.
//
// Nil and empty slices are the same on disk; Scan returns nil for every
// empty list (tools, messages, calls, results, tags, lineage) and for empty
// JSON text (Tool.Response), so a record read back equals the record
// written up to that normalisation (see Normalize).
//
// Data errors are *Error: ReasonNotParquet, ReasonSchemaMismatch (the file
// was not written with this version's record schema) or ReasonCorrupt.
func Scan(path string, fn func(*record.Record) error) error {
	return scan(path, nil, fn)
}

func scan(path string, sized func(rows int64), fn func(*record.Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return scanReader(f, st.Size(), path, sized, fn)
}

func scanReader(f io.ReaderAt, size int64, path string, sized func(rows int64), fn func(*record.Record) error) error {
	pf, err := openParquet(f, size)
	if err != nil {
		return &Error{Path: path, Reason: ReasonNotParquet, Row: -1, Err: err}
	}
	if !parquet.EqualNodes(pf.Schema(), schema) {
		return &Error{Path: path, Reason: ReasonSchemaMismatch, Row: -1,
			Err: fmt.Errorf("file schema:\n%s\nwant:\n%s", pf.Schema(), schema)}
	}
	if err := checkPages(f, size, pf.Metadata()); err != nil {
		return &Error{Path: path, Reason: ReasonCorrupt, Row: -1, Err: err}
	}
	if sized != nil {
		sized(pf.NumRows())
	}
	var row int64
	d := decoders.Get().(*decoder)
	defer decoders.Put(d)
	for _, rg := range pf.RowGroups() {
		if err := scanRowGroup(rg, d, &row, fn); err != nil {
			var fe fnError
			if errors.As(err, &fe) {
				return fe.err
			}
			return &Error{Path: path, Reason: ReasonCorrupt, Row: row, Err: err}
		}
	}
	return nil
}

// openParquet opens a shard's footer, guarding against damaged footers
// that make parquet-go exhaust memory (see checkFooter) or panic.
func openParquet(f io.ReaderAt, size int64) (pf *parquet.File, err error) {
	if err := checkFooter(f, size); err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			err = panicError{p}
		}
	}()
	return parquet.OpenFile(f, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
}

// panicError is a panic of the Parquet decoder turned into an error.
type panicError struct{ v any }

func (e panicError) Error() string { return fmt.Sprintf("decoder panic: %v", e.v) }

// fnError carries the callback's error through scanRowGroup untouched.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func scanRowGroup(rg parquet.RowGroup, d *decoder, row *int64, fn func(*record.Record) error) (err error) {
	// parquet-go panics on some malformed pages instead of returning an
	// error; a damaged shard must be reported, not crash the run.
	defer func() {
		if p := recover(); p != nil {
			err = panicError{p}
		}
	}()
	recs, err := d.decode(rg)
	if err != nil {
		return err
	}
	for i := range recs {
		if err := fn(&recs[i]); err != nil {
			return fnError{err}
		}
		*row++
	}
	return nil
}

// Normalize puts r in the form Scan returns: every empty list and empty JSON
// value nil. The runner normalizes the records a stage hands to the next
// (stages/chain.go), and tests compare records after normalising both
// sides. It writes only what it changes: a stage's output may share lists
// with its input (a negative shares its parent's calls) while the input's
// shard is still being written from another goroutine.
func Normalize(r *record.Record) {
	setNilIfEmpty(&r.Tools)
	for i := range r.Tools {
		t := &r.Tools[i]
		setNilIfEmpty(&t.Parameters)
		setNilIfEmpty(&t.Response)
	}
	setNilIfEmpty(&r.Messages)
	for i := range r.Messages {
		m := &r.Messages[i]
		setNilIfEmpty(&m.Calls)
		for j := range m.Calls {
			setNilIfEmpty(&m.Calls[j].Arguments)
		}
		setNilIfEmpty(&m.Results)
	}
	setNilIfEmpty(&r.Tags)
	setNilIfEmpty(&r.Lineage)
}

// setNilIfEmpty sets *s to nil when it is empty and not nil already.
func setNilIfEmpty[S ~[]E, E any](s *S) {
	if len(*s) == 0 && *s != nil {
		*s = nil
	}
}
