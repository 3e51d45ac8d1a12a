package llm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// CacheFile is the name of the request cache inside the cache directory.
const CacheFile = "llm-cache.db"

// Layout of the bbolt file. Every entry lives in a sub-bucket named after
// the request's stage ("reason@1") or the embedding model, so per-stage
// counts and listings never decode entries.
var (
	bucketChat  = []byte("chat")  // chat/<stage@version>/<sha256 of canonical request> → entry
	bucketSlots = []byte("slots") // slots/<stage name>/<slot>\x00<attempt> → <stage@version>\x00<key>
	bucketEmbed = []byte("embed") // embed/<model>#<dimensions>/<sha256 of text> → little-endian float32s
)

// ErrCacheMiss is returned by Cache.Get for a key with no entry.
var ErrCacheMiss = errors.New("no cache entry with that key")

// A Cache is the persistent request cache: answers of chat requests keyed
// by the canonical request (stage, template hash, model, messages, sampling,
// schema, attempt — never the endpoint), and embeddings keyed by model and
// text. It is a bbolt file (O(log n) lookups without loading it, readable by
// `augment cache`) plus an append-only log beside it (CacheFile +
// "-log.<generation>").
//
// Durability: once a write (the answer of a Complete that returned) is
// accepted, it survives a kill -9 of the process: it is in the log, which
// the next open replays into the file. The log is not fsync'd; about every
// second the accumulated answers are committed to the bbolt file (fsync'd)
// and that log is deleted, so a power loss may lose the answers of the
// last second or so, never the file's consistency. Answers not yet
// committed are visible to lookups.
//
// Within a process, caches opened on the same directory share one handle;
// another process opening the same directory waits briefly and then fails
// (bbolt's file lock, which also guards the logs).
type Cache struct {
	sh     *sharedDB
	mu     sync.Mutex
	closed bool
	// others are other segments of the cache (segments.go), opened
	// read-only and looked up after this one.
	others []*Cache
}

type sharedDB struct {
	db       *bolt.DB
	path     string
	files    cachePath
	readOnly bool
	refs     int // guarded by openCaches.mu
	w        *writer
}

var openCaches = struct {
	sync.Mutex
	m map[string]*sharedDB
}{m: map[string]*sharedDB{}}

// A cachePath is the cache file in its directory, which the cache opens as
// an os.Root: the file and its logs are reached only through it, so no
// link planted in the directory leads a write or a delete outside it.
type cachePath struct {
	root *os.Root
	path string        // the cache file as the OS names it, for messages
	wait time.Duration // how long to wait for another process's lock; 0 means 2s
}

// in is the OS path of a file of the cache directory, for messages.
func (c cachePath) in(name string) string { return filepath.Join(filepath.Dir(c.path), name) }

// OpenCache opens (creating if needed) the cache in dir for reading and
// writing.
func OpenCache(dir string) (*Cache, error) { return openCache(dir, nil, false) }

// OpenCacheIn is OpenCache on a directory the caller already opened as an
// os.Root (the run's output root confines it); dir names it in messages.
// The cache keeps its own handle: the caller may close root.
func OpenCacheIn(root *os.Root, dir string) (*Cache, error) { return openCache(dir, root, false) }

// OpenCacheReadOnly opens an existing cache for inspection. It fails if a
// running augment process holds the cache. If a killed run left answers in
// the cache's log, they are first moved into the file (which needs write
// access), so they are seen; otherwise nothing is written.
func OpenCacheReadOnly(dir string) (*Cache, error) { return openCache(dir, nil, true) }

func openCache(dir string, in *os.Root, readOnly bool) (*Cache, error) {
	return openCacheWait(dir, in, readOnly, 0)
}

func openCacheWait(dir string, in *os.Root, readOnly bool, wait time.Duration) (*Cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("llm cache: %w", err)
	}
	path := filepath.Join(abs, CacheFile)
	openCaches.Lock()
	defer openCaches.Unlock()
	if sh := openCaches.m[path]; sh != nil {
		if !readOnly && sh.readOnly {
			return nil, fmt.Errorf("llm cache %s: already open read-only in this process", path)
		}
		sh.refs++
		return &Cache{sh: sh}, nil
	}
	if readOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("llm cache: %w", err)
		}
	} else if in == nil {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("llm cache: %w", err)
		}
	}
	files := cachePath{path: path, wait: wait}
	if in != nil {
		files.root, err = in.OpenRoot(".")
	} else {
		files.root, err = os.OpenRoot(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("llm cache: %w", err)
	}
	db, err := openDB(files, readOnly)
	if err != nil {
		files.root.Close()
		return nil, err
	}
	sh := &sharedDB{db: db, path: path, files: files, readOnly: readOnly, refs: 1}
	if readOnly {
		// A killed run may have left answers in a log: move them into the
		// file first (as a writer would), so inspection sees them.
		pending, err := pendingLogs(db, files)
		if err == nil && pending {
			db.Close()
			if err = recoverLogs(files); err == nil {
				sh.db, err = openDB(files, true)
			}
			if err != nil {
				files.root.Close()
				return nil, err
			}
		} else if err != nil {
			db.Close()
			files.root.Close()
			return nil, fmt.Errorf("llm cache %s: %w", path, err)
		}
	} else if sh.w, err = openWriter(db, files); err != nil {
		db.Close()
		files.root.Close()
		return nil, fmt.Errorf("llm cache %s: %w", path, err)
	}
	openCaches.m[path] = sh
	return &Cache{sh: sh}, nil
}

