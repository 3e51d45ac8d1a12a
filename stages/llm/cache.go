package llm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
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
// text. It is a single bbolt file: crash-safe (a kill -9 loses at most the
// answers of the last few milliseconds, never the file), O(log n) lookups
// without loading it, and readable by `augment cache`.
//
// Writes go through a write-behind queue committed in groups, so thousands
// of answers per second share each fsync; answers still in the queue are
// visible to lookups. Within a process, caches opened on the same directory
// share one file handle; another process opening the same directory waits
// briefly and then fails (bbolt's file lock).
type Cache struct {
	sh     *sharedDB
	mu     sync.Mutex
	closed bool
}

type sharedDB struct {
	db       *bolt.DB
	path     string
	readOnly bool
	refs     int // guarded by openCaches.mu
	w        *writer
}

var openCaches = struct {
	sync.Mutex
	m map[string]*sharedDB
}{m: map[string]*sharedDB{}}

// OpenCache opens (creating if needed) the cache in dir for reading and
// writing.
func OpenCache(dir string) (*Cache, error) { return openCache(dir, false) }

// OpenCacheReadOnly opens an existing cache for inspection. It fails if a
// running augment process holds the cache.
func OpenCacheReadOnly(dir string) (*Cache, error) { return openCache(dir, true) }

func openCache(dir string, readOnly bool) (*Cache, error) {
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
	} else if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("llm cache: %w", err)
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{
		Timeout:      2 * time.Second,
		ReadOnly:     readOnly,
		FreelistType: bolt.FreelistMapType, // O(1) page allocation in big files
		// Commits skip writing the free-page list (it is rebuilt by a scan
		// when the file opens), as etcd does; still safe after a crash.
		NoFreelistSync: true,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("llm cache %s is in use by another augment process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("llm cache %s: %w", path, err)
	}
	if !readOnly {
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketChat, bucketSlots, bucketEmbed} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("llm cache %s: %w", path, err)
		}
	}
	sh := &sharedDB{db: db, path: path, readOnly: readOnly, refs: 1}
	if !readOnly {
		sh.w = newWriter(db)
	}
	openCaches.m[path] = sh
	return &Cache{sh: sh}, nil
}

// Path is the cache file.
func (c *Cache) Path() string { return c.sh.path }

// Flush waits until every answer handed to the cache so far is on disk.
func (c *Cache) Flush() error {
	if c.sh.w == nil {
		return nil
	}
	return c.sh.w.flush()
}

// Close flushes and releases the cache; the file closes with its last
// handle in the process.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	openCaches.Lock()
	defer openCaches.Unlock()
	c.sh.refs--
	if c.sh.refs > 0 {
		return c.Flush()
	}
	delete(openCaches.m, c.sh.path)
	var err error
	if c.sh.w != nil {
		err = c.sh.w.close()
	}
	return errors.Join(err, c.sh.db.Close())
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
	v, err := c.get(bucketChat, []byte(stage), key)
	if err != nil || v == nil {
		return Response{}, false, err
	}
	resp, _, err := decodeEntry(v)
	if err != nil {
		return Response{}, false, err
	}
	return resp, true, nil
}

// putChat queues an answer and points the request's slot at it.
func (c *Cache) putChat(stage string, key, canon []byte, resp Response, stageName string, slotKey []byte) error {
	v, err := encodeEntry(resp, canon)
	if err != nil {
		return err
	}
	puts := []put{{top: bucketChat, sub: []byte(stage), key: key, val: v}}
	if len(slotKey) > 0 {
		ref := make([]byte, 0, len(stage)+1+len(key))
		ref = append(append(append(ref, stage...), 0), key...)
		puts = append(puts, put{top: bucketSlots, sub: []byte(stageName), key: slotKey, val: ref})
	}
	return c.sh.w.enqueue(puts)
}

// lastForSlot returns the canonical request last answered for a slot.
func (c *Cache) lastForSlot(stageName string, slotKey []byte) ([]byte, bool, error) {
	ref, err := c.get(bucketSlots, []byte(stageName), slotKey)
	if err != nil || ref == nil {
		return nil, false, err
	}
	i := len(ref) - 33 // <stage@version> \x00 <32-byte key>
	if i < 1 || ref[i] != 0 {
		return nil, false, errors.New("corrupt cache slot entry")
	}
	v, err := c.get(bucketChat, ref[:i], ref[i+1:])
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
	v, err := c.get(bucketEmbed, embedBucket(model, dims), key)
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
		puts[i] = put{top: bucketEmbed, sub: sub, key: k, val: v}
	}
	return c.sh.w.enqueue(puts)
}

