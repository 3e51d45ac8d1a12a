package stages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings, each of one problem
	}{
		{"unknown top-level key", "sorces: []\n", []string{"p.yaml:1: unknown key sorces (did you mean sources?)"}},
		{"unknown stage key", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {styel: inline}\n", []string{"p.yaml:3: unknown key stages[0].export.styel (did you mean style?)"}},
		{"unknown teacher key names its YAML path", "sources: [{path: a, format: xlam}]\nteacher:\n  provider: offline\n  api_key: sk-123\n",
			[]string{"p.yaml:4: unknown key teacher.api_key (did you mean api_key_env?)"}},
		{"unknown key far from any", "sources:\n  - {path: a, format: xlam, zzzz: 1}\n",
			[]string{"p.yaml:2: unknown key sources[0].zzzz (sources[0] takes name, path, format, limit, fraction"}},
		{"a license the Hub does not list", "sources:\n  - path: a\n    format: xlam\n    license: Apache 2\n",
			[]string{`p.yaml:4: source "a": license "Apache 2" is not a license id the Hugging Face Hub lists`}},
		{"license other without its name", "sources:\n  - {path: a, format: xlam, license: other}\n",
			[]string{`p.yaml:2: source "a": license: other needs license_name`}},
		{"license_name of a listed license", "sources:\n  - path: a\n    format: xlam\n    license: MIT\n    license_link: https://x\n",
			[]string{`p.yaml:5: source "a": license_link is for license: other (the license is "MIT")`}},
		{"a license_name on two lines", "sources:\n  - path: a\n    format: xlam\n    license: other\n    license_name: \"a\\nb\"\n",
			[]string{`p.yaml:5: source "a": license_name "a\nb" holds a control character`}},
		{"shard_size has its line", "sources: [{path: a, format: xlam}]\noutput:\n  dir: o\n  shard_size: -5\n",
			[]string{"p.yaml:4: output.shard_size: must be positive, got -5"}},
		{"unknown compression has its line", "sources: [{path: a, format: xlam}]\noutput:\n  dir: o\n  compression: lz4\n",
			[]string{`p.yaml:4: output.compression: "lz4" is not one of snappy, zstd, none`}},
		{"negative max_retries", "sources: [{path: a, format: xlam}]\nteacher:\n  max_retries: -1\nembedder:\n  max_retries: -2\n",
			[]string{"p.yaml:3: teacher.max_retries: must not be negative", "p.yaml:5: embedder.max_retries: must not be negative"}},
		{"api_key_env holding a key", "sources: [{path: a, format: xlam}]\nteacher:\n  provider: offline\n  api_key_env: sk-proj-abc123\n",
			[]string{"p.yaml:4: teacher.api_key_env: must name an environment variable"}},
		{"a teacher problem has the line of its key", "sources: [{path: a, format: xlam}]\nteacher:\n  provider: openai\n  model: m\n  endpoints:\n    - base_url: 'ftp://u:secret@x/v1?key=k'\n",
			[]string{"p.yaml:6: teacher.endpoints[0].base_url:", "REDACTED"}},
		{"duplicate key", "seed: 1\nseed: 2\nsources: [{path: a, format: xlam}]\n", []string{"p.yaml:2", "already"}},
		{"no sources", "stages: []\n", []string{"no sources"}},
		{"bad format and fraction, all reported", "sources:\n  - path: a\n    format: csv\n    fraction: 2\n",
			[]string{"p.yaml:3: source \"a\": format \"csv\"", "p.yaml:4: source \"a\": fraction must be between 0 and 1"}},
		{"two stage types", "sources: [{path: a, format: xlam}]\nstages:\n  - sample: {quotas: [{}]}\n    export: {}\n",
			[]string{"p.yaml:3: stage 1: want exactly one stage type", "got sample and export"}},
		{"duplicate stage names", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {}\n  - export: {}\n",
			[]string{"p.yaml:4: stage 2: name \"export\" is already used"}},
		{"source name escaping the output dir", "output: {dir: o}\nsources:\n  - {name: \"../../../../tmp/escaped\", path: x.json, format: xlam}\n",
			[]string{"p.yaml:3: source 1: name \"../../../../tmp/escaped\" holds '/'"}},
		{"source name from a hidden file", "sources:\n  - path: dir/.x.json\n    format: xlam\n",
			[]string{"p.yaml:2: source 1: name \".x\" starts with a dot", "set name:"}},
		{"stage name with a slash", "sources: [{path: a, format: xlam}]\nstages:\n  - name: ../../pwn\n    export: {}\n",
			[]string{"p.yaml:3: stage 1: name \"../../pwn\" holds '/'"}},
		{"stage name ..", "sources: [{path: a, format: xlam}]\nstages:\n  - {name: .., sample: {}}\n",
			[]string{"p.yaml:3: stage 1: name \"..\" starts with a dot"}},
		{"export dataset with a backslash", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {dataset: 'a\\b'}\n",
			[]string{"p.yaml:3: stage \"export\": dataset \"a\\\\b\" holds '\\\\'"}},
		{"stage validation names the key", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {style: fancy}\n",
			[]string{"p.yaml:3: stage \"export\": style \"fancy\""}},
		// A value of the wrong kind: its key, what it takes, what it got,
		// in the pipeline's words rather than Go's types.
		{"text for a number", "seed: abc\nsources: [{path: a, format: xlam}]\n", []string{`p.yaml:1: seed: want a whole number ≥ 0, got "abc"`}},
		{"an empty file", "", []string{`p.yaml: the file is empty: a pipeline names its sources and stages`}},
		{"only a comment", "# nothing yet\n", []string{`p.yaml: the file is empty: a pipeline names its sources and stages`}},
		{"a quota for a source that is not there", "sources: [{name: lf, path: a, format: xlam}]\nstages:\n  - sample: {quotas: [{source: lff, n: 2}]}\n", []string{`p.yaml:3: stage "sample": source "lff" is not one of the sources (lf)`}},
		{"dedup preferring a source that is not there", "sources: [{name: lf, path: a, format: xlam}]\nstages:\n  - dedup: {prefer: [lf, tace]}\n", []string{`p.yaml:3: stage "dedup": source "tace" is not one of the sources (lf)`}},
		// The decoder drops null list items.
		{"an empty stage entry", "sources: [{path: a, format: xlam}]\nstages:\n  -\n  - export: {}\n", []string{`p.yaml:3: stages[0]: an empty entry (remove it, or give it a mapping)`}},
		{"a null source", "sources: [~, {path: a, format: xlam}]\n", []string{`p.yaml:1: sources[0]: an empty entry (remove it, or give it a mapping)`}},
		// The decoder cut the fraction off (1.5 → 1) and wrapped 2^64.
		{"a fraction for a whole number", "seed: 1.5\nsources: [{path: a, format: xlam}]\n", []string{`p.yaml:1: seed: want a whole number ≥ 0, got 1.5`}},
		{"a whole number beyond range", "seed: 18446744073709551616\nsources: [{path: a, format: xlam}]\n", []string{`p.yaml:1: seed: want a whole number ≥ 0, got 18446744073709551616`}},
		{"a float for a count in a stage", "sources: [{path: a, format: xlam}]\nstages:\n  - sample: {quotas: [{source: a, n: 1e3}]}\n", []string{`p.yaml:3: stages[0].sample.quotas[0].n: want a whole number, got 1e3`}},
		{"a negative number for an unsigned one", "seed: -1\nsources: [{path: a, format: xlam}]\n", []string{`p.yaml:1: seed: want a whole number ≥ 0, got -1`}},
		{"a long value cut short", "seed: averyveryverylongvalue\nsources: [{path: a, format: xlam}]\n", []string{`p.yaml:1: seed: want a whole number ≥ 0, got "averyve..."`}},
		{"a list for a number, in a list", "sources: [{path: a, format: xlam}]\nstages:\n  - sample:\n      quotas:\n        - n: [1]\n",
			[]string{"p.yaml:5: stages[0].sample.quotas[0].n: want a whole number, got a list"}},
		{"a number for a list", "sources: 3\n", []string{"p.yaml:1: sources: want a list, got 3"}},
		{"text for a list item", "sources:\n  - x\n", []string{`p.yaml:2: sources[0]: want a mapping (key: value), got "x"`}},
		{"a word for a bool", "sources: [{path: a, format: xlam}]\noutput:\n  jsonl: maybe\n", []string{`p.yaml:3: output.jsonl: want true or false, got "maybe"`}},
		{"text for a float", "sources: [{path: a, format: xlam}]\nteacher:\n  temperature: hot\n", []string{`p.yaml:3: teacher.temperature: want a number, got "hot"`}},
		{"a bad duration, in a flow mapping", "sources: [{path: a, format: xlam}]\nteacher: {provider: offline, timeout: 5}\n",
			[]string{`p.yaml:2: teacher.timeout: want a duration such as "30s" or "2m", got 5`}},
		{"a list for a duration", "sources: [{path: a, format: xlam}]\nteacher:\n  batch:\n    poll_interval: [1]\n",
			[]string{`p.yaml:4: teacher.batch.poll_interval: want a duration such as "30s" or "2m", got a list`}},
		{"two bad values on one line", "sources: [{path: a, format: xlam, limit: x, fraction: y}]\n",
			[]string{`p.yaml:1: sources[0].limit: want a whole number, got "x"`, `p.yaml:1: sources[0].fraction: want a number, got "y"`}},
		// translate's keys are translate.Config's, inlined.
		{"a typo inside translate", "sources: [{path: a, format: xlam}]\nstages:\n  - translate: {mod: convert}\n",
			[]string{"p.yaml:3: unknown key stages[0].translate.mod (did you mean mode?)"}},
		{"a key translate does not take", "sources: [{path: a, format: xlam}]\nstages:\n  - translate: {mode: convert, config: {}}\n",
			[]string{"p.yaml:3: unknown key stages[0].translate.config (stages[0].translate takes mode, ratio, count, attempts, prompt, keep, non_chinese, equiv_prompt)"}},
		{"a fraction for translate's count", "sources: [{path: a, format: xlam}]\nstages:\n  - translate: {mode: convert, count: 1.5}\n",
			[]string{"p.yaml:3: stages[0].translate.count: want a whole number, got 1.5"}},
		// A mapping where the stages list goes: the list's type is said,
		// not the type of the flow mapping on the same line.
		{"a stage without its dash", "sources: [{path: a, format: xlam}]\nstages:\n  reason: {style: meta_tool}\n",
			[]string{"p.yaml:3: stages: want a list, got a mapping"}},
		{"an empty stage without its dash", "sources: [{path: a, format: xlam}]\nstages:\n  export: {}\n",
			[]string{"p.yaml:3: stages: want a list, got a mapping"}},
		{"a source without its dash", "sources:\n  x: {path: a, format: xlam}\n",
			[]string{"p.yaml:2: sources: want a list, got a mapping"}},
		// Keys as near as each other are all named: a swap is one edit.
		{"a swap as near as a deletion", "sources: [{path: a, format: xlam}]\nteacher: {modle: x}\n",
			[]string{"p.yaml:2: unknown key teacher.modle (did you mean model or mode?)"}},
		// A key written twice hides nothing else.
		{"a duplicate top-level key and other problems", "seed: 1\nseed: 2\noutput: {dir: o, dir: p}\nteacher: {modle: x}\nsources:\n  - {path: a, format: xlam, limit: x}\nstages:\n  - expor: {}\n",
			[]string{"5 problems:\n  p.yaml:2: mapping key \"seed\" already defined at line 1\n  p.yaml:3: mapping key \"dir\" already defined at line 3\n" +
				"  p.yaml:4: unknown key teacher.modle (did you mean model or mode?)\n  p.yaml:6: sources[0].limit: want a whole number, got \"x\"\n" +
				"  p.yaml:8: unknown key stages[0].expor (did you mean export?)"}},
		{"a duplicate key after a value like it", "x: a\na: 1\na: 2\nsources: [{path: a, format: xlam}]\n",
			[]string{"p.yaml:1: unknown key x", "p.yaml:3: mapping key \"a\" already defined at line 2", "p.yaml:2: unknown key a"}},
		{"a duplicate key in a list item and a value of the wrong kind below", "sources:\n  - path: a\n    path: b\n    format: xlam\nteacher:\n  timeout: [1]\n",
			[]string{"p.yaml:3: mapping key \"path\" already defined at line 2", `p.yaml:6: teacher.timeout: want a duration such as "30s" or "2m", got a list`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, secret := range []string{"sk-", "secret", "key=k"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q repeats a secret", err)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "toolace", "mt_llama", "glaive-v2", "x.json", "A.B-c_9", strings.Repeat("n", MaxNameLen)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "a/b", `a\b`, "../x", "a b", "C:x", "a\x00b", "naïve", "a\nb",
		strings.Repeat("n", MaxNameLen+1)} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q): no error", bad)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	p, err := Parse("dir/p.yaml", []byte("sources: [{path: data/toolace.json, format: toolace}]\nstages:\n  - export: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Seed != 1 || p.Output.Dir != "out" || p.Output.ShardSize != 2000 || p.Sources[0].Name != "toolace" ||
		p.Stages[0].Name != "export" || p.Stages[0].Export.Style != "function_call" || p.Teacher.Provider != "offline" || p.Output.Compression != "snappy" {
		t.Errorf("defaults not applied: %+v", p)
	}
	if got := p.Resolve("x.json"); got != filepath.Join("dir", "x.json") {
		t.Errorf("Resolve: %s", got)
	}
	eff, err := p.Effective()
	if err != nil || !strings.Contains(string(eff), "shard_size: 2000") || !strings.Contains(string(eff), "compression: snappy") || strings.Contains(string(eff), "sample:") {
		t.Errorf("effective config: %v\n%s", err, eff)
	}
	if _, err := Parse("p.yaml", eff); err != nil {
		t.Errorf("the effective config does not parse again: %v", err)
	}
}

// The effective config written to the output dir holds no credential a
// base_url carried.
func TestEffectiveRedactsURLs(t *testing.T) {
	p, err := Parse("p.yaml", []byte("sources: [{path: a, format: xlam}]\nteacher:\n  provider: openai\n  model: m\n"+
		"  endpoints: [{base_url: 'https://bob:hunter2@gpu1:8000/v1'}]\n"+
		"embedder: {provider: openai, model: e, endpoints: [{base_url: 'http://tok3n@e:1/v1'}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	eff, err := p.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"bob", "hunter2", "tok3n"} {
		if strings.Contains(string(eff), secret) {
			t.Errorf("config.yaml holds %q:\n%s", secret, eff)
		}
	}
	if !strings.Contains(string(eff), "https://REDACTED@gpu1:8000/v1") {
		t.Errorf("endpoint not kept, redacted:\n%s", eff)
	}
	if p.Teacher.Endpoints[0].BaseURL != "https://bob:hunter2@gpu1:8000/v1" {
		t.Errorf("the run's own config was changed: %s", p.Teacher.Endpoints[0].BaseURL)
	}
}

func TestLoadSets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(path, []byte("sources:\n  - {name: a, path: a.json, format: xlam}\nstages:\n  - export: {}\n"), 0o644)
	p, err := Load(path, "sources.0.limit=5", "teacher.model=m", "stages.0.export.style=inline", "output.jsonl=true")
	if err != nil {
		t.Fatal(err)
	}
	if p.Sources[0].Limit != 5 || p.Teacher.Model != "m" || p.Stages[0].Export.Style != "inline" || !p.Output.JSONL {
		t.Errorf("sets not applied: %+v", p)
	}
	if p.Path() != path {
		t.Errorf("path %q: relative paths must still resolve against the file", p.Path())
	}
	// The index one past a list's end adds an item.
	p, err = Load(path, "stages.1.export={format: jsonl}", "stages.1.name=lines", "sources.1.path=b.json", "sources.1.format=glaive")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stages) != 2 || p.Stages[1].Name != "lines" || p.Stages[1].Export == nil || p.Stages[1].Export.Format != "jsonl" ||
		len(p.Sources) != 2 || p.Sources[1].Format != "glaive" {
		t.Errorf("items not added: %+v %+v", p.Stages, p.Sources)
	}
	// A list the file does not have yet: index 0 makes it (it became a
	// mapping, and the error blamed the value).
	p, err = Load(path, `teacher.endpoints.0={base_url: "http://127.0.0.1:1/v1"}`, "teacher.endpoints.1.base_url=http://127.0.0.1:2/v1", "teacher.provider=openai", "teacher.model=m")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Teacher.Endpoints) != 2 || p.Teacher.Endpoints[0].BaseURL != "http://127.0.0.1:1/v1" || p.Teacher.Endpoints[1].BaseURL != "http://127.0.0.1:2/v1" {
		t.Errorf("endpoints not made: %+v", p.Teacher.Endpoints)
	}
	for _, bad := range []string{"nothing", "sources.9.limit=1", "teacher.endpoints.1.base_url=x", "sources.2.limit=1", "sources.-1.limit=1", "seed.x=1", "sources.0.limt=1"} {
		if _, err := Load(path, bad); err == nil {
			t.Errorf("-set %s: no error", bad)
		}
	}
}

