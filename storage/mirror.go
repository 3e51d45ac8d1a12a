package storage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
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
//     copy lacks or holds otherwise (a run resumed on another machine
//     starts from the prefix), then uploads what the local copy holds and
//     the prefix lacks or holds at an older version (files committed by a
//     run killed, or failing to upload, before they went up). Which of two
//     versions is newer is told by the local copy's record of what it
//     uploaded and fetched (syncLogName): a local file that differs from
//     an object still at the version the copy last had in step with it is
//     newer; any other difference is the prefix's to decide (another
//     machine wrote it since, or the copy has no record).
//   - During the run, every file committed through the output's Root is
//     uploaded and every removal deleted, in commit order: uploads run in
//     parallel, but a manifest.json waits for every upload before it and
//     holds back every one after it, as does a deletion. Since a run commits
//     a stage's files before the manifest that names them, the prefix, like
//     the local directory, never has a manifest naming a file it lacks.
//     Each object is written whole by one PUT (or a multipart, resumable or
//     block upload completed at once: see blobStore.put), so a shard
//     appears whole or not at all.
//   - Close, after the run, uploads what is still out of step: the request
//     cache, closed by then, anything a failed upload left behind, and any
//     file rewritten since it was last in step by a writer the Root does
//     not see (report.html and the dataset cards are written that way).
//
// The local lock file and Hub downloads (cache/sources/) are not mirrored.

// mirrorPartSize is the part size of multipart uploads, and so the memory
// one upload holds; files up to it go in one PUT.
const mirrorPartSize = 16 << 20

// mirrorUploads is how many uploads run at once.
const mirrorUploads = 4

// A Mirror mirrors a local directory into a prefix of object storage. It
// implements atomicfs.Observer.
//
// Several processes may share one prefix (the workers of a run): each
// mirrors its own local copy, takes its lease of the prefix (Lock,
// lease.go) and brings in what the others published (Fetch).
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
	synced map[string]syncState // local names known equal to their object
	err    error                // the first failure
	record *os.File             // the open syncLogName, once Pull has opened it
	noted  map[string]string    // what the record says of each name

	snapping sync.Map // names with a Snapshot queued or running
	snapped  sync.Map // name → snapTimes of its last Snapshot
	lease    *Lease   // held while the mirror writes (Lock)
}

// A syncState is what a mirror knows of a local file equal to its object.
type syncState struct {
	etag string      // the object's ETag ("" when unknown)
	file fs.FileInfo // the local file as it was then
}

// current reports whether the local file, as fi describes it now, is
// still the one that was in step: the same file (a commit replaces a file
// by renaming another over it), size and modification time.
func (st syncState) current(fi fs.FileInfo) bool {
	return st.file != nil && os.SameFile(st.file, fi) && st.file.Size() == fi.Size() && st.file.ModTime().Equal(fi.ModTime())
}

