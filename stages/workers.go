package stages

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/llm"
)

// Workers: one run shared by N processes (a Kubernetes Indexed Job, a Slurm
// job array, or N local processes) over one output directory on a shared
// file system, or one prefix on object storage (workers_remote.go).
//
// The contract:
//   - Ingest runs in worker 0 only (it cuts the dumps into shards and collects
//     the tool library, both of which need the whole dump); the other workers
//     wait for its manifest and check it against the dumps they hash
//     themselves (shard keys), so a stale manifest is never taken for a fresh one.
//   - Every later stage's shards are dealt to the workers by shardOwner, the
//     same deal for every stage; a worker processes only its own shards and
//     writes its part of the stage manifest to
//     .augment/workers/<stage dir>/<I>-of-<N>.json (never the stage's
//     manifest.json). It deletes nothing: other workers write in the same
//     directories.
//   - After each stage the workers wait for each other (a barrier on those
//     files, polled with a deadline): a shard's entry counts once its key is
//     the key of the shard's (merged) input under the stage's settings and
//     plan, and its outputs exist; an entry of an earlier run (manifest.json,
//     another worker count) with that key counts as well. A Planner stage (sample quotas, dedup,
//     response_schema) is planned by every worker from the complete merged
//     input, so the plan digest is the same in every worker.
//   - A sink (export) writes its shards in the workers; its Finish (the
//     dataset_info.json that names every file) runs in `augment merge`.
//   - `augment merge` is a normal run whose earlier work is the union of the
//     worker manifests: every shard is found done, and it writes each stage's
//     manifest.json, the sinks' Finish, report.html and the dataset cards,
//     and removes what earlier runs left, as one process would. Shards no
//     worker finished are run by the merge itself.

// A Worker is this process's place among the processes sharing a run.
type Worker struct {
	Index, Count int
	// Wait is how long a worker waits for another worker's result (the
	// ingest manifest, a stage's barrier) before it fails; 0 means 24h.
	Wait time.Duration
	// Poll is the longest interval between looks at the shared files
	// (the first ones come sooner); 0 means 1s.
	Poll time.Duration
}

func (w *Worker) String() string { return fmt.Sprintf("%d/%d", w.Index, w.Count) }

// ParseWorker parses "I/N" (0 ≤ I < N).
func ParseWorker(s string) (*Worker, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return nil, fmt.Errorf("worker %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return &Worker{Index: i, Count: n}, nil
}

// DetectWorker returns this process's Worker from the --worker flag (I/N)
// or the environment the engines set: JOB_COMPLETION_INDEX (a Kubernetes
// Indexed Job, which does not tell the pod the total: workers gives it) or
// SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT, or with
// SLURM_ARRAY_TASK_MIN/MAX (a Slurm job array; the index is counted from
// MIN). It returns nil when the process runs alone.
func DetectWorker(flag string, workers int, getenv func(string) string) (*Worker, error) {
	if flag != "" {
		w, err := ParseWorker(flag)
		if err == nil && workers > 0 && workers != w.Count {
			err = fmt.Errorf("--worker %s and --workers %d disagree", flag, workers)
		}
		return w, err
	}
	envInt := func(name string) (int, bool, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, true, fmt.Errorf("%s=%q is not a number", name, v)
		}
		return n, true, nil
	}
	check := func(i, n int, from string) (*Worker, error) {
		if n < 1 || i < 0 || i >= n {
			return nil, fmt.Errorf("%s: worker index %d is not in 0..%d", from, i, n-1)
		}
		return &Worker{Index: i, Count: n}, nil
	}
	if i, ok, err := envInt("JOB_COMPLETION_INDEX"); ok || err != nil {
		if err != nil {
			return nil, err
		}
		if workers < 1 {
			return nil, errors.New("JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but the number of workers is not: pass --workers N (the Job's completions)")
		}
		return check(i, workers, "JOB_COMPLETION_INDEX")
	}
	if id, ok, err := envInt("SLURM_ARRAY_TASK_ID"); ok || err != nil {
		if err != nil {
			return nil, err
		}
		lo, hasMin, err := envInt("SLURM_ARRAY_TASK_MIN")
		if err != nil {
			return nil, err
		}
		n, hasCount, err := envInt("SLURM_ARRAY_TASK_COUNT")
		if err != nil {
			return nil, err
		}
		hi, hasMax, err := envInt("SLURM_ARRAY_TASK_MAX")
		if err != nil {
			return nil, err
		}
		switch {
		case hasCount && hasMax && hi-lo+1 != n:
			// --array=0,2,4 or 0-8:2: worker indexes would not be 0..N-1.
			return nil, fmt.Errorf("the Slurm array's task IDs run from %d to %d with %d tasks: it has gaps or a step; augment needs a contiguous array (--array=0-%d)", lo, hi, n, n-1)
		case !hasCount && hasMax:
			n, hasCount = hi-lo+1, true
		}
		if workers > 0 {
			if hasCount && n != workers {
				return nil, fmt.Errorf("--workers %d but the Slurm array has %d tasks", workers, n)
			}
			n, hasCount = workers, true
		}
		if !hasCount {
			return nil, errors.New("SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX: pass --workers N")
		}
		if !hasMin {
			lo = 0
		}
		return check(id-lo, n, "SLURM_ARRAY_TASK_ID")
	}
	if workers > 0 {
		return nil, errors.New("--workers N needs a worker index: --worker I/N, JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID")
	}
	return nil, nil
}

