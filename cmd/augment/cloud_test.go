package main

// gs:// and azblob:// end to end, against fake-gcs-server and Azurite on
// loopback (each skipped when its server is not installed): sources read
// from them ingest into exactly the records the same dumps give from local
// files, and a run with output.dir on them leaves there the bytes of a
// local run, also after a kill -9 and a resume on another machine.

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/llm/fakellm"
	"github.com/augmentdata/augment/storage/cloudtest"
)

// A cloudServer is Azurite or fake-gcs-server as the test drives it.
type cloudServer interface {
	CreateBucket(t testing.TB, name string)
	Put(t testing.TB, bucket, key string, b []byte)
	Download(t testing.TB, bucket, prefix, dir string)
}

func TestCloudEndToEnd(t *testing.T) {
	for _, c := range []struct {
		scheme string
		start  func(t *testing.T) cloudServer
	}{
		{"azblob", func(t *testing.T) cloudServer {
			az := cloudtest.StartAzurite(t)
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", az.ConnectionString)
			return az
		}},
		{"gs", func(t *testing.T) cloudServer {
			g := cloudtest.StartFakeGCS(t)
			t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
			return g
		}},
	} {
		t.Run(c.scheme, func(t *testing.T) {
			srv := c.start(t)
			srv.CreateBucket(t, "dumps")
			srv.CreateBucket(t, "runs")
			t.Run("sources", func(t *testing.T) { cloudSources(t, c.scheme, srv) })
			t.Run("output", func(t *testing.T) { cloudOutput(t, c.scheme, srv) })
			t.Run("kill and resume", func(t *testing.T) { cloudKill(t, c.scheme, srv) })
			t.Run("workers", func(t *testing.T) { cloudWorkers(t, c.scheme, srv) })
		})
	}
}

// cloudSources: JSON, JSON Lines and gzip (and zstd, Parquet) from the
// store ingest like the same local files; a rerun reads nothing again.
func cloudSources(t *testing.T, scheme string, srv cloudServer) {
	files := remoteDumps(t)
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		srv.Put(t, "dumps", "v1/"+name, b)
	}
	want := ingestFiles(t, remoteRun(t, dir, "local", [3]string{"xlam.jsonl", "toolace.json", "glaive.jsonl.gz"}, ""))
	url := func(n string) string { return scheme + "://dumps/v1/" + n }
	got := ingestFiles(t, remoteRun(t, dir, "cloud", [3]string{url("xlam.jsonl"), url("toolace.json"), url("glaive.jsonl.gz")}, ""))
	sameIngest(t, scheme+" json, jsonl, gzip", want, got)
	if _, stderr := e2eMustRun(t, dir, "run", "cloud.yaml"); strings.Count(stderr, "skip source") != 3 {
		t.Errorf("rerun did not skip the 3 sources:\n%s", stderr)
	}
	m := e2eManifest(t, filepath.Join(dir, "out-cloud"), "00-ingest")
	if sh, _ := m.Shard("xlam-00000"); !strings.HasPrefix(sh.Inputs[0].Source, url("xlam.jsonl")+"#") || sh.Inputs[0].SHA256 != sha256Hex(files["xlam.jsonl"]) {
		t.Errorf("xlam recorded as %+v", sh.Inputs[0])
	}
	got = ingestFiles(t, remoteRun(t, dir, "cloudenc", [3]string{url("xlam.parquet"), url("toolace.json.zst"), url("glaive.jsonl.gz")}, ""))
	sameIngest(t, scheme+" parquet, zstd", want, got)
	writeRemotePipeline(t, dir, "missing", [3]string{url("xlam.jsonl"), url("toolace.json"), url("nope.json")}, "")
	if code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "missing.yaml"); code != 2 || !strings.Contains(stderr, "no such object") {
		t.Errorf("missing object: exit %d, stderr:\n%s", code, stderr)
	}
}

