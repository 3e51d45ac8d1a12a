package stages

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// A group of consecutive stages runs shard by shard: one goroutine per
// shard (runChain) takes the shard through every stage of the group in
// order, and each stage hands the records it kept (a sink: the records it
// was given) to the next stage in memory instead of the next stage reading
// back the Parquet shard just written. Every stage still writes its own
// shard and rejects, with the same bytes as when it runs alone, and its
// manifest is its own. Writing a shard (encoding, compressing, hashing,
// fsync) runs beside the next stage's processing of the same shard; a group
// of several stages runs one chain per CPU (a stage alone: shardWorkers).
// A chain ends, and the next shard's starts, once its writes' bytes are
// written: waiting for the disk to sync them and the commits that follow
// do not hold a CPU's place (runChain, runGroup).
//
// The rules that make a group's run the same as its stages run one after
// the other:
//
//   - A record handed on equals the record the next stage would read from
//     the shard: kept records are put in shard.Normalize's form before
//     their shard is written (Parquet holds nil and empty lists alike).
//   - Shard names are the same from stage to stage, so a stage's input
//     shard is the one of the same name the stage before wrote.
//   - A shard is committed by a stage only after the stage before
//     committed its input, and manifests are saved in stage order under one
//     lock: a manifest never records a shard whose input the manifest of
//     the stage before does not record. A killed run resumes from there.
//   - A stage's shard key needs its input's hash. Where the stage has no
//     earlier output that the key could match (a fresh run, changed
//     settings), the stage processes the handed-on records at once and
//     computes the key when the input is committed; otherwise it waits for
//     the input's commit and keeps its earlier output when the key matches,
//     as it would alone.

// fuseGroups lets tests run every stage alone, to compare.
var fuseGroups = true

// A pass is one stage's pass over its input shards in this run.
type pass struct {
	index  int // in the runs after ingest, for runStages' next
	sr     stageRun
	st     Stage
	sink   Sink // st as a Sink, or nil
	env    *Env
	old, m *manifests.Stage // the earlier manifest (nil when none), and this run's
	// llmBase is the teacher accounting a merge adds its own to: the
	// workers' (workers.go); nil in other runs.
	llmBase *llm.Stats
	// workers is the time the workers' parts a merge adopts spent on the
	// stage (workersTime); zero in other runs.
	workers workTime
	res     stageResult
	// inputs are the stage's input shards in order, at their index in at.
	// An empty ref Path marks a shard the stage before remakes in this run:
	// its ref is filled when that stage commits it (handOn), and it is in
	// todo with an empty key.
	inputs []shardInput
	at     map[string]int
	todo   map[string]string // shards to (re)make → their keys
	// planned is a Planner's plan (plan.go): its digest, its saved file,
	// and which worker made it.
	planned planOutcome
	done    map[string]manifests.Shard // shards recorded, by name
	// upToDate: the stage is skipped as a whole (res is complete).
	upToDate      bool
	prog          *progress
	pendingShards int   // batch mode: shards waiting for batch answers
	next          *pass // the following stage of the group, or nil
}

// handed returns the input of the stage after p at its opening: p's
// Parquet shards as far as they are known (a sink's input passes through),
// and for each shard p remakes an entry with an empty Path (Rows is an
// estimate, for progress).
func (p *pass) handed() []shardInput {
	if p.upToDate {
		if p.sink != nil {
			return slices.Clone(p.inputs)
		}
		return p.res.outputs
	}
	var out []shardInput
	for _, in := range p.inputs {
		if p.sink != nil {
			out = append(out, in)
			continue
		}
		if _, redo := p.todo[in.name]; redo {
			out = append(out, shardInput{name: in.name, ref: manifests.FileRef{Rows: in.ref.Rows}})
			continue
		}
		if s, ok := p.done[in.name]; ok {
			if ref, ok := parquetOf(s); ok {
				out = append(out, shardInput{name: in.name, ref: ref})
			}
		}
	}
	return out
}

// handOn fills in, for the stage after p, the ref of its input shard name
// once p has recorded sh for it. The caller holds the group's lock.
func (p *pass) handOn(name string, sh manifests.Shard) {
	n := p.next
	if n == nil {
		return
	}
	i, ok := n.at[name]
	if !ok {
		return
	}
	if p.sink != nil {
		n.inputs[i].ref = p.inputs[p.at[name]].ref
	} else if ref, ok := parquetOf(sh); ok {
		n.inputs[i].ref = ref
	}
}

