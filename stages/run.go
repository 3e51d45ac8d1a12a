package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/storage"
	"github.com/augmentdata/augment/verify"
)

// Options are the run's settings that are not part of pipeline.yaml.
type Options struct {
	Version string       // augment version, written into manifests and Parquet metadata
	Log     *slog.Logger // progress and skip lines; default discards
	// Progress receives progress bars when it is a terminal, else periodic
	// log lines are written; nil disables progress output.
	Progress io.Writer
	Explain  bool // log why each shard and request is not served from earlier work
	Getenv   func(string) string
	// Worker makes this process one of several sharing the run; Merge
	// makes the run adopt their work (see workers.go). Hooks: "workers.go".
	Worker *Worker
	Merge  bool
}

// A Report summarises what a run did, stage by stage.
type Report struct {
	Dir    string // the run's directory: the local working copy of an output on object storage
	Remote string // output.dir when it is on object storage ("" for a local one)
	Stages []StageReport
}

// newReport is the run's Report, without stages yet.
func (r *Runner) newReport() *Report {
	rep := &Report{Dir: r.dir}
	if _, remote, err := storage.OutputLocation(r.p.Output.Dir); err == nil && remote {
		rep.Remote = r.p.Output.Dir
	}
	return rep
}

// A StageReport is one stage's line of a Report.
type StageReport struct {
	Name, Type, Dir string
	Ran, Skipped    int // shards
	Counts          manifests.Counts
	LLM             *llm.Stats
}

// stageRun is one stage of the run as the runner sees it.
type stageRun struct {
	index int
	name  string
	typ   string
	spec  *StageSpec     // nil for ingest
	dir   string         // absolute, for reading
	rel   string         // relative to the run dir, e.g. "02-meta_tool"
	out   *atomicfs.Root // the stage directory: every write goes through it
	// drop: the stage keeps no Parquet shards in this run (keep: false in
	// a run whose stages run in groups, see runStages): its records go on
	// in memory, and its manifest names each shard as NotKept.
	drop bool
}

// Runner executes a pipeline. It is used once.
type Runner struct {
	p       *Pipeline
	o       Options
	dir     string         // run dir, absolute
	root    *atomicfs.Root // the run dir, confined; nil in Check when it does not exist
	lock    io.Closer      // holds the run dir's lock (a worker's: its own and a share of the run's)
	teacher *llm.Teacher
	embed   llm.Embedder

	// transient counts records this run rejected for a teacher failure
	// that may pass; Run reports them as a resumable stop.
	transient atomic.Int64
	// transientStages holds the names of the stages those records were
	// rejected in (batch mode: whether the stage a run waits for is one).
	transientStages sync.Map

	libOnce sync.Once
	lib     *toollib.Library
	libErr  error
	libRefs []manifests.FileRef

	src        *storage.Opener // opens the sources, local or remote
	srcCache   *os.Root        // its cache directory, when a source is remote
	mirror     *storage.Mirror // keeps an output on object storage in step
	mirrorRoot *os.Root        // the mirror's handle on the output directory

	check teacherCheck // batch.go

	begun time.Time // when runWorker started (workers.go: a part finished after it is this run's)

	// chainRows are the records ingest handed to the later stages: the
	// token sample of the sinks' report partials (shardout.go) is drawn
	// for that many; tokens remembers the partials' token counts. When
	// ingest hands its shards on as it reads them (feed), chainRows is
	// known once it ends: sampleRows then holds, by shard name, the
	// estimate of it each shard handed on is sampled for (partialOf,
	// shardSampleRows), narrowed to chainRows at commit (writePartial).
	chainRows  int64
	sampleRows sync.Map
	// feed is ingest's run when it keeps no shards, until the first
	// group of stages, which ingest runs beside, starts (runGroup).
	feed       *ingestFeed
	tokens     verify.TokenMemo
	tokensOnce sync.Once // loadTokens

	// wrote holds the Parquet shards this process wrote (path in the run
	// dir → SHA-256), all of whose records passed shard.Check before the
	// write (ingest's by formats.Parse's contract): a stage reading one
	// back checks only what it changes (see checkedShard).
	wrote sync.Map
}

// checkedShard reports whether the shard ref names is one this process
// wrote, with the same content hash: its records passed shard.Check, and
// read back (Parquet pages carry checksums) they are the same bytes.
func (r *Runner) checkedShard(ref manifests.FileRef) bool {
	sum, ok := r.wrote.Load(ref.Path)
	return ok && sum == ref.SHA256 && ref.SHA256 != ""
}

// NewRunner prepares a run of p: it opens the request cache and the teacher.
func NewRunner(p *Pipeline, o Options) (*Runner, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	dir, err := p.outputDir()
	if err != nil {
		return nil, err
	}
	dir = workerWorkDir(p, o, dir) // workers_remote.go
	// Everything that can be found before a write is found now, all at once.
	src := newOpener(p, o)
	probs := append(pathProblems(p, src), envProblems(p, o.Getenv)...)
	probs = append(probs, batchWorkerProblems(p, o)...) // batch.go
	if probs = append(probs, stageProblems(p)...); len(probs) > 0 {
		return nil, &ConfigError{Problems: probs}
	}
	r := &Runner{p: p, o: o, dir: dir, src: src}
	if err := r.openOutput(); err != nil {
		return nil, err
	}
	if err := r.openSourcesCache(); err != nil {
		r.closeOutput()
		return nil, err
	}
	if err := r.openMirror(); err != nil {
		r.closeOutput()
		return nil, err
	}
	// The request cache and the batch directory live in the output root
	// too: the cache's directory is opened through it (the cache keeps its
	// own handle on it), and the batch files are written through its Sub.
	lo := llm.Options{Getenv: o.Getenv, Log: o.Log, Explain: o.Explain, BatchRoot: r.root.Sub(batchDir), CountTokens: verify.Tokens}
	if p.Teacher.Provider != llm.ProviderOffline || p.Embedder.Provider != llm.ProviderOffline {
		if lo.CacheRoot, err = r.openCacheDir(); err != nil {
			r.closeOutput()
			return nil, err
		}
		defer lo.CacheRoot.Close()
		lo.CacheDir = filepath.Join(dir, cacheDir)
		lo.CacheSegment = r.cacheSegment() // workers.go
	}
	if r.teacher, err = llm.NewTeacher(p.Teacher, lo); err != nil {
		r.closeOutput()
		if bce, ok := errors.AsType[*llm.BatchStateError](err); ok {
			return nil, &ConfigError{Problems: bce.Problems}
		}
		return nil, fmt.Errorf("teacher: %w", err)
	}
	if r.embed, err = llm.NewEmbedder(p.Embedder, lo); err != nil {
		r.teacher.Close()
		r.closeOutput()
		return nil, fmt.Errorf("embedder: %w", err)
	}
	return r, nil
}

