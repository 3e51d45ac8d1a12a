package llm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The cache's write path. Every answer is appended to a log file beside
// the bbolt file with one write(2) before Complete returns, so a killed
// process loses nothing that was answered: the kernel keeps the written
// bytes. The log is not synced; bbolt commits (which are) carry the
// answers of about a second each, after which that log file is deleted.
// Opening the cache replays what an interrupted process left in its logs.
//
// Log files are named <cache file>-log.<generation as 16 hex digits>.
// Generations only grow; the bbolt file records the last generation whose
// answers it holds (meta/log_applied) in the same transaction as those
// answers, so a log is never applied over newer answers, and one whose
// deletion a power loss undid is just removed.
//
// A log file is logMagic followed by records:
//
//	uint32 LE  payload length (> 0)
//	uint32 LE  CRC-32C of the length bytes and the payload
//	payload    uvarint number of puts (≥ 1), then per put: one byte
//	           naming the top bucket (0 chat, 1 slots, 2 embed) and the
//	           uvarint-length-prefixed sub-bucket name, key and value
//
// Replay stops at the first record that is cut short or fails its
// checksum: the tail of a write interrupted by the kill or power loss.

const (
	logMagic = "augment-llm-log\x01"
	// maxLogRecord bounds one record; answers and embedding batches are far
	// smaller, so a longer length field is damage, not data.
	maxLogRecord = 1 << 30
)

var (
	bucketMeta    = []byte("meta") // meta/log_applied → uint64 BE generation
	keyLogApplied = []byte("log_applied")
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// Top buckets by their number in log records.
var topBuckets = [...][]byte{bucketChat, bucketSlots, bucketEmbed}

const (
	topChat byte = iota
	topSlots
	topEmbed
)

// A put is one write: key → val in the sub-bucket sub of a top bucket.
type put struct {
	top           byte
	sub, key, val []byte
}

// appendRecord appends the framed log record holding puts to b.
func appendRecord(b []byte, puts []put) []byte {
	start := len(b)
	b = append(b, make([]byte, 8)...)
	b = binary.AppendUvarint(b, uint64(len(puts)))
	for _, p := range puts {
		b = append(b, p.top)
		for _, f := range [][]byte{p.sub, p.key, p.val} {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start-8))
	crc := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+8:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b
}

// errTorn marks the end of a log's usable records.
var errTorn = errors.New("record cut short or damaged")

// readRecord reads the next record from r. It returns io.EOF at a clean
// end, errTorn for a record cut short or failing its checksum, and another
// error for a record that is intact but not one this code writes. The
// puts alias a fresh buffer.
func readRecord(r *bufio.Reader) ([]put, error) {
	var head [8]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		if n == 0 && err == io.EOF {
			return nil, io.EOF
		}
		return nil, errTorn
	}
	n := binary.LittleEndian.Uint32(head[:4])
	if n == 0 || n > maxLogRecord {
		return nil, errTorn
	}
	// Grow with what actually arrives, so a damaged length cannot claim a
	// gigabyte the file does not have.
	payload := make([]byte, 0, min(int(n), 1<<20))
	for len(payload) < int(n) {
		chunk := min(int(n)-len(payload), 1<<20)
		payload = slices.Grow(payload, chunk)
		k, err := io.ReadFull(r, payload[len(payload):len(payload)+chunk])
		payload = payload[:len(payload)+k]
		if err != nil {
			return nil, errTorn
		}
	}
	crc := crc32.Update(crc32.Checksum(head[:4], castagnoli), castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(head[4:]) {
		return nil, errTorn
	}
	return decodePuts(payload)
}

// decodePuts parses a record's payload.
func decodePuts(b []byte) ([]put, error) {
	count, k := binary.Uvarint(b)
	if k <= 0 || count == 0 || count > uint64(len(b)) {
		return nil, errors.New("bad put count")
	}
	b = b[k:]
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		f := b[k : k+int(n) : k+int(n)]
		b = b[k+int(n):]
		return f, true
	}
	// Grow with the puts actually parsed, not with the claimed count.
	puts := make([]put, 0, min(count, 64))
	for i := range int(count) {
		if len(b) == 0 || int(b[0]) >= len(topBuckets) {
			return nil, fmt.Errorf("put %d: bad bucket", i)
		}
		p := put{top: b[0]}
		b = b[1:]
		var ok [3]bool
		p.sub, ok[0] = field()
		p.key, ok[1] = field()
		p.val, ok[2] = field()
		switch {
		case ok != [3]bool{true, true, true}:
			return nil, fmt.Errorf("put %d: field runs past the record", i)
		case len(p.sub) == 0 || len(p.sub) > bolt.MaxKeySize:
			return nil, fmt.Errorf("put %d: bad sub-bucket name length %d", i, len(p.sub))
		case len(p.key) == 0 || len(p.key) > bolt.MaxKeySize:
			return nil, fmt.Errorf("put %d: bad key length %d", i, len(p.key))
		}
		puts = append(puts, p)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last put", len(b))
	}
	return puts, nil
}

