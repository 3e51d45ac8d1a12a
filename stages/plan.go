package stages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// Plans: a Planner's whole-input result, computed once and saved.
//
// A PlanSaver's plan is written to <stage dir>/plan.bin (named in the stage
// manifest's Files, so the deletion rules of the stage's other files hold)
// together with the key of what it was computed from: the stage's settings
// (its fingerprint) and every input shard's path and hash. A process that
// needs the plan loads the file when its key matches instead of reading the
// whole input again:
//   - one process computes the plan and saves it; a resumed run (a shard
//     failed, records to retry) loads it;
//   - among workers, worker 0 computes and publishes it; the others wait
//     for the file with the current key (the workers' poll) and load it;
//   - augment merge loads it.
//
// The file is deterministic: the same inputs and settings give the same
// bytes, whichever process wrote it.

// A PlanSaver is a Planner whose plan can be saved and loaded.
//
// SavePlan writes the plan the last Plan or LoadPlan call made, as bytes
// that depend on nothing but the plan. LoadPlan reads what SavePlan wrote
// and sets up the stage as Plan would have; on error the stage is left
// unplanned.
type PlanSaver interface {
	Planner
	SavePlan(w io.Writer) error
	LoadPlan(r io.Reader) error
}

const (
	planFile = "plan.bin"
	// planFormat is the envelope's version; a payload's format is covered
	// by its stage's version, which is part of the key.
	planFormat = 1
	planMagic  = "augment plan\n"
)

// planHeader is the JSON line after the magic line.
type planHeader struct {
	Format int    `json:"format"`
	Type   string `json:"type"`   // the stage type
	Key    string `json:"key"`    // planKey of the inputs and settings
	Digest string `json:"digest"` // what Plan returned
	Bytes  int    `json:"bytes"`  // the payload's length
}

// planKey identifies the input of a stage's plan: the stage's settings and
// every input shard, in order.
func planKey(fp string, inputs []shardInput) string {
	refs := make([]manifests.FileRef, len(inputs))
	for i, in := range inputs {
		refs[i] = in.ref
	}
	return shardKey(fp, fmt.Sprintf("plan-input format=%d", planFormat), refs...)
}

// encodePlan frames a plan: the magic line, the header line, the payload
// and a last line "sha256 <hex>" over everything before it.
func encodePlan(h planHeader, payload []byte) []byte {
	h.Format, h.Bytes = planFormat, len(payload)
	hb, _ := json.Marshal(h)
	var b bytes.Buffer
	b.WriteString(planMagic)
	b.Write(hb)
	b.WriteByte('\n')
	b.Write(payload)
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "sha256 %s\n", hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// decodePlan checks a framed plan and returns its header and payload.
func decodePlan(b []byte) (planHeader, []byte, error) {
	var h planHeader
	const sumLine = len("sha256 ") + 64 + 1
	if len(b) < len(planMagic)+sumLine || !bytes.HasPrefix(b, []byte(planMagic)) {
		return h, nil, errors.New("not a plan file")
	}
	body, tail := b[:len(b)-sumLine], b[len(b)-sumLine:]
	sum := sha256.Sum256(body)
	if string(tail) != "sha256 "+hex.EncodeToString(sum[:])+"\n" {
		return h, nil, errors.New("checksum mismatch")
	}
	rest := body[len(planMagic):]
	line, payload, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return h, nil, errors.New("no header")
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, nil, fmt.Errorf("header: %w", err)
	}
	if h.Format != planFormat {
		return h, nil, fmt.Errorf("format %d, want %d", h.Format, planFormat)
	}
	if h.Bytes != len(payload) {
		return h, nil, fmt.Errorf("payload of %d bytes, header says %d", len(payload), h.Bytes)
	}
	return h, payload, nil
}

// A planOutcome says how a stage got its plan.
type planOutcome struct {
	digest string
	files  []string // files to name in the stage manifest (run-relative)
	source string   // "computed" or "loaded"
}

