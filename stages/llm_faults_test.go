package stages

// The teacher layer under real faults, through the runner: credentials
// quoted back by a server never reach the output dir or the log.

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// faultRun runs the pipeline at path with getenv; the log is returned.
func faultRun(t *testing.T, path string, getenv func(string) string) (*Report, string, error) {
	t.Helper()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r, err := NewRunner(p, Options{Version: "test", Log: slog.New(slog.NewTextHandler(&log, nil)), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return rep, log.String(), err
}

// A server whose 400s quote the request's Authorization header: the
// records it refused are rejected, and the key is in no file of the output
// dir (rejects, manifests, cache, exports) and not in the log; the
// rejects still say what the server answered.
func TestTeacherKeyNeverReachesDisk(t *testing.T) {
	const key = "sk-test-SECRET-7f3a9c1e5b"
	getenv := func(name string) string {
		if name == "AUGMENT_TEST_TEACHER_KEY" {
			return key
		}
		return ""
	}
	_, url := llmrunFake(t, fakellm.Config{Script: llmrunScript, Seed: 3, Faults: fakellm.Faults{EchoAuth: 0.2}})
	path := llmrunPipeline(t, llmrunRows(60), 20, []llm.Endpoint{{BaseURL: url + "/v1", MaxInFlight: 4}},
		"  api_key_env: AUGMENT_TEST_TEACHER_KEY\n  max_error_rate: 0.9\n  retry_base: 1ms\n  retry_max: 5ms")
	_, log, err := faultRun(t, path, getenv)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	out := filepath.Join(filepath.Dir(path), "out")
	ms := llmrunConserved(t, out)
	if n := ms["01-reason"].Totals.Rejected["llm_error_bad_request"]; n == 0 {
		t.Fatalf("no record was rejected for the 400s: %+v", ms["01-reason"].Totals)
	}
	quoted := false
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the API key", p)
		}
		quoted = quoted || bytes.Contains(b, []byte("Authorization: Bearer [redacted]"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !quoted {
		t.Error("no reject quotes the server's (redacted) message")
	}
	if strings.Contains(log, key) {
		t.Error("the log holds the API key")
	}
}
