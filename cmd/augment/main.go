// Command augment turns public tool-use datasets into verified fine-tuning
// data for LLaMA-Factory. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages"
	"github.com/augmentdata/augment/stages/llm"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	setGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// setGC sets the collector's target to gcPercent unless GOGC is set in
// the environment.
func setGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// gcPercent is the collector's target unless GOGC is set: the heap may
// grow to three times what is live between collections, not Go's twice.
// A run's live heap is small and does not grow with the input (a shard
// per stage per core, the memos' fixed budgets), so peak memory stays
// bounded, while collecting half as often saves up to a sixth of the CPU
// of a chain of small records (xlam's; README, "Memory and GOGC").
// GOGC and GOMEMLIMIT set in the environment take precedence.
const gcPercent = 200

const usage = `augment turns tool-use datasets into verified fine-tuning data.

Usage:
  augment run [flags] pipeline.yaml                    run the pipeline (resumes where it stopped)
  augment run --worker I/N pipeline.yaml               run as worker I of N sharing output.dir (also JOB_COMPLETION_INDEX
                                                       with --workers N, SLURM_ARRAY_TASK_ID); then augment merge
  augment merge [-set k=v …] pipeline.yaml             after the workers: stage manifests, exports' index files, report
  augment status [out]                                 per-stage progress over all workers sharing a run
  augment check [-set k=v …] pipeline.yaml             validate, show what would run, render prompts, estimate cost
  augment fake-llm [-addr 127.0.0.1:8089] [flags]      serve a fake OpenAI-compatible endpoint for dry runs
  augment cache stats|ls|get|verify [-dir out] [key]   inspect the request cache of a run (every worker segment)
  augment batch status [-dir out] | poll pipeline.yaml list or advance the batch jobs of teacher.mode batch
  augment report [out]                                 write out/report.html and each export's dataset card
  augment show ID [-stage S] [-json] out               one record's way through the stages, or as stage S holds it
  augment stats [-json] [out]                          per-stage counts, rejects, notes, mix, lengths, teacher usage
  augment version                                      print the version
  (status, stats, show and report also read an output on object storage: s3://, gs://, azblob://)

Environment: GOGC (200 unless set) and GOMEMLIMIT tune Go's collector; see the README, "Memory and GOGC".
Run "augment <command> -h" for a command's flags; flags may come before or after
the other arguments.

`

// Exit codes, mapped from errors in one place: exitCode. exitCodes is the
// table printed by the usage text and in the README ("Exit codes"), which
// TestREADMEExitCodes keeps equal to it.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitGuard     = 3
	exitWaiting   = 4
	exitInterrupt = 130
)

var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "ok"},
	{exitFailed, "the run failed; finished work is kept: run the same command again to resume (without that hint: part of a source could not be read, see `allow_partial`); from a reading command (check, status, stats, show, report, cache, batch status): what it was asked for is missing (no such record) or unreadable"},
	{exitUsage, "usage or config error, found before anything ran (flags, pipeline file, sources, output dir, api_key_env, the output dir held by another run, batch jobs still open under teacher.mode online) or when the stage it concerns starts (an export refusing offline-teacher text, a teacher model the endpoint does not serve, workers given other settings, a batch the provider does not know); nothing is to be resumed until it is fixed; a reading command given a directory that holds no run"},
	{exitGuard, "the teacher guard stopped the run (budget reached, error rate too high, credentials refused, or a 404 saying teacher.model is not served when the endpoint's model list could not tell before: fix teacher.model or the server's served name first), or it is done but for records a passing teacher failure rejected (in batch mode also when a later stage then submitted batches); resumable: a rerun asks again for what is missing"},
	{exitWaiting, "waiting for batch answers (teacher.mode batch): finished work is kept; run the same command again once the batches are done"},
	{exitInterrupt, "interrupted (Ctrl-C, SIGTERM); resumable"},
}

// usageText is usage with the exit codes.
func usageText() string {
	var b strings.Builder
	b.WriteString(usage + "Exit codes:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %3d  %s\n", e.code, e.meaning)
	}
	return b.String()
}

