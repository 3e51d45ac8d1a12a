// Package report reads a run directory — its effective config.yaml, the
// stage manifests, shards and rejects — and presents it: a Hugging Face
// dataset card for each export directory (card.go), a self-contained HTML
// report (html.go), terminal tables (stats.go) and one record's journey
// through the stages (show.go).
//
// It needs nothing but the run directory, so it works on a finished run, on
// a run in progress (manifests are rewritten as shards finish) and on a
// copy of the outputs without the pipeline file.
package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/verify"
)

// A Run is a run directory as read from disk.
type Run struct {
	Dir string
	// Live: a process may be running the stages without a finish time
	// (it holds the run's lock, or that cannot be told: LiveKnown is
	// false; see Load).
	Live, LiveKnown bool
	// Config is the effective config.yaml; ConfigHash its sha256 (hex).
	// Both are zero when the directory has no config.yaml.
	Config     Config
	ConfigHash string
	Stages     []Stage // in run order, ingest first

	collected map[string]*Dist         // see Run.Collect
	merged    map[string]*partialDists // an export's partials by stage dir (partial.go)
	tokens    verify.TokenMemo         // the token counts of every Collect
}

// Config is the part of the effective config.yaml the report uses.
type Config struct {
	Seed    uint64         `yaml:"seed"`
	Sources []SourceConfig `yaml:"sources"`
	Teacher struct {
		Provider    string  `yaml:"provider"`
		Model       string  `yaml:"model"`
		PriceInput  float64 `yaml:"price_input_per_mtok"`
		PriceOutput float64 `yaml:"price_output_per_mtok"`
		Budget      float64 `yaml:"budget"`
	} `yaml:"teacher"`
	Embedder struct {
		Provider string `yaml:"provider"`
		Model    string `yaml:"model"`
	} `yaml:"embedder"`
	Stages []map[string]any `yaml:"stages"`

	// Output.Dir is the run's output as pipeline.yaml gave it: a local
	// path, or s3://, gs://, azblob://bucket/prefix (see Run.Name).
	Output struct {
		Dir string `yaml:"dir"`
	} `yaml:"output"`
}

// SourceConfig is one source of config.yaml.
type SourceConfig struct {
	Name     string  `yaml:"name"`
	Path     string  `yaml:"path"`
	Format   string  `yaml:"format"`
	License  string  `yaml:"license"`
	Revision string  `yaml:"revision"`
	Limit    int64   `yaml:"limit"`
	Fraction float64 `yaml:"fraction"`

	// With license: other, the license's name and a link to its text.
	LicenseName string `yaml:"license_name"`
	LicenseLink string `yaml:"license_link"`
}

// Stage states.
const (
	StatusDone = "done" // the manifest says the stage finished, and it did all of its input for good
	// StatusRunning: a manifest without a finish time while a process
	// holds the run's lock (LockFile), or when that cannot be told (no
	// lock file: a copy from object storage): running now, or stopped
	// part way.
	StatusRunning = "running"
	// StatusPartial: not done, and no run is making it now (a rerun
	// resumes it): a manifest without a finish time and no process
	// holding the run's lock (the run stopped: exit 1, 3, 130, or killed);
	// or a finished one that does not cover all of the stage's input as
	// its input stage has it now, or whose input stage is not done; or one
	// with shards recorded without their key, some of whose records were
	// rejected for a teacher failure that may pass (Stage.Retry): the
	// next run asks those again.
	StatusPartial = "partial"
	// StatusWaiting: a manifest that records batch jobs still open
	// (teacher.mode batch, exit 4), and no process holds the run's lock:
	// a rerun once they are done takes their answers in.
	StatusWaiting = "waiting"
	StatusPending = "pending" // no manifest yet
	StatusSkipped = "skipped" // skip: true in pipeline.yaml
)

// LockFile is the run's lock file in the output directory: a plain run
// and a merge hold it exclusively, workers shared, for as long as they
// run; the kernel releases it when the process ends, killed or not.
const LockFile = ".augment/lock"

// RunLive reports whether a process holds the lock of the run directory
// dir (a run, merge or worker is under way); known is false when that
// cannot be told: no lock file (a copy of a run from object storage, or
// one that never ran here) or no file locks on this system.
func RunLive(dir string) (live, known bool) {
	live, known, err := flock.Held(filepath.Join(dir, filepath.FromSlash(LockFile)))
	return live, known && err == nil
}

