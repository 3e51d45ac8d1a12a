package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/augmentdata/augment/manifests"
)

// CardFile is the dataset card's file name in an export directory.
const CardFile = "README.md"

// exportSettings are the export settings the card uses, from the stage's
// manifest.
type exportSettings struct {
	Dataset        string `json:"dataset"`
	Format         string `json:"format"`
	Style          string `json:"style"`
	Surface        string `json:"surface"`
	Thoughts       bool   `json:"thoughts"`
	ToolsPlacement string `json:"tools_placement"` // "role": messages with a tool role, not for LLaMA-Factory
}

// cardMeta is the card's YAML front matter, in the Hugging Face dataset card
// format (field order as the Hub writes it).
type cardMeta struct {
	PrettyName      string       `yaml:"pretty_name"`
	License         any          `yaml:"license"`
	LicenseName     string       `yaml:"license_name,omitempty"`
	LicenseLink     string       `yaml:"license_link,omitempty"`
	Language        []string     `yaml:"language,omitempty"`
	TaskCategories  []string     `yaml:"task_categories"`
	SizeCategories  []string     `yaml:"size_categories"`
	Tags            []string     `yaml:"tags"`
	Configs         []cardConfig `yaml:"configs"`
	DatasetInfo     cardInfo     `yaml:"dataset_info"`
	AugmentVersion  string       `yaml:"augment_version"`
	AugmentConfig   string       `yaml:"augment_config_sha256"`
	AugmentSeed     uint64       `yaml:"augment_seed"`
	AugmentStageDir string       `yaml:"augment_stage"`
}

type cardConfig struct {
	ConfigName string          `yaml:"config_name"`
	DataFiles  []cardDataFiles `yaml:"data_files"`
	Default    bool            `yaml:"default"`
}

type cardDataFiles struct {
	Split string `yaml:"split"`
	Path  string `yaml:"path"`
}

type cardInfo struct {
	Features    []cardFeature `yaml:"features"`
	Splits      []cardSplit   `yaml:"splits"`
	DatasetSize int64         `yaml:"dataset_size"`
}

type cardFeature struct {
	Name  string        `yaml:"name"`
	Dtype string        `yaml:"dtype,omitempty"`
	List  []cardFeature `yaml:"list,omitempty"`
}

type cardSplit struct {
	Name        string `yaml:"name"`
	NumBytes    int64  `yaml:"num_bytes"`
	NumExamples int64  `yaml:"num_examples"`
}

// sizeCategory is the Hub's size bucket for n examples.
func sizeCategory(n int64) string {
	bounds := []struct {
		max  int64
		name string
	}{{1e3, "n<1K"}, {1e4, "1K<n<10K"}, {1e5, "10K<n<100K"}, {1e6, "100K<n<1M"}, {1e7, "1M<n<10M"},
		{1e8, "10M<n<100M"}, {1e9, "100M<n<1B"}}
	for _, b := range bounds {
		if n < b.max {
			return b.name
		}
	}
	return "n>1T"
}

// hubLanguage maps a lang tag to the code the Hub's language field takes.
func hubLanguage(lang string) string {
	l, _, _ := strings.Cut(strings.ToLower(lang), "-")
	return l
}

// stageTags are card tags for the recipes a stage type implements.
var stageTags = map[string]string{
	"meta_tool": "meta-tool", "reason": "reasoning", "decision_tokens": "decision-tokens",
	"negatives": "negative-samples", "translate": "traditional-chinese", "tool_dc": "tool-dc",
	"response_schema": "response-schema",
}

// Licenses returns the Hub license ids of the sources' licenses, sorted
// and distinct, with "unknown" for any source that declares none.
func (r *Run) Licenses() []string {
	seen := map[string]bool{}
	for _, s := range r.Config.Sources {
		seen[sourceLicense(s)] = true
	}
	if len(seen) == 0 {
		seen["unknown"] = true
	}
	return slices.Sorted(keysOf(seen))
}

// sourceLicense is the Hub license id of a source's license: "unknown"
// when it declares none, "other" for one that is not a Hub or SPDX id
// (which a config.yaml written before pipeline files were checked for it
// may hold).
func sourceLicense(s SourceConfig) string {
	if strings.TrimSpace(s.License) == "" {
		return "unknown"
	}
	if id, ok := HubLicense(s.License); ok {
		return id
	}
	return "other"
}