// usageHint follows the message of a usage error in the command args:
// the command's lines of the usage text and how to get its flags, as
// cmd/go does; the whole usage text when no command was given.
func usageHint(args []string) string {
	if len(args) == 0 {
		return "\n" + usageText()
	}
	var lines []string
	for line := range strings.Lines(usage) {
		switch {
		case strings.HasPrefix(line, "  augment "+args[0]+" "):
			lines = append(lines, line)
		case len(lines) > 0 && strings.HasPrefix(line, "   "):
			lines = append(lines, line) // the line goes on
		case len(lines) > 0:
			return "Usage:\n" + strings.Join(lines, "") + fmt.Sprintf("Run \"augment %s -h\" for details.\n", args[0])
		}
	}
	return "Run \"augment help\" for the commands.\n"
}

// usageError marks errors in how augment was invoked.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, args, stdout, stderr)
	code := exitCode(ctx, err)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		if code == exitInterrupt && ctx.Err() != nil {
			// The stop was the signal's: what was cut off (a record, a
			// request) is not what went wrong.
			err = interrupted{err}
		}
		fmt.Fprintf(stderr, "augment: %v\n", err)
		switch code {
		case exitUsage:
			if errors.As(err, new(usageError)) {
				fmt.Fprint(stderr, usageHint(args))
			}
		case exitFailed, exitGuard, exitInterrupt:
			var partial *stages.PartialError
			var ws *workSaved
			if errors.As(err, &ws) && !errors.As(err, &partial) { // a PartialError: the same run fails the same way
				fmt.Fprintln(stderr, "augment: finished work is kept; run the same command again to resume")
			}
		case exitWaiting:
			fmt.Fprintln(stderr, "augment: finished work is kept; run the same command again once the batches are done (augment batch status shows them)")
		}
	}
	return code
}

// interrupted is the error of a command stopped by Ctrl-C or SIGTERM.
type interrupted struct{ err error }

func (e interrupted) Error() string { return "interrupted" }
func (e interrupted) Unwrap() error { return e.err }

// workSaved marks the error of a command that does a run's work (run,
// merge, batch poll): what it finished is kept, and running it again goes
// on from there, which the failure's message says. The reading commands'
// errors are not marked.
type workSaved struct{ err error }

func (e *workSaved) Error() string { return e.err.Error() }
func (e *workSaved) Unwrap() error { return e.err }

// savesWork marks err, when there is one and the command got as far as
// doing work, as workSaved.
func savesWork(err error) error {
	if err == nil || errors.As(err, new(*notStarted)) {
		return err
	}
	return &workSaved{err}
}

// notStarted marks the error of a run or merge that stopped before it ran
// anything (the output or the teacher could not be opened): there is
// nothing of its own to resume.
type notStarted struct{ err error }

func (e *notStarted) Error() string { return e.err.Error() }
func (e *notStarted) Unwrap() error { return e.err }

func exitCode(ctx context.Context, err error) int {
	var cfgErr *stages.ConfigError
	var busy *stages.BusyError
	var uErr usageError
	var modelErr *llm.ModelError // also a stage's prompt too long for the served context
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uErr), errors.As(err, &cfgErr), errors.As(err, &busy), errors.As(err, &modelErr),
		errors.Is(err, report.ErrNotKept),  // show -stage of a stage with keep: false
		errors.Is(err, manifests.ErrNoRun): // a reading command pointed at no run
		return exitUsage
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupt
	case llm.IsWaiting(err):
		return exitWaiting
	case llm.IsFatal(err):
		return exitGuard
	default:
		return exitFailed
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command"} // run prints the usage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run":
		return savesWork(cmdRun(ctx, args, stdout, stderr))
	case "check":
		return cmdCheck(ctx, args, stdout, stderr)
	case "merge":
		return savesWork(cmdMerge(ctx, args, stdout, stderr))
	case "status":
		return cmdStatus(ctx, args, stdout, stderr)
	case "fake-llm":
		return cmdFakeLLM(ctx, args, stdout, stderr)
	case "cache":
		return cmdCache(ctx, args, stdout, stderr)
	case "batch":
		return cmdBatch(ctx, args, stdout, stderr)
	case "report":
		return cmdReport(ctx, args, stdout, stderr)
	case "show":
		return cmdShow(ctx, args, stdout, stderr)
	case "stats":
		return cmdStats(ctx, args, stdout, stderr)
	case "version":
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprintln(stderr, "Usage: augment version\n\nPrints augment's version.")
			return flag.ErrHelp
		}
		if len(args) > 0 {
			return usageError{fmt.Sprintf("version: unexpected argument %q", args[0])}
		}
		fmt.Fprintf(stdout, "augment %s\n", version)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText())
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// listenFlag listens on addr, the value of flag -name; an address that
// cannot be bound is the flag's mistake (exit 2).
func listenFlag(name, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &stages.ConfigError{Problems: []string{"-" + name + ": " + err.Error()}}
	}
	return ln, nil
}