// A Stage is one stage directory of a run.
type Stage struct {
	Dir      string // e.g. "03-noise"
	Name     string
	Type     string
	Status   string
	Manifest *manifests.Stage // nil when pending or skipped
	LLM      *llm.Stats       // the teacher accounting in the manifest, if any
	// Unmerged counts the workers' parts of the stage that no merge (or
	// plain run) adopted yet: newer than its manifest.json, or with none.
	// Its figures here leave them out until `augment merge`.
	Unmerged int
	// Retry names the shards the manifest records without their key:
	// some of their records were rejected for a teacher failure that may
	// pass (timeout, 429, 5xx, …), RetryRejected counts those by reason.
	// The next run makes those shards again and asks those records
	// again, the other answers from the cache; the stage is partial.
	Retry         []string
	RetryRejected map[string]int64
}

// Retry lists the shards the stage manifest m records without their key
// (Stage.Retry) and counts their records rejected for a teacher failure
// that may pass, by reason.
func Retry(m *manifests.Stage) (shards []string, rejected map[string]int64) {
	for _, sh := range m.Shards {
		if sh.Key != "" {
			continue
		}
		shards = append(shards, sh.Name)
		for reason, n := range sh.Rejected {
			if llm.Transient(reason) {
				if rejected == nil {
					rejected = map[string]int64{}
				}
				rejected[reason] += n
			}
		}
	}
	return shards, rejected
}

// OpenBatchJobs is the number of the batch jobs of the stage named stage
// (its pipeline name, the manifest's Name) still open: recorded, as its
// manifest says, but no more than the run directory dir's batch state
// records open. A manifest says how many were open when it was written,
// and a later run or `augment batch poll` that ingests them without
// writing it again (a run stopped by an error line of a job, say) leaves
// it stale. Where the state cannot be read, recorded stands; a run
// directory without a batch directory has none open.
func OpenBatchJobs(dir, stage string, recorded int) int {
	if recorded == 0 {
		return 0
	}
	jobs, err := llm.ReadBatchJobs(filepath.Join(dir, "batch"))
	if err != nil {
		return recorded
	}
	n := 0
	for _, j := range jobs {
		if j.Stage == stage && j.Open() {
			n++
		}
	}
	return min(recorded, n)
}

// BatchOpen is the number of the stage's batch jobs still open as its
// manifest records them, confirmed against the batch directory by Load
// (OpenBatchJobs; 0 without teacher.mode batch).
func (s *Stage) BatchOpen() int {
	if s.LLM == nil || s.LLM.Batch == nil {
		return 0
	}
	return s.LLM.Batch.Open
}

// workersDir holds the workers' parts of the stage manifests, one
// directory per stage (stages.workersDir).
const workersDir = ".augment/workers"

var workerPart = regexp.MustCompile(`^[0-9]+-of-[0-9]+\.json$`)

// unmergedParts counts the workers' parts of stage directory stage that
// are newer than m (all of them when m is nil). An unreadable part counts.
func unmergedParts(dir, stage string, m *manifests.Stage) int {
	ents, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(workersDir), stage))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || !workerPart.MatchString(e.Name()) {
			continue
		}
		p, err := manifests.Read[manifests.Stage](filepath.Join(dir, filepath.FromSlash(workersDir), stage, e.Name()))
		if err != nil || p == nil || m == nil || p.Started.After(m.Started) {
			n++
		}
	}
	return n
}

// Sink reports whether the stage writes its own format instead of Parquet
// shards (an export).
func (s *Stage) Sink() bool { return s.Type == "export" }

// Totals returns the stage's counts so far (zero without a manifest).
func (s *Stage) Totals() manifests.Counts {
	if s.Manifest == nil {
		return manifests.Counts{}
	}
	return s.Manifest.Totals
}

var stageDir = regexp.MustCompile(`^([0-9]{2})-(.+)$`)

// Load reads the run directory dir. Stages come from config.yaml when it is
// there (so stages not started yet are listed as pending), else from the
// numbered directories holding a manifest. A stage without a finish time
// is running while a process holds the run's lock (RunLive), else partial
// (or waiting for its batch jobs).
func Load(dir string) (*Run, error) {
	live, known := RunLive(dir)
	return load(dir, live, known)
}

// LoadEnded is Load for the run that holds the directory's lock itself and
// is ending: no stage of it runs any more.
func LoadEnded(dir string) (*Run, error) { return load(dir, false, true) }

