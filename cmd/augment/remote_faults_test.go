package main

// Remote sources when the store misbehaves: a Hub mirror that states no
// size and cuts a file short, a cached download altered on disk, passing
// errors (429, 5xx) at lookup.

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/augmentdata/augment/storage/fakehub"
)

// writeHubPipeline writes dir/name.yaml ingesting one xlam source at path,
// as JSON Lines.
func writeHubPipeline(t *testing.T, dir, name, path string) string {
	t.Helper()
	y := "seed: 7\noutput: {dir: out-" + name + ", shard_size: 4, jsonl: true}\nsources:\n  - {name: xlam, path: \"" + path + "\", format: xlam}\n" +
		"stages:\n  - verify: {checks: [roles]}\n"
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "out-"+name)
}

// hubCached is the one file in a run's Hub download cache.
func hubCached(t *testing.T, out string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "cache", "sources", "hub", "*"))
	if len(files) != 1 {
		t.Fatalf("Hub cache holds %v, want one file", files)
	}
	return files[0]
}

func TestRemoteSourceFaults(t *testing.T) {
	xlam := remoteDumps(t)["xlam.jsonl"]
	var lines [][]byte
	for _, q := range []string{"Weather in Oslo?", "Time in Lima?", "Rate of EUR to NOK?"} {
		lines = append(lines, fmt.Appendf(nil, `{"id":%d,"query":%q,"answers":"[]","tools":"[]"}`+"\n", len(lines), q))
	}
	small := bytes.Join(lines, nil) // a file kept in git, not LFS (under 1 KiB)
	hub := fakehub.New()
	defer hub.Close()
	hub.Commit("org/tools", "main", map[string][]byte{"small.jsonl": small, "xlam.jsonl": xlam})
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "")
	dir := t.TempDir()

	t.Run("mirror without sizes cuts a file short", func(t *testing.T) {
		hub.NoLength(true)
		defer func() { hub.NoLength(false) }()
		out := writeHubPipeline(t, dir, "nolen", "hf://datasets/org/tools/small.jsonl")
		hub.Cut(small, int64(len(lines[0])+len(lines[1])), 1000) // at a line boundary
		code, _, stderr := e2eAugment(t, dir, "run", "nolen.yaml")
		if code != 1 || !strings.Contains(stderr, "git blob") {
			t.Errorf("every download cut short: exit %d, stderr:\n%s\nwant exit 1 naming the git blob", code, stderr)
		}
		if files, _ := filepath.Glob(filepath.Join(out, "cache", "sources", "hub", "*")); len(files) != 0 {
			t.Errorf("a cut download was cached: %v", files)
		}
		hub.Cut(small, 0, 0)
		_, stderr = e2eMustRun(t, dir, "run", "nolen.yaml")
		if m := e2eManifest(t, out, "00-ingest"); m.Totals.In != 3 {
			t.Errorf("ingest read %d rows, want 3:\n%s", m.Totals.In, stderr)
		}
	})

	t.Run("altered cached copy", func(t *testing.T) {
		out := writeHubPipeline(t, dir, "altered", "hf://datasets/org/tools/xlam.jsonl")
		e2eMustRun(t, dir, "run", "altered.yaml")
		cached := hubCached(t, out)
		b, err := os.ReadFile(cached)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, []byte(`"query": "`))
		if i < 0 {
			i = bytes.Index(b, []byte(`"query":"`))
		}
		if i < 0 {
			t.Fatalf("no query in %.200s", b)
		}
		j := bytes.IndexByte(b[i+len(`"query":`):], '"') + i + len(`"query":`) + 1
		copy(b[j:], "ZQ")
		if err := os.WriteFile(cached, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr := e2eMustRun(t, dir, "run", "-set", "sources.0.limit=2", "altered.yaml")
		if !strings.Contains(stderr, "cached copy not reused") {
			t.Errorf("the altered cached copy was not noticed:\n%s", stderr)
		}
		for name, data := range e2eDataFiles(t, out) {
			if bytes.Contains(data, []byte("ZQ")) {
				t.Errorf("%s holds the altered text", name)
			}
		}
		m := e2eManifest(t, out, "00-ingest")
		for _, sh := range m.Shards {
			if got := sh.Inputs[0].SHA256; got != sha256Hex(xlam) {
				t.Errorf("shard %s: input sha256 %s, want the file's %s", sh.Name, got, sha256Hex(xlam))
			}
		}
	})

	t.Run("passing errors at lookup", func(t *testing.T) {
		writeHubPipeline(t, dir, "busy", "hf://datasets/org/tools/small.jsonl")
		var once, always atomic.Bool // a 429 to the next revision request, to every one
		once.Store(true)
		hub.Fail(func(r *http.Request) (int, http.Header) {
			if strings.HasPrefix(r.URL.Path, "/api/") && (always.Load() || once.CompareAndSwap(true, false)) {
				return http.StatusTooManyRequests, http.Header{"Retry-After": {"0"}}
			}
			return 0, nil
		})
		defer func() { hub.Fail(nil) }()
		if code, _, stderr := e2eAugment(t, dir, "run", "busy.yaml"); code != 0 {
			t.Errorf("one 429: exit %d, stderr:\n%s\nwant it asked again", code, stderr)
		}
		always.Store(true)
		code, _, stderr := e2eAugment(t, dir, "run", "-set", "output.dir=out-busy2", "busy.yaml")
		if code != 1 || !strings.Contains(stderr, "429") {
			t.Errorf("429 every time: exit %d, stderr:\n%s\nwant exit 1 (not a config error)", code, stderr)
		}
	})
}
