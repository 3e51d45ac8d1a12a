package report_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
)

// runPipeline runs the pipeline file with sets into a fresh directory and
// returns it.
func runPipeline(t *testing.T, path string, sets ...string) string {
	t.Helper()
	out := t.TempDir()
	rerun(t, path, append([]string{"output.dir=" + out}, sets...)...)
	return out
}

const demo = "../testdata/demo/pipeline.yaml"

// card is the YAML front matter of a dataset card, as the Hub reads it.
type card struct {
	PrettyName     string   `yaml:"pretty_name"`
	License        any      `yaml:"license"`
	Language       []string `yaml:"language"`
	TaskCategories []string `yaml:"task_categories"`
	SizeCategories []string `yaml:"size_categories"`
	Tags           []string `yaml:"tags"`
	Configs        []struct {
		ConfigName string `yaml:"config_name"`
		DataFiles  []struct {
			Split, Path string
		} `yaml:"data_files"`
	} `yaml:"configs"`
	DatasetInfo struct {
		Features []struct {
			Name  string
			Dtype string
			List  []struct{ Name, Dtype string }
		}
		Splits []struct {
			Name        string
			NumBytes    int64 `yaml:"num_bytes"`
			NumExamples int64 `yaml:"num_examples"`
		}
		DatasetSize int64 `yaml:"dataset_size"`
	} `yaml:"dataset_info"`
	AugmentVersion string `yaml:"augment_version"`
	AugmentConfig  string `yaml:"augment_config_sha256"`
}

// readCard splits a card into its front matter, and its
// Markdown body.
func readCard(t *testing.T, path string) (card, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rest, ok := bytes.CutPrefix(b, []byte("---\n"))
	if !ok {
		t.Fatalf("%s does not start with YAML front matter", path)
	}
	front, body, ok := bytes.Cut(rest, []byte("\n---\n"))
	if !ok {
		t.Fatalf("%s: front matter not closed", path)
	}
	var c card
	var all map[string]any
	if err := yaml.Unmarshal(front, &all); err != nil {
		t.Fatalf("front matter is not YAML: %v", err)
	}
	for _, k := range []string{"configs", "dataset_info", "language", "license", "task_categories", "size_categories", "tags"} {
		if _, ok := all[k]; !ok {
			t.Errorf("front matter has no %s", k)
		}
	}
	if err := yaml.Unmarshal(front, &c); err != nil {
		t.Fatal(err)
	}
	return c, string(body)
}