// load is Load; live says a process holds the run's lock, known that this
// could be told.
func load(dir string, live, known bool) (*Run, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	run := &Run{Dir: dir, Live: live || !known, LiveKnown: known}
	b, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	switch {
	case err == nil:
		if err := yaml.Unmarshal(b, &run.Config); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.yaml"), err)
		}
		h := sha256.Sum256(b)
		run.ConfigHash = hex.EncodeToString(h[:])
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if run.ConfigHash != "" {
		run.Stages = append(run.Stages, Stage{Dir: "00-ingest", Name: "ingest", Type: "ingest"})
		for i, s := range run.Config.Stages {
			name, _ := s["name"].(string)
			st := Stage{Dir: fmt.Sprintf("%02d-%s", i+1, name), Name: name, Type: stageType(s)}
			if skip, _ := s["skip"].(bool); skip {
				st.Status = StatusSkipped
			}
			run.Stages = append(run.Stages, st)
		}
	} else {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			m := stageDir.FindStringSubmatch(e.Name())
			if !e.IsDir() || m == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "manifest.json")); err == nil {
				run.Stages = append(run.Stages, Stage{Dir: e.Name(), Name: m[2]})
			}
		}
		if len(run.Stages) == 0 {
			return nil, fmt.Errorf("%s %w: no config.yaml and no stage manifest", dir, manifests.ErrNoRun)
		}
	}
	for i := range run.Stages {
		st := &run.Stages[i]
		if st.Status == StatusSkipped {
			continue
		}
		m, err := manifests.Read[manifests.Stage](filepath.Join(dir, st.Dir, "manifest.json"))
		if err != nil {
			return nil, err
		}
		st.Manifest = m
		st.Unmerged = unmergedParts(dir, st.Dir, m)
		if m == nil {
			st.Status = StatusPending
			continue
		}
		if st.Type == "" {
			st.Type = m.Type
		}
		if len(m.LLM) > 0 {
			var s llm.Stats
			if err := json.Unmarshal(m.LLM, &s); err == nil {
				st.LLM = &s
				if b := s.Batch; b != nil {
					b.Open = OpenBatchJobs(dir, m.Name, b.Open)
				}
			}
		}
		st.Retry, st.RetryRejected = Retry(m)
		switch {
		case m.Finished.IsZero() && run.Live:
			st.Status = StatusRunning
		case st.BatchOpen() > 0: // stopped to wait, or a live `augment batch poll` waits
			st.Status = StatusWaiting
		case m.Finished.IsZero(), len(st.Retry) > 0:
			st.Status = StatusPartial
		default:
			st.Status = StatusDone
		}
	}
	for i := 1; i < len(run.Stages); i++ {
		st := &run.Stages[i]
		if st.Status != StatusDone {
			continue
		}
		in := run.inputOf(i)
		if in == nil {
			continue
		}
		if covered, total := Covers(st.Manifest, in.Manifest); in.Status != StatusDone || covered < total {
			st.Status = StatusPartial
		}
	}
	return run, nil
}

// inputOf is the stage whose records stage i reads: the last stage before
// it that is not an export nor skipped, with a manifest or not (nil for
// ingest).
func (r *Run) inputOf(i int) *Stage {
	for j := i - 1; j >= 0; j-- {
		if s := &r.Stages[j]; !s.Sink() && s.Status != StatusSkipped {
			return s
		}
	}
	return nil
}

// Covers counts the shards of in, the manifest of a stage's input stage
// (nil: none yet), that the stage's manifest m lists as made from in's
// Parquet output as in lists it now: covered of total. A stage finished by
// a run that stopped before all of its shards, or whose input was rewritten
// since, covers fewer than total.
func Covers(m, in *manifests.Stage) (covered, total int) {
	if in == nil {
		return 0, 1
	}
	for _, ish := range in.Shards {
		for _, o := range ish.Outputs {
			if !strings.HasSuffix(o.Path, ".parquet") {
				continue
			}
			total++
			if m == nil {
				continue
			}
			if sh, ok := m.Shard(ish.Name); ok && slices.ContainsFunc(sh.Inputs, func(ref manifests.FileRef) bool {
				return ref.Path == o.Path && ref.SHA256 == o.SHA256
			}) {
				covered++
			}
		}
	}
	return covered, total
}

// stageType is the key of a stage entry whose value is the stage type's
// settings, the entry's one mapping (name, skip and keep are scalars).
func stageType(s map[string]any) string {
	for k, v := range s {
		if _, ok := v.(map[string]any); ok {
			return k
		}
	}
	return ""
}

// Stage returns the stage whose directory, name or number is key
// ("03-noise", "noise" or "3").
func (r *Run) Stage(key string) (*Stage, error) {
	for i := range r.Stages {
		s := &r.Stages[i]
		if s.Dir == key || s.Name == key || strings.TrimLeft(s.Dir[:2], "0") == strings.TrimLeft(key, "0") && key != "" {
			return s, nil
		}
	}
	var names []string
	for _, s := range r.Stages {
		names = append(names, s.Dir)
	}
	return nil, fmt.Errorf("no stage %q in %s (stages: %s)", key, r.Dir, strings.Join(names, ", "))
}

