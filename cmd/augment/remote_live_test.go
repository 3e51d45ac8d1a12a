package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/augmentdata/augment/manifests"
)

// On object storage a stage without a finish time is running only while a
// process holds a lease of the output: with none (a run stopped, its lease
// deleted) status and stats call it partial; with a live lease, running;
// when the leases cannot be read, running with a note that it cannot be
// told.
func TestRemoteOutputStatusByLease(t *testing.T) {
	var fail atomic.Pointer[regexp.Regexp]
	c := faultyS3(t, &fail)
	dir := t.TempDir()
	syncPipeline(t, dir, "r6")
	e2eMustRun(t, dir, "run", "-quiet", "r6.yaml")
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := c.PutObject(context.Background(), "runs", key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A run stopped in the export: no finish time, and no lease left.
	var m manifests.Stage
	if err := json.Unmarshal(object(t, c, "r6/02-sharegpt/manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	m.Finished = time.Time{}
	b, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	put("r6/02-sharegpt/manifest.json", b)
	const note = "02-sharegpt: no finish time, and whether a process is making it cannot be told here"
	check := func(when, want string, noted bool) {
		t.Helper()
		status, _ := e2eMustRun(t, dir, "status", "s3://runs/r6")
		if !regexp.MustCompile(`(?m)^ *02-sharegpt .* ` + want + `$`).MatchString(status) {
			t.Errorf("%s: status, want 02-sharegpt %s:\n%s", when, want, status)
		}
		stats, _ := e2eMustRun(t, dir, "stats", "s3://runs/r6")
		if !regexp.MustCompile(`(?m)^ *02-sharegpt +` + want + ` `).MatchString(stats) {
			t.Errorf("%s: stats, want 02-sharegpt %s:\n%s", when, want, stats)
		}
		if strings.Contains(status, note) != noted || strings.Contains(stats, note) != noted {
			t.Errorf("%s: the note that it cannot be told: want %t:\n%s\n%s", when, noted, status, stats)
		}
	}
	check("no lease", "partial", false)

	put("r6/.augment/lease-run.json", []byte(`{"name":"run","host":"elsewhere","pid":1,"started":"2026-01-01T00:00:00Z"}`))
	check("a live lease of another host", "running", false)

	fail.Store(regexp.MustCompile(`^GET /runs/\?.*prefix=r6%2F\.augment%2Flease-`))
	check("the leases cannot be listed", "running", true)
}
