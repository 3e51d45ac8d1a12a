package storage

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync/atomic"
	"time"
)

// A blobStore is one object store (S3, Google Cloud Storage, Azure Blob
// Storage) as the Opener and the Mirror use it. Every implementation keeps
// the same contracts, so neither grows per-store branches:
//
//   - stat and list describe objects; stat of a missing object or bucket
//     returns a *NotFoundError, a refusal an *AuthError.
//   - open streams an object from byte off (a range request) and only the
//     version obj describes (its ETag or generation): an object replaced
//     since fails with an error saying so, instead of mixing two versions.
//   - get reads an object whole at whatever version is current and
//     describes the version its bytes are (size, ETag, MD5, Modified), from
//     the very answer that carries them (or, for GCS, from the metadata the
//     read is then bound to): an object replaced meanwhile is not mixed up
//     with its successor.
//   - put writes an object whole or not at all: one request for small
//     files, else a multipart (S3), resumable (GCS) or block (Azure) upload
//     that becomes visible only when it is completed, holding one part in
//     memory at most. It returns the stored version (ETag). With a
//     condition (cond, up to mirrorPartSize bytes) it is a compare-and-swap
//     the store decides: create only if absent, or replace only if the
//     object is still at a version; one that fails is an error wrapping
//     errConditionFailed.
//   - remove deletes an object; a missing one is not an error.
//   - same reports whether local bytes equal obj's, by the content hash the
//     store keeps (MD5 in all three), reading the local bytes.
type blobStore interface {
	stat(ctx context.Context, loc Location) (blobObject, error)
	open(ctx context.Context, loc Location, obj blobObject, off int64) (io.ReadCloser, error)
	get(ctx context.Context, loc Location) (io.ReadCloser, blobObject, error)
	put(ctx context.Context, loc Location, r io.ReaderAt, size int64, cond putCond) (blobObject, error)
	list(ctx context.Context, bucket, prefix string, max int) iter.Seq2[blobObject, error]
	remove(ctx context.Context, loc Location) error
	same(local io.ReadSeeker, obj blobObject) (bool, error)
}

// A blobObject describes one stored object.
type blobObject struct {
	Key  string
	Size int64
	// ETag is what a read is bound to: S3's and Azure's ETag, GCS's
	// generation.
	ETag string
	// Version is S3's version ID on a versioned bucket, else "".
	Version string
	// MD5 is the content's MD5 as the store states it, hex; "" when it
	// states none (S3 multipart uploads: see s3Store.same).
	MD5 string
	// Modified is when the store last wrote the object (always set by
	// get; by the others where the answer says).
	Modified time.Time
}

// A putCond makes a put conditional on the object's current version.
type putCond struct {
	absent bool   // only if no object exists
	match  string // only if the object's ETag (GCS: generation) is still this
}

// anyVersion is an unconditional put; ifAbsent creates only.
var anyVersion, ifAbsent = putCond{}, putCond{absent: true}

// ifMatch replaces only the version etag.
func ifMatch(etag string) putCond { return putCond{match: etag} }

func (c putCond) set() bool { return c.absent || c.match != "" }

// errConditionFailed is wrapped by the error of a conditional put whose
// condition the store found false (or, replacing, whose object is gone).
var errConditionFailed = errors.New("the object is not at the version the write was conditional on")

// checkCond refuses a condition on an upload of several requests (the
// stores decide conditions per request).
func checkCond(loc Location, size int64, cond putCond) error {
	if cond.set() && size > mirrorPartSize {
		return fmt.Errorf("%s: a conditional write of %d bytes (at most %d)", loc, size, mirrorPartSize)
	}
	return nil
}

// pin is what the manifest records of a stored object: its URL and what
// the read was bound to.
func (b blobObject) pin(loc Location) string {
	p := loc.String()
	switch loc.Kind {
	case GCS:
		return p + "#generation=" + b.ETag
	case S3:
		p += "#etag=" + strings.Trim(b.ETag, `"`)
		if b.Version != "" && b.Version != "null" {
			p += "&version=" + b.Version
		}
		return p
	}
	return p + "#etag=" + strings.Trim(b.ETag, `"`)
}

// errObjectChanged is wrapped by the error of a read whose object was
// replaced since it was pinned.
var errObjectChanged = errors.New("the object changed while the run read it (its version is no longer the one checked); run again")

func errChanged(loc Location) error { return fmt.Errorf("%s: %w", loc, errObjectChanged) }

// store returns the client of loc's kind, made once per Opener.
func (o *Opener) store(k Kind) (blobStore, error) {
	o.storeMu.Lock()
	defer o.storeMu.Unlock()
	if s, ok := o.stores[k]; ok {
		return s, nil
	}
	var s blobStore
	var err error
	switch k {
	case S3:
		s, err = newS3(o.o.S3, o.o.Getenv, o.o.Transport)
	case GCS:
		s, err = newGCS(o.o.GCS, o.o.Getenv, o.o.Transport)
	case Azure:
		s, err = newAzure(o.o.Azure, o.o.Getenv, o.o.Transport)
	default:
		err = fmt.Errorf("kind %d is not object storage", k)
	}
	if err != nil {
		return nil, err
	}
	if o.stores == nil {
		o.stores = map[Kind]blobStore{}
	}
	o.stores[k] = s
	return s, nil
}

