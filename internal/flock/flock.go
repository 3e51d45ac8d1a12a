// Package flock takes and tests advisory whole-file locks (flock(2))
// without waiting. A lock belongs to the open file: the kernel releases it
// when the file is closed or its process ends, also after kill -9.
package flock

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// ErrUnsupported is the error of a system without flock.
var ErrUnsupported = errors.New("file locks are not supported on this system")

// Tries and pause of Exclusive and Shared: a lock that another process
// holds only for a moment (Held's test) is taken all the same.
const (
	tries = 5
	pause = 10 * time.Millisecond
)

// Exclusive takes an exclusive lock on f; held reports that another open
// file holds a lock on it (after a few tries within about 50 ms).
func Exclusive(f *os.File) (held bool, err error) { return retry(f, exclusive) }

// Shared takes a shared lock on f; held reports that another open file
// holds it exclusively (after a few tries within about 50 ms).
func Shared(f *os.File) (held bool, err error) { return retry(f, shared) }

func retry(f *os.File, how int) (held bool, err error) {
	for i := range tries {
		if held, err = try(f, how); err != nil || !held {
			return held, err
		}
		if i < tries-1 {
			time.Sleep(pause)
		}
	}
	return true, nil
}

// Held reports whether a process holds a lock on the file at path, shared
// or exclusive, testing it with an exclusive lock of its own released at
// once (a lock taker meanwhile tries again: Exclusive, Shared). known is
// false when path does not exist or the system has no flock.
func Held(path string) (held, known bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	for i := range tries {
		held, err = try(f, exclusive)
		if errors.Is(err, ErrUnsupported) {
			return false, false, nil
		}
		if err != nil || !held {
			return held, err == nil, err
		}
		if i < tries-1 {
			time.Sleep(pause) // another Held's test, or a real holder
		}
	}
	return true, true, nil
}
