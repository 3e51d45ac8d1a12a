package main

// End-to-end resilience of LLM stages through the augment command: a real
// child process (this test binary, which testscript.Main runs as augment
// when its argv[0] is "augment") against fakellm on loopback.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
	"github.com/augmentdata/augment/stages/shard"
)

// e2eRows returns an xlam dump of n distinct rows, each with one call turn:
// get_weather, convert_currency, or both in parallel.
func e2eRows(n int) []byte {
	const tools = `[{"name": "get_weather", "description": "Current weather for a city.", "parameters": {"city": {"description": "City name", "type": "str"}, "units": {"description": "metric or imperial", "type": "str, optional", "default": "metric"}}}, ` +
		`{"name": "convert_currency", "description": "Convert an amount of money between currencies.", "parameters": {"amount": {"description": "Amount to convert", "type": "float"}, "from_currency": {"description": "ISO code of the source currency", "type": "str"}, "to_currency": {"description": "ISO code of the target currency", "type": "str"}}}]`
	type row struct {
		ID      int    `json:"id"`
		Query   string `json:"query"`
		Answers string `json:"answers"`
		Tools   string `json:"tools"`
	}
	rows := make([]row, n)
	for i := range rows {
		city := fmt.Sprintf("Town%04d", i)
		weather := fmt.Sprintf(`{"name": "get_weather", "arguments": {"city": %q}}`, city)
		money := fmt.Sprintf(`{"name": "convert_currency", "arguments": {"amount": %d, "from_currency": "EUR", "to_currency": "USD"}}`, 10+i)
		r := row{ID: i, Tools: tools}
		switch i % 3 {
		case 0:
			r.Query, r.Answers = fmt.Sprintf("What is the weather in %s?", city), "["+weather+"]"
		case 1:
			r.Query, r.Answers = fmt.Sprintf("How much is %d EUR in USD?", 10+i), "["+money+"]"
		default:
			r.Query = fmt.Sprintf("Weather in %s, and %d EUR in USD please.", city, 10+i)
			r.Answers = "[" + weather + ", " + money + "]"
		}
		rows[i] = r
	}
	b, _ := json.MarshalIndent(rows, "", " ")
	return b
}

// e2eScript answers the reason stage's meta_tool prompt with a reasoning
// that names every called function, as the stage's validator requires.
var e2eScript = []fakellm.Rule{{
	Regexp: `Its last turn is the assistant calling (.+):`,
	Answer: `You asked me something that one of my functions can answer. To help you, I will call $1 because it fits your request. I will fill in the values you gave me.`,
}}

// e2eFake starts a fake teacher on loopback and returns it with its base URL.
func e2eFake(t *testing.T, cfg fakellm.Config) (*fakellm.Server, string) {
	t.Helper()
	if cfg.Script == nil {
		cfg.Script = e2eScript
	}
	if cfg.Model == "" {
		cfg.Model = "fake-teacher" // listed by /models, which the run checks
	}
	fake, err := fakellm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	return fake, hs.URL + "/v1"
}

// e2eSetup starts a fake teacher with cfg and writes dump and pipe, pointed
// at it, into a new directory.
func e2eSetup(t *testing.T, cfg fakellm.Config, pipe e2ePipeline, dump []byte) (*fakellm.Server, string) {
	t.Helper()
	fake, url := e2eFake(t, cfg)
	dir := t.TempDir()
	pipe.BaseURL = url
	pipe.write(t, dir, dump)
	return fake, dir
}

// e2ePipeline is the reason stage (meta_tool style) and an export over the
// xlam rows in rows.json, taught by the model at baseURL.
type e2ePipeline struct {
	BaseURL     string
	MaxInFlight int
	ShardSize   int
	Teacher     string // extra lines under teacher:, each indented by two
	Reason      string // extra settings of the reason stage, e.g. ", prompt: p.tmpl"
}

