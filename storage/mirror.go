package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// A run whose output.dir is on object storage (s3://bucket/prefix,
// gs://bucket/prefix, azblob://container/prefix) works in a local directory
// (output.work_dir) exactly as with a local output, and a Mirror keeps the
// prefix a copy of it:
//
//   - Pull, before the run, fetches what the prefix holds and the local
//     copy lacks (a run resumed on another machine starts from the
//     prefix), then uploads what the local copy holds and the prefix lacks
//     (files committed by a run killed before it could upload them).
//   - During the run, every file committed through the output's Root is
//     uploaded and every removal deleted, in commit order: uploads run in
//     parallel, but a manifest.json waits for every upload before it and
//     holds back every one after it, as does a deletion. Since a run commits
//     a stage's files before the manifest that names them, the prefix, like
//     the local directory, never has a manifest naming a file it lacks.
//     Each object is written whole by one PUT (or a multipart, resumable or
//     block upload completed at once: see blobStore.put), so a shard
//     appears whole or not at all.
//   - Close, after the run, uploads what is still out of step (the request
//     cache, closed by then, and anything a failed upload left behind).
//
// The local lock file and Hub downloads (cache/sources/) are not mirrored.

// mirrorPartSize is the part size of multipart uploads, and so the memory
// one upload holds; files up to it go in one PUT.
const mirrorPartSize = 16 << 20

// mirrorUploads is how many uploads run at once.
const mirrorUploads = 4

// A Mirror mirrors a local directory into a prefix of object storage. It
// implements atomicfs.Observer.
type Mirror struct {
	s      blobStore
	loc    Location // Key is the prefix, without a trailing slash
	local  *os.Root
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	ops    chan mirrorOp
	done   chan struct{}
	sendMu sync.RWMutex // held to send on ops; Close takes it to close ops
	closed bool         // under sendMu

	mu     sync.Mutex
	synced map[string]bool // local names known equal to their object
	err    error           // the first failure
}

type mirrorOp struct {
	name   string
	remove bool
	flush  chan struct{} // closed once every operation before it is done
}

// OutputLocation parses an output.dir on object storage ("s3://bucket" or
// "s3://bucket/prefix", a trailing slash allowed; gs:// and azblob:// the
// same). ok is false for a local path; a URL that cannot hold outputs is an
// error.
func OutputLocation(dir string) (loc Location, ok bool, err error) {
	if !IsRemote(dir) {
		return Location{}, false, nil
	}
	trimmed := strings.TrimRight(dir, "/")
	for _, sch := range []string{"s3://", "gs://", "azblob://"} {
		if b, found := strings.CutPrefix(strings.ToLower(trimmed), sch); found && !strings.Contains(b, "/") {
			trimmed += "/" + "x" // a whole bucket: parse as an object, then drop the key
			loc, err = Parse(trimmed)
			loc.Key = ""
			return loc, err == nil, err
		}
	}
	loc, err = Parse(trimmed)
	if err != nil {
		return Location{}, false, err
	}
	if !loc.Kind.IsBlob() {
		return Location{}, false, fmt.Errorf("%s: outputs go to a local directory, s3://, gs:// or azblob:// (the Hub is read here, not written)", dir)
	}
	return loc, true, nil
}

// object is the key of a local name.
func (m *Mirror) object(name string) string {
	if m.loc.Key == "" {
		return name
	}
	return m.loc.Key + "/" + name
}

// mirrored reports whether a local name belongs in the prefix.
func mirrored(name string) bool {
	base := path.Base(name)
	return name != ".augment/lock" && !strings.HasPrefix(name, "cache/sources/") && name != "cache/sources" &&
		!strings.HasPrefix(base, ".tmp-")
}