// get returns a copy of the value at top/sub/key, or nil. Queued writes
// are seen first.
func (c *Cache) get(top, sub, key []byte) ([]byte, error) {
	if c.sh.w != nil {
		if v, ok := c.sh.w.pendingValue(top, sub, key); ok {
			return v, nil
		}
	}
	var out []byte
	err := c.sh.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(top)
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

// A put is one queued write.
type put struct{ top, sub, key, val []byte }

func pendingKey(top, sub, key []byte) string {
	return string(top) + "\x00" + string(sub) + "\x00" + string(key)
}

// writer commits queued puts in groups: whatever accumulated while the
// previous commit was syncing goes into the next transaction.
type writer struct {
	db *bolt.DB

	mu        sync.Mutex
	queue     []put
	pending   map[string][]byte // queued or being committed, for lookups
	seq       uint64            // puts enqueued so far
	committed uint64            // puts on disk so far
	waiters   []flushWaiter
	err       error      // first commit failure; every later write fails with it
	room      *sync.Cond // signalled after each commit (backpressure)

	kick chan struct{} // something was queued
	full chan struct{} // commit now: a full batch, or a flush waits
	done chan struct{}
	quit chan struct{}
}

type flushWaiter struct {
	seq uint64
	ch  chan error
}

// maxQueued bounds the answers waiting for a commit; beyond it enqueue
// blocks until the disk catches up.
const maxQueued = 20000

func newWriter(db *bolt.DB) *writer {
	w := &writer{db: db, pending: map[string][]byte{}, done: make(chan struct{}), quit: make(chan struct{}),
		kick: make(chan struct{}, 1), full: make(chan struct{}, 1)}
	w.room = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

func (w *writer) enqueue(puts []put) error {
	w.mu.Lock()
	for len(w.queue) >= maxQueued && w.err == nil {
		w.room.Wait()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	for _, p := range puts {
		w.queue = append(w.queue, p)
		w.pending[pendingKey(p.top, p.sub, p.key)] = p.val
	}
	w.seq += uint64(len(puts))
	full := len(w.queue) >= commitBatch
	w.mu.Unlock()
	signal(w.kick)
	if full {
		signal(w.full)
	}
	return nil
}

// signal sends on a one-slot channel unless a signal is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *writer) pendingValue(top, sub, key []byte) ([]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil, false
	}
	v, ok := w.pending[pendingKey(top, sub, key)]
	return v, ok
}

// flush waits until everything enqueued before the call is on disk.
func (w *writer) flush() error {
	w.mu.Lock()
	if w.err != nil || w.committed >= w.seq {
		err := w.err
		w.mu.Unlock()
		return err
	}
	ch := make(chan error, 1)
	w.waiters = append(w.waiters, flushWaiter{seq: w.seq, ch: ch})
	w.mu.Unlock()
	signal(w.kick)
	signal(w.full)
	return <-ch
}

func (w *writer) close() error {
	err := w.flush()
	close(w.quit)
	<-w.done
	return err
}

// Answers accumulate for up to commitDelay, or until commitBatch of them
// are queued, before a commit: at thousands of answers per second each
// fsync then carries hundreds, and at a few per second the disk is not
// synced for each. It bounds what a kill -9 can lose to about the answers
// of the last 10 ms (or the last 256), which a rerun asks again.
const (
	commitDelay = 10 * time.Millisecond
	commitBatch = 256
)

func (w *writer) loop() {
	defer close(w.done)
	timer := time.NewTimer(commitDelay)
	timer.Stop()
	for {
		select {
		case <-w.kick:
		case <-w.quit:
			return
		}
		timer.Reset(commitDelay)
		select {
		case <-timer.C:
		case <-w.full:
			timer.Stop()
		}
		for w.commitOnce() {
		}
	}
}

// commitOnce writes the current queue in one transaction and reports
// whether more arrived meanwhile.
func (w *writer) commitOnce() bool {
	w.mu.Lock()
	batch, upto := w.queue, w.seq
	w.queue = nil
	w.mu.Unlock()
	if len(batch) == 0 {
		return false
	}
	err := w.db.Update(func(tx *bolt.Tx) error {
		subs := map[string]*bolt.Bucket{}
		for _, p := range batch {
			name := string(p.top) + "\x00" + string(p.sub)
			b := subs[name]
			if b == nil {
				var err error
				if b, err = tx.Bucket(p.top).CreateBucketIfNotExists(p.sub); err != nil {
					return err
				}
				subs[name] = b
			}
			if err := b.Put(p.key, p.val); err != nil {
				return err
			}
		}
		return nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("llm cache write: %w", err)
		}
		for _, fw := range w.waiters {
			fw.ch <- w.err
		}
		w.waiters = nil
		w.room.Broadcast()
		return false
	}
	w.committed = upto
	for _, p := range batch {
		k := pendingKey(p.top, p.sub, p.key)
		if v, ok := w.pending[k]; ok && bytes.Equal(v, p.val) {
			delete(w.pending, k)
		}
	}
	keep := w.waiters[:0]
	for _, fw := range w.waiters {
		if fw.seq <= upto {
			fw.ch <- nil
		} else {
			keep = append(keep, fw)
		}
	}
	w.waiters = keep
	w.room.Broadcast()
	return len(w.queue) > 0
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

// Stats counts the entries per stage and embedding model, in name order.
func (c *Cache) Stats() (CacheStats, error) {
	if err := c.Flush(); err != nil {
		return CacheStats{}, err
	}
	st := CacheStats{Path: c.sh.path}
	err := c.sh.db.View(func(tx *bolt.Tx) error {
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
	return st, err
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

// Check verifies the file's internal consistency (bbolt's page check).
func (c *Cache) Check() error {
	return c.sh.db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}
