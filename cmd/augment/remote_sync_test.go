package main

// An output on S3 kept in step with its working copy across reruns, a
// failed upload and the report command, with gofakes3 on loopback behind a
// handler that can refuse uploads.

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
)

// faultyS3 starts gofakes3 with a bucket "runs" behind a handler that
// answers 500 to a request whose "METHOD path?query" matches the pattern
// stored in fail, and points the environment at it. It returns a client of
// the store.
func faultyS3(t *testing.T, fail *atomic.Pointer[regexp.Regexp]) *minio.Client {
	t.Helper()
	return s3LoopbackVia(t, func(s3 http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if re := fail.Load(); re != nil && re.MatchString(r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery) {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusInternalServerError)
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>injected</Message></Error>`))
				return
			}
			s3.ServeHTTP(w, r)
		})
	})
}

// syncPipeline writes an offline pipeline over two of the demo's dumps into
// dir, with its output at s3://runs/<prefix> and its working copy in
// dir/<prefix>.
func syncPipeline(t *testing.T, dir, prefix string) {
	t.Helper()
	for _, d := range []string{"glaive.json", "xlam.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "demo", "dumps", d))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	y := `seed: 7
output: {dir: "s3://runs/` + prefix + `", work_dir: ` + prefix + `, shard_size: 2}
sources:
  - {name: glaive, path: glaive.json, format: glaive}
  - {name: xlam, path: xlam.json, format: xlam}
stages:
  - decision_tokens: {}
  - name: sharegpt
    export: {template: qwen3}
`
	if err := os.WriteFile(filepath.Join(dir, prefix+".yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// object reads one object of the bucket "runs".
func object(t *testing.T, c *minio.Client, key string) []byte {
	t.Helper()
	o, err := c.GetObject(context.Background(), "runs", key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(o); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return b.Bytes()
}

// A rerun that rewrites report.html and a dataset card leaves the prefix
// with the new ones, as does augment report on the prefix.
func TestRemoteOutputRerunUploadsReportAndCards(t *testing.T) {
	var fail atomic.Pointer[regexp.Regexp]
	c := faultyS3(t, &fail)
	dir := t.TempDir()
	syncPipeline(t, dir, "r3")
	work := filepath.Join(dir, "r3")
	inStep := func(when string) {
		t.Helper()
		for _, name := range []string{"report.html", "02-sharegpt/README.md"} {
			local, err := os.ReadFile(filepath.Join(work, name))
			if err != nil {
				t.Fatal(err)
			}
			if got := object(t, c, "r3/"+name); !bytes.Equal(got, local) {
				t.Errorf("%s: the bucket's %s is not the local one:\n%s", when, name, got)
			}
		}
	}
	e2eMustRun(t, dir, "run", "-quiet", "r3.yaml")
	inStep("first run")
	e2eMustRun(t, dir, "run", "-quiet", "-set", "sources.1.limit=2", "r3.yaml")
	inStep("rerun with fewer rows")
	ran := object(t, c, "r3/report.html")

	stale := []byte("<!DOCTYPE html>stale")
	if _, err := c.PutObject(context.Background(), "runs", "r3/report.html", bytes.NewReader(stale), int64(len(stale)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	stdout, _ := e2eMustRun(t, dir, "report", "s3://runs/r3")
	if !strings.Contains(stdout, "report: s3://runs/r3/report.html") {
		t.Errorf("augment report says:\n%s", stdout)
	}
	if got := object(t, c, "r3/report.html"); bytes.Equal(got, stale) || !bytes.HasPrefix(got, []byte("<!DOCTYPE html>")) {
		t.Errorf("after augment report the bucket's report.html is %.60q", got)
	}
	// The report names the run by its output, not by the local copy it was
	// written in (the work dir, a temporary dir of augment report), so every
	// report of the run is the same file.
	if got := object(t, c, "r3/report.html"); !bytes.Contains(got, []byte("<h1>augment report: s3://runs/r3</h1>")) || !bytes.Equal(got, ran) {
		t.Errorf("augment report wrote another report.html than the run (title %q)", regexp.MustCompile(`<h1>[^<]*`).Find(got))
	}
	e2eMustRun(t, dir, "report", "s3://runs/r3/")
	if got := object(t, c, "r3/report.html"); !bytes.Equal(got, ran) {
		t.Errorf("augment report again wrote another report.html (title %q)", regexp.MustCompile(`<h1>[^<]*`).Find(got))
	}

	// A record not there is said to be missing from the prefix.
	code, _, stderr := e2eAugment(t, dir, "show", "glaive:999", "s3://runs/r3")
	if code != 1 || !strings.Contains(stderr, `no record "glaive:999" in any stage of s3://runs/r3`) || strings.Contains(stderr, "augment-remote-") {
		t.Errorf("show of a missing record: exit %d\n%s", code, stderr)
	}
}

// A store failing before the run starts (listing the prefix's leases) is
// named as such, without the advice to resume work that was never done.
func TestRemoteOutputUnreachableBeforeTheRun(t *testing.T) {
	var fail atomic.Pointer[regexp.Regexp]
	faultyS3(t, &fail)
	dir := t.TempDir()
	syncPipeline(t, dir, "r5")
	fail.Store(regexp.MustCompile(`^GET /runs/\?.*prefix=r5%2F\.augment%2Flease-worker-`))
	code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "r5.yaml")
	if code != 1 || !strings.Contains(stderr, "augment: output.dir s3://runs/r5: listing the leases of other processes") || strings.Contains(stderr, "finished work is kept") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

// A run whose uploads failed leaves a complete local copy; the rerun keeps
// it (nothing is run again) and uploads the rest, so the prefix ends as
// the local copy.
func TestRemoteOutputResumeAfterFailedUpload(t *testing.T) {
	var fail atomic.Pointer[regexp.Regexp]
	c := faultyS3(t, &fail)
	dir := t.TempDir()
	syncPipeline(t, dir, "r4")
	fail.Store(regexp.MustCompile(`^PUT /runs/r4/01-decision_tokens/part-xlam-`))
	code, _, stderr := e2eAugment(t, dir, "run", "r4.yaml")
	if code != 1 || !strings.Contains(stderr, "running again uploads the rest") {
		t.Fatalf("a refused upload: exit %d\n%s", code, stderr)
	}
	fail.Store(nil)
	_, stderr = e2eMustRun(t, dir, "run", "r4.yaml")
	if strings.Contains(stderr, "output pulled from object storage") || strings.Count(stderr, "skip source") != 2 || strings.Count(stderr, "skip stage") != 2 {
		t.Errorf("the rerun did not resume from the complete local copy:\n%s", stderr)
	}
	got := filepath.Join(t.TempDir(), "bucket")
	for obj := range c.ListObjects(context.Background(), "runs", minio.ListObjectsOptions{Prefix: "r4/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if err := c.FGetObject(context.Background(), "runs", obj.Key, filepath.Join(got, filepath.FromSlash(strings.TrimPrefix(obj.Key, "r4/"))), minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e2eSameData(t, e2eDataFiles(t, filepath.Join(dir, "r4")), e2eDataFiles(t, got))
	for _, m := range []string{"00-ingest/manifest.json", "01-decision_tokens/manifest.json", "02-sharegpt/manifest.json"} {
		local, _ := os.ReadFile(filepath.Join(dir, "r4", m))
		if b, _ := os.ReadFile(filepath.Join(got, m)); !bytes.Equal(b, local) {
			t.Errorf("%s: the bucket's differs from the local one", m)
		}
	}
}
