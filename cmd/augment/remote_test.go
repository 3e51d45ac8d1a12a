package main

// Remote sources end to end: the demo's dumps served by a loopback Hub
// (storage/fakehub) and a loopback S3 server (gofakes3), as JSON Lines,
// JSON arrays, gzip, zstd and Parquet, ingest into exactly the records the
// same rows give from local files.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/parquet-go/parquet-go"

	"github.com/augmentdata/augment/stages/llm/fakellm"
	"github.com/augmentdata/augment/storage/fakehub"
)

type remoteXlam struct {
	ID      int64  `parquet:"id" json:"id"`
	Query   string `parquet:"query" json:"query"`
	Answers string `parquet:"answers" json:"answers"`
	Tools   string `parquet:"tools" json:"tools"`
}

type remoteTurn struct {
	From  string `parquet:"from" json:"from"`
	Value string `parquet:"value" json:"value"`
}

type remoteToolace struct {
	System        string       `parquet:"system" json:"system"`
	Conversations []remoteTurn `parquet:"conversations,list" json:"conversations"`
}

type remoteGlaive struct {
	System string `parquet:"system" json:"system"`
	Chat   string `parquet:"chat" json:"chat"`
}

// remoteDumps holds the demo's three dumps in every encoding the test
// serves, by file name.
func remoteDumps(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	add := func(name string, rows any, each func(func(any))) {
		var jsonl, array bytes.Buffer
		array.WriteByte('[')
		i := 0
		each(func(r any) {
			enc := json.NewEncoder(&jsonl)
			enc.SetEscapeHTML(false)
			enc.Encode(r)
			var one bytes.Buffer
			enc = json.NewEncoder(&one)
			enc.SetEscapeHTML(false)
			enc.Encode(r)
			if i > 0 {
				array.WriteByte(',')
			}
			array.Write(bytes.TrimSuffix(one.Bytes(), []byte("\n")))
			i++
		})
		array.WriteString("]\n")
		files[name+".jsonl"] = jsonl.Bytes()
		files[name+".json"] = array.Bytes()
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(jsonl.Bytes())
		zw.Close()
		files[name+".jsonl.gz"] = gz.Bytes()
		enc, _ := zstd.NewWriter(nil)
		files[name+".json.zst"] = enc.EncodeAll(array.Bytes(), nil)
		files[name+".parquet"] = remoteParquet(t, rows)
	}
	var xl []remoteXlam
	var ta []remoteToolace
	var gl []remoteGlaive
	for name, v := range map[string]any{"xlam": &xl, "toolace": &ta, "glaive": &gl} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "demo", "dumps", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	add("xlam", xl, func(f func(any)) {
		for _, r := range xl {
			f(r)
		}
	})
	add("toolace", ta, func(f func(any)) {
		for _, r := range ta {
			f(r)
		}
	})
	add("glaive", gl, func(f func(any)) {
		for _, r := range gl {
			f(r)
		}
	})
	return files
}

