//go:build !unix

package storage

// pidAlive cannot tell here: a lease of this host waits for its TTL.
func pidAlive(int) bool { return true }