func TestDemoCards(t *testing.T) {
	out := runPipeline(t, demo)
	for _, dir := range []string{"06-mt_llama", "07-sharegpt"} {
		t.Run(dir, func(t *testing.T) {
			m, err := manifests.Read[manifests.Stage](filepath.Join(out, dir, "manifest.json"))
			if err != nil || m == nil {
				t.Fatal(m, err)
			}
			c, body := readCard(t, filepath.Join(out, dir, report.CardFile))
			if c.License != "unknown" {
				t.Errorf("license %v: the demo's sources declare none", c.License)
			}
			if len(c.Language) != 1 || c.Language[0] != "en" {
				t.Errorf("language %v", c.Language)
			}
			if c.SizeCategories[0] != "n<1K" || c.TaskCategories[0] != "text-generation" {
				t.Errorf("categories %v %v", c.SizeCategories, c.TaskCategories)
			}
			for _, tag := range []string{"function-calling", "meta-tool"} {
				if !strings.Contains(strings.Join(c.Tags, ","), tag) {
					t.Errorf("tags %v lack %s", c.Tags, tag)
				}
			}
			// configs point at the data files, which exist and are all of them.
			glob := filepath.Join(out, dir, c.Configs[0].DataFiles[0].Path)
			files, _ := filepath.Glob(glob)
			var size int64
			for _, f := range files {
				fi, _ := os.Stat(f)
				size += fi.Size()
			}
			var want int64
			for _, sh := range m.Shards {
				for _, o := range sh.Outputs {
					if o.Path != dir+"/"+report.PartialFile(sh.Name) { // the report's partial, beside the data
						want += o.Bytes
					}
				}
			}
			if len(files) != len(m.Shards) || size != want || c.DatasetInfo.DatasetSize != want {
				t.Errorf("data_files %s: %d files, %d bytes; card says %d bytes; manifest %d shards, %d bytes",
					glob, len(files), size, c.DatasetInfo.DatasetSize, len(m.Shards), want)
			}
			if s := c.DatasetInfo.Splits; len(s) != 1 || s[0].NumExamples != m.Totals.Out || s[0].NumExamples != 12 {
				t.Errorf("splits %+v, manifest out %d", s, m.Totals.Out)
			}
			f := c.DatasetInfo.Features
			if len(f) != 3 || f[0].Name != "conversations" || len(f[0].List) != 2 || f[1].Dtype != "string" {
				t.Errorf("features %+v", f)
			}
			if c.AugmentVersion != "test" || len(c.AugmentConfig) != 64 || !strings.Contains(body, c.AugmentConfig) {
				t.Errorf("version %q, config %q", c.AugmentVersion, c.AugmentConfig)
			}
			// The stage table's counts equal every stage's manifest.
			for _, st := range stageDirs(t, out) {
				if st > dir {
					if strings.Contains(body, "| "+st+" |") {
						t.Errorf("the card of %s lists later stage %s", dir, st)
					}
					continue
				}
				sm, _ := manifests.Read[manifests.Stage](filepath.Join(out, st, "manifest.json"))
				c := sm.Totals
				row := regexp.MustCompile(`(?m)^\| ` + st + ` \| [^|]+ \| [^|]+ \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|`).FindStringSubmatch(body)
				if row == nil {
					t.Errorf("no stage row for %s", st)
					continue
				}
				got := []int64{atoi(row[1]), atoi(row[2]), atoi(row[3]), atoi(row[4]), atoi(row[5])}
				want := []int64{c.In, c.Out, manifests.Sum(c.Rejected), manifests.Sum(c.Filtered), c.Added}
				if !slices.Equal(got, want) {
					t.Errorf("%s: card %v, manifest %v", st, got, want)
				}
			}
			for _, want := range []string{"`glaive_arguments_not_json` | 1", "`quota_full` | 1", "offline stand-in",
				"| glaive | glaive | not declared |", `"file_name": "augment_`, `dataset: "augment_`, "| 04-reason | 20 | 0 |"} {
				if !strings.Contains(body, want) {
					t.Errorf("card lacks %q", want)
				}
			}
			// An inline export's card says where its tools are (its tools
			// column is empty).
			if inline := strings.Contains(body, "tool definitions and the call format in the system text"); inline != (dir == "06-mt_llama") {
				t.Errorf("card says the tools are in the system text: %t; the export is inline: %t", inline, dir == "06-mt_llama")
			}
			// The LoRA run it shows is the export's own train_lora.yaml
			// (its template, model and special tokens), not a second account.
			if lora, err := os.ReadFile(filepath.Join(out, dir, "train_lora.yaml")); err != nil || !strings.Contains(body, "```yaml\n"+string(lora)+"```") {
				t.Errorf("the card does not show train_lora.yaml as written (%v)", err)
			}
		})
	}
	before, _ := os.ReadFile(filepath.Join(out, "06-mt_llama", report.CardFile))
	// The same pipeline run elsewhere gives the same cards.
	other := runPipeline(t, demo)
	for _, dir := range []string{"06-mt_llama", "07-sharegpt"} {
		a, _ := os.ReadFile(filepath.Join(out, dir, report.CardFile))
		b, _ := os.ReadFile(filepath.Join(other, dir, report.CardFile))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the card differs between two runs of the demo", dir)
		}
	}
	if c := string(report.WithoutAccounting(before)); strings.Contains(c, "Traffic and cost") || !strings.Contains(c, "## The mix") || !strings.Contains(c, "## Training with LLaMA-Factory") {
		t.Errorf("WithoutAccounting cut the wrong part:\n%s", c)
	}
	// Rewriting the cards from the run directory gives the same bytes.
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.WriteCards(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "06-mt_llama", report.CardFile))
	if !bytes.Equal(before, after) {
		t.Error("the card changed when written again from the same run")
	}
}

