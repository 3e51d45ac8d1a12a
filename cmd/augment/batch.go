package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages"
	"github.com/augmentdata/augment/stages/llm"
)

// cmdBatch lists (status) or advances (poll) the batch jobs of a run in
// teacher.mode batch.
func cmdBatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"batch: want a subcommand: status or poll"}
	}
	sub, args := args[0], args[1:]
	if isHelp(sub) {
		fmt.Fprintln(stderr, "Usage: augment batch status [-dir out] | poll [-wait] [-set …] pipeline.yaml\n\nRun \"augment batch <subcommand> -h\" for its flags.")
		return flag.ErrHelp
	}
	switch sub {
	case "status":
		fs := newFlags("batch status", stderr, "[-dir out]")
		dir := fs.String("dir", "out", "the run's output directory (pipeline.yaml's output.dir)")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return usageError{fmt.Sprintf("batch status: unexpected argument %q", fs.Arg(0))}
		}
		if err := workDir(*dir, "batch status"); err != nil {
			return err
		}
		bdir := filepath.Join(*dir, "batch")
		if err := holdsRun(*dir, bdir); err != nil {
			return err
		}
		jobs, err := llm.ReadBatchJobs(bdir)
		if err != nil {
			return err
		}
		printBatchJobs(stdout, bdir, jobs)
		return nil
	case "poll":
		fs := newFlags("batch poll", stderr, "[-wait] [-set key.path=value …] pipeline.yaml")
		wait := fs.Bool("wait", false, "keep polling (every teacher.batch.poll_interval) until no job is open; a failure that may pass (5xx, 429, a dropped connection) is tried again with backoff, up to teacher.max_retries times in a row")
		var sets setFlags
		fs.Var(&sets, "set", "override a pipeline value: key.path=value (repeatable)")
		p, err := loadPipeline(fs, args, &sets)
		if err != nil {
			return err
		}
		if p.Teacher.Mode != llm.ModeBatch {
			return usageError{"batch poll: the pipeline's teacher.mode is not batch"}
		}
		// Through the runner: the output directory's lock, its confined
		// root and the request cache opened in it, as a run has them.
		r, err := stages.NewRunner(p, stages.Options{Version: version})
		if err != nil {
			return err
		}
		retry := pollRetry{tries: *p.Teacher.MaxRetries, base: p.Teacher.RetryBase.D(), stderr: stderr}
		err = pollBatches(ctx, r, p.Teacher.Batch.PollInterval.D(), *wait, retry, stdout)
		if cerr := r.Close(); err == nil {
			err = cerr
		}
		return savesWork(err)
	}
	return usageError{fmt.Sprintf("batch: unknown subcommand %q (want status or poll)", sub)}
}

// holdsRun refuses (manifests.ErrNoRun) a directory dir that holds
// neither a batch directory bdir nor a run's config.yaml: no run was
// pointed at, rather than a run without batch jobs.
func holdsRun(dir, bdir string) error {
	for _, p := range []string{bdir, filepath.Join(dir, "config.yaml")} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	return fmt.Errorf("%s %w: no batch directory and no config.yaml (not an augment output dir, or nothing ran yet)", dir, manifests.ErrNoRun)
}

// pollRetry is how `batch poll -wait` rides out failures that may pass
// (the provider's 5xx or 429, a dropped connection): up to tries in a row
// (teacher.max_retries), waiting base (teacher.retry_base) doubled each
// time, at most the poll interval.
type pollRetry struct {
	tries  int
	base   time.Duration
	stderr io.Writer
}

// pollBatches advances the open jobs once or, with wait, every interval
// until none is open, then lists them.
func pollBatches(ctx context.Context, r *stages.Runner, interval time.Duration, wait bool, retry pollRetry, stdout io.Writer) error {
	failed := 0
	for {
		jobs, err := r.PollBatches(ctx)
		next := interval
		switch {
		case wait && llm.BatchPassing(err) && failed < retry.tries:
			next = min(retry.base<<min(failed, 20), interval)
			failed++
			fmt.Fprintf(retry.stderr, "augment: batch poll: %v; a failure that may pass: trying again in %s (%d of %d, teacher.max_retries)\n", err, next, failed, retry.tries)
		case err != nil && !llm.IsWaiting(err):
			return err
		case err == nil || !wait:
			printBatchJobs(stdout, r.BatchDir(), jobs)
			if err == nil {
				fmt.Fprintln(stdout, "no batch job is open: run the pipeline again to continue")
			}
			return err
		default:
			failed = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(next):
		}
	}
}

// printBatchJobs writes one line per job and, for open files-mode jobs,
// where the runner's input and output are.
func printBatchJobs(w io.Writer, dir string, jobs []llm.BatchJob) {
	if len(jobs) == 0 {
		fmt.Fprintf(w, "no batch jobs in %s\n", dir)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "job\tstage\tround\tprovider\tstate\tremote\trequests\tanswered\tfailed\tmissing\tcost")
	open := 0
	for _, j := range jobs {
		remote := "-"
		if j.Remote != nil && j.Remote.Status != "" {
			remote = j.Remote.Status
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%.4f\n", j.ID, j.Stage, j.Round, j.Provider, j.State, remote,
			j.Requests, j.Answered, j.Failed, j.Missing, j.Cost)
		if j.Open() {
			open++
		}
	}
	tw.Flush()
	for _, j := range jobs {
		status := ""
		if j.Remote != nil {
			status = j.Remote.Status
		}
		switch {
		case status == "failed":
			note := j.Note
			if note == "" {
				note = "no reason given"
			}
			fmt.Fprintf(w, "%s: the provider failed the batch: %s\n", j.ID, note)
		case status == "cancelled" || status == "cancelling":
			fmt.Fprintf(w, "%s: the batch was cancelled at the provider\n", j.ID)
		case j.Note != "":
			fmt.Fprintf(w, "%s: the provider said: %s\n", j.ID, j.Note)
		}
		if j.Malformed > 0 {
			fmt.Fprintf(w, "%s: %d output line(s) matched no request of the job (not a batch line, a custom_id it did not send, or one repeated: the first line counts)\n", j.ID, j.Malformed)
		}
	}
	for _, j := range jobs {
		if j.Open() && j.Provider == llm.BatchFiles {
			fmt.Fprintln(w, filesJobStatus(dir, j))
		}
	}
	fmt.Fprintf(w, "%d job(s), %d open\n", len(jobs), open)
}

// filesJobStatus says where an open files-mode job stands: waiting for the
// runner's output file, or that file present (to be taken in by the next
// run or poll; a downloaded job's too), in the way (a directory,
// unreadable) or gone after it was found.
func filesJobStatus(dir string, j llm.BatchJob) string {
	out := filepath.Join(dir, j.OutputFile())
	fi, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist) && j.State == llm.JobDownloaded:
		return fmt.Sprintf("%s: the output %s was taken as complete but is gone: the next run counts the job's requests missing and asks them again", j.ID, out)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("waiting for %s (write it when the runner is done with %s)", out, filepath.Join(dir, j.InputFile()))
	case err != nil:
		return fmt.Sprintf("%s: the output %s cannot be read: %v", j.ID, out, err)
	case fi.IsDir():
		return fmt.Sprintf("%s: the output %s is a directory, not the runner's output file: move it away and write the file there", j.ID, out)
	}
	f, err := os.Open(out)
	if err != nil {
		return fmt.Sprintf("%s: the output %s cannot be read: %v", j.ID, out, err)
	}
	f.Close()
	return fmt.Sprintf("%s: output present: run augment (or augment batch poll) to take it in (%s)", j.ID, out)
}