func remoteParquet(t *testing.T, rows any) []byte {
	var buf bytes.Buffer
	var err error
	switch rs := rows.(type) {
	case []remoteXlam:
		w := parquet.NewGenericWriter[remoteXlam](&buf, parquet.MaxRowsPerRowGroup(2))
		if _, err = w.Write(rs); err == nil {
			err = w.Close()
		}
	case []remoteToolace:
		w := parquet.NewGenericWriter[remoteToolace](&buf, parquet.MaxRowsPerRowGroup(2))
		if _, err = w.Write(rs); err == nil {
			err = w.Close()
		}
	case []remoteGlaive:
		w := parquet.NewGenericWriter[remoteGlaive](&buf, parquet.MaxRowsPerRowGroup(2))
		if _, err = w.Write(rs); err == nil {
			err = w.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// remoteRun writes a pipeline of the three sources at paths (xlam,
// toolace, glaive) into dir/name.yaml, runs ingest only, and returns its
// output directory.
func remoteRun(t *testing.T, dir, name string, paths [3]string, extra string) string {
	t.Helper()
	writeRemotePipeline(t, dir, name, paths, extra)
	e2eMustRun(t, dir, "run", "-quiet", name+".yaml")
	return filepath.Join(dir, "out-"+name)
}

func writeRemotePipeline(t *testing.T, dir, name string, paths [3]string, extra string) {
	t.Helper()
	y := fmt.Sprintf("seed: 7\noutput: {dir: out-%s, shard_size: 4, jsonl: true}\n%ssources:\n"+
		"  - {name: xlam, path: %q, format: xlam}\n  - {name: toolace, path: %q, format: toolace}\n  - {name: glaive, path: %q, format: glaive}\n"+
		"stages:\n  - verify: {checks: [roles, calls_resolved]}\n", name, extra, paths[0], paths[1], paths[2])
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ingestFiles is the data of a run's ingest stage.
func ingestFiles(t *testing.T, out string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	for name, b := range e2eDataFiles(t, out) {
		if strings.HasPrefix(name, "00-ingest/") {
			got[name] = b
		}
	}
	if len(got) == 0 {
		t.Fatalf("%s: no ingest output", out)
	}
	return got
}

func sameIngest(t *testing.T, what string, want, got map[string][]byte) {
	t.Helper()
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: %s missing", what, name)
		} else if !bytes.Equal(g, w) {
			t.Errorf("%s: %s differs from the local run's", what, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s not in the local run", what, name)
		}
	}
}

func TestRemoteSourcesIngestLikeLocalFiles(t *testing.T) {
	files := remoteDumps(t)
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := ingestFiles(t, remoteRun(t, dir, "local", [3]string{"xlam.jsonl", "toolace.json", "glaive.jsonl"}, ""))
	for _, n := range []string{"part-xlam-00000.parquet", "part-toolace-00001.parquet", "part-glaive-00001.jsonl", "tools-glaive.jsonl"} {
		if len(want["00-ingest/"+n]) == 0 {
			t.Fatalf("the local run wrote no %s: %v", n, slices.Sorted(mapKeys(want)))
		}
	}

	t.Run("local compressed and parquet", func(t *testing.T) {
		got := ingestFiles(t, remoteRun(t, dir, "localenc", [3]string{"xlam.parquet", "toolace.json.zst", "glaive.jsonl.gz"}, ""))
		sameIngest(t, "local .parquet/.zst/.gz", want, got)
	})

	// The Hub: a private dataset (HF_TOKEN needed) with the dumps on main
	// and the Parquet conversion on refs/convert/parquet.
	hub := fakehub.New()
	defer hub.Close()
	hub.Token = "hf_test_token"
	commit := hub.Commit("org/tools", "main", map[string][]byte{
		"xlam.jsonl": files["xlam.jsonl"], "data/toolace.json": files["toolace.json"], "glaive.jsonl.gz": files["glaive.jsonl.gz"]})
	hub.Commit("org/tools", "refs/convert/parquet", map[string][]byte{
		"default/xlam/0000.parquet": files["xlam.parquet"], "default/toolace/0000.parquet": files["toolace.parquet"],
		"default/glaive/0000.parquet": files["glaive.parquet"]})
	t.Setenv("HF_ENDPOINT", hub.URL)
	hubPaths := [3]string{"hf://datasets/org/tools/xlam.jsonl", "hf://datasets/org/tools/data/toolace.json", "hf://datasets/org/tools/glaive.jsonl.gz"}

	t.Run("hub without token", func(t *testing.T) {
		t.Setenv("HF_TOKEN", "")
		writeRemotePipeline(t, dir, "hubnotoken", hubPaths, "")
		code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "hubnotoken.yaml")
		if code != 2 || !strings.Contains(stderr, "set HF_TOKEN") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 2 saying to set HF_TOKEN", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "out-hubnotoken")); err == nil {
			t.Error("a refused run wrote its output dir")
		}
	})

	t.Setenv("HF_TOKEN", "hf_test_token")
	t.Run("hub json, jsonl, gzip", func(t *testing.T) {
		// The gzip download is cut off once; the run resumes it.
		hub.CutNext(files["glaive.jsonl.gz"], int64(len(files["glaive.jsonl.gz"])/2))
		out := remoteRun(t, dir, "hub", hubPaths, "")
		sameIngest(t, "hub", want, ingestFiles(t, out))
		m := e2eManifest(t, out, "00-ingest")
		pins := map[string]string{}
		for _, sh := range m.Shards {
			pins[sh.Inputs[0].Source] = sh.Inputs[0].SHA256
		}
		for _, p := range hubPaths {
			if _, ok := pins[p+"@"+commit]; !ok {
				t.Errorf("manifest inputs %v do not pin %s to commit %s", pins, p, commit)
			}
		}
		resumed := 0
		for _, r := range hub.Requests() {
			if strings.HasPrefix(r.Path, "/cdn/") && r.Range != "" {
				resumed++
			}
			if strings.Contains(r.Path, "hf_test_token") {
				t.Errorf("token in a URL: %s", r.Path)
			}
		}
		if resumed == 0 {
			t.Error("the cut download was not resumed with a Range request")
		}
		// Again: nothing is downloaded, every source is up to date.
		before := len(hub.Requests())
		_, stderr := e2eMustRun(t, dir, "run", "hub.yaml")
		for _, r := range hub.Requests()[before:] {
			if r.Method == "GET" && !strings.HasPrefix(r.Path, "/api/") {
				t.Errorf("rerun downloaded %s", r.Path)
			}
		}
		if n := strings.Count(stderr, "skip source"); n != 3 {
			t.Errorf("rerun skipped %d sources, want 3:\n%s", n, stderr)
		}
		// The branch moves: the changed file is read again, at the new commit.
		var moved bytes.Buffer
		moved.Write(files["xlam.jsonl"])
		moved.WriteString(`{"id":99,"query":"Weather in Oslo?","answers":"[]","tools":"[]"}` + "\n")
		next := hub.Commit("org/tools", "main", map[string][]byte{
			"xlam.jsonl": moved.Bytes(), "data/toolace.json": files["toolace.json"], "glaive.jsonl.gz": files["glaive.jsonl.gz"]})
		_, stderr = e2eMustRun(t, dir, "run", "hub.yaml")
		if n := strings.Count(stderr, "skip source"); n != 2 {
			t.Errorf("after the branch moved, %d sources skipped, want 2:\n%s", n, stderr)
		}
		m = e2eManifest(t, out, "00-ingest")
		if sh, _ := m.Shard("xlam-00000"); sh.Inputs[0].Source != hubPaths[0]+"@"+next {
			t.Errorf("xlam pinned to %q, want commit %s", sh.Inputs[0].Source, next)
		}
	})

	t.Run("hub check", func(t *testing.T) {
		// check previews remote sources (main now has the 16 rows of the
		// moved branch) and writes nothing.
		stdout, _ := e2eMustRun(t, dir, "check", "-set", "output.dir=out-hubcheck", "hub.yaml")
		for _, want := range []string{"xlam ", "toolace ", "glaive ", "previewed on record xlam:0; about 16 records"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("check output lacks %q:\n%s", want, stdout)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "out-hubcheck")); err == nil {
			t.Error("check wrote an output dir")
		}
	})

	t.Run("hub parquet conversion", func(t *testing.T) {
		rev := "@refs/convert/parquet"
		got := ingestFiles(t, remoteRun(t, dir, "hubpq", [3]string{"hf://datasets/org/tools/default/xlam/0000.parquet" + rev,
			"hf://datasets/org/tools/default/toolace/0000.parquet" + rev, "hf://datasets/org/tools/default/glaive/0000.parquet" + rev}, ""))
		sameIngest(t, "hub parquet", want, got)
	})

	t.Run("hub missing file", func(t *testing.T) {
		writeRemotePipeline(t, dir, "hubmissing", [3]string{hubPaths[0], hubPaths[1], "hf://datasets/org/tools/nope.jsonl"}, "")
		code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "hubmissing.yaml")
		if code != 2 || !strings.Contains(stderr, "hubmissing.yaml:") || !strings.Contains(stderr, "does not exist") {
			t.Errorf("exit %d, stderr:\n%s\nwant exit 2 naming the missing source", code, stderr)
		}
	})

	t.Run("s3", func(t *testing.T) {
		be := s3mem.New()
		be.CreateBucket("dumps")
		srv := httptest.NewServer(gofakes3.New(be).Server())
		defer srv.Close()
		t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
		t.Setenv("AWS_REGION", "us-east-1")
		c, err := minio.New(strings.TrimPrefix(srv.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4("test-key", "test-secret", ""), Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"xlam.jsonl.gz", "toolace.parquet", "glaive.json.zst"} {
			if _, err := c.PutObject(context.Background(), "dumps", "v1/"+n, bytes.NewReader(files[n]), int64(len(files[n])), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		paths := [3]string{"s3://dumps/v1/xlam.jsonl.gz", "s3://dumps/v1/toolace.parquet", "s3://dumps/v1/glaive.json.zst"}
		got := ingestFiles(t, remoteRun(t, dir, "s3", paths, fmt.Sprintf("storage: {s3: {endpoint: %q}}\n", srv.URL)))
		sameIngest(t, "s3", want, got)
		// Again: every object has the ETag pinned last time, nothing is
		// read; a replaced object is read again.
		if _, stderr := e2eMustRun(t, dir, "run", "s3.yaml"); strings.Count(stderr, "skip source") != 3 {
			t.Errorf("rerun did not skip the 3 sources:\n%s", stderr)
		}
		var regz bytes.Buffer // the same rows, compressed otherwise
		zw, _ := gzip.NewWriterLevel(&regz, gzip.BestSpeed)
		zw.Write(files["xlam.jsonl"])
		zw.Close()
		if _, err := c.PutObject(context.Background(), "dumps", "v1/xlam.jsonl.gz", bytes.NewReader(regz.Bytes()), int64(regz.Len()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, stderr := e2eMustRun(t, dir, "run", "s3.yaml"); strings.Count(stderr, "skip source") != 2 {
			t.Errorf("after replacing one object, want 2 sources skipped:\n%s", stderr)
		}
		m := e2eManifest(t, filepath.Join(dir, "out-s3"), "00-ingest")
		if sh, _ := m.Shard("xlam-00000"); sh.Inputs[0].SHA256 != sha256Hex(regz.Bytes()) || !strings.HasPrefix(sh.Inputs[0].Source, "s3://dumps/v1/xlam.jsonl.gz#etag=") {
			t.Errorf("replaced object recorded as %+v", sh.Inputs[0])
		}
		sameIngest(t, "s3 after replacing an object with the same rows", want, ingestFiles(t, filepath.Join(dir, "out-s3")))
		// The endpoint may come from the environment instead.
		t.Setenv("AWS_ENDPOINT_URL", srv.URL)
		got = ingestFiles(t, remoteRun(t, dir, "s3env", paths, ""))
		sameIngest(t, "s3 (AWS_ENDPOINT_URL)", want, got)
		writeRemotePipeline(t, dir, "s3missing", [3]string{paths[0], paths[1], "s3://dumps/v1/nope.json"}, "")
		if code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "s3missing.yaml"); code != 2 || !strings.Contains(stderr, "no such object") {
			t.Errorf("missing object: exit %d, stderr:\n%s", code, stderr)
		}
	})

	t.Run("unsupported scheme", func(t *testing.T) {
		writeRemotePipeline(t, dir, "ftp", [3]string{"ftp://b/xlam.jsonl", hubPaths[1], hubPaths[2]}, "")
		code, _, stderr := e2eAugment(t, dir, "run", "-quiet", "ftp.yaml")
		if code != 2 || !strings.Contains(stderr, `scheme "ftp" is not supported`) {
			t.Errorf("ftp://: exit %d, stderr:\n%s", code, stderr)
		}
	})
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// An output on S3: the demo run with output.dir s3://… leaves in the bucket
// the same data files as a local run, manifests included; a run on another
// machine (a fresh working copy) pulls it and has nothing left to do; a
// prefix holding objects augment did not write is refused.
func TestRemoteOutputOnS3(t *testing.T) {
	demo, err := filepath.Abs("../../testdata/demo/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e2eMustRun(t, dir, "run", "-quiet", "-set", "output.dir="+filepath.Join(dir, "local"), demo)
	want := e2eDataFiles(t, filepath.Join(dir, "local"))

	c := s3Loopback(t)
	bucket := func(prefix string) map[string][]byte {
		t.Helper()
		got := filepath.Join(t.TempDir(), "bucket")
		for obj := range c.ListObjects(context.Background(), "runs", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			p := filepath.Join(got, filepath.FromSlash(strings.TrimPrefix(obj.Key, prefix)))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := c.FGetObject(context.Background(), "runs", obj.Key, p, minio.GetObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return e2eDataFiles(t, got)
	}

	stdout, stderr := e2eMustRun(t, dir, "run", "-set", "output.dir=s3://runs/demo/r1", "-set", "output.work_dir="+filepath.Join(dir, "work-a"), demo)
	// The summary names the output the user configured, then the copy.
	if !strings.Contains(stdout, "output: s3://runs/demo/r1 (working copy: ") {
		t.Errorf("the run's summary does not name the store:\n%s", stdout)
	}
	if !strings.Contains(stderr, "output mirrored to object storage") {
		t.Errorf("no mirror line in:\n%s", stderr)
	}
	e2eSameData(t, want, bucket("demo/r1/"))
	if _, err := c.StatObject(context.Background(), "runs", "demo/r1/06-mt_llama/manifest.json", minio.StatObjectOptions{}); err != nil {
		t.Errorf("no manifest in the bucket: %v", err)
	}
	if _, err := c.StatObject(context.Background(), "runs", "demo/r1/.augment/lock", minio.StatObjectOptions{}); err == nil {
		t.Error("the local lock file was uploaded")
	}

	// Another machine: a fresh working copy starts from the bucket.
	_, stderr = e2eMustRun(t, dir, "run", "-set", "output.dir=s3://runs/demo/r1", "-set", "output.work_dir="+filepath.Join(dir, "work-b"), demo)
	if !strings.Contains(stderr, "output pulled from object storage") || strings.Contains(stderr, "shard done") {
		t.Errorf("the second machine did not resume from the bucket:\n%s", stderr)
	}
	if n := strings.Count(stderr, "skip stage"); n < 7 {
		t.Errorf("%d stages skipped on the second machine, want all:\n%s", n, stderr)
	}
	e2eSameData(t, want, bucket("demo/r1/"))

	// A prefix that is not augment's is refused before anything is written.
	if _, err := c.PutObject(context.Background(), "runs", "theirs/data.csv", strings.NewReader("a,b"), 3, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := e2eAugment(t, dir, "run", "-set", "output.dir=s3://runs/theirs", "-set", "output.work_dir="+filepath.Join(dir, "work-c"), demo)
	if code != 2 || !strings.Contains(stderr, "holds objects augment did not write") {
		t.Errorf("foreign prefix: exit %d\n%s", code, stderr)
	}
}

// kill -9 in the middle of an LLM stage with the output on S3, resumed on
// another machine (a fresh working copy), then run again on the first
// machine (a stale copy): the bucket ends with the clean run's bytes.
func TestKillWithOutputOnS3(t *testing.T) {
	const rows = 600
	dump := e2eRows(rows)
	cfg := fakellm.Config{Latency: fakellm.Duration(3 * time.Millisecond)}
	pipe := e2ePipeline{MaxInFlight: 2, ShardSize: 50}
	cleanFake, cleanDir := e2eSetup(t, cfg, pipe, dump)
	e2eMustRun(t, cleanDir, "run", "-quiet", "pipeline.yaml")
	want := e2eDataFiles(t, filepath.Join(cleanDir, "out"))

	c := s3Loopback(t)
	bucket := func() map[string][]byte {
		t.Helper()
		got := filepath.Join(t.TempDir(), "bucket")
		for obj := range c.ListObjects(context.Background(), "runs", minio.ListObjectsOptions{Prefix: "k/", Recursive: true}) {
			p := filepath.Join(got, filepath.FromSlash(strings.TrimPrefix(obj.Key, "k/")))
			if err := c.FGetObject(context.Background(), "runs", obj.Key, p, minio.GetObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return e2eDataFiles(t, got)
	}
	fake, dir := e2eSetup(t, cfg, pipe, dump)
	on := func(work string) []string {
		return []string{"run", "-quiet", "-set", "output.dir=s3://runs/k", "-set", "output.work_dir=" + filepath.Join(dir, work), "pipeline.yaml"}
	}
	cmd, _ := e2eSignalAt(t, dir, fake, cleanFake.Counters().Chat*2/5, syscall.SIGKILL, on("work-a")...)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("augment was not killed: %v", cmd.ProcessState)
	}
	atKill := fake.Counters().Chat
	e2eMustRun(t, dir, on("work-b")...)
	e2eSameData(t, want, bucket())
	resumed := fake.Counters().Chat - atKill
	e2eMustRun(t, dir, on("work-a")...)
	e2eSameData(t, want, bucket())
	if again := fake.Counters().Chat - atKill - resumed; again != 0 {
		t.Errorf("the stale machine asked the teacher %d more times", again)
	}
	t.Logf("clean run: %d requests; killed at %d; resumed elsewhere: %d more", cleanFake.Counters().Chat, atKill, resumed)
}