// shardOwner deals shards to n workers: round robin over a source's shard
// numbers ("toolace-00012"), from a start that depends on the source's
// name, so every worker gets a near-equal share of every source. The deal
// depends on the shard name only, so it is the same in every stage.
func shardOwner(shardName string, n int) int {
	if n <= 1 {
		return 0
	}
	src, idx, ok := cutShardIndex(shardName)
	i, err := strconv.ParseUint(idx, 10, 64)
	h := fnv.New64a()
	if !ok || err != nil {
		h.Write([]byte(shardName))
		return int(h.Sum64() % uint64(n))
	}
	h.Write([]byte(src))
	return int((h.Sum64()%uint64(n) + i%uint64(n)) % uint64(n))
}

// mine reports whether this process processes the shard (always, alone).
func (r *Runner) mine(shardName string) bool {
	w := r.o.Worker
	return w == nil || shardOwner(shardName, w.Count) == w.Index
}

// workersDir holds the workers' parts of the stage manifests.
const workersDir = stateDir + "/workers"

var workerFileName = regexp.MustCompile(`^([0-9]+)-of-([0-9]+)\.json$`)

func workerManifest(stageRel string, w *Worker) string {
	return fmt.Sprintf("%s/%s/%d-of-%d.json", workersDir, stageRel, w.Index, w.Count)
}

// saveStage writes a stage's manifest: manifest.json in the stage
// directory, or this worker's part of it.
func (r *Runner) saveStage(sr stageRun, m *manifests.Stage) error {
	if r.o.Worker == nil {
		defer r.shareCache() // workers_remote.go
		return sr.out.WriteJSON(manifestFile, m)
	}
	name := workerManifest(sr.rel, r.o.Worker)
	if err := r.root.MkdirAll(path.Dir(name)); err != nil {
		return err
	}
	defer r.shareCache() // workers_remote.go
	return r.root.WriteJSON(name, m)
}

// ownLLM is the teacher accounting in this worker's earlier part of stage
// sr made under settings fp, for a rerun that redoes none of its shards
// (nil for none): the merge adds up the parts' accounting.
func (r *Runner) ownLLM(sr stageRun, fp string) json.RawMessage {
	if m := r.ownPart(sr, fp); m != nil {
		return m.LLM
	}
	return nil
}

// ownPart is this worker's earlier part of stage sr made under settings
// fp, nil for none.
func (r *Runner) ownPart(sr stageRun, fp string) *manifests.Stage {
	m, err := atomicfs.ReadJSON[manifests.Stage](r.root, workerManifest(sr.rel, r.o.Worker))
	if err != nil || m == nil || m.ConfigHash != fp {
		return nil
	}
	return m
}

