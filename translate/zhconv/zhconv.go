// Package zhconv converts between Simplified and Traditional Chinese the way
// OpenCC does, with OpenCC's own dictionaries (release 1.1.6, embedded; see
// dict/NOTICE). It implements the two OpenCC configurations augment needs:
// s2twp (Simplified to Traditional as used in Taiwan, with Taiwan
// vocabulary) and t2s (Traditional to Simplified).
//
// The conversion follows OpenCC's, step for step, because the order matters:
//
//  1. Segmentation: the source text is cut by maximum forward matching over
//     the phrase dictionary (STPhrases for s2twp). At each position the
//     longest key that starts there becomes one segment; characters where no
//     key starts are gathered into one segment per run.
//  2. Each segment then goes through the conversion chain on its own: every
//     step replaces, from left to right, the longest key of its dictionaries
//     that starts at the current position (within the segment) by the key's
//     first value, and copies characters no key matches. In a step with
//     several dictionaries the first one with a match wins. s2twp's steps are
//     [STPhrases, STCharacters], [TWPhrases], [TWVariants].
//
// Because the Taiwan phrase step runs over each converted segment and never
// across two, a phrase spanning a segment boundary is never replaced: in
// 确保|存储 the Taiwan phrase 保存→儲存 cannot match, and the text becomes
// 確保儲存, not 確儲存儲.
//
// Differences from the C++ reference: text that is not valid UTF-8 is
// returned unchanged (OpenCC throws), and a NUL character is converted like
// any other (OpenCC stops at it).
package zhconv

import (
	"bufio"
	"cmp"
	"embed"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

//go:embed dict/*.txt
var files embed.FS

// Dictionary file names (in dict/), as in OpenCC's data/dictionary.
const (
	STPhrases      = "STPhrases.txt"
	STCharacters   = "STCharacters.txt"
	TWPhrasesIT    = "TWPhrasesIT.txt"
	TWPhrasesName  = "TWPhrasesName.txt"
	TWPhrasesOther = "TWPhrasesOther.txt"
	TWVariants     = "TWVariants.txt"
	TSPhrases      = "TSPhrases.txt"
	TSCharacters   = "TSCharacters.txt"
)

// TWPhrases are the files whose union is OpenCC's TWPhrases dictionary.
var TWPhrases = source{TWPhrasesIT, TWPhrasesName, TWPhrasesOther}

// An Entry is one line of a dictionary: a key and its values, the first of
// which is the one a conversion uses.
type Entry struct {
	Key    string
	Values []string
}

// Entries reads the embedded dictionary file name. The files are part of
// the build, so an error means a broken build, not bad input.
func Entries(name string) ([]Entry, error) {
	f, err := files.Open("dict/" + name)
	if err != nil {
		return nil, fmt.Errorf("zhconv: %w", err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "\t")
		vals := strings.Fields(v)
		if !ok || k == "" || len(vals) == 0 || !utf8.ValidString(line) {
			return nil, fmt.Errorf("zhconv: %s:%d: not a key, a tab and values: %q", name, n, line)
		}
		out = append(out, Entry{Key: k, Values: vals})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("zhconv: %s: %w", name, err)
	}
	return out, nil
}

// A Converter converts text by one OpenCC configuration. It is immutable and
// safe for concurrent use.
type Converter struct {
	seg   *dict
	chain [][]*dict
	// segFirst: the first step's first dictionary is the segmentation
	// dictionary (as in every OpenCC configuration with phrases), so the
	// segmentation has done that step's phrase matching already: a matched
	// segment is one key, and inside a run of unmatched characters no key
	// of it starts anywhere (see convertSegment).
	segFirst bool
}

// A source is one dictionary: the union of the entries of its files.
type source []string

// S2TWP returns the converter of OpenCC's s2twp.json: Simplified Chinese to
// Traditional Chinese as used in Taiwan, with Taiwan vocabulary (软件→軟體).
var S2TWP = sync.OnceValues(func() (*Converter, error) {
	return build(source{STPhrases}, [][]source{
		{{STPhrases}, {STCharacters}},
		{TWPhrases},
		{{TWVariants}},
	})
})

// T2S returns the converter of OpenCC's t2s.json: Traditional Chinese (OpenCC
// standard) to Simplified Chinese.
var T2S = sync.OnceValues(func() (*Converter, error) {
	return build(source{TSPhrases}, [][]source{{{TSPhrases}, {TSCharacters}}})
})

// build assembles a converter from its segmentation dictionary and its
// chain of steps, each a group of dictionaries; each dictionary is loaded
// once however often it is named.
func build(seg source, chain [][]source) (*Converter, error) {
	loaded := make(map[string]*dict)
	load := func(src source) (*dict, error) {
		key := strings.Join(src, "+")
		if d, ok := loaded[key]; ok {
			return d, nil
		}
		d := newDict()
		for _, name := range src {
			es, err := Entries(name)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				d.add(e.Key, e.Values[0])
			}
		}
		d.freeze()
		loaded[key] = d
		return d, nil
	}
	c := &Converter{}
	var err error
	if c.seg, err = load(seg); err != nil {
		return nil, err
	}
	for _, step := range chain {
		group := make([]*dict, len(step))
		for i, src := range step {
			if group[i], err = load(src); err != nil {
				return nil, err
			}
		}
		c.chain = append(c.chain, group)
	}
	c.segFirst = len(c.chain) > 0 && c.chain[0][0] == c.seg
	return c, nil
}

