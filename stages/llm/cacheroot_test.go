package llm

import (
	"os"
	"path/filepath"
	"testing"
)

// cachePathOf opens the directory of the cache file path as the cache does.
func cachePathOf(t *testing.T, path string) cachePath {
	t.Helper()
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return cachePath{root: root, path: path}
}

// A link planted in the cache directory in place of the cache file or of a
// log is never written through: the cache refuses to open through it.
func TestCacheRefusesLinksOut(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, nil, 0o644) // empty: bbolt would make it a database
	dir := t.TempDir()
	os.Symlink(victim, filepath.Join(dir, CacheFile))
	if c, err := OpenCache(dir); err == nil {
		c.Close()
		t.Error("the cache opened through a link pointing out of its directory")
	}
	if b, _ := os.ReadFile(victim); len(b) != 0 {
		t.Errorf("written through a link: %d bytes", len(b))
	}

	dir = t.TempDir()
	os.Symlink(victim, filepath.Join(dir, logName(1)))
	c, err := OpenCache(dir)
	if err == nil {
		c.Close()
		if b, _ := os.ReadFile(victim); len(b) != 0 {
			t.Errorf("a log link was written through: %d bytes", len(b))
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the outside file was deleted through a log link: %v", err)
	}
}
