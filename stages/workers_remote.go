package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/storage"
)

// Workers over an output on object storage (output.dir: s3://, gs://,
// azblob://…; the same on each, through storage.Mirror). The
// contract of workers.go holds unchanged; what differs is where the
// workers meet:
//
//   - Each worker works in a local directory of its own (output.work_dir,
//     or the default one, with "-worker-I-of-N" appended) that its mirror
//     (storage.Mirror) keeps in step with the shared prefix: everything it
//     commits is uploaded, manifests (its part of a stage's manifest
//     included) after the files they name.
//   - Where a worker waits for the others (worker 0's ingest, a stage's
//     barrier) it first fetches what they published under the stage's
//     directory and its worker parts (sharedOutput.Fetch), so the barrier
//     reads the same files as on a shared file system.
//   - The prefix is locked by leases (storage.Lease, conditional writes): a
//     worker holds worker-I-of-N, one process or augment merge holds
//     "run", which no worker lease may be held alongside. A lease held by a
//     live process is a *BusyError at once (exit 2), as the local lock.
//   - The request cache segment the process writes is uploaded as the run
//     goes (a consistent snapshot when a stage's manifest is saved, at
//     most every cacheShareEvery and a tenth of the time), not only when
//     the run ends, so a worker on a lost machine loses at most the
//     answers of the last interval.
//   - augment merge pulls the whole prefix (as any run on object storage
//     does), so it finds the workers' parts, and its manifests, exports and
//     report go up through its mirror.

// A sharedOutput is where the processes sharing a run publish their work
// and find each other's.
type sharedOutput interface {
	// Fetch makes the run directory hold what the other processes
	// published under dir (a folder of it) and keep accepts (nil: all):
	// files it lacks or holds an older copy of, each checked and renamed
	// into place whole. Files this process committed are kept.
	Fetch(ctx context.Context, dir string, keep func(name string) bool) error
}

// sharedDir is a run directory on a shared file system: what another
// worker commits is there already.
type sharedDir struct{}

func (sharedDir) Fetch(context.Context, string, func(string) bool) error { return nil }

// shared is where this run meets the other processes sharing it.
func (r *Runner) shared() sharedOutput {
	if r.mirror != nil {
		return r.mirror
	}
	return sharedDir{}
}

// fetchStage brings the other workers' results of a stage: their parts
// of its manifest, its manifest.json, and its files.
func (r *Runner) fetchStage(ctx context.Context, rel string) error {
	sh := r.shared()
	if err := sh.Fetch(ctx, workersDir+"/"+rel, nil); err != nil {
		return err
	}
	return sh.Fetch(ctx, rel, nil)
}

// workerWorkDir is the local working copy of a worker whose output is on
// object storage: its own, beside the one a single process would use.
func workerWorkDir(p *Pipeline, o Options, dir string) string {
	if _, remote, _ := storage.OutputLocation(p.Output.Dir); !remote || o.Worker == nil {
		return dir
	}
	return fmt.Sprintf("%s-worker-%d-of-%d", dir, o.Worker.Index, o.Worker.Count)
}

// lockPrefix takes this process's lease of the prefix of an output on
// object storage.
func (r *Runner) lockPrefix(m *storage.Mirror) error {
	name, conflicts := "run", "worker-"
	if w := r.o.Worker; w != nil {
		name, conflicts = fmt.Sprintf("worker-%d-of-%d", w.Index, w.Count), "run"
	}
	ctx, cancel := context.WithTimeout(context.Background(), statTimeout)
	defer cancel()
	err := m.Lock(ctx, name, conflicts)
	var held *storage.LeaseHeldError
	if errors.As(err, &held) {
		return &BusyError{Dir: held.Dir, Holder: held.Holder}
	}
	return err
}

// cacheShareEvery is how often, at most, the request cache goes up to an
// output on object storage while the run goes on (and at most a tenth of
// the time: a cache that takes 10 s to upload goes up every 100 s).
const cacheShareEvery = 2 * time.Second

// shareCache queues a snapshot of this process's request cache (its
// segment, for a worker) for upload to an output on object storage.
func (r *Runner) shareCache() {
	if r.mirror == nil || r.teacher == nil {
		return
	}
	name := cacheDir + "/" + llm.CacheFile
	if seg := r.cacheSegment(); seg != "" {
		name = path.Join(cacheDir, "segments", seg, llm.CacheFile)
	}
	t := r.teacher
	r.mirror.Snapshot(name, cacheShareEvery, func(w io.Writer) (bool, error) { return t.WriteCacheSnapshot(w) })
}