// A Segment is one piece of a conversion: a segment of the source text and
// what it became. The segments of a text, in order, concatenate to the
// source and to the result.
type Segment struct {
	Src, Out string
}

// Convert returns s converted. Text that is not valid UTF-8 is returned
// unchanged.
func (c *Converter) Convert(s string) string {
	if !utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	var scratch [2][]byte
	c.segments(s, func(src, val string, matched bool) {
		b.Write(c.convertSegment(src, val, matched, &scratch))
	})
	return b.String()
}

// Segments returns the segments of s and their conversions (nil for text
// that is not valid UTF-8).
func (c *Converter) Segments(s string) []Segment {
	if !utf8.ValidString(s) {
		return nil
	}
	var out []Segment
	var scratch [2][]byte
	c.segments(s, func(src, val string, matched bool) {
		out = append(out, Segment{Src: src, Out: string(c.convertSegment(src, val, matched, &scratch))})
	})
	return out
}

// segments calls yield with each segment of s in order: maximum forward
// matching over the segmentation dictionary, unmatched characters gathered
// into runs. For a matched segment, val is the key's value.
func (c *Converter) segments(s string, yield func(src, val string, matched bool)) {
	run := 0 // start of the current run of unmatched characters
	for i := 0; i < len(s); {
		n, v, ok := c.seg.longest(s, i)
		if !ok {
			i += runeLen(s, i)
			continue
		}
		if run < i {
			yield(s[run:i], "", false)
		}
		yield(s[i:i+n], v, true)
		i += n
		run = i
	}
	if run < len(s) {
		yield(s[run:], "", false)
	}
}

// convertSegment runs seg through the chain. The result is in one of the
// scratch buffers, valid until the next call.
//
// When the first step starts with the segmentation dictionary, its result
// is known without matching it again: a matched segment is a whole key (no
// longer key fits in it) and becomes val; in a run, no key of that
// dictionary is a prefix of the text at any of its positions (the
// segmentation looked there, with the rest of the text after it), so only
// the step's other dictionaries can match.
func (c *Converter) convertSegment(seg, val string, matched bool, scratch *[2][]byte) []byte {
	cur := (*scratch)[0][:0]
	next := (*scratch)[1][:0]
	chain := c.chain
	switch {
	case c.segFirst && matched:
		cur = append(cur, val...)
		chain = chain[1:]
	case c.segFirst:
		cur = convertStep(cur, seg, chain[0][1:])
		chain = chain[1:]
	default:
		cur = append(cur, seg...)
	}
	for _, group := range chain {
		next = convertStep(next[:0], string(cur), group)
		cur, next = next, cur
	}
	(*scratch)[0], (*scratch)[1] = cur, next
	return cur
}

