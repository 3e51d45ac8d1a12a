package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages"
)

// cmdReport writes a run's report.html and the dataset card of each
// finished export, from what the run directory holds (also while the run
// is in progress).
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", stderr, "[out]")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := runDirArg(fs.Args(), "report")
	if err != nil {
		return err
	}
	rd, err := openRunDir(ctx, dir, outputFiles, stderr) // remote_dir.go: also s3://, gs://, azblob://, written back
	if err != nil {
		return err
	}
	run, err := report.Load(rd.Dir)
	if err != nil {
		rd.close(false)
		return rd.err(err)
	}
	// As run says of output.dir: a directory that takes no files is named
	// before any write fails (a failing write names its file).
	if msg := stages.NotWritable(rd.Dir); msg != "" {
		rd.close(false)
		return rd.err(fmt.Errorf("report: the run directory %s %s: report.html and the dataset cards are written there", rd.Dir, msg))
	}
	// The card of an export that gets none now describes data its
	// directory no longer holds: it goes.
	stale, err := run.StaleCards()
	for _, c := range stale {
		if err == nil {
			err = rd.remove(c)
		}
	}
	var cards []string
	if err == nil {
		cards, err = run.WriteCards()
		if errors.Is(err, report.ErrNoConfig) {
			// report.html says what it can without it.
			fmt.Fprintf(stderr, "augment: report: %s: %v\n", rd.Name, err)
			err = nil
		}
	}
	if err == nil {
		err = run.WriteHTML()
	}
	if err != nil {
		rd.close(false)
		return rd.err(err)
	}
	if err := rd.close(true); err != nil {
		return err
	}
	for _, c := range stale {
		fmt.Fprintf(stdout, "card removed: %s (its export is not done, or its input changed since it ran: it gets a card when it runs again)\n", rd.path(c))
	}
	for _, c := range cards {
		fmt.Fprintf(stdout, "card: %s\n", rd.path(c))
	}
	fmt.Fprintf(stdout, "report: %s\n", rd.path(report.HTMLFile))
	return nil
}

// runDirArg returns the one run directory argument (default "out").
func runDirArg(args []string, cmd string) (string, error) {
	switch len(args) {
	case 0:
		return "out", nil
	case 1:
		return args[0], nil
	}
	return "", usageError{fmt.Sprintf("%s: want one run directory, got %d arguments", cmd, len(args))}
}