// otherLicense returns the license_name and license_link of the card's
// front matter: those of the sources whose license is "other", when they
// all give the same (the Hub takes one of each; the Sources table names
// every source's).
func (r *Run) otherLicense() (name, link string) {
	first := true
	for _, s := range r.Config.Sources {
		if sourceLicense(s) != "other" {
			continue
		}
		n, l := strings.TrimSpace(s.LicenseName), strings.TrimSpace(s.LicenseLink)
		if !first && (n != name || l != link) {
			return "", ""
		}
		name, link, first = n, l, false
	}
	return name, link
}

// licenseCell is a source's license in the card's Sources table: as
// declared, with the Hub id the front matter has when that differs (and
// the name and link of an "other" one).
func licenseCell(s SourceConfig) string {
	decl := strings.TrimSpace(s.License)
	if decl == "" {
		return "not declared"
	}
	id := sourceLicense(s)
	cell := code(decl)
	if id != decl {
		cell += " (Hub: " + code(id) + ")"
	}
	if id == "other" {
		if n := strings.TrimSpace(s.LicenseName); n != "" {
			cell += ": " + code(n)
		}
		if l := strings.TrimSpace(s.LicenseLink); l != "" {
			cell += ", " + code(l)
		}
	}
	return cell
}

func keysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Card renders the dataset card of the export stage at index i of the run.
func (r *Run) Card(i int) ([]byte, error) {
	st := &r.Stages[i]
	if st.Manifest == nil {
		return nil, fmt.Errorf("%s: no manifest", st.Dir)
	}
	var ex exportSettings
	if err := json.Unmarshal(st.Manifest.Config, &ex); err != nil {
		return nil, fmt.Errorf("%s: export settings: %w", st.Dir, err)
	}
	if ex.Dataset == "" {
		ex.Dataset = "augment_" + st.Name
	}
	dist, err := r.ExportDist(st)
	if err != nil {
		return nil, err
	}
	var bytesOut int64
	for _, sh := range st.Manifest.Shards {
		for _, o := range sh.Outputs {
			if strings.HasPrefix(o.Path, st.Dir+"/"+ex.Dataset+"/") {
				bytesOut += o.Bytes
			}
		}
	}
	examples := st.Manifest.Totals.Out
	role := ex.ToolsPlacement == "role"

	meta := cardMeta{
		PrettyName:     ex.Dataset,
		TaskCategories: []string{"text-generation"},
		SizeCategories: []string{sizeCategory(examples)},
		Tags:           []string{"function-calling", "tool-use", "synthetic", "llama-factory", "augment"},
		Configs: []cardConfig{{ConfigName: "default", Default: true,
			DataFiles: []cardDataFiles{{Split: "train", Path: ex.Dataset + "/part-*." + ex.Format}}}},
		DatasetInfo: cardInfo{
			Features: []cardFeature{
				{Name: "conversations", List: []cardFeature{{Name: "from", Dtype: "string"}, {Name: "value", Dtype: "string"}}},
				{Name: "system", Dtype: "string"},
				{Name: "tools", Dtype: "string"},
			},
			Splits:      []cardSplit{{Name: "train", NumBytes: bytesOut, NumExamples: examples}},
			DatasetSize: bytesOut,
		},
		AugmentVersion:  st.Manifest.Tool,
		AugmentConfig:   r.ConfigHashUpTo(i),
		AugmentSeed:     r.Config.Seed,
		AugmentStageDir: st.Dir,
	}
	if role {
		// The rows are {"messages": [{"role", "content"}]}, which no
		// LLaMA-Factory template reads.
		meta.Tags = slices.DeleteFunc(meta.Tags, func(t string) bool { return t == "llama-factory" })
		meta.DatasetInfo.Features = []cardFeature{
			{Name: "messages", List: []cardFeature{{Name: "role", Dtype: "string"}, {Name: "content", Dtype: "string"}}},
		}
	}
	if lic := r.Licenses(); len(lic) == 1 {
		meta.License = lic[0]
	} else {
		meta.License = lic
	}
	meta.LicenseName, meta.LicenseLink = r.otherLicense()
	langs := map[string]bool{}
	for l := range dist.Lang {
		if l != "und" {
			langs[hubLanguage(l)] = true
		}
	}
	meta.Language = slices.Sorted(keysOf(langs))
	extra := map[string]bool{}
	for _, s := range r.Stages[:i] {
		if t, ok := stageTags[s.Type]; ok && s.Status != StatusSkipped {
			extra[t] = true
		}
	}
	meta.Tags = append(meta.Tags, slices.Sorted(keysOf(extra))...)

	var b bytes.Buffer
	b.WriteString("---\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(meta); err != nil {
		return nil, err
	}
	enc.Close()
	b.WriteString("---\n\n")
	r.cardProse(&b, i, ex, dist, examples)
	return b.Bytes(), nil
}