// cloudOutput: the demo run with output.dir on the store leaves there the
// data files of a local run; a fresh working copy resumes from the store
// with nothing left to do; a foreign prefix is refused.
func cloudOutput(t *testing.T, scheme string, srv cloudServer) {
	demo, err := filepath.Abs("../../testdata/demo/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e2eMustRun(t, dir, "run", "-quiet", "-set", "output.dir="+filepath.Join(dir, "local"), demo)
	want := e2eDataFiles(t, filepath.Join(dir, "local"))
	stored := func() map[string][]byte {
		got := t.TempDir()
		srv.Download(t, "runs", "demo/r1/", got)
		if _, err := os.Stat(filepath.Join(got, "06-mt_llama", "manifest.json")); err != nil {
			t.Errorf("no manifest in the store: %v", err)
		}
		if _, err := os.Stat(filepath.Join(got, ".augment", "lock")); err == nil {
			t.Error("the local lock file was uploaded")
		}
		return e2eDataFiles(t, got)
	}
	out := "output.dir=" + scheme + "://runs/demo/r1"
	_, stderr := e2eMustRun(t, dir, "run", "-set", out, "-set", "output.work_dir="+filepath.Join(dir, "work-a"), demo)
	if !strings.Contains(stderr, "output mirrored to object storage") {
		t.Errorf("no mirror line in:\n%s", stderr)
	}
	e2eSameData(t, want, stored())

	_, stderr = e2eMustRun(t, dir, "run", "-set", out, "-set", "output.work_dir="+filepath.Join(dir, "work-b"), demo)
	if !strings.Contains(stderr, "output pulled from object storage") || strings.Contains(stderr, "shard done") {
		t.Errorf("the second machine did not resume from the store:\n%s", stderr)
	}
	if n := strings.Count(stderr, "skip stage"); n < 7 {
		t.Errorf("%d stages skipped on the second machine, want all:\n%s", n, stderr)
	}
	e2eSameData(t, want, stored())

	srv.Put(t, "runs", "theirs/data.csv", []byte("a,b"))
	code, _, stderr := e2eAugment(t, dir, "run", "-set", "output.dir="+scheme+"://runs/theirs", "-set", "output.work_dir="+filepath.Join(dir, "work-c"), demo)
	if code != 2 || !strings.Contains(stderr, "holds objects augment did not write") {
		t.Errorf("foreign prefix: exit %d\n%s", code, stderr)
	}
}

// cloudKill: kill -9 in the middle of an LLM stage with the output on the
// store, resumed on another machine (a fresh working copy), then run again
// on the first (a stale copy): the store ends with the clean run's bytes
// and the stale machine asks the teacher nothing more.
func cloudKill(t *testing.T, scheme string, srv cloudServer) {
	const rows = 600
	dump := e2eRows(rows)
	cfg := fakellm.Config{Latency: fakellm.Duration(3 * time.Millisecond)}
	pipe := e2ePipeline{MaxInFlight: 2, ShardSize: 50}
	cleanFake, cleanDir := e2eSetup(t, cfg, pipe, dump)
	e2eMustRun(t, cleanDir, "run", "-quiet", "pipeline.yaml")
	want := e2eDataFiles(t, filepath.Join(cleanDir, "out"))
	stored := func() map[string][]byte {
		got := t.TempDir()
		srv.Download(t, "runs", "k/", got)
		return e2eDataFiles(t, got)
	}
	fake, dir := e2eSetup(t, cfg, pipe, dump)
	on := func(work string) []string {
		return []string{"run", "-quiet", "-set", "output.dir=" + scheme + "://runs/k", "-set", "output.work_dir=" + filepath.Join(dir, work), "pipeline.yaml"}
	}
	cmd, _ := e2eSignalAt(t, dir, fake, cleanFake.Counters().Chat*2/5, syscall.SIGKILL, on("work-a")...)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("augment was not killed: %v", cmd.ProcessState)
	}
	atKill := fake.Counters().Chat
	e2eMustRun(t, dir, on("work-b")...)
	e2eSameData(t, want, stored())
	resumed := fake.Counters().Chat - atKill
	e2eMustRun(t, dir, on("work-a")...)
	e2eSameData(t, want, stored())
	if again := fake.Counters().Chat - atKill - resumed; again != 0 {
		t.Errorf("the stale machine asked the teacher %d more times", again)
	}
	t.Logf("clean run: %d requests; killed at %d; resumed elsewhere: %d more", cleanFake.Counters().Chat, atKill, resumed)
}

