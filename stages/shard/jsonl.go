package shard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
)

// A Reject is one line of a rejects file: a source row a reader could not
// parse (Raw holds the row's text as read) or a record a stage could not
// handle (Record holds it as it entered the stage). Reason is the stable
// snake_case code counted in the manifest; Detail says what was wrong.
type Reject struct {
	Stage  string         `json:"stage"`
	ID     string         `json:"id"`
	Source string         `json:"source"`
	Row    int64          `json:"row"`
	Reason string         `json:"reason"`
	Detail string         `json:"detail"`
	Raw    string         `json:"raw,omitempty"`
	Record *record.Record `json:"record,omitempty"`
}

// WriteRejects writes rows as a JSONL rejects file name in dir, atomically, one
// reject per line in the given order. An empty rows still writes an empty
// file, so a rerun of a shard always replaces an older rejects file and the
// manifest can name and hash it. Records are written like the JSONL mirror.
// The FileRef's Path is relative to dir's top directory (dir.Rel).
func WriteRejects(dir *atomicfs.Root, name string, rows []Reject) (manifests.FileRef, error) {
	return writeJSONL(dir, name, rows, func(r Reject) Reject {
		if r.Record != nil {
			r.Record = mirrorRecord(r.Record)
		}
		return r
	})
}

// WriteJSONL writes rows as JSON Lines to name in dir, atomically: one value per
// line, encoding/json's encoding with HTML escaping off (tool descriptions
// hold <, > and &) and json.RawMessage embedded as compact JSON. An empty
// rows writes an empty file. The FileRef's Path is relative to dir's top
// directory (dir.Rel).
//
// A value that cannot be encoded gives an *Error with ReasonBadJSON and
// the row's index; nothing is written then.
func WriteJSONL[T any](dir *atomicfs.Root, name string, rows []T) (manifests.FileRef, error) {
	return writeJSONL(dir, name, rows, nil)
}

func writeJSONL[T any](dir *atomicfs.Root, name string, rows []T, prep func(T) T) (manifests.FileRef, error) {
	f, err := dir.Create(name)
	if err != nil {
		return manifests.FileRef{}, err
	}
	defer f.Abort()
	if err := encodeJSONL(f, dir.Path(name), rows, prep); err != nil {
		return manifests.FileRef{}, err
	}
	r := ref(dir.Rel(name), f, len(rows))
	if err := f.Commit(); err != nil {
		return manifests.FileRef{}, err
	}
	return r, nil
}

func encodeJSONL[T any](w io.Writer, path string, rows []T, prep func(T) T) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i, v := range rows {
		if prep != nil {
			v = prep(v)
		}
		if err := enc.Encode(v); err != nil {
			if isEncodeError(err) {
				return &Error{Path: path, Reason: ReasonBadJSON, Row: int64(i), Err: err}
			}
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// isEncodeError tells encoding failures (bad values) from write failures.
func isEncodeError(err error) bool {
	var me *json.MarshalerError
	var ve *json.UnsupportedValueError
	var te *json.UnsupportedTypeError
	return errors.As(err, &me) || errors.As(err, &ve) || errors.As(err, &te)
}

// Empty top-level lists, written as [] rather than null in JSONL so every
// line has them for pandas and DuckDB. Nested empty fields (a message's
// reasoning, calls and results, a step's model) are left out, as the
// record's JSON form has them (the README says so beside the Parquet schema).
var (
	noTools    = []record.Tool{}
	noMessages = []record.Message{}
	noTags     = []record.Tag{}
	noSteps    = []record.Step{}
)

// mirrorRecord returns r, or a shallow copy of r with its nil top-level
// lists made empty.
func mirrorRecord(r *record.Record) *record.Record {
	if r.Tools != nil && r.Messages != nil && r.Tags != nil && r.Lineage != nil {
		return r
	}
	c := *r
	if c.Tools == nil {
		c.Tools = noTools
	}
	if c.Messages == nil {
		c.Messages = noMessages
	}
	if c.Tags == nil {
		c.Tags = noTags
	}
	if c.Lineage == nil {
		c.Lineage = noSteps
	}
	return &c
}

// ScanJSONL decodes the JSONL file at path one line at a time into a fresh
// T and calls fn with it, in order; fn's error stops the scan and is
// returned unchanged. Memory is bounded by the longest line. A line that is
// not one JSON value (including a blank line) gives an *Error with
// ReasonBadJSON and the 0-based line number. Unknown fields are ignored, as
// with json.Unmarshal.
func ScanJSONL[T any](path string, fn func(T) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanJSONL(bufio.NewReaderSize(f, 256<<10), path, fn)
}

func scanJSONL[T any](br *bufio.Reader, path string, fn func(T) error) error {
	var long []byte // a line longer than the reader's buffer
	for line := int64(0); ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(b) == 0 && err == io.EOF {
			return nil
		}
		var v T
		if derr := decodeLine(b, &v); derr != nil {
			return &Error{Path: path, Reason: ReasonBadJSON, Row: line, Err: derr}
		}
		if ferr := fn(v); ferr != nil {
			return ferr
		}
		if err == io.EOF {
			return nil
		}
	}
}

// decodeLine decodes exactly one JSON value from a line.
func decodeLine(b []byte, v any) error {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("blank line")
	}
	return json.Unmarshal(b, v)
}
