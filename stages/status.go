package stages

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
)

// A StageStatus is how far one stage of an output directory is, over every
// worker that shares the run (augment status).
type StageStatus struct {
	Dir    string // "02-meta_tool"
	Shards int    // shards of the run (ingest's), 0 when ingest has not finished
	Done   int    // shards with an entry in the stage manifest or a worker's part
	Counts manifests.Counts
	// Merged says manifest.json is the stage's newest record (a run as one
	// process, or augment merge after the workers).
	Merged bool
	// Running says that record is of a run still under way: its manifest
	// is not finished and a process holds the run's lock (or that cannot
	// be told: report.RunLive).
	Running bool
	// Partial says the stage is not done and no run is making it
	// (report.StatusPartial): its record is not finished and no process
	// holds the run's lock (the run stopped), or it does not cover every
	// shard of the stage's input as that stage has it now, or its input
	// stage is not done, or it holds shards to make again (Retry).
	Partial bool
	// Waiting: its record has BatchOpen batch jobs open and no process
	// holds the run's lock (exit 4).
	Waiting   bool
	BatchOpen int
	// LiveUnknown: Running, but whether a process holds the run's lock
	// could not be told (report.RunLive).
	LiveUnknown bool
	// Retry names the shards the record lists without their key, and
	// RetryRejected counts their records rejected for a teacher failure
	// that may pass, by reason: the next run asks those again
	// (report.Stage.Retry).
	Retry         []string
	RetryRejected map[string]int64
	// Pending: the run's config.yaml lists the stage, which has not
	// started (no directory yet, or one without a manifest or a worker's
	// part); Skipped: it is marked skip.
	Pending, Skipped bool

	// Workers are the parts of the newest part's worker count and
	// settings, by index, then the parts not merged yet of another count
	// or other settings (Other): an earlier run's, or a worker that does
	// not run what the others run.
	Workers []WorkerStatus
	// Started, on ingest before its manifest is written, names the
	// workers that started on the directory ("1/4"), from their lock
	// files: they wait for worker 0's ingest. The files outlive the
	// workers, so a name does not say that one still runs.
	Started []string

	merged *manifests.Stage // manifest.json when Merged
}

// A WorkerStatus is one worker's part of a stage.
type WorkerStatus struct {
	Index, Count int
	Done         int    // shards in its part
	Finished     bool   // its part is final (the worker finished the stage)
	Other        string // "", "other count" or "other settings" (see StageStatus.Workers)
	// Stopped: its part is not final and no process holds the worker's
	// lock file (.augment/lock-worker-I-of-N, tested as report.RunLive
	// tests the run's): the worker was killed or failed; running it again
	// resumes its part. Without a lock file to test it is not told.
	Stopped bool
}

// Status reads the stage manifests and the workers' parts of the output
// directory dir. It writes nothing and holds no lock (it tests the run's
// and the workers' locks for an instant, as report.RunLive does), so it
// can watch a running run; each file it reads is whole (they are replaced
// atomically).
func Status(dir string) ([]StageStatus, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	stageDirs := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() && stageDirName.MatchString(e.Name()) {
			stageDirs[e.Name()] = true
		}
	}
	wents, _ := os.ReadDir(filepath.Join(dir, filepath.FromSlash(workersDir)))
	for _, e := range wents {
		if e.IsDir() && stageDirName.MatchString(e.Name()) {
			stageDirs[e.Name()] = true
		}
	}
	marked := false // workers that wait for worker 0's ingest have made no stage directory
	if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(markerFile))); err == nil && fi.Mode().IsRegular() {
		marked, stageDirs["00-ingest"] = true, true
	}
	if len(stageDirs) == 0 {
		return nil, fmt.Errorf("%s %w: no stage directories (not an augment output dir, or nothing ran yet)", dir, manifests.ErrNoRun)
	}
	live, known := report.RunLive(dir)
	total := 0
	if ing, err := manifests.Read[manifests.Stage](filepath.Join(dir, "00-ingest", manifestFile)); err == nil && ing != nil {
		total = len(ing.Shards)
	}
	var out []StageStatus
	for _, rel := range slices.Sorted(func(yield func(string) bool) {
		for d := range stageDirs {
			if !yield(d) {
				return
			}
		}
	}) {
		st, err := stageStatus(dir, rel)
		if err != nil {
			return nil, err
		}
		if rel == "00-ingest" && st.Pending && marked {
			st.Started = startedWorkers(dir)
		}
		switch {
		case !known && st.Running && !(st.Merged && st.BatchOpen > 0):
			st.LiveUnknown = true
		case live && st.Running:
		case st.Merged && st.BatchOpen > 0: // the run stopped to wait for its batches, or a live `augment batch poll` waits
			st.Running, st.Waiting = false, true
		case live:
		case st.Running: // the run stopped
			st.Running, st.Partial = false, true
		}
		st.Shards = total
		out = append(out, st)
	}
	// The stages the run has not reached, from its effective config.
	if b, err := os.ReadFile(filepath.Join(dir, "config.yaml")); err == nil {
		var cfg struct {
			Stages []struct {
				Name string `yaml:"name"`
				Skip bool   `yaml:"skip"`
			} `yaml:"stages"`
		}
		if yaml.Unmarshal(b, &cfg) == nil {
			for i, sp := range cfg.Stages {
				rel := fmt.Sprintf("%02d-%s", i+1, sp.Name)
				if !stageDirs[rel] && stageDirName.MatchString(rel) {
					out = append(out, StageStatus{Dir: rel, Shards: total, Pending: !sp.Skip, Skipped: sp.Skip})
				}
			}
			slices.SortFunc(out, func(a, b StageStatus) int { return strings.Compare(a.Dir, b.Dir) })
		}
	}
	markPartial(out)
	return out, nil
}

