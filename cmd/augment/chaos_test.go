package main

// The chaos suite (issue 8): the augment command, as a child process,
// against hostile faults and hostile input. `make chaos` runs the full form
// (AUGMENT_CHAOS=full, with bin/augment as AUGMENT_BIN); `go test` runs a
// short form of the same cases.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// chaosFull reports whether the full form runs (make chaos).
func chaosFull() bool { return os.Getenv("AUGMENT_CHAOS") == "full" }

// chaosCommand is e2eCommand, or the built binary AUGMENT_BIN when set.
func chaosCommand(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	bin := os.Getenv("AUGMENT_BIN")
	if bin == "" {
		return e2eCommand(t, dir, args...)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("AUGMENT_BIN: %v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// chaosRun runs augment to its end and returns its exit code, output and
// peak memory in KiB (0 where /proc is absent). The peak is read from
// /proc/PID/status (VmHWM) while it runs: the rusage figure would include
// the memory of this test process, which the child's address space is
// until it execs.
func chaosRun(t *testing.T, dir string, args ...string) (code int, stdout, stderr string, maxRSS int64) {
	t.Helper()
	cmd, out, errOut := chaosCommand(t, dir, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-tick.C:
			if b, rerr := os.ReadFile(status); rerr == nil {
				for _, line := range strings.Split(string(b), "\n") {
					var kb int64
					if _, serr := fmt.Sscanf(line, "VmHWM: %d kB", &kb); serr == nil {
						maxRSS = max(maxRSS, kb)
					}
				}
			}
		}
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("augment %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String(), maxRSS
}

// chaosBalanced checks every stage manifest under out: each shard and the
// totals conserve records.
func chaosBalanced(t *testing.T, out string) {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(out, "*", "manifest.json"))
	if len(ms) == 0 {
		t.Errorf("no manifest under %s", out)
	}
	for _, path := range ms {
		m, err := manifests.Read[manifests.Stage](path)
		if err != nil || m == nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for _, sh := range m.Shards {
			if err := sh.Balanced(); err != nil {
				t.Errorf("%s shard %s: %v", m.Name, sh.Name, err)
			}
		}
		if err := m.Totals.Balanced(); err != nil {
			t.Errorf("%s totals: %v", m.Name, err)
		}
	}
}

// chaosTempFiles lists the temporary files left anywhere under dir.
func chaosTempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasPrefix(d.Name(), ".tmp-") || strings.HasSuffix(d.Name(), ".tmp")) {
			rel, _ := filepath.Rel(dir, path)
			left = append(left, rel)
		}
		return nil
	})
	return left
}