// logPath is the log file of generation gen beside the cache file.
func logPath(cacheFile string, gen uint64) string {
	return fmt.Sprintf("%s-log.%016x", cacheFile, gen)
}

// logName is the name of a log in the cache directory.
func logName(gen uint64) string { return logPath(CacheFile, gen) }

type logFile struct {
	gen  uint64
	name string // in the cache directory
}

// listLogs returns the cache file's logs in generation order.
func listLogs(cacheFile cachePath) ([]logFile, error) {
	entries, err := fs.ReadDir(cacheFile.root.FS(), ".")
	if err != nil {
		return nil, err
	}
	prefix := CacheFile + "-log."
	var out []logFile
	for _, e := range entries {
		hex, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || len(hex) != 16 || !e.Type().IsRegular() {
			continue
		}
		gen, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		out = append(out, logFile{gen: gen, name: e.Name()})
	}
	slices.SortFunc(out, func(a, b logFile) int { return cmpUint(a.gen, b.gen) })
	return out, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// logApplied is the last log generation whose answers the file holds.
func logApplied(tx *bolt.Tx) uint64 {
	if b := tx.Bucket(bucketMeta); b != nil {
		if v := b.Get(keyLogApplied); len(v) == 8 {
			return binary.BigEndian.Uint64(v)
		}
	}
	return 0
}

// pendingLogs reports whether logs hold answers the file may lack; only a
// process with write access can move them in.
func pendingLogs(db *bolt.DB, cacheFile cachePath) (bool, error) {
	logs, err := listLogs(cacheFile)
	if err != nil || len(logs) == 0 {
		return false, err
	}
	var applied uint64
	if err := db.View(func(tx *bolt.Tx) error { applied = logApplied(tx); return nil }); err != nil {
		return false, err
	}
	for _, lf := range logs {
		if fi, err := cacheFile.root.Lstat(lf.name); err == nil && lf.gen > applied && fi.Size() > int64(len(logMagic)) {
			return true, nil
		}
	}
	return false, nil
}

// replayBatch bounds the puts of one replay transaction.
const replayBatch = 50000

// replayLogs moves the answers of every log newer than the file's applied
// generation into the file, deletes all logs, and returns the generation
// the next log takes. Replaying the same log twice (a kill during replay)
// writes the same values again.
func replayLogs(db *bolt.DB, cacheFile cachePath) (uint64, error) {
	logs, err := listLogs(cacheFile)
	if err != nil {
		return 0, err
	}
	var applied uint64
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketChat, bucketSlots, bucketEmbed, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		applied = logApplied(tx)
		return nil
	})
	if err != nil {
		return 0, err
	}
	next := applied + 1
	for _, lf := range logs {
		next = max(next, lf.gen+1)
		if lf.gen > applied {
			if err := replayLog(db, cacheFile, lf); err != nil {
				return 0, err
			}
		}
		if err := cacheFile.root.Remove(lf.name); err != nil {
			return 0, err
		}
	}
	return next, nil
}

func replayLog(db *bolt.DB, cacheFile cachePath, lf logFile) error {
	f, err := cacheFile.root.Open(lf.name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var batch []put
	magic := make([]byte, len(logMagic))
	n, _ := io.ReadFull(r, magic)
	switch {
	case string(magic[:n]) == logMagic:
		for offset := int64(len(logMagic)); ; {
			puts, err := readRecord(r)
			if err == io.EOF || errors.Is(err, errTorn) {
				break
			}
			if err != nil {
				return fmt.Errorf("log %s: record at byte %d: %w (move the file away to open the cache without it)", cacheFile.in(lf.name), offset, err)
			}
			offset += int64(recordSize(puts))
			batch = append(batch, puts...)
			if len(batch) >= replayBatch {
				if err := db.Update(func(tx *bolt.Tx) error { return applyPuts(tx, batch) }); err != nil {
					return err
				}
				batch = nil
			}
		}
	case !strings.HasPrefix(logMagic, string(magic[:n])) && strings.Trim(string(magic[:n]), "\x00") != "":
		return fmt.Errorf("log %s is not an augment cache log (move it away to open the cache)", cacheFile.in(lf.name))
	}
	// Otherwise the header itself is cut short or zeroed: nothing of this
	// log reached the disk before a power loss.
	return db.Update(func(tx *bolt.Tx) error {
		if err := applyPuts(tx, batch); err != nil {
			return err
		}
		return setLogApplied(tx, lf.gen)
	})
}

// recordSize is the framed size of a record holding puts.
func recordSize(puts []put) int {
	n := 8 + uvarintLen(uint64(len(puts)))
	for _, p := range puts {
		n++
		for _, f := range [][]byte{p.sub, p.key, p.val} {
			n += uvarintLen(uint64(len(f))) + len(f)
		}
	}
	return n
}

func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}

