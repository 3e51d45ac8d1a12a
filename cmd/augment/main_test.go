package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(cleanedUp{m}, map[string]func(){
		"augment": main,
	})
}

// cleanedUp runs the tests, then removes the CLI buildAugment built for
// the tests that run processes.
type cleanedUp struct{ m *testing.M }

func (c cleanedUp) Run() int {
	defer removeBuilt()
	return c.m.Run()
}

// TestScripts runs the CLI behaviour specs in testdata/script/*.txtar.
// Scripts can use $DEMO (the bundled demo), $RECIPES (the example
// pipelines) and, when ../shared/data is beside the repo, $SHARED (scripts
// needing it use the [shared] condition).
func TestScripts(t *testing.T) {
	demo, err := filepath.Abs("../../testdata/demo")
	if err != nil {
		t.Fatal(err)
	}
	recipes, err := filepath.Abs("../../testdata/recipes")
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedData()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"lfcheck": lfcheck, "status": status},
		Setup: func(env *testscript.Env) error {
			env.Setenv("DEMO", demo)
			env.Setenv("RECIPES", recipes)
			env.Setenv("SHARED", shared)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "shared" {
				return shared != "", nil
			}
			return false, nil
		},
	})
}

// status is a testscript command: `status N prog args…` runs prog like
// exec and fails unless it exits with status N; stdout and stderr are kept
// for the commands that follow, as after exec.
func status(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N prog [args…]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("status: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// sharedData locates ../shared/data beside the repository, or
// $AUGMENT_SHARED_DATA; "" when absent.
func sharedData() string {
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir, _ = filepath.Abs("../../../shared/data")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ""
	}
	return dir
}

// TestSetGC: without GOGC in the environment the collector runs at
// gcPercent; a GOGC the user set is left as the runtime read it.
func TestSetGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	setGC()
	if got := debug.SetGCPercent(150); got != gcPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "150")
	setGC()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150: GC percent %d, want 150 kept", got)
	}
}
