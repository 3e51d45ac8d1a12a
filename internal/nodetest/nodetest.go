// Package nodetest finds what the tests that check augment against a
// JavaScript reference (DuckDB's node API, @huggingface/jinja, the
// tokenizers) need: node on the PATH and a node_modules directory named by
// an environment variable. .ci/run installs both; elsewhere those tests
// skip, saying what is missing.
package nodetest

import (
	"os"
	"os/exec"
	"testing"
)

// Need returns the node binary and the node_modules directory named by
// the environment variable env, skipping t when either is absent; holds
// says what that directory must hold (shown in the skip message).
func Need(t testing.TB, env, holds string) (node, modules string) {
	t.Helper()
	modules = os.Getenv(env)
	if modules == "" {
		t.Skipf("%s not set (a node_modules dir with %s)", env, holds)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	return node, modules
}
