package stages

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
)

// PrintReport writes a run's summary: one line per stage with its shards and
// record counts and its teacher traffic in the manifests' terms (requests:
// asked, cache hits included; cache hits; sent: HTTP attempts, retries
// included), then the rejects by reason.
func PrintReport(w io.Writer, rep *Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tshards run\tskipped\tin\tout\trejected\tfiltered\tadded\trequests\tcache hits\tsent\t")
	for _, s := range rep.Stages {
		c := s.Counts
		req, hits, sent := "-", "-", "-"
		if s.LLM != nil {
			req, hits, sent = fmt.Sprint(s.LLM.Requests), fmt.Sprint(s.LLM.CacheHits), fmt.Sprint(s.LLM.Sent)
			if s.LLM.Provider == "offline" {
				sent = "offline" // answered by the stand-ins, nothing sent
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", s.Dir, s.Ran, s.Skipped, c.In, c.Out,
			manifests.Sum(c.Rejected), manifests.Sum(c.Filtered), c.Added, req, hits, sent)
	}
	tw.Flush()
	for _, s := range rep.Stages {
		if len(s.Counts.Rejected) == 0 {
			continue
		}
		fmt.Fprintf(w, "rejected in %s: %s\n", s.Dir, manifests.FormatCounts(s.Counts.Rejected))
	}
	for _, s := range rep.Stages {
		if n := s.Counts.Counters[CounterStandIn]; n > 0 {
			fmt.Fprintf(w, "stand-in data in %s: %d of %d samples hold offline-teacher text (allow_offline), marked as such in the export\n",
				s.Dir, n, s.Counts.Out)
		}
	}
	dir := shownDir(rep.Dir)
	if rep.Remote != "" {
		fmt.Fprintf(w, "output: %s (working copy: %s)\n", rep.Remote, dir)
		return
	}
	fmt.Fprintf(w, "output: %s\n", dir)
}

// shownDir is how messages name a local directory (the run's output
// directory, one of its stages'): relative to the working directory when it
// is below it, else absolute as dir is.
func shownDir(dir string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return dir
}

// writeReport writes the run's report.html and, when the run succeeded, the
// dataset card of each export directory (package report); the card of an
// export that gets none now (not done, or its input rewritten since) is
// deleted, also after a failed run. It returns the run's error, joined
// with its own after a successful run; after a failed run its error is
// only logged.
func (r *Runner) writeReport(runErr error) error {
	err := func() error {
		// This run holds the lock, and its stages are over.
		run, err := report.LoadEnded(r.dir)
		if err != nil {
			return err
		}
		stale, err := run.StaleCards()
		for _, c := range stale {
			if rerr := r.root.Remove(c); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		if err != nil {
			return err
		}
		if runErr == nil {
			if _, err := run.WriteCards(); err != nil {
				return err
			}
		}
		return run.WriteHTML()
	}()
	switch {
	case err == nil:
		return runErr
	case runErr != nil:
		r.o.Log.Warn("report not written", "err", err)
		return runErr
	}
	return fmt.Errorf("report: %w", err)
}
