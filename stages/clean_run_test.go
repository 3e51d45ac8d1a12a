package stages

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/internal/nodetest"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// cleanPipeline writes the demo pipeline plus a dump of planted duplicates
// and leaks (xlam format) and two benchmark files, and returns its path.
//
// planted:0 is demo xlam row 0 with other case and punctuation, planted:1
// is row 1 with a word added, planted:2 is row 2 with its parallel calls and
// keys in another order; planted:3 asks a BFCL item's question inside a
// longer query, planted:4 is a short text item exactly.
func cleanPipeline(t *testing.T, shardSize int) string {
	t.Helper()
	var demo []map[string]any
	b, err := os.ReadFile("../testdata/demo/dumps/xlam.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &demo); err != nil {
		t.Fatal(err)
	}
	row := func(id int, query, answers string, tools any) map[string]any {
		return map[string]any{"id": id, "query": query, "answers": answers, "tools": tools}
	}
	bfclQ := "I am planning a trip and need the weather forecast for Lisbon for the next three days in Celsius"
	planted := []map[string]any{
		row(0, strings.ToUpper(demo[0]["query"].(string)), demo[0]["answers"].(string), demo[0]["tools"]),
		row(1, strings.TrimSuffix(demo[1]["query"].(string), "?")+" please?", demo[1]["answers"].(string), demo[1]["tools"]),
		row(2, demo[2]["query"].(string), `[{"name": "is_prime", "arguments": {"n": 97}}, {"name": "median", "arguments": {"values": [3, 9, 4, 10]}}]`, demo[2]["tools"]),
		row(3, "Hi! "+bfclQ+", thanks.", `[{"name": "get_air_quality", "arguments": {"city": "Lisbon"}}]`, demo[0]["tools"]),
		row(4, "Convert ninety degrees to radians", `[{"name": "is_prime", "arguments": {"n": 90}}]`, demo[2]["tools"]),
	}
	dir := t.TempDir()
	write := func(name string, v any) {
		var data []byte
		switch v := v.(type) {
		case string:
			data = []byte(v)
		default:
			data, _ = json.MarshalIndent(v, "", " ")
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("planted.json", planted)
	write("bfcl.json", strings.Join([]string{
		bfclLine("simple_0", "What is the capital city of the country with the largest population in South America today?"),
		bfclLine("simple_1", bfclQ+"."),
		bfclLine("simple_2", "Calculate the compound interest on ten thousand dollars at five percent for a decade."),
	}, "\n")+"\n")
	write("short.txt", "convert ninety degrees to radians\nwhat time is it\n")
	dumps, _ := filepath.Abs("../testdata/demo/dumps")
	y := fmt.Sprintf(`seed: 7
output: {dir: out, shard_size: %d, jsonl: true}
sources:
  - {name: toolace, path: %[2]s/toolace.json, format: toolace}
  - {name: glaive, path: %[2]s/glaive.json, format: glaive}
  - {name: xlam, path: %[2]s/xlam.json, format: xlam}
  - {name: planted, path: planted.json, format: xlam}
stages:
  - dedup: {prefer: [toolace, glaive, xlam]}
  - decontaminate:
      benchmarks:
        - {name: bfcl, path: bfcl.json, format: bfcl}
        - {name: short, path: short.txt, format: text}
`, shardSize, dumps)
	path := filepath.Join(dir, "pipeline.yaml")
	write("pipeline.yaml", y)
	return path
}

// stageRejects reads a stage's rejects: ID → reason and detail.
func stageRejects(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "rejects-*.jsonl"))
	out := map[string]string{}
	for _, f := range files {
		err := shard.ScanJSONL(f, func(r shard.Reject) error {
			out[r.ID] = r.Reason + " " + r.Detail
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRunCleanPlanted runs dedup and decontaminate over the demo plus
// planted duplicates and leaks: each planted record is removed with the
// record or benchmark item it copies, nothing else is, whatever the shard
// size, and a rerun does nothing.
func TestRunCleanPlanted(t *testing.T) {
	var first map[string]string
	for _, size := range []int{2, 100} {
		path := cleanPipeline(t, size)
		runPipeline(t, path)
		out := filepath.Join(filepath.Dir(path), "out")
		dd, dc := stageRejects(t, filepath.Join(out, "01-dedup")), stageRejects(t, filepath.Join(out, "02-decontaminate"))
		want := map[string]string{
			"planted:0": "duplicate duplicate: duplicate_of=xlam:0 ",
			"planted:1": "near_duplicate near_duplicate: duplicate_of=xlam:1 ",
			"planted:2": "duplicate duplicate: duplicate_of=xlam:2 ",
		}
		if len(dd) != len(want) {
			t.Errorf("shards of %d: dedup removed %v", size, slices.Sorted(maps.Keys(dd)))
		}
		for id, prefix := range want {
			if !strings.HasPrefix(dd[id], prefix) {
				t.Errorf("shards of %d: %s: %q, want %q…", size, id, dd[id], prefix)
			}
		}
		wantDC := map[string]string{
			"planted:3": `"benchmark":"bfcl","item":"simple_1","kind":"ngram"`,
			"planted:4": `"benchmark":"short","item":"short:1","kind":"exact"`,
		}
		if len(dc) != len(wantDC) {
			t.Errorf("shards of %d: decontaminate removed %v", size, slices.Sorted(maps.Keys(dc)))
		}
		for id, part := range wantDC {
			if !strings.HasPrefix(dc[id], "contaminated ") || !strings.Contains(dc[id], part) {
				t.Errorf("shards of %d: %s: %q, want %q", size, id, dc[id], part)
			}
		}
		m := readManifest(t, out, "01-dedup")
		c := m.Totals.Counters
		if c["clusters"] != 3 || c["cluster_records"] != 6 || c["cluster_size.2"] != 3 || c["removed.exact"] != 2 || c["removed.near"] != 1 {
			t.Errorf("dedup counters %v", c)
		}
		m2 := readManifest(t, out, "02-decontaminate")
		if m2.Totals.Counters["hits.bfcl"] != 1 || m2.Totals.Counters["hits.short"] != 1 {
			t.Errorf("decontaminate counters %v", m2.Totals.Counters)
		}
		// Each benchmark's item count: in the notes (stats shows them) and
		// the config.
		if want := []string{"benchmark bfcl: 3 items (bfcl.json)", "benchmark short: 2 items (short.txt)"}; !slices.Equal(m2.Notes, want) {
			t.Errorf("decontaminate notes %q, want %q", m2.Notes, want)
		}
		var cfg DecontaminateConfig
		if err := json.Unmarshal(m2.Config, &cfg); err != nil || len(cfg.Benchmarks) != 2 || cfg.Benchmarks[0].Items != 3 || cfg.Benchmarks[1].Items != 2 {
			t.Errorf("decontaminate config %s: item counts 3 and 2 wanted (%v)", m2.Config, err)
		}
		all := fmt.Sprint(dd, dc)
		if first == nil {
			first = map[string]string{"all": all}
		} else if first["all"] != all {
			t.Errorf("shard size changed the decisions:\n%s\n%s", first["all"], all)
		}
		rep := runPipeline(t, path)
		for _, s := range rep.Stages {
			if s.Ran != 0 {
				t.Errorf("rerun: stage %s ran %d shards", s.Name, s.Ran)
			}
		}
	}
}

// BenchmarkDedupStage times the dedup stage in a real run: N generated
// records (AUGMENT_DEDUP_STAGE_N, default 200,000; one in ten a planted
// copy) are ingested from an xlam dump first, untimed; then the pipeline
// with dedup runs, ingest up to date, so the time is dedup's: Plan's scan of
// the Parquet shards, signing, clustering, and every shard read, filtered
// and written again.
func BenchmarkDedupStage(b *testing.B) {
	n := 200_000
	if s := os.Getenv("AUGMENT_DEDUP_STAGE_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "gen.json"))
	if err != nil {
		b.Fatal(err)
	}
	f.WriteString("[")
	i := 0
	err = dedupStream(n, nil, nil)(func(r *record.Record) error {
		c := r.Messages[1].Calls[0]
		answers, _ := json.Marshal([]map[string]any{{"name": c.Name, "arguments": json.RawMessage(c.Arguments)}})
		tools, _ := json.Marshal([]map[string]any{{"name": c.Name, "description": "Look something up.",
			"parameters": map[string]any{"alpha": map[string]string{"type": "str"}, "beta": map[string]string{"type": "int"}, "gamma": map[string]string{"type": "str"}}}})
		row, _ := json.Marshal(map[string]any{"id": i, "query": r.Messages[0].Content, "answers": string(answers), "tools": string(tools)})
		if i > 0 {
			f.WriteString(",\n")
		}
		i++
		_, err := f.Write(row)
		return err
	})
	f.WriteString("]\n")
	if err != nil || f.Close() != nil {
		b.Fatal(err)
	}
	base := "output: {dir: out, shard_size: 5000}\nsources:\n  - {name: gen, path: gen.json, format: xlam}\nstages:\n"
	os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(base+"  - sample: {quotas: [{source: gen}]}\n"), 0o644)
	runPipelineTB(b, filepath.Join(dir, "pipeline.yaml"))
	for b.Loop() {
		os.RemoveAll(filepath.Join(dir, "out", "01-dedup"))
		os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(base+"  - dedup: {}\n"), 0o644)
		start, cpu0 := time.Now(), cputime.Process()
		rep := runPipelineTB(b, filepath.Join(dir, "pipeline.yaml"))
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(float64(n)/(cputime.Process()-cpu0).Seconds(), "records/cpu-s")
		b.ReportMetric(float64(manifests.Sum(rep.Stages[1].Counts.Rejected)), "removed")
	}
}

// runPipelineTB is runPipeline for benchmarks.
func runPipelineTB(tb testing.TB, path string) *Report {
	tb.Helper()
	rep, err := tryPipeline(tb, path)
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// TestDecontaminateDuckDB runs the README's query of the decontaminate
// rejects with DuckDB (testdata/duckdb_query.mjs) over a real run's
// rejects, and checks the hits it extracts. It needs node and a
// node_modules dir holding @duckdb/node-api in AUGMENT_DUCKDB_NODE_MODULES.
func TestDecontaminateDuckDB(t *testing.T) {
	node, modules := nodetest.Need(t, "AUGMENT_DUCKDB_NODE_MODULES", "@duckdb/node-api")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var query string
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "SELECT id, unnest(from_json(substr(detail, ") {
			query = strings.TrimSpace(line)
		}
	}
	if !strings.Contains(query, "'out/x/02-decontaminate/rejects-*.jsonl'") {
		t.Fatalf("README's decontaminate query not found: %q", query)
	}
	path := cleanPipeline(t, 100)
	runPipeline(t, path)
	dir := filepath.Dir(path)
	script, _ := filepath.Abs(filepath.Join("testdata", "duckdb_query.mjs"))
	cmd := exec.Command(node, script, strings.Replace(query, "out/x/", "out/", 1)+" ORDER BY id")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AUGMENT_DUCKDB_NODE_MODULES="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb_query.mjs: %v\n%s", err, stderr.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// planted:3 asks simple_1's question inside a longer query;
	// planted:4 is short:1 exactly (TestRunCleanPlanted).
	want := `[{"benchmark":"bfcl","id":"planted:3","item":"simple_1","kind":"ngram","ngram":"i am planning a trip and need the weather forecast for lisbon for","of":7,"shared":7},` +
		`{"benchmark":"short","id":"planted:4","item":"short:1","kind":"exact","ngram":null,"of":null,"shared":null}]`
	if got, _ := json.Marshal(rows); string(got) != want {
		t.Errorf("DuckDB read\n%s\nwant\n%s", got, want)
	}
}