func setLogApplied(tx *bolt.Tx, gen uint64) error {
	return tx.Bucket(bucketMeta).Put(keyLogApplied, binary.BigEndian.AppendUint64(nil, gen))
}

// applyPuts writes puts in one transaction.
func applyPuts(tx *bolt.Tx, puts []put) error {
	type subKey struct {
		top byte
		sub string
	}
	subs := map[subKey]*bolt.Bucket{}
	for _, p := range puts {
		b := subs[subKey{p.top, string(p.sub)}]
		if b == nil {
			var err error
			if b, err = tx.Bucket(topBuckets[p.top]).CreateBucketIfNotExists(p.sub); err != nil {
				return err
			}
			subs[subKey{p.top, string(p.sub)}] = b
		}
		if err := b.Put(p.key, p.val); err != nil {
			return err
		}
	}
	return nil
}

// createLog creates the (empty) log of generation gen.
func createLog(cacheFile cachePath, gen uint64) (*os.File, error) {
	f, err := cacheFile.root.OpenFile(logName(gen), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(logMagic); err != nil {
		f.Close()
		cacheFile.root.Remove(logName(gen))
		return nil, err
	}
	return f, nil
}

// writer appends each write to the current log before it returns, keeps
// it readable in memory, and moves the accumulated writes into the bbolt
// file in one transaction about every commitDelay, switching to a fresh
// log for the writes that arrive meanwhile.
type writer struct {
	db        *bolt.DB
	cacheFile cachePath

	mu        sync.Mutex
	log       *os.File // current log; nil once closed
	gen       uint64   // its generation
	logBytes  int
	queue     []put             // writes in the current log, in order
	pending   map[string][]byte // written but not yet committed, by pendingKey
	seq       uint64            // puts written so far
	committed uint64            // puts committed so far
	waiters   []flushWaiter
	err       error      // first failure; every later write fails with it
	room      *sync.Cond // signalled after each commit (backpressure)

	kick chan struct{} // something was written
	full chan struct{} // commit now: a full batch, or a flush waits
	done chan struct{}
	quit chan struct{}
}

type flushWaiter struct {
	seq uint64
	ch  chan error
}

// Writes accumulate for commitDelay after the first one, or until
// commitBatch puts or commitBytes of log are waiting, before they are
// committed: one fsync'd transaction then carries the answers of a second
// even at thousands per second, and a power loss (which can take what the
// kernel had not yet written out) loses at most about that second. A kill
// loses nothing.
const (
	commitDelay = time.Second
	commitBatch = 16384
	commitBytes = 32 << 20
	// maxQueued bounds the writes waiting for a commit; beyond it writers
	// wait until the disk catches up.
	maxQueued = 4 * commitBatch
)

var errCacheClosed = errors.New("llm cache is closed")

// openWriter replays what earlier processes left in their logs and starts
// a fresh log.
func openWriter(db *bolt.DB, cacheFile cachePath) (*writer, error) {
	gen, err := replayLogs(db, cacheFile)
	if err != nil {
		return nil, err
	}
	f, err := createLog(cacheFile, gen)
	if err != nil {
		return nil, err
	}
	w := &writer{db: db, cacheFile: cacheFile, log: f, gen: gen, pending: map[string][]byte{},
		done: make(chan struct{}), quit: make(chan struct{}), kick: make(chan struct{}, 1), full: make(chan struct{}, 1)}
	w.room = sync.NewCond(&w.mu)
	go w.loop()
	return w, nil
}

// pendingKey appends the in-memory key of a put to b.
func pendingKey(b []byte, top byte, sub, key []byte) []byte {
	b = append(b, top)
	b = binary.AppendUvarint(b, uint64(len(sub)))
	b = append(b, sub...)
	return append(b, key...)
}

var recordBufs = sync.Pool{New: func() any { return new([]byte) }}

// write appends puts to the log as one record and makes them visible to
// lookups. When it returns nil the puts survive a kill of the process.
func (w *writer) write(puts []put) error {
	buf := recordBufs.Get().(*[]byte)
	*buf = appendRecord((*buf)[:0], puts)
	defer func() {
		if cap(*buf) <= 1<<20 { // big embedding batches are not kept
			recordBufs.Put(buf)
		}
	}()

	w.mu.Lock()
	for len(w.queue) >= maxQueued && w.err == nil {
		w.room.Wait()
	}
	err := w.err
	if err == nil && w.log == nil {
		err = errCacheClosed
	}
	if err == nil {
		if _, werr := w.log.Write(*buf); werr != nil {
			w.err = fmt.Errorf("llm cache log: %w", werr)
			err = w.err
			w.room.Broadcast()
		}
	}
	if err != nil {
		w.mu.Unlock()
		return err
	}
	var kb [128]byte
	for _, p := range puts {
		w.queue = append(w.queue, p)
		w.pending[string(pendingKey(kb[:0], p.top, p.sub, p.key))] = p.val
	}
	w.seq += uint64(len(puts))
	w.logBytes += len(*buf)
	full := len(w.queue) >= commitBatch || w.logBytes >= commitBytes
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

// pendingValue returns a written put's value that may not be committed yet.
func (w *writer) pendingValue(top byte, sub, key []byte) ([]byte, bool) {
	var kb [128]byte
	k := pendingKey(kb[:0], top, sub, key)
	w.mu.Lock()
	v, ok := w.pending[string(k)]
	w.mu.Unlock()
	return v, ok
}

// flush waits until everything written before the call is committed.
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

// close commits what is left and deletes the log. Nothing may be written
// concurrently.
func (w *writer) close() error {
	close(w.quit)
	<-w.done
	w.mu.Lock()
	batch, f, gen, upto, err := w.queue, w.log, w.gen, w.seq, w.err
	w.queue, w.log = nil, nil
	w.mu.Unlock()
	if f == nil {
		return err
	}
	if err == nil && len(batch) > 0 {
		err = w.commit(batch, gen)
	}
	f.Close()
	if err == nil {
		w.cacheFile.root.Remove(logName(gen))
	}
	w.finish(batch, upto, err)
	return err
}

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
		case <-w.quit:
			timer.Stop()
			return
		}
		for w.commitOnce() {
		}
	}
}

