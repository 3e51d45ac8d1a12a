package stages

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/augmentdata/augment/stages/llm"
)

// The runner's side of the teacher's batch mode (teacher.mode: batch, see
// stages/llm/batch.go). Before an LLM stage's pass the teacher brings in
// the answers of the stage's finished batches and, while any of its
// batches is still open, the run stops waiting. During the pass a record
// whose request missed the cache gets a pending error: its shard is not
// committed (the other shards are), and every other record still runs, so
// one pass collects all the stage's misses. After the pass the teacher
// submits them as batches and the run stops waiting; the next run picks up
// where this one stopped, with the answers in the cache.

// batchWorkerProblems refuses batch mode for a worker: the batch
// directory's state file (the open jobs, their requests and rounds) is
// kept by one process, and N workers would each rewrite it with their own
// jobs only. The batch API already spreads the work, so a batch run is one
// process; workers use teacher.mode online.
func batchWorkerProblems(p *Pipeline, o Options) []string {
	if o.Worker == nil || p.Teacher.Mode != llm.ModeBatch {
		return nil
	}
	return []string{p.problem("teacher.mode", "teacher.mode batch does not run as several workers (--worker, JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID): the batch jobs are kept by one process; run `augment run` and `augment batch poll` as one process (the provider spreads the batch), or use teacher.mode online with workers")}
}

// pendingShardError marks a shard holding records that wait for batch
// answers; the shard is not committed.
type pendingShardError struct{ records int }

func (e *pendingShardError) Error() string {
	return fmt.Sprintf("%d record(s) wait for batch answers", e.records)
}

// isPending reports whether err is a record's or a shard's wait for batch
// answers.
func isPending(err error) bool {
	var p *pendingShardError
	return llm.IsPending(err) || errors.As(err, &p)
}

// pendingIn counts the records of a shard that wait for batch answers.
func pendingIn(errs []error) error {
	n := 0
	for _, err := range errs {
		if llm.IsPending(err) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return &pendingShardError{records: n}
}

// teacherCheck runs the teacher's GET /models check once per run, before
// the first stage that talks to the teacher.
type teacherCheck struct {
	once sync.Once
	err  error
}

// teacherReady is called before an LLM stage's pass: the model check,
// then, in batch mode, the stage's finished batches brought in (a
// *llm.WaitError while some are open).
func (r *Runner) teacherReady(ctx context.Context, sr stageRun, st Stage) error {
	if _, llmStage := st.(Concurrent); !llmStage {
		return nil
	}
	r.check.once.Do(func() {
		r.check.err = r.teacher.CheckModels(ctx)
		var me *llm.ModelError
		if errors.As(r.check.err, &me) {
			r.check.err = &ConfigError{Problems: me.Problems}
		}
	})
	if r.check.err != nil {
		return r.check.err
	}
	return batchStateProblem(r.teacher.BatchStart(ctx, sr.name))
}

// batchStateProblem turns an *llm.BatchStateError (a job the provider no
// longer knows, say) into a *ConfigError: running again fails the same
// way until the user acts (exit 2), which its message says how.
func batchStateProblem(err error) error {
	if bse, ok := errors.AsType[*llm.BatchStateError](err); ok {
		return &ConfigError{Problems: bse.Problems}
	}
	return err
}

// batchFinish is called after a stage's pass with the pass's error: in
// batch mode the requests the pass collected are submitted and the run
// stops waiting for them.
func (r *Runner) batchFinish(ctx context.Context, sr stageRun, passErr error, pendingShards int) error {
	if !r.teacher.BatchMode() {
		return passErr
	}
	if passErr != nil && !isPending(passErr) {
		return passErr // the pass failed: its batch files are not submitted
	}
	err := r.teacher.BatchFinish(ctx, sr.name)
	if err == nil && pendingShards > 0 {
		err = fmt.Errorf("%d shard(s) wait for batch answers, but no batch is open (a bug)", pendingShards)
	}
	if llm.IsWaiting(err) {
		r.o.Log.Warn("waiting for batch", "stage", sr.name, "pending_shards", pendingShards, "error", err)
	}
	return err
}

// PollBatches advances every open batch job of the run's teacher
// (`augment batch poll`), through the run's confined output root and under
// its lock. It returns every job and, while some are still open, a
// *llm.WaitError.
func (r *Runner) PollBatches(ctx context.Context) ([]llm.BatchJob, error) {
	jobs, err := r.teacher.PollBatches(ctx)
	if err != nil {
		return jobs, batchStateProblem(err)
	}
	return jobs, r.teacher.WaitErr("")
}

// BatchDir is the OS path of the run's batch directory, for messages.
func (r *Runner) BatchDir() string { return r.root.Path(batchDir) }
