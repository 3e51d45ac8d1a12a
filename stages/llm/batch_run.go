package llm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/augmentdata/augment/atomicfs"
)

// batchRun is a teacher's batch mode: the store, the providers, the spools
// of the stage passes under way and what failed batches said.
type batchRun struct {
	cfg   BatchConfig
	store *batchStore
	// provs holds the providers by name. A job stays with the provider it
	// was made for (BatchJob.Provider) until it is done, whatever
	// teacher.batch.provider says now: a batch submitted to the Batch API
	// is polled there, a file written for a runner waits for its output.
	// New jobs go to cfg.Provider. openai is missing without endpoints.
	provs map[string]batchProvider

	mu       sync.Mutex
	spools   map[string]*spool // by stage name
	failures map[[32]byte]batchFailure
}

// openBatch sets up batch mode in the batch directory root, with the API
// key for provider openai.
func (t *Teacher) openBatch(root *atomicfs.Root, key string) error {
	if root == nil {
		return errors.New("teacher.mode batch needs a batch directory")
	}
	if t.cache == nil {
		return errors.New("teacher.mode batch needs the request cache: answers reach the stages through it")
	}
	store, err := openBatchStore(root)
	if err != nil {
		return err
	}
	b := &batchRun{cfg: t.cfg.Batch, store: store, spools: map[string]*spool{}, failures: map[[32]byte]batchFailure{},
		provs: map[string]batchProvider{BatchFiles: filesProvider{root: root, model: t.cfg.Model}}}
	if len(t.cfg.Endpoints) > 0 {
		ep := t.cfg.Endpoints[0]
		client, tr := newOpenAIClient(ep, key)
		t.trs = append(t.trs, tr)
		b.provs[BatchOpenAI] = &openaiProvider{root: root, base: strings.TrimRight(ep.BaseURL, "/"), key: key,
			window: t.cfg.Batch.CompletionWindow, token: store.st.Token, client: client, http: &http.Client{Transport: tr}}
	}
	if err := b.checkProviders(); err != nil {
		return err
	}
	if err := b.loadFailures(); err != nil {
		return err
	}
	t.batch = b
	return nil
}

// checkProviders refuses a configuration that cannot carry on the open
// jobs: each needs the provider it was made for, and an OpenAI job past
// prepared needs the remote IDs that provider goes on from.
func (b *batchRun) checkProviders() error {
	var problems []string
	for _, j := range b.store.openJobs("") {
		switch {
		case j.Provider == BatchOpenAI && j.State == JobUploaded && (j.Remote == nil || j.Remote.InputFileID == ""),
			j.Provider == BatchOpenAI && j.State == JobSubmitted && (j.Remote == nil || j.Remote.BatchID == ""):
			problems = append(problems, fmt.Sprintf("batch job %s is %s on the OpenAI Batch API but %s records no remote ID for it (edited or damaged): restore the file from a backup, or move the batch directory %s out of the output directory and run again",
				j.ID, j.State, b.store.root.Path(BatchStateFile), b.store.root.Path(".")))
		case b.provs[j.Provider] != nil:
		case j.Provider == BatchOpenAI:
			problems = append(problems, fmt.Sprintf("teacher.endpoints: batch job %s is open on the OpenAI Batch API (submitted with teacher.batch.provider openai) and is polled at the first endpoint; set the endpoint it was submitted to (teacher.batch.provider may stay %s for new requests)",
				j.ID, b.cfg.Provider))
		default:
			problems = append(problems, fmt.Sprintf("batch job %s names unknown provider %q in %s", j.ID, j.Provider, b.store.root.Path(BatchStateFile)))
		}
	}
	if len(problems) > 0 {
		return &BatchStateError{Problems: problems}
	}
	return nil
}

// BatchMode reports whether cache misses become batch requests.
func (t *Teacher) BatchMode() bool { return t.batch != nil }