func openDB(files cachePath, readOnly bool) (*bolt.DB, error) {
	path := files.path
	o := &bolt.Options{
		// The file is opened through the cache directory's root.
		OpenFile: func(_ string, flag int, perm os.FileMode) (*os.File, error) {
			return files.root.OpenFile(CacheFile, flag, perm)
		},
		Timeout:      cmp.Or(files.wait, 2*time.Second),
		ReadOnly:     readOnly,
		FreelistType: bolt.FreelistMapType, // O(1) page allocation in big files
		// Commits skip writing the free-page list (it is rebuilt by a scan
		// when the file opens), as etcd does; still safe after a crash.
		NoFreelistSync: true,
	}
	if !readOnly {
		// Map address space for a gigabyte up front (it costs no memory),
		// so a growing file is not remapped: a remap copies every node
		// the committing transaction touched out of the old map and
		// makes readers wait.
		o.InitialMmapSize = 1 << 30
	}
	var db *bolt.DB
	err := guardDamage(path, func() (err error) {
		db, err = bolt.Open(path, 0o644, o)
		return err
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("llm cache %s is in use by another augment process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("llm cache %s: %w", path, err)
	}
	return db, nil
}

// recoverLogs replays the logs of the cache file, which needs write
// access to the directory.
func recoverLogs(files cachePath) error {
	db, err := openDB(files, false)
	if err != nil {
		return fmt.Errorf("%w (a killed run left answers in the cache's log; reading them needs write access)", err)
	}
	if _, err = replayLogs(db, files); err != nil {
		err = fmt.Errorf("llm cache %s: %w", files.path, err)
	}
	return errors.Join(err, db.Close())
}

// Path is the cache file.
func (c *Cache) Path() string { return c.sh.path }

// Flush waits until every answer handed to the cache so far is committed
// to the bbolt file (fsync'd, so it survives a power loss too).
func (c *Cache) Flush() error {
	if c.sh.w == nil {
		return nil
	}
	return c.sh.w.flush()
}

// Close flushes and releases the cache; the file closes (and its log is
// deleted) with its last handle in the process.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	var others error
	for _, o := range c.others {
		others = errors.Join(others, o.Close())
	}
	openCaches.Lock()
	defer openCaches.Unlock()
	c.sh.refs--
	if c.sh.refs > 0 {
		return errors.Join(others, c.Flush())
	}
	delete(openCaches.m, c.sh.path)
	var err error
	if c.sh.w != nil {
		err = c.sh.w.close()
	}
	return errors.Join(others, err, c.sh.db.Close(), c.sh.files.root.Close())
}

// An entry's value: uvarint length of the response JSON, the response
// JSON, then the canonical request JSON (read only by explain and
// inspection).
func encodeEntry(resp Response, canon []byte) ([]byte, error) {
	rj, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, binary.MaxVarintLen64+len(rj)+len(canon))
	out = binary.AppendUvarint(out, uint64(len(rj)))
	out = append(out, rj...)
	return append(out, canon...), nil
}

func decodeEntry(v []byte) (resp Response, canon []byte, err error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return Response{}, nil, errors.New("corrupt cache entry")
	}
	if err := json.Unmarshal(v[k:k+int(n)], &resp); err != nil {
		return Response{}, nil, fmt.Errorf("corrupt cache entry: %w", err)
	}
	return resp, v[k+int(n):], nil
}

// getChat looks up an answer.
func (c *Cache) getChat(stage string, key []byte) (Response, bool, error) {
	v, err := c.get(topChat, []byte(stage), key)
	if err != nil || v == nil {
		return Response{}, false, err
	}
	resp, _, err := decodeEntry(v)
	if err != nil {
		return Response{}, false, err
	}
	return resp, true, nil
}