// CheckOutput reports whether the prefix of an output on object storage
// can be listed and is augment's: empty, or holding augment's marker
// (.augment/output-dir), as a local output directory must be.
func (o *Opener) CheckOutput(ctx context.Context, loc Location) error {
	s, err := o.store(loc.Kind)
	if err != nil {
		return err
	}
	m := &Mirror{loc: loc}
	what := m.String()
	// The first object, if any, tells.
	for obj, err := range s.list(ctx, loc.Bucket, m.object(""), 1) {
		if err != nil {
			if !errors.As(err, new(*NotFoundError)) {
				return err
			}
			return fmt.Errorf("%s: no such bucket", what)
		}
		if _, err := s.stat(ctx, m.at(".augment/output-dir")); err != nil {
			if errors.As(err, new(*NotFoundError)) {
				return fmt.Errorf("%s holds objects augment did not write (%s …); set output.dir to a new or empty prefix", what, obj.Key)
			}
			return err
		}
		break
	}
	return nil
}

// at is the location of a local name.
func (m *Mirror) at(name string) Location {
	return Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: m.object(name)}
}

// NewMirror returns a Mirror of local into the object storage location
// loc (from OutputLocation). Nothing moves until Pull.
func (o *Opener) NewMirror(loc Location, local *os.Root) (*Mirror, error) {
	s, err := o.store(loc.Kind)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mirror{s: s, loc: loc, local: local, log: o.o.Log, ctx: ctx, cancel: cancel,
		ops: make(chan mirrorOp, 1024), done: make(chan struct{}), synced: map[string]bool{}}
	go m.run()
	return m, nil
}

// Pull makes the local directory hold what the prefix holds, then queues
// the uploads of what the prefix lacks (data files before manifests).
func (m *Mirror) Pull(ctx context.Context) error {
	remote := map[string]blobObject{}
	prefix := m.object("")
	for obj, err := range m.s.list(ctx, m.loc.Bucket, prefix, 0) {
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(obj.Key, prefix)
		if !fs.ValidPath(name) || name == "." || !mirrored(name) {
			continue
		}
		remote[name] = obj
	}
	fetched := 0
	for _, name := range slices.Sorted(mapKeys(remote)) {
		obj := remote[name]
		same, err := m.sameAsLocal(name, obj)
		if err != nil {
			return err
		}
		if same {
			m.markSynced(name, true)
			continue
		}
		if err := m.download(ctx, name, obj); err != nil {
			return fmt.Errorf("%s: %w", m.loc.Bucket+"/"+obj.Key, err)
		}
		m.markSynced(name, true)
		fetched++
	}
	if fetched > 0 {
		m.log.Info("output pulled from object storage", "dir", m.String(), "files", fetched)
	}
	return m.catchUp(false)
}

