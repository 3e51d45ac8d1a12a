package storage

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Options configure an Opener.
type Options struct {
	// Getenv reads the environment (HF_TOKEN, HF_ENDPOINT, AWS_*, AZURE_*,
	// STORAGE_EMULATOR_HOST); default os.Getenv. The AWS and Google
	// credential chains read the process environment themselves.
	Getenv func(string) string
	S3     S3Config
	GCS    GCSConfig
	Azure  AzureConfig
	// Transport carries the Hub's and S3's requests; default a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	Log       *slog.Logger
}

// An Opener opens the sources of one run. It resolves each Hub revision
// once (a moving branch is pinned to the commit it had when first asked)
// and keeps Hub downloads and spooled files in its cache directory. It is
// safe for concurrent use.
type Opener struct {
	o     Options
	hub   *hub
	cache *os.Root // nil: nothing is written (augment check)

	storeMu sync.Mutex
	stores  map[Kind]blobStore // by kind, made when first needed
}

// New returns an Opener that writes nothing until SetCache is called.
func New(o Options) *Opener {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 2 * time.Minute
		o.Transport = t
	}
	return &Opener{o: o, hub: newHub(o)}
}

// SetCache gives the Opener a directory of its own for Hub downloads
// (resumed when interrupted, reused by later runs) and for remote Parquet
// files, which need random access. Every file is created through root.
func (o *Opener) SetCache(root *os.Root) { o.cache = root }

// Info describes a stored dump.
type Info struct {
	Name string // the file name, e.g. "train.jsonl.gz"
	Size int64  // stored bytes (compressed, for a compressed dump); -1 when unknown
	// Pin identifies exactly what is read, for the manifest: for the Hub
	// "hf://datasets/OWNER/NAME/PATH@<commit>", for S3
	// "s3://bucket/key#etag=<etag>[&version=<id>]", for GCS
	// "gs://bucket/key#generation=<n>", for Azure
	// "azblob://container/key#etag=<etag>"; "" for a local file, whose
	// identity is its content hash.
	Pin string

	obj     blobObject // object storage: what the read must match
	sha256  string     // Hub LFS files: the content hash the Hub states
	gitBlob string     // other Hub files: the git blob id the Hub states, when it does
	hubURL  string     // Hub: the resolve URL at the pinned commit
}

// StatedSHA256 is the SHA-256 of the stored bytes as the store states it
// (the Hub, for LFS files), hex, or "" when it states none. A download is
// checked against it.
func (i Info) StatedSHA256() string { return i.sha256 }

// StatesHash reports whether the store states a hash of the stored bytes
// that a download is checked against (for the Hub: an LFS SHA-256 or a
// git blob id), so that the bytes opened are the ones it names.
func (i Info) StatesHash() bool { return i.sha256 != "" || i.gitBlob != "" }

// An UnavailableError says a store did not answer, or answered that it
// cannot serve now (429, 5xx), after the retries: the same request may
// succeed later. It is never a config problem.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable reports a store's passing failure: an *UnavailableError,
// or a request that got no answer.
func IsUnavailable(err error) bool {
	return errors.As(err, new(*UnavailableError)) || errors.As(err, new(*url.Error))
}

// A NotFoundError says a source does not exist.
type NotFoundError struct{ Loc, Detail string }

func (e *NotFoundError) Error() string { return e.Loc + ": " + e.Detail }

// A ForeignPrefixError says an output prefix holds objects augment did not
// write (Object is the first one found).
type ForeignPrefixError struct{ Loc, Object string }

func (e *ForeignPrefixError) Error() string {
	return fmt.Sprintf("%s holds objects augment did not write (%s …); set output.dir to a new or empty prefix", e.Loc, e.Object)
}

// An AuthError says the store refused access; Detail says which credential
// to set.
type AuthError struct{ Loc, Detail string }

func (e *AuthError) Error() string { return e.Loc + ": access denied: " + e.Detail }

// Stat describes the dump at path (a local path or a URL, see Parse)
// without reading it. For a Hub file it resolves the revision (once per
// Opener) and asks the Hub for the file's size and hashes.
func (o *Opener) Stat(ctx context.Context, path string) (Info, error) {
	loc, err := Parse(path)
	if err != nil {
		return Info{}, err
	}
	switch loc.Kind {
	case S3, GCS, Azure:
		return o.statBlob(ctx, loc)
	case Hub:
		return o.hub.stat(ctx, loc)
	}
	fi, err := os.Stat(loc.Path)
	if errors.Is(err, os.ErrNotExist) {
		return Info{}, &NotFoundError{Loc: loc.Path, Detail: "does not exist"}
	}
	if err != nil {
		return Info{}, err
	}
	if fi.IsDir() {
		return Info{}, fmt.Errorf("%s is a directory; path names one dump file", loc.Path)
	}
	return Info{Name: loc.Name(), Size: fi.Size()}, nil
}