func (r *Run) cardProse(b *bytes.Buffer, i int, ex exportSettings, d *Dist, examples int64) {
	st := &r.Stages[i]
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("# %s\n\n", ex.Dataset)
	style := ex.Style
	if ex.Style == "inline" {
		style += ", surface " + ex.Surface
	}
	if ex.Thoughts {
		style += ", with thoughts"
	}
	layout := "LLaMA-Factory's sharegpt format"
	switch {
	case ex.ToolsPlacement == "role":
		layout = "chat messages with the tools in a role of their own (tools_placement: role; card.json describes them)"
	case ex.Style == "inline":
		layout = "LLaMA-Factory's sharegpt format with the tool definitions and the call format in the system text (an empty tools column)"
	}
	w("%d tool-use dialogues in %s (%s files, style %s), made by augment %s from %d source(s) through %d stage(s). ",
		examples, layout, ex.Format, style, st.Manifest.Tool, len(r.Config.Sources), i)
	w("Everything below is written by augment from the run's manifests. The effective pipeline is `config.yaml` in the run directory (seed %d); its config hash, `%s`, covers every setting up to this export that changes the data (not endpoints or prices; the paths of dumps and benchmark files count, as a renamed dump is read again), so equal hashes over equal dumps give equal data.\n\n",
		r.Config.Seed, r.ConfigHashUpTo(i))
	if provider := r.Config.Teacher.Provider; provider == "offline" && r.usedTeacher(i) {
		w("**Teacher: offline stand-in.** The texts LLM stages added were written by augment's deterministic rule-based stand-ins, not by a model; every such record says `\"provider\": \"offline\"` in its lineage. Use this dataset to try a pipeline, not to train.\n\n")
	}

	w("## Sources\n\n| source | format | license | revision | dump sha256 | rows read | kept | rejected |\n|---|---|---|---|---|---:|---:|---:|\n")
	perSource := r.sourceCounts()
	for _, s := range r.Config.Sources {
		c := perSource[s.Name]
		w("| %s | %s | %s | %s | %s | %d | %d | %d |\n", s.Name, s.Format, licenseCell(s), code(strings.TrimSpace(s.Revision)), code(c.sha), c.In, c.Out, manifests.Sum(c.Rejected))
	}
	if slices.Contains(r.Licenses(), "unknown") {
		w("\nA source without a declared license makes this card's license `unknown`: set `license:` (a Hugging Face license id such as `apache-2.0`, or its SPDX id) on each source in pipeline.yaml.\n")
	}
	if n, _ := r.otherLicense(); n == "" && slices.Contains(r.Licenses(), "other") {
		w("\nThe sources whose license the Hub does not list (`other`) name different licenses, or none: the table above gives each, the front matter none of them.\n")
	}
	w("\n")

	w("## Stages\n\nCounts conserve records: in + added = out + rejected + filtered.\n\n")
	w("| dir | stage | type | in | out | rejected | filtered | added | settings |\n|---|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, s := range r.Stages[:i+1] {
		if s.Manifest == nil {
			w("| %s | %s | %s | | | | | | %s |\n", s.Dir, s.Name, s.Type, s.Status)
			continue
		}
		c := s.Manifest.Totals
		settings := code(publicSettings(s.Manifest.Config))
		if s.Type == "ingest" {
			settings = "the sources above"
		}
		w("| %s | %s | %s | %d | %d | %d | %d | %d | %s |\n", s.Dir, s.Name, s.Type, c.In, c.Out,
			manifests.Sum(c.Rejected), manifests.Sum(c.Filtered), c.Added, settings)
	}
	w("\n")
	var reasons bytes.Buffer
	for _, s := range r.Stages[:i+1] {
		if s.Manifest == nil {
			continue
		}
		for _, what := range []struct {
			kind string
			m    map[string]int64
		}{{"rejected", s.Manifest.Totals.Rejected}, {"filtered", s.Manifest.Totals.Filtered}} {
			for _, k := range manifests.Reasons(what.m) {
				fmt.Fprintf(&reasons, "| %s | %s | `%s` | %d |\n", s.Dir, what.kind, k, what.m[k])
			}
		}
	}
	if reasons.Len() > 0 {
		w("### Rejected and filtered records\n\nRejected records are kept with their reason in each stage's `rejects-*.jsonl`; filtered ones were dropped on purpose (sample quotas).\n\n| stage | | reason | records |\n|---|---|---|---:|\n")
		b.Write(reasons.Bytes())
		w("\n")
	}
	for _, s := range r.Stages[:i+1] {
		if s.Manifest != nil && len(s.Manifest.Notes) > 0 && s.Dir == st.Dir {
			w("Notes of this export:\n\n")
			for _, n := range s.Manifest.Notes {
				w("- %s\n", n)
			}
			w("\n")
		}
	}

	w("## The mix\n\nOver the %d exported samples.\n\n", d.Records)
	for _, mix := range []struct {
		name string
		c    Counts
	}{{"source", d.Source}, {"category", d.Category}, {"world", d.World}, {"difficulty", d.Difficulty}, {"lang", d.Lang}} {
		if len(mix.c) == 0 {
			continue
		}
		w("| %s | samples | share |\n|---|---:|---:|\n", mix.name)
		for _, k := range mix.c.Keys() {
			w("| %s | %d | %s |\n", k, mix.c[k], pct(mix.c[k], d.Records))
		}
		w("\n")
	}

	t := d.Tokens
	w("## Lengths\n\nTokens per sample (o200k BPE over system, tools and turns; the verify stage's `tokens` tag where present):\n\n")
	w("| samples | min | p50 | p90 | p99 | max | total |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	w("| %d | %d | %d | %d | %d | %d | %d |\n\n", t.Count, t.Min, t.P50, t.P90, t.P99, t.Max, t.Sum)
	if t.Count < d.Records {
		w("Without a tokens tag, tokens were counted on a seeded sample of %d of the %d samples.\n\n", t.Count, d.Records)
	}
	calls := fmt.Sprintf("Calls per calling turn: mean %.2f.", d.CallsPerTurn.Mean())
	if len(d.CallsPerTurn) == 0 {
		calls = "No sample has a calling turn."
	}
	w("Tools listed per sample: mean %.2f. Turns per sample: mean %.2f. %s\n\n", d.Tools.Mean(), d.Turns.Mean(), calls)

	w("## Teacher\n\n")
	w("Configured: provider `%s`", r.Config.Teacher.Provider)
	if m := r.Config.Teacher.Model; m != "" {
		w(", model `%s`", m)
	}
	w(".")
	if len(d.Teacher) == 0 {
		w(" No exported sample was changed by the teacher.\n\n")
	} else {
		w(" Exported samples a teacher wrote into, by stage, from their lineage:\n\n| stage | provider | model | samples |\n|---|---|---|---:|\n")
		for _, k := range slices.Sorted(keysOf(d.Teacher)) {
			f := strings.SplitN(k, " ", 3)
			w("| %s | %s | %s | %d |\n", f[0], f[1], code(f[2]), d.Teacher[k])
		}
		w("\n")
	}
	var rows bytes.Buffer
	var cost float64
	for _, s := range r.Stages[:i+1] {
		if s.LLM == nil {
			continue
		}
		l := s.LLM
		cost += l.Cost
		fmt.Fprintf(&rows, "| %s | %d | %d | %d | %d | %d | %.4f |\n", s.Dir, l.Requests, l.CacheHits, l.Failed, l.TokensIn, l.TokensOut, l.Cost)
	}
	if rows.Len() > 0 {
		w(accountingHeading + "\nRun accounting, as recorded by the run that last wrote each stage: a resumed run counts only its own requests, and cache hits cost nothing, so these figures (unlike the rest of this card) depend on how the run got here.\n\n")
		w("| stage | requests | cache hits | failed | tokens in | tokens out | cost |\n|---|---:|---:|---:|---:|---:|---:|\n")
		b.Write(rows.Bytes())
		for _, s := range r.Stages[:i+1] {
			if s.LLM != nil && s.Manifest != nil && len(s.Manifest.LLMUnrecorded) > 0 {
				w("\n%s: %s.\n", s.Dir, UnrecordedNote(s.Manifest.LLMUnrecorded))
			}
		}
		w("\nTotal cost: %.4f", cost)
		if r.Config.Teacher.PriceInput == 0 && r.Config.Teacher.PriceOutput == 0 {
			w(" (no prices configured: set teacher.price_input_per_mtok and price_output_per_mtok)")
		}
		w(".\n\n")
	}

	if ex.ToolsPlacement == "role" {
		w("## Training\n\nLLaMA-Factory cannot train on this export: its rows hold the tools in a role of their own, which no LLaMA-Factory template reads. `chat_template.jinja` beside them renders a row as the model sees it; `card.json` describes the rows. The samples' p99 length is %d tokens (o200k estimate).\n", t.P99)
		return
	}
	w("## Training with LLaMA-Factory\n\nThis directory is a LLaMA-Factory `dataset_dir`. Its `dataset_info.json` entry:\n\n```json\n")
	info, err := os.ReadFile(filepath.Join(r.Dir, st.Dir, "dataset_info.json"))
	if err != nil {
		info = []byte("(dataset_info.json is missing: run the export again)\n")
	}
	b.Write(info)
	// The run's own train_lora.yaml, as the export wrote it (its template,
	// model and special tokens), rather than a second account of it.
	w("```\n\nA LoRA run (`cd` here, then `llamafactory-cli train train_lora.yaml`), `train_lora.yaml`:\n\n```yaml\n")
	lora, err := os.ReadFile(filepath.Join(r.Dir, st.Dir, "train_lora.yaml"))
	if err != nil {
		lora = []byte("# train_lora.yaml is missing: run the export again\n")
	}
	b.Write(lora)
	w("```\n\n")
	r.cutoffProse(b, st, examples, t.P99)
}

// counterCutoff + "<n>" are the export's counters of the measured samples
// (a verify tokens tag) whose rendering needs a cutoff_len of n (the
// export's counterCutoff); train_lora.yaml's cutoff_len is the largest n.
const counterCutoff = "cutoff_len_"

// cutoffProse says what train_lora.yaml's cutoff_len is, from the export's
// own counters, the figure it was written from.
func (r *Run) cutoffProse(b *bytes.Buffer, st *Stage, examples int64, p99 int) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	need := map[int]int64{}
	var measured int64
	for k, n := range st.Manifest.Totals.Counters {
		if v, ok := strings.CutPrefix(k, counterCutoff); ok && n > 0 {
			if c, err := strconv.Atoi(v); err == nil {
				need[c] += n
				measured += n
			}
		}
	}
	if measured == 0 {
		w("No sample's length was measured (no verify stage counted tokens before this export), so `train_lora.yaml` sets no `cutoff_len`: run a verify stage before the export to have one that keeps every sample whole. The p99 above, %d tokens, counts the record's texts, not LLaMA-Factory's rendering of them, which is longer.\n", p99)
		return
	}
	sizes := slices.Sorted(maps.Keys(need))
	w("The `cutoff_len` of `train_lora.yaml`, %d, is the export's measure of the samples as LLaMA-Factory renders them for the template (its framing and default system prompt, the tool format's text of every tool and call, each turn), in o200k tokens with a quarter to spare for the model's tokenizer, rounded up to a power of two: no measured sample is cut at it. Samples by the `cutoff_len` they need:", sizes[len(sizes)-1])
	for i, c := range sizes {
		sep := ","
		if i == 0 {
			sep = ""
		}
		w("%s %d: %d", sep, c, need[c])
	}
	w(".")
	if measured < examples {
		w(" Only %d of the %d samples were measured (those with verify's `tokens` tag): the others may be longer.", measured, examples)
	}
	w(" The p99 above, %d tokens, counts the record's texts, not the rendering, which is longer.\n", p99)
}

