//go:build !unix

package stages

import (
	"errors"
	"os"
)

func tryLock(*os.File) (bool, error) {
	return false, errors.New("locking the output directory is not supported on this system")
}

func tryLockShared(f *os.File) (bool, error) { return tryLock(f) }

func notWritable(string) string { return "" }