// newFlags returns the flag set of command name, whose Usage prints the
// command's usage line and its flags, if it has any, to stderr. Parse its
// arguments with parseFlags.
func newFlags(name string, stderr io.Writer, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: augment %s %s\n", name, synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(stderr, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args with fs. -h prints the command's usage (fs.Usage)
// and returns flag.ErrHelp; a bad flag is a usageError, which run prints
// once, with the command's usage line (the flag package would print it
// too, and the whole usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	case err != nil:
		return usageError{fs.Name() + ": " + err.Error()}
	}
	return nil
}

// parse parses flags, before or after the pipeline file, and returns that
// single argument.
func parsePipelineArgs(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError{fmt.Sprintf("%s: want one pipeline file, got %d arguments", fs.Name(), len(pos))}
	}
	return pos[0], nil
}

// isHelp reports whether arg asks for a command's usage.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// loadPipeline parses a command's flags and loads its one pipeline file
// with the -set overrides (sets is filled by the parse, hence a pointer).
func loadPipeline(fs *flag.FlagSet, args []string, sets *setFlags) (*stages.Pipeline, error) {
	path, err := parsePipelineArgs(fs, args)
	if err != nil {
		return nil, err
	}
	return stages.Load(path, *sets...)
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr, "[flags] pipeline.yaml")
	explain := fs.Bool("explain", false, "log why each shard or request is not served from earlier work")
	quiet := fs.Bool("quiet", false, "no progress output, only warnings and errors")
	verbose := fs.Bool("v", false, "debug logging (each skipped shard, each retry)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	memprofile := fs.String("memprofile", "", "write an allocation profile of the run to this file (go tool pprof -sample_index=alloc_space or alloc_objects); samples every 4 KiB allocated")
	traceFile := fs.String("trace", "", "write a Go execution trace to this file (go tool trace): where the cores sit idle")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics during the run (e.g. 127.0.0.1:9464; port 0 picks one, printed to stderr)")
	var sets setFlags
	fs.Var(&sets, "set", "override a pipeline value: key.path=value (repeatable), e.g. -set teacher.provider=offline; the index one past a list's end adds an item")
	wf := workerFlags(fs) // merge.go
	path, err := parsePipelineArgs(fs, args)
	if err != nil {
		return err
	}
	worker, err := wf.detect()
	if err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		// Finer than the default 512 KiB, so that a run's small per-record
		// allocations are counted well; set before the run allocates.
		runtime.MemProfileRate = 4096
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		defer func() {
			// After the run: the profile holds every allocation it made.
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintln(stderr, "augment: memprofile:", err)
			}
			f.Close()
		}()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	p, err := stages.Load(path, sets...)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	switch {
	case *verbose:
		level = slog.LevelDebug
	case *quiet:
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o := stages.Options{Version: version, Log: log, Explain: *explain, Worker: worker}
	if !*quiet {
		o.Progress = stderr
	}
	var metrics net.Listener
	if *metricsAddr != "" {
		// Bound before the run dir is touched: a bad address changes nothing.
		if metrics, err = listenFlag("metrics-addr", *metricsAddr); err != nil {
			return err
		}
	}
	r, err := stages.NewRunner(p, o)
	if err != nil {
		if metrics != nil {
			metrics.Close()
		}
		return &notStarted{err}
	}
	if metrics != nil {
		defer serveMetrics(metrics, r.MetricsHandler(), stderr)()
	}
	rep, err := r.Run(ctx)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if rep != nil {
		stages.PrintReport(stdout, rep)
	}
	return err
}

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", stderr, "[-set key.path=value …] pipeline.yaml")
	var sets setFlags
	fs.Var(&sets, "set", "override a pipeline value: key.path=value (repeatable)")
	p, err := loadPipeline(fs, args, &sets)
	if err != nil {
		return err
	}
	return stages.Check(ctx, p, stages.Options{Version: version}, stdout)
}

// setFlags collects repeated -set flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }
