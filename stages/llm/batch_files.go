package llm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/augmentdata/augment/atomicfs"
)

// A batchProvider moves a job from prepared to downloaded. Each method
// changes job and calls save after every step that has an effect outside
// the process, so a kill at any point resumes without doing it twice.
type batchProvider interface {
	// submit takes a prepared (or uploaded) job to submitted.
	submit(ctx context.Context, job *BatchJob, save func() error) error
	// poll checks a submitted job and takes it to downloaded when it has
	// ended; done reports whether it has.
	poll(ctx context.Context, job *BatchJob, save func() error) (done bool, err error)
	// hint says what the user has to do while jobs are open ("" if
	// nothing: the provider works on its own).
	hint(jobs []BatchJob) string
}

// filesProvider leaves running the batch to the user: each job's input
// file is in the OpenAI batch format that `vllm run-batch` reads, and the
// job is done when its output file appears next to it.
type filesProvider struct {
	root  *atomicfs.Root // the batch directory
	model string
}

func (p filesProvider) submit(_ context.Context, job *BatchJob, save func() error) error {
	job.State = JobSubmitted
	return save()
}

func (p filesProvider) poll(_ context.Context, job *BatchJob, save func() error) (bool, error) {
	_, err := p.root.Stat(job.OutputFile())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	job.State = JobDownloaded
	return true, save()
}

// hint gives the command for the first open job. The output is written
// under another name and renamed when complete, so a half-written file is
// never read.
func (p filesProvider) hint(jobs []BatchJob) string {
	if len(jobs) == 0 {
		return ""
	}
	in := shellQuote(p.root.Path(jobs[0].InputFile()))
	part := shellQuote(p.root.Path(jobs[0].OutputFile()) + ".part")
	out := shellQuote(p.root.Path(jobs[0].OutputFile()))
	more := ""
	if len(jobs) > 1 {
		more = fmt.Sprintf(" (and likewise for the other %d input files)", len(jobs)-1)
	}
	return fmt.Sprintf("run each input file with a batch runner, writing the output beside it, e.g. `vllm run-batch -i %s -o %s --model %s && mv %s %s`%s; then run augment again",
		in, part, shellQuote(p.model), part, out, more)
}

// shellQuote makes s one word of a POSIX shell command: as it is when it
// holds only characters no shell treats specially, else in single quotes
// (a single quote in s written as '\”).
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