type mirrorOp struct {
	name     string
	remove   bool
	flush    chan struct{}                 // closed once every operation before it is done
	snapshot func(io.Writer) (bool, error) // writes the content to upload as name (Snapshot)
	// content and stat are a manifest's bytes as committed: its upload
	// waits for the files committed before it, and by then the local
	// file may already name files committed after it (Committed).
	content []byte
	stat    fs.FileInfo
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

// mirrored reports whether a local name belongs in the prefix: not the
// local lock files (.augment/lock, .augment/lock-worker-…), the leases
// that stand for them in the prefix (lease.go), the local copy's record
// of what it has in step (syncLogName), Hub downloads or temporary files.
func mirrored(name string) bool {
	base := path.Base(name)
	return !strings.HasPrefix(name, ".augment/lock") && !strings.HasPrefix(name, leasePrefix) && name != syncLogName &&
		!strings.HasPrefix(name, "cache/sources/") && name != "cache/sources" &&
		!strings.HasPrefix(base, ".tmp-")
}

// isManifest reports whether name is a manifest: a stage's manifest.json
// or a worker's part of one (.augment/workers/…). A manifest names files
// committed before it, so it is uploaded after them.
func isManifest(name string) bool {
	return path.Base(name) == "manifest.json" || strings.HasPrefix(name, ".augment/workers/")
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
	// The first object outside .augment/ tells. Objects under .augment/
	// alone (a lease, the marker) are augment's: workers starting together
	// take their leases before the first of them has uploaded anything.
	var foreign string
	for obj, err := range s.list(ctx, loc.Bucket, m.object(""), 0) {
		if err != nil {
			if !errors.As(err, new(*NotFoundError)) {
				return err
			}
			return &NotFoundError{Loc: what, Detail: "no such bucket"}
		}
		if !strings.HasPrefix(strings.TrimPrefix(obj.Key, m.object("")), ".augment/") {
			foreign = obj.Key
			break
		}
	}
	if foreign == "" {
		return nil
	}
	if _, err := s.stat(ctx, m.at(".augment/output-dir")); err != nil {
		if errors.As(err, new(*NotFoundError)) {
			return &ForeignPrefixError{Loc: what, Object: foreign}
		}
		return err
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
		ops: make(chan mirrorOp, 1024), done: make(chan struct{}), synced: map[string]syncState{}}
	go m.run()
	return m, nil
}

// Pull makes the local directory hold what the prefix holds, except the
// local files newer than their objects (see above), then queues the
// uploads of what the prefix lacks or holds at an older version (data
// files before manifests). From here on the mirror keeps its record of
// what it has in step.
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
	had, err := m.openRecord(remote)
	if err != nil {
		return err
	}
	fetched, newer := 0, 0
	for _, name := range slices.Sorted(maps.Keys(remote)) {
		obj := remote[name]
		fi, same, err := m.sameAsLocal(name, obj)
		if err != nil {
			return err
		}
		if same {
			m.markSynced(name, obj.ETag, fi)
			continue
		}
		if fi != nil && had[name] != "" && had[name] == strings.Trim(obj.ETag, `"`) {
			// The object is still the version this copy last had in
			// step: the local file was committed after it and has not
			// gone up (a failed upload, a killed run). It goes up now.
			newer++
			continue
		}
		if path.Base(name) == cacheDBName && fi != nil {
			// Both hold answers: the local cache file is kept, the
			// object joins it as a segment of its own (looked up, never
			// written), so no answer paid for is lost either way. It is
			// named by its content (MD5) where the store states it, else
			// by its ETag (S3 multipart), never by a GCS generation's
			// leading digits, which two versions may share.
			name = fmt.Sprintf("cache/segments/pulled-%.12s/%s", cmp.Or(obj.MD5, strings.Trim(obj.ETag, `"`)), cacheDBName)
			if _, same, err := m.sameAsLocal(name, obj); err != nil || same {
				continue
			}
			if _, _, err := m.download(ctx, name, obj); err != nil {
				return objectError(Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: obj.Key}, err)
			}
			fetched++
			continue // not synced: it goes up under its own name
		}
		got, fi, err := m.download(ctx, name, obj)
		if err != nil {
			return objectError(Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: obj.Key}, err)
		}
		m.markSynced(name, got.ETag, fi)
		fetched++
	}
	if fetched > 0 {
		m.log.Info("output pulled from object storage", "dir", m.String(), "files", fetched)
	}
	if newer > 0 {
		m.log.Info("output: local files newer than their objects go up", "dir", m.String(), "files", newer)
	}
	return m.catchUp(false)
}

// cacheDBName is the request cache's file (llm.CacheFile), in the cache
// directory and in each of its segments.
const cacheDBName = "llm-cache.db"

func (m *Mirror) exists(name string) bool {
	_, err := m.local.Stat(name)
	return err == nil
}

// syncLogName is the local copy's record of what it had in step with the
// prefix, kept from run to run (not mirrored): JSON Lines of
// {"name","etag"}, each saying that the local file name was, when the
// line was written, the bytes of its object at that ETag; an empty etag
// forgets the name (its object was deleted). The last line of a name
// holds. The record only ever makes a local file win over an object it
// is newer than: a line lost (a crash before it was written, a damaged
// last line) leaves the prefix to decide, as with no record at all.
const syncLogName = ".augment/mirrored.jsonl"

type syncLine struct {
	Name string `json:"name"`
	ETag string `json:"etag"`
}

