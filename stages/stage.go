package stages

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/shard"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
)

// A Stage transforms records one at a time.
//
// Process returns the records to pass on, in a deterministic order: usually
// one, the input possibly changed (Clone it before changing it); several when
// the stage adds records (negatives, variants). What the runner makes of the
// records and the error is the rule of package contract (contract.Classify):
// kept, filtered (no records, or a *contract.Filter), rejected (an error with
// a reject reason, e.g. contract.Rejectf) or the run stops (any other error:
// budget reached, endpoint dead, context cancelled; the shard fails, nothing
// of it becomes visible, and the next run redoes it). A filtered record is
// not written anywhere, since the input shard still holds it.
//
// Process is called concurrently for different records (see Concurrent); it
// must not depend on the order in which records arrive. Randomness comes from
// Env.Rand, which is seeded per record.
type Stage interface {
	Process(ctx context.Context, r *record.Record) ([]*record.Record, error)
}

// A Concurrent stage says how many records it wants in flight at once.
// Stages that do not implement it get one worker per CPU.
// LLM stages return the teacher's total in-flight capacity.
type Concurrent interface {
	Concurrency() int
}

// A checkedProcessor is a stage that uses knowing that a record passed
// shard.Check (every text UTF-8, every JSON field one JSON value) to skip
// validating that again: the runner calls processChecked instead of
// Process for such records (kept by the pass before and handed on in
// memory, or read from a shard this process wrote). It returns what
// Process would (the export: its calls' arguments are not parsed again).
type checkedProcessor interface {
	processChecked(ctx context.Context, r *record.Record) ([]*record.Record, error)
}

// A passer is a stage that tells at little cost, before Process, that it
// passes a record on unchanged (Process would return the record alone):
// the runner then keeps the record without calling Process, and no
// one-record list is made for it. passes must not panic or block.
type passer interface {
	passes(r *record.Record) bool
}

// A teacherWriter is a stage whose output records hold the teacher's
// answers, their lineage step naming the teacher's provider: under the
// offline provider its stand-in text, which export refuses unless
// allow_offline is set. check warns of that (offlineExportWarnings).
type teacherWriter interface {
	writesTeacherText() bool
}

// A modelUser is a stage that may ask the teacher or the embedder. Only
// such a stage's fingerprint covers their settings (llm.Config.Fingerprint,
// EmbedderConfig.Fingerprint): fixing teacher.model redoes no shard of a
// stage that never asks it. A stage that does not implement it asks
// neither (TestModelUsersDeclared builds every stage without them).
type modelUser interface {
	usesModels() (teacher, embedder bool)
}

// A Planner is a stage that must see all of its input before processing any
// record (sample quotas, dedupe). The runner calls Plan once per run with a
// function that streams every input record in order; the returned digest
// identifies the plan and becomes part of every shard's key, so a changed
// plan reruns the shards.
type Planner interface {
	Plan(ctx context.Context, scan func(yield func(*record.Record) error) error) (digest string, err error)
}

// A Sink is a final stage that writes records in its own format (the
// LLaMA-Factory export) instead of Parquet shards. Its Process validates and
// may reject records as usual, and returns each kept record carrying what it
// made of it in Record.Rendered (a shallow copy of its input: the input stays
// as it was); WriteShard then gets exactly the records Process returned for
// one shard, in order, writes them under dir, the stage's directory, and may
// still reject records it cannot write (returned as rejects, each counted
// once). Finish runs after every shard is written and returns notes for the
// manifest. A sink's input (not its output) passes through to the next stage,
// so several exports can follow each other.
//
// A sink writes only through dir (a confined root: no name leads outside
// the stage directory) and returns FileRefs with dir.Rel paths.
type Sink interface {
	Stage
	WriteShard(ctx context.Context, dir *atomicfs.Root, shard string, recs []*record.Record) ([]manifests.FileRef, []shard.Reject, error)
	Finish(dir *atomicfs.Root, shards []manifests.Shard) (notes []string, err error)
}

// A Previewer is a sink that shows what it would write for a record its
// Process passed: augment check prints it under the stage.
type Previewer interface {
	Preview(r *record.Record) (line string, ok bool)
}

