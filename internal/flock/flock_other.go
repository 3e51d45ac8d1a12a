//go:build !unix

package flock

import "os"

const (
	exclusive = iota
	shared
)

func try(*os.File, int) (bool, error) { return false, ErrUnsupported }