// openRecord reads the record of an earlier run, rewrites it without the
// lines later ones replaced and the names the prefix no longer holds, and
// keeps it open to add to. It returns the ETag each name had in step.
func (m *Mirror) openRecord(remote map[string]blobObject) (map[string]string, error) {
	had := map[string]string{}
	b, err := m.local.ReadFile(syncLogName)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for line := range strings.Lines(string(b)) {
		var l syncLine
		if json.Unmarshal([]byte(line), &l) != nil || l.Name == "" {
			continue // a line cut short by a crash
		}
		if _, ok := remote[l.Name]; !ok || l.ETag == "" {
			delete(had, l.Name)
		} else {
			had[l.Name] = l.ETag
		}
	}
	var out bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(had)) {
		line, _ := json.Marshal(syncLine{name, had[name]})
		out.Write(append(line, '\n'))
	}
	if err := m.local.MkdirAll(path.Dir(syncLogName), 0o755); err != nil {
		return nil, err
	}
	tmp := path.Join(path.Dir(syncLogName), ".tmp-"+path.Base(syncLogName)+"-"+randomName()[:16])
	if err := m.local.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if err := m.local.Rename(tmp, syncLogName); err != nil {
		m.local.Remove(tmp)
		return nil, err
	}
	f, err := m.local.OpenFile(syncLogName, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.record, m.noted = f, maps.Clone(had)
	m.mu.Unlock()
	return had, nil
}

// note adds a line to the record (under m.mu). A failed write is only
// logged: the record then leaves the prefix to decide (see syncLogName).
func (m *Mirror) note(name, etag string) {
	if m.record == nil || m.noted[name] == etag {
		return
	}
	if etag == "" {
		delete(m.noted, name)
	} else {
		m.noted[name] = etag
	}
	line, _ := json.Marshal(syncLine{name, etag})
	if _, err := m.record.Write(append(line, '\n')); err != nil {
		m.log.Warn("object storage mirror: the record of what is in step was not written", "file", syncLogName, "error", err)
		m.record.Close()
		m.record = nil
	}
}

// closeRecord closes the record (under m.mu).
func (m *Mirror) closeRecord() {
	if m.record != nil {
		m.record.Close()
		m.record = nil
	}
}

// Fetch brings into the local directory what other processes sharing the
// prefix (the workers of one run) published under dir, a folder relative
// to it ("" for all), and keep accepts (nil: everything): every object the
// local copy lacks, or holds at an ETag since replaced. A local file this
// mirror has not uploaded yet (this process's own, newer) is kept. Each
// download is checked against the size and content hash of the version
// the GET returned (see download), and lands whole (rename). Objects are
// fetched data first, manifests last, so a fetched manifest never names a
// file this fetch skipped.
func (m *Mirror) Fetch(ctx context.Context, dir string, keep func(name string) bool) error {
	prefix := m.object("")
	under := prefix
	if dir != "" && dir != "." {
		under = m.object(strings.Trim(dir, "/") + "/")
	}
	var data, manifests []blobObject
	for obj, err := range m.s.list(ctx, m.loc.Bucket, under, 0) {
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(obj.Key, prefix)
		if !fs.ValidPath(name) || name == "." || !mirrored(name) || keep != nil && !keep(name) {
			continue
		}
		if isManifest(name) {
			manifests = append(manifests, obj)
		} else {
			data = append(data, obj)
		}
	}
	for _, obj := range append(data, manifests...) {
		name := strings.TrimPrefix(obj.Key, prefix)
		m.mu.Lock()
		st, synced := m.synced[name]
		m.mu.Unlock()
		switch {
		case synced && st.etag == strings.Trim(obj.ETag, `"`):
			continue // the same object as the local file
		case !synced && m.exists(name):
			continue // committed here, not uploaded yet: ours wins
		}
		got, fi, err := m.download(ctx, name, obj)
		if err != nil {
			return objectError(Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: obj.Key}, err)
		}
		m.markSynced(name, got.ETag, fi)
	}
	return nil
}

