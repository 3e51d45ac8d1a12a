// Package stages is the pipeline: its config (this file), the runner
// (run.go), and one file per stage type.
//
// The data flow of a run, in order:
//
//	sources ──ingest──► 00-ingest ──stage 1──► 01-<name> ──stage 2──► … ──export──► NN-export (LLaMA-Factory dir)
//
// ingest parses every source with stages/formats into Parquet shards and the
// run's tool library; each following stage reads the previous stage's shards
// and writes its own, shard for shard, with a manifest and rejects.
package stages

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/storage"
)

// Pipeline is a pipeline.yaml file. Zero values mean "default"; Load
// applies the defaults before anything hashes or prints the config.
type Pipeline struct {
	// Seed drives every seeded choice (sampling, variants, negatives); default 1.
	Seed    uint64   `yaml:"seed"`
	Output  Output   `yaml:"output"`
	Sources []Source `yaml:"sources"`
	// Ingest holds the settings of the ingest stage itself (its sources are
	// Sources); left out of the effective config while unset.
	Ingest IngestSpec `yaml:"ingest,omitempty"`
	// Teacher is the chat model used by LLM-backed stages; the default
	// provider "offline" answers with deterministic rule-based stand-ins.
	Teacher  llm.Config         `yaml:"teacher"`
	Embedder llm.EmbedderConfig `yaml:"embedder"`
	Stages   []StageSpec        `yaml:"stages"`
	// Storage says where remote sources are served from, never how to
	// sign in: credentials come from the environment only.
	Storage StorageConfig `yaml:"storage"`

	path  string // the file it was loaded from
	label string // the file as named in messages ("p.yaml (with -set)")
	// noLines: root is the file with -set values applied, whose lines are
	// not the file's, so messages name keys without lines.
	noLines bool
	root    *yaml.Node // the document decoded, for the lines of keys
}

// StorageConfig is the storage block (see package storage).
type StorageConfig struct {
	S3    storage.S3Config    `yaml:"s3"`
	GCS   storage.GCSConfig   `yaml:"gcs"`
	Azure storage.AzureConfig `yaml:"azure"`
}

// Output says where and how stage outputs are written.
type Output struct {
	// Dir is the run directory, relative to pipeline.yaml; default "out".
	// It may be s3://bucket/prefix (or gs://, azblob://): the run then works in WorkDir and keeps
	// the prefix a copy of it (see storage.Mirror).
	Dir string `yaml:"dir"`
	// WorkDir is the local working copy of an output on object storage,
	// relative to pipeline.yaml; default a folder per bucket and prefix in
	// the user's cache directory ($XDG_CACHE_HOME/augment/…).
	WorkDir string `yaml:"work_dir"`
	// ShardSize is the number of records per shard, the unit of resume and
	// of memory use; default 2000.
	ShardSize int `yaml:"shard_size"`
	// RowGroupRows is the Parquet row group size; default 1000.
	RowGroupRows int `yaml:"row_group_rows"`
	// JSONL also writes a .jsonl mirror next to every Parquet shard.
	JSONL bool `yaml:"jsonl"`
	// Compression is the codec of the Parquet shards' pages, one of
	// shard.Compressions; default shard.DefaultCompression (snappy).
	Compression string `yaml:"compression"`
}

// A Source is one raw dump to ingest.
type Source struct {
	// Name identifies the source in record IDs ("<name>:<row>") and shard
	// names; default: the file name without extension.
	Name string `yaml:"name"`
	// Path of the dump (JSON array or JSON Lines), relative to pipeline.yaml.
	Path   string `yaml:"path"`
	Format string `yaml:"format"` // toolace, glaive, xlam, sharegpt, openai
	// Limit keeps only the first Limit rows (0: all).
	Limit int64 `yaml:"limit"`
	// Fraction keeps each row with this probability, seeded by the
	// pipeline seed and the row's ID (0: keep all).
	Fraction float64 `yaml:"fraction"`
	// (issue 8, ingest) MaxRowBytes bounds one row; a longer row is
	// rejected as row_too_large without being held (default 16 MiB).
	MaxRowBytes int64 `yaml:"max_row_bytes"`
	// (issue 8, ingest) AllowPartial lets a run go on when part of the dump
	// cannot be read (the manifest's "unread"); otherwise that fails the
	// run. It does not change ingest's output, so it is not in its key.
	AllowPartial bool `yaml:"allow_partial" json:"-"`
	// License is the dump's license as its publisher declares it: a
	// Hugging Face license id (apache-2.0, cc-by-4.0, …) or an SPDX id,
	// in any case (Apache-2.0, GPL-3.0-or-later), which the card writes as
	// the Hub's id (report.HubLicense); anything else is a config error.
	// A license the Hub does not list is "other", named by LicenseName
	// (required then) and LicenseLink (its text: a URL). Revision names the
	// dump's version (a dataset commit or release). They go into the
	// dataset card of every export and change no output, so no fingerprint
	// has them.
	License     string `yaml:"license" json:"-"`
	LicenseName string `yaml:"license_name,omitempty" json:"-"`
	LicenseLink string `yaml:"license_link,omitempty" json:"-"`
	Revision    string `yaml:"revision" json:"-"`
}