// killedLLM is the teacher accounting a rerun of this worker starts from
// when its earlier part of stage sr (settings fp) is not finished (the
// run was killed, or stopped): that run's recorded traffic, which paid
// for the shards it recorded, and the workers whose traffic it counts
// only in part, this one added. Nil for a finished part or none: a rerun
// then records its own, as one process does.
func (r *Runner) killedLLM(sr stageRun, fp string) (*llm.Stats, json.RawMessage, []string) {
	m := r.ownPart(sr, fp)
	if m == nil || !m.Finished.IsZero() {
		return nil, nil, nil
	}
	unrecorded := append(slices.Clone(m.LLMUnrecorded), fmt.Sprintf("worker %d/%d", r.o.Worker.Index, r.o.Worker.Count))
	unrecorded = slices.Compact(slices.Sorted(slices.Values(unrecorded)))
	var s llm.Stats
	if len(m.LLM) == 0 || json.Unmarshal(m.LLM, &s) != nil {
		return nil, nil, unrecorded
	}
	return &s, m.LLM, unrecorded
}

// cacheSegment is the request cache segment this process writes: its
// own as a worker, the main cache file ("") alone.
func (r *Runner) cacheSegment() string {
	if w := r.o.Worker; w != nil {
		return fmt.Sprintf("worker-%d-of-%d", w.Index, w.Count)
	}
	return ""
}

// A workerPart is one worker's part of a stage manifest.
type workerPart struct {
	index, count int
	m            *manifests.Stage
}

// workerParts reads the worker manifests of a stage; count 0 reads those
// of every worker count, else those of count workers only. A file being
// replaced is read whole (writes are atomic); an unreadable one is skipped
// (another look finds it again).
func (r *Runner) workerParts(stageRel string, count int) ([]workerPart, error) {
	dir := workersDir + "/" + stageRel
	ents, err := r.root.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var parts []workerPart
	for _, e := range ents {
		sub := workerFileName.FindStringSubmatch(e.Name())
		if sub == nil || !e.Type().IsRegular() {
			continue
		}
		i, _ := strconv.Atoi(sub[1])
		n, _ := strconv.Atoi(sub[2])
		if count > 0 && n != count {
			continue
		}
		m, err := atomicfs.ReadJSON[manifests.Stage](r.root, dir+"/"+e.Name())
		if err != nil || m == nil {
			continue
		}
		parts = append(parts, workerPart{index: i, count: n, m: m})
	}
	return parts, nil
}

// sharedOld is a stage's earlier work when several processes share the
// run: its manifest.json and every worker's part, newest first, as one
// manifest. A shard comes from the newest manifest that has it; the other
// manifests' outputs for it, their Superseded and the Files of
// manifest.json become Superseded (deleted by the merge unless still
// named). Its notes are those of the shards it takes (Stage.ShardNotes).
func (r *Runner) sharedOld(sr stageRun) (*manifests.Stage, error) {
	mj, err := atomicfs.ReadJSON[manifests.Stage](sr.out, manifestFile)
	if err != nil {
		return nil, err
	}
	parts, err := r.workerParts(sr.rel, 0)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return mj, nil
	}
	all := make([]*manifests.Stage, 0, len(parts)+1)
	for _, p := range parts {
		all = append(all, p.m)
	}
	if mj != nil {
		all = append(all, mj)
	}
	slices.SortStableFunc(all, func(a, b *manifests.Stage) int { return b.Started.Compare(a.Started) })
	out := *all[0]
	out.Shards, out.Notes, out.Superseded, out.Files = nil, nil, nil, nil
	if mj != nil {
		out.Files = mj.Files
	}
	seen := map[string]manifests.Shard{}
	for _, m := range all {
		out.Superseded = append(out.Superseded, m.Superseded...)
		for _, s := range m.Shards {
			if first, ok := seen[s.Name]; ok {
				if !slices.Equal(first.Outputs, s.Outputs) {
					for _, o := range s.Outputs {
						out.Superseded = append(out.Superseded, o.Path)
					}
				}
				continue
			}
			seen[s.Name] = s
			out.Shards = append(out.Shards, s)
		}
	}
	slices.SortFunc(out.Shards, func(a, b manifests.Shard) int { return cmp.Compare(a.Name, b.Name) })
	// The teacher accounting: manifest.json's when it is the newest record
	// (a merge or a run adopted the parts since, and added its own), else
	// the workers' parts added up; when they asked nothing (all done
	// before), that of the run that did, as one process keeps it.
	if mj != nil && all[0] == mj {
		out.LLM, out.LLMUnrecorded = mj.LLM, mj.LLMUnrecorded
	} else if out.LLM, out.LLMUnrecorded = sumLLM(parts, out.ConfigHash); out.LLM == nil && mj != nil {
		out.LLM, out.LLMUnrecorded = mj.LLM, mj.LLMUnrecorded
	}
	out.Notes = out.ShardNotes(out.FinishNotes)
	out.Superseded = slices.Compact(slices.Sorted(slices.Values(out.Superseded)))
	return &out, nil
}