// Close releases the request cache and the output directory's lock.
func (r *Runner) Close() error {
	err := r.teacher.Close()
	if c, ok := r.embed.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return errors.Join(err, r.closeOutput())
}

func (r *Runner) closeOutput() error {
	err := r.closeMirror()
	err = errors.Join(err, r.root.Close())
	if r.srcCache != nil {
		err = errors.Join(err, r.srcCache.Close())
	}
	if r.lock != nil {
		err = errors.Join(err, r.lock.Close())
	}
	return err
}

// plan lists the stages of the run in order, ingest first.
func (r *Runner) plan() []stageRun {
	runs := []stageRun{{index: 0, name: "ingest", typ: "ingest", rel: "00-ingest"}}
	for i := range r.p.Stages {
		s := &r.p.Stages[i]
		typ, _ := s.config()
		rel := fmt.Sprintf("%02d-%s", i+1, s.Name)
		runs = append(runs, stageRun{index: i + 1, name: s.Name, typ: typ, spec: s, rel: rel})
	}
	for i := range runs {
		runs[i].dir = filepath.Join(r.dir, runs[i].rel)
		if r.root != nil {
			runs[i].out = r.root.Sub(runs[i].rel)
		}
	}
	return runs
}

// Run executes every stage in order. A stage whose shards are all up to date
// is skipped; a failed shard stops the run and nothing of it is visible, so
// running again resumes where this run stopped.
func (r *Runner) Run(ctx context.Context) (rep *Report, err error) {
	if r.o.Worker != nil { // workers.go
		return r.runWorker(ctx)
	}
	// report: report.html, and a dataset card in each export dir (stages/report.go).
	defer func() { err = r.writeReport(err) }()
	if !r.o.Merge { // workers.go: what workers left is merged, not made again
		merge, err := r.unmergedWorkers()
		if err != nil {
			return nil, err
		}
		if merge {
			r.o.Log.Warn("the output dir holds the workers' parts, not merged yet: this run merges them, as augment merge does, and runs what they did not finish")
			r.o.Merge = true
		}
	}
	if msg, warn := lastStage(r.p, r.dir); warn {
		r.o.Log.Warn(msg)
	} else if msg != "" {
		r.o.Log.Info(msg)
	}
	// The run dir's own files (config.yaml, report.html) a killed run was
	// writing; each stage sweeps its own directory.
	if err := r.root.SweepFiles("."); err != nil {
		return nil, err
	}
	if err := r.writeEffectiveConfig(); err != nil {
		return nil, err
	}
	rep = r.newReport()
	runs := r.plan()
	var input []shardInput // ingest's shards
	if r.streamsIngest() {
		// ingest: {keep: false}: ingest runs beside the first group of
		// stages, which takes its shards as they are parsed (runFeed).
		runs[0].drop = true
		in, err := r.openIngest(ctx, runs[0])
		rep.Stages = append(rep.Stages, in.res.report)
		if err != nil {
			return rep, fmt.Errorf("stage ingest: %w", err)
		}
		// An up-to-date source recorded as read in part without
		// allow_partial stops the run before any stage, as ingest keeping
		// its shards stops it (closeIngest): its shards would be made and
		// recorded before ingest ends.
		for _, s := range in.srcs {
			if s.current && unreadRefused(s.src, s.shards) {
				rep.Stages[0] = in.skippedReport()
				return rep, fmt.Errorf("stage ingest: %w", r.checkSource(s.src, s.shards, nil))
			}
		}
		r.feed = newIngestFeed(in)
		input = r.feed.known()
		defer func() { rep.Stages[0] = in.res.report }()
	} else {
		ing, err := r.ingest(ctx, runs[0])
		rep.Stages = append(rep.Stages, ing.report)
		if err != nil {
			return rep, fmt.Errorf("stage ingest: %w", err)
		}
		input = ing.outputs
	}
	err = r.runStages(ctx, rep, runs, input, func(_ int, _ stageRun, res stageResult, input []shardInput) ([]shardInput, error) {
		if res.sink {
			return input, nil
		}
		return res.outputs, nil
	})
	if err != nil {
		// Exit 3 before exit 4: a stage rejected records for a passing
		// failure (in batch mode: after max_attempts batches) and a later
		// stage then submitted batches. (A stage that waits itself is not
		// done: its rejects are the rounds' business, exit 4.) The run is not just waiting: the
		// rerun asks the rejected records again, as exit 3 says, and takes
		// in the open batches' answers too.
		if w, ok := errors.AsType[*llm.WaitError](err); ok && !r.rejectedIn(w.Stage) {
			if terr := r.transientErr("run the same command again to ask them again (in new batches) and to go on once the open batches are done; " + err.Error()); terr != nil {
				return rep, terr
			}
		}
		return rep, err
	}
	if err := r.sweepStale(runs); err != nil {
		return rep, err
	}
	return rep, r.transientErr("everything else is done — run the same command again to retry just those records")
}

// runStages runs the stages after ingest in order, from input, the ingest's
// shards. next gives the following stage's input from a stage's result: its
// outputs in one process; after the barrier, every worker's, for a worker.
//
// Consecutive stages run as one group, shard by shard (runGroup): a stage
// joins the group of the stage before it unless it is a Planner (its plan
// needs all of its input first), or the run is a worker's, a merge or in
// batch mode (their barriers and stops are per stage).
func (r *Runner) runStages(ctx context.Context, rep *Report, runs []stageRun, input []shardInput,
	next func(i int, sr stageRun, res stageResult, input []shardInput) ([]shardInput, error)) error {
	fuse := r.fuses()
	if !fuse && (!r.p.Ingest.keeps() || slices.ContainsFunc(r.p.Stages, func(s StageSpec) bool { return !s.keeps() && !s.Skip })) {
		r.o.Log.Warn("keep: false has no effect in this run: a worker's run, a merge and a batch-mode run keep every stage's shards")
	}
	r.chainRows = totalRows(input)
	var group []*pass
	// flush runs the group, then hands its stages' results on in order.
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		err := r.runGroup(ctx, group)
		for _, p := range group {
			rep.Stages = append(rep.Stages, p.res.report)
		}
		for _, p := range group {
			if err != nil {
				break
			}
			if input, err = next(p.index, p.sr, p.res, p.inputs); err != nil {
				err = fmt.Errorf("stage %s: %w", p.sr.name, err)
			}
		}
		group = nil
		return err
	}
	for i, sr := range runs[1:] {
		if sr.spec.Skip {
			r.o.Log.Info("skip stage", "stage", sr.name, "reason", "skip: true in pipeline.yaml")
			continue
		}
		// stageProblems refused keep: false where the next stage would not
		// join this one's group.
		sr.drop = fuse && !sr.spec.keeps()
		env, st, err := r.buildStage(sr)
		if err != nil {
			ferr := flush()
			typ, _ := sr.spec.config()
			rep.Stages = append(rep.Stages, StageReport{Name: sr.name, Type: typ, Dir: sr.rel})
			return errors.Join(ferr, fmt.Errorf("stage %s: %w", sr.name, err))
		}
		_, planner := st.(Planner)
		if !fuse || planner {
			if err := flush(); err != nil {
				return err
			}
		}
		in := input
		if len(group) > 0 {
			in = group[len(group)-1].handed()
		}
		p, err := r.openPass(ctx, sr, env, st, in)
		p.index = i
		if err != nil {
			// The stages before it end first, as they would have alone.
			ferr := flush()
			rep.Stages = append(rep.Stages, p.res.report)
			return errors.Join(ferr, fmt.Errorf("stage %s: %w", sr.name, err))
		}
		if len(group) > 0 {
			group[len(group)-1].next = p
		}
		group = append(group, p)
	}
	return flush()
}