// A StageSpec is one entry of the stages list. Exactly one of the type
// fields is set; Name defaults to the type and must be unique.
type StageSpec struct {
	Name string `yaml:"name"`
	// Skip keeps the stage in the file without running it: its input passes
	// through to the next stage unchanged.
	Skip bool `yaml:"skip"`
	// Keep false writes no Parquet shard for the stage: its records go on
	// in memory to the next stage, which runs in the same pass (see
	// chain.go), and its manifest and rejects are written as usual. It
	// changes no output of any other stage. Refused on the last stage, on
	// an export and before a stage that reads its whole input first
	// (dedup, sample, response_schema; also past an export, which passes
	// its input on): see stageProblems. A worker's or a batch-mode run
	// keeps every stage's shards.
	Keep *bool `yaml:"keep,omitempty"`

	// Stage types, one field each, in the README's order (see types).
	Sample         *SampleConfig         `yaml:"sample,omitempty"`
	Dedup          *DedupConfig          `yaml:"dedup,omitempty"`
	Decontaminate  *DecontaminateConfig  `yaml:"decontaminate,omitempty"`
	MetaTool       *MetaToolConfig       `yaml:"meta_tool,omitempty"`
	Noise          *NoiseConfig          `yaml:"noise,omitempty"`
	Reason         *ReasonConfig         `yaml:"reason,omitempty"`
	DecisionTokens *DecisionTokensConfig `yaml:"decision_tokens,omitempty"`
	Negatives      *NegativesConfig      `yaml:"negatives,omitempty"`
	ResponseSchema *ResponseSchemaConfig `yaml:"response_schema,omitempty"`
	Translate      *TranslateConfig      `yaml:"translate,omitempty"`
	ToolDC         *ToolDCConfig         `yaml:"tool_dc,omitempty"`
	Verify         *VerifyConfig         `yaml:"verify,omitempty"`
	Export         *ExportConfig         `yaml:"export,omitempty"`

	line int
}

// keeps reports whether the stage keeps its Parquet shards (keep, default true).
func (s *StageSpec) keeps() bool { return s.Keep == nil || *s.Keep }

// IngestSpec is the ingest block of pipeline.yaml.
type IngestSpec struct {
	// Keep false writes no Parquet shard for ingest: each shard's records
	// go on in memory, as they are parsed, to the stages of the first
	// group (see runFeed in chain.go); ingest's manifest, rejects
	// and tools-<source>.jsonl are written as usual. Refused when no stage
	// follows, when the first stage reads its whole input before it starts
	// (dedup, sample, response_schema) and when a stage of the first group
	// reads the tool library (meta_tool, tool_dc): see stageProblems. A
	// worker's, a merge's or a batch-mode run keeps ingest's shards.
	Keep *bool `yaml:"keep,omitempty"`
}

// keeps reports whether ingest keeps its Parquet shards (keep, default true).
func (s IngestSpec) keeps() bool { return s.Keep == nil || *s.Keep }

// A stageConfig is the settings block of one stage type.
type stageConfig interface {
	// defaults fills zero fields with their defaults.
	defaults()
	// validate returns what is wrong, one message per problem, naming the field.
	validate() []string
	// build makes the stage. It may load prompts and check the teacher.
	build(env *Env) (Stage, error)
	// version is bumped whenever the stage's output for the same input changes.
	version() int
}

// types lists the stage types, one per field of StageSpec whose type is a
// stage's config, in field order (the README's); the YAML key of each is
// its name. A new stage type is its own file plus its field.
func (s *StageSpec) types() []namedConfig {
	v := reflect.ValueOf(s).Elem()
	out := make([]namedConfig, len(stageFields))
	for i, f := range stageFields {
		out[i] = namedConfig{f.name, v.Field(f.index).Interface().(stageConfig)}
	}
	return out
}

// A stageField is a stage type field of StageSpec: its YAML name and index.
type stageField struct {
	name  string
	index int
}

var stageFields = func() []stageField {
	var fields []stageField
	t, configType := reflect.TypeFor[StageSpec](), reflect.TypeFor[stageConfig]()
	for i := range t.NumField() {
		if f := t.Field(i); f.Type.Implements(configType) {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			fields = append(fields, stageField{name, i})
		}
	}
	return fields
}()

// A libraryReader is a stage config whose stage reads the run's tool
// library (Env.Library, the union of every source's distinct tools). Only
// such a stage gets the library, and only its fingerprint covers the
// library's hash: a dump that adds or drops a tool redoes no other
// stage's shards of the dumps that did not change.
type libraryReader interface{ readsLibrary() }

// readsLibrary reports whether cfg's stage reads the tool library.
func readsLibrary(cfg stageConfig) bool {
	_, ok := cfg.(libraryReader)
	return ok
}

type namedConfig struct {
	name string
	cfg  stageConfig
}

// Type returns the stage's type name and its config.
func (s *StageSpec) config() (string, stageConfig) {
	for _, t := range s.types() {
		if !isNil(t.cfg) {
			return t.name, t.cfg
		}
	}
	return "", nil
}

// StageTypes lists the stage type names.
func StageTypes() []string {
	var s StageSpec
	var names []string
	for _, t := range s.types() {
		names = append(names, t.name)
	}
	return names
}

