package hftok

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTiny checks a hand-made tokenizer whose tokens follow from its merges
// by hand: "a b" (rank 0) before "ab c" (1), "Ġ a" (2), "Ġa b" (3), "b c" (4).
// The GPT-2 split makes "ab", " ab", " " … pieces before BPE.
func TestTiny(t *testing.T) {
	tok, err := Load("testdata/tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},                   // a+b (0), then ab+c (1)
		{"bc", "bc"},                     // b+c (4)
		{"abcabc", "abc abc"},            // one piece: a b c a b c → ab c ab c → abc abc
		{"ab ab", "ab Ġ ab"},             // " ab" is a piece: a+b (rank 0) beats Ġ+a (2), and "Ġ ab" is no merge
		{"cab", "c ab"},                  // no merge makes "ca"
		{"ab<|end|>ab", "ab <|end|> ab"}, // the added token is matched first
		{"a  b", "a Ġ Ġ b"},              // the pattern leaves one space to the next word; "Ġ b" is no merge
	} {
		got := tok.Tokens(tc.in)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Tokens(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if n := tok.Count(tc.in); n != len(strings.Fields(tc.want)) {
			t.Errorf("Count(%q) = %d", tc.in, n)
		}
	}
	if id, ok := tok.ID("Ġab"); !ok || id != 7 {
		t.Errorf("ID(Ġab) = %d, %v", id, ok)
	}
}

func TestTinyBPEOrder(t *testing.T) {
	tok, _ := Load("testdata/tiny.json")
	// "abc" in the byte-level alphabet: a+b has rank 0, b+c rank 4, so
	// "ab" forms first, never "bc".
	if got := tok.bpe("abc"); !slices.Equal(got, []string{"abc"}) {
		t.Errorf("bpe(abc) = %q", got)
	}
	if got := byteLevel(" \n\xff"); got != "ĠĊÿ" {
		t.Errorf("byteLevel = %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"model": {"type": "Unigram"}, "pre_tokenizer": {"type": "ByteLevel"}}`, "model type"},
		{`{"model": {"type": "BPE", "byte_fallback": true}, "pre_tokenizer": {"type": "Metaspace"}}`, "byte_fallback"},
		{`{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "Metaspace"}}`, "pre_tokenizer"},
		{`{"normalizer": {"type": "NFKC"}, "model": {"type": "BPE"}}`, "normalizer"},
		{`{"model": {"type": "BPE", "merges": ["ab"]}, "pre_tokenizer": {"type": "ByteLevel"}}`, "merge 0"},
		{`{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}, {"type": "ByteLevel", "use_regex": false}]}}`, "pattern"},
		{`not json`, "invalid"},
	} {
		if _, err := Parse([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s): %v, want %q", tc.json, err, tc.want)
		}
	}
}

func FuzzTokens(f *testing.F) {
	tok, err := Load("testdata/tiny.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("ab ab<|end|>\n\n  c")
	f.Add("\xff\xfe 請 🚀")
	f.Fuzz(func(t *testing.T, s string) {
		toks := tok.Tokens(s)
		if tok.Count(s) != len(toks) {
			t.Fatal("Count and Tokens disagree")
		}
		if s != "" && len(toks) == 0 {
			t.Fatal("text without tokens")
		}
	})
}

// synthTokenizer is a byte-level BPE with every byte and merges over a, b,
// c that overlap and chain, to compare the two merge loops.
func synthTokenizer(t testing.TB) *Tokenizer {
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := []string{"a b", "b c", "c c", "ab c", "cc cc", "a a", "aa a", "bc a", "ab ab", "cccc c"}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		vocab[a+b] = len(vocab)
	}
	js, _ := json.Marshal(map[string]any{
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	})
	tok, err := Parse(js)
	if err != nil || tok.merges == nil {
		t.Fatalf("synthetic tokenizer: %v", err)
	}
	return tok
}

// TestBPEHeapEqualsRescan: the heap merge gives the rescanning merge's
// tokens on long random pieces.
func TestBPEHeapEqualsRescan(t *testing.T) {
	tok := synthTokenizer(t)
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		b := make([]byte, 1+r.IntN(300))
		for i := range b {
			b[i] = "abc"[r.IntN(3)]
		}
		ids := func() []int32 {
			out := make([]int32, len(b))
			for i, c := range b {
				out[i] = tok.byteID[c]
			}
			return out
		}
		if h, s := tok.bpeHeap(ids()), tok.bpeRescan(ids()); !slices.Equal(h, s) {
			t.Fatalf("%s: heap %v, rescan %v", b, h, s)
		}
	}
}

// A long run without a split point costs O(m log m), not O(m²).
func TestBPELongPiece(t *testing.T) {
	tok := synthTokenizer(t)
	long := strings.Repeat("abcab", 200_000) // 1 MB of letters: one piece
	start := time.Now()
	if n := tok.Count(long); n == 0 {
		t.Fatal("no tokens")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("1 MB piece took %v", d)
	}
}