// catchUp queues an upload of every local file not known to be in step,
// manifests last. The request cache is left out unless withCache: it may
// be open.
func (m *Mirror) catchUp(withCache bool) error {
	var data, manifests []string
	err := fs.WalkDir(m.local.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == "cache/sources" || p == "cache" && !withCache {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !mirrored(p) || m.isSynced(p) {
			return nil
		}
		if path.Base(p) == "manifest.json" {
			manifests = append(manifests, p)
		} else {
			data = append(data, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range append(data, manifests...) {
		m.Committed(name)
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sameAsLocal reports whether the local file name has the object's size
// and content hash (blobStore.same).
func (m *Mirror) sameAsLocal(name string, obj blobObject) (bool, error) {
	f, err := m.local.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != obj.Size {
		return false, err
	}
	return m.s.same(f, obj)
}

// download writes an object into the local directory, atomically.
func (m *Mirror) download(ctx context.Context, name string, obj blobObject) error {
	if err := m.local.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	body, err := m.s.open(ctx, m.at(name), obj, 0)
	if err != nil {
		return err
	}
	defer body.Close()
	tmp := path.Join(path.Dir(name), ".tmp-"+path.Base(name)+"-"+randomName()[:16])
	f, err := m.local.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, body)
	if err == nil && n != obj.Size {
		err = fmt.Errorf("got %d of %d bytes", n, obj.Size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = m.local.Rename(tmp, name)
	}
	if err != nil {
		m.local.Remove(tmp)
	}
	return err
}

func (m *Mirror) markSynced(name string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.synced[name] = true
	} else {
		delete(m.synced, name)
	}
}

func (m *Mirror) isSynced(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.synced[name]
}

// Committed queues the upload of name (atomicfs.Observer).
func (m *Mirror) Committed(name string) { m.enqueue(mirrorOp{name: name}) }

// Removed queues the deletion of name and anything below it
// (atomicfs.Observer).
func (m *Mirror) Removed(name string) { m.enqueue(mirrorOp{name: name, remove: true}) }

func (m *Mirror) enqueue(op mirrorOp) {
	if op.flush == nil {
		if !mirrored(op.name) {
			return
		}
		m.markSynced(op.name, false)
	}
	m.sendMu.RLock()
	defer m.sendMu.RUnlock()
	if !m.closed {
		m.ops <- op
	} else if op.flush != nil {
		close(op.flush)
	}
}

// flush waits until every operation queued so far is done.
func (m *Mirror) flush() {
	ch := make(chan struct{})
	m.enqueue(mirrorOp{flush: ch})
	<-ch
}

// barrier reports whether op must wait for every operation queued before
// it and hold back every one after it.
func barrier(op mirrorOp) bool {
	return op.flush != nil || op.remove || path.Base(op.name) == "manifest.json"
}

// run carries out the queued operations.
func (m *Mirror) run() {
	defer close(m.done)
	var wg sync.WaitGroup
	sem := make(chan struct{}, mirrorUploads)
	for op := range m.ops {
		if barrier(op) {
			wg.Wait()
			m.do(op)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.do(op)
		}()
	}
	wg.Wait()
}

func (m *Mirror) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
		m.log.Error("object storage mirror", "dir", m.String(), "error", err)
	}
}

func (m *Mirror) failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err != nil
}

func (m *Mirror) do(op mirrorOp) {
	if op.flush != nil {
		close(op.flush)
		return
	}
	if m.failed() {
		return // what is left is uploaded by the next run's Pull
	}
	var err error
	if op.remove {
		err = m.remove(op.name)
	} else {
		err = m.upload(op.name)
	}
	if err != nil {
		m.fail(fmt.Errorf("%s: %w", op.name, err))
	}
}

// upload copies the local file name to its object, whole or not at all.
func (m *Mirror) upload(name string) error {
	f, err := m.local.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since; its removal is queued
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if err := m.s.put(m.ctx, m.at(name), f, fi.Size()); err != nil {
		return err
	}
	m.markSynced(name, true)
	return nil
}

// remove deletes the object name and, for a folder, every object below it.
func (m *Mirror) remove(name string) error {
	if err := m.s.remove(m.ctx, m.at(name)); err != nil {
		return err
	}
	for obj, err := range m.s.list(m.ctx, m.loc.Bucket, m.object(name)+"/", 0) {
		if err != nil {
			return err
		}
		if err := m.s.remove(m.ctx, Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: obj.Key}); err != nil {
			return err
		}
	}
	return nil
}

// Close uploads what is still out of step, waits for every operation and
// returns the first failure. A failure leaves the prefix consistent but
// behind the local copy; the next run's Pull brings it up to date.
func (m *Mirror) Close() error {
	start := time.Now()
	m.flush()
	err := m.catchUp(true)
	m.sendMu.Lock()
	m.closed = true
	close(m.ops)
	m.sendMu.Unlock()
	<-m.done
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.Info("output mirrored to object storage", "dir", m.String(), "seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	return errors.Join(err, m.err)
}

// String is the prefix as a URL.
func (m *Mirror) String() string {
	if m.loc.Key == "" {
		return m.loc.Kind.Scheme() + "://" + m.loc.Bucket
	}
	return m.loc.Kind.Scheme() + "://" + m.loc.Bucket + "/" + m.loc.Key
}
