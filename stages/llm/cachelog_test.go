package llm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func chatPut(stage, text string) put {
	k := sha256.Sum256([]byte(text))
	v, _ := encodeEntry(Response{Content: text, FinishReason: "stop"}, []byte(`{"stage":"`+stage+`"}`))
	return put{top: topChat, sub: []byte(stage), key: k[:], val: v}
}

// writeLog writes a log file of generation gen holding one record per
// element of records, then tail (damage) verbatim.
func writeLog(t *testing.T, dir string, gen uint64, tail []byte, records ...[]put) {
	t.Helper()
	f, err := createLog(cachePathOf(t, filepath.Join(dir, CacheFile)), gen)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, r := range records {
		b = appendRecord(b, r)
	}
	if _, err := f.Write(append(b, tail...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func hasChat(t *testing.T, c *Cache, p put) bool {
	t.Helper()
	_, ok, err := c.getChat(string(p.sub), p.key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A killed process leaves its log behind; opening the cache moves every
// intact record into the file, stops at damage, skips logs the file
// already holds, and leaves no old log behind.
func TestCacheReplaysLogs(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	committed := chatPut("s@1", "committed")
	if err := c.sh.w.write([]put{committed}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The cache now records generation 1 as applied.
	stale, a, b, cc, d, e := chatPut("s@1", "stale"), chatPut("s@1", "a"), chatPut("s@2", "b"), chatPut("s@1", "c"), chatPut("s@1", "d"), chatPut("s@1", "e")
	slot := put{top: topSlots, sub: []byte("s"), key: []byte("rec1\x000"), val: append([]byte("s@1\x00"), a.key...)}

	writeLog(t, dir, 1, nil, []put{stale}) // its deletion undone by a power loss
	torn := appendRecord(nil, []put{cc})
	writeLog(t, dir, 2, torn[:len(torn)-3], []put{a, slot}, []put{b})
	badCRC := appendRecord(nil, []put{e})
	badCRC[5] ^= 0xff
	writeLog(t, dir, 3, append(badCRC, appendRecord(nil, []put{e})...), []put{d})
	// A log whose header never reached the disk.
	if err := os.WriteFile(logPath(filepath.Join(dir, CacheFile), 4), make([]byte, len(logMagic)), 0o644); err != nil {
		t.Fatal(err)
	}

	c, err = OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		name string
		p    put
		want bool
	}{
		{"committed before", committed, true},
		{"in a log already applied", stale, false},
		{"first record", a, true},
		{"second stage", b, true},
		{"torn tail", cc, false},
		{"log after a torn one", d, true},
		{"after a checksum failure", e, false},
	} {
		if got := hasChat(t, c, tt.p); got != tt.want {
			t.Errorf("%s: cached %v, want %v", tt.name, got, tt.want)
		}
	}
	if prev, ok, err := c.lastForSlot("s", slot.key); err != nil || !ok || !bytes.Contains(prev, []byte(`"s@1"`)) {
		t.Errorf("slot from the log: %q %v %v", prev, ok, err)
	}
	logs, err := listLogs(cachePathOf(t, c.Path()))
	if err != nil || len(logs) != 1 || logs[0].gen != 5 {
		t.Fatalf("after replay want only the new log 5, got %+v %v", logs, err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil || len(st.Chat) != 2 || st.Chat[0].Entries != 3 || st.Chat[1].Entries != 1 || st.Slots != 1 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

func TestCacheRefusesForeignLog(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(logPath(filepath.Join(dir, CacheFile), 1), []byte("SQLite format 3\x00..."), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCache(dir); err == nil || !strings.Contains(err.Error(), "is not an augment cache log") {
		t.Fatalf("got %v", err)
	}
}

// Inspection of a killed run's cache sees the answers in its log.
func TestCacheReadOnlySeesLoggedAnswers(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	a := chatPut("s@1", "logged")
	writeLog(t, dir, 7, nil, []put{a})
	r, err := OpenCacheReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e, err := r.Get(fmt.Sprintf("%x", a.key[:6]))
	if err != nil || e.Response.Content != "logged" {
		t.Fatalf("get %+v %v", e, err)
	}
	if logs, err := listLogs(cachePathOf(t, r.Path())); err != nil || len(logs) != 0 {
		t.Fatalf("logs %+v %v", logs, err)
	}
}

func TestCacheWriteAfterClose(t *testing.T) {
	c, err := OpenCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := c.sh.w
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.write([]put{chatPut("s@1", "late")}); !errors.Is(err, errCacheClosed) {
		t.Fatalf("got %v", err)
	}
}

func TestReadRecord(t *testing.T) {
	good := appendRecord(nil, []put{chatPut("s@1", "x"), {top: topEmbed, sub: []byte("m#8"), key: []byte{1}, val: nil}})
	reframe := func(payload []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
		crc := crc32.Update(crc32.Checksum(b, castagnoli), castagnoli, payload)
		return append(binary.LittleEndian.AppendUint32(b, crc), payload...)
	}
	tests := []struct {
		name string
		in   []byte
		want string // "" ok, "eof", "torn", or a fragment of the error
	}{
		{"good", good, ""},
		{"empty", nil, "eof"},
		{"short head", good[:5], "torn"},
		{"short payload", good[:len(good)-1], "torn"},
		{"zero length", make([]byte, 8), "torn"},
		{"zeros", make([]byte, 64), "torn"},
		{"huge length", append([]byte{0xff, 0xff, 0xff, 0x7f}, good[4:]...), "torn"},
		{"crc", append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^1), "torn"},
		{"no puts", reframe([]byte{0}), "bad put count"},
		{"bad bucket", reframe([]byte{1, 9, 1, 'a', 1, 'k', 0}), "bad bucket"},
		{"empty sub", reframe([]byte{1, 0, 0, 1, 'k', 0}), "sub-bucket"},
		{"empty key", reframe([]byte{1, 0, 1, 'a', 0, 0}), "key length"},
		{"overrun", reframe([]byte{1, 0, 1, 'a', 1, 'k', 5, 'v'}), "runs past"},
		{"trailing", reframe([]byte{1, 0, 1, 'a', 1, 'k', 0, 'x'}), "after the last put"},
	}
	for _, tt := range tests {
		puts, err := readRecord(bufio.NewReader(bytes.NewReader(tt.in)))
		switch {
		case tt.want == "" && (err != nil || len(puts) != 2 || string(puts[0].sub) != "s@1" || puts[1].top != topEmbed):
			t.Errorf("%s: %+v %v", tt.name, puts, err)
		case tt.want == "eof" && err != io.EOF,
			tt.want == "torn" && !errors.Is(err, errTorn),
			tt.want != "" && tt.want != "eof" && tt.want != "torn" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want %s", tt.name, err, tt.want)
		}
	}
}

func FuzzReadRecord(f *testing.F) {
	f.Add(appendRecord(nil, []put{chatPut("s@1", "x")}))
	f.Add(appendRecord(appendRecord(nil, []put{chatPut("a@1", "y")}), []put{{top: topSlots, sub: []byte("a"), key: []byte("r\x000"), val: []byte("v")}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		var again []byte
		for {
			puts, err := readRecord(r)
			if err != nil {
				if err == io.EOF && !bytes.Equal(again, data) {
					t.Fatalf("records re-encode to %x, not %x", again, data)
				}
				return
			}
			// Whatever reads back was written by appendRecord.
			again = appendRecord(again, puts)
		}
	})
}