// cloudWorkers: the demo pipeline as 3 worker processes (a Kubernetes
// Indexed Job's variables) with output.dir on the store, each with its
// own working copy, then augment merge: the prefix holds the bytes of one
// local process, no lease is left, and status reads the prefix.
func cloudWorkers(t *testing.T, scheme string, srv cloudServer) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	one := newWorkerRun(t, "one")
	one.must(one.cmd(nil, one.args("run")...))
	w := newWorkerRun(t, "workers")
	url := scheme + "://runs/workers"
	w.sets = append(w.sets, "-set", "output.dir="+url, "-set", "output.work_dir="+filepath.Join(w.dir, "work"))
	envs, extra := engineEnvs("kubernetes", 3)
	extra = append(extra, "-worker-wait", "2m") // a failure ends the test, not a day later
	for _, err := range w.workers(envs, extra...) {
		if err != nil {
			t.Fatal(err)
		}
	}
	out, err := w.cmd(nil, w.args("merge", "-set", "output.work_dir="+filepath.Join(w.dir, "merge"))...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "not finished by the workers") {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	got := filepath.Join(t.TempDir(), "bucket")
	srv.Download(t, "runs", "workers/", got)
	if leases, _ := filepath.Glob(filepath.Join(got, ".augment", "lease-*")); len(leases) > 0 {
		t.Errorf("leases left behind: %v", leases)
	}
	sameConfig(t, filepath.Join(one.dir, "out"), got)
	sameOutputs(t, filepath.Join(one.dir, "out"), got)
	st, err := w.cmd(nil, "status", url).CombinedOutput()
	if err != nil || !regexp.MustCompile(`07-sharegpt +15/15 +12 +12 .* done`).Match(st) {
		t.Errorf("status %s: %v\n%s", url, err, st)
	}
}

// cutProxy serves fake-gcs-server at host through loopback and cuts the
// next cuts downloads (media GETs of 2 KiB or more) after 1 KiB, as a
// connection broken mid-object.
func cutProxy(t *testing.T, host string, cuts *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI, out.URL.Scheme, out.URL.Host = "", "http", host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		if r.Method == "GET" && r.URL.Query().Get("alt") == "media" && resp.ContentLength >= 2<<10 && cuts.Add(-1) >= 0 {
			io.CopyN(w, resp.Body, 1<<10)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection is cut
		}
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A pull on a fresh machine whose download is cut off resumes it and runs
// on; one cut on every try fails (exit 1) naming the object and its store
// and saying that a rerun tries again (QA: a cut failed the whole pull).
func TestCloudPullCut(t *testing.T) {
	g := cloudtest.StartFakeGCS(t)
	g.CreateBucket(t, "runs")
	var cuts atomic.Int32
	t.Setenv("STORAGE_EMULATOR_HOST", cutProxy(t, g.Host, &cuts))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xlam.jsonl"), remoteDumps(t)["xlam.jsonl"], 0o644); err != nil {
		t.Fatal(err)
	}
	writeHubPipeline(t, dir, "cut", filepath.Join(dir, "xlam.jsonl"))
	run := func(work string) (int, string) {
		code, _, stderr := e2eAugment(t, dir, "run", "-set", "output.dir=gs://runs/cut", "-set", "output.work_dir="+filepath.Join(dir, work), "cut.yaml")
		return code, stderr
	}
	if code, stderr := run("a"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	cuts.Store(1)
	if code, stderr := run("b"); code != 0 || !strings.Contains(stderr, "output pulled from object storage") || cuts.Load() > 0 {
		t.Fatalf("a pull cut once (%d cuts left): exit %d\n%s", cuts.Load(), code, stderr)
	}
	cuts.Store(1000)
	code, stderr := run("c")
	if code != 1 || !regexp.MustCompile(`augment: output.dir gs://runs/cut: gs://runs/cut/\S+: reading it from Google Cloud Storage was cut off 4 times \(.*a rerun tries again\)`).MatchString(stderr) {
		t.Errorf("a pull cut on every try: exit %d\n%s\nwant exit 1 naming the object, its store and a rerun", code, stderr)
	}
}