// unmergedWorkers reports whether workers left a part of a stage of this
// pipeline that no merge or plain run adopted since: one newer than the
// stage's manifest.json, or with none.
func (r *Runner) unmergedWorkers() (bool, error) {
	if r.root == nil {
		return false, nil
	}
	for _, sr := range r.plan()[1:] {
		parts, err := r.workerParts(sr.rel, 0)
		if err != nil {
			return false, err
		}
		mj, _ := atomicfs.ReadJSON[manifests.Stage](sr.out, manifestFile) // a damaged one is the stage's to report
		for _, p := range parts {
			if mj == nil || p.m.Started.After(mj.Started) {
				return true, nil
			}
		}
	}
	return false, nil
}

// workTime is the time processes spent on a stage: the earliest start,
// and their seconds summed.
type workTime struct {
	started time.Time
	seconds float64
}

// workersTime is the time the workers' parts of stage sr made under
// settings fp spent on it, of every worker count, as sumLLM adds up their
// traffic (zero for none).
func (r *Runner) workersTime(sr stageRun, fp string) (workTime, error) {
	parts, err := r.workerParts(sr.rel, 0)
	if err != nil {
		return workTime{}, err
	}
	var w workTime
	for _, p := range parts {
		if p.m.ConfigHash != fp {
			continue
		}
		if w.started.IsZero() || p.m.Started.Before(w.started) {
			w.started = p.m.Started
		}
		w.seconds += p.m.Seconds
	}
	return w, nil
}

// workersLLM is the teacher accounting of the workers' parts of stage sr
// made under settings fp (sumLLM), nil for none.
func (r *Runner) workersLLM(sr stageRun, fp string) (json.RawMessage, []string, error) {
	parts, err := r.workerParts(sr.rel, 0)
	if err != nil {
		return nil, nil, err
	}
	stats, unrecorded := sumLLM(parts, fp)
	return stats, unrecorded, nil
}

// sumLLM adds up the teacher accounting of the worker parts made under
// settings fp, of every worker count: each part holds the traffic of the
// last run of its worker that sent any (a rerun with nothing to redo keeps
// its part's, ownLLM), so a rerun with another count, which redoes
// nothing, adds nothing and takes nothing away. It names the workers
// whose part is not finished: killed while they ran the stage, they may
// have sent more than their part records.
func sumLLM(parts []workerPart, fp string) (json.RawMessage, []string) {
	var sum *llm.Stats
	var unrecorded []string
	for _, p := range parts {
		if p.m.ConfigHash != fp {
			continue
		}
		if p.m.Finished.IsZero() {
			unrecorded = append(unrecorded, fmt.Sprintf("worker %d/%d", p.index, p.count))
		}
		unrecorded = append(unrecorded, p.m.LLMUnrecorded...) // killed before a rerun (killedLLM)
		var s llm.Stats
		if len(p.m.LLM) == 0 || json.Unmarshal(p.m.LLM, &s) != nil {
			continue
		}
		sum = addStats(sum, &s)
	}
	if sum == nil {
		return nil, nil
	}
	return statsJSON(sum), slices.Compact(slices.Sorted(slices.Values(unrecorded)))
}

