package llm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCacheConcurrentWritersAndReopen(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A second handle in the same process shares the file instead of
	// deadlocking on bbolt's lock.
	c2, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 250
	key := func(w, i int) []byte {
		k := sha256.Sum256(fmt.Appendf(nil, "%d/%d", w, i))
		return k[:]
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			h := c
			if w%2 == 1 {
				h = c2
			}
			for i := range each {
				resp := Response{Content: fmt.Sprintf("answer %d/%d", w, i), FinishReason: "stop", Usage: Usage{PromptTokens: i, CompletionTokens: w}}
				if err := h.putChat("st@1", key(w, i), []byte(`{"stage":"st@1"}`), resp, "st", fmt.Appendf(nil, "slot%d/%d\x000", w, i)); err != nil {
					t.Error(err)
					return
				}
				// Answers are visible before their commit.
				if got, ok, err := h.getChat("st@1", key(w, i)); err != nil || !ok || got.Content != resp.Content {
					t.Errorf("read-your-write: %+v %v %v", got, ok, err)
					return
				}
				// Commits (and log switches) happen while the others write.
				if i%50 == 49 {
					if err := h.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close must be a no-op:", err)
	}

	if logs, err := listLogs(cachePathOf(t, c.Path())); err != nil || len(logs) != 0 {
		t.Fatalf("logs left after close: %+v %v", logs, err)
	}
	r, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		for i := range each {
			got, ok, err := r.getChat("st@1", key(w, i))
			if err != nil || !ok || got.Content != fmt.Sprintf("answer %d/%d", w, i) || got.Usage.PromptTokens != i {
				t.Fatalf("%d/%d after reopen: %+v %v %v", w, i, got, ok, err)
			}
		}
	}
	st, err := r.Stats()
	if err != nil || st.Chat[0].Entries != writers*each || st.Slots != writers*each {
		t.Fatalf("stats %+v %v", st, err)
	}
}

func TestCacheReadOnlyNeedsExistingCache(t *testing.T) {
	if _, err := OpenCacheReadOnly(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("got %v", err)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	resp := Response{Content: "héllo\x00world", FinishReason: "length", Usage: Usage{PromptTokens: 3, CompletionTokens: 4}, Provider: "openai", Model: "m"}
	canon := []byte(`{"stage":"s@1","messages":[]}`)
	v, err := encodeEntry(resp, canon)
	if err != nil {
		t.Fatal(err)
	}
	got, gotCanon, err := decodeEntry(v)
	if err != nil || got != resp || string(gotCanon) != string(canon) {
		t.Fatalf("%+v %s %v", got, gotCanon, err)
	}
	for _, bad := range [][]byte{nil, {0x80}, {5, '{'}, append([]byte{2}, "{x"...)} {
		if _, _, err := decodeEntry(bad); err == nil {
			t.Errorf("decoded corrupt entry %q", bad)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	v, _ := encodeEntry(Response{Content: "x", FinishReason: "stop"}, []byte(`{}`))
	f.Add(v)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, canon, err := decodeEntry(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to an entry that decodes the same.
		again, err := encodeEntry(resp, canon)
		if err != nil {
			t.Fatal(err)
		}
		resp2, canon2, err := decodeEntry(again)
		if err != nil || resp2 != resp || string(canon2) != string(canon) {
			t.Fatalf("round trip changed %+v → %+v (%v)", resp, resp2, err)
		}
	})
}

// A cache file with a damaged page, or cut short, is a *DamagedCacheError
// from opening it (writable or read-only, as run and cache stats do) or
// from Check (cache verify), never a panic or a memory fault.
func TestCacheDamaged(t *testing.T) {
	fill := func(t *testing.T) string {
		dir := t.TempDir()
		c, err := OpenCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3000 {
			k := sha256.Sum256(fmt.Appendf(nil, "%d", i))
			resp := Response{Content: strings.Repeat(fmt.Sprintf("answer %d ", i), 20), FinishReason: "stop"}
			if err := c.putChat("st@1", k[:], []byte(`{"stage":"st@1"}`), resp, "st", fmt.Appendf(nil, "slot%d\x000", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	damages := map[string]func(f *os.File, size int64) error{
		// Every page but the two meta pages.
		"pages overwritten": func(f *os.File, size int64) error {
			junk := make([]byte, size-2*4096)
			for i := range junk {
				junk[i] = byte(i*7919 + 13)
			}
			_, err := f.WriteAt(junk, 2*4096)
			return err
		},
		// The meta pages name pages past the end.
		"cut short": func(f *os.File, size int64) error { return f.Truncate(4 * 4096) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir := fill(t)
			f, err := os.OpenFile(filepath.Join(dir, CacheFile), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			if err := errors.Join(damage(f, fi.Size()), f.Close()); err != nil {
				t.Fatal(err)
			}
			var damaged *DamagedCacheError
			for _, readOnly := range []bool{true, false} {
				c, err := openCache(dir, nil, readOnly)
				if err == nil {
					err = errors.Join(c.Check(), c.Close())
				}
				if !errors.As(err, &damaged) || !strings.Contains(err.Error(), "move it aside") {
					t.Errorf("read-only %v: %v, want a *DamagedCacheError", readOnly, err)
				}
			}
		})
	}
}