// convertStep appends to dst the conversion of seg by one step: at each
// position the longest match of the first dictionary in group that has one.
func convertStep(dst []byte, seg string, group []*dict) []byte {
	for i := 0; i < len(seg); {
		matched := false
		for _, d := range group {
			if n, v, ok := d.longest(seg, i); ok {
				dst = append(dst, v...)
				i += n
				matched = true
				break
			}
		}
		if !matched {
			n := runeLen(seg, i)
			dst = append(dst, seg[i:i+n]...)
			i += n
		}
	}
	return dst
}

func runeLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// dict is a trie over the runes of the keys, for longest-prefix matching.
// Node 0 is the root. The root's edges for the common CJK blocks are an
// array, since nearly every lookup starts and most end there; the other
// edges of node n are kidRune[kidStart[n]:kidStart[n+1]] (sorted) leading
// to kidNode at the same indexes. add builds the edges in a map; freeze
// lays them out so.
type dict struct {
	root     [rootHi - rootLo]int32 // child of the root for runes rootLo..rootHi-1; 0 = none
	kidStart []int32
	kidRune  []rune
	kidNode  []int32
	vals     []string // per node; meaningful where isKey is set
	isKey    []bool
	// first holds, for ASCII bytes, whether some key starts with that byte,
	// so runs of ASCII text cost no lookups.
	first [utf8.RuneSelf]bool

	edges map[uint64]int32 // while building
}

// The range of the root array: CJK radicals to the end of the unified
// ideographs of the BMP.
const rootLo, rootHi = 0x2E80, 0xA000

func newDict() *dict {
	return &dict{edges: make(map[uint64]int32), vals: []string{""}, isKey: []bool{false}}
}

func edge(node int32, r rune) uint64 { return uint64(node)<<32 | uint64(uint32(r)) }

// add sets key's value; a later entry for the same key replaces an earlier
// one (OpenCC's dictionaries have no duplicate keys).
func (d *dict) add(key, val string) {
	node := int32(0)
	for _, r := range key {
		e := edge(node, r)
		nx, ok := d.edges[e]
		if !ok {
			nx = int32(len(d.vals))
			d.edges[e] = nx
			d.vals = append(d.vals, "")
			d.isKey = append(d.isKey, false)
		}
		node = nx
	}
	d.vals[node], d.isKey[node] = val, true
	if key[0] < utf8.RuneSelf {
		d.first[key[0]] = true
	}
}

// freeze lays the edges out for lookups; add may not be called after it.
func (d *dict) freeze() {
	type kid struct {
		r    rune
		node int32
	}
	kids := make([][]kid, len(d.vals))
	for e, nx := range d.edges {
		node, r := int32(e>>32), rune(uint32(e))
		if node == 0 && r >= rootLo && r < rootHi {
			d.root[r-rootLo] = nx
			continue
		}
		kids[node] = append(kids[node], kid{r, nx})
	}
	d.kidStart = make([]int32, len(d.vals)+1)
	for n, ks := range kids {
		slices.SortFunc(ks, func(a, b kid) int { return cmp.Compare(a.r, b.r) })
		for _, k := range ks {
			d.kidRune = append(d.kidRune, k.r)
			d.kidNode = append(d.kidNode, k.node)
		}
		d.kidStart[n+1] = int32(len(d.kidRune))
	}
	d.edges = nil
}

func (d *dict) child(node int32, r rune) (int32, bool) {
	if node == 0 && r >= rootLo && r < rootHi {
		nx := d.root[r-rootLo]
		return nx, nx != 0
	}
	lo, hi := int(d.kidStart[node]), int(d.kidStart[node+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch kr := d.kidRune[m]; {
		case kr == r:
			return d.kidNode[m], true
		case kr < r:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

// longest returns the byte length and value of the longest key that is a
// prefix of s[i:], and whether there is one.
func (d *dict) longest(s string, i int) (n int, val string, ok bool) {
	if s[i] < utf8.RuneSelf && !d.first[s[i]] {
		return 0, "", false
	}
	node := int32(0)
	for j := i; j < len(s); {
		r, size := rune(s[j]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[j:])
		}
		nx, found := d.child(node, r)
		if !found {
			break
		}
		node = nx
		j += size
		if d.isKey[node] {
			n, val, ok = j-i, d.vals[node], true
		}
		if d.kidStart[node] == d.kidStart[node+1] {
			break // a leaf
		}
	}
	return n, val, ok
}