// parquetOf returns the Parquet shard among a shard's outputs.
func parquetOf(s manifests.Shard) (manifests.FileRef, bool) {
	for _, o := range s.Outputs {
		if strings.HasSuffix(o.Path, ".parquet") {
			return o, true
		}
	}
	return manifests.FileRef{}, false
}

// mayKeep reports whether p's earlier output for shard name could still
// match its key once the input is known.
func (p *pass) mayKeep(name string) bool {
	if p.old == nil || p.old.ConfigHash != p.res.fp || p.old.Plan != p.res.plan {
		return false
	}
	s, ok := p.old.Shard(name)
	return ok && s.Key != ""
}

// group is the state the chains of a group share.
type group struct {
	passes   []*pass
	mu       sync.Mutex // guards every pass's done, inputs, res, pendingShards, syncing and failed
	lastSave time.Time
	// syncing holds each chain's last write once the chain has ended: its
	// files may still be syncing, and its commit waits for those of the
	// writes before it (runChain).
	syncing []*write
	// failed is the first error of a write that failed after its chain
	// ended (its files' commit, runWrite): the chains that start after it
	// stop the group with it, as a chain whose own write fails does.
	failed error
}

// runGroup runs the opened passes of a group over their shards, then closes
// them in stage order. Its error names the stage that failed.
func (r *Runner) runGroup(ctx context.Context, passes []*pass) error {
	g := &group{passes: passes, lastSave: time.Now()}
	limit, active := 0, 0
	for _, p := range passes {
		if p.upToDate {
			continue
		}
		active++
		if limit == 0 || shardWorkers(p.st) < limit {
			limit = shardWorkers(p.st)
		}
	}
	if active > 1 {
		// A chain already overlaps its writes with its processing, and
		// holds a shard of each stage: one chain per CPU keeps memory
		// where one stage alone had it. (A chain that let the next shard
		// start while its own writes ran left no fewer cores idle, the
		// writes of its stages running side by side, and raised the peak
		// RSS of glaive's fuller chain by a tenth to a fifth. It does
		// end before its files are synced: see runChain.)
		limit = min(limit, runtime.NumCPU())
	}
	var err error
	if limit > 0 {
		eg, gctx := errgroup.WithContext(ctx)
		eg.SetLimit(limit)
		for _, in := range passes[0].inputs {
			if !r.mine(in.name) { // workers.go
				continue
			}
			eg.Go(func() error { return r.runChain(gctx, g, in.name) })
		}
		err = eg.Wait()
		if serr := g.synced(); err == nil {
			err = serr
		}
		if err == nil {
			// Stopped while the last files synced: the chains had no
			// more shard to refuse, but the run stops all the same.
			err = ctx.Err()
		}
	}
	for _, p := range passes {
		if cerr := r.closePass(ctx, p, err); cerr != nil && err == nil {
			err = fmt.Errorf("stage %s: %w", p.sr.name, cerr)
		}
	}
	return err
}

// synced waits for the writes the ended chains left syncing (each waits
// for the writes of its shard before it) and returns the first error.
func (g *group) synced() error {
	g.mu.Lock()
	ws := g.syncing
	g.syncing = nil
	g.mu.Unlock()
	var err error
	for _, w := range ws {
		if werr := w.wait(); err == nil {
			err = werr
		}
	}
	return err
}

// A write is a pass's write of one shard, running beside the next pass.
// It ends twice: written, once the shard's bytes are written (its CPU work
// is done and its records are no longer needed), then done, once its
// files are synced into place and the shard is committed.
type write struct {
	written chan struct{}
	werr    error // the bytes' error, set before written is closed
	done    chan struct{}
	err     error
}

// wait returns once w is committed or failed; a nil w is no write.
func (w *write) wait() error {
	if w == nil {
		return nil
	}
	<-w.done
	return w.err
}

// waitWritten returns once w's bytes are written, or failed.
func (w *write) waitWritten() error {
	<-w.written
	return w.werr
}