// putChat stores an answer and points the request's slot at it. When it
// returns nil both survive a kill of the process.
func (c *Cache) putChat(stage string, key, canon []byte, resp Response, stageName string, slotKey []byte) error {
	v, err := encodeEntry(resp, canon)
	if err != nil {
		return err
	}
	puts := [2]put{{top: topChat, sub: []byte(stage), key: key, val: v}}
	n := 1
	if len(slotKey) > 0 {
		ref := make([]byte, 0, len(stage)+1+len(key))
		ref = append(append(append(ref, stage...), 0), key...)
		puts[1] = put{top: topSlots, sub: []byte(stageName), key: slotKey, val: ref}
		n = 2
	}
	return c.sh.w.write(puts[:n])
}

// lastForSlot returns the canonical request last answered for a slot.
func (c *Cache) lastForSlot(stageName string, slotKey []byte) ([]byte, bool, error) {
	ref, err := c.get(topSlots, []byte(stageName), slotKey)
	if err != nil || ref == nil {
		return nil, false, err
	}
	i := len(ref) - 33 // <stage@version> \x00 <32-byte key>
	if i < 1 || ref[i] != 0 {
		return nil, false, errors.New("corrupt cache slot entry")
	}
	v, err := c.get(topChat, ref[:i], ref[i+1:])
	if err != nil || v == nil {
		return nil, false, err
	}
	_, canon, err := decodeEntry(v)
	return canon, err == nil, err
}

func embedBucket(model string, dims int) []byte {
	return fmt.Appendf(nil, "%s#%d", model, dims)
}

func (c *Cache) getEmbedding(model string, dims int, key []byte) ([]float32, bool, error) {
	v, err := c.get(topEmbed, embedBucket(model, dims), key)
	if err != nil || v == nil {
		return nil, false, err
	}
	if len(v)%4 != 0 {
		return nil, false, errors.New("corrupt cache embedding")
	}
	vec := make([]float32, len(v)/4)
	for i := range vec {
		vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(v[4*i:]))
	}
	return vec, true, nil
}

func (c *Cache) putEmbeddings(model string, dims int, keys [][]byte, vecs [][]float32) error {
	sub := embedBucket(model, dims)
	puts := make([]put, len(keys))
	for i, k := range keys {
		v := make([]byte, 4*len(vecs[i]))
		for j, f := range vecs[i] {
			binary.LittleEndian.PutUint32(v[4*j:], math.Float32bits(f))
		}
		puts[i] = put{top: topEmbed, sub: sub, key: k, val: v}
	}
	return c.sh.w.write(puts)
}

// get returns the value at top/sub/key, or nil; the caller must not
// modify it. Writes not yet committed are seen first.
func (c *Cache) get(top byte, sub, key []byte) ([]byte, error) {
	v, err := c.getOwn(top, sub, key)
	for _, o := range c.others {
		if v != nil || err != nil {
			break
		}
		v, err = o.getOwn(top, sub, key)
	}
	return v, err
}

func (c *Cache) getOwn(top byte, sub, key []byte) ([]byte, error) {
	if c.sh.w != nil {
		if v, ok := c.sh.w.pendingValue(top, sub, key); ok {
			return v, nil
		}
	}
	var out []byte
	err := c.sh.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(topBuckets[top])
		if b == nil {
			return nil
		}
		if b = b.Bucket(sub); b == nil {
			return nil
		}
		if v := b.Get(key); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	return out, err
}

// CacheStats describes a cache for `augment cache stats`.
type CacheStats struct {
	Path       string       `json:"path"`
	Bytes      int64        `json:"bytes"`
	Chat       []CacheCount `json:"chat"`       // per stage@version
	Embeddings []CacheCount `json:"embeddings"` // per model#dimensions
	Slots      int64        `json:"slots"`
}

// CacheCount is the number of entries under one name.
type CacheCount struct {
	Name    string `json:"name"`
	Entries int64  `json:"entries"`
}

// A CacheEntry is one cached chat answer.
type CacheEntry struct {
	Key      string          `json:"key"`     // hex sha256 of the canonical request
	Stage    string          `json:"stage"`   // stage@version
	Request  json.RawMessage `json:"request"` // the canonical request
	Response Response        `json:"response"`
}

// A DamagedCacheError says the cache file's pages cannot be read: bbolt
// panics on a damaged page and faults on one past a cut file's end, which
// guardDamage turns into this error.
type DamagedCacheError struct {
	Path  string
	Cause any // the panic's value
}

func (e *DamagedCacheError) Error() string {
	return fmt.Sprintf("llm cache %s is damaged (%v): move it aside (the run then asks again for the answers it held), or restore it from a copy", e.Path, e.Cause)
}

// guardDamage runs fn, in which bbolt reads the cache file at path through
// its memory map, and returns a *DamagedCacheError for a panic or a memory
// fault there (debug.SetPanicOnFault) instead of crashing the process.
func guardDamage(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = &DamagedCacheError{Path: path, Cause: p}
		}
	}()
	return fn()
}

