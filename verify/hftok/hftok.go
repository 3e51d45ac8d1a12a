// Package hftok counts tokens with a Hugging Face tokenizer.json of the
// byte-level BPE family (GPT-2 style: Llama 3 and 3.1, Qwen 2 and 2.5,
// Qwen 3, Mistral's Tekken-less BPE models …), read from a local file, so
// that lengths are the student model's and not an approximation.
//
// Supported pieces of a tokenizer.json (anything else is an error at Load,
// never a silent miscount):
//
//   - normalizer: null or NFC;
//   - pre_tokenizer: ByteLevel (with or without its own GPT-2 regex), or a
//     Sequence of Split (a regex pattern, behavior Isolated, not inverted)
//     then ByteLevel without regex;
//   - model: BPE over the byte-level alphabet, merges as "a b" strings or
//     [a, b] pairs, ignore_merges (a piece that is a whole vocabulary entry
//     is one token, as Llama 3's tokenizer does);
//   - added_tokens: matched in the text before anything else, each one
//     token (as the tokenizers library does by default).
//
// Post-processors (BOS and EOS) are not applied: Count counts text, and the
// chat template's own tokens are the caller's business (see verify).
package hftok

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

// gpt2Pattern is the split of a ByteLevel pre-tokenizer with use_regex.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// A Tokenizer counts tokens. It is safe for concurrent use.
type Tokenizer struct {
	nfc    bool
	split  *regexp2.Regexp
	digits int // > 0: the pattern is one splitFast knows
	vocab  map[string]int
	ranks  map[string]int   // "a\x00b" → merge rank
	merges map[uint64]merge // ID pair → rank and merged ID, when every merge is in the vocabulary
	byteID [256]int32       // vocabulary ID of each byte's character, -1 if absent
	tokens []string         // ID → token, for Tokens
	ignore bool             // ignore_merges
	added  []string         // added token contents, longest first
	first  [256]bool        // first bytes of added tokens

	mu    sync.RWMutex
	cache map[string]int // pre-tokenized piece (raw text) → its token count
}

// A merge is a BPE rule as IDs.
type merge struct{ rank, id int32 }

