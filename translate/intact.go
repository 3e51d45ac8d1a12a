package translate

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/translate/zhconv"
)

// The conversion check. Every string the stage converts with s2twp, in both
// modes, is checked segment by segment (OpenCC's segments of the source,
// see package zhconv): read back towards Simplified Chinese, the converted
// segment must give the source segment again, character for character,
// except where a Taiwan phrase of OpenCC's dictionary replaced a run of its
// characters (软件→軟體, 内存→記憶體). A character dropped, doubled or
// replaced by an unrelated one fails the check, and so does a Taiwan phrase
// that spans two segments (确保|存储 read as 確|儲存|儲). Such a record is
// rejected as translate_conversion_damaged instead of passing on broken
// Chinese that no other check sees.

// readBack is what the check knows about the dictionaries.
type readBack struct {
	// forms maps a character to the characters s2twp may write for it:
	// its STCharacters values and their Taiwan variants.
	forms map[rune][]rune
	// simp maps a Traditional character to its Simplified forms
	// (TSCharacters), as OpenCC's t2s reads it back.
	simp map[rune][]rune
	// phrases are the Taiwan phrase substitutions by the first character of
	// what they write.
	phrases map[rune][]twPhrase
}

// A twPhrase is one TWPhrases entry: its key (Traditional, OpenCC standard)
// and what s2twp writes for it (the value, after TWVariants).
type twPhrase struct {
	key, out []rune
}

func loadReadBack(s2twp *zhconv.Converter) (*readBack, error) {
	rb := &readBack{forms: make(map[rune][]rune), simp: make(map[rune][]rune), phrases: make(map[rune][]twPhrase)}
	variants := make(map[rune]rune)
	es, err := zhconv.Entries(zhconv.TWVariants)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		k, _ := utf8.DecodeRuneInString(e.Key)
		v, _ := utf8.DecodeRuneInString(e.Values[0])
		variants[k] = v
	}
	addForm := func(k, v rune) {
		for _, f := range []rune{v, variants[v]} {
			if f != 0 && f != k && !slices.Contains(rb.forms[k], f) {
				rb.forms[k] = append(rb.forms[k], f)
			}
		}
	}
	if es, err = zhconv.Entries(zhconv.STCharacters); err != nil {
		return nil, err
	}
	for _, e := range es {
		k, _ := utf8.DecodeRuneInString(e.Key)
		addForm(k, k)
		for _, v := range e.Values {
			r, _ := utf8.DecodeRuneInString(v)
			addForm(k, r)
		}
	}
	for k, v := range variants {
		addForm(k, v)
	}
	// Phrases write some characters in forms the character table does not
	// list (坐标→座標, 并包→幷包); their values are as long as their keys.
	if es, err = zhconv.Entries(zhconv.STPhrases); err != nil {
		return nil, err
	}
	for _, e := range es {
		k, v := []rune(e.Key), []rune(e.Values[0])
		if len(k) != len(v) {
			continue
		}
		for i := range k {
			addForm(k[i], v[i])
		}
	}
	if es, err = zhconv.Entries(zhconv.TSCharacters); err != nil {
		return nil, err
	}
	for _, e := range es {
		k, _ := utf8.DecodeRuneInString(e.Key)
		for _, v := range e.Values {
			r, _ := utf8.DecodeRuneInString(v)
			rb.simp[k] = append(rb.simp[k], r)
		}
	}
	for _, name := range zhconv.TWPhrases {
		if es, err = zhconv.Entries(name); err != nil {
			return nil, err
		}
		for _, e := range es {
			var out []rune
			for _, r := range e.Values[0] {
				if v, ok := variants[r]; ok {
					r = v
				}
				out = append(out, r)
			}
			rb.phrases[out[0]] = append(rb.phrases[out[0]], twPhrase{key: []rune(e.Key), out: out})
		}
	}
	return rb, nil
}