// statsJSON is a sum of addStats as a manifest holds it.
func statsJSON(s *llm.Stats) json.RawMessage {
	r := *s
	r.PrefixShare = math.Round(r.PrefixShare*1000) / 1000 // as one process rounds it (teacher.go)
	b, _ := json.Marshal(r)
	return b
}

// addStats is the teacher accounting of two processes' traffic in one
// stage, a (nil for none) and b; neither is changed. Latency quantiles
// cannot be merged from summaries: they are the busier process's (Count
// and Max are exact).
func addStats(a, b *llm.Stats) *llm.Stats {
	if a == nil {
		s := *b
		s.InFlight = 0
		return &s
	}
	sum := *a
	bytes := float64(a.PromptBytes + b.PromptBytes)
	if bytes > 0 {
		sum.PrefixShare = (a.PrefixShare*float64(a.PromptBytes) + b.PrefixShare*float64(b.PromptBytes)) / bytes
	}
	sum.Requests += b.Requests
	sum.CacheHits += b.CacheHits
	sum.Sent += b.Sent
	sum.Retries += b.Retries
	sum.Failed += b.Failed
	sum.TokensIn += b.TokensIn
	sum.TokensOut += b.TokensOut
	sum.Cost += b.Cost
	sum.NoUsage += b.NoUsage
	sum.PromptBytes += b.PromptBytes
	sum.Pending += b.Pending
	sum.Errors = addCounts(maps.Clone(a.Errors), b.Errors)
	sum.MissCauses = addCounts(maps.Clone(a.MissCauses), b.MissCauses)
	sum.Models = maps.Clone(a.Models)
	for m, u := range b.Models {
		if sum.Models == nil {
			sum.Models = map[string]llm.ModelUsage{}
		}
		t := sum.Models[m]
		t.Requests += u.Requests
		t.TokensIn += u.TokensIn
		t.TokensOut += u.TokensOut
		t.Cost += u.Cost
		sum.Models[m] = t
	}
	lat := a.Latency
	if b.Latency.Count > lat.Count {
		lat = b.Latency
	}
	lat.Count = a.Latency.Count + b.Latency.Count
	lat.Max = max(a.Latency.Max, b.Latency.Max)
	sum.Latency = lat
	sum.InFlight = 0
	return &sum
}

func addCounts(dst, src map[string]int64) map[string]int64 {
	for k, v := range src {
		if dst == nil {
			dst = map[string]int64{}
		}
		dst[k] += v
	}
	return dst
}

// runWorker is Run for one of several workers (see the contract above).
func (r *Runner) runWorker(ctx context.Context) (*Report, error) {
	w := r.o.Worker
	r.begun = time.Now()
	if w.Index == 0 {
		if err := r.writeEffectiveConfig(); err != nil {
			return nil, err
		}
	}
	rep := r.newReport()
	runs := r.plan()
	var ing stageResult
	var err error
	if w.Index == 0 {
		ing, err = r.ingest(ctx, runs[0])
	} else {
		ing, err = r.waitIngest(ctx, runs[0])
	}
	rep.Stages = append(rep.Stages, ing.report)
	if err != nil {
		return rep, fmt.Errorf("stage ingest: %w", err)
	}
	err = r.runStages(ctx, rep, runs, ing.outputs, func(i int, sr stageRun, res stageResult, input []shardInput) ([]shardInput, error) {
		if res.sink || !slices.ContainsFunc(runs[i+2:], func(s stageRun) bool { return !s.spec.Skip }) {
			return input, nil // nothing reads its outputs in this process
		}
		return r.waitStage(ctx, sr, res, input)
	})
	if err != nil {
		return rep, err
	}
	return rep, r.transientErr(fmt.Sprintf("worker %s: run the worker again, or augment merge, to retry just those records", w))
}