// A Reader is an opened dump: reading it gives the rows as a JSON array or
// JSON Lines, decompressed, and a Parquet file's rows as JSON Lines, one
// object per row with the file's columns as keys in schema order. Sum gives
// the SHA-256 of the stored bytes, which is what identifies the dump.
type Reader struct {
	Info
	// Rows is the number of rows when the format states it (Parquet),
	// else -1.
	Rows    int64
	r       io.Reader
	raw     *hashReader // the stored bytes as they stream, hashed
	sum     string      // known up front (Parquet files are hashed apart)
	closers []io.Closer
}

func (r *Reader) Read(p []byte) (int, error) { return r.r.Read(p) }

// Close releases the dump and anything spooled for it.
func (r *Reader) Close() error {
	var err error
	for i := len(r.closers) - 1; i >= 0; i-- {
		err = errors.Join(err, r.closers[i].Close())
	}
	r.closers = nil
	return err
}

// Sum reads whatever of the stored bytes is left unread and returns their
// SHA-256 as hex. Call it after reading as much as needed; the Reader is
// not readable afterwards.
func (r *Reader) Sum() (string, error) {
	if r.sum != "" {
		return r.sum, nil
	}
	if r.raw.h == nil {
		return "", fmt.Errorf("%s: not hashed (SkipSum)", r.Name)
	}
	if _, err := io.Copy(io.Discard, r.raw); err != nil {
		return "", err
	}
	r.sum = hex.EncodeToString(r.raw.h.Sum(nil))
	if r.Info.sha256 != "" && r.sum != r.Info.sha256 {
		return "", fmt.Errorf("%s: content hash %s differs from the %s the Hub states", r.Name, r.sum, r.Info.sha256)
	}
	return r.sum, nil
}

// SkipSum stops hashing the stored bytes as they are read, for a caller
// that knows their hash already (the runner hashes a local dump before
// ingesting it, to skip it when unchanged): Sum then returns an error.
// Call it before reading; a sum known up front (Parquet) stays.
func (r *Reader) SkipSum() { r.raw.h = nil }

// Progress makes the Reader call f with the number of stored bytes read,
// as they are read (compressed bytes for a compressed dump), starting with
// those read while opening.
func (r *Reader) Progress(f func(n int64)) {
	r.raw.progress = f
	if r.raw.n > 0 {
		f(r.raw.n)
	}
}

// hashReader hashes what is read through it (unless h is nil).
type hashReader struct {
	r        io.Reader
	h        hash.Hash
	n        int64
	progress func(int64)
	err      error // the first error of the stored bytes' reader, but EOF
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if err != nil && err != io.EOF && h.err == nil {
		h.err = err
	}
	if h.h != nil {
		h.h.Write(p[:n])
	}
	h.n += int64(n)
	if h.progress != nil && n > 0 {
		h.progress(int64(n))
	}
	return n, err
}

// Open opens the dump at path for reading. Hub files are downloaded into
// the cache first (resuming an interrupted download) when the Opener has
// one, else streamed; S3 objects are streamed. Compression is recognised
// by magic bytes (gzip, zstd), Parquet by its "PAR1" header; a name ending
// in .gz, .zst or .parquet whose bytes say otherwise is an error.
func (o *Opener) Open(ctx context.Context, path string) (*Reader, error) {
	loc, err := Parse(path)
	if err != nil {
		return nil, err
	}
	info, err := o.Stat(ctx, path)
	if err != nil {
		return nil, err
	}
	rd := &Reader{Info: info, Rows: -1}
	var src io.ReadCloser
	var file *os.File // the stored bytes as a local file, when they are one
	switch loc.Kind {
	case Local:
		file, err = os.Open(loc.Path)
		src = file
	case S3, GCS, Azure:
		src, err = o.openBlob(ctx, loc, info)
	case Hub:
		if o.cache != nil {
			file, err = o.hub.download(ctx, o.cache, loc, info)
			src = file
		} else {
			src, err = o.hub.stream(ctx, loc, info)
		}
	}
	if err != nil {
		return nil, err
	}
	rd.closers = append(rd.closers, src)
	if err := o.decode(ctx, rd, src, file); err != nil {
		rd.Close()
		return nil, err
	}
	return rd, nil
}

var (
	gzipMagic    = []byte{0x1f, 0x8b}
	zstdMagic    = []byte{0x28, 0xb5, 0x2f, 0xfd}
	parquetMagic = []byte("PAR1")
)

// CheckName reports a dump whose name says gzip, zstd or Parquet (.gz,
// .zst, .parquet) while its first bytes (head: four, or all when fewer) are
// none of them. Content is recognized by its bytes, not its name, so such a
// file is read as JSON, and refused: its name promises what it is not.
func CheckName(name string, head []byte) error {
	for _, magic := range [][]byte{gzipMagic, zstdMagic, parquetMagic} {
		if bytes.HasPrefix(head, magic) {
			return nil
		}
	}
	lower := strings.ToLower(name)
	for _, ext := range []string{".gz", ".zst", ".parquet"} {
		if strings.HasSuffix(lower, ext) {
			return fmt.Errorf("%s: the name says %s but the content is not (it starts with %q)", name, ext, head)
		}
	}
	return nil
}