// commitOnce commits the current log's writes, switching to a new log,
// and reports whether another commit is due at once (a full queue or a
// flush still waiting).
func (w *writer) commitOnce() bool {
	select {
	case <-w.full:
	default:
	}
	w.mu.Lock()
	if len(w.queue) == 0 || w.err != nil {
		w.mu.Unlock()
		return false
	}
	next, err := createLog(w.cacheFile, w.gen+1)
	if err != nil {
		w.err = fmt.Errorf("llm cache log: %w", err)
		w.failWaiters()
		w.mu.Unlock()
		return false
	}
	batch, upto, old, gen := w.queue, w.seq, w.log, w.gen
	w.queue, w.log, w.gen, w.logBytes = make([]put, 0, len(batch)), next, w.gen+1, 0
	w.mu.Unlock()

	err = w.commit(batch, gen)
	old.Close()
	if err == nil {
		w.cacheFile.root.Remove(logName(gen))
	}
	w.finish(batch, upto, err)

	w.mu.Lock()
	defer w.mu.Unlock()
	due := len(w.queue) >= commitBatch || w.logBytes >= commitBytes
	for _, fw := range w.waiters {
		due = due || fw.seq > w.committed
	}
	return due && w.err == nil
}

// commit writes batch, the content of log gen, into the file.
func (w *writer) commit(batch []put, gen uint64) error {
	return w.db.Update(func(tx *bolt.Tx) error {
		if err := applyPuts(tx, batch); err != nil {
			return err
		}
		return setLogApplied(tx, gen)
	})
}

// finish records the outcome of committing batch (the puts up to seq
// upto): committed puts leave the in-memory index, flush waiters learn.
func (w *writer) finish(batch []put, upto uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.room.Broadcast()
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("llm cache write: %w", err)
		}
		w.failWaiters()
		return
	}
	w.committed = upto
	var kb [128]byte
	for _, p := range batch {
		k := pendingKey(kb[:0], p.top, p.sub, p.key)
		// A later write of the same key keeps its own entry.
		if v, ok := w.pending[string(k)]; ok && sameBytes(v, p.val) {
			delete(w.pending, string(k))
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
}

// sameBytes reports whether a and b are the same slice (not merely equal
// contents).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// failWaiters hands w.err to every flush waiter; w.mu is held.
func (w *writer) failWaiters() {
	for _, fw := range w.waiters {
		fw.ch <- w.err
	}
	w.waiters = nil
	w.room.Broadcast()
}
