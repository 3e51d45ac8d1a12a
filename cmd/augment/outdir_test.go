package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// TestConcurrentRunsLock: while one augment run works on an output dir, a
// second one on the same dir exits 2 at once, naming the first one's PID
// and start time, and writes nothing; after the first is killed with
// SIGKILL the kernel has released the lock, and a rerun finishes the work.
func TestConcurrentRunsLock(t *testing.T) {
	const rows = 300
	cfg := fakellm.Config{Latency: fakellm.Duration(5 * time.Millisecond)}
	fake, dir := e2eSetup(t, cfg, e2ePipeline{MaxInFlight: 2, ShardSize: 50}, e2eRows(rows))

	first, _, firstErr := e2eCommand(t, dir, "run", "-quiet", "pipeline.yaml")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	for fake.Counters().Answered < 5 {
		select {
		case err := <-exited:
			t.Fatalf("the first run ended (%v) before it got going:\n%s", err, firstErr)
		case <-time.After(time.Millisecond):
		}
	}
	start := time.Now()
	code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "pipeline.yaml")
	if code != exitUsage {
		t.Errorf("second run: exit %d, want %d\n%s", code, exitUsage, stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the second run took %v to give up; it must not wait", took)
	}
	m := regexp.MustCompile(`in use by another augment run \(pid (\d+), started (\S+)\)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the second run does not name the holder:\n%s", stderr)
	}
	if pid, _ := strconv.Atoi(m[1]); pid != first.Process.Pid {
		t.Errorf("holder pid %d, want the first run's %d", pid, first.Process.Pid)
	}
	if at, err := time.Parse(time.RFC3339, strings.TrimSuffix(m[2], ")")); err != nil || time.Since(at) > time.Minute {
		t.Errorf("holder start time %q: %v", m[2], err)
	}
	if strings.Contains(stderr, "resume") {
		t.Errorf("a busy output dir gets a resume hint:\n%s", stderr)
	}

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	if n := len(e2eDataFiles(t, filepath.Join(dir, "out", "02-export"))); n == 0 {
		t.Error("the run after the kill exported nothing")
	}
}

// TestREADMEExitCodes: the README's exit-code table is exitCodes.
func TestREADMEExitCodes(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n### Exit codes\n")
	if !ok {
		t.Fatal("README has no \"### Exit codes\" section")
	}
	var rows []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| code") {
			rows = append(rows, line)
		} else if len(rows) > 0 && !strings.HasPrefix(line, "|") {
			break
		}
	}
	var want []string
	for _, e := range exitCodes {
		want = append(want, fmt.Sprintf("| %d | %s |", e.code, e.meaning))
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("README exit codes:\n%s\nwant (from exitCodes in main.go):\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
