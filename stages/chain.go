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
// them in stage order. Its error names the stage that failed. The first
// group of a run whose ingest keeps no shards runs ingest beside its
// chains (runFeed).
func (r *Runner) runGroup(ctx context.Context, passes []*pass) error {
	g := &group{passes: passes, lastSave: time.Now()}
	feed := r.feed
	r.feed = nil
	if feed != nil {
		r.planFeed(feed, g)
	}
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
	if limit > 0 || feed != nil {
		fctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		eg, gctx := errgroup.WithContext(fctx)
		eg.SetLimit(max(limit, 1))
		for _, in := range passes[0].inputs {
			if !r.mine(in.name) || feed.streams(in.name) { // workers.go; runFeed starts it
				continue
			}
			eg.Go(func() error { return r.runChain(gctx, g, in.name, nil, feed.endWrite()) })
		}
		var ferr error
		if feed != nil {
			// Every chain runFeed starts is started once it returns:
			// only then may eg be waited for.
			if ferr = r.runFeed(gctx, g, feed, eg, max(limit, 1)); ferr != nil {
				cancel(ferr)
			}
		}
		err = eg.Wait()
		if ferr != nil && (err == nil || errors.Is(err, context.Canceled)) {
			err = ferr // the chains stopped for it
		}
		if serr := g.synced(); err == nil {
			err = serr
		}
		if err == nil {
			// Stopped while the last files synced: the chains had no
			// more shard to refuse, but the run stops all the same.
			err = ctx.Err()
		}
		if feed != nil {
			feed.order(g)
			r.sampleRows.Clear() // the later groups run with chainRows known
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
// recs, when not nil, are the shard's input records, handed on by ingest
// (runFeed). in, when not nil, is a write the chain's commits wait for:
// ingest's write of the shard when ingest reads its source anew (committed
// once every dump is read and hashed), or, for another shard of a run
// where ingest reads some source anew, the end of ingest (the report's
// token sample waits for its count of records: writePartial).
func (r *Runner) runChain(ctx context.Context, g *group, name string, recs []*record.Record, in *write) (err error) {
	// recs are the pass's input records, when the pass before handed them
	// on; checked says they passed shard.Check (kept by a pass before, in
	// memory, or read from a shard this process wrote; ingest's records by
	// formats.Parse's contract).
	checked := recs != nil
	var prev *write     // the last write started for this shard
	var writes []*write // every write started for this shard, in stage order
	// fed: no pass of the chain waits for the commit of its input, which
	// waits for the whole dump to be read, while the group's chain limit
	// holds back the reading of the dump's other shards.
	fed := in != nil
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
	need := needs(g, name) // under the lock: runFeed adds shards to the passes' todo
	g.mu.Unlock()
	if failed != nil {
		return failed
	}
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
		g.mu.Lock()
		key, redo := p.todo[name]
		g.mu.Unlock()
		if redo && key == "" && !fed && p.mayKeep(name) {
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
		after := prev // the write whose commit this one's waits for
		if after == nil {
			after = in
		}
		prev = r.startWrite(ctx, g, p, name, key, o, after, start)
		writes = append(writes, prev)
	}
	return nil
}

// needs reports, for each pass of g and one past the last, whether the
// pass needs its input records of shard name: it makes the shard (or may),
// or passes the records on to a pass that needs them (a sink passes its
// input through; a pass that keeps no shards makes its shard again). The
// caller holds g's lock, or the group does not run yet.
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
	part := o.partial // written once the input is committed (writeShard)
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
		if part != nil {
			if err = r.writePartial(p.sr, &sh, part); err != nil {
				err = errors.Join(err, r.removeOwned(p.sr.rel, outputPaths(sh)))
			}
		}
		if err == nil {
			err = r.commit(g, p, name, key, sh, start)
		}
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

// An ingestFeed is ingest's run when it keeps no shards (ingest: {keep:
// false}). It runs beside the first group of stages (runFeed): each shard
// goes on to the group's chains as soon as it is parsed, and the chain
// limit holds the reading back, so that a few shards are in memory at a
// time. A shard's key needs the whole dump's hash: ingest commits its
// shards (its writes, which the group's commits wait for, as for any
// pass before) once every source is read and its manifest is written.
//
// A source is read when it is not up to date, or when the group needs
// ingest's records of a shard of it, or a sink of the group makes one of
// its shards (planFeed): ingest kept nothing to read them from.
// The group's passes then process the shards of a source read anew at
// once (they never wait for a commit to see whether an earlier output
// still holds: see fed in runChain), so that a dump read anew is made
// again by the whole group; shards of an up-to-date source keep their
// keys, and what is done of them stays done.
type ingestFeed struct {
	in *ingestPass
	// fresh: some source is read anew, its shards not known before it
	// is read: no pass of the group is up to date as a whole (openPass).
	fresh  bool
	stream map[string]bool   // sources read in this run, by name (planFeed)
	writes map[string]*write // ingest's writes of the shards of sources read anew, by shard name
	// end, when fresh, is committed once ingest ends (its manifest is
	// written): the commits of the other shards' chains wait for it.
	end   *write
	ended bool
}

func newIngestFeed(in *ingestPass) *ingestFeed {
	f := &ingestFeed{in: in, stream: map[string]bool{}, writes: map[string]*write{}}
	for _, s := range in.srcs {
		if !s.current {
			f.fresh = true
			f.stream[s.src.Name] = true
		}
	}
	if f.fresh {
		f.end = &write{written: closedChan, done: make(chan struct{})}
	}
	return f
}

// endWrite returns the write the commits of a shard ingest does not read
// anew wait for: f.end, nil when f is nil.
func (f *ingestFeed) endWrite() *write {
	if f == nil {
		return nil
	}
	return f.end
}

// known returns the shards of the up-to-date sources, the group's inputs
// as it opens.
func (f *ingestFeed) known() []shardInput {
	m := &manifests.Stage{}
	for _, s := range f.in.srcs {
		if s.current {
			m.Shards = append(m.Shards, s.shards...)
		}
	}
	return outputsOf(m, shardNames(m))
}

// planFeed adds to the sources read those up to date of which the first
// pass of g, just opened, needs the records of a shard (to make it, or to
// hand it on to a pass that does: needs), or of which a sink of g has a
// shard to make: a sink's report partial is counted for the estimate of
// the run's records its shard gives (r.sampleRows), which only a reading
// of the dump knows, so that a shard made again in a later run has the
// bytes it had when ingest read its dump anew.
func (r *Runner) planFeed(f *ingestFeed, g *group) {
	for _, in := range g.passes[0].inputs {
		if src, _, ok := cutShardIndex(in.name); ok && (needs(g, in.name)[0] || sinkMakes(g, in.name)) {
			f.stream[src] = true
		}
	}
}

// sinkMakes reports whether a sink of g makes shard name in this run. The
// caller holds g's lock, or the group does not run yet.
func sinkMakes(g *group, name string) bool {
	return slices.ContainsFunc(g.passes, func(p *pass) bool {
		_, redo := p.todo[name]
		return p.sink != nil && !p.upToDate && redo
	})
}

// streams reports whether shard name is of a source read in this run:
// its chain is started when ingest hands it on.
func (f *ingestFeed) streams(name string) bool {
	if f == nil {
		return false
	}
	src, _, _ := cutShardIndex(name)
	return f.stream[src]
}

// runFeed reads the sources to read, handing each shard on to a chain of
// g as it is parsed (eg, of limit chains), then closes
// ingest (its manifest) and commits the shards read anew, or fails their
// writes. It returns ingest's error.
func (r *Runner) runFeed(ctx context.Context, g *group, f *ingestFeed, eg *errgroup.Group, limit int) error {
	in := f.in
	// At most limit shards in memory, from the first row read of each
	// to the end of its chain.
	hand := &handOff{slots: make(chan struct{}, limit)}
	hand.take = func(sh manifests.Shard, recs []*record.Record, sampleRows int64) error {
		if recs == nil {
			recs = []*record.Record{} // handed on, none
		}
		g.mu.Lock()
		w := f.end // the shard's ref is known (its source is up to date)
		if _, ok := g.passes[0].at[sh.Name]; !ok {
			w = &write{written: closedChan, done: make(chan struct{})}
			f.writes[sh.Name] = w
			for _, p := range g.passes {
				p.add(sh.Name, sh.Out)
			}
		}
		// Read anew or again: the same estimate, the same partials.
		r.sampleRows.Store(sh.Name, sampleRows)
		g.mu.Unlock()
		if err := ctx.Err(); err != nil {
			hand.free()
			f.commit(g, nil, err)
			return err
		}
		eg.Go(func() error {
			defer hand.free()
			return r.runChain(ctx, g, sh.Name, recs, w)
		})
		return nil
	}
	var err error
	for i, s := range in.srcs {
		if f.stream[s.src.Name] {
			if s.current {
				r.o.Log.Info("read source again", "stage", in.sr.name, "source", s.src.Name,
					"reason", "ingest keeps no shards, and a stage after it has shards of the source to make")
			}
			if err = r.readSource(ctx, in, i, hand); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = r.closeIngest(in)
	}
	if err == nil && f.fresh {
		r.chainRows = in.m.Totals.Out // read by writePartial, once f.end is committed
	}
	if err != nil {
		err = fmt.Errorf("stage ingest: %w", err)
	}
	f.commit(g, in.m, err)
	return err
}

// commit ends ingest's writes of the shards read anew, and f.end: on
// failure (err), each fails with err; else each shard's ref, as m records
// it, becomes the input of g's first pass, and the write is committed.
func (f *ingestFeed) commit(g *group, m *manifests.Stage, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.end != nil && !f.ended {
		f.end.err = err
		close(f.end.done)
		f.ended = true
	}
	p := g.passes[0]
	for name, w := range f.writes {
		if err == nil {
			sh, _ := m.Shard(name)
			p.inputs[p.at[name]].ref, _ = parquetOf(sh)
		}
		w.err = err
		close(w.done)
		delete(f.writes, name)
	}
}

// order puts the inputs of every pass of g in the order of ingest's
// manifest, once the chains are done: shards read anew were added as
// they came.
func (f *ingestFeed) order(g *group) {
	rank := map[string]int{}
	for i, s := range f.in.m.Shards {
		rank[s.Name] = i
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.passes {
		slices.SortStableFunc(p.inputs, func(a, b shardInput) int {
			ra, oka := rank[a.name]
			rb, okb := rank[b.name]
			switch {
			case oka && okb:
				return ra - rb
			case oka:
				return -1
			case okb:
				return 1
			}
			return 0
		})
		for i, in := range p.inputs {
			p.at[in.name] = i
		}
	}
}

// add appends shard name, of a source ingest reads anew and hands on, to
// p's inputs (rows estimates its records, for progress): p makes it, its
// key waiting for the input's ref, as for a shard the stage before p
// remakes. The caller holds the group's lock.
func (p *pass) add(name string, rows int64) {
	p.at[name] = len(p.inputs)
	p.inputs = append(p.inputs, shardInput{name: name, ref: manifests.FileRef{Rows: rows}})
	if p.upToDate {
		return
	}
	p.prog.grow(rows)
	p.todo[name] = ""
	delete(p.done, name)
	// As openPass does for each shard to redo: a rejects file a killed
	// run left goes unless this run writes it again.
	p.m.Superseded = append(p.m.Superseded, p.sr.rel+"/rejects-"+name+".jsonl")
	p.m.Superseded = slices.Compact(slices.Sorted(slices.Values(p.m.Superseded)))
}

// closedChan is a closed channel: a write whose bytes are written.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