// fuses reports whether the run's stages run in groups (runStages): not in
// a worker's run, a merge or a batch-mode run, whose barriers and stops
// are per stage. It reads the pipeline and the options only, so that
// augment check (streamsIngest) answers as the run will: the teacher is
// in batch mode when its config says so (llm.NewTeacher).
func (r *Runner) fuses() bool {
	return fuseGroups && r.o.Worker == nil && !r.o.Merge && r.p.Teacher.Mode != llm.ModeBatch // workers.go, batch.go
}

// streamsIngest reports whether ingest keeps no shards in this run
// (ingest: {keep: false} where the stages run in groups).
func (r *Runner) streamsIngest() bool { return !r.p.Ingest.keeps() && r.fuses() }

// rejectedIn reports whether this run rejected records of stage for a
// teacher failure that may pass.
func (r *Runner) rejectedIn(stage string) bool {
	_, ok := r.transientStages.Load(stage)
	return ok
}

// transientErr is the run's stop when records were rejected for teacher
// failures that may pass (exit 3); what tells the user what to do next.
func (r *Runner) transientErr(what string) error {
	n := r.transient.Load()
	if n == 0 {
		return nil
	}
	// Batches the provider refused or someone cancelled: their reasons.
	var held []string
	r.transientStages.Range(func(stage, _ any) bool {
		held = append(held, r.teacher.BatchHeld(stage.(string))...)
		return true
	})
	if len(held) > 0 {
		slices.Sort(held)
		what = strings.Join(held, "; ") + "; " + what
	}
	return &llm.FatalError{Reason: "llm_transient_rejects", Msg: fmt.Sprintf(
		"%d records were rejected for teacher failures that may pass (timeouts, 429, 5xx, unreadable answers, endpoints out of rotation, batches that expired, failed or were cancelled; counts by reason in the manifests); %s",
		n, what)}
}

// A shardInput is one Parquet shard handed from a stage to the next.
type shardInput struct {
	name string // e.g. "toolace-00000"
	ref  manifests.FileRef
}

type stageResult struct {
	report   StageReport
	outputs  []shardInput
	sink     bool
	fp, plan string // the stage's fingerprint and plan digest (workers.go: the barrier checks keys)
}

// wiredConfig is a stage config that Pipeline.defaults gives settings of
// other stages, in unexported fields its JSON leaves out; wiredParts lists
// those that change its output, each a line of its fingerprint.
type wiredConfig interface {
	wiredParts() []string
}

// fingerprint hashes everything about a stage, except its input, that can
// change its output: for st, the built stage, the prompts it loaded into
// env and the models it asks (modelUser), and output.jsonl when it is on
// for a stage that writes Parquet shards (its .jsonl mirrors are outputs
// too; written only when on, so runs without mirrors keep their keys),
// and what a wiredConfig takes from other stages. Ingest has neither
// (nil, nil): its settings hold output.jsonl.
func (r *Runner) fingerprint(typ string, version int, cfg any, env *Env, st Stage, extra ...string) (string, json.RawMessage, error) {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return "", nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "type=%s\nversion=%d\nseed=%d\nconfig=%s\n", typ, version, r.p.Seed, cfgJSON)
	if env != nil {
		for _, name := range slices.Sorted(maps.Keys(env.prompts)) {
			fmt.Fprintf(h, "prompt %s=%s\n", name, env.prompts[name])
		}
	}
	if _, sink := st.(Sink); st != nil && !sink && r.p.Output.JSONL {
		fmt.Fprintf(h, "jsonl=true\n")
	}
	if mu, ok := st.(modelUser); ok {
		teacher, embedder := mu.usesModels()
		if teacher {
			fmt.Fprintf(h, "teacher=%s\n", r.p.Teacher.Fingerprint())
		}
		if embedder {
			fmt.Fprintf(h, "embedder=%s\n", r.p.Embedder.Fingerprint())
		}
	}
	if w, ok := cfg.(wiredConfig); ok {
		extra = append(slices.Clip(extra), w.wiredParts()...)
	}
	for _, e := range extra {
		fmt.Fprintf(h, "%s\n", e)
	}
	return hex.EncodeToString(h.Sum(nil)), cfgJSON, nil
}

