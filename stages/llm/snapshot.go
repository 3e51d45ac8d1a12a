package llm

import (
	"errors"
	"io"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// WriteSnapshot writes to w a consistent copy of the cache file as it is
// once every answer received so far is committed: a bbolt file that opens
// as a cache of its own. It is what an output on object storage uploads
// while the run goes on, so a lost machine loses no answer paid for before
// the copy. ok is false (and nothing is written) when the cache is closed
// or read-only.
func (c *Cache) WriteSnapshot(w io.Writer) (ok bool, err error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed || c.sh.w == nil {
		return false, nil
	}
	if err := c.Flush(); err != nil {
		return false, err
	}
	err = c.sh.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(w)
		return err
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return false, nil
	}
	return err == nil, err
}

// WriteCacheSnapshot is Cache.WriteSnapshot of the teacher's cache; ok is
// false without one.
func (t *Teacher) WriteCacheSnapshot(w io.Writer) (ok bool, err error) {
	if t.cache == nil {
		return false, nil
	}
	return t.cache.WriteSnapshot(w)
}
