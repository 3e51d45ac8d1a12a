package llm

import (
	"errors"
	"fmt"
	"strings"
)

// Batch mode. With teacher.mode "batch" a request that misses the cache
// is not sent: it is written to a batch file of its stage and Complete
// returns a *PendingError. The runner keeps the shards holding such records
// uncommitted; after the stage's pass the teacher seals the files and
// submits them (BatchFinish), and the run stops with a *WaitError. A later
// run (or `augment batch poll`) brings the answers into the request cache
// (BatchStart, PollBatches), and the stage's next pass finds them there.
// A stage that asks again after an answer (a re-ask of a rejected answer,
// Tool-DC's Retry after its Try) needs one more such round per step; the
// rounds per stage are bounded by batch.max_rounds.
//
// Providers: "openai" uploads each file to the Files API and creates a
// batch (the Batch API), then polls it and downloads its output and error
// files; "files" only writes the files, in the OpenAI batch format, for a
// runner the user starts (`vllm run-batch -i IN -o OUT`), and reads the
// output file it writes next to the input.
//
// Everything is kept in the batch directory (<output>/batch): the state
// file (batchStateFile, rewritten atomically at every change of a job) and
// per job its input, a sidecar of cache metadata, and the downloaded
// output and error files. See batch_store.go.

// Modes accepted in Config.Mode.
const (
	ModeOnline = "online"
	ModeBatch  = "batch"
)

// Batch providers accepted in BatchConfig.Provider.
const (
	BatchOpenAI = "openai" // the OpenAI Batch API (Files + Batches endpoints)
	BatchFiles  = "files"  // files for `vllm run-batch` or any compatible runner
)

// BatchConfig is the `teacher.batch:` block.
type BatchConfig struct {
	// Provider is "openai" (default) or "files".
	Provider string `yaml:"provider" json:"provider"`
	// MaxRequests and MaxBytes bound one batch file (defaults 50,000
	// requests and 200,000,000 bytes, the OpenAI Batch API's limits, which
	// provider openai may not pass); larger request sets are split over
	// several files.
	MaxRequests int   `yaml:"max_requests" json:"max_requests"`
	MaxBytes    int64 `yaml:"max_bytes" json:"max_bytes"`
	// MaxRounds bounds the batch rounds one stage may need before it
	// completes (default 8); more stops the run.
	MaxRounds int `yaml:"max_rounds" json:"max_rounds"`
	// MaxAttempts is how many batches a request may fail in (expired,
	// server errors, missing from the output) before its record is
	// rejected (default 3). They count per epoch of the stage (see
	// StageClient.enqueue): a rerun after the reject asks again. A request
	// the server refuses as invalid is rejected at once, and one whose
	// batch the provider failed or someone cancelled for the rest of the
	// epoch (batchHeld).
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// CompletionWindow is sent with each OpenAI batch (default "24h").
	CompletionWindow string `yaml:"completion_window" json:"completion_window"`
	// PriceFactor is the batch price as a share of the online prices
	// (default 0.5); costs and the budget use it.
	PriceFactor float64 `yaml:"price_factor" json:"price_factor"`
	// PollInterval is how often `augment batch poll -wait` asks (default 1m).
	PollInterval Duration `yaml:"poll_interval" json:"poll_interval"`
}

const (
	defaultBatchMaxRequests = 50_000
	defaultBatchMaxBytes    = 200_000_000
	defaultBatchMaxRounds   = 8
	defaultBatchMaxAttempts = 3
	defaultBatchWindow      = "24h"
	defaultBatchPriceFactor = 0.5
	defaultBatchPoll        = Duration(60e9)
)

func (c *BatchConfig) defaults() {
	if c.Provider == "" {
		c.Provider = BatchOpenAI
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = defaultBatchMaxRequests
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultBatchMaxBytes
	}
	if c.MaxRounds == 0 {
		c.MaxRounds = defaultBatchMaxRounds
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultBatchMaxAttempts
	}
	if c.CompletionWindow == "" {
		c.CompletionWindow = defaultBatchWindow
	}
	if c.PriceFactor == 0 {
		c.PriceFactor = defaultBatchPriceFactor
	}
	setDuration(&c.PollInterval, defaultBatchPoll.D())
}