func shardKey(fingerprint string, extra string, inputs ...manifests.FileRef) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", fingerprint, extra)
	for _, in := range inputs {
		fmt.Fprintf(h, "%s %s\n", in.Path, in.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// newEnv builds the Env of one stage of a run (augment check's is previewEnv).
func (r *Runner) newEnv(sr stageRun) *Env {
	var lib func() (*toollib.Library, error)
	if _, cfg := sr.spec.config(); readsLibrary(cfg) {
		lib = r.library
	}
	return &Env{
		Stage:    sr.name,
		Seed:     r.p.Seed,
		Dir:      r.p.Dir(),
		Teacher:  r.teacher.Stage(sr.name),
		Embedder: r.embed,
		Provider: r.teacher.Provider(),
		Model:    r.teacher.Model(),
		Capacity: r.teacher.Capacity(),
		Library:  lib,
		Log:      r.o.Log.With("stage", sr.name),
		prompts:  map[string]string{},
	}
}

// library loads the tool library written by ingest.
func (r *Runner) library() (*toollib.Library, error) {
	r.libOnce.Do(func() {
		var tools []record.Tool
		for _, ref := range r.libRefs {
			err := shard.ScanJSONL(filepath.Join(r.dir, ref.Path), func(t record.Tool) error {
				tools = append(tools, t)
				return nil
			})
			if err != nil {
				r.libErr = fmt.Errorf("tool library: %w", err)
				return
			}
		}
		r.lib = toollib.New(tools)
	})
	return r.lib, r.libErr
}

// buildStage makes the stage sr from its config, with its Env.
func (r *Runner) buildStage(sr stageRun) (*Env, Stage, error) {
	_, cfg := sr.spec.config()
	env := r.newEnv(sr)
	st, err := cfg.build(env)
	return env, st, err
}

// openPass prepares the pass of the built stage st over inputs: it decides
// which shards are up to date, runs a Planner's plan and, before any shard
// is written, records on disk that the shards to redo are not done. An
// input whose ref is still empty is one the stage before remakes in the
// same group (see runGroup): it is redone unless, once that stage has
// committed it, the earlier output still matches.
func (r *Runner) openPass(ctx context.Context, sr stageRun, env *Env, st Stage, inputs []shardInput) (*pass, error) {
	started := time.Now().UTC() // a Planner's read of its whole input is the stage's time too
	typ, cfg := sr.spec.config()
	p := &pass{sr: sr, st: st, env: env, inputs: inputs, at: map[string]int{}, done: map[string]manifests.Shard{}}
	for i, in := range inputs {
		p.at[in.name] = i
	}
	res := &p.res
	*res = stageResult{report: StageReport{Name: sr.name, Type: typ, Dir: sr.rel}}
	old, err := r.prepareStageDir(sr)
	if err != nil {
		return p, err
	}
	p.old = old
	sink, isSink := st.(Sink)
	p.sink, res.sink = sink, isSink
	fp, cfgJSON, err := r.fingerprint(typ, cfg.version(), cfg, env, st, r.libraryPart(cfg)...)
	if err != nil {
		return p, err
	}
	// Decide, shard by shard, what is already done.
	plan := ""
	if old != nil && old.ConfigHash == fp {
		plan = old.Plan
	}
	fresh := r.feed != nil && r.feed.fresh // the shards of a dump read anew are not known yet
	gone := r.decide(p, fp, plan, fresh) > 0
	// plan.go: a plan is computed once, saved, and loaded by workers and
	// reruns. A Planner starts a group of its own (runStages): its inputs
	// are all known here.
	// A stage that keeps no shards may have to make a shard again for the
	// stage after it (runChain), with its plan. A shard gone from the
	// input (its source removed) changes the whole input the plan is of.
	if planner, ok := st.(Planner); ok && (len(p.todo) > 0 || gone || r.o.Worker != nil || r.o.Merge || sr.drop) { // workers.go: a worker cannot see others' todo
		if p.planned, err = r.stagePlan(ctx, sr, planner, typ, fp, inputs); err != nil {
			return p, fmt.Errorf("plan: %w", err)
		}
		plan = p.planned.digest
		r.decide(p, fp, plan, fresh)
	}
	todo := p.todo
	res.fp, res.plan = fp, plan // workers.go
	m := &manifests.Stage{
		Name: sr.name, Type: typ, Version: cfg.version(), Tool: r.o.Version,
		ConfigHash: fp, Config: cfgJSON, Plan: plan, Files: p.planned.files, Started: started,
		Superseded: superseded(old, func(shard string) bool {
			_, redo := todo[shard]
			return !redo && slices.ContainsFunc(inputs, func(in shardInput) bool { return in.name == shard })
		}),
	}
	p.m = m
	if r.o.Merge { // workers.go: the workers' time on the stage
		if p.workers, err = r.workersTime(sr, fp); err != nil {
			return p, err
		}
	}
	if r.o.Merge && old != nil && old.ConfigHash == fp { // workers.go: the workers' teacher accounting
		baseLLM, unrecorded := old.LLM, old.LLMUnrecorded
		if len(todo) > 0 {
			// A merge that asks the teacher adds its own traffic to the
			// workers' parts only: an earlier record of its own (a pass
			// that exited 4 in batch mode, one killed) is replaced, as a
			// one-process run replaces its manifest's.
			if baseLLM, unrecorded, err = r.workersLLM(sr, fp); err != nil {
				return p, err
			}
		}
		var base llm.Stats
		if len(baseLLM) > 0 && json.Unmarshal(baseLLM, &base) == nil {
			p.llmBase = &base
			m.LLM, m.LLMUnrecorded = baseLLM, unrecorded
		}
	}
	if !r.o.Merge && r.o.Worker == nil && old != nil && old.ConfigHash == fp {
		// A rerun keeps the earlier run's teacher accounting unless it
		// asks the teacher itself (savePass replaces it then): one that
		// remakes only shards needing no request, or only drops gone
		// shards, must not make the stage look as if no teacher wrote
		// the shards it keeps (the dataset card's offline warning).
		m.LLM, m.LLMUnrecorded = old.LLM, old.LLMUnrecorded
	}
	if r.o.Worker != nil { // workers.go: which worker made the plan
		m.PlanSource = p.planned.source
		if len(todo) == 0 { // as one process keeps its manifest, the part keeps its accounting
			m.LLM = r.ownLLM(sr, fp)
		} else if base, baseLLM, unrecorded := r.killedLLM(sr, fp); unrecorded != nil {
			// A rerun of a killed worker adds its own traffic to what
			// the killed run recorded, and names it (llm_unrecorded).
			p.llmBase, m.LLM, m.LLMUnrecorded = base, baseLLM, unrecorded
		}
	}
	if p.upToDate {
		old.Superseded = append(old.Superseded, r.staleNotKept(old)...)
		if len(old.Superseded) > 0 {
			// An earlier run recorded every shard but stopped before
			// deleting what it replaced.
			if err := r.removeReplaced(sr, old); err != nil {
				return p, err
			}
			old.Superseded = nil
			if err := sr.out.WriteJSON(manifestFile, old); err != nil {
				return p, err
			}
		}
		r.o.Log.Info("skip stage", "stage", sr.name, "shards", len(inputs), "reason", "up to date")
		res.report.Skipped = len(inputs)
		res.report.Counts = old.Totals
		res.outputs = outputsOf(old, inputs)
		return p, nil
	}
	if err := r.teacherReady(ctx, sr, st); err != nil { // batch.go
		return p, err
	}
	p.prog = r.newProgress(sr.name, totalRows(inputs), env)
	// Before any shard is written, the manifest on disk drops the shards
	// to redo: a run killed after a shard's rename and before the next save
	// must not leave the manifest naming bytes that are gone (a redone
	// shard's bytes may differ: one with transient rejects, say). Their
	// old files stay in Superseded until the run ends, with the rejects
	// file each shard may write: a shard a killed run wrote with rejects
	// and the next run makes without any leaves none behind.
	for name := range todo {
		if r.mine(name) { // workers.go
			m.Superseded = append(m.Superseded, sr.rel+"/rejects-"+name+".jsonl")
		}
	}
	m.Superseded = slices.Compact(slices.Sorted(slices.Values(m.Superseded)))
	if err := r.savePass(p); err != nil {
		p.prog.done()
		return p, err
	}
	return p, nil
}

// savePass writes p's manifest with the shards done so far. Its caller
// holds the group's lock, or is alone.
func (r *Runner) savePass(p *pass) error {
	m, env := p.m, p.env
	m.Shards = m.Shards[:0]
	m.Totals = manifests.Counts{}
	for _, in := range p.inputs {
		if s, ok := p.done[in.name]; ok {
			m.Shards = append(m.Shards, s)
			m.Totals.Add(s.Counts)
		}
	}
	if stats := env.stats(); stats != nil && p.llmBase != nil {
		m.LLM = statsJSON(addStats(p.llmBase, stats)) // workers.go: a merge adds its own to the workers'
	} else if stats != nil { // this pass's requests replace an earlier run's (a resume's cache hits count them again)
		m.LLM, _ = json.Marshal(stats)
		m.LLMUnrecorded = nil
	}
	// The notes of the shards listed, and of this run's Finish once it
	// ran: nothing an earlier run said outlives what it was said of (a
	// resume ends with a clean run's notes and dataset card).
	m.Notes = m.ShardNotes(m.FinishNotes)
	m.Seconds = time.Since(m.Started).Seconds()
	if !p.workers.started.IsZero() { // workers.go: a merge's
		m.WorkStarted = p.workers.started
		if m.Started.Before(m.WorkStarted) {
			m.WorkStarted = m.Started
		}
		m.WorkSeconds = p.workers.seconds + m.Seconds
	}
	return r.saveStage(p.sr, m) // workers.go: manifest.json, or this worker's part
}

// closePass ends p once no shard of its group is running: failed is the
// group's error, if any. In batch mode the pass's requests are submitted;
// a sink's Finish runs; the manifest is saved and what it replaced is
// deleted. It returns failed, or the first error of its own.
func (r *Runner) closePass(ctx context.Context, p *pass, failed error) error {
	if p.upToDate {
		return failed
	}
	defer p.prog.done()
	sr, m, env, res := p.sr, p.m, p.env, &p.res
	err := r.batchFinish(ctx, sr, failed, p.pendingShards)
	// A sink is finished only once its Finish succeeded: a group whose
	// later stage failed leaves it unfinished too, and the next run runs
	// Finish then (finishDone). A worker's sink finishes in the merge.
	finished := p.sink == nil || r.o.Worker != nil
	if p.sink != nil && err == nil && r.o.Worker == nil { // workers.go: Finish runs in the merge
		var shards []manifests.Shard
		for _, in := range p.inputs {
			shards = append(shards, p.done[in.name])
		}
		var notes []string
		fin := sr.out.Track()
		notes, err = p.sink.Finish(fin, shards)
		finished = err == nil // else the next run runs Finish again (finishDone)
		m.Files = append(slices.Clone(p.planned.files), fin.Written()...)
		m.FinishNotes = slices.Sorted(slices.Values(notes))
	}
	if finished {
		m.Finished = time.Now().UTC()
	}
	if serr := r.savePass(p); err == nil {
		err = serr
	}
	if err == nil && len(m.Superseded) > 0 && r.o.Worker == nil { // workers.go: the merge deletes
		// Delete what earlier runs wrote and this one no longer lists, then
		// record that nothing is left to delete.
		if err = r.removeReplaced(sr, m); err == nil {
			m.Superseded = nil
			err = r.savePass(p)
		}
	}
	res.report.Counts = m.Totals
	res.report.LLM = env.stats()
	if err != nil {
		return err
	}
	r.o.Log.Info("stage done", "stage", sr.name, "shards", res.report.Ran, "in", m.Totals.In, "out", m.Totals.Out,
		"rejected", manifests.Sum(m.Totals.Rejected), "filtered", manifests.Sum(m.Totals.Filtered), "added", m.Totals.Added,
		"seconds", fmt.Sprintf("%.1f", time.Since(m.Started).Seconds()))
	res.outputs = outputsOf(m, p.inputs)
	return nil
}

// decide sets what of the pass p is done as it opens, from its earlier
// manifest p.old, its fingerprint fp and plan (the digest of its plan, or
// of the earlier one): p.todo, the shards of this process (mine) to
// (re)make with their new keys (pending, over the inputs whose refs are
// known, and every input whose ref is still empty: the stage before
// remakes it in the same group, and its key waits for the ref); p.done,
// the earlier shards that stand; and p.upToDate, the pass skipped as a
// whole: nothing to make, no earlier shard gone from the inputs
// (goneShards), no dump read anew (fresh: its shards are not known yet),
// a sink's Finish done (a run killed before it runs it now), and not a
// worker's pass or a merge's (they always write their manifest). It
// returns the number of gone shards. openPass decides with it, and
// augment check's firstGroup as openPass would.
func (r *Runner) decide(p *pass, fp, plan string, fresh bool) (gone int) {
	old := p.old
	known := slices.DeleteFunc(slices.Clone(p.inputs), func(in shardInput) bool { return in.ref.Path == "" })
	p.todo = r.pending(p.sr, old, fp, plan, known)
	for _, in := range p.inputs {
		if in.ref.Path == "" && r.mine(in.name) {
			p.todo[in.name] = ""
		}
	}
	gone = goneShards(old, p.inputs, r.mine)
	p.upToDate = len(p.todo) == 0 && old != nil && r.o.Worker == nil && !r.o.Merge && // workers.go
		!fresh && gone == 0 && (p.sink == nil || r.finishDone(old))
	p.done = map[string]manifests.Shard{}
	if old != nil {
		for _, s := range old.Shards {
			if _, redo := p.todo[s.Name]; !redo && r.mine(s.Name) { // workers.go
				p.done[s.Name] = s
			}
		}
	}
	return gone
}

// goneShards counts the shards of this process (mine) the earlier
// manifest old records and inputs no longer have: their source was
// removed from pipeline.yaml, or their dump has fewer shards. The stage is
// then not up to date as a whole, though no shard is to make: its
// manifest drops them, their files go, and its totals and a sink's Finish
// are those of a run over inputs (closePass).
func goneShards(old *manifests.Stage, inputs []shardInput, mine func(string) bool) int {
	if old == nil {
		return 0
	}
	names := make(map[string]bool, len(inputs))
	for _, in := range inputs {
		names[in.name] = true
	}
	n := 0
	for _, s := range old.Shards {
		if !names[s.Name] && mine(s.Name) {
			n++
		}
	}
	return n
}

// finishDone reports whether a sink's Finish completed in the run that
// wrote m (it is finished only then) and its files are still there: a run
// killed after the last shard was recorded and before Finish leaves m not
// finished, and the next run then runs Finish without redoing any shard.
func (r *Runner) finishDone(m *manifests.Stage) bool {
	if m.Finished.IsZero() || r.root == nil {
		return false
	}
	for _, f := range m.Files {
		if fi, err := r.root.Lstat(f); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// pending returns the shards that must be (re)made, with their new keys.
func (r *Runner) pending(sr stageRun, old *manifests.Stage, fp, plan string, inputs []shardInput) map[string]string {
	todo := map[string]string{}
	for _, in := range inputs {
		if !r.mine(in.name) { // workers.go
			continue
		}
		key := shardKey(fp, "plan="+plan, in.ref)
		if old != nil {
			if s, ok := old.Shard(in.name); ok && s.Key == key && r.outputsExist(s, sr.drop) {
				continue
			}
			if r.o.Explain {
				r.o.Log.Info("explain", "stage", sr.name, "shard", in.name, "why", explainShard(old, fp, plan, in))
			}
		}
		todo[in.name] = key
	}
	// A manifest written before shards kept their notes cannot say which
	// kept shard gave which of its notes: once one shard is redone, all
	// are, so the notes the manifest is rewritten with are whole.
	if len(todo) > 0 && old != nil && notesUnattributed(old) {
		for _, in := range inputs {
			if _, ok := todo[in.name]; !ok && r.mine(in.name) {
				todo[in.name] = shardKey(fp, "plan="+plan, in.ref)
			}
		}
	}
	return todo
}

// notesUnattributed reports whether m, written before shards kept their
// notes, has notes besides its Finish's that no shard carries.
func notesUnattributed(m *manifests.Stage) bool {
	if slices.ContainsFunc(m.Shards, func(s manifests.Shard) bool { return len(s.Notes) > 0 }) {
		return false
	}
	return slices.ContainsFunc(m.Notes, func(n string) bool { return !slices.Contains(m.FinishNotes, n) })
}

func explainShard(old *manifests.Stage, fp, plan string, in shardInput) string {
	s, ok := old.Shard(in.name)
	switch {
	case !ok:
		return "no earlier output for this shard"
	case old.ConfigHash != fp:
		return "stage settings changed (config, prompt, teacher, seed, version or tool library)"
	case old.Plan != plan:
		return "the stage's whole-input plan changed"
	case len(s.Inputs) == 0 || s.Inputs[0].SHA256 != in.ref.SHA256:
		return "input shard content changed"
	case s.Key == "":
		return "records were rejected for a passing teacher failure (timeout, 429, 5xx, …)"
	case notKept(s):
		return "the shard was not kept (keep: false), and this run keeps it"
	default:
		return "an output file is missing or changed"
	}
}

// transientRejects counts the records of rejected whose reason is a
// teacher failure that may pass (llm.Transient).
func transientRejects(rejected map[string]int64) int64 {
	var n int64
	for reason, k := range rejected {
		if llm.Transient(reason) {
			n += k
		}
	}
	return n
}

// outputsExist checks that a recorded shard's outputs are on disk, as
// regular files (a link is never the run's own output), with the recorded
// sizes. (Hashing them would read every output on every run.) A shard not
// kept counts only while the stage still drops its shards.
func (r *Runner) outputsExist(s manifests.Shard, drop bool) bool {
	if r.root == nil {
		return false
	}
	for _, o := range s.Outputs {
		if o.NotKept {
			if !drop {
				return false
			}
			continue
		}
		fi, err := r.root.Lstat(o.Path)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != o.Bytes {
			return false
		}
	}
	return true
}

func outputsOf(m *manifests.Stage, inputs []shardInput) []shardInput {
	var out []shardInput
	for _, in := range inputs {
		s, ok := m.Shard(in.name)
		if !ok {
			continue
		}
		for _, o := range s.Outputs {
			if strings.HasSuffix(o.Path, ".parquet") {
				out = append(out, shardInput{name: in.name, ref: o})
			}
		}
	}
	return out
}

func totalRows(inputs []shardInput) int64 {
	var n int64
	for _, in := range inputs {
		n += in.ref.Rows
	}
	return n
}

// saveEvery is how often, at most, a stage's manifest is rewritten while its
// shards complete.
const saveEvery = 2 * time.Second

// shardWorkers is how many shards of a stage run at once: LLM stages keep
// their concurrency inside a shard, CPU stages spread shards over the CPUs.
func shardWorkers(st Stage) int {
	if c, ok := st.(Concurrent); ok && c.Concurrency() > runtime.NumCPU() {
		return 2 // keeps the teacher busy while one shard drains its tail
	}
	// Twice the CPUs: a shard waiting for its fsync leaves its CPU to another.
	return 2 * runtime.NumCPU()
}

// processShard runs p's stage over recs, the records of its input shard
// name, and sorts what became of them into a shardOut for writeShard.
// checked says recs passed shard.Check already (kept by the pass before and
// handed on in memory, or read from a shard this process wrote): a record
// the stage returns as it was given (the same pointer; a stage changes
// only a copy) is not checked again, and of one it made from it only what
// it changed (shard.CheckChanged).
func (r *Runner) processShard(ctx context.Context, p *pass, name string, recs []*record.Record, checked bool) (*shardOut, error) {
	sr, st, sink := p.sr, p.st, p.sink
	// Most stages keep about a record per record: the list is made once.
	o := &shardOut{sh: manifests.Shard{Name: name}, kept: make([]*record.Record, 0, len(recs))}
	o.sh.In = int64(len(recs))
	res := takeShardResults(len(recs))
	defer res.release()
	outs, errs := res.outs, res.errs
	// unfit[i] holds, for the outputs of recs[i] that shard.Check refused,
	// why (by output): the checks run in the workers, beside Process.
	unfit := res.unfit
	workers := runtime.NumCPU()
	c, teacher := st.(Concurrent)
	if teacher {
		workers = max(1, c.Concurrency())
	}
	ps, _ := st.(passer)
	ctr := &counters{m: map[string]int64{}}
	g, gctx := errgroup.WithContext(context.WithValue(ctx, countersKey{}, ctr))
	// A fixed set of workers takes the records in turn: a goroutine per
	// record cost a stack grown anew for each (a tenth of a cheap stage).
	//
	// A record that stops the run: a stage with its own concurrency (the
	// teacher's) stops at once, cancelling the requests in flight, and names
	// the record that stopped first. Any other stage lets the records in
	// flight before it finish (they are quick) and names the first record
	// in shard order that stops, the same on every run (records are taken
	// in order, so every record before it was taken and finishes).
	var next atomic.Int64
	var stopped atomic.Bool
	for range min(workers, len(recs)) {
		g.Go(func() error {
			for gctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(recs) || stopped.Load() {
					return nil
				}
				rec := recs[i]
				var out []*record.Record
				var err error
				if ps != nil && ps.passes(rec) {
					out = recs[i : i+1 : i+1]
				} else {
					out, err = safeProcess(gctx, st, rec, checked)
				}
				kind, _ := contract.Classify(len(out), err)
				if kind == contract.Stop && !isPending(err) {
					err = fmt.Errorf("record %s: %w", rec.ID, err)
					if teacher {
						return err
					}
					errs[i] = err
					stopped.Store(true)
					continue
				}
				outs[i], errs[i] = out, err
				if kind == contract.Kept {
					unfit[i] = checkOutputs(sink != nil, checked, rec, out)
				}
				p.prog.add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return o, err
	}
	if err := ctx.Err(); err != nil {
		return o, err
	}
	if stopped.Load() {
		for _, err := range errs {
			if kind, _ := contract.Classify(0, err); kind == contract.Stop && !isPending(err) {
				return o, err
			}
		}
	}
	if err := pendingIn(errs); err != nil {
		return o, err
	}
	for i, rec := range recs {
		switch kind, reason := contract.Classify(len(outs[i]), errs[i]); kind {
		case contract.Filtered:
			o.filter(reason)
		case contract.Rejected:
			o.reject(shard.Reject{Stage: sr.name, ID: rec.ID, Source: rec.Source, Row: rec.Row,
				Reason: reason, Detail: errs[i].Error(), Record: rec})
		default:
			o.sh.Added += int64(max(0, len(outs[i])-1))
			for j, out := range outs[i] {
				if f, bad := unfit[i][j]; bad {
					o.reject(shard.Reject{Stage: sr.name, ID: out.ID, Source: out.Source, Row: out.Row,
						Reason: f.reason, Detail: f.err.Error(), Record: out})
					continue
				}
				o.keep(out)
			}
		}
	}
	if len(ctr.m) > 0 {
		o.sh.Counters = ctr.m
	}
	if len(ctr.notes) > 0 {
		o.sh.Notes = slices.Sorted(slices.Values(ctr.notes))
	}
	return o, nil
}

// shardResults holds processShard's per-record outcomes (outputs, error,
// refused outputs) of one shard, each list of the shard's length. They
// are pooled: three lists of a shard's length for every stage and shard
// were about 3 % of a fuller run's bytes allocated.
type shardResults struct {
	outs  [][]*record.Record
	errs  []error
	unfit []map[int]checkFail
}

var shardResultsPool = sync.Pool{New: func() any { return new(shardResults) }}

// takeShardResults returns empty lists of length n.
func takeShardResults(n int) *shardResults {
	r := shardResultsPool.Get().(*shardResults)
	r.outs, r.errs, r.unfit = resized(r.outs, n), resized(r.errs, n), resized(r.unfit, n)
	return r
}

// release empties the lists (no record or error is kept) and hands them
// on to the next shard.
func (r *shardResults) release() {
	clear(r.outs)
	clear(r.errs)
	clear(r.unfit)
	shardResultsPool.Put(r)
}

// A checkFail is why shard.Check refused a record.
type checkFail struct {
	reason string
	err    error
}

// checkOutputs runs shard.Check on the outputs of rec a stage kept, and
// returns the refused ones by index (nil when none). A record Parquet or
// DuckDB could not hold (text that is not UTF-8, a JSON column that is not
// one JSON value) is rejected rather than failing the whole shard's write.
// A sink writes no Parquet and checks what it writes itself. When rec is
// checked (it passed the check before), rec returned as it was given is
// not checked again, and of one made from it only what changed
// (shard.CheckChanged, with tools lined up: checkedTools).
func checkOutputs(sink, checked bool, rec *record.Record, outs []*record.Record) map[int]checkFail {
	if sink {
		return nil
	}
	var unfit map[int]checkFail
	for j, out := range outs {
		if checked && out == rec {
			continue
		}
		check := shard.Check
		if checked {
			check = func(out *record.Record) (string, error) { return knownTools.checkChanged(out, rec) }
		}
		if reason, err := check(out); err != nil {
			if unfit == nil {
				unfit = map[int]checkFail{}
			}
			unfit[j] = checkFail{reason, err}
		}
	}
	return unfit
}

// safeProcess turns a panic in a stage into a reject, so one bad record
// cannot take the run down; the panic is a bug and is logged as such.
// checked says rec passed shard.Check: a checkedProcessor is then told so.
func safeProcess(ctx context.Context, st Stage, rec *record.Record, checked bool) (out []*record.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			buf := make([]byte, 4096)
			buf = buf[:runtime.Stack(buf, false)]
			slog.Error("stage panicked (a bug; the record is rejected)", "record", rec.ID, "panic", p, "stack", string(buf))
			out, err = nil, contract.Rejectf("internal_error", "stage panicked: %v", p)
		}
	}()
	if c, ok := st.(checkedProcessor); ok && checked {
		return c.processChecked(ctx, rec)
	}
	return st.Process(ctx, rec)
}

func incr(m map[string]int64, k string) map[string]int64 {
	if m == nil {
		m = map[string]int64{}
	}
	m[k]++
	return m
}

func (r *Runner) shardOptions() shard.Options {
	return shard.Options{Version: r.o.Version, RowGroupRows: r.p.Output.RowGroupRows, JSONL: r.p.Output.JSONL,
		Compression: r.p.Output.Compression, Checked: true}
}

// manifestFile is the manifest of a stage directory.
const manifestFile = "manifest.json"

// prepareStageDir creates a stage's directory, removes the temporary files
// a killed run left there and returns its manifest (nil when none). A
// manifest that does not decode is a *ConfigError saying how to go on: a
// rerun would fail the same way.
func (r *Runner) prepareStageDir(sr stageRun) (*manifests.Stage, error) {
	m, err := r.stageManifest(sr)
	var bad *atomicfs.DamagedError
	if errors.As(err, &bad) {
		return nil, &ConfigError{Problems: []string{fmt.Sprintf("%s is damaged (%v): augment writes it whole, so something else changed it; "+
			"remove the directory %s and run again to make the stage anew (the stages before it keep their work)", bad.Path, bad.Err, sr.out.Path("."))}}
	}
	return m, err
}

func (r *Runner) stageManifest(sr stageRun) (*manifests.Stage, error) {
	if err := sr.out.MkdirAll("."); err != nil {
		return nil, err
	}
	if r.o.Worker != nil && sr.spec != nil { // workers.go: others write here; the merge sweeps
		return r.sharedOld(sr)
	}
	if err := sr.out.Sweep("."); err != nil {
		return nil, err
	}
	if r.o.Merge && sr.spec != nil { // workers.go
		return r.sharedOld(sr)
	}
	return atomicfs.ReadJSON[manifests.Stage](sr.out, manifestFile)
}

// superseded lists the files of the earlier manifest old that the run may
// stop listing: the outputs of its shards the run does not keep as they are
// (redone or gone), its Files, and what it had not yet deleted itself.
func superseded(old *manifests.Stage, kept func(shard string) bool) []string {
	if old == nil {
		return nil
	}
	files := slices.Clone(old.Superseded)
	files = append(files, old.Files...)
	for _, s := range old.Shards {
		if !kept(s.Name) {
			for _, o := range s.Outputs {
				files = append(files, o.Path)
			}
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(files)))
}

// owned lists every file a stage manifest names as the stage's own. A
// shard the stage did not keep (NotKept) names no file: a file at its
// path is an earlier run's, stale, and not among them.
func owned(m *manifests.Stage) map[string]bool {
	files := map[string]bool{}
	for _, s := range m.Shards {
		for _, o := range s.Outputs {
			if !o.NotKept {
				files[o.Path] = true
			}
		}
	}
	for _, f := range m.Files {
		files[f] = true
	}
	if m.Type == "export" {
		// The dataset card writeReport puts in the export dir after the run.
		for f := range files {
			if dir, _, ok := strings.Cut(f, "/"); ok {
				files[dir+"/"+report.CardFile] = true
				break
			}
		}
	}
	return files
}

// staleNotKept lists the files on disk at the paths of m's shards not
// kept: an earlier run kept them, and an augment before this one did not
// delete them once the shard was recorded not kept (see owned).
func (r *Runner) staleNotKept(m *manifests.Stage) []string {
	var files []string
	for _, s := range m.Shards {
		for _, o := range s.Outputs {
			if !o.NotKept {
				continue
			}
			if _, err := r.root.Lstat(o.Path); err == nil {
				files = append(files, o.Path)
			}
		}
	}
	return files
}

// removeReplaced deletes the files of m.Superseded that m no longer lists
// (outputs of an earlier run with other shards or another dataset name),
// so that globbing a stage's files never mixes runs. Files the manifests do
// not name are never touched.
func (r *Runner) removeReplaced(sr stageRun, m *manifests.Stage) error {
	keep := owned(m)
	var drop []string
	for _, f := range m.Superseded {
		if !keep[f] {
			drop = append(drop, f)
		}
	}
	return r.removeOwned(sr.rel, drop)
}

// removeOwned deletes files (paths relative to the run dir) of the stage
// directory stage, then the folders below it they leave empty. A path
// outside the stage directory is skipped: a manifest is a file anybody can
// edit, and it may name only the stage's own files.
func (r *Runner) removeOwned(stage string, files []string) error {
	dirs := map[string]bool{}
	for _, f := range files {
		rest, ok := strings.CutPrefix(f, stage+"/")
		if !ok || !filepath.IsLocal(rest) {
			r.o.Log.Warn("not deleting a file outside its stage directory", "stage", stage, "file", f)
			continue
		}
		if err := r.root.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for d := path.Dir(f); d != stage; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Deepest first; a folder still holding other files stays.
	for _, d := range slices.SortedFunc(maps.Keys(dirs), func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	}) {
		r.root.Remove(d)
	}
	return nil
}

// stageDirName matches a stage directory: "02-meta_tool".
var stageDirName = regexp.MustCompile(`^[0-9]{2,}-(.+)$`)

// sweepStale removes stage directories of earlier runs that this pipeline
// no longer has (a removed or renamed stage), recognised by their manifest:
// it deletes the files the manifest names, then the folders left empty. A
// directory that still holds files augment did not write is kept, with a
// warning.
func (r *Runner) sweepStale(runs []stageRun) error {
	want := map[string]bool{}
	for _, sr := range runs {
		want[sr.rel] = true
	}
	ents, err := r.root.ReadDir(".")
	if err != nil {
		return err
	}
	for _, e := range ents {
		sub := stageDirName.FindStringSubmatch(e.Name())
		if !e.IsDir() || want[e.Name()] || sub == nil {
			continue
		}
		m, err := atomicfs.ReadJSON[manifests.Stage](r.root.Sub(e.Name()), manifestFile)
		if err != nil || m == nil || m.Name != sub[1] {
			continue // not a stage directory augment wrote
		}
		r.o.Log.Info("remove stale stage dir", "dir", e.Name())
		files := append(slices.Sorted(maps.Keys(owned(m))), m.Superseded...)
		for _, s := range m.Shards { // a stale file at a not-kept shard's path too
			files = append(files, outputPaths(s)...)
		}
		if err := r.removeOwned(e.Name(), files); err != nil {
			return err
		}
		// The manifest goes last: until then a rerun finds the directory again.
		if err := r.root.Remove(e.Name() + "/" + manifestFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := r.root.Remove(e.Name()); err != nil {
			left, _ := r.root.ReadDir(e.Name())
			var names []string
			for _, l := range left {
				names = append(names, l.Name())
			}
			r.o.Log.Warn("stale stage dir kept: it holds files augment did not write", "dir", e.Name(), "files", strings.Join(names, ", "))
		}
	}
	return nil
}

// writeEffectiveConfig stores the pipeline with its defaults applied.
func (r *Runner) writeEffectiveConfig() error {
	b, err := r.p.Effective()
	if err != nil {
		return err
	}
	_, err = r.root.WriteFile("config.yaml", b)
	return err
}

// libraryPart is what a stage's fingerprint takes of the tool library:
// its hash for a stage that reads it, nothing for any other.
func (r *Runner) libraryPart(cfg stageConfig) []string {
	if !readsLibrary(cfg) {
		return nil
	}
	lib, err := r.library()
	if err != nil {
		return []string{"library=error"}
	}
	return []string{"library=" + lib.Hash}
}

// Prompt loads the prompt template name, or the file at override (relative
// to pipeline.yaml) when set, renders it against samples (see
// prompts.Template.Check: values of the data type the stage renders it
// with, every field set) and records its hash in the stage's fingerprint,
// so editing a prompt reruns the stage. key is the setting that names
// override in the stage's config ("prompt", "try_prompt",
// "prompts.judge_correctness"): an override that does not load or render is
// a config error at that key's line, caught when the pipeline is loaded,
// before anything is written or asked.
func (e *Env) Prompt(name, key, override string, samples ...any) (*prompts.Template, error) {
	path := override
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(e.Dir, path)
	}
	t, err := prompts.Load(name, path)
	if err == nil {
		err = t.Check(samples...)
	}
	if err != nil {
		if override != "" {
			return nil, &keyError{key: key, err: err}
		}
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prompts == nil {
		e.prompts = map[string]string{}
	}
	e.prompts[name] = t.Hash
	return t, nil
}

// A keyError is a stage's build error that concerns one of its settings:
// the config error (stageProblems) gives that key's line, not the stage's.
type keyError struct {
	key string // the setting's path inside the stage type's config, e.g. "prompt" or "prompts.judge_correctness"
	err error
}

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

func (e *Env) stats() *llm.Stats {
	if sc, ok := e.Teacher.(interface{ Stats() llm.Stats }); ok {
		s := sc.Stats()
		if s.Requests == 0 && s.CacheHits == 0 {
			return nil
		}
		return &s
	}
	return nil
}