func isNil(c stageConfig) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// ConfigError lists everything wrong with a pipeline file, each problem
// prefixed with file:line where the line is known.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d problems:\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Load reads, strictly decodes, defaults and validates a pipeline file.
// Unknown keys, duplicate keys and bad values are reported with file:line.
//
// Each of sets ("teacher.model=qwen", "sources.0.limit=100") overrides one
// value of the file before it is decoded: a dotted path of keys and list
// indexes, "=", and a YAML value. A path that does not exist yet is added,
// so a set can also fill in a key the file leaves out; the index one past a
// list's end adds an item ("stages.3.export={format: jsonl}" after three
// stages).
func Load(path string, sets ...string) (*Pipeline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// Missing, a directory, not readable: the invocation's mistake.
		return nil, &ConfigError{Problems: []string{"pipeline file: " + err.Error()}}
	}
	if len(sets) > 0 {
		// Report the file's own mistakes with its own line numbers first.
		if _, err := Parse(path, b); err != nil {
			return nil, err
		}
		if b, err = applySets(b, sets); err != nil {
			return nil, &ConfigError{Problems: []string{err.Error()}}
		}
		// The lines of the document with the sets applied are not the
		// file's: its problems name keys alone.
		label := path + " (with -set)"
		p, err := Parse(label, b)
		var ce *ConfigError
		if errors.As(err, &ce) {
			for i, msg := range ce.Problems {
				if rest, ok := strings.CutPrefix(msg, label+":"); ok {
					if j := strings.Index(rest, ": "); j > 0 && strings.Trim(rest[:j], "0123456789") == "" {
						ce.Problems[i] = label + rest[j:]
					}
				}
			}
		}
		if err != nil {
			return nil, err
		}
		p.path, p.noLines = path, true
		return p, nil
	}
	return Parse(path, b)
}

// applySets returns the document b with the sets applied.
func applySets(b []byte, sets []string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	for _, set := range sets {
		path, value, ok := strings.Cut(set, "=")
		if !ok || path == "" {
			return nil, fmt.Errorf("-set %q: want key.path=value", set)
		}
		var v yaml.Node
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			return nil, fmt.Errorf("-set %q: %w", set, err)
		}
		val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}
		if len(v.Content) > 0 {
			val = v.Content[0]
		}
		if err := setPath(doc.Content[0], strings.Split(path, "."), val); err != nil {
			return nil, fmt.Errorf("-set %q: %w", set, err)
		}
	}
	return yaml.Marshal(&doc)
}

// newPath returns the value a set adds where its path leaves the document:
// val itself, or containers down the rest of the path to it: a list where
// the next key is 0 (a list the file does not have yet, its first item),
// else a mapping.
func newPath(rest []string, val *yaml.Node) (*yaml.Node, error) {
	if len(rest) == 0 {
		return val, nil
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if rest[0] == "0" {
		n = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	}
	return n, setPath(n, rest, val)
}

func setPath(n *yaml.Node, keys []string, val *yaml.Node) error {
	key, rest := keys[0], keys[1:]
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				if len(rest) == 0 {
					n.Content[i+1] = val
					return nil
				}
				return setPath(n.Content[i+1], rest, val)
			}
		}
		child, err := newPath(rest, val)
		if err != nil {
			return err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, child)
		return nil
	case yaml.SequenceNode:
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i > len(n.Content) {
			return fmt.Errorf("%q is not an index of a list of %d (%d adds an item)", key, len(n.Content), len(n.Content))
		}
		if i == len(n.Content) { // one past the end: a new item
			child, err := newPath(rest, val)
			if err != nil {
				return err
			}
			n.Content = append(n.Content, child)
			return nil
		}
		if len(rest) == 0 {
			n.Content[i] = val
			return nil
		}
		return setPath(n.Content[i], rest, val)
	}
	return fmt.Errorf("cannot set %q inside a %s value", key, n.Tag)
}