// TestCardLicenses: the licenses declared on the sources reach the card's
// front matter as the Hub's ids (an SPDX id in any case is the Hub's), and
// its Sources table as declared, one row a source whatever the text.
func TestCardLicenses(t *testing.T) {
	out := runPipeline(t, demo, "sources.0.license=Apache-2.0", "sources.1.license=apache-2.0",
		"sources.2.license=CC-BY-4.0", "sources.2.revision=v1.0", `sources.0.revision="v1 | main\nsecond line"`)
	c, body := readCard(t, filepath.Join(out, "06-mt_llama", report.CardFile))
	lic, ok := c.License.([]any)
	if !ok || len(lic) != 2 || lic[0] != "apache-2.0" || lic[1] != "cc-by-4.0" {
		t.Errorf("license %v", c.License)
	}
	for _, want := range []string{"| xlam | xlam | `CC-BY-4.0` (Hub: `cc-by-4.0`) | `v1.0` |", "| glaive | glaive | `apache-2.0` | - |",
		"| toolace | toolace | `Apache-2.0` (Hub: `apache-2.0`) | `v1 \\| main second line` |"} {
		if !strings.Contains(body, want) {
			t.Errorf("the sources table lacks %q", want)
		}
	}
	// Every row of the table has its 8 cells.
	table := body[strings.Index(body, "| source | format |"):]
	table = table[:strings.Index(table, "\n\n")]
	for _, row := range strings.Split(table, "\n") {
		if n := len(regexp.MustCompile(`(^|[^\\])\|`).FindAllString(row, -1)); n != 9 {
			t.Errorf("sources table row with %d cells: %q", n-1, row)
		}
	}
	out = runPipeline(t, demo, "sources.0.license=apache-2.0", "sources.1.license=APACHE-2.0", "sources.2.license=apache-2.0")
	if c, _ := readCard(t, filepath.Join(out, "07-sharegpt", report.CardFile)); c.License != "apache-2.0" {
		t.Errorf("one license for all sources: %v", c.License)
	}
	// A license the Hub does not list is other, with its name and link.
	out = runPipeline(t, demo, "sources.0.license=GPL-3.0-or-later", "sources.1.license=other", "sources.1.license_name=acme-research",
		"sources.1.license_link=https://acme.example/LICENSE", "sources.2.license=mit")
	c, body = readCard(t, filepath.Join(out, "07-sharegpt", report.CardFile))
	var front struct {
		License     []string `yaml:"license"`
		LicenseName string   `yaml:"license_name"`
		LicenseLink string   `yaml:"license_link"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "07-sharegpt", report.CardFile))
	if err := yaml.Unmarshal(bytes.Split(b, []byte("\n---\n"))[0][4:], &front); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(front.License, []string{"gpl-3.0", "mit", "other"}) || front.LicenseName != "acme-research" || front.LicenseLink != "https://acme.example/LICENSE" {
		t.Errorf("front matter license %+v", front)
	}
	if !strings.Contains(body, "| glaive | glaive | `other`: `acme-research`, `https://acme.example/LICENSE` |") {
		t.Error("the sources table lacks glaive's other license")
	}
}

