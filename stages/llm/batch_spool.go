package llm

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sync"

	"github.com/augmentdata/augment/atomicfs"
)

// spoolDir holds the batch files of the stage pass under way; a new
// teacher removes it, since a pass that did not finish is redone.
const spoolDir = "spool"

// chatURL is the url of every batch line.
const chatURL = "/v1/chat/completions"

// A spool collects one stage pass's cache misses as batch lines, streaming
// them to files of at most maxRequests lines and maxBytes bytes. Memory is
// the two write buffers plus 8 bytes per distinct request (to write each
// request once, however many records ask it).
type spool struct {
	stage        string
	epoch, round int
	root         *atomicfs.Root // the batch directory
	dir          string         // the pass's folder in root
	maxRequests  int
	maxBytes     int64

	mu    sync.Mutex
	seen  map[uint64]struct{}
	cur   *spoolPart
	parts []spoolPart // sealed
	err   error       // a write failed: every later add fails too
}

// A spoolPart is one future batch file and its metadata sidecar.
type spoolPart struct {
	in, meta    *atomicfs.File
	inW, metaW  *bufio.Writer
	inName      string // in the batch directory
	metaName    string
	requests    int
	bytes       int64
	estTokens   int64
	maxOutToken int64 // sum of the requests' output token limits
}

func newSpool(root *atomicfs.Root, stage string, epoch, round, maxRequests int, maxBytes int64) *spool {
	return &spool{
		stage: stage, epoch: epoch, round: round, root: root, dir: path.Join(spoolDir, jobStem(stage)),
		maxRequests: maxRequests, maxBytes: maxBytes, seen: map[uint64]struct{}{},
	}
}

// batchLine is one request line of the OpenAI batch format.
func batchLine(key []byte, body []byte) []byte {
	line := make([]byte, 0, len(body)+140)
	line = append(line, `{"custom_id":"`...)
	line = hex.AppendEncode(line, key)
	line = append(line, `","method":"POST","url":"`+chatURL+`","body":`...)
	line = append(line, body...)
	return append(line, "}\n"...)
}

// batchMeta is one line of a job's metadata sidecar: what the cache entry
// of the answer needs besides the answer.
type batchMeta struct {
	CustomID string          `json:"custom_id"`
	Stage    string          `json:"stage"` // request's stage@version
	Slot     string          `json:"slot,omitempty"`
	Attempt  int             `json:"attempt,omitempty"`
	Canon    json.RawMessage `json:"canon"`
}

// add writes one request unless the pass already wrote it, and says
// whether it wrote it: a request the pass already holds is an identical
// request in flight (its answer comes with the first copy's). maxOut is
// its output token limit (0: none), for the cost estimate.
func (sp *spool) add(req Request, key, canon, body []byte, maxOut int) (bool, error) {
	line := batchLine(key, body)
	if int64(len(line)) > sp.maxBytes {
		return false, &AnswerError{Reason: "llm_batch_request_too_large", Stage: req.Stage, Slot: req.Slot, Attempts: 0,
			Err: fmt.Errorf("the batch line is %d bytes, more than teacher.batch.max_bytes %d", len(line), sp.maxBytes)}
	}
	meta, err := json.Marshal(batchMeta{CustomID: hex.EncodeToString(key), Stage: req.Stage, Slot: req.Slot, Attempt: req.Attempt, Canon: canon})
	if err != nil {
		return false, err
	}
	meta = append(meta, '\n')
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.err != nil {
		return false, sp.err
	}
	// A collision of the first 8 key bytes drops a request from this
	// pass's files; it misses again in the next pass and goes then.
	h := binary.LittleEndian.Uint64(key)
	if _, dup := sp.seen[h]; dup {
		return false, nil
	}
	if sp.cur != nil && (sp.cur.requests+1 > sp.maxRequests || sp.cur.bytes+int64(len(line)) > sp.maxBytes) {
		if err := sp.sealLocked(); err != nil {
			return false, err
		}
	}
	if sp.cur == nil {
		if err := sp.startLocked(); err != nil {
			return false, err
		}
	}
	p := sp.cur
	if _, err := p.inW.Write(line); err != nil {
		return false, sp.fail(err)
	}
	if _, err := p.metaW.Write(meta); err != nil {
		return false, sp.fail(err)
	}
	sp.seen[h] = struct{}{}
	p.requests++
	p.bytes += int64(len(line))
	p.estTokens += int64(len(body)+3) / 4
	p.maxOutToken += int64(maxOut)
	return true, nil
}

func (sp *spool) fail(err error) error {
	sp.err = fmt.Errorf("batch spool: %w", err)
	return sp.err
}

func (sp *spool) startLocked() error {
	n := len(sp.parts) + 1
	p := &spoolPart{
		inName:   path.Join(sp.dir, fmt.Sprintf("part-%04d.input.jsonl", n)),
		metaName: path.Join(sp.dir, fmt.Sprintf("part-%04d.meta.jsonl", n)),
	}
	var err error
	if p.in, err = sp.root.Create(p.inName); err != nil {
		return sp.fail(err)
	}
	if p.meta, err = sp.root.Create(p.metaName); err != nil {
		p.in.Abort()
		return sp.fail(err)
	}
	p.inW, p.metaW = bufio.NewWriterSize(p.in, 64<<10), bufio.NewWriterSize(p.meta, 64<<10)
	sp.cur = p
	return nil
}

// sealLocked flushes and commits the current part.
func (sp *spool) sealLocked() error {
	p := sp.cur
	if p == nil {
		return nil
	}
	sp.cur = nil
	for _, step := range []func() error{p.inW.Flush, p.metaW.Flush, p.in.Commit, p.meta.Commit} {
		if err := step(); err != nil {
			p.in.Abort()
			p.meta.Abort()
			return sp.fail(err)
		}
	}
	p.in, p.meta, p.inW, p.metaW = nil, nil, nil, nil
	sp.parts = append(sp.parts, *p)
	return nil
}

// seal commits the last part and returns every part of the pass.
func (sp *spool) seal() ([]spoolPart, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.err != nil {
		return nil, sp.err
	}
	if err := sp.sealLocked(); err != nil {
		return nil, err
	}
	return sp.parts, nil
}

// discard removes the pass's files.
func (sp *spool) discard() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.cur != nil {
		sp.cur.in.Abort()
		sp.cur.meta.Abort()
		sp.cur = nil
	}
	sp.root.RemoveAll(sp.dir)
}