// Parse decodes a pipeline file already in memory.
func Parse(path string, b []byte) (*Pipeline, error) {
	p := &Pipeline{path: path, label: path}
	// An untyped pass to learn where each key is, for messages.
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil {
		root = yaml.Node{}
	}
	p.root = &root
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(p); errors.Is(err, io.EOF) {
		return nil, &ConfigError{Problems: []string{path + ": the file is empty: a pipeline names its sources and stages"}}
	} else if err != nil {
		return nil, &ConfigError{Problems: decodeProblems(path, b, err, &root)}
	}
	if probs := wholeNumberProblems(path, &root); len(probs) > 0 {
		return nil, &ConfigError{Problems: probs}
	}
	var doc struct {
		Sources []yaml.Node `yaml:"sources"`
		Stages  []yaml.Node `yaml:"stages"`
	}
	_ = root.Decode(&doc)
	// The decoder drops null items of a list of mappings: a bare "-" or a
	// "~" would vanish from the pipeline without a word.
	var empty []string
	for _, list := range []struct {
		key   string
		nodes []yaml.Node
	}{{"sources", doc.Sources}, {"stages", doc.Stages}} {
		for i, n := range list.nodes {
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
				empty = append(empty, fmt.Sprintf("%s:%d: %s[%d]: an empty entry (remove it, or give it a mapping)", path, n.Line, list.key, i))
			}
		}
	}
	if len(empty) > 0 {
		return nil, &ConfigError{Problems: empty}
	}
	stageNodes := make([]*yaml.Node, len(p.Stages))
	for i := range p.Stages {
		if i < len(doc.Stages) {
			p.Stages[i].line = doc.Stages[i].Line
			stageNodes[i] = &doc.Stages[i]
		}
	}
	p.defaults()
	var probs []string
	at := func(line int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if line > 0 {
			probs = append(probs, fmt.Sprintf("%s:%d: %s", path, line, msg))
		} else {
			probs = append(probs, fmt.Sprintf("%s: %s", path, msg))
		}
	}
	if len(p.Sources) == 0 {
		at(0, "no sources: add at least one under \"sources:\"")
	}
	names := map[string]bool{}
	for i, s := range p.Sources {
		var node *yaml.Node
		if i < len(doc.Sources) {
			node = &doc.Sources[i]
		}
		switch {
		case s.Path == "":
			at(keyLine(node, "path"), "source %d: path is required", i+1)
		case storage.IsRemote(s.Path) && parseErr(s.Path) != nil:
			at(keyLine(node, "path"), "source %d: %v", i+1, parseErr(s.Path))
		case !slices.Contains(formats.Formats(), s.Format):
			at(keyLine(node, "format"), "source %q: format %q is not one of %s", s.Name, s.Format, strings.Join(formats.Formats(), ", "))
		}
		if err := CheckName(s.Name); err != nil {
			if hasKey(node, "name") {
				at(keyLine(node, "name"), "source %d: name %s", i+1, err)
			} else {
				at(keyLine(node, "path"), "source %d: name %s (it comes from the file name: set name:)", i+1, err)
			}
		} else if names[s.Name] {
			at(keyLine(node, "name"), "source name %q is used twice; set distinct names", s.Name)
		}
		names[s.Name] = true
		if s.Limit < 0 {
			at(keyLine(node, "limit"), "source %q: limit must be ≥ 0", s.Name)
		}
		if s.Fraction < 0 || s.Fraction > 1 {
			at(keyLine(node, "fraction"), "source %q: fraction must be between 0 and 1", s.Name)
		}
		if s.MaxRowBytes < 0 || s.MaxRowBytes > 1<<30 { // (issue 8, ingest)
			at(keyLine(node, "max_row_bytes"), "source %q: max_row_bytes must be between 0 (default, 16 MiB) and 1 GiB", s.Name)
		}
		for _, msg := range licenseProblems(s) {
			at(keyLine(node, msg.key), "source %q: %s", s.Name, msg.text)
		}
	}
	if _, remote, err := storage.OutputLocation(p.Output.Dir); err != nil {
		at(lineOf(&root, "output.dir"), "output.dir: %v", err)
	} else if !remote && p.Output.WorkDir != "" {
		at(lineOf(&root, "output.work_dir"), "output.work_dir is for an output.dir on object storage (s3://, gs://, azblob://); %s is local", p.Output.Dir)
	}
	for _, msg := range p.Storage.S3.Validate() {
		at(lineOf(&root, "storage.s3.endpoint"), "%s", msg)
	}
	for _, msg := range p.Storage.GCS.Validate() {
		at(lineOf(&root, "storage.gcs.endpoint"), "%s", msg)
	}
	for _, msg := range p.Storage.Azure.Validate() {
		at(lineOf(&root, "storage.azure.endpoint"), "%s", msg)
	}
	if p.Output.ShardSize < 1 {
		at(lineOf(&root, "output.shard_size"), "output.shard_size: must be positive, got %d", p.Output.ShardSize)
	}
	if p.Output.RowGroupRows < 1 {
		at(lineOf(&root, "output.row_group_rows"), "output.row_group_rows: must be positive, got %d", p.Output.RowGroupRows)
	}
	if !slices.Contains(shard.Compressions, p.Output.Compression) {
		at(lineOf(&root, "output.compression"), "output.compression: %q is not one of %s", p.Output.Compression, strings.Join(shard.Compressions, ", "))
	}
	// The llm blocks' problems start with their YAML path ("teacher.max_retries: …").
	for _, err := range append(p.Teacher.Validate(), p.Embedder.Validate()...) {
		field, _, _ := strings.Cut(err.Error(), ":")
		at(lineOf(&root, field), "%v", err)
	}
	stageNames := map[string]bool{"ingest": true}
	for i := range p.Stages {
		s := &p.Stages[i]
		var set []string
		for _, t := range s.types() {
			if !isNil(t.cfg) {
				set = append(set, t.name)
			}
		}
		if len(set) != 1 {
			what := "none"
			if len(set) > 1 {
				what = strings.Join(set, " and ")
			}
			at(s.line, "stage %d: want exactly one stage type (%s), got %s", i+1, strings.Join(StageTypes(), ", "), what)
			continue
		}
		if err := CheckName(s.Name); err != nil {
			at(keyLine(stageNodes[i], "name"), "stage %d: name %s", i+1, err)
			continue
		}
		if stageNames[s.Name] {
			at(s.line, "stage %d: name %q is already used; give the stage a distinct name: key", i+1, s.Name)
		}
		stageNames[s.Name] = true
		_, cfg := s.config()
		for _, msg := range cfg.validate() {
			at(s.line, "stage %q: %s", s.Name, msg)
		}
		if s.Export != nil && s.Export.Dataset != "" {
			if err := CheckName(s.Export.Dataset); err != nil {
				at(s.line, "stage %q: dataset %s", s.Name, err)
			}
		}
		// Source names a stage selects by: a typo would select nothing
		// (a quota filtering every record of the source it meant).
		var refs []string
		if s.Sample != nil {
			for _, q := range s.Sample.Quotas {
				refs = append(refs, q.Source)
			}
		}
		if s.Dedup != nil {
			refs = append(refs, s.Dedup.Prefer...)
		}
		for _, src := range refs {
			if src != "" && !names[src] {
				at(s.line, "stage %q: source %q is not one of the sources (%s)", s.Name, src, strings.Join(slices.Sorted(maps.Keys(names)), ", "))
			}
		}
	}
	if len(probs) > 0 {
		return nil, &ConfigError{Problems: probs}
	}
	return p, nil
}

