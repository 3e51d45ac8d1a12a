package shard

import (
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
)

// The tests write by OS path; these open a root on the file's directory.

func rootOf(tb testing.TB, path string) *atomicfs.Root {
	tb.Helper()
	r, err := atomicfs.OpenRoot(filepath.Dir(path))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

func writeAt(tb testing.TB, path string, recs []*record.Record, o Options) ([]manifests.FileRef, error) {
	return Write(rootOf(tb, path), filepath.Base(path), recs, o)
}

func writeRejectsAt(tb testing.TB, path string, rows []Reject) (manifests.FileRef, error) {
	return WriteRejects(rootOf(tb, path), filepath.Base(path), rows)
}

func writeJSONLAt[T any](tb testing.TB, path string, rows []T) (manifests.FileRef, error) {
	return WriteJSONL(rootOf(tb, path), filepath.Base(path), rows)
}
