package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// s3Loopback starts an S3 server (gofakes3) on loopback with a bucket
// "runs", points the environment the augment processes inherit at it, and
// returns a client of it.
func s3Loopback(t testing.TB) *minio.Client { return s3LoopbackVia(t, nil) }

// s3LoopbackVia is s3Loopback with the server's handler wrapped by wrap
// (nil: none), for a test that answers some requests itself.
func s3LoopbackVia(t testing.TB, wrap func(http.Handler) http.Handler) *minio.Client {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("runs"); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(be).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	c, err := minio.New(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4("test-key", "test-secret", ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// downloadPrefix copies every object under bucket runs, prefix, into a new
// directory.
func downloadPrefix(t *testing.T, c *minio.Client, prefix string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bucket")
	for obj := range c.ListObjects(context.Background(), "runs", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if err := c.FGetObject(context.Background(), "runs", obj.Key, filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(obj.Key, prefix))), minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// exitCodeOf is the exit code of a finished command.
func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// sameConfig wants the effective config.yaml of the S3 run (got) to be
// the local run's but for output.dir and output.work_dir, and then puts
// the local one in its place for sameOutputs.
func sameConfig(t *testing.T, local, got string) {
	t.Helper()
	strip := func(dir string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "  dir: ") && !strings.HasPrefix(l, "  work_dir: ") {
				keep = append(keep, l)
			}
		}
		return []byte(strings.Join(keep, "\n"))
	}
	if a, b := strip(local), strip(got); !bytes.Equal(a, b) {
		t.Errorf("config.yaml differs beyond output.dir and output.work_dir:\n%s\n---\n%s", a, b)
	}
	b, _ := os.ReadFile(filepath.Join(local, "config.yaml"))
	if err := os.WriteFile(filepath.Join(got, "config.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWorkersOnS3SameBytes: the demo pipeline as 3 worker processes (a
// Kubernetes Indexed Job's variables) with output.dir on an S3 server,
// each with its own working copy, then augment merge on a fourth: the
// prefix holds the bytes of one local process. Killed: worker 1 is killed
// (SIGKILL) once it has published part of its work and rerun on a fresh
// working copy (its machine is lost) while the others wait for it at a
// barrier; meanwhile a second worker 0 and a single run on the same
// prefix are refused (exit 2) naming the lease's holder.
func TestWorkersOnS3SameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	one := newWorkerRun(t, "one")
	one.must(one.cmd(nil, one.args("run")...))
	c := s3Loopback(t)
	for _, kill := range []bool{false, true} {
		name := map[bool]string{false: "clean", true: "killed"}[kill]
		t.Run(name, func(t *testing.T) {
			w := newWorkerRun(t, "workers")
			w.sets = append(w.sets, "-set", "output.dir=s3://runs/"+name, "-set", "output.work_dir="+filepath.Join(w.dir, "work"))
			envs, extra := engineEnvs("kubernetes", 3)
			extra = append(extra, "-worker-wait", "2m") // a failure ends the test, not a day later
			if !kill {
				for _, err := range w.workers(envs, extra...) {
					if err != nil {
						t.Error(err)
					}
				}
				if t.Failed() {
					t.FailNow()
				}
			} else {
				victim := w.cmd(envs[1], w.args("run", extra...)...)
				if err := victim.Start(); err != nil {
					t.Fatal(err)
				}
				others := make(chan []error, 1)
				go func() { others <- w.workers([][]string{envs[0], envs[2]}, extra...) }()
				// Kill worker 1 once its part of the first stage after ingest is in the prefix.
				deadline := time.Now().Add(time.Minute)
				for {
					_, err := c.StatObject(context.Background(), "runs", name+"/.augment/workers/01-sample/1-of-3.json", minio.StatObjectOptions{})
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						victim.Process.Kill()
						t.Fatalf("worker 1 published nothing in a minute: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
				victim.Process.Kill()
				victim.Wait()
				// The two others hold their leases: a second worker 0 (on
				// another machine: the local lock would stop it on this one)
				// and a single run are refused at once, naming the holder.
				out, err := w.cmd(envs[0], w.args("run", append(extra, "-set", "output.work_dir="+filepath.Join(w.dir, "twin"))...)...).CombinedOutput()
				if exitCodeOf(err) != 2 || !strings.Contains(string(out), "in use by another augment run (worker-0-of-3: host ") {
					t.Errorf("a second worker 0: exit %d\n%s", exitCodeOf(err), out)
				}
				out, err = w.cmd(nil, w.args("run", "-set", "output.work_dir="+filepath.Join(w.dir, "alone"))...).CombinedOutput()
				if exitCodeOf(err) != 2 || !strings.Contains(string(out), "in use by another augment run (worker-") {
					t.Errorf("a single run beside the workers: exit %d\n%s", exitCodeOf(err), out)
				}
				// Worker 1 again, on another machine: a fresh working copy.
				// (Without -quiet, to see where it started from.)
				rerun := append(append([]string{"run"}, w.sets...), extra...)
				rerun = append(rerun, "-set", "output.work_dir="+filepath.Join(w.dir, "elsewhere"), "pipeline.yaml")
				out, err = w.cmd(envs[1], rerun...).CombinedOutput()
				if err != nil {
					t.Fatalf("worker 1 rerun: %v\n%s", err, out)
				}
				if !strings.Contains(string(out), "output pulled from object storage") {
					t.Errorf("worker 1 rerun did not start from the prefix:\n%s", out)
				}
				for _, err := range <-others {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			out, err := w.cmd(nil, w.args("merge", "-set", "output.work_dir="+filepath.Join(w.dir, "merge"))...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "not finished by the workers") {
				t.Fatalf("merge: %v\n%s", err, out)
			}
			got := downloadPrefix(t, c, name+"/")
			sameConfig(t, filepath.Join(one.dir, "out"), got)
			sameOutputs(t, filepath.Join(one.dir, "out"), got)
			for obj := range c.ListObjects(context.Background(), "runs", minio.ListObjectsOptions{Prefix: name + "/.augment/lease-", Recursive: true}) {
				t.Errorf("lease left behind: %s", obj.Key)
			}
			if !kill {
				readCommandsOnS3(t, one, w, c, "s3://runs/"+name)
			}
		})
	}
}

// readCommandsOnS3: status, stats, show and report read an output on S3
// as they read the same output in a local directory; report writes its
// files back into the prefix.
func readCommandsOnS3(t *testing.T, one, w *workerRun, c *minio.Client, url string) {
	t.Helper()
	st, err := w.cmd(nil, "status", url).CombinedOutput()
	if err != nil || !regexp.MustCompile(`07-sharegpt +15/15 +12 +12 .* done`).Match(st) {
		t.Errorf("status %s: %v\n%s", url, err, st)
	}
	if got, err := w.cmd(nil, "stats", url).CombinedOutput(); err != nil || !strings.Contains(string(got), "run "+url+": 8 of 8 stages done") {
		t.Errorf("stats %s: %v\n%s", url, err, got)
	}
	// The same figures as the local run's, but for timings, the dir, the
	// config hash (it records output.dir) and the prefix share of the
	// teacher accounting (merged over workers, weighted).
	seconds := regexp.MustCompile(`"(seconds|started|dir|config_sha256|prefix_share)": [^,\n]*`)
	for _, args := range [][]string{{"stats", "-json"}, {"show", "-stage", "01-sample", "-n", "2"}, {"show", "toolace:3"}} {
		want, err := one.cmd(nil, append(args, "out")...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v out: %v\n%s", args, err, want)
		}
		got, err := w.cmd(nil, append(args, url)...).CombinedOutput()
		if err != nil || !bytes.Equal(seconds.ReplaceAll(got, nil), seconds.ReplaceAll(want, nil)) {
			t.Errorf("%v %s: %v\n%.3000s\nwant (local):\n%.3000s", args, url, err, got, want)
		}
	}
	bucket := strings.TrimPrefix(url, "s3://runs/") + "/"
	if err := c.RemoveObject(context.Background(), "runs", bucket+"report.html", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := w.cmd(nil, "report", url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "report: "+url+"/report.html") {
		t.Errorf("report %s: %v\n%s", url, err, out)
	}
	if _, err := c.StatObject(context.Background(), "runs", bucket+"report.html", minio.StatObjectOptions{}); err != nil {
		t.Errorf("report did not write report.html into the prefix: %v", err)
	}
	// An empty prefix is the user's mistake (exit 2), with no resume hint.
	out, err = w.cmd(nil, "status", "s3://runs/nothing-here").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "s3://runs/nothing-here holds no run: no stage directories") ||
		strings.Contains(string(out), "run the same command again") {
		t.Errorf("status of an empty prefix: %v\n%s", err, out)
	}
	// So is a bucket that is not there, as a local directory that is not.
	out, err = w.cmd(nil, "stats", "s3://nobucket/x").CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "s3://nobucket/x holds no run: no such bucket") {
		t.Errorf("stats of a missing bucket: %v\n%s", err, out)
	}

	// An export a run left unfinished loses its card in the prefix too.
	mkey := bucket + "07-sharegpt/manifest.json"
	obj, err := c.GetObject(context.Background(), "runs", mkey, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.NewDecoder(obj).Decode(&m); err != nil {
		t.Fatal(err)
	}
	obj.Close()
	delete(m, "finished")
	mb, _ := json.Marshal(m)
	if _, err := c.PutObject(context.Background(), "runs", mkey, bytes.NewReader(mb), int64(len(mb)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = w.cmd(nil, "report", url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "card removed: "+url+"/07-sharegpt/README.md") {
		t.Errorf("report %s of an unfinished export: %v\n%s", url, err, out)
	}
	if _, err := c.StatObject(context.Background(), "runs", bucket+"07-sharegpt/README.md", minio.StatObjectOptions{}); err == nil {
		t.Error("the card of an unfinished export is still in the prefix")
	}
	if _, err := c.StatObject(context.Background(), "runs", bucket+"06-mt_llama/README.md", minio.StatObjectOptions{}); err != nil {
		t.Errorf("the card of a finished export is gone from the prefix: %v", err)
	}
}

var benchRuns atomic.Int64

// BenchmarkChainS3Workers: the deterministic chain ingest → meta_tool →
// decision_tokens → negatives → export on 60,000 xlam rows (12 shards), as
// one process on a local output dir, one on an S3 output (gofakes3 on
// loopback, in this process), and 3 worker processes plus augment merge on
// an S3 output. It reports the wall seconds per op and the CPU seconds
// (user+system) of the augment processes (not of the S3 server).
//
//	go test ./cmd/augment -run '^$' -bench ChainS3Workers -benchtime 3x
func BenchmarkChainS3Workers(b *testing.B) {
	bin, err := buildAugment()
	if err != nil {
		b.Fatal(err)
	}
	s3Loopback(b)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xlam.json"), e2eRows(60000), 0o644); err != nil {
		b.Fatal(err)
	}
	pipe := "seed: 1\noutput: {dir: out, shard_size: 5000}\nsources:\n  - {name: xlam, path: xlam.json, format: xlam}\nstages:\n" +
		"  - meta_tool: {}\n  - decision_tokens: {}\n  - negatives: {target: token}\n  - export: {format: jsonl}\n"
	if err := os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(pipe), 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(env []string, args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %v\n%s", args, err, out)
		}
		return cmd, err
	}
	cpu := func(cmds ...*exec.Cmd) time.Duration {
		var d time.Duration
		for _, c := range cmds {
			d += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
		}
		return d
	}
	for _, mode := range []string{"local-1", "s3-1", "s3-3workers"} {
		b.Run(mode, func(b *testing.B) {
			var spent time.Duration
			for range b.N {
				// A new output every time: testing runs a benchmark with
				// N=1 before N=2, and a rerun would find all done.
				out := fmt.Sprintf("%s-%d", mode, benchRuns.Add(1))
				sets := []string{"-quiet", "-set", "output.dir=" + filepath.Join(dir, out)}
				if mode != "local-1" {
					sets = []string{"-quiet", "-set", "output.dir=s3://runs/" + out, "-set", "output.work_dir=" + filepath.Join(dir, "work-"+out)}
				}
				switch mode {
				case "local-1", "s3-1":
					cmd, err := run(nil, append(append([]string{"run"}, sets...), "pipeline.yaml")...)
					if err != nil {
						b.Fatal(err)
					}
					spent += cpu(cmd)
				default:
					cmds := make([]*exec.Cmd, 3)
					errs := make([]error, 3)
					var wg sync.WaitGroup
					for w := range 3 {
						wg.Go(func() {
							cmds[w], errs[w] = run([]string{fmt.Sprintf("JOB_COMPLETION_INDEX=%d", w)}, append(append([]string{"run", "-workers", "3"}, sets...), "pipeline.yaml")...)
						})
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						b.Fatal(err)
					}
					merge, err := run(nil, append(append([]string{"merge"}, sets...), "-set", "output.work_dir="+filepath.Join(dir, "merge-"+out), "pipeline.yaml")...)
					if err != nil {
						b.Fatal(err)
					}
					spent += cpu(append(cmds, merge)...)
				}
			}
			b.ReportMetric(spent.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// A run on an S3 output killed (SIGKILL) in the middle of an LLM stage
// has already put its request cache into the prefix (a snapshot taken as
// the run went, not at its end), and a run resumed on another machine asks
// the teacher for none of the answers in it.
func TestCacheReachesS3BeforeTheRunEnds(t *testing.T) {
	const rows = 600
	dump := e2eRows(rows)
	cfg := fakellm.Config{Latency: fakellm.Duration(10 * time.Millisecond)}
	pipe := e2ePipeline{MaxInFlight: 1, ShardSize: 50}
	c := s3Loopback(t)
	fake, dir := e2eSetup(t, cfg, pipe, dump)
	on := func(work string) []string {
		return []string{"run", "-quiet", "-set", "output.dir=s3://runs/cache", "-set", "output.work_dir=" + filepath.Join(dir, work), "pipeline.yaml"}
	}
	// About 4 s into the reason stage (one request at a time, 10 ms each).
	cmd, _ := e2eSignalAt(t, dir, fake, 400, syscall.SIGKILL, on("work-a")...)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("augment was not killed: %v", cmd.ProcessState)
	}
	atKill := fake.Counters().Chat
	snap := filepath.Join(t.TempDir(), "cache")
	if err := c.FGetObject(context.Background(), "runs", "cache/cache/llm-cache.db", filepath.Join(snap, llm.CacheFile), minio.GetObjectOptions{}); err != nil {
		t.Fatalf("no request cache in the prefix after the kill: %v", err)
	}
	cache, err := llm.OpenCacheReadOnly(snap)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cache.Stats()
	cache.Close()
	if err != nil {
		t.Fatal(err)
	}
	var saved int64
	for _, n := range st.Chat {
		saved += n.Entries
	}
	if saved == 0 {
		t.Fatalf("the prefix's cache holds no answer of the %d the killed run paid for", atKill)
	}
	e2eMustRun(t, dir, on("work-b")...)
	resumed := fake.Counters().Chat - atKill
	if resumed > rows-saved {
		t.Errorf("the resumed run asked %d times; with %d answers in the prefix's cache it needs at most %d", resumed, saved, rows-saved)
	}
	t.Logf("killed after %d requests with %d answers in the prefix; resumed elsewhere: %d more (of %d)", atKill, saved, resumed, rows)
}