// Stats counts the entries per stage and embedding model, in name order.
func (c *Cache) Stats() (CacheStats, error) {
	if err := c.Flush(); err != nil {
		return CacheStats{}, err
	}
	st := CacheStats{Path: c.sh.path}
	err := guardDamage(c.sh.path, func() error { return c.statsIn(&st) })
	return st, err
}

func (c *Cache) statsIn(st *CacheStats) error {
	return c.sh.db.View(func(tx *bolt.Tx) error {
		st.Bytes = tx.Size()
		count := func(top []byte) []CacheCount {
			var out []CacheCount
			b := tx.Bucket(top)
			if b == nil {
				return nil
			}
			b.ForEachBucket(func(name []byte) error {
				out = append(out, CacheCount{Name: string(name), Entries: int64(b.Bucket(name).Stats().KeyN)})
				return nil
			})
			return out
		}
		st.Chat, st.Embeddings = count(bucketChat), count(bucketEmbed)
		for _, s := range count(bucketSlots) {
			st.Slots += s.Entries
		}
		return nil
	})
}

// Get returns the chat entry whose hex key starts with prefix (at least 8
// hex digits). It returns ErrCacheMiss when none does, and an error when the
// prefix is ambiguous.
func (c *Cache) Get(prefix string) (CacheEntry, error) {
	prefix = strings.ToLower(prefix)
	if len(prefix) < 8 || len(prefix) > 64 {
		return CacheEntry{}, fmt.Errorf("cache key %q: want 8 to 64 hex digits", prefix)
	}
	if _, err := hex.DecodeString(prefix[:len(prefix)&^1]); err != nil {
		return CacheEntry{}, fmt.Errorf("cache key %q: not hex", prefix)
	}
	if err := c.Flush(); err != nil {
		return CacheEntry{}, err
	}
	seek, _ := hex.DecodeString(prefix[:len(prefix)&^1])
	var found []CacheEntry
	err := c.sh.db.View(func(tx *bolt.Tx) error {
		chat := tx.Bucket(bucketChat)
		if chat == nil {
			return nil
		}
		return chat.ForEachBucket(func(stage []byte) error {
			cur := chat.Bucket(stage).Cursor()
			for k, v := cur.Seek(seek); k != nil && strings.HasPrefix(hex.EncodeToString(k), prefix); k, v = cur.Next() {
				e, err := makeEntry(string(stage), k, v)
				if err != nil {
					return err
				}
				found = append(found, e)
				if len(found) > 1 {
					return nil
				}
			}
			return nil
		})
	})
	switch {
	case err != nil:
		return CacheEntry{}, err
	case len(found) == 0:
		return CacheEntry{}, ErrCacheMiss
	case len(found) > 1:
		return CacheEntry{}, fmt.Errorf("cache key %q is ambiguous; give more digits", prefix)
	}
	return found[0], nil
}

// List calls fn for every chat entry of stage ("" for all stages), stages
// in name order and keys in byte order. An error from fn stops List and is
// returned.
func (c *Cache) List(stage string, fn func(CacheEntry) error) error {
	if err := c.Flush(); err != nil {
		return err
	}
	return c.sh.db.View(func(tx *bolt.Tx) error {
		chat := tx.Bucket(bucketChat)
		if chat == nil {
			return nil
		}
		var stages []string
		chat.ForEachBucket(func(name []byte) error {
			if stage == "" || string(name) == stage {
				stages = append(stages, string(name))
			}
			return nil
		})
		sort.Strings(stages)
		for _, s := range stages {
			err := chat.Bucket([]byte(s)).ForEach(func(k, v []byte) error {
				e, err := makeEntry(s, k, v)
				if err != nil {
					return err
				}
				return fn(e)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func makeEntry(stage string, k, v []byte) (CacheEntry, error) {
	resp, canon, err := decodeEntry(v)
	if err != nil {
		return CacheEntry{}, fmt.Errorf("entry %x: %w", k, err)
	}
	return CacheEntry{Key: hex.EncodeToString(k), Stage: stage, Request: bytes.Clone(canon), Response: resp}, nil
}

// Check verifies the file's internal consistency: every entry of every
// bucket is read (in this goroutine, so that a damaged page is a
// *DamagedCacheError, not a crash), then bbolt's page check runs, which
// reads the pages again in a goroutine of its own.
func (c *Cache) Check() error {
	return guardDamage(c.sh.path, func() error {
		return c.sh.db.View(func(tx *bolt.Tx) error {
			if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walkBucket(b) }); err != nil {
				return err
			}
			var errs []error
			for err := range tx.Check() {
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		})
	})
}

// walkBucket reads every key and value of b and its buckets.
func walkBucket(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				return walkBucket(sub)
			}
		}
		return nil
	})
}
