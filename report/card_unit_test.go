package report

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestHubLicense(t *testing.T) {
	tests := []struct {
		declared, want string
		ok             bool
	}{
		{"apache-2.0", "apache-2.0", true},
		{"Apache-2.0", "apache-2.0", true},
		{" MIT ", "mit", true},
		{"CC-BY-4.0", "cc-by-4.0", true},
		{"CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0", true},
		{"CC0-1.0", "cc0-1.0", true},
		{"GPL-3.0-or-later", "gpl-3.0", true},
		{"GPL-3.0-only", "gpl-3.0", true},
		{"GPL-2.0+", "gpl-2.0", true},
		{"LGPL-2.1-or-later", "lgpl-2.1", true},
		{"LGPL-2.0-only", "lgpl", true},
		{"AGPL-3.0-or-later", "agpl-3.0", true},
		{"GFDL-1.3-or-later", "gfdl", true},
		{"ODbL-1.0", "odbl", true},
		{"ODC-By-1.0", "odc-by", true},
		{"BSD-3-Clause", "bsd-3-clause", true},
		{"llama3.1", "llama3.1", true},
		{"other", "other", true},
		{"unknown", "unknown", true},
		{"", "", false},
		{"Apache 2.0", "", false},
		{"apache2", "", false},
		{"-only", "", false},
		{"apache-2.0-only-or-later", "", false},
		{"cc-by-4.0\n| x", "", false},
		{"MIT OR Apache-2.0", "", false}, // an SPDX expression: declare the one the dump is used under
	}
	for _, tt := range tests {
		got, ok := HubLicense(tt.declared)
		if got != tt.want || ok != tt.ok {
			t.Errorf("HubLicense(%q) = %q, %v; want %q, %v", tt.declared, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzHubLicense(f *testing.F) {
	for _, s := range []string{"Apache-2.0", "GPL-3.0-or-later", "GPL-2.0+", "gfdl-1.2-only", "x+", "-or-later+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := HubLicense(s)
		if ok != slices.Contains(hubLicenses, id) {
			t.Fatalf("HubLicense(%q) = %q, %v: not a Hub id", s, id, ok)
		}
		if ok {
			if again, _ := HubLicense(id); again != id {
				t.Fatalf("HubLicense(%q) = %q, but HubLicense(%q) = %q", s, id, id, again)
			}
		}
	})
}

// TestCodeInTableCell: a code span stays one cell of one table row, and
// shows its text.
func TestCodeInTableCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "-"},
		{"v1.0", "`v1.0`"},
		{"v1 | main\nsecond line", "`v1 \\| main second line`"},
		{"a\r\nb\rc", "`a b c`"},
		{"say `hi`", "`` say `hi` ``"},
		{"`x`", "`` `x` ``"},
		{"a``b", "```a``b```"},
	}
	for _, tt := range tests {
		got := code(tt.in)
		if got != tt.want {
			t.Errorf("code(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.ContainsAny(got, "\r\n") || strings.Count(got, "|") != strings.Count(got, `\|`) {
			t.Errorf("code(%q) = %q breaks a table row", tt.in, got)
		}
	}
}

func TestPublicPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"bfcl.jsonl", "bfcl.jsonl"},
		{"benchmarks/bfcl.jsonl", "benchmarks/bfcl.jsonl"},
		{"Qwen/Qwen3-8B", "Qwen/Qwen3-8B"},
		{"/tmp/clientX/bfcl.jsonl", "bfcl.jsonl"},
		{"/srv/models/qwen3-8b/", "qwen3-8b"},
		{"../clientX/my_reason.tmpl", "my_reason.tmpl"},
		{"prompts/../../x.tmpl", "x.tmpl"},
		{"~/bench/bfcl.jsonl", "bfcl.jsonl"},
		{`C:\Users\ann\bfcl.jsonl`, "bfcl.jsonl"},
		{"hf://datasets/org/bench/bfcl.jsonl", "hf://datasets/org/bench/bfcl.jsonl"},
		{"s3://bucket/bench/bfcl.jsonl", "s3://bucket/bench/bfcl.jsonl"},
	}
	for _, tt := range tests {
		if got := publicPath(tt.in); got != tt.want {
			t.Errorf("publicPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPublicSettings(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"benchmarks":[{"name":"bfcl","path":"/tmp/a/bfcl.jsonl","format":"bfcl"},{"name":"b","path":"b/x.jsonl"}],"ngram":13,"threshold":0.5,"fields":["user"]}`,
			`{"benchmarks":[{"name":"bfcl","path":"bfcl.jsonl","format":"bfcl"},{"name":"b","path":"b/x.jsonl"}],"ngram":13,"threshold":0.5,"fields":["user"]}`},
		{`{"style":"meta_tool","prompt":"/home/ann/p/my.tmpl","attempts":3}`, `{"style":"meta_tool","prompt":"my.tmpl","attempts":3}`},
		{`{"try_prompt":"../t.tmpl","prompts":{"judge_correctness":"/x/j.tmpl"},"tokenizer":"/models/tokenizer.json","model":"/srv/qwen","name":"/not/a/path"}`,
			`{"try_prompt":"t.tmpl","prompts":{"judge_correctness":"j.tmpl"},"tokenizer":"tokenizer.json","model":"qwen","name":"/not/a/path"}`},
		{`{"a":[],"b":{},"c":null,"d":true,"e":[[1,2],{"path":"/p/q"}],"f":1e400}`, `{"a":[],"b":{},"c":null,"d":true,"e":[[1,2],{"path":"q"}],"f":1e400}`},
		{`{"path":"/a/b"`, `{"path":"/a/b"`}, // not JSON: as it is
	}
	for _, tt := range tests {
		got := publicSettings(json.RawMessage(tt.in))
		if got != tt.want {
			t.Errorf("publicSettings(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
		if json.Valid([]byte(tt.in)) && !json.Valid([]byte(got)) {
			t.Errorf("publicSettings(%s) = %s: not JSON", tt.in, got)
		}
	}
}
