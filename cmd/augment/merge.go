package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/augmentdata/augment/stages"
)

// workerOpts are run's flags for one of several workers sharing a run.
type workerOpts struct {
	worker  *string
	workers *int
	wait    *time.Duration
	getenv  func(string) string
}

func workerFlags(fs *flag.FlagSet) *workerOpts {
	return &workerOpts{
		worker:  fs.String("worker", "", "run as worker `I/N` (0 ≤ I < N) of N processes sharing output.dir; finish with augment merge"),
		workers: fs.Int("workers", 0, "number of workers, with the index from JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID"),
		wait:    fs.Duration("worker-wait", 24*time.Hour, "how long a worker waits for the others' results (ingest, a stage's shards) before it fails; more than 0"),
		getenv:  os.Getenv,
	}
}

// detect returns the worker this process is, nil when it runs alone.
func (o *workerOpts) detect() (*stages.Worker, error) {
	switch {
	case *o.workers < 0:
		return nil, usageError{fmt.Sprintf("-workers %d: want the number of workers (1 or more), or none", *o.workers)}
	case *o.wait <= 0:
		return nil, usageError{fmt.Sprintf("-worker-wait %v: want a duration above 0", *o.wait)}
	}
	w, err := stages.DetectWorker(*o.worker, *o.workers, o.getenv)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	if w != nil {
		w.Wait = *o.wait
	}
	return w, nil
}

// cmdMerge finishes a run made by workers: it runs the pipeline as one
// process that finds every shard done in the workers' manifests, and so
// writes each stage's manifest.json, the exports' index files, report.html
// and the dataset cards. Shards no worker finished are run here.
func cmdMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("merge", stderr, "[flags] pipeline.yaml")
	quiet := fs.Bool("quiet", false, "no progress output, only warnings and errors")
	var sets setFlags
	fs.Var(&sets, "set", "override a pipeline value: key.path=value (repeatable); use the workers' values")
	p, err := loadPipeline(fs, args, &sets)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o := stages.Options{Version: version, Log: log, Merge: true}
	if !*quiet {
		o.Progress = stderr
	}
	r, err := stages.NewRunner(p, o)
	if err != nil {
		return &notStarted{err}
	}
	rep, err := r.Run(ctx)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if rep != nil {
		stages.PrintReport(stdout, rep)
		ran := 0
		for _, s := range rep.Stages {
			ran += s.Ran
		}
		if ran > 0 {
			fmt.Fprintf(stderr, "augment merge: %d shards were not finished by the workers and ran in the merge\n", ran)
		}
	}
	return err
}

// cmdStatus shows how far each stage of an output directory is over all
// workers sharing the run; it reads files only and can watch a running run.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr, "[out]")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir := "out"
	switch fs.NArg() {
	case 0:
	case 1:
		dir = fs.Arg(0)
	default:
		return usageError{"status: want at most one output dir"}
	}
	rd, err := openRunDir(ctx, dir, manifestsOnly, stderr) // remote_dir.go: also s3://, gs://, azblob://
	if err != nil {
		return err
	}
	defer rd.close(false)
	sts, err := stages.Status(rd.Dir)
	if err != nil {
		return rd.err(err)
	}
	stages.PrintStatus(stdout, sts)
	return nil
}