// MaxNameLen bounds every name that becomes part of a file or directory
// name (a source, a stage, an export's dataset).
const MaxNameLen = 100

// CheckName reports whether name may become part of a file or directory
// name under the output directory: 1 to MaxNameLen ASCII letters, digits,
// '.', '_' or '-', not starting with a dot (so neither "." nor ".." nor a
// hidden file). Every name from pipeline.yaml that ends up in a path is
// checked with it when the file is loaded, and so is any later one (worker
// IDs): a path separator, "..", a drive letter or a control character in
// a shared recipe can then never reach outside the output directory.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("%q is longer than %d bytes", clip.Bytes(name, 40), MaxNameLen)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q holds %q; a name is a plain file name: letters, digits, '.', '_' and '-'", name, c)
		}
	}
	if name[0] == '.' {
		return fmt.Errorf("%q starts with a dot; a name is a plain file name: letters, digits, '.', '_' and '-'", name)
	}
	return nil
}

// A keyProblem is a problem with the value of one key of a mapping.
type keyProblem struct{ key, text string }

// licenseProblems checks a source's license keys: the dataset card writes
// license as the Hub's id (report.HubLicense), so anything the Hub's
// metadata check would refuse is refused here, before the run.
func licenseProblems(s Source) []keyProblem {
	var probs []keyProblem
	id, ok := report.HubLicense(s.License)
	switch {
	case strings.TrimSpace(s.License) == "":
		id = ""
	case !ok:
		probs = append(probs, keyProblem{"license", fmt.Sprintf("license %q is not a license id the Hugging Face Hub lists (apache-2.0, mit, cc-by-4.0, gpl-3.0, …; SPDX ids such as Apache-2.0 are written as the Hub's): use one, or license: other with license_name (and license_link, a URL of its text)", clip.Bytes(s.License, 60))})
	case id == "other" && strings.TrimSpace(s.LicenseName) == "":
		probs = append(probs, keyProblem{"license", "license: other needs license_name, the license's name for the card (and license_link, a URL of its text)"})
	}
	for _, f := range []struct{ key, v string }{{"license_name", s.LicenseName}, {"license_link", s.LicenseLink}} {
		switch {
		case f.v == "":
		case id != "other":
			probs = append(probs, keyProblem{f.key, fmt.Sprintf("%s is for license: other (the license is %q)", f.key, s.License)})
		case strings.ContainsFunc(f.v, unicode.IsControl):
			probs = append(probs, keyProblem{f.key, fmt.Sprintf("%s %q holds a control character (a line break?): want one line", f.key, clip.Bytes(f.v, 60))})
		}
	}
	return probs
}

// hasKey reports whether the mapping node holds key.
func hasKey(node *yaml.Node, key string) bool {
	if node == nil || node.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == key {
			return true
		}
	}
	return false
}

// problem formats one problem of the file, prefixed with file:line of the
// YAML path key ("sources[0].path") where the file has it.
func (p *Pipeline) problem(key, format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	if line := lineOf(p.root, key); line > 0 && !p.noLines {
		return fmt.Sprintf("%s:%d: %s", p.label, line, msg)
	}
	return fmt.Sprintf("%s: %s", p.label, msg)
}

// keyLine returns the line of key in a mapping node, else the node's line.
func keyLine(node *yaml.Node, key string) int {
	if node == nil {
		return 0
	}
	if node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == key {
				return node.Content[i].Line
			}
		}
	}
	return node.Line
}

// decodeProblems is yamlProblems of err, the strict decoder's error on b,
// with the problems a duplicate key hid. The decoder decodes nothing of a
// mapping holding a key twice (a top-level one: the whole file), so of
// such a file it decodes, too, a copy keeping the first of each key and
// lists that copy's problems, at the file's lines, with the duplicates.
func decodeProblems(path string, b []byte, err error, root *yaml.Node) []string {
	var te *yaml.TypeError
	if !errors.As(err, &te) || !slices.ContainsFunc(te.Errors, isDuplicateKey) {
		return yamlProblems(path, err, root, nil)
	}
	var clean yaml.Node
	if yaml.Unmarshal(b, &clean) != nil {
		return yamlProblems(path, err, root, nil)
	}
	// Those the decoder found, and those in the mappings it skipped.
	dups := yamlProblems(path, &yaml.TypeError{Errors: dropDuplicateKeys(&clean)}, root, nil)
	// In block style each key and list item has a line of its own, which
	// maps back to the one it has in b.
	b2, merr := yaml.Marshal(&clean)
	var again yaml.Node
	lines := map[int]int{}
	if merr != nil || yaml.Unmarshal(b2, &again) != nil || !sameLines(&again, &clean, lines) {
		return yamlProblems(path, err, root, nil)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b2))
	dec.KnownFields(true)
	err2 := dec.Decode(new(Pipeline))
	if err2 == nil {
		return dups
	}
	probs := append(dups, yamlProblems(path, err2, &again, lines)...)
	// In the file's order, as the decoder lists what it finds.
	slices.SortStableFunc(probs, func(a, b string) int { return problemLine(path, a) - problemLine(path, b) })
	return probs
}