// runChain takes shard name through every pass of the group in order.
func (r *Runner) runChain(ctx context.Context, g *group, name string) (err error) {
	var recs []*record.Record // the pass's input records, when the pass before handed them on
	checked := false          // recs passed shard.Check (kept by a pass before, in memory, or read from a shard this process wrote)
	var prev *write           // the last write started for this shard
	var writes []*write       // every write started for this shard, in stage order
	defer func() {
		// The chain, and so its slot in the group, lasts until its
		// writes' bytes are written: the CPUs and memory they take are
		// the chain's. Waiting for the disk to sync them is not: the
		// next shard's chain runs meanwhile, and runGroup waits for the
		// commits.
		for _, w := range writes {
			if werr := w.waitWritten(); err == nil {
				err = werr
			}
		}
		if prev != nil {
			g.mu.Lock()
			g.syncing = append(g.syncing, prev)
			g.mu.Unlock()
		}
	}()
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed != nil {
		return failed
	}
	need := needs(g, name)
	// done goes past pass i, whose shard is done, and sets the records it
	// hands on: its shard made again without writing it when it keeps no
	// shards and the pass after it needs them (replayShard, which counts
	// its progress: replayed), its input when it is a sink (passed
	// through), else none.
	done := func(i int, p *pass) (replayed bool, err error) {
		switch {
		case p.sr.drop && need[i+1]:
			if recs == nil {
				if recs, checked, err = r.readInput(g, p, name, prev); err != nil {
					return false, err
				}
			}
			recs, err = r.replayShard(ctx, p, name, recs, checked)
			checked = true
			return true, err
		case p.sink == nil:
			recs, checked = nil, false
		}
		return false, nil
	}
	for i, p := range g.passes {
		if p.upToDate {
			if _, err := done(i, p); err != nil {
				return err
			}
			continue
		}
		start := time.Now()
		key, redo := p.todo[name]
		if redo && key == "" && p.mayKeep(name) {
			// Remade by the stage before: its hash decides, as it would
			// have alone, whether this stage's earlier output still holds.
			if err := prev.wait(); err != nil {
				return err
			}
			g.mu.Lock()
			in := p.inputs[p.at[name]]
			g.mu.Unlock()
			key = shardKey(p.res.fp, "plan="+p.res.plan, in.ref)
			if s, ok := p.old.Shard(name); ok && s.Key == key && r.outputsExist(s, p.sr.drop) {
				g.mu.Lock()
				p.done[name] = s
				g.mu.Unlock()
				redo = false
			} else if r.o.Explain {
				r.o.Log.Info("explain", "stage", p.sr.name, "shard", name, "why", explainShard(p.old, p.res.fp, p.res.plan, in))
			}
		}
		if !redo {
			g.mu.Lock()
			in := p.inputs[p.at[name]]
			p.res.report.Skipped++
			p.handOn(name, p.done[name])
			g.mu.Unlock()
			r.o.Log.Debug("skip shard", "stage", p.sr.name, "shard", name, "reason", "up to date")
			replayed, err := done(i, p)
			if err != nil {
				return err
			}
			if !replayed {
				p.prog.add(in.ref.Rows)
			}
			continue
		}
		if recs == nil {
			if recs, checked, err = r.readInput(g, p, name, prev); err != nil {
				return err
			}
		}
		o, err := r.processShard(ctx, p, name, recs, checked)
		if isPending(err) {
			g.mu.Lock()
			p.pendingShards++
			g.mu.Unlock()
			return nil
		}
		if err != nil {
			return fmt.Errorf("stage %s: shard %s: %w", p.sr.name, name, err)
		}
		if p.sink != nil {
			// A sink's input passes through (recs stays).
		} else if p.next != nil {
			for _, rec := range o.kept {
				normalize(rec)
			}
			recs, checked = o.kept, true
		} else {
			recs, checked = nil, false
		}
		prev = r.startWrite(ctx, g, p, name, key, o, prev, start)
		writes = append(writes, prev)
	}
	return nil
}

// needs reports, for each pass of g and one past the last, whether the
// pass needs its input records of shard name: it makes the shard (or may),
// or passes the records on to a pass that needs them (a sink passes its
// input through; a pass that keeps no shards makes its shard again).
func needs(g *group, name string) []bool {
	n := len(g.passes)
	need := make([]bool, n+1)
	for i := n - 1; i >= 0; i-- {
		p := g.passes[i]
		_, redo := p.todo[name]
		need[i] = !p.upToDate && redo || (p.sink != nil || p.sr.drop) && need[i+1]
	}
	return need
}

