package stages

// Resilience of an LLM stage run through the real runner against fakellm on
// loopback: injected transport faults must not change the data, break record
// conservation, exceed the in-flight cap or ignore Retry-After.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// llmrunRows returns an xlam dump of n distinct rows, each with one call
// turn: get_weather, convert_currency, or both in parallel.
func llmrunRows(n int) []byte {
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

// llmrunScript answers the reason stage's meta_tool prompt with a reasoning
// that names every called function, as its validator requires.
var llmrunScript = []fakellm.Rule{{
	Regexp: `Its last turn is the assistant calling (.+):`,
	Answer: `You asked me something that one of my functions can answer. To help you, I will call $1 because it fits your request. I will fill in the values you gave me.`,
}}

// llmrunPipeline writes rows and a pipeline running the reason stage and an
// export against the teacher endpoints into a new temp dir, and returns the
// pipeline's path. teacher is extra lines under teacher:, each indented by two.
func llmrunPipeline(t *testing.T, rows []byte, shardSize int, endpoints []llm.Endpoint, teacher string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rows.json"), rows, 0o644); err != nil {
		t.Fatal(err)
	}
	var eps strings.Builder
	for _, ep := range endpoints {
		fmt.Fprintf(&eps, "    - {base_url: %q, max_in_flight: %d}\n", ep.BaseURL, ep.MaxInFlight)
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
%s%s
stages:
  - reason: {style: meta_tool}
  - export: {dataset: e2e}
`, shardSize, eps.String(), teacher)
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// llmrunFake starts cfg on loopback.
func llmrunFake(t *testing.T, cfg fakellm.Config) (*fakellm.Server, string) {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = "fake-teacher" // listed by /models, which the run checks
	}
	fake, err := fakellm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	return fake, hs.URL
}

// llmrunRun runs the pipeline at path through the runner; the log is
// returned for failure messages.
func llmrunRun(t *testing.T, path string) (*Report, string, error) {
	t.Helper()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r, err := NewRunner(p, Options{Version: "test", Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return rep, log.String(), err
}

// llmrunDataFiles reads every file of a run dir except its manifests, its
// effective config (it names the endpoints) and the request cache: the
// files whose bytes must not depend on how the run got there.
func llmrunDataFiles(t *testing.T, dir string) map[string][]byte {
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
		case d.IsDir(), d.Name() == "manifest.json", rel == "config.yaml", rel == report.HTMLFile:
			return nil
		}
		b, err := os.ReadFile(path)
		if d.Name() == report.CardFile {
			b = report.WithoutAccounting(b) // the card's run accounting counts retries
		}
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// llmrunSameData reports every difference between two runs' data files.
func llmrunSameData(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: missing", name)
		case !bytes.Equal(g, want[name]):
			t.Errorf("%s: %d bytes differ from the reference run's %d", name, len(g), len(want[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: not in the reference run", name)
		}
	}
	if len(want) < 4 {
		t.Errorf("reference run has only %d data files", len(want))
	}
}

// llmrunConserved checks In + Added = Out + Rejected + Filtered in every
// manifest of the run dir, per shard and in total, and returns the
// manifests by stage dir.
func llmrunConserved(t *testing.T, out string) map[string]*manifests.Stage {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(out, "*", "manifest.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests under %s (%v)", out, err)
	}
	ms := map[string]*manifests.Stage{}
	for _, path := range paths {
		stage := filepath.Base(filepath.Dir(path))
		m, err := manifests.Read[manifests.Stage](path)
		if err != nil || m == nil {
			t.Fatalf("%s: %v", path, err)
		}
		ms[stage] = m
		var sum manifests.Counts
		for _, sh := range m.Shards {
			if err := sh.Balanced(); err != nil {
				t.Errorf("%s shard %s: %v", stage, sh.Name, err)
			}
			sum.Add(sh.Counts)
		}
		if err := m.Totals.Balanced(); err != nil {
			t.Errorf("%s totals: %v", stage, err)
		}
		if sum.In != m.Totals.In || sum.Out != m.Totals.Out || sum.Added != m.Totals.Added {
			t.Errorf("%s: totals %+v are not the sum of its shards %+v", stage, m.Totals, sum)
		}
		if m.Totals.In == 0 {
			t.Errorf("%s: no records went in", stage)
		}
	}
	return ms
}

// TestLLMRunInjectedFaults runs the reason stage against a fake whose
// answers fail 20 % of the time in every way it knows (429 with
// Retry-After, 5xx, hangs past the client timeout, truncated answers,
// invalid JSON bodies, dropped connections). The run must complete with the
// same data as a run without faults, conserve records in every manifest,
// never have more requests at the server than the endpoints' max_in_flight
// add up to, and wait at least Retry-After before retrying a 429'd request.
func TestLLMRunInjectedFaults(t *testing.T) {
	const (
		rows       = 180
		retryAfter = 300 * time.Millisecond
	)
	dump := llmrunRows(rows)
	// Backoff never exceeds retry_base << max_retries = 2ms << 6 = 128ms,
	// so a gap of at least 300ms before a retry can only be Retry-After.
	teacher := `  timeout: 250ms
  max_retries: 6
  retry_base: 2ms
  retry_max: 1s
  breaker_cooldown: 50ms`
	endpoints := func(url string) []llm.Endpoint {
		return []llm.Endpoint{{BaseURL: url + "/v1", MaxInFlight: 2}, {BaseURL: url + "/second/v1", MaxInFlight: 3}}
	}
	const capacity = 5

	clean, cleanURL := llmrunFake(t, fakellm.Config{Script: llmrunScript, Latency: fakellm.Duration(time.Millisecond)})
	cleanPath := llmrunPipeline(t, dump, 40, endpoints(cleanURL), teacher)
	if _, log, err := llmrunRun(t, cleanPath); err != nil {
		t.Fatalf("clean run: %v\n%s", err, log)
	}

	faulty, faultyURL := llmrunFake(t, fakellm.Config{
		Script: llmrunScript, Latency: fakellm.Duration(time.Millisecond), Seed: 11, Record: true,
		Faults: fakellm.Faults{
			RateLimit: 0.04, RetryAfter: fakellm.Duration(retryAfter),
			ServerError: 0.04, Hang: 0.03, Truncate: 0.03, InvalidJSON: 0.03, Drop: 0.03,
		},
	})
	path := llmrunPipeline(t, dump, 40, endpoints(faultyURL), teacher)
	rep, log, err := llmrunRun(t, path)
	if err != nil {
		t.Fatalf("run with faults: %v\n%s", err, log)
	}
	out := filepath.Join(filepath.Dir(path), "out")

	fc := faulty.Counters()
	for _, kind := range []string{fakellm.FaultRateLimit, fakellm.FaultServerError, fakellm.FaultHang,
		fakellm.FaultTruncate, fakellm.FaultInvalidJSON, fakellm.FaultDrop} {
		if fc.Faults[kind] == 0 {
			t.Errorf("no %s fault was injected in %d requests; the test needs more rows or another seed", kind, fc.Chat)
		}
	}
	t.Logf("faulty fake: %d chat requests, %d answered, faults %v, peak in flight %d; clean fake: %d requests, peak %d",
		fc.Chat, fc.Answered, fc.Faults, fc.PeakInFlight, clean.Counters().Chat, clean.Counters().PeakInFlight)

	// The in-flight cap holds at the server, with and without faults.
	for name, c := range map[string]fakellm.Counters{"clean": clean.Counters(), "faulty": fc} {
		if c.PeakInFlight > capacity || c.PeakInFlight < 1 {
			t.Errorf("%s fake: peak in flight %d, want 1..%d (sum of max_in_flight)", name, c.PeakInFlight, capacity)
		}
	}

	// Every manifest conserves records; the reason stage saw the faults as
	// retried attempts, not as lost records.
	ms := llmrunConserved(t, out)
	reason := ms["01-reason"]
	if reason == nil {
		t.Fatalf("no 01-reason manifest; stages %v", rep.Stages)
	}
	if reason.Totals.In != rows || reason.Totals.Out != rows {
		t.Errorf("reason: in %d out %d rejected %v, want all %d records through", reason.Totals.In, reason.Totals.Out, reason.Totals.Rejected, rows)
	}
	var st llm.Stats
	if err := json.Unmarshal(reason.LLM, &st); err != nil {
		t.Fatalf("reason manifest llm: %v", err)
	}
	if st.Retries == 0 || st.Errors["rate_limited"] == 0 || st.Errors["timeout"] == 0 {
		t.Errorf("reason llm stats show no retried faults: %+v", st)
	}

	// Retry-After: the next arrival of a 429'd body (its retry) comes at
	// least Retry-After later.
	seen := faulty.Log()
	pairs := 0
	for i, s := range seen {
		if s.Fault != fakellm.FaultRateLimit {
			continue
		}
		for _, next := range seen[i+1:] {
			if next.BodyHash != s.BodyHash {
				continue
			}
			pairs++
			if gap := next.At.Sub(s.At); gap < retryAfter {
				t.Errorf("request %016x retried %v after its 429, before Retry-After %v", s.BodyHash, gap, retryAfter)
			}
			break
		}
	}
	if pairs == 0 {
		t.Errorf("no 429'd request was retried (%d rate limits)", fc.Faults[fakellm.FaultRateLimit])
	}

	// Faults are absorbed: the data is byte-identical to the clean run's.
	llmrunSameData(t, llmrunDataFiles(t, filepath.Join(filepath.Dir(cleanPath), "out")), llmrunDataFiles(t, out))
}