// markPartial sets Partial on each merged, finished stage of sts (in run
// order) that is not done by report's measure: its manifest does not cover
// its input stage's shards, or that stage is not done. An export passes
// its input on to the next stage; a skipped one passes it on too.
func markPartial(sts []StageStatus) {
	var in *manifests.Stage // the input stage's merged manifest
	inDone := false
	for i := range sts {
		st := &sts[i]
		if st.Skipped {
			continue
		}
		ended := st.Merged && !st.Running && !st.Waiting
		done := ended && !st.Partial && len(st.Retry) == 0
		if st.Dir != "00-ingest" && done {
			covered, total := report.Covers(st.merged, in)
			done = inDone && covered == total
		}
		if ended {
			st.Partial = !done
		}
		if st.merged == nil || st.merged.Type != "export" {
			in, inDone = st.merged, done
		}
	}
}

// startedWorkers names the workers whose lock files are in the output
// directory dir ("1/4"), by count and index; it takes none of the locks.
func startedWorkers(dir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, filepath.FromSlash(stateDir)))
	type iN struct{ i, n int }
	var ws []iN
	for _, e := range ents {
		if i, n, ok := parseWorkerLock(e.Name()); ok {
			ws = append(ws, iN{i, n})
		}
	}
	slices.SortFunc(ws, func(a, b iN) int { return cmp.Or(a.n-b.n, a.i-b.i) })
	var names []string
	for _, w := range ws {
		names = append(names, fmt.Sprintf("%d/%d", w.i, w.n))
	}
	return names
}

func stageStatus(dir, rel string) (StageStatus, error) {
	st := StageStatus{Dir: rel}
	mj, err := manifests.Read[manifests.Stage](filepath.Join(dir, rel, manifestFile))
	if err != nil {
		return st, err
	}
	var parts []workerPart
	wdir := filepath.Join(dir, filepath.FromSlash(workersDir), rel)
	ents, err := os.ReadDir(wdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return st, err
	}
	for _, e := range ents {
		sub := workerFileName.FindStringSubmatch(e.Name())
		if sub == nil {
			continue
		}
		m, err := manifests.Read[manifests.Stage](filepath.Join(wdir, e.Name()))
		if err != nil || m == nil {
			continue
		}
		i, _ := strconv.Atoi(sub[1])
		n, _ := strconv.Atoi(sub[2])
		parts = append(parts, workerPart{index: i, count: n, m: m})
	}
	newest := -1
	for i, p := range parts {
		if newest < 0 || p.m.Started.After(parts[newest].m.Started) {
			newest = i
		}
	}
	// A directory without a manifest or a part: a stage that made no
	// record of its start yet, as stats and report say.
	st.Pending = mj == nil && len(parts) == 0
	var recs []*manifests.Stage
	st.Merged = mj != nil && (newest < 0 || !mj.Started.Before(parts[newest].m.Started))
	if st.Merged {
		st.Running = mj.Finished.IsZero()
		st.merged = mj
		recs = append(recs, mj)
		st.Retry, st.RetryRejected = report.Retry(mj)
		var ls llm.Stats
		if len(mj.LLM) > 0 && json.Unmarshal(mj.LLM, &ls) == nil && ls.Batch != nil {
			st.BatchOpen = report.OpenBatchJobs(dir, mj.Name, ls.Batch.Open)
		}
	} else if newest >= 0 {
		n, fp := parts[newest].count, parts[newest].m.ConfigHash
		var others []WorkerStatus
		for _, p := range parts {
			ws := WorkerStatus{Index: p.index, Count: p.count, Done: len(p.m.Shards), Finished: !p.m.Finished.IsZero()}
			if !ws.Finished {
				held, known, err := flock.Held(filepath.Join(dir, stateDir, workerLockName(p.index, p.count)))
				ws.Stopped = known && err == nil && !held
			}
			switch {
			case p.count != n:
				ws.Other = "other count"
			case p.m.ConfigHash != fp:
				ws.Other = "other settings"
			default:
				st.Workers = append(st.Workers, ws)
				recs = append(recs, p.m)
				continue
			}
			if mj == nil || p.m.Started.After(mj.Started) { // not merged since
				others = append(others, ws)
			}
		}
		// A merge (or a plain run, which merges them) adopts the parts
		// with the manifest's shards of the same settings: they are done
		// too (a worker run on a finished run's directory found them).
		if mj != nil && mj.ConfigHash == fp {
			recs = append(recs, mj)
		}
		byWorker := func(a, b WorkerStatus) int { return cmp.Or(a.Count-b.Count, a.Index-b.Index) }
		slices.SortFunc(st.Workers, byWorker)
		slices.SortFunc(others, byWorker)
		st.Workers = append(st.Workers, others...)
	}
	seen := map[string]bool{}
	for _, m := range recs {
		for _, s := range m.Shards {
			if !seen[s.Name] {
				seen[s.Name] = true
				st.Done++
				st.Counts.Add(s.Counts)
			}
		}
	}
	return st, nil
}

// PrintStatus writes a Status as a table: per stage, the shards done over
// all workers, the records so far, and each worker's part ("w1 4 done":
// worker 1 finished the stage with 4 shards; "w2 3…": still running).
func PrintStatus(w io.Writer, sts []StageStatus) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tshards done\tin\tout\trejected\tfiltered\t state\t")
	for _, s := range sts {
		total := "?"
		if s.Shards > 0 {
			total = strconv.Itoa(s.Shards)
		}
		state := " done"
		switch {
		case s.Pending:
			state = " pending"
		case s.Skipped:
			state = " skipped"
		case s.Running:
			state = " running"
		case s.Waiting:
			state = " waiting"
		case s.Partial:
			state = " partial"
		case !s.Merged:
			var ws []string
			for _, p := range s.Workers {
				mark := "…"
				switch {
				case p.Finished:
					mark = " done"
				case p.Stopped:
					mark = " stopped"
				}
				if p.Other != "" {
					mark += " (" + p.Other + ")"
				}
				ws = append(ws, fmt.Sprintf("w%d/%d %d%s", p.Index, p.Count, p.Done, mark))
			}
			state = " " + strings.Join(ws, ", ")
			if len(ws) == 0 {
				state = " -"
			}
		}
		fmt.Fprintf(tw, "%s\t%d/%s\t%d\t%d\t%d\t%d\t%s\t\n", s.Dir, s.Done, total, s.Counts.In, s.Counts.Out,
			manifests.Sum(s.Counts.Rejected), manifests.Sum(s.Counts.Filtered), state)
	}
	tw.Flush()
	for _, s := range sts {
		if len(s.Retry) > 0 {
			fmt.Fprintln(w, report.RetryNote(s.Dir, s.Retry, s.RetryRejected, nil))
		}
		if s.Waiting {
			fmt.Fprintln(w, report.WaitingNote(s.Dir, s.BatchOpen, nil))
		}
		if s.Running && s.LiveUnknown {
			fmt.Fprintln(w, report.UnknownLiveNote(s.Dir))
		}
		if !s.Merged && !s.Running && !s.Waiting && !s.Partial && !s.Pending && !s.Skipped {
			for _, p := range s.Workers {
				if p.Stopped && p.Other == "" {
					fmt.Fprintf(w, "%s: worker %d/%d stopped part way (no process holds its lock file %s): run it again (augment run --worker %d/%d with the same pipeline) to resume its part\n",
						s.Dir, p.Index, p.Count, stateDir+"/"+workerLockName(p.Index, p.Count), p.Index, p.Count)
				}
			}
		}
		if len(s.Started) > 0 {
			fmt.Fprintf(w, "workers started on this dir (their lock files; running or not): %s; no ingest is recorded yet: worker 0 ingests, the others wait for it\n",
				strings.Join(s.Started, ", "))
		}
	}
}