// enqueue answers a cache miss in batch mode: a request that, in the
// stage's open epoch, the server refused (400), or that failed in
// max_attempts batches, or whose batch the provider refused or someone
// cancelled (batchHeld), is rejected (*AnswerError) without being sent;
// any other goes into the stage pass's batch files (*PendingError). A
// failure of an earlier epoch rejects nothing: a run that makes the
// stage's records again asks again, as online (lines that stop the run,
// batchFatal, are no failures at all).
//
// Attempts count per epoch, as online they count per run: the pass that
// rejects a request for its last attempt completes the stage and closes
// its epoch (the run ends with exit 3), and a rerun opens a new epoch in
// which the request has max_attempts batches again.
func (s *StageClient) enqueue(req Request, canon, key []byte) error {
	t, b := s.t, s.t.batch
	if f, ok := b.failure(key); ok && f.epoch == b.openEpoch(s.name) && (!batchRetryable(f.class) || f.n >= b.cfg.MaxAttempts || batchHeld(f.class)) {
		s.st.hits.Add(1) // answered by what the batch directory holds: nothing sent
		return &AnswerError{Reason: "llm_error_" + f.class, Stage: req.Stage, Slot: req.Slot, Attempts: f.n,
			Err: fmt.Errorf("no answer in %d batch(es): %s", f.n, f.message)}
	}
	sp, err := b.spool(t, s.name)
	if err != nil {
		return err
	}
	body, err := chatBody(req, t.cfg.StructuredOutput)
	if err != nil {
		return err
	}
	wrote, err := sp.add(req, key, canon, body, max(req.MaxTokens, req.MaxCompletionTokens))
	if err != nil {
		return err
	}
	return &PendingError{Stage: req.Stage, Slot: req.Slot, Shared: !wrote}
}

// openEpoch returns the stage's epoch whose rounds are under way, 0 if
// none is (no batches yet, or its last pass completed).
func (b *batchRun) openEpoch(stage string) int {
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	e := b.store.st.Stages[stage]
	if e == nil || e.Closed {
		return 0
	}
	return e.Epoch
}

// spool returns the stage pass's spool, starting the stage's next round.
func (b *batchRun) spool(t *Teacher, stage string) (*spool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sp := b.spools[stage]; sp != nil {
		return sp, nil
	}
	b.store.mu.Lock()
	e := *b.store.st.stage(stage)
	b.store.mu.Unlock()
	if e.Closed {
		e.Epoch, e.Rounds = e.Epoch+1, 0
	}
	round := e.Rounds + 1
	if round > b.cfg.MaxRounds {
		return nil, t.stop(&FatalError{Reason: "llm_batch_rounds",
			Msg: fmt.Sprintf("stopping the run: stage %s still has unanswered requests after %d batch rounds (teacher.batch.max_rounds); see `augment batch status`, raise the limit and rerun", stage, b.cfg.MaxRounds)})
	}
	sp := newSpool(b.store.root, stage, e.Epoch, round, b.cfg.MaxRequests, b.cfg.MaxBytes)
	b.spools[stage] = sp
	return sp, nil
}

// BatchStart prepares a stage's pass in batch mode: it submits the
// stage's jobs left unsubmitted, polls the open ones and brings the
// answers of those that ended into the cache. While jobs of the stage are
// still open it returns a *WaitError, and the pass must not run (it would
// ask their requests again). Outside batch mode it does nothing.
func (t *Teacher) BatchStart(ctx context.Context, stage string) error {
	if t.batch == nil {
		return nil
	}
	if err := t.advance(ctx, stage, true); err != nil {
		return err
	}
	return t.waitErr(stage, 0)
}

// BatchFinish ends a stage's pass in batch mode: the requests it
// collected become jobs (one per file), which are submitted. It returns a
// *WaitError when the stage has open jobs, nil when the pass asked for
// nothing (the stage is complete; its rounds start again at 1 next time).
// Outside batch mode it does nothing.
func (t *Teacher) BatchFinish(ctx context.Context, stage string) error {
	b := t.batch
	if b == nil {
		return nil
	}
	b.mu.Lock()
	sp := b.spools[stage]
	delete(b.spools, stage)
	b.mu.Unlock()
	var made []string
	if sp != nil {
		var err error
		if made, err = b.record(sp, t.cfg); err != nil {
			return err
		}
	}
	// Submit only: the answers are for the next pass, which a later run
	// makes after polling.
	if err := t.advance(ctx, stage, false); err != nil {
		return err
	}
	if len(b.store.openJobs(stage)) == 0 {
		b.store.mu.Lock()
		e := b.store.st.Stages[stage]
		b.store.mu.Unlock()
		if e == nil || e.Closed {
			return nil // a stage that never used batches
		}
		return b.store.update(func(st *batchState) { st.stage(stage).Closed = true })
	}
	return t.waitErr(stage, len(made))
}

