package toollib

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/record"
)

// Near-twins are two tools that do the same thing under slightly different
// names: calculate_loan_payment and calculate_loan_repayment,
// generate_password and generate_random_password, search_recipe and
// search_recipes. A list holding both leaves a model no right choice, so a
// distractor must not be the near-twin of a tool the dialogue calls. The
// test is lexical on purpose: it must behave the same whatever embedder the
// run uses (multilingual-e5 puts unrelated texts near a cosine of 0.7, the
// offline lexical embedder near 0).

// NearTwins reports whether a and b are near-twins: their names are near
// (NamesNear) and their descriptions agree: the cosine of the descriptions
// embedded by embed is at least minDesc, or the descriptions cannot be
// compared word by word (one is Chinese and the other is not, or one is
// empty: glaive's demos hold calculate_loan_repayment only in Chinese and
// calculate_loan_payment in both), so the names alone decide. embed must be
// deterministic; its vectors need not be normalised. Two tools with the
// same name are not near-twins (they are the same tool or a name clash,
// which callers handle by name).
func NearTwins(a, b record.Tool, embed func(string) []float32, minDesc float64) bool {
	ta, tb := NewTwin(a), NewTwin(b)
	return ta.Near(&tb, embed, minDesc)
}

// A Twin is a tool prepared for many near-twin tests: its name is split
// into words once (a distractor draw tests every candidate against every
// invoked tool, and splitting both names again for each pair was most of
// its work).
type Twin struct {
	name, desc string
	words      []string
}

// NewTwin prepares t for Near.
func NewTwin(t record.Tool) Twin {
	return Twin{name: t.Name, desc: t.Description, words: nameWords(t.Name)}
}

// Near reports whether the tools a and b were prepared from are near-twins:
// NearTwins of them, with the same arguments.
func (a *Twin) Near(b *Twin, embed func(string) []float32, minDesc float64) bool {
	if a.name == b.name || !wordsNear(a.words, b.words) {
		return false
	}
	da, db := strings.TrimSpace(a.desc), strings.TrimSpace(b.desc)
	if da == "" || db == "" || chineseText(da) != chineseText(db) {
		return true
	}
	return cosine(embed(da), embed(db)) >= minDesc
}

// chineseText reports whether Han characters make up at least a third as
// much of s as Latin letters do (and there are at least two).
func chineseText(s string) bool {
	han, latin := 0, 0
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Han, r):
			han++
		case r < unicode.MaxLatin1 && unicode.IsLetter(r):
			latin++
		}
	}
	return han >= 2 && 3*han >= latin
}

// NamesNear reports whether two tool names are near-duplicates: every word
// of the name with fewer words matches a different word of the other.
// Words are split at anything but letters and digits, at lower-to-upper
// case changes and at letter/digit changes, lower-cased, and lose an
// English plural "s". Two words match when they are equal, when the shorter
// (at least 4 letters) begins or ends the longer and is at most 3 letters
// shorter (discount/discounted, payment/repayment), or when both have at
// least 5 letters and one edit (insertion, deletion, substitution) turns one
// into the other.
func NamesNear(a, b string) bool {
	return wordsNear(nameWords(a), nameWords(b))
}

// wordsNear is NamesNear of two names split into the words x and y.
func wordsNear(x, y []string) bool {
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	if len(x) > len(y) {
		x, y = y, x
	}
	var buf [16]bool
	used := buf[:0]
	if len(y) > len(buf) {
		used = make([]bool, 0, len(y))
	}
	return matchWords(x, y, used[:len(y)])
}

// matchWords reports whether each word of x can be paired with a distinct
// unused word of y (names have a handful of words; backtracking is cheap).
func matchWords(x, y []string, used []bool) bool {
	if len(x) == 0 {
		return true
	}
	for j, w := range y {
		if !used[j] && wordsMatch(x[0], w) {
			used[j] = true
			if matchWords(x[1:], y, used) {
				return true
			}
			used[j] = false
		}
	}
	return false
}

func wordsMatch(a, b string) bool {
	if a == b {
		return true
	}
	if ascii(a) && ascii(b) {
		return wordsMatchASCII(a, b)
	}
	return wordsMatchRunes(a, b)
}

func wordsMatchRunes(a, b string) bool {
	s, l := []rune(a), []rune(b)
	if len(s) > len(l) {
		s, l = l, s
	}
	if len(s) >= 4 && len(l)-len(s) <= 3 && (strings.HasPrefix(string(l), string(s)) || strings.HasSuffix(string(l), string(s))) {
		return true
	}
	return len(s) >= 5 && oneEdit(s, l)
}

// wordsMatchASCII is wordsMatch for ASCII words, where bytes are runes:
// the same tests without converting the words (names are mostly ASCII, and
// distractor drawing compares many).
func wordsMatchASCII(s, l string) bool {
	if len(s) > len(l) {
		s, l = l, s
	}
	if len(s) >= 4 && len(l)-len(s) <= 3 && (strings.HasPrefix(l, s) || strings.HasSuffix(l, s)) {
		return true
	}
	if len(s) < 5 || len(l)-len(s) > 1 {
		return false
	}
	i := 0
	for i < len(s) && s[i] == l[i] {
		i++
	}
	if len(s) == len(l) {
		return s[i+1:] == l[i+1:]
	}
	return s[i:] == l[i+1:]
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// oneEdit reports whether one insertion, deletion or substitution turns s
// into l (len(s) ≤ len(l)); equal words are handled by the caller.
func oneEdit(s, l []rune) bool {
	if len(l)-len(s) > 1 {
		return false
	}
	i := 0
	for i < len(s) && s[i] == l[i] {
		i++
	}
	if len(s) == len(l) {
		return string(s[i+1:]) == string(l[i+1:])
	}
	return string(s[i:]) == string(l[i+1:])
}

// nameWords splits a tool name into words (see NamesNear).
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) == 0 {
			return
		}
		w := strings.ToLower(string(cur))
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") {
			w = w[:len(w)-1]
		}
		words = append(words, w)
		cur = cur[:0]
	}
	var last rune
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			last = r
			continue
		}
		if len(cur) > 0 && (unicode.IsUpper(r) && unicode.IsLower(last) || unicode.IsDigit(r) != unicode.IsDigit(last)) {
			flush()
		}
		cur = append(cur, r)
		last = r
	}
	flush()
	return words
}

// cosine of two vectors; 0 when either is empty or zero.
func cosine(a, b []float32) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return 0
	}
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}