// TestChaosTeacherFaults runs the reason stage and an export through the
// augment command against a fake teacher that fails 20 % and 60 % of its
// requests in every way it knows (429 with Retry-After, 500/502/503, hangs
// past the client timeout, truncated answers, cut JSON bodies, dropped
// connections). Each run is killed with SIGKILL at a seeded random number
// of answers, one of them interrupted with SIGINT instead, and the command
// is run again until it finishes (a run the guard stops, exit 3, or that
// fails with the resume hint, exit 1, is resumed the same way). Then:
//   - the data files are byte for byte those of a run without faults or
//     kills (e2eSameData);
//   - the valid answers the fake gave over all runs are at most those of
//     the clean run plus max_in_flight for each run that ended before
//     finishing (only requests holding an endpoint slot can be lost: the
//     cache keeps every answer received before its slot is released);
//   - every manifest conserves records, nothing under a final name is
//     partial, and no temporary file is left.
func TestChaosTeacherFaults(t *testing.T) {
	rows, shardSize, kills := 120, 20, 3
	if chaosFull() {
		rows, shardSize, kills = 600, 50, 8
	}
	const maxInFlight = 4
	dump := e2eRows(rows)
	teacher := `  timeout: 250ms
  max_retries: 20
  retry_base: 2ms
  retry_max: 50ms
  breaker_cooldown: 20ms`
	// The retry budgets make it very unlikely that injected faults alone
	// exhaust them (60 %: 0.6^21 per request, 0.1^8 per truncated call
	// turn), so any record they leave rejected is a finding. With the
	// reason stage's default 3 attempts, one in about 1000 call turns at
	// 60 % ends as llm_truncated, a final reject (the answer was cut off).
	pipe := e2ePipeline{MaxInFlight: maxInFlight, ShardSize: shardSize, Teacher: teacher, Reason: ", attempts: 8"}
	cfg := fakellm.Config{Latency: fakellm.Duration(2 * time.Millisecond)}

	cleanFake, cleanDir := e2eSetup(t, cfg, pipe, dump)
	start := time.Now()
	if code, stdout, stderr, _ := chaosRun(t, cleanDir, "run", "-quiet", "pipeline.yaml"); code != 0 {
		t.Fatalf("clean run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	cleanWall := time.Since(start)
	clean := cleanFake.Counters()
	cleanData := e2eDataFiles(t, filepath.Join(cleanDir, "out"))

	for _, rate := range []float64{0.20, 0.60} {
		t.Run(fmt.Sprintf("faults %.0f%%", rate*100), func(t *testing.T) {
			each := rate / 6
			fcfg := cfg
			fcfg.Seed = uint64(rate * 100)
			fcfg.Faults = fakellm.Faults{RateLimit: each, RetryAfter: fakellm.Duration(20 * time.Millisecond),
				ServerError: each, Hang: each, Truncate: each, InvalidJSON: each, Drop: each}
			fake, dir := e2eSetup(t, fcfg, pipe, dump)
			out := filepath.Join(dir, "out")
			rng := rand.New(rand.NewPCG(uint64(rate*1000), 8))
			sigint := rng.IntN(kills + 1) // which signal is a SIGINT
			start := time.Now()
			var runs, killed, interrupted, guarded, unfinished int
			var inFlightAtKills int64
			finished := false
			for runs < kills+1+30 && !finished {
				runs++
				signal := syscall.Signal(0)
				var at int64
				if n := killed + interrupted; n <= kills {
					signal = syscall.SIGKILL
					if n == sigint {
						signal = syscall.SIGINT
					}
					span := max(1, int(clean.Chat)/(kills+2))
					at = fake.Counters().Answered + 1 + int64(rng.IntN(span))
				}
				code, sent, inFlight, hung, stderr := chaosSignalAt(t, dir, fake, at, signal)
				if hung {
					t.Fatalf("run %d made no request for %v; stderr:\n%s", runs, chaosStall, stderr)
				}
				switch {
				case sent && signal == syscall.SIGKILL:
					killed++
					inFlightAtKills += inFlight
					unfinished++
				case sent:
					interrupted++
					inFlightAtKills += inFlight
					unfinished++
					if code != exitInterrupt || !strings.Contains(stderr, "finished work is kept") {
						t.Errorf("SIGINT: exit %d, want %d and the resume hint; stderr:\n%s", code, exitInterrupt, stderr)
					}
				case code == 0:
					finished = true
				case code == exitGuard, code == exitFailed && strings.Contains(stderr, "run the same command again to resume"):
					guarded++ // stopped by the teacher guard, or a failure to resume from
					unfinished++
				default:
					t.Fatalf("run %d: exit %d; stderr:\n%s", runs, code, stderr)
				}
				e2eIntact(t, out)
			}
			if !finished {
				t.Fatalf("not finished after %d runs", runs)
			}
			wall := time.Since(start)
			c := fake.Counters()
			paid := c.Answered - c.Faults[fakellm.FaultTruncate]
			t.Logf("%.0f%% faults: %d runs (%d SIGKILL, %d SIGINT, %d stopped by the guard or failed, resumable), %d rows; "+
				"clean run %d requests in %v; chaos: %d requests, %d valid answers, faults %v, %d in flight at the signals; wall %v",
				rate*100, runs, killed, interrupted, guarded, rows, clean.Chat, cleanWall.Round(time.Millisecond),
				c.Chat, paid, c.Faults, inFlightAtKills, wall.Round(time.Millisecond))
			if killed != kills || interrupted != 1 {
				t.Errorf("%d kills and %d interrupts happened, want %d and 1 (the runs ended before the signal)", killed, interrupted, kills)
			}
			if limit := clean.Chat + int64(unfinished*maxInFlight); paid > limit {
				t.Errorf("%d valid answers over all runs; at most the clean run's %d plus %d × max_in_flight %d may repeat",
					paid, clean.Chat, unfinished, maxInFlight)
			}
			if left := chaosTempFiles(t, dir); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
			chaosBalanced(t, out)
			e2eIntact(t, out)
			// A record the teacher failed on transiently (its retries spent,
			// e.g. while the breaker had every endpoint out of rotation) is
			// not a final reject: the run ends with exit 3 and the next one
			// asks again (issue 8 point 2). Rejects left are logged to help
			// read a difference.
			for _, r := range chaosRejects(t, out) {
				t.Logf("rejected: %s", r)
			}
			e2eSameData(t, cleanData, e2eDataFiles(t, out))
		})
	}
}

// chaosRejects lists the rejected records of the stages after ingest as
// "stage: id reason: detail".
func chaosRejects(t *testing.T, out string) []string {
	t.Helper()
	var rejs []string
	files, _ := filepath.Glob(filepath.Join(out, "0[1-9]-*", "rejects-*.jsonl"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r struct{ ID, Reason, Detail string }
			json.Unmarshal([]byte(line), &r)
			rejs = append(rejs, fmt.Sprintf("%s: %s %s: %.300s", filepath.Base(filepath.Dir(f)), r.ID, r.Reason, r.Detail))
		}
	}
	return rejs
}

// chaosStall is how long a run may go without the fake seeing a request
// before it counts as hung.
const chaosStall = 60 * time.Second

// chaosSignalAt runs augment in dir; when signal is not 0 it sends it once
// the fake has answered at requests. It returns the exit code, whether the
// signal was sent (the run may end first), the requests in flight at the
// fake when it was, whether the run hung, and stderr.
func chaosSignalAt(t *testing.T, dir string, fake *fakellm.Server, at int64, signal syscall.Signal) (code int, sent bool, inFlight int64, hung bool, stderr string) {
	t.Helper()
	cmd, _, errOut := chaosCommand(t, dir, "run", "-quiet", "pipeline.yaml")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last, lastAt := fake.Counters().Requests, time.Now()
	for {
		select {
		case <-exited:
			return cmd.ProcessState.ExitCode(), sent, inFlight, false, errOut.String()
		case <-tick.C:
		}
		c := fake.Counters()
		if c.Requests != last {
			last, lastAt = c.Requests, time.Now()
		} else if time.Since(lastAt) > chaosStall {
			cmd.Process.Kill()
			<-exited
			return -1, sent, inFlight, true, errOut.String()
		}
		if signal != 0 && !sent && c.Answered >= at {
			inFlight = c.InFlight
			if err := cmd.Process.Signal(signal); err != nil {
				t.Fatal(err)
			}
			sent = true
		}
	}
}

// chaosRow is one openai-format row.
func chaosRow(i int, text string) string {
	b, _ := json.Marshal(map[string]any{"messages": []map[string]string{
		{"role": "user", "content": text}, {"role": "assistant", "content": fmt.Sprintf("answer %d", i)}}})
	return string(b)
}

// chaosIngestPipeline writes a pipeline over dump (openai format) with an
// export, and the given extra source settings and stages before it.
func chaosIngestPipeline(t *testing.T, dir, dump, extra, stages string) {
	t.Helper()
	y := fmt.Sprintf("seed: 3\noutput: {dir: out}\nsources:\n  - {name: src, path: %s, format: openai%s}\nstages:\n%s  - export: {}\n", dump, extra, stages)
	if err := os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chaosIngestManifest(t *testing.T, dir string) *manifests.Stage {
	t.Helper()
	return e2eManifest(t, filepath.Join(dir, "out"), "00-ingest")
}

// TestChaosDamagedDumps: dumps damaged the ways downloads and writers
// damage them, through the augment command.
func TestChaosDamagedDumps(t *testing.T) {
	const n = 40
	var rows []string
	for i := range n {
		rows = append(rows, chaosRow(i, fmt.Sprintf("question %d", i)))
	}

	t.Run("truncated JSON Lines line", func(t *testing.T) {
		// A line cut in the middle of the file and the file cut in its
		// last line: two rejects, every other row read.
		dir := t.TempDir()
		lines := append([]string(nil), rows...)
		lines[17] = lines[17][:len(lines[17])/2]
		dump := strings.Join(lines, "\n")
		dump = dump[:len(dump)-10]
		os.WriteFile(filepath.Join(dir, "d.jsonl"), []byte(dump), 0o644)
		chaosIngestPipeline(t, dir, "d.jsonl", "", "")
		code, stdout, stderr, _ := chaosRun(t, dir, "run", "-quiet", "pipeline.yaml")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		m := chaosIngestManifest(t, dir)
		if m.Totals.In != n || m.Totals.Out != n-2 || m.Totals.Rejected["bad_json"] != 2 {
			t.Errorf("ingest in %d out %d rejected %v; want %d rows, 2 bad_json", m.Totals.In, m.Totals.Out, m.Totals.Rejected, n)
		}
		chaosBalanced(t, filepath.Join(dir, "out"))
	})

	t.Run("truncated JSON array", func(t *testing.T) {
		// A pretty-printed array cut short inside an element: the end of
		// the dump is unread, which fails the run (no resume hint) unless
		// allow_partial is set.
		dir := t.TempDir()
		var elems []string
		for _, r := range rows {
			var v any
			json.Unmarshal([]byte(r), &v)
			b, _ := json.MarshalIndent(v, "  ", "  ")
			elems = append(elems, "  "+string(b))
		}
		full := "[\n" + strings.Join(elems, ",\n") + "\n]\n"
		cut := strings.Index(full, "question 30") // inside element 30
		os.WriteFile(filepath.Join(dir, "d.json"), []byte(full[:cut]), 0o644)
		chaosIngestPipeline(t, dir, "d.json", "", "")
		code, _, stderr, _ := chaosRun(t, dir, "run", "-quiet", "pipeline.yaml")
		if code != exitFailed || strings.Contains(stderr, "run the same command again") || !strings.Contains(stderr, "could not be read to its end") {
			t.Errorf("exit %d, want %d with a WARN and without the resume hint; stderr:\n%s", code, exitFailed, stderr)
		}
		m := chaosIngestManifest(t, dir)
		u := m.Shards[0].Unread
		if u == nil || u.Bytes == 0 || u.Offset+u.Bytes != int64(cut) || m.Totals.Out != 30 {
			t.Fatalf("unread %+v, out %d; want the bytes from element 30 to the end unread and 30 rows", u, m.Totals.Out)
		}
		code, _, stderr, _ = chaosRun(t, dir, "run", "-quiet", "-set", "sources.0.allow_partial=true", "pipeline.yaml")
		if code != 0 {
			t.Fatalf("allow_partial: exit %d\n%s", code, stderr)
		}
		ex := e2eManifest(t, filepath.Join(dir, "out"), "01-export")
		if ex.Totals.Out != 30 {
			t.Errorf("allow_partial: export has %d rows, want 30", ex.Totals.Out)
		}
		chaosBalanced(t, filepath.Join(dir, "out"))
	})

	t.Run("50 MB row", func(t *testing.T) {
		// One row of 50 MB (one repeated character, the worst case for
		// token counting) between ordinary rows: over the default limit it
		// is rejected as row_too_large without being held; with a limit
		// above it, it goes through ingest, verify (which counts its
		// tokens) and the export in bounded memory.
		dir := t.TempDir()
		big := chaosRow(n, strings.Repeat("a", 50<<20))
		dump := strings.Join(rows[:20], "\n") + "\n" + big + "\n" + strings.Join(rows[20:], "\n") + "\n"
		os.WriteFile(filepath.Join(dir, "d.jsonl"), []byte(dump), 0o644)
		chaosIngestPipeline(t, dir, "d.jsonl", "", "")
		start := time.Now()
		code, _, stderr, rss := chaosRun(t, dir, "run", "-quiet", "pipeline.yaml")
		t.Logf("default limit: exit %d in %v, peak RSS %d MiB", code, time.Since(start).Round(time.Millisecond), rss>>10)
		m := chaosIngestManifest(t, dir)
		if code != 0 || m.Totals.Rejected["row_too_large"] != 1 || m.Totals.Out != n {
			t.Errorf("exit %d, ingest out %d rejected %v; want the %d ordinary rows and row_too_large=1\n%s", code, m.Totals.Out, m.Totals.Rejected, n, stderr)
		}
		if rss > 150<<10 {
			t.Errorf("peak RSS %d MiB for a rejected 50 MB row; it must not be held", rss>>10)
		}
		if !chaosFull() {
			return
		}
		dir2 := t.TempDir()
		os.WriteFile(filepath.Join(dir2, "d.jsonl"), []byte(dump), 0o644)
		chaosIngestPipeline(t, dir2, "d.jsonl", ", max_row_bytes: 67108864", "  - verify: {checks: [roles]}\n")
		start = time.Now()
		code, _, stderr, rss = chaosRun(t, dir2, "run", "-quiet", "pipeline.yaml")
		wall := time.Since(start)
		t.Logf("max_row_bytes 64 MiB: exit %d in %v, peak RSS %d MiB", code, wall.Round(time.Millisecond), rss>>10)
		if ex := e2eManifest(t, filepath.Join(dir2, "out"), "02-export"); code != 0 || ex.Totals.Out != n+1 {
			t.Errorf("exit %d, export out %d; want all %d rows\n%s", code, ex.Totals.Out, n+1, stderr)
		}
		if rss == 0 || rss > 20*50<<10 {
			t.Errorf("peak RSS %d MiB for a 50 MB row: more than 20 times the row", rss>>10)
		}
	})
}

// TestChaosDiskFull: the output dir on a tmpfs too small for the run. The
// run fails cleanly (exit 1, nothing partial under a final name, every
// manifest balanced); once the disk has room, the same command finishes
// with a clean run's bytes. It needs root and mount(8): skipped otherwise.
func TestChaosDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the output dir")
	}
	if _, err := exec.LookPath("mount"); err != nil {
		t.Skip("mount(8) not found")
	}
	var rows []string
	for i := range 3000 {
		rows = append(rows, chaosRow(i, fmt.Sprintf("question %d about a full disk", i)))
	}
	dump := []byte(strings.Join(rows, "\n") + "\n")
	setup := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "d.jsonl"), dump, 0o644); err != nil {
			t.Fatal(err)
		}
		chaosIngestPipeline(t, dir, "d.jsonl", "", "")
	}

	clean := t.TempDir()
	setup(clean)
	if code, stdout, stderr, _ := chaosRun(t, clean, "run", "-quiet", "pipeline.yaml"); code != 0 {
		t.Fatalf("clean run: exit %d\n%s\n%s", code, stdout, stderr)
	}

	dir := t.TempDir()
	setup(dir)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", out).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, b)
	}
	t.Cleanup(func() { exec.Command("umount", out).Run() })

	code, stdout, stderr, _ := chaosRun(t, dir, "run", "-quiet", "pipeline.yaml")
	if code != 1 || !strings.Contains(stderr, "no space left on device") {
		t.Fatalf("full disk: exit %d, want 1 with ENOSPC\n%s\n%s", code, stdout, stderr)
	}
	e2eIntact(t, out)
	chaosBalanced(t, out)

	if b, err := exec.Command("mount", "-o", "remount,size=64m", out).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, b)
	}
	if code, stdout, stderr, _ := chaosRun(t, dir, "run", "-quiet", "pipeline.yaml"); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	e2eIntact(t, out)
	chaosBalanced(t, out)
	want, got := e2eDataFiles(t, filepath.Join(clean, "out")), e2eDataFiles(t, out)
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs from the clean run's", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: not in the clean run", name)
		}
	}
}