// write puts rows and the pipeline into dir and returns the pipeline's path.
func (p e2ePipeline) write(t *testing.T, dir string, rows []byte) string {
	t.Helper()
	if rows != nil {
		if err := os.WriteFile(filepath.Join(dir, "rows.json"), rows, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	y := fmt.Sprintf(`seed: 5
output: {dir: out, shard_size: %d, jsonl: true}
sources:
  - {name: xlam, path: rows.json, format: xlam}
teacher:
  provider: openai
  model: fake-teacher
  temperature: 0
  endpoints:
    - {base_url: %q, max_in_flight: %d}
%s
stages:
  - reason: {style: meta_tool%s}
  - export: {dataset: e2e}
`, p.ShardSize, p.BaseURL, p.MaxInFlight, p.Teacher, p.Reason)
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// e2eCommand returns augment with args as a child process in dir: this
// test binary under the name augment.
func e2eCommand(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = "augment"
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// e2eAugment runs augment with args in dir to its end and returns its exit
// code and output.
func e2eAugment(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd, out, errOut := e2eCommand(t, dir, args...)
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("augment %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// e2eMustRun runs augment and fails the test unless it exits 0.
func e2eMustRun(t *testing.T, dir string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := e2eAugment(t, dir, args...)
	if code != 0 {
		t.Fatalf("augment %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

// e2eSignalAt starts augment with args in dir, sends it sig once fake has
// answered n requests, and returns the ended command and its stderr. The
// test fails if augment ends before that.
func e2eSignalAt(t *testing.T, dir string, fake *fakellm.Server, n int64, sig os.Signal, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd, stdout, stderr := e2eCommand(t, dir, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for fake.Counters().Answered < n {
		select {
		case err := <-exited:
			t.Fatalf("augment ended (%v) before %d requests were answered; stdout:\n%s\nstderr:\n%s", err, n, stdout, stderr)
		case <-tick.C:
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-exited
	return cmd, stderr.String()
}

// e2eDataFiles reads every file of a run dir except its manifests and
// report.html (they hold timings), its effective config (it names the
// endpoint) and the request cache: the files whose bytes must not depend on
// how the run got there. Dataset cards are read without their run
// accounting (teacher traffic and cost). Leftover temporary files count as
// data, so they show up as differences.
func e2eDataFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && (rel == "cache" || rel == ".augment"):
			return filepath.SkipDir
		case d.IsDir(), d.Name() == "manifest.json", rel == "config.yaml", rel == "report.html":
			return nil
		}
		b, err := os.ReadFile(path)
		if d.Name() == "README.md" {
			b = report.WithoutAccounting(b)
		}
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// e2eSameData reports every difference between two runs' data files.
func e2eSameData(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	for _, name := range slices.Sorted(mapKeys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: missing", name)
		case !bytes.Equal(g, want[name]):
			t.Errorf("%s: %d bytes differ from the clean run's %d", name, len(g), len(want[name]))
		}
	}
	for _, name := range slices.Sorted(mapKeys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: not in the clean run", name)
		}
	}
	var parts, exports int
	for name := range want {
		if strings.Contains(name, "/part-") {
			parts++
		}
		if strings.HasSuffix(name, "dataset_info.json") {
			exports++
		}
	}
	if parts == 0 || exports == 0 {
		t.Errorf("the clean run has %d part files and %d exports; nothing was compared", parts, exports)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// e2eManifest reads the manifest of a stage dir ("01-reason").
func e2eManifest(t *testing.T, out, stage string) *manifests.Stage {
	t.Helper()
	m, err := manifests.Read[manifests.Stage](filepath.Join(out, stage, "manifest.json"))
	if err != nil || m == nil {
		t.Fatalf("%s manifest: %v (missing: %v)", stage, err, m == nil)
	}
	return m
}

// e2eLLM returns the teacher accounting of a stage manifest (zero when the
// stage sent nothing).
func e2eLLM(t *testing.T, m *manifests.Stage) llm.Stats {
	t.Helper()
	var st llm.Stats
	if len(m.LLM) > 0 {
		if err := json.Unmarshal(m.LLM, &st); err != nil {
			t.Fatalf("%s manifest llm: %v", m.Name, err)
		}
	}
	return st
}

// e2eIntact checks that nothing under a final name in the run dir is
// partial: every Parquet file reads back, every JSON Lines file holds whole
// JSON values, and every output a manifest lists exists with its recorded
// size and hash. It returns the number of Parquet files read.
func e2eIntact(t *testing.T, out string) int {
	t.Helper()
	parquets := 0
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".tmp-") {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		switch {
		case strings.HasSuffix(path, ".parquet"):
			parquets++
			if _, err := shard.Read(path); err != nil {
				t.Errorf("%s does not read back: %v", rel, err)
			}
		case strings.HasSuffix(path, ".jsonl"):
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 64<<20)
			for n := 1; sc.Scan(); n++ {
				if !json.Valid(sc.Bytes()) {
					t.Errorf("%s:%d is not a whole JSON value", rel, n)
					break
				}
			}
			if err := sc.Err(); err != nil {
				t.Errorf("%s: %v", rel, err)
			}
		case d.Name() == "manifest.json":
			m, err := manifests.Read[manifests.Stage](path)
			if err != nil {
				t.Errorf("%s: %v", rel, err)
				return nil
			}
			for _, sh := range m.Shards {
				for _, o := range sh.Outputs {
					if o.NotKept { // keep: false: named, never written
						if _, err := os.Stat(filepath.Join(out, o.Path)); err == nil {
							t.Errorf("%s names %s as not kept, but it is on disk", rel, o.Path)
						}
						continue
					}
					sum, err := atomicfs.HashFile(filepath.Join(out, o.Path))
					fi, serr := os.Stat(filepath.Join(out, o.Path))
					if err != nil || serr != nil || sum != o.SHA256 || fi.Size() != o.Bytes {
						t.Errorf("%s lists %s (%d bytes, sha256 %.12s), on disk: %v %v", rel, o.Path, o.Bytes, o.SHA256, sum, errOr(err, serr))
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return parquets
}

func errOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// TestKillDuringLLMStage kills augment with SIGKILL while the reason stage
// is halfway through its requests, then runs it again to the end. The
// result must be byte for byte that of a run never interrupted, nothing
// under a final name may be partial after the kill, and the fake teacher
// must have seen at most the clean run's requests plus those in flight at
// the kill: the request cache keeps every answer received (it is logged
// before the endpoint slot that fetched it is released), so only requests
// holding a slot (at most max_in_flight) can be paid for twice.
func TestKillDuringLLMStage(t *testing.T) { killDuringLLMStage(t) }

// TestKillDuringLLMStageIngestNotKept is TestKillDuringLLMStage with
// ingest keeping no shards: the reason stage takes ingest's records as
// they are parsed, and the resumed run reads the dump again for the shards
// it has left, their answers so far from the cache.
func TestKillDuringLLMStageIngestNotKept(t *testing.T) {
	killDuringLLMStage(t, "-set", "ingest.keep=false")
}

// killDuringLLMStage kills a run (run flags set) with SIGKILL halfway
// through the reason stage and resumes it (see TestKillDuringLLMStage).
func killDuringLLMStage(t *testing.T, set ...string) {
	run := append(append([]string{"run", "-quiet"}, set...), "pipeline.yaml")
	const rows = 1200
	dump := e2eRows(rows)
	cfg := fakellm.Config{Latency: fakellm.Duration(3 * time.Millisecond)}
	pipe := e2ePipeline{MaxInFlight: 2, ShardSize: 50}

	cleanFake, cleanDir := e2eSetup(t, cfg, pipe, dump)
	e2eMustRun(t, cleanDir, run...)
	clean := cleanFake.Counters()
	if clean.Chat != rows {
		t.Fatalf("clean run sent %d requests for %d rows", clean.Chat, rows)
	}

	fake, dir := e2eSetup(t, cfg, pipe, dump)
	cmd, _ := e2eSignalAt(t, dir, fake, clean.Chat*2/5, syscall.SIGKILL, run...)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("augment was not killed: %v", cmd.ProcessState)
	}
	atKill := fake.Counters()
	out := filepath.Join(dir, "out")

	// Nothing under a final name is partial, and the kill came in the
	// middle of the reason stage: some of its shards are done, not all.
	if n := e2eIntact(t, out); n == 0 {
		t.Errorf("no Parquet file survived the kill")
	}
	reasonParts, _ := filepath.Glob(filepath.Join(out, "01-reason", "part-*.parquet"))
	if shards := (rows + pipe.ShardSize - 1) / pipe.ShardSize; len(reasonParts) == 0 || len(reasonParts) >= shards {
		t.Errorf("after the kill 01-reason has %d of %d shards; want some but not all", len(reasonParts), shards)
	}

	e2eMustRun(t, dir, run...)
	final := fake.Counters()
	t.Logf("clean run: %d requests; killed run: %d sent, %d answered, %d shards done; resumed run: %d more requests",
		clean.Chat, atKill.Chat, atKill.Answered, len(reasonParts), final.Chat-atKill.Chat)
	if limit := clean.Chat + int64(pipe.MaxInFlight); final.Chat > limit {
		t.Errorf("the fake saw %d requests over both runs; at most the clean run's %d plus the %d in flight may repeat",
			final.Chat, clean.Chat, pipe.MaxInFlight)
	}
	e2eIntact(t, out)
	e2eSameData(t, e2eDataFiles(t, filepath.Join(cleanDir, "out")), e2eDataFiles(t, out))
}

// TestInterruptDuringLLMStage: Ctrl-C (SIGINT) halfway through the reason
// stage exits with 130 and says the work is kept; the answers received
// before it are in the cache, so the rerun repeats at most the requests
// that were in flight, and the result is that of a run never interrupted.
func TestInterruptDuringLLMStage(t *testing.T) {
	const rows = 240
	dump := e2eRows(rows)
	cfg := fakellm.Config{Latency: fakellm.Duration(3 * time.Millisecond)}
	pipe := e2ePipeline{MaxInFlight: 2, ShardSize: 40}

	cleanFake, cleanDir := e2eSetup(t, cfg, pipe, dump)
	e2eMustRun(t, cleanDir, "run", "-quiet", "pipeline.yaml")
	clean := cleanFake.Counters()

	fake, dir := e2eSetup(t, cfg, pipe, dump)
	cmd, stderr := e2eSignalAt(t, dir, fake, clean.Chat/2, os.Interrupt, "run", "-quiet", "pipeline.yaml")
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupt {
		t.Fatalf("interrupted run: exit %d (%v), want %d\nstderr:\n%s", code, cmd.ProcessState, exitInterrupt, stderr)
	}
	if !strings.Contains(stderr, "finished work is kept; run the same command again to resume") {
		t.Errorf("interrupted run does not say the work is kept:\n%s", stderr)
	}
	// The signal stopped the run: no record is blamed for it.
	if !strings.Contains(stderr, "augment: interrupted\n") || strings.Contains(stderr, "context canceled") {
		t.Errorf("interrupted run's message:\n%s", stderr)
	}
	atStop := fake.Counters()
	e2eIntact(t, filepath.Join(dir, "out"))

	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	final := fake.Counters()
	t.Logf("clean run: %d requests; interrupted run: %d sent, %d answered; resumed run: %d more requests",
		clean.Chat, atStop.Chat, atStop.Answered, final.Chat-atStop.Chat)
	if limit := clean.Chat + int64(pipe.MaxInFlight); final.Chat > limit {
		t.Errorf("the fake saw %d requests over both runs; at most the clean run's %d plus the %d in flight may repeat",
			final.Chat, clean.Chat, pipe.MaxInFlight)
	}
	e2eSameData(t, e2eDataFiles(t, filepath.Join(cleanDir, "out")), e2eDataFiles(t, filepath.Join(dir, "out")))
}

// TestKilledExportLeavesNoTempFile: a kill -9 while the export writes a
// data file leaves the writer's temporary file (atomicfs.Root.Create's
// ".tmp-part-…") in the dataset folder. The next run must remove it, as it
// removes those at the top of a stage dir: LLaMA-Factory loads every file of
// the dataset folder (os.listdir) and refuses one whose extension is not the
// others' ("File types should be identical", or "Allowed file types" when
// it comes first), as lfCheckDir does.
//
// The kill is reproduced by its effect, a temporary file created by the
// same function the export writes with and never committed: the few
// milliseconds of a real kill inside WriteShard cannot be hit reliably.
func TestKilledExportLeavesNoTempFile(t *testing.T) {
	const rows = 12
	_, url := e2eFake(t, fakellm.Config{})
	dir := t.TempDir()
	e2ePipeline{BaseURL: url, MaxInFlight: 4, ShardSize: 5}.write(t, dir, e2eRows(rows))
	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	out := filepath.Join(dir, "out")
	want := e2eDataFiles(t, out)

	root, err := atomicfs.OpenRoot(out)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	leftovers := map[string]string{}
	for _, name := range []string{
		"02-export/e2e/part-xlam-00001.jsonl", // inside the dataset folder
		"01-reason/part-xlam-00001.parquet",   // at the top of a stage dir
	} {
		path := root.Path(name)
		f, err := root.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(`{"conversations": [{"from": "human", "val`)); err != nil {
			t.Fatal(err)
		}
		tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".tmp-*"))
		if len(tmps) != 1 {
			t.Fatalf("want one temporary file next to %s, found %v", path, tmps)
		}
		leftovers[tmps[0]] = path
	}

	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	for tmp, final := range leftovers {
		if _, err := os.Stat(tmp); err == nil {
			rel, _ := filepath.Rel(out, tmp)
			t.Errorf("the rerun left %s, the temporary file of an interrupted write of %s", rel, filepath.Base(final))
		}
	}
	if _, err := lfCheckDir(filepath.Join(out, "02-export")); err != nil {
		t.Errorf("LLaMA-Factory would not load the export: %v", err)
	}
	e2eSameData(t, want, e2eDataFiles(t, out))
}

// TestRerunSendsNothingAndExplainsMisses: a finished pipeline run again
// sends no request; after the reason prompt is overridden, `augment run
// -explain` says that the stage settings changed and that each request
// missed the cache because of the prompt template.
func TestRerunSendsNothingAndExplainsMisses(t *testing.T) {
	const rows = 24
	fake, url := e2eFake(t, fakellm.Config{})
	dir := t.TempDir()
	pipe := e2ePipeline{BaseURL: url, MaxInFlight: 4, ShardSize: 10}
	pipe.write(t, dir, e2eRows(rows))
	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	first := fake.Counters()
	if first.Chat != rows {
		t.Fatalf("first run sent %d requests, want %d", first.Chat, rows)
	}

	stdout, stderr := e2eMustRun(t, dir, "run", "pipeline.yaml")
	if again := fake.Counters(); again.Requests != first.Requests || again.Chat != first.Chat {
		t.Errorf("a rerun of a finished pipeline sent requests: counters %+v, before %+v", again, first)
	}
	if !regexp.MustCompile(`skip stage.*stage=reason.*up to date`).MatchString(stderr) {
		t.Errorf("rerun did not skip the reason stage as up to date:\n%s", stderr)
	}
	if !regexp.MustCompile(`(?m)^ *01-reason +0 +3 .* - +- *$`).MatchString(stdout) {
		t.Errorf("rerun report does not show the reason stage skipped without requests:\n%s", stdout)
	}

	// Override the prompt with one sentence changed.
	builtin, err := os.ReadFile("../../prompts/reason_meta_tool.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "Write exactly three sentences", "Write exactly three short sentences"
	if !bytes.Contains(builtin, []byte(from)) {
		t.Fatalf("prompts/reason_meta_tool.tmpl no longer says %q; update this test", from)
	}
	if err := os.WriteFile(filepath.Join(dir, "reason.tmpl"), bytes.Replace(builtin, []byte(from), []byte(to), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	pipe.Reason = ", prompt: reason.tmpl"
	pipe.write(t, dir, nil)
	_, stderr = e2eMustRun(t, dir, "run", "-explain", "pipeline.yaml")
	if sent := fake.Counters().Chat - first.Chat; sent != rows {
		t.Errorf("after the prompt change %d requests were sent, want %d (every one misses the cache)", sent, rows)
	}
	for _, want := range []string{
		`explain.*stage=reason.*shard=xlam-00000.*stage settings changed`,
		`llm cache miss.*stage=reason.*cause=template.*prompt template hash [0-9a-f]+ → [0-9a-f]+`,
		`llm cache miss.*cause=template.*message 0 \(user\) changed at byte`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("-explain output lacks %q:\n%s", want, stderr)
		}
	}
	if n := strings.Count(stderr, "llm cache miss"); n != rows {
		t.Errorf("-explain explained %d cache misses, want %d", n, rows)
	}
	st := e2eLLM(t, e2eManifest(t, filepath.Join(dir, "out"), "01-reason"))
	if st.MissCauses["template"] != rows || st.CacheHits != 0 {
		t.Errorf("reason manifest: miss causes %v, cache hits %d; want %d template misses", st.MissCauses, st.CacheHits, rows)
	}

	// And once more: finished, so nothing is sent.
	before := fake.Counters()
	e2eMustRun(t, dir, "run", "-quiet", "pipeline.yaml")
	if after := fake.Counters(); after.Chat != before.Chat {
		t.Errorf("rerun after the prompt change sent %d requests", after.Chat-before.Chat)
	}
}

// TestBudgetStopsAndResumes: with prices and a budget far below the run's
// cost, augment stops with exit code 3 and says how to continue; run again
// with a larger budget it completes, pays only for the answers it did not
// get before, and writes the same data as a run without a budget.
func TestBudgetStopsAndResumes(t *testing.T) {
	const rows = 60
	dump := e2eRows(rows)
	prices := "  price_input_per_mtok: 1000\n  price_output_per_mtok: 3000"

	cleanFake, cleanURL := e2eFake(t, fakellm.Config{})
	cleanDir := t.TempDir()
	e2ePipeline{BaseURL: cleanURL, MaxInFlight: 2, ShardSize: 10, Teacher: prices}.write(t, cleanDir, dump)
	e2eMustRun(t, cleanDir, "run", "-quiet", "pipeline.yaml")
	cleanOut := filepath.Join(cleanDir, "out")
	cleanStats := e2eLLM(t, e2eManifest(t, cleanOut, "01-reason"))
	if cleanStats.Cost <= 0 || cleanStats.TokensIn == 0 {
		t.Fatalf("clean run has no cost: %+v", cleanStats)
	}

	fake, url := e2eFake(t, fakellm.Config{})
	dir := t.TempDir()
	e2ePipeline{BaseURL: url, MaxInFlight: 2, ShardSize: 10, Teacher: prices}.write(t, dir, dump)
	budget := cleanStats.Cost / 4
	code, stdout, stderr := e2eAugment(t, dir, "run", "-quiet", "-set", fmt.Sprintf("teacher.budget=%g", budget), "pipeline.yaml")
	if code != exitGuard {
		t.Fatalf("run over budget: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitGuard, stdout, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf(`augment: .*teacher budget %.2f reached`, budget),
		`the budget counts each run.s own spending, so a rerun spends up to it again`,
		`finished work is kept; run the same command again to resume`,
	} {
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	stopped := fake.Counters()
	out := filepath.Join(dir, "out")
	first := e2eLLM(t, e2eManifest(t, out, "01-reason"))
	if first.Cost < budget || first.TokensIn >= cleanStats.TokensIn {
		t.Errorf("stopped run spent %.4f (%d tokens in) of budget %.4f; the whole run costs %.4f (%d tokens in)",
			first.Cost, first.TokensIn, budget, cleanStats.Cost, cleanStats.TokensIn)
	}
	if _, err := os.Stat(filepath.Join(out, "02-export", "dataset_info.json")); err == nil {
		t.Errorf("the export ran although the budget stopped the reason stage")
	}

	e2eMustRun(t, dir, "run", "-quiet", "-set", fmt.Sprintf("teacher.budget=%g", 10*cleanStats.Cost), "pipeline.yaml")
	second := e2eLLM(t, e2eManifest(t, out, "01-reason"))
	resumed := fake.Counters().Chat - stopped.Chat
	t.Logf("budget %.4f: first run %d requests, %.4f spent; second run %d requests, %.4f spent, %d cache hits; clean run %.4f",
		budget, stopped.Chat, first.Cost, resumed, second.Cost, second.CacheHits, cleanStats.Cost)
	// Each answer is paid for once: the tokens of both runs add up to the
	// clean run's exactly.
	if first.TokensIn+second.TokensIn != cleanStats.TokensIn || first.TokensOut+second.TokensOut != cleanStats.TokensOut {
		t.Errorf("tokens in %d + %d, out %d + %d; the clean run used in %d, out %d",
			first.TokensIn, second.TokensIn, first.TokensOut, second.TokensOut, cleanStats.TokensIn, cleanStats.TokensOut)
	}
	if resumed >= cleanFake.Counters().Chat {
		t.Errorf("the resumed run sent %d requests, as many as a whole run (%d)", resumed, cleanFake.Counters().Chat)
	}
	e2eSameData(t, e2eDataFiles(t, cleanOut), e2eDataFiles(t, out))
}