// record turns a sealed spool into prepared jobs.
func (b *batchRun) record(sp *spool, cfg Config) ([]string, error) {
	defer sp.discard()
	parts, err := sp.seal()
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	st := &b.store.st
	seq := st.Seq
	now := time.Now().UTC().Truncate(time.Second)
	var jobs []*BatchJob
	for _, p := range parts {
		seq++
		j := &BatchJob{
			ID: fmt.Sprintf("%s-%04d", jobStem(sp.stage), seq), Stage: sp.stage, Epoch: sp.epoch, Round: sp.round,
			Provider: cfg.Batch.Provider, State: JobPrepared, Requests: p.requests, Bytes: p.bytes,
			EstTokens: p.estTokens, Created: now, Updated: now,
		}
		j.EstCost = (float64(p.estTokens)*cfg.PriceInputPerMTok + float64(p.maxOutToken)*cfg.PriceOutputPerMTok) / 1e6 * cfg.Batch.PriceFactor
		for _, mv := range [][2]string{{p.inName, j.InputFile()}, {p.metaName, j.MetaFile()}} {
			if err := b.store.root.Rename(mv[0], mv[1]); err != nil {
				return nil, fmt.Errorf("batch: %w", err)
			}
		}
		jobs = append(jobs, j)
	}
	st.Seq = seq
	e := st.stage(sp.stage)
	e.Epoch, e.Rounds, e.Closed = sp.epoch, sp.round, false
	st.Jobs = append(st.Jobs, jobs...)
	if err := b.store.save(); err != nil {
		return nil, err
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids, nil
}

// advance takes every open job of stage ("" for all) as far as it can go
// now: submits prepared ones (within the budget) and, with poll, polls
// submitted ones and ingests those that ended.
func (t *Teacher) advance(ctx context.Context, stage string, poll bool) error {
	b := t.batch
	for _, job := range b.store.openJobs(stage) {
		if err := ctx.Err(); err != nil {
			return err
		}
		save := func() error { return b.store.setJob(job) }
		prov := b.provs[job.Provider] // present: openBatch checked
		if job.State == JobPrepared || job.State == JobUploaded {
			if err := t.checkBatchBudget(job); err != nil {
				return err
			}
			if err := prov.submit(ctx, &job, save); err != nil {
				return t.providerErr(err)
			}
			t.log.Info("batch job submitted", "job", job.ID, "stage", job.Stage, "round", job.Round, "requests", job.Requests)
		}
		if !poll {
			continue
		}
		if job.State == JobSubmitted {
			done, err := prov.poll(ctx, &job, save)
			if err != nil {
				return t.providerErr(err)
			}
			if !done {
				continue
			}
		}
		if job.State == JobDownloaded {
			if err := t.ingest(&job); err != nil {
				return err
			}
		}
	}
	return nil
}

// providerErr is the error of a provider's step, its credentials
// redacted (it may quote the server) and its HTTP status kept:
// credentials refused (401, 403) stop the run as they do online.
func (t *Teacher) providerErr(err error) error {
	if _, ok := errors.AsType[*BatchStateError](err); ok {
		return err // redacted when made
	}
	status := apiStatus(err)
	if red := t.redact.err(err); red.Error() != err.Error() {
		err = red
		if status != 0 {
			err = &statusError{status: status, msg: red.Error()} // the status still tells passing from fatal
		}
	}
	if statusClass(status) == classAuth {
		return t.stop(&FatalError{Reason: "llm_auth", Err: err,
			Msg: fmt.Sprintf("the batch provider refused the credentials (HTTP %d); check the key in the environment variable named by teacher.api_key_env (a restricted key needs the Files and Batches permissions)", status)})
	}
	return err
}

// checkBatchBudget stops the run before a job is submitted whose
// estimated cost, with this run's cost and the estimates of the jobs
// already out, would pass the budget. The job stays prepared: a rerun
// with a larger budget submits it.
func (t *Teacher) checkBatchBudget(job BatchJob) error {
	if t.cfg.Budget <= 0 {
		return nil
	}
	out := 0.0
	for _, j := range t.batch.store.jobs(func(j *BatchJob) bool { return j.State == JobSubmitted || j.State == JobDownloaded }) {
		out += j.EstCost
	}
	if total := t.Cost() + out + job.EstCost; total > t.cfg.Budget {
		return t.stop(&FatalError{Reason: "llm_budget_reached",
			Msg: fmt.Sprintf("stopping the run: submitting batch job %s (estimated %.4f at batch prices) would bring this run's teacher cost to about %.4f, over teacher.budget %.2f; the job stays prepared — raise the budget and rerun to submit it",
				job.ID, job.EstCost, total, t.cfg.Budget)})
	}
	return nil
}

// WaitErr returns a *WaitError for the open jobs of stage ("" for all
// stages), nil if there are none or outside batch mode.
func (t *Teacher) WaitErr(stage string) error {
	if t.batch == nil {
		return nil
	}
	return t.waitErr(stage, 0)
}

// waitErr returns a *WaitError for stage's open jobs, nil if none.
func (t *Teacher) waitErr(stage string, submitted int) error {
	open := t.batch.store.openJobs(stage)
	if len(open) == 0 {
		return nil
	}
	w := &WaitError{Stage: stage, Jobs: jobIDs(open), Submitted: submitted, Hint: t.batch.hint(open)}
	for _, j := range open {
		w.Requests += j.Requests
	}
	return w
}

// PollBatches advances every open job (`augment batch poll`) and returns
// all jobs.
func (t *Teacher) PollBatches(ctx context.Context) ([]BatchJob, error) {
	if t.batch == nil {
		return nil, errors.New("teacher.mode is not batch")
	}
	err := t.advance(ctx, "", true)
	return t.batch.store.jobs(nil), err
}

// BatchJobs returns every recorded job; none outside batch mode.
func (t *Teacher) BatchJobs() []BatchJob {
	if t.batch == nil {
		return nil
	}
	return t.batch.store.jobs(nil)
}

// BatchHeld says, per job of stage's latest epoch that failed or was
// cancelled at the provider (whose requests that epoch rejects), what
// happened and what to do; nil if none did.
func (t *Teacher) BatchHeld(stage string) []string {
	if t.batch == nil {
		return nil
	}
	s := t.batch.store
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.st.Stages[stage]
	if e == nil {
		return nil
	}
	var out []string
	for _, j := range s.st.Jobs {
		if j.Stage == stage && j.Epoch == e.Epoch && !j.Open() {
			if msg := heldMessage(j); msg != "" {
				out = append(out, msg)
			}
		}
	}
	return out
}

// BatchHint says what the user has to do for the open jobs, if anything.
func (t *Teacher) BatchHint() string {
	if t.batch == nil {
		return ""
	}
	return t.batch.hint(t.batch.store.openJobs(""))
}

// hint says what the user has to do for the open jobs: each provider's
// hint over its own jobs, and for jobs made for another provider than
// teacher.batch.provider, that they stay with it.
func (b *batchRun) hint(open []BatchJob) string {
	var names []string
	byProv := map[string][]BatchJob{}
	for _, j := range open {
		if byProv[j.Provider] == nil {
			names = append(names, j.Provider)
		}
		byProv[j.Provider] = append(byProv[j.Provider], j)
	}
	var parts []string
	for _, name := range names {
		jobs := byProv[name]
		h := b.provs[name].hint(jobs) // present: openBatch checked
		if name != b.cfg.Provider {
			note := fmt.Sprintf("%s stay with teacher.batch.provider %s, for which they were made, until they end (new requests go to %s)",
				strings.Join(clipList(jobIDs(jobs), 5), ", "), name, b.cfg.Provider)
			h = strings.TrimSuffix(note+": "+h, ": ")
		}
		if h != "" {
			parts = append(parts, h)
		}
	}
	return strings.Join(parts, "; ")
}

// CheckOnline is NewTeacher's refusal of an online teacher (cfg) while
// the batch directory root holds open batch jobs (checkNoOpenBatches),
// for augment check to predict it: nil when cfg is offline or in batch
// mode, or nothing is open.
func CheckOnline(cfg Config, root *atomicfs.Root) error {
	cfg.Defaults()
	if cfg.Provider == ProviderOffline || cfg.Mode == ModeBatch {
		return nil
	}
	return checkNoOpenBatches(root)
}

// checkNoOpenBatches refuses an online teacher for an output directory
// whose batch directory root still holds open jobs of a batch-mode run: the
// online run would ask their requests again, and a batch submitted to the
// provider is paid for when it completes whatever augment does, so the
// same requests would be paid twice (a prepared job too, once a batch run
// submits it). Jobs are not advanced here: that is `augment batch poll`'s.
// A state that cannot be read is refused as in batch mode. Nothing is
// created: a run that never used batch mode has no batch directory.
func checkNoOpenBatches(root *atomicfs.Root) error {
	if root == nil {
		return nil
	}
	st, err := readBatchState(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var open []string
	paid := false
	for _, j := range st.Jobs {
		if !j.Open() {
			continue
		}
		desc := j.ID + " (" + j.Provider + ", " + j.State
		if j.Remote != nil && j.Remote.BatchID != "" {
			desc += ", batch " + j.Remote.BatchID
		}
		open = append(open, desc+")")
		paid = paid || j.State != JobPrepared
	}
	if len(open) == 0 {
		return nil
	}
	why := "it would ask their requests again"
	if paid {
		why = "it would ask their requests again and pay for them twice (the provider bills a submitted batch when it completes)"
	}
	return &BatchStateError{Problems: []string{fmt.Sprintf(
		"teacher.mode online: the batch directory %s holds %d open batch job(s) of a teacher.mode batch run: %s; an online run is refused while they are open, since %s. Either let them finish: `augment batch poll -wait -set teacher.mode=batch pipeline.yaml` (or runs with teacher.mode batch) takes their answers into the request cache, which an online run then reads without asking again; or give them up: cancel the submitted ones at the provider and move the batch directory out of the output directory, then run online",
		root.Path("."), len(open), strings.Join(clipList(open, 5), ", "), why)}}
}
