package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/record"
)

// cmdShow prints one record's journey through the stages, one record as a
// stage holds it, or the records of a stage whose tags match.
func cmdShow(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("show", stderr, "[-stage S] [-tag key=value …] [-n N] [-json] [ID] out")
	stage := fs.String("stage", "", "show the record as this stage holds it (dir, name or number), not its journey")
	asJSON := fs.Bool("json", false, "write JSON (for scripts): the journey as one object; with -stage, JSON Lines (a record a line)")
	n := fs.Int("n", 5, "with -stage and no ID: show at most N records")
	var tags setFlags
	fs.Var(&tags, "tag", "with -stage and no ID: only records with this tag, key=value or key=* (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var id, dir string
	switch len(pos) {
	case 1:
		dir = pos[0]
	case 2:
		id, dir = pos[0], pos[1]
	default:
		return usageError{fmt.Sprintf("show: want [ID] and the run directory, got %d arguments", len(pos))}
	}
	if id == "" && *stage == "" {
		return usageError{fmt.Sprintf("show: got only %q: want a record ID and the run directory (show ID DIR), or -stage S DIR to list a stage's records", dir)}
	}
	if *n < 1 {
		return usageError{fmt.Sprintf("show: -n %d: want at least 1", *n)}
	}
	where := map[string]string{}
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return usageError{fmt.Sprintf("show: -tag %q: want key=value", t)}
		}
		where[k] = v
	}
	rd, err := openRunDir(ctx, dir, outputFiles, stderr) // remote_dir.go: also s3://, gs://, azblob://
	if err != nil {
		return err
	}
	defer rd.close(false)
	defer func() { err = rd.err(err) }() // errors name the prefix the user gave, not the local copy
	run, err := report.Load(rd.Dir)
	if err != nil {
		return err
	}
	stdout, flush := rd.output(stdout)
	defer flush()
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if *stage == "" {
		j, err := run.Journey(id)
		if err != nil {
			return err
		}
		if *asJSON {
			return enc.Encode(j)
		}
		report.PrintJourney(stdout, j)
		return nil
	}
	st, err := run.Stage(*stage)
	if err != nil {
		return err
	}
	if st.Sink() {
		return usageError{fmt.Sprintf("show: %s is an export (no records of its own); show the ID without -stage to find its sample", st.Dir)}
	}
	if st.Status == report.StatusSkipped {
		from := "ingest's input"
		for i := range run.Stages {
			if &run.Stages[i] == st {
				if in := run.RecordStage(i); in != nil {
					from = in.Dir
				}
			}
		}
		return fmt.Errorf("%s is skipped (skip: true in the pipeline): it holds no records of its own, they go on as %s has them (augment show -stage %s)", st.Dir, from, from)
	}
	if st.Manifest == nil && st.Unmerged > 0 {
		// Its records are in workers' parts only: -stage reads what a
		// merge made, as the plain show's step says.
		return fmt.Errorf("%s not merged (workers' parts not merged yet: run augment merge %s, then show -stage %s again)", st.Dir, dir, st.Dir)
	}
	// Records are JSON Lines: one compact object a line, for jq -c and
	// pandas' read_json(lines=True).
	lines := json.NewEncoder(stdout)
	lines.SetEscapeHTML(false)
	shown := 0
	err = run.Records(st, where, func(r *record.Record) bool {
		if id != "" && r.ID != id {
			return true
		}
		if *asJSON {
			lines.Encode(r)
		} else {
			if shown > 0 {
				fmt.Fprintln(stdout)
			}
			report.PrintRecord(stdout, r)
		}
		shown++
		return id == "" && shown < *n
	})
	if err != nil {
		return err
	}
	if shown == 0 {
		if id != "" && len(where) > 0 {
			found := false
			if err := run.Records(st, nil, func(r *record.Record) bool { found = r.ID == id; return !found }); err != nil {
				return err
			}
			if found {
				return fmt.Errorf("record %q in %s does not have the tags asked for (%s)", id, st.Dir, strings.Join(tags, ", "))
			}
		}
		unmerged := ""
		if st.Unmerged > 0 {
			// Shown: what the last merge made; the parts since may hold it.
			unmerged = fmt.Sprintf("; %s also has %d workers' part(s) not merged yet: run augment merge %s", st.Dir, st.Unmerged, dir)
		}
		if id != "" {
			return fmt.Errorf("no record %q in %s (run augment show %s %s for where it went)%s", id, st.Dir, id, dir, unmerged)
		}
		return fmt.Errorf("no record in %s matches%s", st.Dir, unmerged)
	}
	return nil
}

// cmdStats prints a run's tables: stages, rejects, the mix and lengths of
// the final records, the teacher's traffic.
func cmdStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stats", stderr, "[-json] [out]")
	asJSON := fs.Bool("json", false, "write JSON (for scripts)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	dir, err := runDirArg(pos, "stats")
	if err != nil {
		return err
	}
	rd, err := openRunDir(ctx, dir, outputFiles, stderr) // remote_dir.go: also s3://, gs://, azblob://
	if err != nil {
		return err
	}
	defer rd.close(false)
	run, err := report.Load(rd.Dir)
	if err != nil {
		return rd.err(err)
	}
	st, err := run.Stats()
	if err != nil {
		return rd.err(err)
	}
	stdout, flush := rd.output(stdout)
	defer flush()
	if *asJSON {
		return st.WriteJSON(stdout)
	}
	st.Print(stdout)
	return nil
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments (augment show ID -stage S out) and returns those.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
