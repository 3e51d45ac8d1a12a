package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/storage"
)

// A runDir is the run directory a read command (status, stats, show,
// report) works on. For an output on object storage (s3://, gs:// or
// azblob:// bucket/prefix) it is a temporary local copy of the objects the
// command reads; close uploads what the command wrote there (report.html,
// the dataset cards) when asked to, and removes the copy. The store's
// endpoint and credentials come from the environment (AWS_ENDPOINT_URL,
// STORAGE_EMULATOR_HOST, AZURE_STORAGE_CONNECTION_STRING, …), as there is
// no pipeline file to read storage.s3/gcs/azure from.
type runDir struct {
	Dir  string // local: read and write here
	Name string // as the user gave it, for messages
	m    *storage.Mirror
	root *os.Root
	lock *os.File // the copy's run lock, held while a lease of the output is
}

// Which objects a command reads: the manifests (and the workers' parts),
// or everything but the request cache and batch files.
func manifestsOnly(name string) bool { return strings.HasSuffix(name, ".json") }
func outputFiles(name string) bool {
	return !strings.HasPrefix(name, "cache/") && !strings.HasPrefix(name, "batch/")
}

func openRunDir(ctx context.Context, arg string, keep func(string) bool, stderr io.Writer) (*runDir, error) {
	loc, remote, err := storage.OutputLocation(arg)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	if !remote {
		if err := localRunDir(arg); err != nil {
			return nil, err
		}
		return &runDir{Dir: arg, Name: arg}, nil
	}
	op := storage.New(storage.Options{Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := op.CheckOutput(ctx, loc); err != nil {
		if nf := new(storage.NotFoundError); errors.As(err, &nf) {
			// No bucket, as a local directory that is not there (exit 2).
			return nil, fmt.Errorf("%s %w: %s", arg, manifests.ErrNoRun, nf.Detail)
		}
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "augment-remote-")
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	rd := &runDir{Dir: tmp, Name: strings.TrimRight(arg, "/"), root: root}
	if rd.m, err = op.NewMirror(loc, root); err == nil {
		err = rd.m.Fetch(ctx, "", keep)
	}
	if err != nil {
		rd.close(false)
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	if err := rd.standForLease(ctx); err != nil {
		rd.close(false)
		return nil, err
	}
	return rd, nil
}

// standForLease gives the local copy the run lock the readers test
// (report.RunLive): held by this process while a process holds a lease of
// the output (storage.Mirror.LeaseLive), there and free when none does.
// When the leases cannot be read there is no lock file, and the readers
// say they cannot tell whether a stage without a finish time is running.
func (rd *runDir) standForLease(ctx context.Context) error {
	live, err := rd.m.LeaseLive(ctx)
	if err != nil {
		return nil
	}
	path := filepath.Join(rd.Dir, filepath.FromSlash(report.LockFile))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if !live {
		return f.Close()
	}
	if held, err := flock.Exclusive(f); err != nil || held {
		f.Close()
		os.Remove(path) // cannot stand for it: cannot tell
		return nil
	}
	rd.lock = f
	return nil
}

// localRunDir refuses a local run directory that is not there or is not a
// directory, wrapping manifests.ErrNoRun (exit 2): the command was pointed
// at the wrong place.
func localRunDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %w: no such directory", dir, manifests.ErrNoRun)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s %w: it is a file", dir, manifests.ErrNoRun)
	}
	return nil
}

// workDir checks the -dir of cmd (cache, batch status), which reads a run's
// local files only: for an output on object storage, the run's work dir.
func workDir(dir, cmd string) error {
	if _, remote, err := storage.OutputLocation(dir); err == nil && remote {
		return usageError{fmt.Sprintf("%s -dir %s: %s reads the run's local files; for an output on object storage, give its work dir (output.work_dir)", cmd, dir, cmd)}
	}
	return localRunDir(dir)
}

// path is name inside the run directory as the user sees it.
func (rd *runDir) path(name string) string {
	if rd.m == nil {
		return filepath.Join(rd.Dir, name)
	}
	return rd.Name + "/" + path.Clean(filepath.ToSlash(name))
}

// remove deletes name (slash-separated, inside the run directory), and on
// object storage its object when the command's writes are uploaded.
func (rd *runDir) remove(name string) error {
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("%s: not inside the run directory", name)
	}
	if err := os.Remove(filepath.Join(rd.Dir, filepath.FromSlash(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if rd.m != nil {
		rd.m.Removed(name)
	}
	return nil
}

// err names the run directory as the user gave it in an error.
func (rd *runDir) err(err error) error {
	if err == nil || rd.m == nil {
		return err
	}
	return &renamed{strings.ReplaceAll(err.Error(), rd.Dir, rd.Name), err}
}

// renamed is an error with another text that still wraps the error it was
// made from (errors.Is finds manifests.ErrNoRun through it).
type renamed struct {
	msg string
	err error
}

func (e *renamed) Error() string { return e.msg }
func (e *renamed) Unwrap() error { return e.err }

// output is w for a command's output; on object storage it is held back
// and written by flush with the local copy's path replaced by the URL.
func (rd *runDir) output(w io.Writer) (io.Writer, func()) {
	if rd.m == nil {
		return w, func() {}
	}
	var buf bytes.Buffer
	return &buf, func() { io.WriteString(w, strings.ReplaceAll(buf.String(), rd.Dir, rd.Name)) }
}

// close uploads what was written into the copy (upload) and removes it.
func (rd *runDir) close(upload bool) error {
	if rd.m == nil && rd.root == nil {
		return nil
	}
	var err error
	if rd.lock != nil {
		rd.lock.Close()
	}
	if rd.m != nil {
		if upload {
			err = rd.m.Close()
		} else {
			rd.m.Discard()
		}
	}
	rd.root.Close()
	return errors.Join(err, os.RemoveAll(rd.Dir))
}