// FuzzParse: any file either parses into a valid pipeline or gives a
// ConfigError; never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("sources: [{path: a, format: xlam}]\nstages:\n  - export: {}\n"))
	f.Add([]byte("seed: 3\noutput: {dir: o, shard_size: 10}\nsources:\n  - {name: t, path: t.json, format: toolace, limit: 2}\nstages:\n  - sample: {quotas: [{source: t, n: 1}]}\n  - meta_tool: {}\n"))
	f.Add([]byte("teacher: {provider: openai, model: m, endpoints: [{base_url: 'http://x/v1'}]}\n"))
	f.Add([]byte("seed: abc\nsources: {a: 1}\nteacher: {timeout: [1], batch: {poll_interval: x}}\n"))
	f.Add([]byte("seed: 1\nseed: 2\noutput: {dir: o, dir: p}\nsources:\n  - &s {path: a, format: xlam, limit: x}\n  - *s\nstages:\n  - expor: {} # c\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse("fuzz.yaml", b)
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if len(p.Sources) == 0 {
			t.Fatal("a pipeline without sources parsed")
		}
		if _, err := p.Effective(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzApplySets: any -set on any document is applied or refused with an
// error; never a panic.
func FuzzApplySets(f *testing.F) {
	f.Add([]byte("sources:\n  - {path: a, format: xlam}\n"), "sources.0.limit=3")
	f.Add([]byte(""), "teacher.model=m")
	f.Add([]byte("a: [1, 2]\n"), "a.1.b=[x]")
	f.Fuzz(func(t *testing.T, doc []byte, set string) {
		applySets(doc, []string{set})
	})
}

// FuzzNames: a source, stage or dataset name passes the loader only when
// it is a plain name that stays a single path element inside the output
// directory; a plain name always passes.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"a", "../../x", "..", ".", "a/b", `a\b`, "toolace", ".x", "a\x00", "名前", "a..b", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return // an empty name means the default one
		}
		q, _ := json.Marshal(name) // a JSON string is a YAML double-quoted scalar
		for _, doc := range []string{
			"sources:\n  - {name: " + string(q) + ", path: a.json, format: xlam}\n",
			"sources: [{path: a.json, format: xlam}]\nstages:\n  - {name: " + string(q) + ", response_schema: {}}\n",
			"sources: [{path: a.json, format: xlam}]\nstages:\n  - export: {dataset: " + string(q) + "}\n",
		} {
			_, err := Parse("fuzz.yaml", []byte(doc))
			plain := CheckName(name) == nil
			if !plain && !utf8.ValidString(name) {
				continue // YAML replaces invalid UTF-8: the loaded name differs
			}
			if plain != (err == nil) && !(name == "ingest" && strings.Contains(doc, "response_schema")) {
				t.Fatalf("name %q: plain=%v but Parse: %v\n%s", name, plain, err, doc)
			}
			if err == nil {
				for _, p := range [][2]string{
					{filepath.Join("out", "00-ingest"), "part-" + name + "-00000.parquet"},
					{"out", "01-" + name},
					{filepath.Join("out", "01-export"), name},
				} {
					if full := filepath.Join(p[0], p[1]); filepath.Dir(full) != p[0] {
						t.Fatalf("name %q makes path %q, not a file of %s", name, full, p[0])
					}
				}
				if filepath.Base(name) != name || !filepath.IsLocal(name) {
					t.Fatalf("name %q accepted but is not one local path element", name)
				}
			}
		}
	})
}

