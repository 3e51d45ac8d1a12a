// Package atomicfs is where a run's files are written: a Root confines
// every name to one directory tree (an os.Root), and each file is written
// atomically (a temporary file, fsync, rename, fsync of the folder), with
// its SHA-256 taken on the way, so a crash leaves the old file or the new
// one, never a part. Observers (the object-storage mirror) are told of each
// change.
package atomicfs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// A Root is the directory every file of a run is created, renamed and
// deleted through. It is an os.Root: no name given to its methods can reach
// outside the directory, neither by ".." nor by a symbolic link planted in
// the tree, so a hostile name in a shared pipeline file or a link left in an
// output directory cannot make a run write or delete anything elsewhere.
// (A link inside the tree that points inside it is followed; one that points
// out is an error; a file that is itself a link is replaced by Commit, never
// written through.)
//
// Names are slash-separated and relative to the Root. Sub returns a Root for
// a folder of the same tree (a stage directory); Rel turns a name of a Sub
// into the path relative to the top directory, which is what manifests' FileRefs hold.
// Methods are safe for concurrent use.
type Root struct {
	r      *os.Root
	prefix string   // the folder of this Root inside the top one, "" for the top
	top    string   // the top directory as the OS names it, for messages
	log    *written // set by Track
	obs    Observer // set by Observe
	pend   *pending // set by Deferred
}

// An Observer is told, after the fact and in order, of every file a Root
// (or a Sub of it) committed, renamed or removed, by its path relative to
// the top directory: a mirror of the tree in object storage uploads and
// deletes as told. Its methods must be safe for concurrent use and should
// not block for long.
type Observer interface {
	// Committed says name now has new content.
	Committed(name string)
	// Removed says name, and everything below it for a folder, is gone.
	Removed(name string)
}

// written collects the files committed through a tracked Root.
type written struct {
	mu    sync.Mutex
	names []string
}

// pending holds the files whose Commit a deferred Root left to Flush, in
// the order of their Commit calls.
type pending struct {
	mu    sync.Mutex
	files []*File
}

// OpenRoot opens dir, which must be an existing directory, as a Root.
func OpenRoot(dir string) (*Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Root{r: r, top: dir}, nil
}

// Close releases the directory. Only the top Root is closed; Subs share it.
func (r *Root) Close() error {
	if r.prefix != "" {
		return nil
	}
	return r.r.Close()
}

// Sub returns the Root of the folder name below r (which need not exist
// yet; MkdirAll(".") on the Sub creates it).
func (r *Root) Sub(name string) *Root {
	return &Root{r: r.r, prefix: r.Rel(name), top: r.top, log: r.log, obs: r.obs, pend: r.pend}
}

// Track returns r as a Root that records every file committed through it
// or its Subs, for Written.
func (r *Root) Track() *Root {
	t := *r
	t.log = &written{}
	return &t
}

// Observe returns r as a Root that tells o of every change made through it
// or its Subs.
func (r *Root) Observe(o Observer) *Root {
	t := *r
	t.obs = o
	return &t
}

// Deferred returns r as a Root whose files' Commit only marks them ready:
// their bytes are written (Size and SHA256 are final), but syncing, the
// rename into place and the folder's sync are left to Flush, which
// commits them, or to Discard, which removes them. A writer can so hand
// the waits for the disk to another goroutine, and the memory and CPU it
// wrote with go to other work while the disk catches up. Until Flush, the
// files are not visible under their names. Subs of a deferred Root share
// its list.
func (r *Root) Deferred() *Root {
	t := *r
	t.pend = &pending{}
	return &t
}

// Flush commits, in order, the files whose Commit a deferred Root
// deferred, as Commit would have (sync, rename, sync of the folder); once
// one fails, the others are discarded. It returns the first error. On a
// Root that is not deferred it does nothing.
func (r *Root) Flush() error {
	var err error
	for _, f := range r.takePending() {
		if err != nil {
			f.discard()
			continue
		}
		err = f.commit()
	}
	return err
}

// Discard removes the files whose Commit a deferred Root deferred, as
// Abort would have: nothing of them becomes visible.
func (r *Root) Discard() {
	for _, f := range r.takePending() {
		f.discard()
	}
}

func (r *Root) takePending() []*File {
	if r.pend == nil {
		return nil
	}
	r.pend.mu.Lock()
	defer r.pend.mu.Unlock()
	files := r.pend.files
	r.pend.files = nil
	return files
}

// Written lists the files committed through a tracked Root, as paths
// relative to the top directory, sorted; nil for an untracked Root.
func (r *Root) Written() []string {
	if r.log == nil {
		return nil
	}
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(r.log.names)))
}

