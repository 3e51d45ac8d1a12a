package storage

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// A download of a pull cut off mid-object resumes with a range request
// bound to the version the GET returned, as a source's read does (QA: a
// cut failed the whole pull).
func testCloudPullResumesCutDownload(t *testing.T, c cloud) {
	big := objectBytes(1 << 20)
	c.put("pulled/00-ingest/part-big.parquet", big)
	cut := &cutter{base: http.DefaultTransport, limit: 100 << 10}
	dir := t.TempDir()
	m, _ := mirrorOf(t, c.opener(cut), dir, c.url("pulled"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := localFiles(t, dir)["00-ingest/part-big.parquet"]; got != string(big) {
		t.Fatalf("pulled %d bytes, want the object's %d", len(got), len(big))
	}
	if cut.cut.Load() != 1 || cut.ranged.Load() != 1 {
		t.Errorf("%d downloads cut, %d range requests; want 1 and 1", cut.cut.Load(), cut.ranged.Load())
	}
}

// A stream cut off on every try fails, naming the object, its store and
// that a rerun tries again: a source's read, and a pull's download (which
// leaves no file behind).
func testCloudReadCutEveryTry(t *testing.T, c cloud) {
	big := objectBytes(1 << 20)
	c.put("cutall/x.jsonl", big)
	kind := mustParse(t, c.url("x")).Kind
	want := func(what string, err error, object string) {
		t.Helper()
		if !IsUnavailable(err) || !strings.Contains(err.Error(), object) || !strings.Contains(err.Error(), storeNames[kind]) ||
			!strings.Contains(err.Error(), "a rerun tries again") {
			t.Errorf("%s cut on every try: %v\\nwant an UnavailableError naming %s, %s and a rerun", what, err, object, storeNames[kind])
		}
	}
	cut := &cutter{base: http.DefaultTransport, limit: 100 << 10, every: true}
	o := c.opener(cut)
	r, err := o.Open(context.Background(), c.url("cutall/x.jsonl"))
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	want("source", err, c.url("cutall/x.jsonl"))
	if got := cut.ranged.Load(); got != blobReadTries-1 {
		t.Errorf("%d range requests, want %d", got, blobReadTries-1)
	}

	dir := t.TempDir()
	local, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	loc, _, _ := OutputLocation(c.url("cutall"))
	m, err := o.NewMirror(loc, local)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Discard()
	want("pull", m.Pull(context.Background()), c.url("cutall/x.jsonl"))
	if files := localFiles(t, dir); len(files) != 0 {
		t.Errorf("a failed download left %v", files)
	}
}

// A pull's download cut off resumes on S3 as on GCS and Azure (TestCloud),
// and one cut on every try says so the same way.
func TestS3CutDownloads(t *testing.T) {
	srv, _, put := s3Server(t)
	c := cloud{scheme: "s3", env: map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1"}, put: put}
	t.Run("pull resumes a cut download", func(t *testing.T) { testCloudPullResumesCutDownload(t, c) })
	t.Run("read cut on every try", func(t *testing.T) { testCloudReadCutEveryTry(t, c) })
}