// TestCardMachinePaths: a published card names the files pipeline.yaml
// points at (a benchmark, a prompt override) by their path relative to
// pipeline.yaml when it is inside its directory, else by their base name:
// never a path of the machine that made it.
func TestCardMachinePaths(t *testing.T) {
	dir := t.TempDir()
	client := filepath.Join(dir, "clientX")
	for src, dst := range map[string]string{"../testdata/demo/dumps/xlam.json": "xlam.json", "../testdata/demo/benchmarks/bfcl.jsonl": "bfcl.jsonl",
		"../prompts/reason_meta_tool.tmpl": "my_reason.tmpl"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{client, filepath.Join(dir, "p", "bench")} {
			os.MkdirAll(d, 0o755)
			if err := os.WriteFile(filepath.Join(d, dst), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	y := `output: {dir: out}
sources: [{name: xlam, path: ` + filepath.Join(client, "xlam.json") + `, format: xlam, license: apache-2.0}]
stages:
  - decontaminate: {benchmarks: [{name: bfcl, path: ` + filepath.Join(client, "bfcl.jsonl") + `, format: bfcl}, {name: b2, path: bench/bfcl.jsonl, format: bfcl}]}
  - meta_tool: {}
  - reason: {style: meta_tool, prompt: ../clientX/my_reason.tmpl}
  - name: e
    export: {template: qwen3, allow_offline: true}
`
	path := filepath.Join(dir, "p", "pipeline.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	rerun(t, path)
	_, body := readCard(t, filepath.Join(dir, "p", "out", "04-e", report.CardFile))
	if strings.Contains(body, dir) || strings.Contains(body, "../") {
		t.Errorf("the card names a machine path:\n%s", regexp.MustCompile(`(?m)^\| 0[13].*$`).FindAllString(body, -1))
	}
	for _, want := range []string{`"path":"bfcl.jsonl"`, `"path":"bench/bfcl.jsonl"`, `"prompt":"my_reason.tmpl"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the card's settings lack %s", want)
		}
	}
}

// TestCardCutoffLen: the card's account of cutoff_len is train_lora.yaml's,
// with the export's counts of the samples by the cutoff_len they need.
func TestCardCutoffLen(t *testing.T) {
	out := runPipeline(t, demo)
	for _, dir := range []string{"06-mt_llama", "07-sharegpt"} {
		_, body := readCard(t, filepath.Join(out, dir, report.CardFile))
		lora, err := os.ReadFile(filepath.Join(out, dir, "train_lora.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^cutoff_len: (\d+)$`).FindSubmatch(lora)
		if m == nil {
			t.Fatalf("%s: train_lora.yaml has no cutoff_len", dir)
		}
		want := "The `cutoff_len` of `train_lora.yaml`, " + string(m[1]) + ", is the export's measure"
		if !strings.Contains(body, want) {
			t.Errorf("%s: the card lacks %q:\n%s", dir, want, body[strings.LastIndex(body, "```"):])
		}
		sm, _ := manifests.Read[manifests.Stage](filepath.Join(out, dir, "manifest.json"))
		if n := sm.Totals.Counters["cutoff_len_"+string(m[1])]; n == 0 || !strings.Contains(body, " "+string(m[1])+": "+strconv.FormatInt(n, 10)) {
			t.Errorf("%s: the card does not count the %d samples that need a cutoff_len of %s", dir, n, m[1])
		}
	}
	// Without a verify stage nothing is measured: the card says so.
	out = runPipeline(t, demo, "stages.4.skip=true")
	_, body := readCard(t, filepath.Join(out, "07-sharegpt", report.CardFile))
	if !strings.Contains(body, "so `train_lora.yaml` sets no `cutoff_len`") || strings.Contains(body, "keeps 99 %") {
		t.Errorf("without verify the card says:\n%s", body[strings.LastIndex(body, "```"):])
	}
}

func stageDirs(t *testing.T, out string) []string {
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && regexp.MustCompile(`^\d\d-`).MatchString(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// TestRunInProgress: the report reads a run whose later stages have no
// manifest yet and whose current stage has no finish time; cards are
// written only for finished exports whose input is still what they read.
func TestRunInProgress(t *testing.T) {
	out := runPipeline(t, demo)
	if b, err := os.ReadFile(filepath.Join(out, report.HTMLFile)); err != nil || !bytes.Contains(b, []byte("8 of 8 stages done")) {
		t.Fatalf("the run wrote no complete report.html: %v", err)
	}
	mpath := filepath.Join(out, "06-mt_llama", "manifest.json")
	m, err := manifests.Read[manifests.Stage](mpath)
	if err != nil {
		t.Fatal(err)
	}
	m.Finished = time.Time{}
	if err := writeJSON(mpath, m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"07-sharegpt/manifest.json", "06-mt_llama/README.md", "07-sharegpt/README.md"} {
		if err := os.Remove(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	// A process holds the run's lock (a run is under way): the stage
	// without a finish time is running.
	lock, err := os.Open(filepath.Join(out, filepath.FromSlash(report.LockFile)))
	if err != nil {
		t.Fatal(err)
	}
	if held, err := flock.Exclusive(lock); err != nil || held {
		t.Fatalf("lock: held %v, %v", held, err)
	}
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := run.Stages[6].Status; s != report.StatusRunning {
		t.Errorf("06: %s", s)
	}
	if s := run.Stages[7].Status; s != report.StatusPending {
		t.Errorf("07: %s", s)
	}
	if cards, err := run.WriteCards(); err != nil || len(cards) != 0 {
		t.Errorf("cards of unfinished exports: %v %v", cards, err)
	}
	b, err := run.HTML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"6 of 8 stages done", "06-mt_llama is running now", `class="l status-pending">pending`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Nothing holds it: the run stopped in the stage, which is partial.
	lock.Close()
	run, err = report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := run.Stages[6].Status; s != report.StatusPartial {
		t.Errorf("06 after the run stopped: %s", s)
	}
	b, err = run.HTML()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`status-running">`)) || bytes.Contains(b, []byte("running now")) || !bytes.Contains(b, []byte("6 of 8 stages done; partial")) {
		t.Errorf("report of a stopped run: %s", b[:min(len(b), 2000)])
	}

	// An export whose input shard was rewritten since gets no card.
	m.Finished = m.Started
	if err := writeJSON(mpath, m); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(out, m.Shards[0].Inputs[0].Path)
	if err := os.WriteFile(in, []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	run, _ = report.Load(out)
	if cards, err := run.WriteCards(); err != nil || len(cards) != 0 {
		t.Errorf("card of an export whose input changed: %v %v", cards, err)
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// TestRetryShardsPartial: a stage whose manifest records a shard without
// its key (records rejected for a teacher failure that may pass, asked
// again by the next run) is partial, and so is every stage after it; the
// exports get no card, and the card an earlier run left is stale.
func TestRetryShardsPartial(t *testing.T) {
	out := runPipeline(t, demo)
	mpath := filepath.Join(out, "03-noise", "manifest.json")
	m, err := manifests.Read[manifests.Stage](mpath)
	if err != nil {
		t.Fatal(err)
	}
	m.Shards[1].Key = ""
	m.Shards[1].Rejected = map[string]int64{"llm_error_server": 2, "noise_invalid_json": 1}
	if err := writeJSON(mpath, m); err != nil {
		t.Fatal(err)
	}
	run, err := report.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range run.Stages {
		want := report.StatusDone
		if i >= 3 {
			want = report.StatusPartial
		}
		if st.Status != want {
			t.Errorf("%s: %s, want %s", st.Dir, st.Status, want)
		}
	}
	noise := run.Stages[3]
	if !slices.Equal(noise.Retry, []string{m.Shards[1].Name}) || noise.RetryRejected["llm_error_server"] != 2 || len(noise.RetryRejected) != 1 {
		t.Errorf("retry: %v %v", noise.Retry, noise.RetryRejected)
	}
	if cards, err := run.WriteCards(); err != nil || len(cards) != 0 {
		t.Errorf("cards: %v %v", cards, err)
	}
	if stale, err := run.StaleCards(); err != nil || len(stale) != 2 {
		t.Errorf("stale cards: %v %v", stale, err)
	}
	st, err := run.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st.Print(&buf)
	for _, want := range []string{"run " + out + ": 3 of 8 stages done",
		"03-noise: 2 record(s) rejected for a teacher failure that may pass (llm_error_server=2) in shard(s) " + m.Shards[1].Name + ": the next run asks them again"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("stats lack %q:\n%s", want, buf.String())
		}
	}
}
