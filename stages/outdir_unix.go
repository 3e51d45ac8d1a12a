//go:build unix

package stages

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting; held reports that
// another process has it.
func tryLock(f *os.File) (held bool, err error) { return flock(f, syscall.LOCK_EX) }

// tryLockShared takes a shared flock on f without waiting; held reports
// that another process has it exclusively.
func tryLockShared(f *os.File) (held bool, err error) { return flock(f, syscall.LOCK_SH) }

func flock(f *os.File, how int) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// notWritable says why files cannot be made in dir ("" when they can):
// no write permission, or a read-only or virtual file system (/proc, /sys,
// where even root cannot create files).
func notWritable(dir string) string {
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return "is not writable: " + err.Error()
	}
	return virtualFS(dir)
}