// Rel returns name, relative to r, as a path relative to the top directory.
func (r *Root) Rel(name string) string {
	return path.Join(r.prefix, filepath.ToSlash(name))
}

// Path returns the OS path of name, for messages and for readers.
func (r *Root) Path(name string) string {
	return filepath.Join(r.top, filepath.FromSlash(r.Rel(name)))
}

// Base is the last element of r's folder ("06-mt_llama").
func (r *Root) Base() string { return path.Base(r.Rel(".")) }

// MkdirAll creates the folder name and its parents as needed.
func (r *Root) MkdirAll(name string) error {
	return pathError("mkdir", r.Path(name), r.r.MkdirAll(r.Rel(name), 0o755))
}

// OpenFile opens name as os.OpenFile does, confined to the tree. It is for
// files that are not written atomically (a lock file); data files go
// through Create.
func (r *Root) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return r.r.OpenFile(r.Rel(name), flag, perm)
}

// OpenRoot opens the folder name as an os.Root of its own (for a component
// that keeps its files there, such as the request cache).
func (r *Root) OpenRoot(name string) (*os.Root, error) { return r.r.OpenRoot(r.Rel(name)) }

// ReadFile reads name.
func (r *Root) ReadFile(name string) ([]byte, error) { return r.r.ReadFile(r.Rel(name)) }

// ReadDir lists the folder name, sorted by file name.
func (r *Root) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(r.r.FS(), r.Rel(name)) }

// Stat describes name, following links inside the tree.
func (r *Root) Stat(name string) (fs.FileInfo, error) { return r.r.Stat(r.Rel(name)) }

// Lstat describes name itself, not what a link points to.
func (r *Root) Lstat(name string) (fs.FileInfo, error) { return r.r.Lstat(r.Rel(name)) }

// Remove deletes the file or empty folder name (a link itself, never its
// target).
func (r *Root) Remove(name string) error {
	if err := r.r.Remove(r.Rel(name)); err != nil {
		return pathError("remove", r.Path(name), err)
	}
	if r.obs != nil {
		r.obs.Removed(r.Rel(name))
	}
	return nil
}

// RemoveAll deletes name and everything below it (links themselves, never
// their targets); a missing name is no error.
func (r *Root) RemoveAll(name string) error {
	if err := r.r.RemoveAll(r.Rel(name)); err != nil {
		return pathError("remove", r.Path(name), err)
	}
	if r.obs != nil {
		r.obs.Removed(r.Rel(name))
	}
	return nil
}

// Rename moves the file oldname to newname within the tree (replacing a
// file there) and syncs newname's folder, so the move survives a crash.
func (r *Root) Rename(oldname, newname string) error {
	if err := r.r.Rename(r.Rel(oldname), r.Rel(newname)); err != nil {
		return &os.LinkError{Op: "rename", Old: r.Path(oldname), New: r.Path(newname), Err: cause(err)}
	}
	if err := syncDir(r.r, path.Dir(r.Rel(newname))); err != nil {
		return pathError("sync", filepath.Dir(r.Path(newname)), err)
	}
	if r.obs != nil {
		r.obs.Committed(r.Rel(newname))
		r.obs.Removed(r.Rel(oldname))
	}
	return nil
}

// Open opens name for reading.
func (r *Root) Open(name string) (*os.File, error) { return r.r.Open(r.Rel(name)) }

// A File is a file being written under a temporary name in its final
// directory. Nothing is visible under the final name until Commit, which
// syncs the data, renames the file into place and syncs the directory, so a
// crash or kill -9 leaves either the old file or the new one, never a part.
// Temporary files are named ".tmp-*" and are removed by Abort or by Sweep.
// Files are created with mode 0644 (less the umask).
type File struct {
	f    *os.File
	r    *os.Root
	tmp  string // names inside r
	name string
	path string // for messages
	log  *written
	obs  Observer
	pend *pending // of a deferred Root: Commit queues the file here
	h    hash.Hash
	n    int64
	done bool
}

// Create starts writing name. Its folder is created if needed.
func (r *Root) Create(name string) (*File, error) {
	rel := r.Rel(name)
	if err := r.r.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return nil, pathError("create", r.Path(name), err)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rel), ".tmp-"+path.Base(rel)+"-"+hex.EncodeToString(rnd[:]))
	f, err := r.r.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, pathError("create", r.Path(name), err)
	}
	return &File{f: f, r: r.r, tmp: tmp, name: rel, path: r.Path(name), log: r.log, obs: r.obs, pend: r.pend, h: sha256.New()}, nil
}

// Write writes p and feeds the content hash.
func (a *File) Write(p []byte) (int, error) {
	n, err := a.f.Write(p)
	a.h.Write(p[:n])
	a.n += int64(n)
	return n, pathError("write", a.path, err)
}

