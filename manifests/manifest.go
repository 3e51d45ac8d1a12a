// Package manifests records what each stage of a run did to which inputs:
// counts, hashes, the effective config and timings. The runner reads them to
// skip work that is already done, and people read them to audit a run.
//
// Every write is atomic (atomicfs): a manifest on disk always describes
// outputs that exist in full.
package manifests

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/augmentdata/augment/atomicfs"
)

// ErrNoRun is wrapped by the error of a reader of a run directory (augment
// status, stats, show, report) that was given a directory holding no run:
// missing, or without a stage manifest. It is the user's mistake, not a
// failure of the run.
var ErrNoRun = errors.New("holds no run")

// A Stage manifest describes one stage directory of a run.
type Stage struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Version int    `json:"version"` // the stage implementation's version; a behaviour change bumps it
	Tool    string `json:"tool"`    // augment version that wrote it
	// ConfigHash covers the effective stage config (defaults applied), its
	// prompt templates, the teacher settings it depends on, its version, the
	// seed and, for a stage that reads it, the tool library's hash. Config
	// is that effective config, for people.
	ConfigHash string          `json:"config_hash"`
	Config     json.RawMessage `json:"config"`
	Plan       string          `json:"plan,omitempty"` // digest of a whole-input plan (sample quotas)
	// PlanSource, in a worker's part of a stage manifest, says whether
	// that worker "computed" the stage's plan or "loaded" it.
	PlanSource string `json:"plan_source,omitempty"`

	Shards []Shard `json:"shards"`
	Totals Counts  `json:"totals"`
	// LLM holds the teacher accounting of the stage in the run that last
	// wrote this manifest (requests, cache hits, tokens, errors by class,
	// latency percentiles, cost); a resumed run counts only its own traffic.
	LLM json.RawMessage `json:"llm,omitempty"`
	// LLMUnrecorded names the workers ("worker 1/4") whose teacher
	// traffic in this stage LLM holds only in part: each was stopped
	// (killed) before its part of the manifest recorded all it sent, so
	// the stage's real traffic is higher by an unknown amount.
	LLMUnrecorded []string `json:"llm_unrecorded,omitempty"`
	// Notes are things a user should know, e.g. what an export style
	// dropped: those of the shards listed and FinishNotes (ShardNotes).
	Notes []string `json:"notes,omitempty"`
	// FinishNotes are the notes a sink's Finish gave in the run that
	// wrote the manifest: its view of the whole stage (sample counts, …).
	FinishNotes []string `json:"finish_notes,omitempty"`
	// Files are the stage's files besides its shards' outputs (an export's
	// dataset_info.json), relative to the run's output directory.
	Files []string `json:"files,omitempty"`
	// Superseded are files earlier runs of the stage wrote that this run
	// may no longer list (the outputs of shards it redoes); when the stage
	// finishes, those its shards and Files do not list are deleted. It is
	// kept while the stage runs, so a killed run leaves nothing unnamed.
	Superseded []string `json:"superseded,omitempty"`

	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Seconds  float64   `json:"seconds"`
	// WorkStarted and WorkSeconds, in a merge's manifest (Started and
	// Seconds are the merge's own), are the time the workers and the
	// merge spent on the stage: the earliest start of the workers' parts
	// it adopted and its own, and all their seconds summed (process time,
	// not the span). Zero in other manifests: see Work.
	WorkStarted time.Time `json:"work_started,omitzero"`
	WorkSeconds float64   `json:"work_seconds,omitempty"`
}

// Work returns when the work of the stage started and the seconds it
// took: WorkStarted and WorkSeconds in a merge's manifest, else Started
// and Seconds.
func (m *Stage) Work() (time.Time, float64) {
	if !m.WorkStarted.IsZero() {
		return m.WorkStarted, m.WorkSeconds
	}
	return m.Started, m.Seconds
}