// Parquet lists the stage's Parquet shards of records (relative to the run
// dir) in manifest order, those not kept too (NotKept: no file). An export
// has none: its Parquet files (format: parquet) are its samples.
func (s *Stage) Parquet() []manifests.FileRef {
	if s.Sink() {
		return nil
	}
	return s.outputs(".parquet", "part-")
}

// NotKept reports whether the stage kept none of its records on disk, or
// not all of them (keep: false in pipeline.yaml).
func (s *Stage) NotKept() bool {
	return slices.ContainsFunc(s.Parquet(), func(ref manifests.FileRef) bool { return ref.NotKept })
}

// ErrNotKept is the error of reading records a stage did not keep.
var ErrNotKept = errors.New("not kept (keep: false in pipeline.yaml): its records are not on disk")

func notKeptError(ref manifests.FileRef) error {
	return fmt.Errorf("%s: %w", ref.Path, ErrNotKept)
}

// Rejects lists the stage's rejects files in manifest order.
func (s *Stage) Rejects() []manifests.FileRef {
	return s.outputs(".jsonl", "rejects-")
}

func (s *Stage) outputs(ext, prefix string) []manifests.FileRef {
	if s.Manifest == nil {
		return nil
	}
	var out []manifests.FileRef
	for _, sh := range s.Manifest.Shards {
		for _, o := range sh.Outputs {
			base := filepath.Base(o.Path)
			if strings.HasSuffix(base, ext) && strings.HasPrefix(base, prefix) {
				out = append(out, o)
			}
		}
	}
	return out
}

// RecordStage returns the last stage before index i (exclusive) that wrote
// Parquet records: the input of stage i. Skipped stages and sinks pass
// their input through.
func (r *Run) RecordStage(i int) *Stage {
	for j := min(i, len(r.Stages)) - 1; j >= 0; j-- {
		s := &r.Stages[j]
		if s.Sink() || s.Status == StatusSkipped || s.Manifest == nil {
			continue
		}
		return s
	}
	return nil
}

// ConfigHashUpTo is the sha256 (hex) of the stage fingerprints of stages
// 0..i, in order: each covers its stage's effective settings, prompt
// templates, the teacher settings that change answers, the seed, the
// stage's version and (for ingest) the sources, but not endpoints, prices or
// the output directory. Equal hashes and equal dumps give equal data.
func (r *Run) ConfigHashUpTo(i int) string {
	h := sha256.New()
	for _, s := range r.Stages[:i+1] {
		if s.Manifest != nil {
			fmt.Fprintf(h, "%s %s\n", s.Dir, s.Manifest.ConfigHash)
		} else {
			fmt.Fprintf(h, "%s %s\n", s.Dir, s.Status)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Final is the last stage with Parquet records: what the exports read.
func (r *Run) Final() *Stage { return r.RecordStage(len(r.Stages)) }

// writeFile writes data to name (slash-separated, relative to the run
// directory) atomically.
func (r *Run) writeFile(name string, data []byte) error {
	root, err := atomicfs.OpenRoot(r.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = root.WriteFile(name, data)
	return err
}

// Teacher sums the teacher accounting of every stage.
func (r *Run) Teacher() (total llm.Stats, ok bool) {
	for _, s := range r.Stages {
		if s.LLM == nil {
			continue
		}
		ok = true
		total.Provider = s.LLM.Provider
		total.Requests += s.LLM.Requests
		total.CacheHits += s.LLM.CacheHits
		total.Sent += s.LLM.Sent
		total.Retries += s.LLM.Retries
		total.Failed += s.LLM.Failed
		total.TokensIn += s.LLM.TokensIn
		total.TokensOut += s.LLM.TokensOut
		total.Cost += s.LLM.Cost
		total.NoUsage += s.LLM.NoUsage
		total.Pending += s.LLM.Pending
		for k, v := range s.LLM.Errors {
			if total.Errors == nil {
				total.Errors = map[string]int64{}
			}
			total.Errors[k] += v
		}
	}
	return total, ok
}

// Models lists the teacher models that answered in any stage, sorted; the
// configured model when no stage recorded one.
func (r *Run) Models() []string {
	seen := map[string]bool{}
	for _, s := range r.Stages {
		if s.LLM != nil {
			for m := range s.LLM.Models {
				seen[m] = true
			}
		}
	}
	if len(seen) == 0 && r.Config.Teacher.Model != "" {
		seen[r.Config.Teacher.Model] = true
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
}