// isDuplicateKey reports whether a decoder message is about a key written
// twice in one mapping.
func isDuplicateKey(msg string) bool { return strings.Contains(msg, " already defined at line ") }

// problemLine is the line of a problem "path:line: …", 0 when it has none.
func problemLine(path, problem string) int {
	n, _, _ := strings.Cut(strings.TrimPrefix(problem, path+":"), ":")
	line, _ := strconv.Atoi(n)
	return line
}

// dropDuplicateKeys removes from every mapping under n the keys written
// again after their first, with their values, and puts every mapping and
// list in block style, without comments. It returns a message for each
// key removed, as the decoder words it.
func dropDuplicateKeys(n *yaml.Node) []string {
	n.Style &^= yaml.FlowStyle
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	var msgs []string
	if n.Kind == yaml.MappingNode {
		var keys, kept []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if j := slices.IndexFunc(keys, func(o *yaml.Node) bool { return o.Kind == k.Kind && o.Value == k.Value }); j >= 0 {
				msgs = append(msgs, fmt.Sprintf("line %d: mapping key %q already defined at line %d", k.Line, k.Value, keys[j].Line))
				continue
			}
			keys = append(keys, k)
			kept = append(kept, k, n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		msgs = append(msgs, dropDuplicateKeys(c)...)
	}
	return msgs
}

// sameLines fills lines with the line in b of each line of a, for two
// trees of the same shape, and reports whether they have it.
func sameLines(a, b *yaml.Node, lines map[int]int) bool {
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
		return false
	}
	if _, ok := lines[a.Line]; !ok {
		lines[a.Line] = b.Line
	}
	for i := range a.Content {
		if !sameLines(a.Content[i], b.Content[i], lines) {
			return false
		}
	}
	return true
}

