package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"augment": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
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
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"lfcheck": lfcheck},
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
