package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// buildAugment builds the CLI once per test binary, for tests that run
// several augment processes at once; TestMain removes it (removeBuilt).
var buildAugment = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "augment-bin-")
	if err != nil {
		return "", err
	}
	builtDir.Store(&dir)
	bin := filepath.Join(dir, "augment")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// builtDir is buildAugment's directory once it made one.
var builtDir atomic.Pointer[string]

// removeBuilt removes what buildAugment built (about 50 MB a test run).
func removeBuilt() {
	if dir := builtDir.Load(); dir != nil {
		os.RemoveAll(*dir)
	}
}

// workerRun is a copy of the demo pipeline with its own output dir.
type workerRun struct {
	t    *testing.T
	bin  string
	dir  string
	sets []string
}

func newWorkerRun(t *testing.T, name string) *workerRun {
	t.Helper()
	bin, err := buildAugment()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	demo := filepath.Join("..", "..", "testdata", "demo")
	if err := os.CopyFS(filepath.Join(dir, "dumps"), os.DirFS(filepath.Join(demo, "dumps"))); err != nil {
		t.Fatal(err)
	}
	p, err := os.ReadFile(filepath.Join(demo, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline.yaml"), p, 0o644); err != nil {
		t.Fatal(err)
	}
	// One record per shard: 15 shards to deal out.
	return &workerRun{t: t, bin: bin, dir: dir, sets: []string{"-set", "output.dir=out", "-set", "output.shard_size=1"}}
}

// cmd is augment with args, in the run's dir, with env added to an
// environment cleared of the engines' variables.
func (w *workerRun) cmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOB_COMPLETION_INDEX=") && !strings.HasPrefix(kv, "SLURM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func (w *workerRun) args(cmd string, extra ...string) []string {
	args := append([]string{cmd, "-quiet"}, w.sets...)
	return append(append(args, extra...), "pipeline.yaml")
}

// workers starts one process per environment and waits for all; it
// returns each process's error.
// finishWorkers runs the workers of envs (see workers) and stops the test
// when one of them fails.
func (w *workerRun) finishWorkers(envs [][]string, extra ...string) {
	w.t.Helper()
	for _, err := range w.workers(envs, extra...) {
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *workerRun) workers(envs [][]string, extra ...string) []error {
	errs := make([]error, len(envs))
	outs := make([]bytes.Buffer, len(envs))
	var wg sync.WaitGroup
	for i, env := range envs {
		cmd := w.cmd(env, w.args("run", extra...)...)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		wg.Go(func() {
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("worker %v: %v\n%s", env, err, outs[i].String())
			}
		})
	}
	wg.Wait()
	return errs
}

func (w *workerRun) must(cmd *exec.Cmd) {
	w.t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
}

// engineEnvs are the variables the engines set for n workers: a Kubernetes Indexed Job, a Slurm array counted from 0, and
// one counted from 1 without SLURM_ARRAY_TASK_COUNT.
func engineEnvs(flavor string, n int) ([][]string, []string) {
	envs := make([][]string, n)
	var extra []string
	for i := range n {
		switch flavor {
		case "kubernetes":
			envs[i] = []string{fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)}
		case "slurm":
			envs[i] = []string{fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", i), fmt.Sprintf("SLURM_ARRAY_TASK_COUNT=%d", n),
				"SLURM_ARRAY_TASK_MIN=0", fmt.Sprintf("SLURM_ARRAY_TASK_MAX=%d", n-1), "SLURM_ARRAY_JOB_ID=77"}
		case "slurm-from-1":
			envs[i] = []string{fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", i+1), "SLURM_ARRAY_TASK_MIN=1", fmt.Sprintf("SLURM_ARRAY_TASK_MAX=%d", n)}
		}
	}
	if flavor == "kubernetes" {
		extra = []string{"-workers", fmt.Sprint(n)}
	}
	return envs, extra
}

// TestWorkersSameBytes runs the demo pipeline (a sample planner, LLM stages
// with the offline teacher, two exports) as one process and as N worker
// processes plus augment merge, with the variables each engine sets, and
// wants the same output files.
//
// The pipeline gets two more planner stages (dedup, response_schema) after
// sample: each whole-input plan is computed once, by worker 0, and loaded
// by the others and by the merge.
func TestWorkersSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	one := newWorkerRun(t, "one")
	one.withPlanners()
	one.must(one.cmd(nil, one.args("run")...))
	for _, tc := range []struct {
		n      int
		flavor string
	}{{1, "flag"}, {2, "kubernetes"}, {3, "slurm"}, {7, "slurm-from-1"}, {3, "flag"}} {
		t.Run(fmt.Sprintf("%s-%d", tc.flavor, tc.n), func(t *testing.T) {
			w := newWorkerRun(t, "workers")
			w.withPlanners()
			envs, extra := engineEnvs(tc.flavor, tc.n)
			if tc.flavor == "flag" {
				// The flag form: one process per index, no engine variables.
				var errs []error
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i := range tc.n {
					wg.Go(func() {
						out, err := w.cmd(nil, w.args("run", "-worker", fmt.Sprintf("%d/%d", i, tc.n))...).CombinedOutput()
						if err != nil {
							mu.Lock()
							errs = append(errs, fmt.Errorf("worker %d: %v\n%s", i, err, out))
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				for _, err := range errs {
					t.Fatal(err)
				}
			} else {
				for _, err := range w.workers(envs, extra...) {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			// Before the merge the exports have their samples but no index.
			if _, err := os.Stat(filepath.Join(w.dir, "out", "09-sharegpt", "dataset_info.json")); err == nil {
				t.Errorf("dataset_info.json written before augment merge")
			}
			// Each plan was computed once, by worker 0.
			for _, stage := range []string{"01-sample", "02-dedup", "03-response_schema"} {
				if got := planSources(t, w.dir, stage, tc.n); got[0] != "computed" || strings.Count(fmt.Sprint(got), "computed") != 1 ||
					strings.Count(fmt.Sprint(got), "loaded") != tc.n-1 {
					t.Errorf("%s: plan sources by worker %v; want computed by worker 0 and loaded by the %d others", stage, got, tc.n-1)
				}
			}
			out, err := w.cmd(nil, w.args("merge")...).CombinedOutput()
			if err != nil {
				t.Fatalf("merge: %v\n%s", err, out)
			}
			if strings.Contains(string(out), "not finished by the workers") {
				t.Errorf("merge ran shards the workers had done:\n%s", out)
			}
			sameOutputs(t, filepath.Join(one.dir, "out"), filepath.Join(w.dir, "out"))
			st, err := w.cmd(nil, "status", "out").CombinedOutput()
			if err != nil || !regexp.MustCompile(`09-sharegpt +15/15 +[0-9]+ +[0-9]+ .* done`).Match(st) {
				t.Fatalf("status: %v\n%s", err, st)
			}
		})
	}
}

// withPlanners adds the dedup and response_schema planners after sample.
func (w *workerRun) withPlanners() {
	w.t.Helper()
	name := filepath.Join(w.dir, "pipeline.yaml")
	p, err := os.ReadFile(name)
	if err != nil {
		w.t.Fatal(err)
	}
	p = bytes.Replace(p, []byte("  - meta_tool:"), []byte("  - dedup: {fields: [tools]}\n  - response_schema: {}\n  - meta_tool:"), 1)
	if err := os.WriteFile(name, p, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// planSources reads how each of n workers got a stage's plan, from their
// parts of the stage manifest: index → "computed" or "loaded".
func planSources(t *testing.T, dir, stage string, n int) map[int]string {
	t.Helper()
	got := map[int]string{}
	for i := range n {
		b, err := os.ReadFile(filepath.Join(dir, "out", ".augment", "workers", stage, fmt.Sprintf("%d-of-%d.json", i, n)))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			PlanSource string `json:"plan_source"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got[i] = m.PlanSource
	}
	return got
}

// TestWorkersFailedWorkerRerun: two of three workers run while the third
// is missing (it crashed): they give up at the barrier after their wait.
// The third is killed partway, then all three run again, resume, and the
// merge gives the bytes of one process.
func TestWorkersFailedWorkerRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	one := newWorkerRun(t, "one")
	one.must(one.cmd(nil, one.args("run")...))
	w := newWorkerRun(t, "workers")
	envs, _ := engineEnvs("slurm", 3)
	errs := w.workers([][]string{envs[0], envs[2]}, "-worker-wait", "2s")
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "did not finish") {
			t.Fatalf("a worker without its peer: want a wait error, got %v", err)
		}
	}
	// status shows the stage the two stopped at, with each worker's part.
	st, err := w.cmd(nil, "status", "out").CombinedOutput()
	if err != nil || !regexp.MustCompile(`01-sample +10/15 .* w0/3 5 done, w2/3 5 done`).Match(st) {
		t.Fatalf("status: %v\n%s", err, st)
	}
	kill := w.cmd(envs[1], w.args("run")...)
	if err := kill.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	kill.Process.Kill()
	kill.Wait()
	for _, err := range w.workers(envs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.must(w.cmd(nil, w.args("merge")...))
	sameOutputs(t, filepath.Join(one.dir, "out"), filepath.Join(w.dir, "out"))
}

// TestWorkersOtherSettings: a worker given other settings than the others
// is named, at once, by both at the first barrier after the stage that
// differs (exit 2), instead of both waiting out -worker-wait; status shows
// its part marked.
func TestWorkersOtherSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	w := newWorkerRun(t, "workers")
	envs, extra := engineEnvs("kubernetes", 2)
	errs := make([]error, 2)
	outs := make([][]byte, 2)
	var wg sync.WaitGroup
	for i, env := range envs {
		args := append(slices.Clone(extra), "-worker-wait", "10m")
		if i == 1 {
			args = append(args, "-set", "stages.1.meta_tool.min_tools=6")
		}
		wg.Go(func() { outs[i], errs[i] = w.cmd(env, w.args("run", args...)...).CombinedOutput() })
	}
	wg.Wait()
	for i, err := range errs {
		other := 1 - i
		want := fmt.Sprintf("worker %d/2's part of stage meta_tool was made under other settings, finished at ", other)
		if exitCodeOf(err) != 2 || !strings.Contains(string(outs[i]), want) || !strings.Contains(string(outs[i]), "same pipeline.yaml, -set flags") {
			t.Errorf("worker %d: exit %d, want 2 naming worker %d's settings:\n%s", i, exitCodeOf(err), other, outs[i])
		}
	}
	st, err := w.cmd(nil, "status", "out").CombinedOutput()
	if err != nil || !regexp.MustCompile(`02-meta_tool +\d+/15 .* w\d/2 \d+ done, w\d/2 \d+ done \(other settings\)`).Match(st) {
		t.Fatalf("status: %v\n%s", err, st)
	}
}

// TestWorkersRerunKeepsAccounting: a worker run again before the merge,
// finding its part done, keeps the teacher accounting of that part (as one
// process keeps its manifest), so the merge adds up the same requests.
func TestWorkersRerunKeepsAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	w := newWorkerRun(t, "workers")
	envs, extra := engineEnvs("kubernetes", 2)
	w.finishWorkers(envs, extra...)
	requests := func() map[string]int64 {
		t.Helper()
		w.must(w.cmd(nil, w.args("merge")...))
		return map[string]int64{"03-noise": w.llmRequests("03-noise/manifest.json"), "04-reason": w.llmRequests("04-reason/manifest.json")}
	}
	before := requests()
	if before["03-noise"] == 0 || before["04-reason"] == 0 {
		t.Fatalf("the workers asked nothing: %v", before)
	}
	w.must(w.cmd(envs[1], w.args("run", extra...)...))
	if after := requests(); !maps.Equal(after, before) {
		t.Errorf("requests after worker 1 ran again: %v, want %v", after, before)
	}
}

// TestWorkersMergeTimings: after the merge, stats gives each stage the
// workers' time, not the merge's own: started is the earliest worker's
// start, seconds the workers' and the merge's seconds summed.
func TestWorkersMergeTimings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	w := newWorkerRun(t, "workers")
	envs, extra := engineEnvs("kubernetes", 2)
	w.finishWorkers(envs, extra...)
	w.must(w.cmd(nil, w.args("merge")...))
	cmd := w.cmd(nil, "stats", "-json", "out")
	b, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Stages []struct {
			Dir     string
			Started time.Time
			Seconds float64
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Stages {
		if s.Dir != "03-noise" && s.Dir != "04-reason" {
			continue
		}
		var merged struct {
			Started time.Time
			Seconds float64
		}
		readJSON(t, filepath.Join(w.dir, "out", s.Dir, "manifest.json"), &merged)
		parts, _ := filepath.Glob(filepath.Join(w.dir, "out", ".augment", "workers", s.Dir, "*-of-2.json"))
		if len(parts) != 2 {
			t.Fatalf("%s: parts %v", s.Dir, parts)
		}
		first, sum := merged.Started, merged.Seconds
		for _, p := range parts {
			var part struct {
				Started time.Time
				Seconds float64
			}
			readJSON(t, p, &part)
			if part.Started.Before(first) {
				first = part.Started
			}
			sum += part.Seconds
		}
		if !s.Started.Equal(first) || math.Abs(s.Seconds-sum) > 1e-6 {
			t.Errorf("%s: stats started %v, %.6f s; want the workers' %v, %.6f s (the merge's own: %v, %.6f s)",
				s.Dir, s.Started, s.Seconds, first, sum, merged.Started, merged.Seconds)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// llmRequests reads the teacher requests a stage manifest (rel, in the
// output directory) records.
func (w *workerRun) llmRequests(rel string) int64 {
	w.t.Helper()
	var m struct {
		LLM struct{ Requests int64 } `json:"llm"`
	}
	b, err := os.ReadFile(filepath.Join(w.dir, "out", rel))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return m.LLM.Requests
}

// TestWorkersDetect covers the flag and the engines' variables.
func TestWorkersDetect(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		workers int
		env     map[string]string
		want    string // "I/N", "" for alone, "error"
	}{
		{"", 0, nil, ""},
		{"2/5", 0, nil, "2/5"},
		{"5/5", 0, nil, "error"},
		{"1/3", 4, nil, "error"},
		{"x", 0, nil, "error"},
		{"", 4, map[string]string{"JOB_COMPLETION_INDEX": "3"}, "3/4"},
		{"", 0, map[string]string{"JOB_COMPLETION_INDEX": "3"}, "error"},
		{"", 4, map[string]string{"JOB_COMPLETION_INDEX": "4"}, "error"},
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3"}, "2/3"},
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_MAX": "7"}, "1/4"},
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "5"}, "error"},
		{"", 8, map[string]string{"SLURM_ARRAY_TASK_ID": "5"}, "5/8"},
		{"", 8, map[string]string{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "6"}, "error"},
		// --array=0,2,4 (a gap): index 2 would be 1/3 and index 4 out of range.
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "4"}, "error: gaps or a step"},
		{"", 0, map[string]string{"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_MAX": "7"}, "1/3"},
		{"", 3, nil, "error"},
		{"", -1, nil, "error: want the number of workers (1 or more), or none"},
		{"", 1, map[string]string{"JOB_COMPLETION_INDEX": "0"}, "0/1"},
	} {
		wait := time.Hour
		o := &workerOpts{worker: &tc.flag, workers: &tc.workers, wait: &wait, getenv: func(k string) string { return tc.env[k] }}
		w, err := o.detect()
		got := ""
		switch {
		case err != nil && strings.HasPrefix(tc.want, "error: "):
			got = "error"
			if strings.Contains(err.Error(), strings.TrimPrefix(tc.want, "error: ")) {
				got = tc.want
			}
		case err != nil:
			got = "error"
		case w != nil:
			got = w.String()
		}
		if got != tc.want {
			t.Errorf("flag %q workers %d env %v: got %s (%v), want %s", tc.flag, tc.workers, tc.env, got, err, tc.want)
		}
	}
}

// sameOutputs compares two output dirs file by file: the same names, the
// same bytes, except augment's state dir (.augment), report.html (it shows
// when each stage ran) and the manifests' timings and teacher accounting.
func sameOutputs(t *testing.T, a, b string) {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				if rel == ".augment" {
					return filepath.SkipDir
				}
				return nil
			}
			if rel == "report.html" {
				return nil
			}
			body, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if filepath.Base(rel) == "manifest.json" {
				body = withoutTimings(t, rel, body)
			}
			m[filepath.ToSlash(rel)] = body
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fa, fb := files(a), files(b)
	if len(fa) < 20 {
		t.Fatalf("only %d files in %s", len(fa), a)
	}
	for name, body := range fa {
		other, ok := fb[name]
		switch {
		case !ok:
			t.Errorf("%s: missing in the workers' output", name)
		case !bytes.Equal(body, other):
			t.Errorf("%s differs:\none process:\n%.2000s\nworkers:\n%.2000s", name, body, other)
		}
	}
	for name := range fb {
		if _, ok := fa[name]; !ok {
			t.Errorf("%s: only in the workers' output", name)
		}
	}
}

func withoutTimings(t *testing.T, name string, b []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	delete(m, "started")
	delete(m, "finished")
	delete(m, "seconds")
	delete(m, "work_started") // a merge's (the workers' time)
	delete(m, "work_seconds")
	delete(m, "llm")
	if shards, ok := m["shards"].([]any); ok {
		for _, s := range shards {
			delete(s.(map[string]any), "seconds")
		}
	}
	out, _ := json.MarshalIndent(m, "", "  ")
	return out
}

// TestWorkersRerunOtherCount: after 3 workers and the merge, 2 workers, then
// one process, find every shard done (whoever made it) and run none, and the
// output stays that of one process.
func TestWorkersRerunOtherCount(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	one := newWorkerRun(t, "one")
	one.must(one.cmd(nil, one.args("run")...))
	w := newWorkerRun(t, "workers")
	merge := func() {
		out, err := w.cmd(nil, w.args("merge")...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "not finished by the workers") {
			t.Fatalf("merge: %v\n%s", err, out)
		}
	}
	for _, err := range w.workers([][]string{{"SLURM_ARRAY_TASK_ID=0"}, {"SLURM_ARRAY_TASK_ID=1"}, {"SLURM_ARRAY_TASK_ID=2"}}, "-workers", "3") {
		if err != nil {
			t.Fatal(err)
		}
	}
	merge()
	// The workers pass the barriers on the earlier run's entries: they
	// need not even run at once.
	ranNothing := regexp.MustCompile(`(?m)^ +[0-9]{2}-\S+ +0 +[0-9]+ `)
	for i := range 2 {
		out, err := w.cmd(nil, w.args("run", "-worker", fmt.Sprintf("%d/2", i), "-worker-wait", "30s")...).Output()
		if err != nil || len(ranNothing.FindAll(out, -1)) != 8 {
			t.Fatalf("worker %d/2 ran shards again (%v):\n%s", i, err, out)
		}
	}
	// The sample plan the 3 workers saved serves the 2.
	if got := planSources(t, w.dir, "01-sample", 2); fmt.Sprint(got) != "map[0:loaded 1:loaded]" {
		t.Errorf("2 workers after 3: plan sources %v, want both loaded", got)
	}
	merge()
	sameOutputs(t, filepath.Join(one.dir, "out"), filepath.Join(w.dir, "out"))
	out, err := w.cmd(nil, w.args("run")...).Output()
	if err != nil || len(ranNothing.FindAll(out, -1)) != 8 {
		t.Fatalf("one process after the workers ran shards again (%v):\n%s", err, out)
	}
	sameOutputs(t, filepath.Join(one.dir, "out"), filepath.Join(w.dir, "out"))
}

// TestWorkersOtherCountKeepsAccounting: 3 workers finish, 2 workers run
// again with nothing to redo, then the merge: it counts the requests the
// 3 sent (their parts), not the 2's none.
func TestWorkersOtherCountKeepsAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	w := newWorkerRun(t, "workers")
	for _, err := range w.workers([][]string{{"SLURM_ARRAY_TASK_ID=0"}, {"SLURM_ARRAY_TASK_ID=1"}, {"SLURM_ARRAY_TASK_ID=2"}}, "-workers", "3") {
		if err != nil {
			t.Fatal(err)
		}
	}
	paid := map[string]int64{}
	for _, stage := range []string{"03-noise", "04-reason"} {
		for i := range 3 {
			paid[stage] += w.llmRequests(fmt.Sprintf(".augment/workers/%s/%d-of-3.json", stage, i))
		}
	}
	if paid["03-noise"] == 0 || paid["04-reason"] == 0 {
		t.Fatalf("the 3 workers asked nothing: %v", paid)
	}
	// Not merged yet: stats and report.html say so (they showed the stages
	// pending, with no traffic and no word of the workers).
	const unmerged = `stage\(s\) have workers' parts not merged yet \([^)]*04-reason[^)]*\): .*run augment merge`
	st, err := w.cmd(nil, "stats", "out").CombinedOutput()
	if err != nil || !regexp.MustCompile(unmerged).Match(st) {
		t.Errorf("stats before the merge: %v\n%s", err, st)
	}
	w.must(w.cmd(nil, "report", "out"))
	if b, err := os.ReadFile(filepath.Join(w.dir, "out", "report.html")); err != nil || !regexp.MustCompile(`parts not merged yet \([^)]*04-reason[^)]*\): .*run augment merge`).Match(b) {
		t.Errorf("report.html before the merge does not say the parts are not merged (%v)", err)
	}
	for _, err := range w.workers([][]string{{"SLURM_ARRAY_TASK_ID=0"}, {"SLURM_ARRAY_TASK_ID=1"}}, "-workers", "2") {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.must(w.cmd(nil, w.args("merge")...))
	if st, err := w.cmd(nil, "stats", "out").CombinedOutput(); err != nil || strings.Contains(string(st), "not merged yet") {
		t.Errorf("stats after the merge: %v\n%s", err, st)
	}
	for stage, want := range paid {
		if got := w.llmRequests(stage + "/manifest.json"); got != want {
			t.Errorf("%s: merged requests %d after 2 workers redid nothing, want the 3 workers' %d", stage, got, want)
		}
	}
}

// TestWorkersKilledRerunKeepsAccounting: a worker killed during reason and
// run again before the merge keeps what the killed run recorded, adds its
// own, and names itself in llm_unrecorded, which the merge repeats (the
// rerun's part replaced the killed one and kept only its own traffic).
func TestWorkersKilledRerunKeepsAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	w := newWorkerRun(t, "workers")
	envs, _ := engineEnvs("slurm", 2)
	w.finishWorkers(envs)
	const rel = ".augment/workers/04-reason/1-of-2.json"
	killed := w.llmRequests(rel)
	if killed == 0 {
		t.Fatal("worker 1 asked nothing in reason")
	}
	// Worker 1's part as a kill -9 after its first reason shard leaves it.
	killedAfterFirstShard(t, filepath.Join(w.dir, "out", filepath.FromSlash(rel)))
	w.must(w.cmd(envs[1], w.args("run")...))
	unrecorded := func(rel string) string {
		t.Helper()
		var m struct {
			LLMUnrecorded []string `json:"llm_unrecorded"`
		}
		b, err := os.ReadFile(filepath.Join(w.dir, "out", filepath.FromSlash(rel)))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(m.LLMUnrecorded)
	}
	rerun := w.llmRequests(rel)
	if rerun <= killed {
		t.Errorf("worker 1's part after its rerun records %d requests, want the killed run's %d and the rerun's own", rerun, killed)
	}
	if got := unrecorded(rel); got != "[worker 1/2]" {
		t.Errorf("worker 1's part after its rerun: llm_unrecorded %s, want worker 1/2 named", got)
	}
	p0 := w.llmRequests(".augment/workers/04-reason/0-of-2.json")
	w.must(w.cmd(nil, w.args("merge")...))
	if got := w.llmRequests("04-reason/manifest.json"); got != p0+rerun {
		t.Errorf("merged reason requests %d, want the parts' %d + %d", got, p0, rerun)
	}
	if got := unrecorded("04-reason/manifest.json"); got != "[worker 1/2]" {
		t.Errorf("merged llm_unrecorded %s, want worker 1/2 named", got)
	}
}

// TestWorkersMergeAddsAccounting: a merge that runs shards itself (those
// of a worker killed during reason) records the workers' teacher
// accounting plus its own, and names the killed worker, whose part may
// not hold all it sent; stats repeats both.
func TestWorkersMergeAddsAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	w := newWorkerRun(t, "workers")
	envs, _ := engineEnvs("slurm", 2)
	w.finishWorkers(envs)
	type llmPart struct {
		LLM           struct{ Requests int64 } `json:"llm"`
		LLMUnrecorded []string                 `json:"llm_unrecorded"`
	}
	read := func(rel string) llmPart {
		t.Helper()
		var m llmPart
		b, err := os.ReadFile(filepath.Join(w.dir, "out", rel))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	p0, p1 := read(".augment/workers/04-reason/0-of-2.json"), read(".augment/workers/04-reason/1-of-2.json")
	if p0.LLM.Requests == 0 || p1.LLM.Requests == 0 {
		t.Fatalf("the workers asked nothing: %+v %+v", p0, p1)
	}
	// Worker 1's part as a kill -9 after its first reason shard leaves it.
	killedAfterFirstShard(t, filepath.Join(w.dir, "out", ".augment", "workers", "04-reason", "1-of-2.json"))
	out, err := w.cmd(nil, w.args("merge")...).Output()
	if err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	own := regexp.MustCompile(`(?m)^ *04-reason +([1-9][0-9]*) +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +([0-9]+) +[0-9]+ +offline`).FindSubmatch(out)
	if own == nil {
		t.Fatalf("the merge ran no reason shard:\n%s", out)
	}
	var ownReq int64
	fmt.Sscan(string(own[2]), &ownReq)
	merged := read("04-reason/manifest.json")
	if want := p0.LLM.Requests + p1.LLM.Requests + ownReq; merged.LLM.Requests != want {
		t.Errorf("merged reason requests %d, want the workers' %d + %d and the merge's own %d = %d",
			merged.LLM.Requests, p0.LLM.Requests, p1.LLM.Requests, ownReq, want)
	}
	if fmt.Sprint(merged.LLMUnrecorded) != "[worker 1/2]" {
		t.Errorf("merged llm_unrecorded %q, want worker 1/2 named", merged.LLMUnrecorded)
	}
	st, err := w.cmd(nil, "stats", "out").CombinedOutput()
	if err != nil || !strings.Contains(string(st), "04-reason: these figures are lower than the real traffic by an unknown amount: worker 1/2 stopped") {
		t.Errorf("stats: %v\n%s", err, st)
	}
	cards, _ := filepath.Glob(filepath.Join(w.dir, "out", "*", "README.md"))
	for _, c := range cards {
		if b, err := os.ReadFile(c); err != nil || !strings.Contains(string(b), "04-reason: these figures are lower than the real traffic by an unknown amount: worker 1/2 stopped") {
			t.Errorf("%s does not name worker 1/2 (%v)", c, err)
		}
	}
	if len(cards) == 0 {
		t.Error("no dataset card")
	}
	if b, err := os.ReadFile(filepath.Join(w.dir, "out", "report.html")); err != nil || !strings.Contains(string(b), "04-reason: these figures are lower than the real traffic by an unknown amount: worker 1/2 stopped") {
		t.Errorf("report.html does not name worker 1/2 (%v)", err)
	}
}

// killedAfterFirstShard rewrites the worker part at name as a kill -9 after
// its first shard leaves it: one shard recorded, not finished.
func killedAfterFirstShard(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var part map[string]any
	if err := json.Unmarshal(b, &part); err != nil {
		t.Fatal(err)
	}
	part["shards"] = part["shards"].([]any)[:1]
	delete(part, "finished")
	if b, err = json.Marshal(part); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