// yamlProblems turns yaml.v3's errors ("line 6: field rtae not found in type
// stages.Source") into "pipeline.yaml:6: unknown key sources[0].rtae (did
// you mean rate?)": the key's YAML path, not a Go type. root is the
// document's node tree, or nil when it does not parse; lines, when not
// nil, gives the line to name for each of the decoder's.
func yamlProblems(path string, err error, root *yaml.Node, lines map[int]int) []string {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out []string
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		if rest, ok := strings.CutPrefix(m, "line "); ok {
			if n, msg, ok := strings.Cut(rest, ": "); ok {
				line, _ := strconv.Atoi(n)
				shown, ok := line, true
				if lines != nil {
					shown, ok = lines[line]
				}
				if ok {
					out = append(out, fmt.Sprintf("%s:%d: %s", path, shown, friendlyYAML(msg, root, line)))
				} else {
					out = append(out, fmt.Sprintf("%s: %s", path, friendlyYAML(msg, root, line)))
				}
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s: %s", path, friendlyYAML(m, root, 0)))
	}
	return out
}

func friendlyYAML(msg string, root *yaml.Node, line int) string {
	// "field rtae not found in type stages.Source"
	f, _, ok := strings.Cut(msg, " not found in type ")
	if !ok {
		return friendlyValue(msg, root, line)
	}
	key := strings.TrimPrefix(f, "field ")
	at := findKey(root, line, key)
	if at == "" {
		return fmt.Sprintf("unknown key %q", key)
	}
	parent := strings.TrimSuffix(strings.TrimSuffix(at, key), ".")
	known := yamlKeys(reflect.TypeFor[Pipeline](), parent)
	if near := closest(key, known); len(near) > 0 {
		return fmt.Sprintf("unknown key %s (did you mean %s?)", at, orList(near))
	}
	where := parent
	if where == "" {
		where = "the top level"
	}
	return fmt.Sprintf("unknown key %s (%s takes %s)", at, where, strings.Join(known, ", "))
}

// friendlyValue says a decoder message about a value on line in the
// pipeline's terms: the key's YAML path, what it takes and what it got
// ("seed: want a whole number, got "abc"") instead of Go's types ("cannot
// unmarshal !!str `abc` into uint64"); what and got alone when the key
// cannot be told. Other messages are returned as they are.
func friendlyValue(msg string, root *yaml.Node, line int) string {
	tag, val, into := "", "", ""
	if rest, ok := strings.CutPrefix(msg, "cannot unmarshal "); ok {
		var what string
		what, into, _ = strings.Cut(rest, " into ")
		tag, val, _ = strings.Cut(what, " `")
		val = strings.TrimSuffix(val, "`")
	}
	if into == "" {
		return msg
	}
	path := valueKey(root, line, tag, val, into)
	got := val
	switch tag {
	case "!!str":
		got = strconv.Quote(val) // the decoder cuts a long one short, with "..."
	case "!!seq":
		got = "a list"
	case "!!map":
		got = "a mapping"
	case "!!null":
		got = "nothing"
	}
	if path == "" {
		return fmt.Sprintf("want %s, got %s", wantOf(nil, into), got)
	}
	return fmt.Sprintf("%s: want %s, got %s", path, wantOf(typeAt(reflect.TypeFor[Pipeline](), path), into), got)
}

// valueKey returns the YAML path of the one value (a key's, or a list
// item) that starts on line, has the short tag tag and, for a scalar, the
// text val (which the decoder cuts to its start and "..." when long); ""
// when there is none or several side by side. into is the decoder's name
// of the type it was decoding into ("[]stages.StageSpec"): of values alike
// on one line (a mapping given for the stages list, and the flow mapping
// inside it), the one of that type is meant.
func valueKey(root *yaml.Node, line int, tag, val, into string) string {
	prefix, cut := strings.CutSuffix(val, "...")
	matches := func(v *yaml.Node) bool {
		if v.Line != line || v.ShortTag() != tag {
			return false
		}
		return v.Kind != yaml.ScalarNode || v.Value == val || cut && strings.HasPrefix(v.Value, prefix)
	}
	var found []string
	if line > 0 {
		yamlPairs(root, "", func(p string, _, v *yaml.Node) bool {
			if matches(v) {
				found = append(found, p)
			}
			return true
		})
	}
	if typed := slices.DeleteFunc(slices.Clone(found), func(p string) bool {
		t := typeAt(reflect.TypeFor[Pipeline](), p)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return t == nil || t.String() != into
	}); len(typed) > 0 {
		found = typed
	}
	// A block list starts on its first item's line: the deepest match is
	// the value meant.
	var deepest []string
	for _, p := range found {
		if !slices.ContainsFunc(found, func(q string) bool { return strings.HasPrefix(q, p+".") || strings.HasPrefix(q, p+"[") }) {
			deepest = append(deepest, p)
		}
	}
	if len(deepest) != 1 {
		return ""
	}
	return deepest[0]
}

// typeAt returns the Go type the YAML path of t decodes into (t for ""),
// nil when the path does not lead to a field.
func typeAt(t reflect.Type, path string) reflect.Type {
	for _, seg := range pathSegments(path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if _, err := strconv.Atoi(seg); err == nil && t.Kind() == reflect.Slice {
			t = t.Elem()
			continue
		}
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice { // a path without indexes
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := fieldByKey(t, seg)
		if !ok {
			return nil
		}
		t = f.Type
	}
	return t
}

// wantOf says what a value of type t is in YAML; into is the decoder's
// name of the type ("uint64", "[]stages.Source"), read when t is not known.
func wantOf(t reflect.Type, into string) string {
	if t == reflect.TypeFor[llm.Duration]() || into == "llm.Duration" {
		return `a duration such as "30s" or "2m"`
	}
	kind := reflect.Invalid
	if t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		kind = t.Kind()
	} else {
		switch {
		case strings.HasPrefix(into, "[]"):
			kind = reflect.Slice
		case strings.HasPrefix(into, "map["), strings.Contains(into, "."): // a struct of ours
			kind = reflect.Struct
		case into == "bool":
			kind = reflect.Bool
		case strings.HasPrefix(into, "uint"):
			kind = reflect.Uint
		case strings.HasPrefix(into, "int"):
			kind = reflect.Int
		case strings.HasPrefix(into, "float"):
			kind = reflect.Float64
		case into == "string":
			kind = reflect.String
		}
	}
	switch kind {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping (key: value)"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number ≥ 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	}
	return into
}

// findKey returns the YAML path ("teacher.api_key", "stages[1].export.x")
// of the mapping key named key on line, or "".
func findKey(root *yaml.Node, line int, key string) string {
	at := ""
	yamlPairs(root, "", func(p string, k, _ *yaml.Node) bool {
		if k != nil && k.Line == line && k.Value == key {
			at = p
		}
		return at == ""
	})
	return at
}

// wholeNumberProblems names the values of whole-number settings written as
// other numbers (1.5, 1e3, 18446744073709551616): the decoder takes them,
// cutting off the fraction or wrapping what overflows.
func wholeNumberProblems(path string, root *yaml.Node) []string {
	var probs []string
	unmarshaler := reflect.TypeFor[yaml.Unmarshaler]()
	yamlPairs(root, "", func(p string, _, v *yaml.Node) bool {
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!float" {
			return true
		}
		t := typeAt(reflect.TypeFor[Pipeline](), p)
		if t == nil || reflect.PointerTo(t).Implements(unmarshaler) {
			return true
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			probs = append(probs, fmt.Sprintf("%s:%d: %s: want %s, got %s", path, v.Line, p, wantOf(t, ""), v.Value))
		}
		return true
	})
	return probs
}

// yamlPairs calls fn with the YAML path, key and value of every mapping
// pair under n, and with the path and item (and a nil key) of every list
// item, in document order, until fn returns false; it reports whether fn
// never did.
func yamlPairs(n *yaml.Node, prefix string, fn func(path string, k, v *yaml.Node) bool) bool {
	if n == nil {
		return true
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if !yamlPairs(c, prefix, fn) {
				return false
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if prefix != "" {
				p = prefix + "." + k.Value
			}
			if !fn(p, k, v) || !yamlPairs(v, p, fn) {
				return false
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			if !fn(p, nil, c) || !yamlPairs(c, p, fn) {
				return false
			}
		}
	}
	return true
}

// lineOf returns the line of the deepest node of a YAML path
// ("teacher.endpoints[0].base_url") that exists in root, 0 when none does.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, seg := range pathSegments(path) {
		if n == nil {
			break
		}
		var next *yaml.Node
		if i, err := strconv.Atoi(seg); err == nil && n.Kind == yaml.SequenceNode {
			if i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		} else if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == seg {
					next = n.Content[j+1]
					line = n.Content[j].Line
					break
				}
			}
		}
		n = next
	}
	return line
}

