package llm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/augmentdata/augment/atomicfs"
)

// BatchStateFile is the name of the batch state inside the batch directory.
const BatchStateFile = "state.json"

// Job states, in the order a job passes them. Every job ends "done": its
// answers are in the request cache and the requests it did not answer are
// listed with a failure class in its failed file.
const (
	JobPrepared   = "prepared"   // input and metadata files sealed; nothing sent
	JobUploaded   = "uploaded"   // openai: input file uploaded (Remote.InputFileID)
	JobSubmitted  = "submitted"  // openai: batch created (Remote.BatchID); files: waiting for the output file
	JobDownloaded = "downloaded" // output (and error) file on disk; answers not yet in the cache
	JobDone       = "done"       // answers in the cache
)

// A BatchJob is one batch file and what became of it. Its files live in
// the batch directory, named after the job: <ID>.input.jsonl (the requests,
// OpenAI batch format), <ID>.meta.jsonl (per request what the cache needs:
// the stage, slot and canonical request), <ID>.output.jsonl and
// <ID>.errors.jsonl (the answers as the provider wrote them) and
// <ID>.failed.jsonl (the requests that got no answer, with why).
type BatchJob struct {
	ID       string `json:"id"`    // "<stage>-<sequence>", unique in the batch directory
	Stage    string `json:"stage"` // the stage (pipeline name) whose requests it holds
	Epoch    int    `json:"epoch"` // the stage's epoch: rounds count again after the stage completes
	Round    int    `json:"round"` // 1 for a stage's first batches, +1 for each further asking step
	Provider string `json:"provider"`
	State    string `json:"state"`
	Requests int    `json:"requests"`
	Bytes    int64  `json:"bytes"`
	// EstTokens estimates the input tokens (bytes/4); EstCost the job's cost
	// at batch prices with every answer at its token limit (0 without one).
	EstTokens int64   `json:"est_tokens"`
	EstCost   float64 `json:"est_cost,omitempty"`
	// Remote is the provider's view (openai only).
	Remote *RemoteBatch `json:"remote,omitempty"`
	// Outcome, once done: answers stored, requests failed (an error line or
	// a non-200 status) and requests missing from the output (expired or
	// failed batches, an output cut short); unreadable output lines.
	Answered  int    `json:"answered"`
	Failed    int    `json:"failed"`
	Missing   int    `json:"missing"`
	Malformed int    `json:"malformed,omitempty"`
	Note      string `json:"note,omitempty"` // the provider's own message for a failed batch
	// Cost of the answers stored, at batch prices.
	Cost    float64   `json:"cost,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// RemoteBatch is an OpenAI batch as last seen.
type RemoteBatch struct {
	InputFileID  string `json:"input_file_id,omitempty"`
	BatchID      string `json:"batch_id,omitempty"`
	Status       string `json:"status,omitempty"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`
	Total        int    `json:"total,omitempty"`
	Completed    int    `json:"completed,omitempty"`
	FailedCount  int    `json:"failed,omitempty"`
}

// Open reports whether the job still waits for something.
func (j *BatchJob) Open() bool { return j.State != JobDone }

// Files of a job, relative to the batch directory.
func (j *BatchJob) InputFile() string  { return j.ID + ".input.jsonl" }
func (j *BatchJob) MetaFile() string   { return j.ID + ".meta.jsonl" }
func (j *BatchJob) OutputFile() string { return j.ID + ".output.jsonl" }
func (j *BatchJob) ErrorFile() string  { return j.ID + ".errors.jsonl" }
func (j *BatchJob) FailedFile() string { return j.ID + ".failed.jsonl" }

// batchState is the state file.
type batchState struct {
	Version int `json:"version"`
	// Token is random, made with the state: it names this batch directory
	// in uploaded file names, so a resumed upload recognises its own file.
	Token  string                 `json:"token"`
	Seq    int                    `json:"seq"` // last job sequence number used
	Stages map[string]*stageEpoch `json:"stages"`
	Jobs   []*BatchJob            `json:"jobs"`
}

const batchStateVersion = 1

// stageEpoch counts a stage's rounds. When a stage's pass completes with
// nothing left to ask, its epoch closes; the next batches of the stage
// (after a prompt change, say) start a new epoch at round 1.
type stageEpoch struct {
	Epoch  int  `json:"epoch"`
	Rounds int  `json:"rounds"` // rounds submitted in this epoch
	Closed bool `json:"closed"`
}

// batchStore is the batch directory: the state in memory, saved
// atomically (temp file, fsync, rename) after every change. Every file of
// the directory is created, renamed, removed and read through root.
type batchStore struct {
	root *atomicfs.Root
	mu   sync.Mutex
	st   batchState
}

// openBatchStore opens (creating) the batch directory root, and removes
// what an interrupted run left behind: the spool of an unfinished stage
// pass and job files that no recorded job names (written just before a
// kill, before the state recorded them).
func openBatchStore(root *atomicfs.Root) (*batchStore, error) {
	if err := root.MkdirAll("."); err != nil {
		return nil, fmt.Errorf("batch directory: %w", err)
	}
	st, err := readBatchState(root)
	if err != nil {
		return nil, err
	}
	s := &batchStore{root: root, st: st}
	if st.Token == "" {
		var b [8]byte
		rand.Read(b[:])
		s.st.Token = hex.EncodeToString(b[:])
		if err := s.save(); err != nil {
			return nil, err
		}
	}
	if err := root.RemoveAll(spoolDir); err != nil {
		return nil, fmt.Errorf("batch directory: %w", err)
	}
	if err := root.Sweep("."); err != nil {
		return nil, fmt.Errorf("batch directory: %w", err)
	}
	known := map[string]bool{}
	for _, j := range st.Jobs {
		known[j.ID] = true
	}
	ents, err := root.ReadDir(".")
	if err != nil {
		return nil, fmt.Errorf("batch directory: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || name == BatchStateFile || !strings.HasSuffix(name, ".jsonl") {
			continue
		}
		id, _, _ := strings.Cut(name, ".")
		if !known[id] && jobIDSeq(id) > st.Seq {
			if err := root.Remove(name); err != nil {
				return nil, fmt.Errorf("batch directory: %w", err)
			}
		}
	}
	return s, nil
}

// jobIDSeq reads the sequence number at the end of a job ID; 0 if none.
func jobIDSeq(id string) int {
	i := strings.LastIndexByte(id, '-')
	n := 0
	for _, c := range id[i+1:] {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// ReadBatchJobs returns the jobs recorded in the batch directory dir, in
// the order they were made; none if there is no directory or no state yet.
// It only reads.
func ReadBatchJobs(dir string) ([]BatchJob, error) {
	root, err := atomicfs.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("batch directory: %w", err)
	}
	defer root.Close()
	st, err := readBatchState(root)
	if err != nil {
		return nil, err
	}
	out := make([]BatchJob, len(st.Jobs))
	for i, j := range st.Jobs {
		out[i] = *j
	}
	return out, nil
}

func readBatchState(root *atomicfs.Root) (batchState, error) {
	st := batchState{Version: batchStateVersion, Stages: map[string]*stageEpoch{}}
	b, err := root.ReadFile(BatchStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("batch state: %w", err)
	}
	path := root.Path(BatchStateFile)
	if err := json.Unmarshal(b, &st); err != nil {
		return st, &BatchStateError{Problems: []string{fmt.Sprintf(
			"batch state %s is damaged (%v), so augment cannot tell which batch jobs are open, and a rerun fails the same way: restore the file from a backup, or move the batch directory %s out of the output directory and run again — answers already taken in stay in the request cache, the other requests go into new batches (batches still open at the provider are then paid for again: cancel them there first)",
			path, err, root.Path("."))}}
	}
	if st.Version != batchStateVersion {
		return st, &BatchStateError{Problems: []string{fmt.Sprintf(
			"batch state %s has version %d, this augment reads version %d: run the augment that wrote it until no batch job is open (augment batch status), or move the batch directory out of the output directory",
			path, st.Version, batchStateVersion)}}
	}
	if st.Stages == nil {
		st.Stages = map[string]*stageEpoch{}
	}
	return st, nil
}

// save writes the state; the caller holds s.mu.
func (s *batchStore) save() error {
	b, err := json.MarshalIndent(&s.st, "", "  ")
	if err != nil {
		return err
	}
	if _, err := s.root.WriteFile(BatchStateFile, append(b, '\n')); err != nil {
		return fmt.Errorf("batch state: %w", err)
	}
	return nil
}

// update changes the state under the lock and saves it.
func (s *batchStore) update(f func(st *batchState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
	return s.save()
}

// stage returns the epoch record of a stage, creating it.
func (st *batchState) stage(name string) *stageEpoch {
	e := st.Stages[name]
	if e == nil {
		e = &stageEpoch{Epoch: 1}
		st.Stages[name] = e
	}
	return e
}

// jobs returns copies of the jobs for which keep is true.
func (s *batchStore) jobs(keep func(*BatchJob) bool) []BatchJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []BatchJob
	for _, j := range s.st.Jobs {
		if keep == nil || keep(j) {
			out = append(out, *j)
		}
	}
	return out
}

// setJob replaces the recorded job with j's ID by j and saves.
func (s *batchStore) setJob(j BatchJob) error {
	return s.update(func(st *batchState) {
		j.Updated = time.Now().UTC().Truncate(time.Second)
		for i, old := range st.Jobs {
			if old.ID == j.ID {
				st.Jobs[i] = &j
				return
			}
		}
		st.Jobs = append(st.Jobs, &j)
	})
}

// jobStem turns a stage name into the part of a job ID before the
// sequence number: letters, digits, '_' and '.' are kept, anything else
// becomes '_'.
func jobStem(stage string) string {
	b := []byte(stage)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "stage"
	}
	return string(b)
}

// BatchSummary aggregates a stage's jobs of its latest epoch for the
// stage manifest.
type BatchSummary struct {
	Rounds   int `json:"rounds"`
	Jobs     int `json:"jobs"`
	Open     int `json:"open"`
	Requests int `json:"requests"`
	Answered int `json:"answered"`
	Failed   int `json:"failed"`
	Missing  int `json:"missing"`
	// Malformed counts output lines that matched no request (not a batch
	// line, a foreign or repeated custom_id); the first line of a request
	// counts.
	Malformed int     `json:"malformed,omitempty"`
	Cost      float64 `json:"cost,omitempty"`
	MaxRounds int     `json:"max_rounds"`
}

// summary returns the BatchSummary of stage, nil if it has no jobs.
func (s *batchStore) summary(stage string, maxRounds int) *BatchSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	epoch := 0
	for _, j := range s.st.Jobs {
		if j.Stage == stage {
			epoch = max(epoch, j.Epoch)
		}
	}
	if epoch == 0 {
		return nil
	}
	sum := &BatchSummary{MaxRounds: maxRounds}
	for _, j := range s.st.Jobs {
		if j.Stage != stage || j.Epoch != epoch {
			continue
		}
		sum.Rounds = max(sum.Rounds, j.Round)
		sum.Jobs++
		if j.Open() {
			sum.Open++
		}
		sum.Requests += j.Requests
		sum.Answered += j.Answered
		sum.Failed += j.Failed
		sum.Missing += j.Missing
		sum.Malformed += j.Malformed
		sum.Cost += j.Cost
	}
	return sum
}

// openJobs returns the open jobs of stage ("" for every stage).
func (s *batchStore) openJobs(stage string) []BatchJob {
	return s.jobs(func(j *BatchJob) bool { return j.Open() && (stage == "" || j.Stage == stage) })
}

func jobIDs(jobs []BatchJob) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}
