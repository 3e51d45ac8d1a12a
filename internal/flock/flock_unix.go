//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

const (
	exclusive = syscall.LOCK_EX
	shared    = syscall.LOCK_SH
)

// try takes the lock without waiting; held reports another holder.
func try(f *os.File, how int) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
