//go:build unix

package stages

import (
	"syscall"
)

// NotWritable says why files cannot be made in dir ("" when they can):
// no write permission, or a read-only or virtual file system (/proc, /sys,
// where even root cannot create files).
func NotWritable(dir string) string {
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return "is not writable: " + err.Error()
	}
	return virtualFS(dir)
}
