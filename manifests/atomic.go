package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A File is a file being written under a temporary name in its final
// directory. Nothing is visible under the final name until Commit, which
// syncs the data, renames the file into place and syncs the directory, so a
// crash or kill -9 leaves either the old file or the new one, never a part.
// Temporary files are named ".tmp-*" and are removed by Abort or by Sweep.
type File struct {
	f    *os.File
	path string
	h    hash.Hash
	n    int64
	done bool
}

// Create starts writing path. The directory is created if needed.
func Create(path string) (*File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return nil, err
	}
	return &File{f: f, path: path, h: sha256.New()}, nil
}

// Write writes p and feeds the content hash.
func (a *File) Write(p []byte) (int, error) {
	n, err := a.f.Write(p)
	a.h.Write(p[:n])
	a.n += int64(n)
	return n, err
}

// Size is the number of bytes written so far.
func (a *File) Size() int64 { return a.n }

// SHA256 is the hex digest of the bytes written so far.
func (a *File) SHA256() string { return hex.EncodeToString(a.h.Sum(nil)) }

// Commit makes the file visible under its final name.
func (a *File) Commit() error {
	if a.done {
		return fmt.Errorf("%s: already committed or aborted", a.path)
	}
	a.done = true
	name := a.f.Name()
	if err := a.f.Sync(); err != nil {
		a.f.Close()
		os.Remove(name)
		return err
	}
	if err := a.f.Close(); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, a.path); err != nil {
		os.Remove(name)
		return err
	}
	return syncDir(filepath.Dir(a.path))
}

// Abort discards the file. It is safe to call after Commit (it does nothing).
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	os.Remove(a.f.Name())
}

// WriteFile writes data to path atomically and returns its SHA-256.
func WriteFile(path string, data []byte) (string, error) {
	f, err := Create(path)
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

// Sweep removes temporary files left by a killed writer anywhere under dir
// (an export writes into a dataset folder below its stage directory).
func Sweep(dir string) error {
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), ".tmp-") {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		return nil
	})
	if os.IsNotExist(err) {
		return nil
	}
	return err
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
