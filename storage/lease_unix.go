//go:build unix

package storage

import (
	"errors"
	"syscall"
)

// pidAlive reports whether process pid exists on this host.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