// A Shard is one unit of resume: some input files turned into some outputs.
type Shard struct {
	Name    string    `json:"name"`
	Key     string    `json:"key"` // hash of input hashes, config hash and plan: the shard is done when this matches
	Inputs  []FileRef `json:"inputs"`
	Outputs []FileRef `json:"outputs"`
	Counts
	// Unread is the part of a source's dump ingest could not read (on the
	// source's first shard); nil when the whole dump was read.
	Unread *Unread `json:"unread,omitempty"`
	// Notes are what the stage said of this shard's output (Stage.Notes).
	Notes   []string `json:"notes,omitempty"`
	Seconds float64  `json:"seconds"`
}

// Unread describes the end of a dump that could not be read: from byte
// Offset on, Bytes bytes, about Rows rows (estimated from the average row
// size before; 0 when no row came before), and why.
type Unread struct {
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Rows   int64  `json:"rows_estimated"`
	Reason string `json:"reason"`
}

// A FileRef names a file relative to the run's output directory.
type FileRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	// Source is set on an ingest input read from object storage or the
	// Hub: exactly what was read, "hf://datasets/OWNER/NAME/PATH@<commit>"
	// or "s3://bucket/key#etag=<etag>". A later run that finds the same
	// pin reuses SHA256 instead of reading the dump again.
	Source string `json:"source,omitempty"`
	// NotKept marks the Parquet shard of a stage with keep: false: no file
	// is at Path, its records went on in memory, and SHA256 stands for
	// their content (a hash of the shard's key and its rejects' hash: the
	// same input, settings and answers give the same records).
	NotKept bool `json:"not_kept,omitempty"`
}

// Counts conserve records: In + Added = Out + Rejected + Filtered.
type Counts struct {
	In       int64            `json:"in"`
	Out      int64            `json:"out"`
	Added    int64            `json:"added"`              // extra records a stage made (negatives, variants)
	Rejected map[string]int64 `json:"rejected,omitempty"` // by reason; kept in the rejects files
	Filtered map[string]int64 `json:"filtered,omitempty"` // by reason; dropped on purpose (sample quotas)
	// Counters are a stage's own counts beyond records, e.g. verify's
	// problems by check ("check.args_schema") and by kind ("kind.param_missing").
	Counters map[string]int64 `json:"counters,omitempty"`
}

// Sum returns the total of a by-reason map.
func Sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// Balanced reports an error when c does not conserve records.
func (c Counts) Balanced() error {
	if c.In+c.Added != c.Out+Sum(c.Rejected)+Sum(c.Filtered) {
		return fmt.Errorf("records not conserved: in %d + added %d != out %d + rejected %d + filtered %d",
			c.In, c.Added, c.Out, Sum(c.Rejected), Sum(c.Filtered))
	}
	return nil
}

// Add accumulates o into c.
func (c *Counts) Add(o Counts) {
	c.In += o.In
	c.Out += o.Out
	c.Added += o.Added
	c.Rejected = addMap(c.Rejected, o.Rejected)
	c.Filtered = addMap(c.Filtered, o.Filtered)
	c.Counters = addMap(c.Counters, o.Counters)
}

func addMap(dst, src map[string]int64) map[string]int64 {
	for k, v := range src {
		if dst == nil {
			dst = map[string]int64{}
		}
		dst[k] += v
	}
	return dst
}

// Reasons returns the keys of a by-reason map, sorted.
func Reasons(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FormatCounts writes a by-reason map as "reason=n" pairs in reason order,
// space-separated, as the run summary, notes and report show them.
func FormatCounts(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, k := range Reasons(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// Shard returns the shard called name, if recorded.
func (s *Stage) Shard(name string) (Shard, bool) {
	for _, sh := range s.Shards {
		if sh.Name == name {
			return sh, true
		}
	}
	return Shard{}, false
}

// ShardNotes returns the notes of s's shards and extra, sorted, each once.
func (s *Stage) ShardNotes(extra []string) []string {
	notes := slices.Clone(extra)
	for _, sh := range s.Shards {
		notes = append(notes, sh.Notes...)
	}
	if len(notes) == 0 {
		return nil
	}
	slices.Sort(notes)
	return slices.Compact(notes)
}

// Read loads a manifest. A missing file gives (nil, nil).
func Read[T any](path string) (*T, error) { return atomicfs.ReadJSONFile[T](path) }
