package stages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings, each of one problem
	}{
		{"unknown top-level key", "sorces: []\n", []string{"p.yaml:1: unknown key \"sorces\" in the top level"}},
		{"unknown stage key", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {styel: inline}\n", []string{"p.yaml:3: unknown key \"styel\" in export"}},
		{"duplicate key", "seed: 1\nseed: 2\nsources: [{path: a, format: xlam}]\n", []string{"p.yaml:2", "already"}},
		{"no sources", "stages: []\n", []string{"no sources"}},
		{"bad format and fraction, all reported", "sources:\n  - path: a\n    format: csv\n    fraction: 2\n",
			[]string{"p.yaml:3: source \"a\": format \"csv\"", "p.yaml:4: source \"a\": fraction must be between 0 and 1"}},
		{"two stage types", "sources: [{path: a, format: xlam}]\nstages:\n  - sample: {quotas: [{}]}\n    export: {}\n",
			[]string{"p.yaml:3: stage 1: want exactly one stage type", "got sample and export"}},
		{"duplicate stage names", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {}\n  - export: {}\n",
			[]string{"p.yaml:4: stage 2: name \"export\" is already used"}},
		{"stage validation names the key", "sources: [{path: a, format: xlam}]\nstages:\n  - export: {style: fancy}\n",
			[]string{"p.yaml:3: stage \"export\": style \"fancy\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	p, err := Parse("dir/p.yaml", []byte("sources: [{path: data/toolace.json, format: toolace}]\nstages:\n  - export: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Seed != 1 || p.Output.Dir != "out" || p.Output.ShardSize != 2000 || p.Sources[0].Name != "toolace" ||
		p.Stages[0].Name != "export" || p.Stages[0].Export.Style != "function_call" || p.Teacher.Provider != "offline" {
		t.Errorf("defaults not applied: %+v", p)
	}
	if got := p.Resolve("x.json"); got != filepath.Join("dir", "x.json") {
		t.Errorf("Resolve: %s", got)
	}
	eff, err := p.Effective()
	if err != nil || !strings.Contains(string(eff), "shard_size: 2000") || strings.Contains(string(eff), "sample:") {
		t.Errorf("effective config: %v\n%s", err, eff)
	}
	if _, err := Parse("p.yaml", eff); err != nil {
		t.Errorf("the effective config does not parse again: %v", err)
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
	for _, bad := range []string{"nothing", "sources.9.limit=1", "seed.x=1", "sources.0.limt=1"} {
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