// catchUp queues an upload of every local file not known to be in step,
// manifests last: never in step, or rewritten since. The request cache is
// left out unless withCache: it may be open.
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
		if !d.Type().IsRegular() || !mirrored(p) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since; its removal is queued
		}
		if err != nil {
			return err
		}
		if m.inStep(p, fi) {
			return nil
		}
		if isManifest(p) {
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

// sameAsLocal reports whether the local file name has the object's size
// and content hash (blobStore.same), and describes the local file (nil
// when there is none).
func (m *Mirror) sameAsLocal(name string, obj blobObject) (fs.FileInfo, bool, error) {
	f, err := m.local.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != obj.Size {
		return fi, false, nil
	}
	same, err := m.s.same(f, obj)
	return fi, same, err
}

// download writes an object into the local directory, atomically, and
// returns the version it wrote. The object may have been replaced since
// it was listed as obj (another worker rewrote its part of a manifest):
// what is written is the version the GET returned (blobStore.get), its
// stream resumed from where it stopped when cut off or stalled, bound to
// that version, as a source's is (getResuming), and checked against that
// version's size and content hash (blobStore.same: the MD5 the store
// states, or S3's multipart ETag for the part sizes uploads use). fi
// describes the local file written.
func (m *Mirror) download(ctx context.Context, name string, obj blobObject) (got blobObject, fi fs.FileInfo, err error) {
	if err := m.local.MkdirAll(path.Dir(name), 0o755); err != nil {
		return blobObject{}, nil, err
	}
	body, got, err := getResuming(ctx, m.s, Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: obj.Key}, m.log.Warn)
	if err != nil {
		return blobObject{}, nil, err
	}
	defer body.Close()
	tmp := path.Join(path.Dir(name), ".tmp-"+path.Base(name)+"-"+randomName()[:16])
	f, err := m.local.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return blobObject{}, nil, err
	}
	n, err := io.Copy(f, body)
	if err == nil && n != got.Size {
		err = fmt.Errorf("got %d of %d bytes", n, got.Size)
	}
	if err == nil {
		err = m.check(f, got)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		fi, err = f.Stat() // a rename keeps what a syncState compares
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = m.local.Rename(tmp, name)
	}
	if err != nil {
		m.local.Remove(tmp)
		return got, nil, err
	}
	return got, fi, nil
}

// objectError names the object loc in err, unless err starts by naming
// it already, as the stores' errors do.
func objectError(loc Location, err error) error {
	if strings.HasPrefix(err.Error(), loc.String()+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", loc, err)
}

// check compares the bytes of f with the content hash of obj: a
// mismatch is an error when the store states the object's MD5; an object
// whose hash cannot be computed here (an S3 multipart upload in parts of a
// size none of ours) is checked by its size only, with a warning.
func (m *Mirror) check(f *os.File, obj blobObject) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	same, err := m.s.same(f, obj)
	switch {
	case err != nil || same:
		return err
	case obj.MD5 != "":
		return fmt.Errorf("the bytes received do not have the object's MD5 %s", obj.MD5)
	}
	m.log.Warn("object storage: an object's content hash could not be checked (size checked only)", "object", obj.Key, "etag", obj.ETag)
	return nil
}

// markSynced records that the local file name, as fi describes it, is
// the object with etag.
func (m *Mirror) markSynced(name, etag string, fi fs.FileInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	etag = strings.Trim(etag, `"`)
	m.synced[name] = syncState{etag: etag, file: fi}
	if etag != "" {
		m.note(name, etag)
	}
}

func (m *Mirror) unsync(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.synced, name)
}

// forget drops what is known of name and everything below it (its
// objects were deleted).
func (m *Mirror) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	below := func(n string) bool { return n == name || strings.HasPrefix(n, name+"/") }
	maps.DeleteFunc(m.synced, func(n string, _ syncState) bool { return below(n) })
	for n := range m.noted {
		if below(n) {
			m.note(n, "")
		}
	}
}

// inStep reports whether the local file name, as fi describes it, is
// known to be its object.
func (m *Mirror) inStep(name string, fi fs.FileInfo) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.synced[name]
	return ok && st.current(fi)
}

// Committed queues the upload of name (atomicfs.Observer).
func (m *Mirror) Committed(name string) {
	op := mirrorOp{name: name}
	if isManifest(name) && mirrored(name) {
		// Read now: uploaded as it is when its turn comes, it could
		// name parts queued behind it, and the prefix would hold a
		// manifest naming objects it lacks. A manifest is small.
		if b, fi, err := m.readLocal(name); err == nil {
			op.content, op.stat = b, fi
		}
	}
	m.enqueue(op)
}

// readLocal returns the bytes and the file info of the local file name.
func (m *Mirror) readLocal(name string) ([]byte, fs.FileInfo, error) {
	f, err := m.local.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(f)
	return b, fi, err
}

// Removed queues the deletion of name and anything below it
// (atomicfs.Observer).
func (m *Mirror) Removed(name string) { m.enqueue(mirrorOp{name: name, remove: true}) }