// Env is what a stage may use besides its own config. It is built once per
// stage per run.
type Env struct {
	Stage    string // the stage's name in pipeline.yaml
	Seed     uint64 // the pipeline's seed
	Dir      string // directory of pipeline.yaml; relative paths in stage configs resolve against it
	Teacher  llm.Client
	Embedder llm.Embedder
	// Provider and Model describe the teacher for lineage entries.
	Provider, Model string
	// Capacity is the teacher's total number of requests in flight; LLM
	// stages return it from Concurrency.
	Capacity int
	// Library returns the run's tool library: every distinct tool seen by
	// ingest. It is loaded on first use.
	Library func() (*toollib.Library, error)
	Log     *slog.Logger

	mu      sync.Mutex
	prompts map[string]string // prompt name → template hash, see Prompt
}

// Rand returns a generator seeded by the pipeline seed, the stage name and
// the record ID, so a record's random choices do not depend on which other
// records exist or in which order they are processed.
func (e *Env) Rand(id string) *rand.Rand {
	// The generator and its source are one allocation (stages draw one
	// per record).
	g := &struct {
		r   rand.Rand
		src rand.PCG
	}{}
	e.reseeder().reseed(&g.src, id)
	g.r = *rand.New(&g.src)
	return &g.r
}

// seedHash is the one recipe for a choice that must depend on the pipeline
// seed and a record's (or row's) identity only, never on order or on which
// other records exist: FNV-1a over the seed as 8 little-endian bytes, then
// parts as they are. Env.Rand, a source's fraction and sample ranks use it.
func seedHash(seed uint64, parts ...string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211 // FNV-64a's
	h := uint64(offset)
	for k := range 8 {
		h = (h ^ uint64(byte(seed>>(8*k)))) * prime
	}
	for _, p := range parts {
		h = fnvAdd(h, p)
	}
	return h
}

// fnvAdd continues FNV-1a's hash h over p (seedHash(seed, a, b) is
// fnvAdd(seedHash(seed, a), b)).
func fnvAdd(h uint64, p string) uint64 {
	const prime = 1099511628211
	for i := 0; i < len(p); i++ {
		h = (h ^ uint64(p[i])) * prime
	}
	return h
}

// A reseeder puts a generator in the state Env.Rand(id)'s starts from, for
// a stage that keeps one generator per worker (math/rand/v2's Rand keeps
// no state besides its source, so reseeding the source restarts it). The
// seed and the stage name are hashed once. TestReseederAsRand holds the
// two to the same draws.
type reseeder struct{ prefix uint64 }

func (e *Env) reseeder() reseeder { return reseeder{seedHash(e.Seed, e.Stage, "\x00")} }

func (r reseeder) reseed(src *rand.PCG, id string) {
	s := fnvAdd(r.prefix, id)
	src.Seed(s, s^0x9e3779b97f4a7c15)
}

// Count adds n to the counter key of the shard being processed. The runner
// keeps the counters per shard and in the stage totals of the manifest, so
// a stage can report more than kept and rejected records (the verify stage
// counts problems by check and by kind). Outside a run it does nothing.
func Count(ctx context.Context, key string, n int64) {
	if c, ok := ctx.Value(countersKey{}).(*counters); ok {
		c.mu.Lock()
		c.m[key] += n
		c.mu.Unlock()
	}
}

// Note records something users should know about the output of the shard
// being processed (what an export style dropped, …). A shard's notes are
// kept with it in the manifest, and a stage's notes are those of the
// shards it lists plus its sink's Finish: a shard redone drops the notes
// its earlier version gave. Outside a run it does nothing.
func Note(ctx context.Context, format string, args ...any) {
	if c, ok := ctx.Value(countersKey{}).(*counters); ok {
		msg := fmt.Sprintf(format, args...)
		c.mu.Lock()
		if !slices.Contains(c.notes, msg) {
			c.notes = append(c.notes, msg)
		}
		c.mu.Unlock()
	}
}

type countersKey struct{}

// counters are what Count and Note gathered for one shard.
type counters struct {
	mu    sync.Mutex
	m     map[string]int64
	notes []string
}