// decode sets rd.r to the rows of the stored bytes src (file when they are
// a local file).
func (o *Opener) decode(ctx context.Context, rd *Reader, src io.Reader, file *os.File) error {
	rd.raw = &hashReader{r: src, h: sha256.New()}
	br := bufio.NewReaderSize(rd.raw, 64<<10)
	head, _ := br.Peek(4)
	if len(head) < len(zstdMagic) && rd.raw.err != nil {
		// The read failed before the content could say what it is: the
		// failure is the store's, not the name's.
		return rd.raw.err
	}
	name := strings.ToLower(rd.Name)
	var r io.Reader = br
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", rd.Name, err)
		}
		rd.closers = append(rd.closers, zr)
		r = &decompressed{r: zr, raw: rd.raw, codec: "gzip"}
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return fmt.Errorf("%s: %w", rd.Name, err)
		}
		rd.closers = append(rd.closers, zr.IOReadCloser())
		r = &decompressed{r: zr, raw: rd.raw, codec: "zstd"}
	case bytes.HasPrefix(head, parquetMagic):
		if file != nil {
			return o.openParquet(ctx, rd, nil, file)
		}
		return o.openParquet(ctx, rd, br, nil)
	default:
		if err := CheckName(rd.Name, head); err != nil {
			return err
		}
		rd.r = r
		return nil
	}
	// A compressed Parquet file (x.parquet.gz) is decompressed into the
	// cache, then read as Parquet.
	inner := bufio.NewReader(r)
	if h, _ := inner.Peek(4); bytes.HasPrefix(h, parquetMagic) {
		return o.openParquet(ctx, rd, inner, nil)
	}
	if strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".zst"), ".parquet") {
		return fmt.Errorf("%s: the name says .parquet but the decompressed content is not Parquet", rd.Name)
	}
	rd.r = inner
	return nil
}

// decompressed marks the errors of a decompressor that come from the
// compressed bytes themselves (cut short, corrupt) rather than from reading
// them: reading again cannot help, and the rows decoded before are good.
type decompressed struct {
	r     io.Reader
	raw   *hashReader
	codec string
}

func (d *decompressed) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF && d.raw.err == nil {
		err = &DamagedError{Codec: d.codec, Err: err}
	}
	return n, err
}

// A DamagedError is a compressed dump whose bytes cannot be decoded past
// some point: the file is cut short or corrupt. Damaged reports true, which
// the dump readers look for (formats.Scanner) without importing storage.
type DamagedError struct {
	Codec string
	Err   error
}

func (e *DamagedError) Error() string {
	if errors.Is(e.Err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("the %s stream ends early (the file is cut short)", e.Codec)
	}
	return fmt.Sprintf("the %s stream is corrupt: %v", e.Codec, e.Err)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// Damaged reports that the error is in the stored bytes.
func (e *DamagedError) Damaged() bool { return true }

// openParquet makes rd read the rows of the Parquet file whose bytes are
// r. Parquet needs random access: a local file is read in place; anything
// else is first copied into the cache (or, without a cache, a temporary
// file), hashing it on the way.
func (o *Opener) openParquet(ctx context.Context, rd *Reader, r io.Reader, file *os.File) error {
	var ra io.ReaderAt
	var size int64
	if file != nil && r == nil {
		// The stored file itself: hash it apart, read it in place.
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(file, 0, rd.Size)); err != nil {
			return err
		}
		rd.sum = hex.EncodeToString(h.Sum(nil))
		if rd.Info.sha256 != "" && rd.sum != rd.Info.sha256 {
			return fmt.Errorf("%s: content hash %s differs from the %s the Hub states", rd.Name, rd.sum, rd.Info.sha256)
		}
		ra, size = file, rd.Size
	} else {
		f, remove, err := o.spool()
		if err != nil {
			return err
		}
		rd.closers = append(rd.closers, closerFunc(remove), f)
		if size, err = io.Copy(f, r); err != nil {
			return fmt.Errorf("%s: %w", rd.Name, err)
		}
		if _, err := rd.Sum(); err != nil { // the stored bytes were all read
			return err
		}
		ra = f
	}
	pr, err := parquetJSONL(ctx, ra, size)
	if err != nil {
		return fmt.Errorf("%s: %w", rd.Name, err)
	}
	rd.closers = append(rd.closers, pr)
	rd.r = pr
	rd.Rows = pr.rows
	return nil
}

// spool creates a scratch file for a Parquet file being made local, in the
// cache when there is one, and returns a function that removes it.
func (o *Opener) spool() (*os.File, func() error, error) {
	if o.cache == nil {
		f, err := os.CreateTemp("", "augment-spool-*.parquet")
		if err != nil {
			return nil, nil, err
		}
		return f, func() error { return os.Remove(f.Name()) }, nil
	}
	if err := o.cache.MkdirAll("spool", 0o755); err != nil {
		return nil, nil, err
	}
	name := "spool/" + randomName()
	f, err := o.cache.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return f, func() error { return o.cache.Remove(name) }, nil
}

func randomName() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