func (m *Mirror) enqueue(op mirrorOp) {
	if op.flush == nil {
		if !mirrored(op.name) {
			return
		}
		if op.snapshot == nil {
			m.unsync(op.name)
		}
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
	return op.flush != nil || op.remove || isManifest(op.name)
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
		if op.snapshot != nil {
			m.snapping.Delete(op.name)
		}
		return // what is left is uploaded by the next run's Pull
	}
	var err error
	switch {
	case op.snapshot != nil:
		err = m.putSnapshot(op.name, op.snapshot)
	case op.remove:
		err = m.remove(op.name)
	case op.content != nil:
		var obj blobObject
		if obj, err = m.s.put(m.ctx, m.at(op.name), bytes.NewReader(op.content), int64(len(op.content)), anyVersion); err == nil {
			m.markSynced(op.name, obj.ETag, op.stat)
		}
	default:
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
	obj, err := m.s.put(m.ctx, m.at(name), f, fi.Size(), anyVersion)
	if err != nil {
		return err
	}
	m.markSynced(name, obj.ETag, fi)
	return nil
}

// Upload copies the local file name to its object now, before anything
// queued (the output directory's marker, which must be in the prefix
// before any other file of the run).
func (m *Mirror) Upload(name string) error {
	if err := m.upload(name); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Snapshot queues the upload, as the object of name, of what write writes:
// a consistent copy of a file that is open and changing (the request
// cache), which the mirror otherwise uploads only at Close. A snapshot of
// name queued or running, or one queued less than every ago (or less
// than ten times the last one's upload time: a big file takes at most a
// tenth of the time), makes this one a no-op: snapshots never pile up.
// The copy is spooled into a temporary file of the local directory (not
// mirrored) and uploaded whole; write returning false uploads nothing.
func (m *Mirror) Snapshot(name string, every time.Duration, write func(io.Writer) (bool, error)) {
	if !mirrored(name) {
		return
	}
	if v, ok := m.snapped.Load(name); ok {
		last := v.(snapTimes)
		if time.Since(last.queued) < max(every, 10*last.took) {
			return
		}
	}
	if _, busy := m.snapping.LoadOrStore(name, true); busy {
		return
	}
	m.snapped.Store(name, snapTimes{queued: time.Now()})
	m.enqueue(mirrorOp{name: name, snapshot: write})
}

// snapTimes is when the last snapshot of a file was queued and how long
// its upload took.
type snapTimes struct {
	queued time.Time
	took   time.Duration
}

func (m *Mirror) putSnapshot(name string, write func(io.Writer) (bool, error)) error {
	defer m.snapping.Delete(name)
	if err := m.local.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	tmp := path.Join(path.Dir(name), ".tmp-snapshot-"+path.Base(name)+"-"+randomName()[:16])
	f, err := m.local.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer m.local.Remove(tmp)
	defer f.Close()
	if ok, err := write(f); err != nil || !ok {
		return err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	start := time.Now()
	_, err = m.s.put(m.ctx, m.at(name), f, size, anyVersion)
	if v, ok := m.snapped.Load(name); ok {
		m.snapped.Store(name, snapTimes{queued: v.(snapTimes).queued, took: time.Since(start)})
	}
	return err
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
	m.forget(name)
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
	if m.lease != nil {
		err = errors.Join(err, m.lease.release())
	}
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeRecord()
	m.log.Info("output mirrored to object storage", "dir", m.String(), "seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	return errors.Join(err, m.err)
}

// Discard stops the mirror without uploading anything more (the run did
// not get the prefix's lease). It holds no lease.
func (m *Mirror) Discard() {
	m.sendMu.Lock()
	if !m.closed {
		m.closed = true
		m.mu.Lock()
		m.err = cmp.Or(m.err, errors.New("discarded"))
		m.mu.Unlock()
		close(m.ops)
	}
	m.sendMu.Unlock()
	<-m.done
	m.cancel()
	m.mu.Lock()
	m.closeRecord()
	m.mu.Unlock()
}

// String is the prefix as a URL.
func (m *Mirror) String() string {
	if m.loc.Key == "" {
		return m.loc.Kind.Scheme() + "://" + m.loc.Bucket
	}
	return m.loc.Kind.Scheme() + "://" + m.loc.Bucket + "/" + m.loc.Key
}