// The stage types are StageSpec's config fields, in the order the README's
// Stages section documents them (its "**name** —" paragraphs).
func TestStageTypesFollowTheREADME(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n### Stages\n")
	section, _, _ = strings.Cut(section, "\n### ")
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		if name, ok := strings.CutPrefix(line, "**"); ok {
			if name, _, ok = strings.Cut(name, "** — "); ok {
				documented = append(documented, name)
			}
		}
	}
	if got := StageTypes(); strings.Join(got, " ") != strings.Join(documented, " ") {
		t.Errorf("stage types %q, the README documents %q", got, documented)
	}
	var s StageSpec
	for _, c := range s.types() {
		if !isNil(c.cfg) {
			t.Errorf("%s: a zero StageSpec has this type set", c.name)
		}
	}
}

func TestClosest(t *testing.T) {
	teacher := yamlKeys(reflect.TypeFor[Pipeline](), "teacher")
	tests := []struct {
		key   string
		known []string
		want  []string
	}{
		{"modle", teacher, []string{"model", "mode"}}, // a swap and a deletion, one edit each
		{"modl", teacher, []string{"model", "mode"}},
		{"mod", teacher, []string{"mode"}}, // a prefix of both, nearer mode
		{"modelx", teacher, []string{"model"}},
		{"api_key", teacher, []string{"api_key_env"}},
		{"sorces", yamlKeys(reflect.TypeFor[Pipeline](), ""), []string{"sources"}},
		{"ratoi", yamlKeys(reflect.TypeFor[Pipeline](), "stages[0].translate"), []string{"ratio"}},
		{"zzzz", teacher, nil},
		{"ab", []string{"ba", "abc", "xy"}, []string{"ba", "abc"}},
	}
	for _, tt := range tests {
		if got := closest(tt.key, tt.known); !slices.Equal(got, tt.want) {
			t.Errorf("closest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"model", "model", 0},
		{"modle", "model", 1}, {"modle", "mode", 1}, {"ab", "ba", 1}, {"abc", "ca", 3},
		{"kitten", "sitting", 3}, {"ratoi", "ratio", 1},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := editDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}

// TestYAMLKeysInline: the keys of a struct inlined with `yaml:",inline"`
// are its parent's, as the decoder reads them.
func TestYAMLKeysInline(t *testing.T) {
	pipeline := reflect.TypeFor[Pipeline]()
	tests := []struct {
		path string
		want []string
	}{
		{"stages[0].translate", []string{"mode", "ratio", "count", "attempts", "prompt", "keep", "non_chinese", "equiv_prompt"}},
		{"stages.translate", []string{"mode", "ratio", "count", "attempts", "prompt", "keep", "non_chinese", "equiv_prompt"}},
		{"output", []string{"dir", "work_dir", "shard_size", "row_group_rows", "jsonl", "compression"}},
		{"seed", nil},
	}
	for _, tt := range tests {
		if got := yamlKeys(pipeline, tt.path); !slices.Equal(got, tt.want) {
			t.Errorf("yamlKeys(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	if got, want := typeAt(pipeline, "stages[0].translate.count"), reflect.TypeFor[int](); got != want {
		t.Errorf("typeAt(stages[0].translate.count) = %v, want %v", got, want)
	}
	type inner struct {
		B int `yaml:"b"`
	}
	type outer struct {
		A      int `yaml:"a"`
		*inner `yaml:",inline"`
		Rest   map[string]any `yaml:",inline"`
		Skip   int            `yaml:"-"`
		Plain  int
	}
	if got, want := yamlKeys(reflect.TypeFor[outer](), ""), []string{"a", "b", "plain"}; !slices.Equal(got, want) {
		t.Errorf("yamlKeys(outer) = %q, want %q", got, want)
	}
}
