package stages

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
)

// sharedData locates ../shared/data beside the repository (or
// $AUGMENT_SHARED_DATA) and skips the test when it is absent: people who
// clone the repository do not have it; CI does.
func sharedData(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared data not found at %s (set AUGMENT_SHARED_DATA): %v", dir, err)
	}
	return dir
}

// A dump is a file of ../shared/data and its format.
type dump struct{ file, format string }

// sharedRecords parses dumps with stages/formats, leaving out the rows it
// rejects, and fails when fewer than min records came out.
func sharedRecords(t testing.TB, min int, dumps ...dump) []*record.Record {
	t.Helper()
	dir := sharedData(t)
	var out []*record.Record
	for _, d := range dumps {
		f, err := os.Open(filepath.Join(dir, d.file))
		if err != nil {
			t.Fatal(err)
		}
		sc := formats.NewScanner(f)
		for {
			row, i, err := sc.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", d.file, err)
			}
			source := strings.TrimSuffix(filepath.Base(d.file), filepath.Ext(d.file))
			if r, err := formats.Parse(d.format, source, i, row); err == nil {
				out = append(out, r)
			}
		}
		f.Close()
	}
	if len(out) < min {
		t.Fatalf("only %d records parsed from %s", len(out), dir)
	}
	return out
}

// tempRoot is a fresh temporary directory and the confined root on it.
func tempRoot(t *testing.T) (string, *atomicfs.Root) {
	t.Helper()
	dir := t.TempDir()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, root
}