// stagePlan gives a Planner its plan: loaded from the stage's plan file
// when its key matches, else computed (and saved) by one process alone, by
// worker 0 among workers, while the other workers wait for the file.
func (r *Runner) stagePlan(ctx context.Context, sr stageRun, pl Planner, typ, fp string, inputs []shardInput) (planOutcome, error) {
	ps, ok := pl.(PlanSaver)
	if !ok || r.root == nil {
		d, err := r.runPlan(ctx, pl, inputs)
		return planOutcome{digest: d, source: "computed"}, err
	}
	key := planKey(fp, inputs)
	name := sr.rel + "/" + planFile
	out := planOutcome{files: []string{name}}
	warned := false // a waiting worker warns once, not at every look
	warn := func(msg string, err error) {
		if !warned {
			r.o.Log.Warn(msg, "stage", sr.name, "file", name, "err", err)
			warned = true
		}
	}
	load := func() (bool, error) {
		b, err := sr.out.ReadFile(planFile)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		h, payload, err := decodePlan(b)
		if err != nil {
			warn("unreadable plan file, not used", err)
			return false, nil
		}
		if h.Key != key || h.Type != typ {
			return false, nil // an earlier run's plan, of other inputs or settings
		}
		if err := ps.LoadPlan(bytes.NewReader(payload)); err != nil {
			warn("plan file not loaded", err)
			return false, nil
		}
		out.digest, out.source = h.Digest, "loaded"
		return true, nil
	}
	if ok, err := load(); ok || err != nil {
		if ok {
			r.o.Log.Info("plan loaded", "stage", sr.name, "file", name)
		}
		return out, err
	}
	if w := r.o.Worker; w != nil && w.Index != 0 {
		// Worker 0 makes the plan; a stale file (another input) is
		// replaced once it has. Worker 0's part of the stage, once it
		// has one, tells whether it runs the stage under other settings.
		mismatch := ""
		err := r.poll(ctx, "the plan of stage "+sr.name+" (worker 0 makes it)", func() (bool, error) {
			// On object storage, worker 0's plan is fetched first
			// (workers_remote.go).
			if err := r.shared().Fetch(ctx, sr.rel, func(n string) bool { return n == name }); err != nil {
				return false, err
			}
			if ok, err := load(); ok || err != nil {
				return ok, err
			}
			if err := r.fetchStage(ctx, sr.rel); err != nil {
				return false, err
			}
			parts, err := r.workerParts(sr.rel, 0)
			if err != nil {
				return false, err
			}
			return false, r.otherWorkers(sr, parts, fp, &mismatch)
		}, func() string { return sameRunHint(mismatch) })
		if err == nil {
			r.o.Log.Info("plan loaded", "stage", sr.name, "file", name)
		}
		return out, err
	}
	start := time.Now()
	d, err := r.runPlan(ctx, pl, inputs)
	if err != nil {
		return out, err
	}
	var payload bytes.Buffer
	if err := ps.SavePlan(&payload); err != nil {
		return out, fmt.Errorf("saving the plan: %w", err)
	}
	if _, err := sr.out.WriteFile(planFile, encodePlan(planHeader{Type: typ, Key: key, Digest: d}, payload.Bytes())); err != nil {
		return out, fmt.Errorf("saving the plan: %w", err)
	}
	r.o.Log.Info("plan computed", "stage", sr.name, "file", name, "bytes", payload.Len(),
		"seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	out.digest, out.source = d, "computed"
	return out, nil
}

// runPlan streams every input record to a Planner, in input order, the
// shards read planReadAhead at a time.
func (r *Runner) runPlan(ctx context.Context, pl Planner, inputs []shardInput) (string, error) {
	paths := make([]string, len(inputs))
	for i, in := range inputs {
		paths[i] = filepath.Join(r.dir, in.ref.Path)
	}
	return pl.Plan(ctx, func(yield func(*record.Record) error) error {
		return scanShards(ctx, paths, planReadAhead(), yield)
	})
}

// planReadAhead is how many shards a plan's scan reads at once: decoding
// Parquet was the single-threaded part of a dedup plan (issue 11).
func planReadAhead() int { return max(2, runtime.NumCPU()) }

// planScanBatch is how many records a shard reader hands over at once.
const planScanBatch = 256

// scanShards calls yield for every record of the shards at paths, in
// order, as one shard.Scan after the other would, while up to ahead shards
// are decoded at once. Each reader holds at most a few batches that the
// consumer has not taken, so memory stays bounded by ahead, not by the
// shards' sizes. An error of yield or of a read stops every reader; the
// first in record order is returned, and scanShards returns only when its
// readers have stopped.
func scanShards(ctx context.Context, paths []string, ahead int, yield func(*record.Record) error) error {
	if ahead <= 1 || len(paths) <= 1 {
		for _, p := range paths {
			if err := shard.Scan(p, yield); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	type batch struct {
		recs []*record.Record
		err  error
	}
	// queue holds each shard's channel in input order; its capacity and
	// the one being drained bound the readers at work.
	queue := make(chan chan batch, ahead-1)
	var readers sync.WaitGroup
	dealt := make(chan struct{})
	defer func() {
		cancel()
		<-dealt
		readers.Wait()
	}()
	go func() {
		defer close(dealt)
		defer close(queue)
		for _, p := range paths {
			ch := make(chan batch, 4)
			select {
			case queue <- ch:
			case <-ctx.Done():
				return
			}
			readers.Go(func() {
				defer close(ch)
				send := func(b batch) bool {
					select {
					case ch <- b:
						return true
					case <-ctx.Done():
						return false
					}
				}
				var cur []*record.Record
				err := shard.Scan(p, func(r *record.Record) error {
					cur = append(cur, r)
					if len(cur) == planScanBatch {
						if !send(batch{recs: cur}) {
							return ctx.Err()
						}
						cur = make([]*record.Record, 0, planScanBatch)
					}
					return nil
				})
				if err != nil {
					send(batch{err: err})
				} else if len(cur) > 0 {
					send(batch{recs: cur})
				}
			})
		}
	}()
	for ch := range queue {
		for b := range ch {
			if b.err != nil {
				return b.err
			}
			for _, r := range b.recs {
				if err := yield(r); err != nil {
					return err
				}
			}
		}
	}
	return ctx.Err()
}

// planWriter builds a plan payload: unsigned varints and length-prefixed
// strings.
type planWriter struct{ b []byte }

func (p *planWriter) uint(v uint64)  { p.b = binary.AppendUvarint(p.b, v) }
func (p *planWriter) u64(v uint64)   { p.b = binary.LittleEndian.AppendUint64(p.b, v) }
func (p *planWriter) str(s string)   { p.uint(uint64(len(s))); p.b = append(p.b, s...) }
func (p *planWriter) bytes(s []byte) { p.uint(uint64(len(s))); p.b = append(p.b, s...) }

func (p *planWriter) flush(w io.Writer) error {
	_, err := w.Write(p.b)
	return err
}

// planReader reads what planWriter wrote; the first error sticks.
type planReader struct {
	b   []byte
	err error
}

func newPlanReader(r io.Reader) (*planReader, error) {
	b, err := io.ReadAll(r)
	return &planReader{b: b}, err
}

func (p *planReader) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("plan payload: truncated or corrupt %s", what)
	}
}

func (p *planReader) uint() uint64 {
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.fail("number")
		p.b = nil
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *planReader) u64() uint64 {
	if len(p.b) < 8 {
		p.fail("number")
		p.b = nil
		return 0
	}
	v := binary.LittleEndian.Uint64(p.b)
	p.b = p.b[8:]
	return v
}

// count reads a number of elements (or bytes) to come: at most the bytes
// left, since each takes at least one, so a corrupt count cannot make a
// reader allocate much.
func (p *planReader) count() int {
	n := p.uint()
	if n > uint64(len(p.b)) {
		p.fail("length")
		p.b = nil
		return 0
	}
	return int(n)
}

func (p *planReader) bytes() []byte {
	n := p.count()
	if p.err != nil {
		return nil
	}
	s := p.b[:n:n]
	p.b = p.b[n:]
	return s
}

func (p *planReader) str() string { return string(p.bytes()) }

// done reports the first error, or trailing bytes.
func (p *planReader) done() error {
	if p.err == nil && len(p.b) > 0 {
		return fmt.Errorf("plan payload: %d bytes after the end", len(p.b))
	}
	return p.err
}
