// Command bench measures the deterministic chain of the augment binary on
// generated dumps, side by side with a plain Python script doing the same
// conversion (convert.py beside this file): `make bench` runs it.
//
// For each raw format (glaive, toolace, xlam; JSON arrays, as the datasets
// ship) it writes a dump of about -mb megabytes from the real rows in
// ../shared/data/derived, each row's user text marked with its copy number
// so no two rows are identical. Then, for -rounds rounds, alternating which
// goes first (the machine is shared, so A/B alternation spreads other load
// over both), it runs
//
//   - augment: ingest → decision_tokens → export (jsonl), as a child process;
//   - python: convert.py on the same dump, single core;
//
// (augment with keep: false on ingest, on the short chain, and on the
// stages between ingest and the export, unless -drop=false) and reports, per format, the median wall time, input MB/s, the CPU seconds
// (user+sys) per input MB — the fair figure on a loaded machine — and the
// child's peak RSS. With -double it runs augment as many rounds more on a
// dump twice the size, to show that memory stays flat (medians compared);
// with -full it runs the fuller chain ingest → meta_tool → decision_tokens
// → negatives → export for as many rounds. The last table holds the figures against the floors of issue
// 15. With -baseline (an earlier augment binary) it alternates that one too,
// on both chains, for before/after figures, and says whether both exports
// have the same bytes.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	mb := flag.Float64("mb", 100, "size of each format's dump in MB")
	rounds := flag.Int("rounds", 3, "A/B rounds per format (medians are reported)")
	double := flag.Bool("double", true, "also run augment on dumps twice the size (peak RSS must stay flat)")
	full := flag.Bool("full", true, "also run the fuller chain ingest → meta_tool → decision_tokens → negatives → export")
	bin := flag.String("augment", "bin/augment", "augment binary")
	py := flag.String("python", "python3", "Python interpreter for convert.py (empty: skip the baseline)")
	script := flag.String("script", "testdata/bench/convert.py", "the Python baseline")
	shared := flag.String("shared", "../shared/data", "the shared data directory")
	only := flag.String("formats", "glaive,toolace,xlam", "formats to measure, comma-separated")
	work := flag.String("work", "", "work directory, kept afterwards (default: a temp dir, removed as the run goes)")
	profile := flag.String("cpuprofile", "", "write augment's CPU profile of the first round of each format to DIR/<format>.pprof")
	drop := flag.Bool("drop", true, "run -augment with keep: false before the export: on ingest for the short chain (-set ingest.keep=false) and on the stages between ingest and the export (-set stages.N.keep=false), as a user who wants only the export would; -drop=false keeps every stage's shards; a -baseline always keeps every stage")
	baseline := flag.String("baseline", "", "an earlier augment binary to alternate with -augment on both chains (before/after), its export bytes compared")
	flag.Parse()
	b := &bench{mb: *mb, rounds: *rounds, shared: *shared, py: *py, profile: *profile, drop: *drop}
	if *baseline != "" {
		var err error
		if b.baseline, err = filepath.Abs(*baseline); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if b.py != "" {
		if _, err := exec.LookPath(b.py); err != nil {
			fmt.Fprintf(os.Stderr, "bench: no %s (%v): measuring augment alone\n", b.py, err)
			b.py = ""
		}
	}
	var err error
	if b.bin, err = filepath.Abs(*bin); err == nil {
		b.script, err = filepath.Abs(*script)
	}
	if err == nil && b.profile != "" {
		b.profile, err = filepath.Abs(b.profile)
	}
	if err == nil {
		err = b.run(strings.Split(*only, ","), *double, *full, *work)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type format struct{ name, file string }

var formats = []format{
	{"glaive", "glaive_v2_format_glaive_toolcall_%s_demo.json"},
	{"toolace", "toolace_format_glaive_toolcall_%s_demo.json"},
	{"xlam", "xlam_format_glaive_toolcall_%s_demo.json"},
}

type bench struct {
	mb                      float64
	rounds                  int
	bin, script, py, shared string
	baseline                string // an earlier augment, or ""
	profile                 string
	keep                    bool // keep each format's dumps and outputs (-work given)
	drop                    bool // -augment runs with keep: false before the export (-drop): ingest's too on the short chain
	printed                 bool
}

// A run is one measured child process.
type run struct {
	wall, cpu float64 // seconds; cpu is user+sys
	rss       int64   // peak, KiB
}

// summary is one format's line of the last table.
type summary struct {
	format                string
	mb, mbDouble          float64
	augment, python       run
	baseline              run
	sameAsBaseline        bool // the export bytes equal the baseline's
	double, full          run
	fullBaseline          run
	sameFull              bool // the fuller chain's export bytes equal the baseline's
	linesSame, linesTotal int
}

const (
	chainShort = "decision_tokens → export"
	chainFull  = "meta_tool → decision_tokens → negatives → export"
)

func (b *bench) run(only []string, double, full bool, work string) error {
	if _, err := os.Stat(filepath.Join(b.shared, "derived")); err != nil {
		return fmt.Errorf("needs %s/derived (the shared data): %w", b.shared, err)
	}
	var err error
	b.keep = work != ""
	if work == "" {
		if work, err = os.MkdirTemp("", "augment-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	if b.profile != "" {
		if err := os.MkdirAll(b.profile, 0o755); err != nil {
			return err
		}
	}
	var sums []summary
	for _, f := range formats {
		if !slices.Contains(only, f.name) {
			continue
		}
		s, err := b.format(f, work, double, full)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		sums = append(sums, s)
	}
	b.verdict(sums, double, full)
	return nil
}

// format measures one format and returns its medians.
func (b *bench) format(f format, work string, double, full bool) (summary, error) {
	s := summary{format: f.name}
	dir := filepath.Join(work, f.name)
	size, err := generate(b.shared, dir, f, int64(b.mb*1e6))
	if err != nil {
		return s, err
	}
	s.mb = float64(size) / 1e6
	if err := writePipelines(dir, f.name); err != nil {
		return s, err
	}
	if s.augment, s.baseline, s.python, err = b.alternate(f.name, dir, "short.yaml", chainShort, s.mb, true); err != nil {
		return s, err
	}
	if b.baseline != "" {
		if s.sameAsBaseline, err = sameExport(dir, "02-export"); err != nil {
			return s, err
		}
	}
	if b.py != "" {
		same, total, err := compareLines(filepath.Join(dir, "out", "02-export", "augment_export"), filepath.Join(dir, "python.jsonl"))
		if err != nil {
			return s, err
		}
		s.linesSame, s.linesTotal = same, total
	}
	if full {
		if s.full, s.fullBaseline, _, err = b.alternate(f.name, dir, "full.yaml", chainFull, s.mb, false); err != nil {
			return s, err
		}
		if b.baseline != "" {
			if s.sameFull, err = sameExport(dir, "04-export"); err != nil {
				return s, err
			}
		}
	}
	if double {
		ddir := filepath.Join(work, f.name+"-2x")
		size, err := generate(b.shared, ddir, f, int64(2*b.mb*1e6))
		if err != nil {
			return s, err
		}
		s.mbDouble = float64(size) / 1e6
		if err := writePipelines(ddir, f.name); err != nil {
			return s, err
		}
		// As many rounds as at the first size: a peak RSS moves with the
		// collector's timing from run to run (ToolACE's short chain gave
		// 220–287 MiB in five runs), so one run against a median would
		// flag noise as growth.
		var rs []run
		for range b.rounds {
			r, err := b.augment(ddir, "short.yaml", false)
			if err != nil {
				return s, err
			}
			rs = append(rs, r)
			b.line(f.name, chainShort, s.mbDouble, "augment", r)
		}
		s.double = median(rs)
		if !b.keep {
			os.RemoveAll(ddir)
		}
	}
	if !b.keep {
		os.RemoveAll(dir)
	}
	return s, nil
}

// alternate runs pipeline in dir for b.rounds rounds — augment, the
// baseline binary when there is one, and (short chain only) the Python
// script — alternating which goes first, and returns each one's medians.
// augment's first round of the short chain is the profiled one.
func (b *bench) alternate(format, dir, pipeline, chain string, mb float64, short bool) (ours, base, theirs run, err error) {
	var o, bs, t []run
	for i := range b.rounds {
		steps := []func() error{
			func() error {
				r, err := b.augment(dir, pipeline, short && i == 0)
				o = append(o, r)
				b.line(format, chain, mb, "augment", r)
				return err
			},
		}
		if b.baseline != "" {
			steps = append(steps, func() error {
				r, err := b.runIn(b.baseline, dir, pipeline, "out-baseline", false)
				bs = append(bs, r)
				b.line(format, chain, mb, "baseline", r)
				return err
			})
		}
		if short && b.py != "" {
			steps = append(steps, func() error {
				r, err := b.python(dir, format)
				t = append(t, r)
				b.line(format, chain, mb, "python", r)
				return err
			})
		}
		if i%2 == 1 {
			slices.Reverse(steps)
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return run{}, run{}, run{}, err
			}
		}
	}
	return median(o), median(bs), median(t), nil
}

// sameExport reports whether the export in the stage dir export of out/
// and of out-baseline/ hold the same bytes.
func sameExport(dir, export string) (bool, error) {
	ours, err := exportHash(filepath.Join(dir, "out", export))
	if err != nil {
		return false, err
	}
	theirs, err := exportHash(filepath.Join(dir, "out-baseline", export))
	return ours == theirs, err
}

func (b *bench) line(format, chain string, mb float64, tool string, r run) {
	if !b.printed {
		fmt.Printf("%-8s %-48s %8s %-8s %7s %7s %7s %9s %8s\n", "format", "chain after ingest", "input MB", "tool", "wall s", "MB/s", "CPU s", "CPU ms/MB", "RSS MiB")
		b.printed = true
	}
	fmt.Printf("%-8s %-48s %8.1f %-8s %7.2f %7.1f %7.2f %9.2f %8.0f\n", format, chain, mb, tool, r.wall, mb/r.wall, r.cpu, 1000*r.cpu/mb, float64(r.rss)/1024)
}

// verdict prints the table of issue 15 with its floors.
func (b *bench) verdict(sums []summary, double, full bool) {
	fmt.Println()
	fmt.Printf("medians of %d rounds; floors: ≥ 100 MB/s, ≥ 5× Python's wall, CPU ≤ 0.5× Python's, RSS ≤ 512 MiB and flat at 2×, full chain ≥ 60 MB/s\n", b.rounds)
	if b.drop {
		fmt.Println("augment ran with -drop: ingest (short chain) and the stages between ingest and the export kept no Parquet shards (keep: false)")
	} else {
		fmt.Println("augment ran with -drop=false: every stage kept its Parquet shards")
	}
	fmt.Printf("%-8s %12s %14s %16s %22s %12s %14s %14s\n", "dump", "augment MB/s", "vs Python wall", "CPU ÷ Python CPU", "peak RSS MiB (Python)", "RSS at 2×", "full MB/s", "same lines")
	for _, s := range sums {
		mark := func(ok bool) string {
			if ok {
				return " "
			}
			return "!"
		}
		rate := s.mb / s.augment.wall
		cell := func(v float64, format string, ok bool) string { return fmt.Sprintf(format, v) + mark(ok) }
		speed, cpu, same, py := "-", "-", "-", "-"
		if s.python.wall > 0 {
			speed = cell(s.python.wall/s.augment.wall, "%.1f×", s.python.wall/s.augment.wall >= 5)
			cpu = cell(s.augment.cpu/s.python.cpu, "%.2f", s.augment.cpu/s.python.cpu <= 0.5)
			same = fmt.Sprintf("%d/%d", s.linesSame, s.linesTotal)
			py = fmt.Sprintf("%.0f", float64(s.python.rss)/1024)
		}
		rss := cell(float64(s.augment.rss)/1024, "%.0f", s.augment.rss <= 512<<10)
		dbl, fullRate := "-", "-"
		if double {
			dbl = cell(float64(s.double.rss)/1024, "%.0f", s.double.rss <= 512<<10 && float64(s.double.rss) <= 1.25*float64(s.augment.rss))
		}
		if full {
			fullRate = cell(s.mb/s.full.wall, "%.1f", s.mb/s.full.wall >= 60)
		}
		fmt.Printf("%-8s %12s %14s %16s %22s %12s %14s %14s\n", s.format, cell(rate, "%.1f", rate >= 100), speed, cpu,
			rss+" ("+py+")", dbl, fullRate, same)
	}
	fmt.Println("! marks a figure below its floor; same lines: output lines equal byte for byte between augment and the script")
	if b.baseline == "" {
		return
	}
	fmt.Println()
	fmt.Printf("against the baseline %s (medians):\n", b.baseline)
	fmt.Printf("%-8s %-7s %16s %16s %12s %14s\n", "dump", "chain", "CPU s baseline", "CPU s augment", "CPU ratio", "same export")
	for _, s := range sums {
		fmt.Printf("%-8s %-7s %16.2f %16.2f %12.2f %14v\n", s.format, "short", s.baseline.cpu, s.augment.cpu, s.augment.cpu/s.baseline.cpu, s.sameAsBaseline)
		if full {
			fmt.Printf("%-8s %-7s %16.2f %16.2f %12.2f %14v\n", s.format, "fuller", s.fullBaseline.cpu, s.full.cpu, s.full.cpu/s.fullBaseline.cpu, s.sameFull)
		}
	}
}

func median(rs []run) run {
	if len(rs) == 0 {
		return run{}
	}
	pick := func(f func(run) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return run{
		wall: pick(func(r run) float64 { return r.wall }),
		cpu:  pick(func(r run) float64 { return r.cpu }),
		rss:  int64(pick(func(r run) float64 { return float64(r.rss) })),
	}
}

// pipelineStages are the stages of each pipeline writePipelines writes
// (chainShort, chainFull), the export last.
var pipelineStages = map[string][]string{
	"short.yaml": {"decision_tokens: {}", "export: {format: jsonl}"},
	"full.yaml":  {"meta_tool: {}", "decision_tokens: {}", "negatives: {target: token}", "export: {format: jsonl}"},
}

// writePipelines writes short.yaml and full.yaml for the dump of format in
// dir. Both write to out/, which each run starts without.
func writePipelines(dir, format string) error {
	for name, stages := range pipelineStages {
		y := fmt.Sprintf("seed: 1\noutput: {dir: out, shard_size: 5000}\nsources:\n  - {name: %s, path: %s.json, format: %s}\nstages:\n", format, format, format)
		for _, st := range stages {
			y += "  - " + st + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(y), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// augment runs one pipeline from scratch.
func (b *bench) augment(dir, pipeline string, profile bool) (run, error) {
	var set []string
	if b.drop {
		for i := range len(pipelineStages[pipeline]) - 1 { // the stages before the export
			set = append(set, "-set", fmt.Sprintf("stages.%d.keep=false", i))
		}
		if pipeline == "short.yaml" {
			// full.yaml's meta_tool reads the tool library, known once
			// ingest ends: there ingest keeps its shards (augment refuses
			// ingest: {keep: false} before it).
			set = append(set, "-set", "ingest.keep=false")
		}
	}
	return b.runIn(b.bin, dir, pipeline, "out", profile, set...)
}

// runIn runs one pipeline from scratch with the augment binary bin, writing
// to the output dir out, with set, more -set flags.
func (b *bench) runIn(bin, dir, pipeline, out string, profile bool, set ...string) (run, error) {
	if err := os.RemoveAll(filepath.Join(dir, out)); err != nil {
		return run{}, err
	}
	args := append([]string{"run", "-quiet", "-set", "output.dir=" + out}, set...)
	if profile && b.profile != "" {
		args = append(args, "-cpuprofile", filepath.Join(b.profile, filepath.Base(dir)+".pprof"))
	}
	return measure(dir, nil, bin, append(args, pipeline)...)
}

// exportHash hashes the export's data files in name order.
func exportHash(exportDir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(exportDir, "augment_export", "part-*.jsonl"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no export in %s (%v)", exportDir, err)
	}
	slices.Sort(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// python runs the baseline script on the dump.
func (b *bench) python(dir, format string) (run, error) {
	return measure(dir, []string{"PYTHONHASHSEED=0"}, b.py, b.script, format, format+".json", "python.jsonl")
}

// measure runs a command and returns its wall time, CPU time and peak RSS.
func measure(dir string, env []string, name string, args ...string) (run, error) {
	resetPeakRSS()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return run{}, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	r := run{wall: time.Since(start).Seconds()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rss = ru.Maxrss
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return r, nil
}

// resetPeakRSS lowers this process's recorded peak RSS to its current RSS.
// A child's peak RSS (rusage maxrss) counts the memory of the process that
// started it, as it was up to the exec: without this, the memory this
// program used generating a dump would show as the child's.
func resetPeakRSS() {
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // Linux: reset VmHWM; elsewhere nothing
}

// compareLines counts the lines of the script's output that augment's
// export also holds (as a multiset: a row one side rejects or skips does not
// shift the others).
func compareLines(exportDir, pyOut string) (same, total int, err error) {
	files, err := filepath.Glob(filepath.Join(exportDir, "part-*.jsonl"))
	if err != nil {
		return 0, 0, err
	}
	ours := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, 0, err
		}
		for _, l := range strings.SplitAfter(string(b), "\n") {
			ours[l]++
		}
	}
	theirs, err := os.ReadFile(pyOut)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.SplitAfter(string(theirs), "\n") {
		if l == "" {
			continue
		}
		total++
		if ours[l] > 0 {
			ours[l]--
			same++
		}
	}
	return same, total, nil
}

// generate writes the dump of format f, about size bytes, into dir and
// returns its size. Rows cycle through the real rows (en and zh), each
// copy's user text marked with its copy number.
func generate(shared, dir string, f format, size int64) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var rows []map[string]any
	for _, lang := range []string{"en", "zh"} {
		b, err := os.ReadFile(filepath.Join(shared, "derived", fmt.Sprintf(f.file, lang)))
		if err != nil {
			return 0, err
		}
		var part []map[string]any
		if err := json.Unmarshal(b, &part); err != nil {
			return 0, err
		}
		rows = append(rows, part...)
	}
	out, err := os.Create(filepath.Join(dir, f.name+".json"))
	if err != nil {
		return 0, err
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	w.WriteString("[\n")
	written := int64(2)
	for i := 0; written < size; i++ {
		row := rows[i%len(rows)]
		mark := fmt.Sprintf(" (#%d)", i)
		c := map[string]any{}
		for k, v := range row {
			c[k] = v
		}
		switch f.name {
		case "toolace":
			var turns []any
			for _, t := range row["conversations"].([]any) {
				m := t.(map[string]any)
				if m["from"] == "user" {
					m = map[string]any{"from": "user", "value": m["value"].(string) + mark}
				}
				turns = append(turns, m)
			}
			c["conversations"] = turns
		case "glaive":
			c["chat"] = strings.Replace(row["chat"].(string), "\n\n\nASSISTANT:", mark+"\n\n\nASSISTANT:", 1)
		case "xlam":
			c["query"] = row["query"].(string) + mark
			c["id"] = i
		}
		b, err := json.Marshal(c)
		if err != nil {
			return 0, err
		}
		if i > 0 {
			w.WriteString(",\n")
			written += 2
		}
		w.Write(b)
		written += int64(len(b))
	}
	w.WriteString("\n]\n")
	if err := w.Flush(); err != nil {
		return 0, err
	}
	fi, err := out.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
