package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/llm"
)

// Stats are a run's tables: `augment stats` prints them or writes them as
// JSON.
type Stats struct {
	Dir          string       `json:"dir"`
	ConfigSHA256 string       `json:"config_sha256,omitempty"`
	Seed         uint64       `json:"seed"`
	Stages       []StageStats `json:"stages"`
	// LiveUnknown: whether a process holds the run's lock could not be
	// told (Run.LiveKnown): a running stage may have stopped part way.
	LiveUnknown bool `json:"live_unknown,omitempty"`
	// Records are the distributions of the last stage with records (Final),
	// the input of the exports.
	Final   string     `json:"final,omitempty"`
	Records *Dist      `json:"records,omitempty"`
	Teacher *llm.Stats `json:"teacher,omitempty"` // summed over the stages
}

// StageStats is one stage's line of Stats.
type StageStats struct {
	Dir    string `json:"dir"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Status string `json:"status"`
	Shards int    `json:"shards"`
	manifests.Counts
	// Started and Seconds are when the stage's work started and the
	// seconds it took (manifests.Stage.Work): after a merge, the earliest
	// worker's start and the workers' and the merge's seconds summed.
	Started time.Time  `json:"started,omitzero"`
	Seconds float64    `json:"seconds"`
	LLM     *llm.Stats `json:"llm,omitempty"`
	// NotKept: the stage kept no Parquet shards, or not all (keep: false).
	NotKept bool `json:"not_kept,omitempty"`
	// Notes are what the stage said of its output (manifests.Stage.Notes):
	// what an export style dropped, how to train on an export.
	Notes []string `json:"notes,omitempty"`
	// LLMUnrecorded: workers whose traffic LLM counts only in part
	// (manifests.Stage.LLMUnrecorded).
	LLMUnrecorded []string `json:"llm_unrecorded,omitempty"`
	// Unmerged counts the workers' parts not merged yet (Stage.Unmerged):
	// the figures above leave them out.
	Unmerged int `json:"unmerged_worker_parts,omitempty"`
	// RetryShards, RetryRejected: the shards recorded without their key
	// and their records rejected for a teacher failure that may pass, by
	// reason (Stage.Retry); RetryIDs the first retryShown of those
	// records. The next run asks them again.
	RetryShards   []string         `json:"retry_shards,omitempty"`
	RetryRejected map[string]int64 `json:"retry_rejected,omitempty"`
	RetryIDs      []string         `json:"retry_ids,omitempty"`
	// BatchOpen counts the stage's batch jobs still open (Stage.BatchOpen).
	BatchOpen int `json:"batch_jobs_open,omitempty"`
}

// Stats reads the counts of every stage and the distributions of the final
// stage's records.
func (r *Run) Stats() (*Stats, error) {
	s := &Stats{Dir: r.Dir, ConfigSHA256: r.ConfigHash, Seed: r.Config.Seed, LiveUnknown: !r.LiveKnown}
	for _, st := range r.Stages {
		ss := StageStats{Dir: st.Dir, Name: st.Name, Type: st.Type, Status: st.Status, Counts: st.Totals(), LLM: st.LLM, NotKept: st.NotKept(), Unmerged: st.Unmerged,
			RetryShards: st.Retry, RetryRejected: st.RetryRejected, BatchOpen: st.BatchOpen()}
		if st.Manifest != nil {
			ss.Started, ss.Seconds = st.Manifest.Work() // a merge's: the workers' too
			ss.Shards, ss.Notes = len(st.Manifest.Shards), st.Manifest.Notes
			ss.LLMUnrecorded = st.Manifest.LLMUnrecorded
		}
		if len(st.Retry) > 0 {
			ids, err := r.retryIDs(&st, retryShown)
			if err != nil {
				return nil, err
			}
			ss.RetryIDs = ids
		}
		s.Stages = append(s.Stages, ss)
	}
	if fs := r.Final(); fs != nil {
		d, err := r.FinalDist(fs)
		if err != nil {
			return nil, err
		}
		s.Final, s.Records = fs.Dir, d
	}
	if t, ok := r.Teacher(); ok {
		s.Teacher = &t
	}
	return s, nil
}

// WriteJSON writes the stats as indented JSON.
func (s *Stats) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// barWidth is the width of the longest bar of a terminal distribution.
const barWidth = 30

// Print writes the stats as terminal tables and bars.
func (s *Stats) Print(w io.Writer) {
	var statuses, partial []string
	for _, st := range s.Stages {
		statuses = append(statuses, st.Status)
		if st.Status == StatusPartial {
			partial = append(partial, st.Dir)
		}
	}
	fmt.Fprintf(w, "run %s: %s", s.Dir, doneSummary(statuses))
	if s.ConfigSHA256 != "" {
		fmt.Fprintf(w, "; config sha256 %s, seed %d", s.ConfigSHA256[:12], s.Seed)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tstatus\tshards\tin\tout\trejected\tfiltered\tadded\tseconds\t")
	for _, st := range s.Stages {
		if st.Status == StatusPending || st.Status == StatusSkipped {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\t\n", st.Dir, st.Status)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t\n", st.Dir, st.Status, st.Shards, st.In, st.Out,
			manifests.Sum(st.Rejected), manifests.Sum(st.Filtered), st.Added, st.Seconds)
	}
	tw.Flush()
	if len(partial) > 0 {
		fmt.Fprintln(w, partialNote(partial))
	}
	for _, st := range s.Stages {
		if len(st.RetryShards) > 0 {
			fmt.Fprintln(w, "  "+RetryNote(st.Dir, st.RetryShards, st.RetryRejected, st.RetryIDs))
		}
		if st.Status == StatusWaiting {
			fmt.Fprintln(w, WaitingNote(st.Dir, st.BatchOpen, st.LLM))
		}
		if st.Status == StatusRunning && s.LiveUnknown {
			fmt.Fprintln(w, UnknownLiveNote(st.Dir))
		}
	}
	var unmerged []string
	for _, st := range s.Stages {
		if st.Unmerged > 0 {
			unmerged = append(unmerged, st.Dir)
		}
	}
	if len(unmerged) > 0 {
		fmt.Fprintln(w, unmergedNote(unmerged))
	}
	var dropped []string
	for _, st := range s.Stages {
		if st.NotKept {
			dropped = append(dropped, st.Dir)
		}
	}
	if len(dropped) > 0 {
		fmt.Fprintf(w, "records not kept on disk (keep: false): %s\n", strings.Join(dropped, ", "))
	}

	var reasons [][]string
	for _, st := range s.Stages {
		for _, k := range Counts(st.Rejected).Keys() {
			reasons = append(reasons, []string{st.Dir, "rejected", k, fmt.Sprint(st.Rejected[k])})
		}
		for _, k := range Counts(st.Filtered).Keys() {
			reasons = append(reasons, []string{st.Dir, "filtered", k, fmt.Sprint(st.Filtered[k])})
		}
	}
	if len(reasons) > 0 {
		fmt.Fprintln(w, "\nrejected and filtered")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, r := range reasons {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3])
		}
		tw.Flush()
	}

	if slices.ContainsFunc(s.Stages, func(st StageStats) bool { return len(st.Notes) > 0 }) {
		fmt.Fprintln(w, "\nnotes")
		for _, st := range s.Stages {
			for _, n := range st.Notes {
				fmt.Fprintf(w, "  %s  %s\n", st.Dir, n)
			}
		}
	}

	if d := s.Records; d != nil {
		fmt.Fprintf(w, "\nrecords of %s: %d", s.Final, d.Records)
		if i := slices.IndexFunc(s.Stages, func(st StageStats) bool { return st.Dir == s.Final }); i >= 0 && s.Stages[i].Status != StatusDone {
			fmt.Fprintf(w, " (of the shards it did: it is %s)", s.Stages[i].Status)
		}
		fmt.Fprintln(w)
		for _, mix := range []struct {
			name string
			c    Counts
		}{{"source", d.Source}, {"category", d.Category}, {"world", d.World}, {"difficulty", d.Difficulty}, {"lang", d.Lang},
			{"noise_similarity", d.NoiseSimilarity}, {"verify fail tags", d.VerifyFail}} {
			if len(mix.c) == 0 {
				continue
			}
			fmt.Fprintf(w, "  %s\n", mix.name)
			keys := mix.c.Keys()
			if mix.name == "noise_similarity" {
				slices.Sort(keys)
			}
			printBars(w, keys, func(k string) int64 { return mix.c[k] }, d.Records)
		}
		for _, h := range []struct {
			name string
			h    IntHist
		}{{"tools per record", d.Tools}, {"calls per calling turn", d.CallsPerTurn}, {"turns per record", d.Turns}} {
			fmt.Fprintf(w, "  %s (mean %.2f)\n", h.name, h.h.Mean())
			var keys []string
			var total int64
			for _, b := range intBars(h.h) {
				keys = append(keys, b.Label)
				total += int64(b.Value)
			}
			vals := map[string]int64{}
			for _, b := range intBars(h.h) {
				vals[b.Label] = int64(b.Value)
			}
			printBars(w, keys, func(k string) int64 { return vals[k] }, total)
		}
		t := d.Tokens
		fmt.Fprintf(w, "  tokens: min %d  p50 %d  p90 %d  p99 %d  max %d  total %d\n", t.Min, t.P50, t.P90, t.P99, t.Max, t.Sum)
	}

	var llmRows []StageStats
	for _, st := range s.Stages {
		if st.LLM != nil {
			llmRows = append(llmRows, st)
		}
	}
	if len(llmRows) > 0 {
		fmt.Fprintf(w, "\nteacher (%s)\n", s.Teacher.Provider)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stage\trequests\tcache hits\tin batch\tsent\tretries\tfailed\ttokens in\ttokens out\tp50 ms\tp99 ms\tcost\t")
		for _, st := range llmRows {
			l := st.LLM
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.4f\t\n", st.Dir, l.Requests, l.CacheHits, l.Pending, l.Sent, l.Retries, l.Failed,
				l.TokensIn, l.TokensOut, num(l.Latency.P50), num(l.Latency.P99), l.Cost)
		}
		t := s.Teacher
		fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\t\t%.4f\t\n", t.Requests, t.CacheHits, t.Pending, t.Sent, t.Retries, t.Failed, t.TokensIn, t.TokensOut, t.Cost)
		tw.Flush()
		fmt.Fprintln(w, "  "+TrafficTerms)
		for _, st := range llmRows {
			if st.LLM.NoUsage > 0 {
				fmt.Fprintf(w, "  %s: cost unknown for %d answer(s): the server reported no usage; tokens and cost above count only the others\n", st.Dir, st.LLM.NoUsage)
			}
			if len(st.LLMUnrecorded) > 0 {
				fmt.Fprintf(w, "  %s: %s\n", st.Dir, UnrecordedNote(st.LLMUnrecorded))
			}
		}
	}
}

// printBars writes one line per key: the key, its count, its share of
// total and a bar.
func printBars(w io.Writer, keys []string, count func(string) int64, total int64) {
	var maxN int64
	width := 16
	for _, k := range keys {
		maxN = max(maxN, count(k))
		width = max(width, len([]rune(k)))
	}
	for _, k := range keys {
		n := count(k)
		bar := 0
		if maxN > 0 {
			bar = int((n*barWidth + maxN - 1) / maxN)
		}
		fmt.Fprintf(w, "    %-*s %7d %7s  %s\n", width, k, n, pct(n, total), strings.Repeat("█", bar))
	}
}

// doneSummary says how many of the stages with these statuses are done,
// skipped stages left out of the count and named after it: "5 of 6
// stages done", "6 of 6 stages done, 1 skipped".
func doneSummary(statuses []string) string {
	done, skipped := 0, 0
	for _, st := range statuses {
		switch st {
		case StatusDone:
			done++
		case StatusSkipped:
			skipped++
		}
	}
	s := fmt.Sprintf("%d of %d stages done", done, len(statuses)-skipped)
	if skipped > 0 {
		s += fmt.Sprintf(", %d skipped", skipped)
	}
	return s
}

// partialNote names the partial stages dirs and says what partial means.
func partialNote(dirs []string) string {
	return "partial (a run stopped before they did every shard of their input, or their input changed since, or records wait to be asked again; rerun to resume): " +
		strings.Join(dirs, ", ")
}

// TrafficTerms says what the teacher traffic columns count, as the
// manifests' "llm" sections do.
const TrafficTerms = "requests: asked of the teacher, cache hits and batch included; cache hits: answered without sending; " +
	"in batch: written to batch files; sent: HTTP attempts, retries included"

// retryShown is how many of the records a stage asks again RetryNote names.
const retryShown = 3

// RetryNote says which records of the stage dir the next run asks the
// teacher again: those rejected for a teacher failure that may pass, by
// reason, in the shards recorded without their key; ids are the first of
// them.
func RetryNote(dir string, shards []string, rejected map[string]int64, ids []string) string {
	n := manifests.Sum(rejected)
	s := fmt.Sprintf("%s: %d record(s) rejected for a teacher failure that may pass (%s) in shard(s) %s: the next run asks them again",
		dir, n, manifests.FormatCounts(rejected), strings.Join(shards, ", "))
	if len(ids) > 0 {
		s += " (" + strings.Join(ids, ", ")
		if int64(len(ids)) < n {
			s += ", …"
		}
		s += ")"
	}
	return s
}

// UnknownLiveNote says of the stage dir, called running, that whether a
// process is making it could not be told (no lock file to test, or no
// lease that could be read on object storage).
func UnknownLiveNote(dir string) string {
	return dir + ": no finish time, and whether a process is making it cannot be told here (no run lock to test, or the output's leases could not be read): running now, or stopped part way (rerun to resume)"
}

// WaitingNote says what the stage dir waits for: its open batch jobs.
func WaitingNote(dir string, open int, l *llm.Stats) string {
	reqs := ""
	if l != nil && l.Batch != nil {
		reqs = fmt.Sprintf(" (%d requests)", l.Batch.Requests)
	}
	return fmt.Sprintf("%s: waiting for %d open batch job(s)%s; `augment batch status` shows them; run the same command again when they are done", dir, open, reqs)
}

// retryIDs returns the IDs of the first n records the stage rejected for
// a teacher failure that may pass.
func (r *Run) retryIDs(st *Stage, n int) ([]string, error) {
	var ids []string
	err := ScanRejects(r.Dir, st, func(rl RejectLine) error {
		if llm.Transient(rl.Reason) {
			ids = append(ids, rl.ID)
			if len(ids) == n {
				return errStop
			}
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return ids, err
}

// unmergedNote names the stages whose workers' parts are not merged yet
// and says what to do.
func unmergedNote(dirs []string) string {
	return fmt.Sprintf("%d stage(s) have workers' parts not merged yet (%s): their shards, counts and teacher traffic are shown once merged: run augment merge",
		len(dirs), strings.Join(dirs, ", "))
}

// UnrecordedNote says what a stage's teacher accounting leaves out: the
// traffic of workers (manifests.Stage.LLMUnrecorded) after they last
// recorded it.
func UnrecordedNote(workers []string) string {
	return fmt.Sprintf("these figures are lower than the real traffic by an unknown amount: %s stopped (killed) before recording all it sent",
		strings.Join(workers, ", "))
}