// related reports whether the source character x may have become y: the
// same character, one of the forms s2twp writes for x, or characters that
// read back to a common Simplified form (t2s).
func (rb *readBack) related(x, y rune) bool {
	if x == y || slices.Contains(rb.forms[x], y) || slices.Contains(rb.simp[y], x) {
		return true
	}
	for _, s := range rb.simp[y] {
		if slices.Contains(rb.simp[x], s) {
			return true
		}
	}
	return false
}

// intact reports whether out is an undamaged conversion of src, whose
// OpenCC segments end at the rune offsets ends: the characters correspond
// one to one by related, except that a run of source characters within one
// segment that matches a Taiwan phrase's key may correspond to what the
// phrase writes.
//
// When it is not, where is the source rune offset at which the furthest
// attempt to read the output back stopped.
func (rb *readBack) intact(src, out string, ends []int) (where int, ok bool) {
	if src == out {
		return 0, true
	}
	a, b := []rune(src), []rune(out)
	// segEnd[i] is the end of the segment holding source rune i.
	segEnd := make([]int32, len(a))
	start := 0
	for _, e := range ends {
		for i := start; i < e; i++ {
			segEnd[i] = int32(e)
		}
		start = e
	}
	var failed map[[2]int]bool // branch points known to lead nowhere
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		var branches [][2]int
		defer func() { where = max(where, i) }()
		for {
			if i == len(a) && j == len(b) {
				return true
			}
			if j < len(b) && len(rb.phrases[b[j]]) > 0 && i < len(a) {
				if failed[[2]int{i, j}] {
					break
				}
				branches = append(branches, [2]int{i, j})
				for _, p := range rb.phrases[b[j]] {
					if j+len(p.out) <= len(b) && i+len(p.key) <= int(segEnd[i]) &&
						slices.Equal(b[j:j+len(p.out)], p.out) && rb.relatedRun(a[i:i+len(p.key)], p.key) &&
						walk(i+len(p.key), j+len(p.out)) {
						return true
					}
				}
			}
			if i == len(a) || j == len(b) || !rb.related(a[i], b[j]) {
				break
			}
			i, j = i+1, j+1
		}
		if failed == nil {
			failed = make(map[[2]int]bool)
		}
		for _, s := range branches {
			failed[s] = true
		}
		return false
	}
	ok = walk(0, 0)
	return where, ok
}

func (rb *readBack) relatedRun(src, key []rune) bool {
	for k := range key {
		if !rb.related(src[k], key[k]) {
			return false
		}
	}
	return true
}

// convertText converts s to Taiwan usage with s2twp, segment by segment,
// checking each segment (see intact), and then converts the Simplified-only
// characters that phrase matching left behind one by one (OpenCC keeps the
// proper name 恒生 inside 永恒生命, and 恒生银行 as a whole, leaving 恒,
// which Taiwan writes 恆). Strings without Han characters, or not valid
// UTF-8, are returned as they are. A damaged conversion gives a
// *contract.Reject with ReasonConversionDamaged.
func convertText(s string) (string, error) {
	if !hasHan(s) || !utf8.ValidString(s) {
		return s, nil
	}
	c := mustChinese()
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	segs := c.s2twp.Segments(s)
	ends := make([]int, len(segs))
	n := 0
	for i, seg := range segs {
		b.WriteString(seg.Out)
		n += utf8.RuneCountInString(seg.Src)
		ends[i] = n
	}
	out := c.repairText(b.String())
	if at, ok := c.readBack.intact(s, out, ends); !ok {
		rs := []rune(s)
		from := max(0, at-8)
		return "", rejectf(ReasonConversionDamaged, "the s2twp conversion of %q does not read back to the source at %q (after %q): %q",
			clip.Runes(s, 40), string(rs[at:min(len(rs), at+8)]), string(rs[from:at]), clip.Runes(out, 60))
	}
	return out, nil
}

// repairText replaces each Simplified-only character of s by its own
// conversion.
func (c *chinese) repairText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return c.simplified[r] }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if t, ok := c.repair[r]; ok {
			b.WriteString(t)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