// readInput reads p's input shard name from disk, once the write of it
// this chain started (prev) is committed. checked says its records passed
// shard.Check (a shard this process wrote).
func (r *Runner) readInput(g *group, p *pass, name string, prev *write) ([]*record.Record, bool, error) {
	if err := prev.wait(); err != nil {
		return nil, false, err
	}
	g.mu.Lock()
	in := p.inputs[p.at[name]]
	g.mu.Unlock()
	if in.ref.NotKept { // needs makes the pass before it replay
		return nil, false, fmt.Errorf("stage %s: shard %s: its input %s was not kept (a bug: it should have been made again)", p.sr.name, name, in.ref.Path)
	}
	recs, err := shard.Read(filepath.Join(r.dir, in.ref.Path))
	if err != nil {
		return nil, false, fmt.Errorf("stage %s: shard %s: %w", p.sr.name, name, err)
	}
	return recs, r.checkedShard(in.ref), nil
}

// replayShard makes p's shard name again from recs, its input, without
// writing or recording it: p keeps no shards, the shard is done, and the
// pass after p needs its records. Its LLM answers come from the request
// cache. The counts must be the ones p's manifest records, or the records
// would not be the ones the next stage's key stands for.
func (r *Runner) replayShard(ctx context.Context, p *pass, name string, recs []*record.Record, checked bool) ([]*record.Record, error) {
	o, err := r.processShard(ctx, p, name, recs, checked)
	if err != nil {
		return nil, fmt.Errorf("stage %s: shard %s (made again, not kept): %w", p.sr.name, name, err)
	}
	o.sh.Out = int64(len(o.kept))
	if want, _ := p.old.Shard(name); !sameCounts(o.sh.Counts, want.Counts) {
		return nil, fmt.Errorf("stage %s: shard %s: made again for the next stage (keep: false), it gave other counts than its manifest records (in %d, out %d, rejected %d, filtered %d, added %d; recorded %d, %d, %d, %d, %d): set keep: true, or remove %s to make the stage again",
			p.sr.name, name, o.sh.In, o.sh.Out, manifests.Sum(o.sh.Rejected), manifests.Sum(o.sh.Filtered), o.sh.Added,
			want.In, want.Out, manifests.Sum(want.Rejected), manifests.Sum(want.Filtered), want.Added, p.sr.rel)
	}
	for _, rec := range o.kept {
		normalize(rec)
	}
	return o.kept, nil
}

// sameCounts reports whether a and b count the same records.
func sameCounts(a, b manifests.Counts) bool {
	return a.In == b.In && a.Out == b.Out && a.Added == b.Added &&
		maps.Equal(a.Rejected, b.Rejected) && maps.Equal(a.Filtered, b.Filtered)
}

// startWrite writes p's shard name from o at once, and commits it once
// prev, the write of its input, is committed. The bytes written do not
// depend on the input's ref, only the key and the manifest entry do: the
// writes of one shard's stages run side by side (a shard's chain is not a
// line of single-threaded encodes), while the commits keep stage order.
// The files are written through a deferred Root: the write is written
// once their bytes are, and their syncs and renames (Flush) follow.
// When the input's write fails, or its own files fail to commit
// (Flush), the files written are removed.
func (r *Runner) startWrite(ctx context.Context, g *group, p *pass, name, key string, o *shardOut, prev *write, start time.Time) *write {
	w := &write{written: make(chan struct{}), done: make(chan struct{})}
	go r.runWrite(ctx, g, p, name, key, o, prev, start, w)
	return w
}