type fileJSON struct {
	Normalizer   *struct{ Type string } `json:"normalizer"`
	PreTokenizer *preJSON               `json:"pre_tokenizer"`
	Model        struct {
		Type         string            `json:"type"`
		Vocab        map[string]int    `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		IgnoreMerges bool              `json:"ignore_merges"`
		ByteFallback bool              `json:"byte_fallback"`
	} `json:"model"`
	AddedTokens []struct {
		Content string `json:"content"`
	} `json:"added_tokens"`
}

type preJSON struct {
	Type          string    `json:"type"`
	Pretokenizers []preJSON `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	UseRegex       *bool  `json:"use_regex"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
}

// Load reads a tokenizer.json.
func Load(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse reads a tokenizer.json already in memory.
func Parse(b []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	t := &Tokenizer{vocab: f.Model.Vocab, ignore: f.Model.IgnoreMerges, cache: map[string]int{}}
	if f.Normalizer != nil {
		switch f.Normalizer.Type {
		case "NFC":
			t.nfc = true
		default:
			return nil, fmt.Errorf("normalizer %q is not supported (null or NFC)", f.Normalizer.Type)
		}
	}
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("model type %q is not supported (BPE)", f.Model.Type)
	}
	if f.Model.ByteFallback {
		return nil, errors.New("byte_fallback BPE (SentencePiece style) is not supported: only byte-level BPE")
	}
	pattern, err := splitPattern(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if t.split, err = regexp2.Compile(pattern, regexp2.None); err != nil {
		return nil, fmt.Errorf("pre_tokenizer pattern: %w", err)
	}
	t.digits, _ = fastDigits(pattern)
	t.ranks = make(map[string]int, len(f.Model.Merges))
	for i, m := range f.Model.Merges {
		var a, b string
		var s string
		var pair []string
		switch {
		case json.Unmarshal(m, &s) == nil:
			var ok bool
			if a, b, ok = strings.Cut(s, " "); !ok {
				return nil, fmt.Errorf("merge %d %q: want two tokens", i, s)
			}
		case json.Unmarshal(m, &pair) == nil && len(pair) == 2:
			a, b = pair[0], pair[1]
		default:
			return nil, fmt.Errorf("merge %d: want \"a b\" or [a, b]", i)
		}
		if _, dup := t.ranks[a+"\x00"+b]; !dup {
			t.ranks[a+"\x00"+b] = i
		}
	}
	t.indexIDs()
	for _, a := range f.AddedTokens {
		if a.Content != "" {
			t.added = append(t.added, a.Content)
			t.first[a.Content[0]] = true
		}
	}
	slices.SortFunc(t.added, func(x, y string) int { return len(y) - len(x) })
	return t, nil
}

// indexIDs prepares the ID form of the merges, used when every byte's
// character and every merge result is in the vocabulary (as in any sound
// byte-level BPE); otherwise bpe works on strings.
func (t *Tokenizer) indexIDs() {
	maxID := 0
	for _, id := range t.vocab {
		maxID = max(maxID, id)
	}
	t.tokens = make([]string, maxID+1)
	for tok, id := range t.vocab {
		if id >= 0 {
			t.tokens[id] = tok
		}
	}
	for b := range 256 {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return
		}
		t.byteID[b] = int32(id)
	}
	merges := make(map[uint64]merge, len(t.ranks))
	for key, rank := range t.ranks {
		a, b, _ := strings.Cut(key, "\x00")
		ia, oka := t.vocab[a]
		ib, okb := t.vocab[b]
		im, okm := t.vocab[a+b]
		if !oka || !okb || !okm {
			return
		}
		merges[uint64(ia)<<32|uint64(ib)] = merge{int32(rank), int32(im)}
	}
	t.merges = merges
}

// bpeIDs is bpe on IDs, over the raw bytes of a piece.
func (t *Tokenizer) bpeIDs(raw string) []int32 {
	ids := make([]int32, len(raw))
	for i := 0; i < len(raw); i++ {
		ids[i] = t.byteID[raw[i]]
	}
	if len(ids) > shortPiece {
		return t.bpeHeap(ids)
	}
	return t.bpeRescan(ids)
}

// bpeRescan merges by rescanning the pairs after every merge.
func (t *Tokenizer) bpeRescan(ids []int32) []int32 {
	for len(ids) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(ids); i++ {
			if m, ok := t.merges[uint64(ids[i])<<32|uint64(ids[i+1])]; ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		ids[at] = best.id
		ids = slices.Delete(ids, at+1, at+2)
	}
	return ids
}

// maxCached is the longest piece the count cache keeps: words repeat,
// long runs rarely do, and the cache's memory stays bounded (a million
// entries of at most this many bytes).
const maxCached = 64

// shortPiece is the length up to which a piece is merged by rescanning
// (quadratic, fastest for words); longer pieces (a long run of letters or
// symbols: base64, minified data) go through bpeHeap.
const shortPiece = 48

// bpeHeap merges like bpeIDs in O(m log m): the candidate pairs wait in a
// heap ordered by (rank, position); a popped pair that no longer exists (a
// neighbour merged first) is skipped. The leftmost pair of the lowest rank
// merges first, as in the rescanning loop.
func (t *Tokenizer) bpeHeap(ids []int32) []int32 {
	n := len(ids)
	next, prev := make([]int32, n), make([]int32, n)
	for i := range n {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	next[n-1] = -1
	h := &pairHeap{}
	push := func(i int32) {
		if i < 0 || next[i] < 0 {
			return
		}
		j := next[i]
		if m, ok := t.merges[uint64(ids[i])<<32|uint64(ids[j])]; ok {
			heap.Push(h, pairAt{rank: m.rank, pos: i, left: ids[i], right: ids[j], id: m.id})
		}
	}
	for i := range n - 1 {
		push(int32(i))
	}
	for h.Len() > 0 {
		p := heap.Pop(h).(pairAt)
		j := next[p.pos]
		if ids[p.pos] != p.left || j < 0 || ids[j] != p.right {
			continue // stale: a neighbour merged first
		}
		ids[p.pos] = p.id
		ids[j] = -1
		next[p.pos] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = p.pos
		}
		push(prev[p.pos])
		push(p.pos)
	}
	out := ids[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

// pairAt is a candidate merge of the symbols at pos and its successor.
type pairAt struct {
	rank, pos, left, right, id int32
}

type pairHeap []pairAt

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairAt)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pieceTokens returns the tokens of a raw piece.
func (t *Tokenizer) pieceTokens(raw string) []string {
	if t.merges == nil {
		return t.bpe(byteLevel(raw))
	}
	if t.ignore {
		if bl := byteLevel(raw); t.hasToken(bl) {
			return []string{bl}
		}
	}
	ids := t.bpeIDs(raw)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.tokens[id]
	}
	return out
}

func (t *Tokenizer) hasToken(tok string) bool { _, ok := t.vocab[tok]; return ok }

// pieceCount is len(pieceTokens(raw)) without building strings.
func (t *Tokenizer) pieceCount(raw string) int {
	if t.merges == nil {
		return len(t.bpe(byteLevel(raw)))
	}
	if t.ignore {
		if _, ok := t.vocab[byteLevel(raw)]; ok {
			return 1
		}
	}
	return len(t.bpeIDs(raw))
}

// splitPattern returns the regex the pre-tokenizer splits text with.
func splitPattern(p *preJSON) (string, error) {
	if p == nil {
		return "", errors.New("no pre_tokenizer: not a byte-level BPE")
	}
	switch p.Type {
	case "ByteLevel":
		if p.AddPrefixSpace {
			return "", errors.New("ByteLevel add_prefix_space is not supported")
		}
		if p.UseRegex == nil || *p.UseRegex {
			return gpt2Pattern, nil
		}
		return "", errors.New("ByteLevel without regex and without a Split before it")
	case "Sequence":
		if len(p.Pretokenizers) == 2 && p.Pretokenizers[0].Type == "Split" && p.Pretokenizers[1].Type == "ByteLevel" {
			s, bl := p.Pretokenizers[0], p.Pretokenizers[1]
			if bl.AddPrefixSpace || (bl.UseRegex != nil && *bl.UseRegex) {
				return "", errors.New("ByteLevel after Split must have use_regex false and no prefix space")
			}
			if s.Behavior != "Isolated" || s.Invert || s.Pattern == nil {
				return "", fmt.Errorf("pre_tokenizer Split with behavior %q, invert %v is not supported", s.Behavior, s.Invert)
			}
			if s.Pattern.Regex != nil {
				return *s.Pattern.Regex, nil
			}
			if s.Pattern.String != nil {
				return regexp2.Escape(*s.Pattern.String), nil
			}
		}
	}
	return "", fmt.Errorf("pre_tokenizer %q is not supported (ByteLevel, or Split then ByteLevel)", p.Type)
}

// Count returns the number of tokens of text, without BOS or EOS.
func (t *Tokenizer) Count(text string) int {
	n := 0
	t.eachSegment(text, func(seg string, added bool) {
		if added {
			n++
			return
		}
		n += t.countText(seg)
	})
	return n
}

// Tokens returns the tokens of text, for tests and debugging.
func (t *Tokenizer) Tokens(text string) []string {
	var out []string
	t.eachSegment(text, func(seg string, added bool) {
		if added {
			out = append(out, seg)
			return
		}
		t.eachPiece(seg, func(p string) { out = append(out, t.pieceTokens(p)...) })
	})
	return out
}

// ID returns the vocabulary ID of a token (added tokens included when they
// are in the vocabulary).
func (t *Tokenizer) ID(token string) (int, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// eachSegment splits text at added tokens (longest match first).
func (t *Tokenizer) eachSegment(text string, fn func(seg string, added bool)) {
	start := 0
	for i := 0; i < len(text); i++ {
		if !t.first[text[i]] {
			continue
		}
		for _, a := range t.added {
			if strings.HasPrefix(text[i:], a) {
				if i > start {
					fn(text[start:i], false)
				}
				fn(a, true)
				i += len(a) - 1
				start = i + 1
				break
			}
		}
	}
	if start < len(text) {
		fn(text[start:], false)
	}
}

func (t *Tokenizer) countText(seg string) int {
	n := 0
	t.eachPiece(seg, func(p string) {
		if len(p) > maxCached {
			n += t.pieceCount(p)
			return
		}
		t.mu.RLock()
		c, ok := t.cache[p]
		t.mu.RUnlock()
		if !ok {
			c = t.pieceCount(p)
			t.mu.Lock()
			if len(t.cache) > 1<<20 {
				t.cache = map[string]int{}
			}
			t.cache[strings.Clone(p)] = c
			t.mu.Unlock()
		}
		n += c
	})
	return n
}

// eachPiece normalises seg and calls fn with each pre-tokenized piece, as
// raw text (byteLevel maps it to the BPE alphabet).
func (t *Tokenizer) eachPiece(seg string, fn func(string)) {
	if t.nfc && !norm.NFC.IsNormalString(seg) {
		seg = norm.NFC.String(seg)
	}
	if t.digits > 0 {
		splitFast(seg, t.digits, func(a, b int) { fn(seg[a:b]) })
		return
	}
	runes := []rune(seg)
	emit := func(a, b int) {
		if a < b {
			fn(string(runes[a:b]))
		}
	}
	pos := 0
	m, err := t.split.FindRunesMatch(runes)
	for err == nil && m != nil {
		emit(pos, m.RuneIndex) // a gap the pattern did not match is a piece too
		emit(m.RuneIndex, m.RuneIndex+m.RuneLength)
		pos = m.RuneIndex + m.RuneLength
		m, err = t.split.FindNextMatch(m)
	}
	emit(pos, len(runes))
}

// byteToRune is GPT-2's reversible map of bytes to printable characters:
// printable Latin-1 bytes map to themselves, the others to 256 upwards in
// byte order.
var byteToRune = func() [256]rune {
	var m [256]rune
	next := rune(256)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			m[b] = rune(b)
		} else {
			m[b] = next
			next++
		}
	}
	return m
}()

func byteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteToRune[s[i]])
	}
	return sb.String()
}

// bpe splits one byte-level piece into tokens (the string form, for a
// vocabulary that lacks a merge result or a byte, which no sound byte-level
// BPE does; it rescans, quadratic in the piece's length): with ignore_merges a piece
// in the vocabulary is one token; else, from single characters, the
// adjacent pair of lowest merge rank (leftmost among equals) is merged
// until no pair has a rank.
func (t *Tokenizer) bpe(piece string) []string {
	if t.ignore {
		if _, ok := t.vocab[piece]; ok {
			return []string{piece}
		}
	}
	syms := make([]string, 0, len(piece))
	for _, r := range piece {
		syms = append(syms, string(r))
	}
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.ranks[syms[i]+"\x00"+syms[i+1]]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] += syms[at+1]
		syms = slices.Delete(syms, at+1, at+2)
	}
	return syms
}