// pathSegments splits "a.b[2].c" into a, b, 2, c.
func pathSegments(path string) []string {
	var segs []string
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			segs = append(segs, name)
		}
		for rest != "" {
			var idx string
			idx, rest, _ = strings.Cut(rest, "]")
			segs = append(segs, idx)
			rest = strings.TrimPrefix(rest, "[")
		}
	}
	return segs
}

// yamlKeys lists the keys a YAML path of t takes (indexes skipped), in
// declaration order; nil when the path does not lead to a mapping.
func yamlKeys(t reflect.Type, path string) []string {
	if t = typeAt(t, path); t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for k := range yamlFields(t) {
		keys = append(keys, k)
	}
	return keys
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for k, f := range yamlFields(t) {
		if k == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlFields yields the fields of struct t by their YAML keys, in
// declaration order, as the decoder reads them: the fields of a struct
// inlined with `yaml:",inline"` (TranslateConfig's translate.Config) in its
// place, never the inlined field itself.
func yamlFields(t reflect.Type) iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) {
		for f := range t.Fields() {
			k, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			inline := slices.Contains(strings.Split(opts, ","), "inline")
			if !f.IsExported() && !(f.Anonymous && inline) { // as the decoder: an embedded struct may be unexported
				continue
			}
			if it := f.Type; inline {
				if it.Kind() == reflect.Pointer {
					it = it.Elem()
				}
				if it.Kind() != reflect.Struct {
					continue // an inline map takes any key
				}
				for k, f := range yamlFields(it) {
					if !yield(k, f) {
						return
					}
				}
				continue
			}
			if k == "-" {
				continue
			}
			if k == "" {
				k = strings.ToLower(f.Name)
			}
			if !yield(k, f) {
				return
			}
		}
	}
}

// closest returns the known keys a mistyped key most likely meant, in
// known's order: of the keys one a prefix of the other (api_key,
// api_key_env), else of those within a small edit distance, the nearest
// (a swap of two neighbours counts as one edit), all of them when several
// are as near (modl: model or mode); nil when none is near.
func closest(key string, known []string) []string {
	limit := 3 // candidates are nearer than this
	if len(key) <= 3 {
		limit = 2
	}
	var prefixed []string
	for _, k := range known {
		if len(key) >= 3 && (strings.HasPrefix(k, key) || strings.HasPrefix(key, k)) {
			prefixed = append(prefixed, k)
		}
	}
	if len(prefixed) > 0 {
		known, limit = prefixed, math.MaxInt
	}
	var best []string
	for _, k := range known {
		switch d := editDistance(key, k); {
		case d < limit:
			best, limit = []string{k}, d
		case d == limit && best != nil:
			best = append(best, k)
		}
	}
	return best
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// editDistance is the optimal string alignment distance of two short
// strings, in bytes: insertions, deletions, substitutions and swaps of two
// neighbours (modle, model) each count one.
func editDistance(a, b string) int {
	// d[i][j] is the distance of a[:i] and b[:j]; three rows are kept.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func (p *Pipeline) defaults() {
	if p.Seed == 0 {
		p.Seed = 1
	}
	if p.Output.Dir == "" {
		p.Output.Dir = "out"
	}
	if p.Output.ShardSize == 0 {
		p.Output.ShardSize = 2000
	}
	if p.Output.RowGroupRows == 0 {
		p.Output.RowGroupRows = 1000
	}
	if p.Output.Compression == "" {
		p.Output.Compression = shard.DefaultCompression
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		if s.Name == "" {
			s.Name = defaultSourceName(s.Path)
		}
		if s.MaxRowBytes == 0 { // (issue 8, ingest)
			s.MaxRowBytes = formats.DefaultMaxRowBytes
		}
	}
	p.Teacher.Defaults()
	p.Embedder.Defaults()
	var decision *DecisionTokensConfig // the last decision_tokens stage that runs so far
	for i := range p.Stages {
		s := &p.Stages[i]
		name, cfg := s.config()
		if cfg == nil {
			continue
		}
		if s.Name == "" {
			s.Name = name
		}
		cfg.defaults()
		switch {
		case s.Skip:
		case s.DecisionTokens != nil:
			decision = s.DecisionTokens
		case s.Export != nil:
			s.Export.decision = decision
		}
	}
}

// Dir is the directory of the pipeline file; relative paths resolve against it.
func (p *Pipeline) Dir() string { return filepath.Dir(p.path) }

// Path is the pipeline file.
func (p *Pipeline) Path() string { return p.path }

// Resolve makes a config path absolute against the pipeline file's
// directory; a URL (s3://, hf://) is returned as it is.
func (p *Pipeline) Resolve(path string) string {
	if path == "" || filepath.IsAbs(path) || storage.IsRemote(path) {
		return path
	}
	return filepath.Join(p.Dir(), path)
}

// Effective renders the pipeline with every default applied: what the run
// really uses, written to <output>/config.yaml. Credentials a base_url may
// hold (user info, query values) are redacted.
func (p *Pipeline) Effective() ([]byte, error) {
	q := *p
	q.Teacher.Endpoints = redactEndpoints(p.Teacher.Endpoints)
	q.Embedder.Endpoints = redactEndpoints(p.Embedder.Endpoints)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&q); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func redactEndpoints(eps []llm.Endpoint) []llm.Endpoint {
	if eps == nil {
		return nil
	}
	out := slices.Clone(eps)
	for i := range out {
		out[i].BaseURL = llm.RedactURL(out[i].BaseURL)
	}
	return out
}