func (c *BatchConfig) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("teacher.batch.%s: "+format, append([]any{field}, args...)...))
	}
	switch c.Provider {
	case BatchOpenAI, BatchFiles:
	default:
		bad("provider", "unknown batch provider %q (want %q or %q)", c.Provider, BatchOpenAI, BatchFiles)
	}
	if c.MaxRequests < 1 {
		bad("max_requests", "must be at least 1, got %d", c.MaxRequests)
	}
	if c.MaxBytes < 1<<10 {
		bad("max_bytes", "must be at least 1024, got %d", c.MaxBytes)
	}
	// The Batch API fails a larger file at validation, every time.
	if c.Provider == BatchOpenAI && c.MaxRequests > defaultBatchMaxRequests {
		bad("max_requests", "%d is over the OpenAI Batch API's limit of %d requests per file (provider openai)", c.MaxRequests, defaultBatchMaxRequests)
	}
	if c.Provider == BatchOpenAI && c.MaxBytes > defaultBatchMaxBytes {
		bad("max_bytes", "%d is over the OpenAI Batch API's limit of %d bytes per file (provider openai)", c.MaxBytes, defaultBatchMaxBytes)
	}
	if c.MaxRounds < 1 {
		bad("max_rounds", "must be at least 1, got %d", c.MaxRounds)
	}
	if c.MaxAttempts < 1 {
		bad("max_attempts", "must be at least 1, got %d", c.MaxAttempts)
	}
	if !(c.PriceFactor > 0 && c.PriceFactor <= 1) {
		bad("price_factor", "%v is outside (0, 1]", c.PriceFactor)
	}
	if c.PollInterval <= 0 {
		bad("poll_interval", "must be positive, got %s", c.PollInterval)
	}
	return errs
}

// A PendingError is the answer to a request that missed the cache in batch
// mode: the request is in a batch file of this run and its answer comes in
// a later run. It is neither a reject nor fatal: the runner keeps the
// record's shard open.
type PendingError struct {
	Stage string // request's stage, "name@version"
	Slot  string // request's slot, if any
	// Shared says an identical request of the pass is already in its batch
	// files: this one is answered with it, counted as a cache hit (as an
	// identical request in flight online), not again as a batch request.
	Shared bool
}

func (e *PendingError) Error() string {
	if e.Slot != "" {
		return fmt.Sprintf("waiting for a batch answer (stage %s, slot %s)", e.Stage, e.Slot)
	}
	return fmt.Sprintf("waiting for a batch answer (stage %s)", e.Stage)
}

// IsPending reports whether err is, or wraps, a *PendingError.
func IsPending(err error) bool {
	if err == nil {
		// Before the target is declared: it escapes (errors.As takes an
		// any), one allocation per call, and the runner asks of every
		// record's outcome, nil nearly always.
		return false
	}
	var p *PendingError
	return errors.As(err, &p)
}

// sharedPending reports whether err is, or wraps, a *PendingError whose
// request shares another's batch line (Shared).
func sharedPending(err error) bool {
	var p *PendingError
	return errors.As(err, &p) && p.Shared
}

// A WaitError stops a run in batch mode until batches finish: it names the
// stage and its open jobs. Running again (or `augment batch poll`) picks
// up their answers; nothing is submitted twice.
type WaitError struct {
	Stage     string   // stage name
	Jobs      []string // open job IDs
	Submitted int      // jobs submitted by this run
	Requests  int      // requests in the open jobs
	Hint      string   // what to do, for people (the runner command in files mode)
}

func (e *WaitError) Error() string {
	var b strings.Builder
	who := "stage " + e.Stage + " has"
	if e.Stage == "" {
		who = "there are"
	}
	fmt.Fprintf(&b, "waiting for batch: %s %d open batch job(s) with %d request(s)", who, len(e.Jobs), e.Requests)
	if e.Submitted > 0 {
		fmt.Fprintf(&b, " (%d submitted now)", e.Submitted)
	}
	if len(e.Jobs) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(clipList(e.Jobs, 5), ", "))
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// A BatchStateError says the batch directory cannot be carried on: its
// state file is unreadable, or open jobs need a provider the configuration
// lacks. It is found when the teacher is made, before anything runs, and a
// rerun fails the same way: the CLI exits 2, and each problem says what to
// do.
type BatchStateError struct {
	Problems []string
}

func (e *BatchStateError) Error() string { return strings.Join(e.Problems, "; ") }

// IsWaiting reports whether err is, or wraps, a *WaitError.
func IsWaiting(err error) bool {
	var w *WaitError
	return errors.As(err, &w)
}

// clipList keeps the first n items and says how many more there are.
func clipList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
}