// runWrite is startWrite's goroutine; o is not used once the bytes are
// written, so that its records can go while the files sync.
func (r *Runner) runWrite(ctx context.Context, g *group, p *pass, name, key string, o *shardOut, prev *write, start time.Time, w *write) {
	defer close(w.done)
	defer func() {
		if w.err != nil {
			g.mu.Lock()
			if g.failed == nil {
				g.failed = w.err
			}
			g.mu.Unlock()
		}
	}()
	sr := p.sr
	out := sr.out.Deferred()
	sr.out = out
	sh, err := r.writeShard(ctx, sr, p.sink, o)
	if err != nil {
		out.Discard()
		w.werr = fmt.Errorf("stage %s: shard %s: %w", p.sr.name, name, err)
	}
	close(w.written)
	if err == nil {
		if err = out.Flush(); err != nil {
			// The files before the one that failed are in place:
			// they go too, as no manifest will name them.
			if rerr := r.removeOwned(p.sr.rel, outputPaths(sh)); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}
	if perr := prev.wait(); perr != nil {
		// Its input is not committed: neither is this shard, and
		// its files go (the manifest on disk no longer names the
		// shard, see openPass).
		w.err = perr
		if rerr := r.removeOwned(p.sr.rel, outputPaths(sh)); rerr != nil {
			w.err = errors.Join(perr, rerr)
		}
		return
	}
	if err == nil {
		g.mu.Lock()
		in := p.inputs[p.at[name]]
		g.mu.Unlock()
		if key == "" { // processed before its input was committed (see runChain)
			key = shardKey(p.res.fp, "plan="+p.res.plan, in.ref)
			if r.o.Explain && p.old != nil {
				r.o.Log.Info("explain", "stage", p.sr.name, "shard", name, "why", explainShard(p.old, p.res.fp, p.res.plan, in))
			}
		}
		sh.Inputs = []manifests.FileRef{in.ref}
		notKeptDigest(&sh, key)
		err = r.commit(g, p, name, key, sh, start)
	}
	if err != nil {
		w.err = fmt.Errorf("stage %s: shard %s: %w", p.sr.name, name, err)
	}
}

// outputPaths lists the paths of sh's files.
func outputPaths(sh manifests.Shard) []string {
	files := make([]string, len(sh.Outputs))
	for i, f := range sh.Outputs {
		files[i] = f.Path
	}
	return files
}

// commit records p's shard name, written as sh, and saves the group's
// manifests, in stage order, when the last save is saveEvery old.
func (r *Runner) commit(g *group, p *pass, name, key string, sh manifests.Shard, start time.Time) error {
	sh.Key, sh.Seconds = key, time.Since(start).Seconds()
	if n := transientRejects(sh.Rejected); n > 0 {
		// A teacher failure that may pass is not a final outcome:
		// the shard is recorded (later stages read its outputs) but
		// not as done, so the next run makes it again, its answers
		// so far from the cache (issue 8).
		sh.Key = ""
		r.transient.Add(n)
		r.transientStages.Store(p.sr.name, true)
		r.o.Log.Warn("records rejected for a passing teacher failure; run again to retry them",
			"stage", p.sr.name, "shard", name, "records", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p.done[name] = sh
	p.res.report.Ran++
	p.handOn(name, sh)
	r.o.Log.Debug("shard done", "stage", p.sr.name, "shard", name, "in", sh.In, "out", sh.Out,
		"rejected", manifests.Sum(sh.Rejected), "filtered", manifests.Sum(sh.Filtered), "added", sh.Added)
	// Saving after every shard would cost two fsyncs per shard and stage; a
	// shard done but not yet recorded is redone by the next run, with the
	// same bytes (and its LLM answers from the cache).
	if time.Since(g.lastSave) < saveEvery {
		return nil
	}
	g.lastSave = time.Now()
	for _, q := range g.passes {
		if !q.upToDate {
			if err := r.savePass(q); err != nil {
				return err
			}
		}
	}
	return nil
}

// normalize puts rec in the form shard.Scan returns (shard.Normalize),
// writing nothing when it is already in that form: a record handed on may
// be read by a write of the stage before at the same time.
func normalize(rec *record.Record) {
	if !normalized(rec) {
		shard.Normalize(rec)
	}
}

func normalized(rec *record.Record) bool {
	empty := func(n int, isNil bool) bool { return n == 0 && !isNil }
	if empty(len(rec.Tools), rec.Tools == nil) || empty(len(rec.Messages), rec.Messages == nil) ||
		empty(len(rec.Tags), rec.Tags == nil) || empty(len(rec.Lineage), rec.Lineage == nil) {
		return false
	}
	for _, t := range rec.Tools {
		if empty(len(t.Parameters), t.Parameters == nil) || empty(len(t.Response), t.Response == nil) {
			return false
		}
	}
	for _, m := range rec.Messages {
		if empty(len(m.Calls), m.Calls == nil) || empty(len(m.Results), m.Results == nil) {
			return false
		}
		for _, c := range m.Calls {
			if empty(len(c.Arguments), c.Arguments == nil) {
				return false
			}
		}
	}
	return true
}