// usedTeacher reports whether a stage up to i asked the teacher.
func (r *Run) usedTeacher(i int) bool {
	for _, s := range r.Stages[:i] {
		if s.LLM != nil {
			return true
		}
	}
	return false
}

type sourceCount struct {
	manifests.Counts
	sha string
}

// sourceCounts sums ingest's shards per source ("<source>-00000" …).
func (r *Run) sourceCounts() map[string]*sourceCount {
	out := map[string]*sourceCount{}
	if len(r.Stages) == 0 || r.Stages[0].Manifest == nil {
		return out
	}
	for _, sh := range r.Stages[0].Manifest.Shards {
		i := strings.LastIndexByte(sh.Name, '-')
		if i < 0 {
			continue
		}
		name := sh.Name[:i]
		c := out[name]
		if c == nil {
			c = &sourceCount{}
			out[name] = c
		}
		c.Add(sh.Counts)
		if c.sha == "" && len(sh.Inputs) > 0 {
			c.sha = sh.Inputs[0].SHA256
		}
	}
	return out
}

// code renders s as a Markdown code span ("-" when empty) that is safe in
// a table cell: a line break becomes a space (it would end the row), "|"
// is escaped (it would end the cell), and the span's fence is one backtick
// longer than the longest run of them in s.
func code(s string) string {
	if s == "" {
		return "-"
	}
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`).Replace(s)
	run, longest := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 && (s[0] == '`' || s[len(s)-1] == '`') {
		s = " " + s + " " // CommonMark strips one space each side
	}
	return fence + s + fence
}

func pct(n, total int64) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(total))
}

// accountingHeading starts the card's run accounting section.
const accountingHeading = "### Traffic and cost\n"

// WithoutAccounting returns a card without its run accounting section (the
// teacher traffic and cost of the runs that wrote each stage): the part of
// the card that the same pipeline over the same dumps always writes the
// same, however the run got there.
func WithoutAccounting(card []byte) []byte {
	i := bytes.Index(card, []byte(accountingHeading))
	if i < 0 {
		return card
	}
	j := bytes.Index(card[i:], []byte("\n## "))
	if j < 0 {
		return card[:i:i]
	}
	return append(card[:i:i], card[i+j+1:]...)
}

// ErrNoConfig is WriteCards' error for a run directory without its
// config.yaml: a card states the run's seed, sources and teacher, which
// only that file holds, so no card is written and those on disk are left.
var ErrNoConfig = errors.New("no config.yaml: a dataset card needs the run's seed, sources and teacher settings, so none is written and those there are left as they are")

// cardDue reports whether the stage gets a dataset card: a done export
// whose input shards are still the ones it exported.
func (r *Run) cardDue(st *Stage) bool {
	return st.Status == StatusDone && r.inputsCurrent(st)
}

// WriteCards writes the dataset card of every finished export stage whose
// input shards are still the ones it exported (an export made before its
// input was rewritten gets no card until it runs again). It returns the
// cards written, relative to the run dir; ErrNoConfig without config.yaml.
func (r *Run) WriteCards() ([]string, error) {
	if r.ConfigHash == "" {
		return nil, ErrNoConfig
	}
	var written []string
	for i := range r.Stages {
		st := &r.Stages[i]
		if !st.Sink() || !r.cardDue(st) {
			continue
		}
		b, err := r.Card(i)
		if err != nil {
			return written, err
		}
		rel := st.Dir + "/" + CardFile
		if err := r.writeFile(rel, b); err != nil {
			return written, err
		}
		written = append(written, rel)
	}
	return written, nil
}

// StaleCards lists the dataset cards on disk, relative to the run dir, of
// the export stages with a manifest that get no card (WriteCards): not
// done, or their input rewritten since they ran. Such a card describes
// data and settings its directory no longer holds; the caller deletes it.
// Without config.yaml none is listed (no card is written or judged then).
func (r *Run) StaleCards() ([]string, error) {
	if r.ConfigHash == "" {
		return nil, nil
	}
	var stale []string
	for i := range r.Stages {
		st := &r.Stages[i]
		if !st.Sink() || st.Manifest == nil || r.cardDue(st) {
			continue
		}
		rel := st.Dir + "/" + CardFile
		switch fi, err := os.Lstat(filepath.Join(r.Dir, filepath.FromSlash(rel))); {
		case err == nil && fi.Mode().IsRegular():
			stale = append(stale, rel)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return stale, err
		}
	}
	return stale, nil
}

// notKeptShards maps the path of every shard the run's stages record as
// not kept to its hash.
func (r *Run) notKeptShards() map[string]string {
	made := map[string]string{}
	for _, s := range r.Stages {
		for _, ref := range s.Parquet() {
			if ref.NotKept {
				made[ref.Path] = ref.SHA256
			}
		}
	}
	return made
}

// inputsCurrent reports whether the stage's input shards are on disk with
// the sizes its manifest recorded, or, for one not kept, still recorded by
// the stage that made it.
func (r *Run) inputsCurrent(st *Stage) bool {
	var made map[string]string // a NotKept shard's path → its hash, as recorded
	for _, sh := range st.Manifest.Shards {
		for _, in := range sh.Inputs {
			if in.NotKept {
				if made == nil {
					made = r.notKeptShards()
				}
				if made[in.Path] != in.SHA256 {
					return false
				}
				continue
			}
			fi, err := os.Stat(filepath.Join(r.Dir, in.Path))
			if err != nil || fi.Size() != in.Bytes {
				return false
			}
		}
	}
	return true
}

// settingsPathKeys are the keys of stage settings whose values are files
// named in pipeline.yaml (a benchmark's path, prompt overrides, verify's
// tokenizer, the export's model_name_or_path), besides every key ending in
// "_prompt" and every value of a "prompts" map.
var settingsPathKeys = []string{"path", "prompt", "tokenizer", "model"}

// publicSettings is a stage's settings (its manifest's config) as the card
// prints them: compact JSON, key order kept, with each file path written
// by publicPath. Invalid JSON is printed as it is.
func publicSettings(raw json.RawMessage) string {
	type frame struct {
		obj   bool
		key   string // the key being read, in an object
		n     int    // keys and values read, in an object; values, in a list
		paths bool   // every string value is a path (a "prompts" map)
	}
	if !json.Valid(raw) {
		return string(raw)
	}
	var stack []*frame
	var b strings.Builder
	enc := func(v any) {
		e, _ := json.Marshal(v) // a string, number, bool or nil: no error
		b.Write(e)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		t, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return string(raw)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := t.(json.Delim); ok && (d == '}' || d == ']') {
			b.WriteByte(byte(d))
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj && top.n%2 == 0 { // a key
			if top.n > 0 {
				b.WriteByte(',')
			}
			top.key, _ = t.(string)
			enc(top.key)
			b.WriteByte(':')
			top.n++
			continue
		}
		isPath := false
		if top != nil {
			if !top.obj && top.n > 0 {
				b.WriteByte(',')
			}
			top.n++
			isPath = top.paths || top.obj && (slices.Contains(settingsPathKeys, top.key) || strings.HasSuffix(top.key, "_prompt"))
		}
		switch v := t.(type) {
		case json.Delim:
			b.WriteByte(byte(v))
			stack = append(stack, &frame{obj: v == '{', paths: v == '{' && top != nil && top.obj && top.key == "prompts"})
		case string:
			if isPath {
				v = publicPath(v)
			}
			enc(v)
		default:
			enc(v)
		}
	}
	return b.String()
}

// publicPath is a file path from pipeline.yaml as a published card names
// it: relative to pipeline.yaml's directory when it is written so and
// stays inside it (benchmarks/bfcl.jsonl, or a Hub model id such as
// Qwen/Qwen3-8B), a URL (s3://, hf://…) as it is, and anything else — an
// absolute path, one leaving that directory, one from the home directory —
// by its base name: never a path of the machine that made the run.
func publicPath(p string) string {
	switch {
	case p == "" || strings.Contains(p, "://"):
		return p
	case filepath.IsAbs(p) || !filepath.IsLocal(p) || strings.HasPrefix(p, "~"),
		strings.Contains(p, `\`) || len(p) > 1 && p[1] == ':': // Windows paths, wherever the card is made
		return filepath.Base(strings.ReplaceAll(p, `\`, "/"))
	}
	return p
}
