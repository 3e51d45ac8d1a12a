package stages

import (
	"os"
	"path/filepath"
	"testing"
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