// statBlob describes an object. The pin names the object and its version,
// so a run reads exactly the object it checked.
func (o *Opener) statBlob(ctx context.Context, loc Location) (Info, error) {
	s, err := o.store(loc.Kind)
	if err != nil {
		return Info{}, err
	}
	obj, err := s.stat(ctx, loc)
	if err != nil {
		return Info{}, err
	}
	return Info{Name: loc.Name(), Size: obj.Size, Pin: obj.pin(loc), obj: obj}, nil
}

// blobReadTries is how many times a stream cut off mid-object is resumed
// (a range request from where it stopped, bound to the same version).
const blobReadTries = 4

// blobStall is how long a stream may deliver no byte before it is taken
// for cut and resumed: a connection that stays open but silent would
// otherwise hold the run forever (the transport's timeout covers the
// answer's headers only).
var blobStall = 2 * time.Minute

// openBlob streams the object described by info, resuming a stream that
// breaks off or stalls.
func (o *Opener) openBlob(ctx context.Context, loc Location, info Info) (io.ReadCloser, error) {
	s, err := o.store(loc.Kind)
	if err != nil {
		return nil, err
	}
	r := &resumingBody{ctx: ctx, s: s, loc: loc, obj: info.obj, log: o.o.Log.Warn}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// getResuming is blobStore.get whose stream resumes as openBlob's does,
// bound to the version the GET returned.
func getResuming(ctx context.Context, s blobStore, loc Location, log func(string, ...any)) (io.ReadCloser, blobObject, error) {
	sctx, cancel := context.WithCancel(ctx)
	body, obj, err := s.get(sctx, loc)
	if err != nil {
		cancel()
		return nil, blobObject{}, err
	}
	r := &resumingBody{ctx: ctx, s: s, loc: loc, obj: obj, log: log}
	r.watchStream(body, cancel)
	return r, obj, nil
}

// resumingBody reads an object, reopening it at the offset reached when
// the connection fails or stays silent for blobStall (the store's answer
// to a changed object, or a refusal, is not retried). A stream still cut
// off after blobReadTries is an *UnavailableError naming the object and
// its store, saying that a rerun tries again.
type resumingBody struct {
	ctx     context.Context
	s       blobStore
	loc     Location
	obj     blobObject
	body    io.ReadCloser
	off     int64
	tries   int
	log     func(msg string, args ...any)
	cancel  context.CancelFunc // ends the current stream
	watch   *time.Timer        // cancels it after blobStall without a byte
	stalled atomic.Bool
}

// open opens the object from r.off, with a watch on the stream.
func (r *resumingBody) open() error {
	sctx, cancel := context.WithCancel(r.ctx)
	body, err := r.s.open(sctx, r.loc, r.obj, r.off)
	if err != nil {
		cancel()
		return err
	}
	r.watchStream(body, cancel)
	return nil
}

// watchStream makes body, which cancel ends, the current stream, taken
// for cut after blobStall without a byte.
func (r *resumingBody) watchStream(body io.ReadCloser, cancel context.CancelFunc) {
	r.body, r.cancel = body, cancel
	r.watch = time.AfterFunc(blobStall, func() {
		r.stalled.Store(true)
		cancel()
	})
}

// stop ends the current stream and its watch.
func (r *resumingBody) stop() {
	r.watch.Stop()
	r.cancel()
	r.body.Close()
}

// storeNames name the stores in errors.
var storeNames = map[Kind]string{S3: "S3", GCS: "Google Cloud Storage", Azure: "Azure Blob Storage"}

func (r *resumingBody) Read(p []byte) (int, error) {
	for {
		n, err := r.body.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.watch.Reset(blobStall)
		}
		if err == nil || err == io.EOF {
			if err == io.EOF && r.obj.Size >= 0 && r.off != r.obj.Size {
				err = io.ErrUnexpectedEOF
			} else {
				return n, err
			}
		}
		if n > 0 {
			return n, nil // the error comes back on the next Read
		}
		if r.stalled.Swap(false) {
			err = fmt.Errorf("no byte arrived for %v: %w", blobStall, err)
		}
		var nf *NotFoundError
		var auth *AuthError
		if r.ctx.Err() != nil || errors.As(err, &nf) || errors.As(err, &auth) || errors.Is(err, errObjectChanged) {
			return 0, err
		}
		if r.tries+1 >= blobReadTries {
			return 0, &UnavailableError{Err: fmt.Errorf("%s: reading it from %s was cut off %d times (at byte %d of %d; a rerun tries again): %w",
				r.loc, storeNames[r.loc.Kind], r.tries+1, r.off, r.obj.Size, err)}
		}
		r.tries++
		r.log("object storage read cut off; resuming", "object", r.loc.String(), "offset", r.off, "error", err)
		r.stop()
		if oerr := r.open(); oerr != nil {
			r.body = io.NopCloser(strings.NewReader("")) // the old stream is stopped
			return 0, oerr
		}
	}
}

func (r *resumingBody) Close() error {
	r.watch.Stop()
	err := r.body.Close()
	r.cancel()
	return err
}

// localMD5 is the hex MD5 of what is left of r.
func localMD5(r io.Reader) (string, error) {
	h := md5.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// sameMD5 compares local bytes with a stated MD5 (hex).
func sameMD5(local io.Reader, stated string) (bool, error) {
	if stated == "" {
		return false, nil
	}
	got, err := localMD5(local)
	return err == nil && got == stated, err
}