// poll calls ready until it reports true, ctx ends or the worker's wait
// deadline passes; the deadline's error ends with found(), what the last
// look found in the way ("" for nothing known).
func (r *Runner) poll(ctx context.Context, what string, ready func() (bool, error), found func() string) error {
	w := r.o.Worker
	wait, every := w.Wait, w.Poll
	if wait <= 0 {
		wait = 24 * time.Hour
	}
	if every <= 0 {
		every = time.Second
	}
	deadline := time.Now().Add(wait)
	logged := false
	pause := min(50*time.Millisecond, every) // short waits end soon, long ones poll every Poll
	for {
		ok, err := ready()
		if ok || err != nil {
			return err
		}
		if !logged {
			r.o.Log.Info("waiting for the other workers", "worker", w.String(), "for", what)
			logged = true
		}
		if time.Now().After(deadline) {
			if f := found(); f != "" {
				return fmt.Errorf("worker %s: waited %s for %s; %s", w, wait, what, f)
			}
			return fmt.Errorf("worker %s: waited %s for %s; the workers that own the missing shards did not finish (run them again, or run augment merge to finish their part in one process)", w, wait, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, every)
	}
}

// waitIngest waits for worker 0's ingest manifest to describe the current
// dumps under the current settings (each worker hashes the dumps itself),
// then reads it as ingest would have made it.
func (r *Runner) waitIngest(ctx context.Context, sr stageRun) (stageResult, error) {
	res := stageResult{report: StageReport{Name: sr.name, Type: sr.typ, Dir: sr.rel}}
	cfgs := make([]ingestSettings, len(r.p.Sources))
	sfps := make([]string, len(r.p.Sources))
	for i, s := range r.p.Sources {
		cfgs[i] = ingestSettingsOf(r.p.Output, s)
		var err error
		if sfps[i], _, err = r.fingerprint("ingest", ingestVersion, cfgs[i], nil, nil); err != nil {
			return res, err
		}
	}
	fp, _, err := r.fingerprint("ingest", ingestVersion, cfgs, nil, nil)
	if err != nil {
		return res, err
	}
	// A dump's hash, as ingest finds it (sourceSum: a local file hashed, a
	// remote one by its stated or pinned hash), once per recorded input.
	sums := map[string]string{}
	sum := func(i int, prev []manifests.Shard) (string, error) {
		path := r.p.Resolve(r.p.Sources[i].Path)
		memo := path
		if len(prev) > 0 && len(prev[0].Inputs) == 1 {
			memo += "\x00" + prev[0].Inputs[0].Source + "\x00" + prev[0].Inputs[0].SHA256
		}
		if s, ok := sums[memo]; ok {
			return s, nil
		}
		s, err := r.sourceSum(ctx, path, prev)
		if err == nil {
			sums[memo] = s
		}
		return s, err
	}
	var m *manifests.Stage
	mismatch := ""
	err = r.poll(ctx, "ingest (worker 0)", func() (bool, error) {
		if err := r.shared().Fetch(ctx, sr.rel, nil); err != nil { // workers_remote.go
			return false, err
		}
		m, _ = atomicfs.ReadJSON[manifests.Stage](sr.out, manifestFile)
		if m == nil {
			return false, nil
		}
		if m.ConfigHash != fp {
			mismatch = "worker 0's ingest manifest was made under other source or output settings"
			return false, r.otherRun(m, mismatch)
		}
		for i, s := range r.p.Sources {
			prev := r.sourceShards(m, s.Name)
			if len(prev) == 0 {
				return false, nil
			}
			h, err := sum(i, prev)
			if err != nil {
				return false, fmt.Errorf("source %q: %w", s.Name, err)
			}
			if !allMatch(prev, sourceKey(sfps[i], r.p.Resolve(s.Path), h), r, false) {
				mismatch = fmt.Sprintf("worker 0's ingest of source %q was made from other bytes than this worker's copy of %s (SHA-256 %.12s…)", s.Name, s.Path, h)
				return false, r.otherRun(m, mismatch)
			}
		}
		return true, nil
	}, func() string { return sameRunHint(mismatch) })
	if err != nil {
		return res, err
	}
	var partial *PartialError
	for _, s := range r.p.Sources {
		prev := r.sourceShards(m, s.Name)
		res.report.Skipped += len(prev)
		partial = r.checkSource(s, prev, partial)
	}
	for _, s := range m.Shards {
		for _, o := range s.Outputs {
			if strings.HasPrefix(path.Base(o.Path), "tools-") {
				r.libRefs = append(r.libRefs, o)
			}
		}
	}
	res.report.Counts = m.Totals
	res.outputs = outputsOf(m, shardNames(m))
	return res, partialErr(partial)
}

// waitStage is the barrier after a stage: it waits until every shard of
// inputs has an entry made from that input under the stage's settings and
// plan (its key) with its outputs in place, and returns the stage's outputs
// for all shards. The entry is usually in the part of the worker that owns
// the shard; one in manifest.json or in a part of another worker count
// (an earlier run) with the same key is the same work, done before.
func (r *Runner) waitStage(ctx context.Context, sr stageRun, res stageResult, inputs []shardInput) ([]shardInput, error) {
	merged := &manifests.Stage{}
	mismatch := ""
	err := r.poll(ctx, "stage "+sr.name, func() (bool, error) {
		if err := r.fetchStage(ctx, sr.rel); err != nil { // workers_remote.go
			return false, err
		}
		parts, err := r.workerParts(sr.rel, 0)
		if err != nil {
			return false, err
		}
		all := make([]*manifests.Stage, 0, len(parts)+1)
		for _, p := range parts {
			all = append(all, p.m)
		}
		if mj, _ := atomicfs.ReadJSON[manifests.Stage](sr.out, manifestFile); mj != nil {
			all = append(all, mj)
		}
		merged.Shards = merged.Shards[:0]
		for _, in := range inputs {
			key := shardKey(res.fp, "plan="+res.plan, in.ref)
			found := false
			for _, m := range all {
				if s, ok := m.Shard(in.name); ok && (s.Key == key || retryLater(m, s, res, in)) && r.outputsExist(s, false) {
					merged.Shards = append(merged.Shards, s)
					found = true
					break
				}
			}
			if !found {
				return false, r.otherWorkers(sr, parts, res.fp, &mismatch)
			}
		}
		return true, nil
	}, func() string { return sameRunHint(mismatch) })
	return outputsOf(merged, inputs), err
}

// otherWorkers looks, while this worker waits at stage sr's barrier, for
// the parts of workers that do not run what this one runs: another worker
// count, or other settings (fp, the stage's fingerprint). A part that
// finished the stage after this worker started is of a worker running now
// beside this one, which no wait will change: that is a config error.
// Older parts may be an earlier run's, to be made again: found says what
// they are, for the deadline's message.
func (r *Runner) otherWorkers(sr stageRun, parts []workerPart, fp string, found *string) error {
	w := r.o.Worker
	*found = ""
	for _, p := range parts {
		var what string
		switch {
		case p.count != w.Count:
			what = fmt.Sprintf("worker %d/%d's part of stage %s is of another worker count", p.index, p.count, sr.name)
		case p.index != w.Index && p.m.ConfigHash != fp:
			what = fmt.Sprintf("worker %d/%d's part of stage %s was made under other settings", p.index, p.count, sr.name)
		default:
			continue
		}
		if *found == "" {
			*found = what
		}
		if err := r.otherRun(p.m, what); err != nil {
			*found = what
			return err
		}
	}
	return nil
}

// otherRun is the config error for m, a manifest made under settings other
// than this worker's (what says how), when it was finished after this
// worker started: by a worker running beside this one.
func (r *Runner) otherRun(m *manifests.Stage, what string) error {
	if m.Finished.IsZero() || m.Finished.Before(r.begun) {
		return nil
	}
	return &ConfigError{Problems: []string{fmt.Sprintf("worker %s: %s, finished at %s, while this worker ran: %s",
		r.o.Worker, what, m.Finished.UTC().Format(time.TimeOnly), sameRunAdvice)}}
}

// sameRunAdvice is what workers that disagree are told.
const sameRunAdvice = "every worker of a run must be given the same pipeline.yaml, -set flags, dumps, worker count and augment version"

// sameRunHint is the deadline's message when the last look found parts
// made under other settings (found, "" for none).
func sameRunHint(found string) string {
	if found == "" {
		return ""
	}
	return found + " (an earlier run's, not made again, or a worker given other settings): " + sameRunAdvice
}

// retryLater reports whether s is a shard made from in under the stage's
// settings and plan but recorded without its key, because some of its
// records were rejected for a teacher failure that may pass: later stages
// read it, as in one process, and a rerun (or the merge) makes it again.
func retryLater(m *manifests.Stage, s manifests.Shard, res stageResult, in shardInput) bool {
	return s.Key == "" && m.ConfigHash == res.fp && m.Plan == res.plan &&
		len(s.Inputs) == 1 && s.Inputs[0].Path == in.ref.Path && s.Inputs[0].SHA256 == in.ref.SHA256
}

// lockWorker takes this worker's own lock file in the output directory, so
// that two processes cannot run as the same worker on one host. Workers
// take no shared lock: flock is unreliable on some shared file systems
// (NFS, Lustre), and workers never write the same file.
//
// A worker also holds a shared lock of the run's lock file, which a plain
// run or a merge takes exclusively: on one host (or a file system where
// flock works across hosts) neither starts while the other runs.
func (r *Runner) lockWorker(root *atomicfs.Root) (io.Closer, error) {
	w := r.o.Worker
	f, err := root.OpenFile(stateDir+"/"+workerLockName(w.Index, w.Count), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	held, err := flock.Exclusive(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if held {
		f.Close()
		return nil, &BusyError{Dir: root.Path("."), Holder: "worker " + w.String()}
	}
	run, err := root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		f.Close()
		return nil, err
	}
	if held, err = flock.Shared(run); err != nil || held {
		b, _ := io.ReadAll(io.LimitReader(run, 200))
		f.Close()
		run.Close()
		if err != nil {
			return nil, err
		}
		return nil, &BusyError{Dir: root.Path("."), Holder: strings.TrimSpace(string(b))}
	}
	return closers{f, run}, nil
}

// workerLockPrefix starts the name of a worker's lock file in stateDir.
const workerLockPrefix = "lock-worker-"

// workerLockName is the name of worker i of n's lock file in stateDir.
func workerLockName(i, n int) string { return fmt.Sprintf("%s%d-of-%d", workerLockPrefix, i, n) }

// parseWorkerLock reads a workerLockName back.
func parseWorkerLock(name string) (i, n int, ok bool) {
	rest, ok := strings.CutPrefix(name, workerLockPrefix)
	a, b, ok2 := strings.Cut(rest, "-of-")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	return i, n, ok && ok2 && err1 == nil && err2 == nil
}

// runningWorkers names the workers that hold their lock files in root
// ("worker 0/2, worker 1/2"; "" for none), for a plain run or merge that
// found the run's lock shared. Each is tested with a shared lock, released
// at once.
func runningWorkers(root *atomicfs.Root) string {
	ents, err := root.ReadDir(stateDir)
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range ents {
		i, n, ok := parseWorkerLock(e.Name())
		if !ok {
			continue
		}
		f, err := root.OpenFile(stateDir+"/"+e.Name(), os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		if held, err := flock.Shared(f); err == nil && held {
			names = append(names, fmt.Sprintf("worker %d/%d", i, n))
		}
		f.Close()
	}
	return strings.Join(names, ", ")
}

// closers closes each of its files.
type closers []*os.File

func (c closers) Close() error {
	var errs []error
	for _, f := range c {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
