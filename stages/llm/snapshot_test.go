package llm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A snapshot taken while the cache is open, with answers not yet
// committed to the file, is a cache file that holds them all.
func TestCacheWriteSnapshot(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{7}, 32)
	if err := c.putChat("st@1", key, []byte(`{"stage":"st@1"}`), Response{Content: "paid for", Provider: "openai"}, "st", []byte("slot\x000")); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "copy")
	os.MkdirAll(snap, 0o755)
	f, err := os.Create(filepath.Join(snap, CacheFile))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := c.WriteSnapshot(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if !ok || err != nil {
		t.Fatalf("WriteSnapshot: %v, %v", ok, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.WriteSnapshot(&bytes.Buffer{}); ok || err != nil {
		t.Errorf("WriteSnapshot of a closed cache: %v, %v; want nothing written", ok, err)
	}
	cp, err := OpenCacheReadOnly(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	resp, found, err := cp.getChat("st@1", key)
	if err != nil || !found || resp.Content != "paid for" {
		t.Errorf("the snapshot has %+v, %v, %v; want the answer", resp, found, err)
	}
}