// Size is the number of bytes written so far.
func (a *File) Size() int64 { return a.n }

// SHA256 is the hex digest of the bytes written so far.
func (a *File) SHA256() string { return hex.EncodeToString(a.h.Sum(nil)) }

// Commit makes the file visible under its final name. Whatever had that
// name (a file, or a link planted there) is replaced. A file of a deferred
// Root is only queued: its Root's Flush commits it.
func (a *File) Commit() error {
	if a.done {
		return fmt.Errorf("%s: already committed or aborted", a.path)
	}
	a.done = true
	if a.pend != nil {
		a.pend.mu.Lock()
		a.pend.files = append(a.pend.files, a)
		a.pend.mu.Unlock()
		return nil
	}
	return a.commit()
}

func (a *File) commit() error {
	if err := a.f.Sync(); err != nil {
		a.f.Close()
		a.r.Remove(a.tmp)
		return pathError("write", a.path, err)
	}
	if err := a.f.Close(); err != nil {
		a.r.Remove(a.tmp)
		return pathError("write", a.path, err)
	}
	if err := a.r.Rename(a.tmp, a.name); err != nil {
		a.r.Remove(a.tmp)
		return pathError("write", a.path, err)
	}
	if a.log != nil {
		a.log.mu.Lock()
		a.log.names = append(a.log.names, a.name)
		a.log.mu.Unlock()
	}
	if err := syncDir(a.r, path.Dir(a.name)); err != nil {
		return pathError("sync", filepath.Dir(a.path), err)
	}
	if a.obs != nil {
		a.obs.Committed(a.name)
	}
	return nil
}

// Abort discards the file. It is safe to call after Commit (it does nothing).
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.discard()
}

func (a *File) discard() {
	a.f.Close()
	a.r.Remove(a.tmp)
}

// WriteFile writes data to name atomically and returns its SHA-256.
func (r *Root) WriteFile(name string, data []byte) (string, error) {
	f, err := r.Create(name)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return "", err
	}
	sum := f.SHA256()
	return sum, f.Commit()
}

// WriteJSON stores v as indented JSON at name, atomically.
func (r *Root) WriteJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = r.WriteFile(name, append(b, '\n'))
	return err
}

// ReadJSON loads the JSON file name of r. A missing file gives (nil, nil).
func ReadJSON[T any](r *Root, name string) (*T, error) {
	b, err := r.ReadFile(name)
	return decodeJSON[T](b, err, r.Path(name))
}

// ReadJSONFile is ReadJSON for a file named by its OS path, outside any
// Root (a run directory read by status and report commands).
func ReadJSONFile[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	return decodeJSON[T](b, err, path)
}

// A DamagedError says a JSON file read back does not decode: the package
// writes files whole, so something else changed it.
type DamagedError struct {
	Path string
	Err  error
}

func (e *DamagedError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *DamagedError) Unwrap() error { return e.Err }

// decodeJSON decodes the content b of the file at path, read with error
// err; a missing file gives (nil, nil), content that does not decode a
// *DamagedError.
func decodeJSON[T any](b []byte, err error, path string) (*T, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, &DamagedError{Path: path, Err: err}
	}
	return &v, nil
}

// Sweep removes temporary files left by a killed writer anywhere under the
// folder name (an export writes into a dataset folder below its stage
// directory). Links are not followed.
func (r *Root) Sweep(name string) error {
	err := fs.WalkDir(r.r.FS(), r.Rel(name), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isTemp(d.Name()) {
			if err := r.r.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// SweepFiles removes the temporary files a killed writer left directly in
// the folder name, not below it (a run dir's own files: its subfolders are
// swept by whoever writes there).
func (r *Root) SweepFiles(name string) error {
	ents, err := r.ReadDir(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() && isTemp(e.Name()) {
			if err := r.Remove(path.Join(name, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// isTemp reports whether a file name is one Create gives its temporary
// files: ".tmp-<name>-<hex digits>".
func isTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, ".tmp-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i < 1 || i == len(rest)-1 {
		return false
	}
	for _, c := range rest[i+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// HashFile returns the hex SHA-256 of the file at path.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pathError is err (nil for nil) as a failure of op on the file at path,
// its OS path: an os.Root's errors name files relative to the root, and a
// File's its temporary name (".tmp-README.md-…"), neither of which tells
// a reader which directory could not be written. errors.Is still finds
// the cause (fs.ErrPermission, syscall.EROFS, …).
func pathError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: path, Err: cause(err)}
}

// cause is the system's error inside an *fs.PathError or *os.LinkError,
// or err itself.
func cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

func syncDir(r *os.Root, dir string) error {
	d, err := r.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
