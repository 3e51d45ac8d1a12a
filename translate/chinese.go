package translate

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/longbridgeapp/opencc"
)

// chinese is the loaded OpenCC s2twp converter and the set of
// Simplified-only characters derived from its dictionaries.
type chinese struct {
	s2twp *opencc.OpenCC
	// simplified holds every character that s2t maps to something else and
	// that is not itself a Traditional form: not a target of any
	// Simplified→Traditional character mapping, nor of the Taiwan phrase and
	// variant dictionaries (痴, 群, 秘 and 粽 are Taiwan standard forms even
	// though s2t would change them).
	simplified map[rune]bool
	// repair maps each Simplified-only character to its s2twp conversion on
	// its own, for the few that phrase matching leaves behind.
	repair map[rune]string
}

// loadChinese builds the converter once; the dictionaries are embedded in
// the opencc module, so an error here means a broken build, not bad data.
var loadChinese = sync.OnceValues(func() (*chinese, error) {
	cc, err := opencc.New("s2twp")
	if err != nil {
		return nil, fmt.Errorf("translate: loading OpenCC s2twp: %w", err)
	}
	// The s2twp chain is [STPhrases+STCharacters], [TWPhrases], [TWVariants].
	if len(cc.DictChains) == 0 {
		return nil, fmt.Errorf("translate: OpenCC s2twp has no dictionaries")
	}
	i := slices.Index(cc.DictChains[0].Files, "STCharacters.ocd2")
	if i < 0 || i >= len(cc.DictChains[0].Dicts) {
		return nil, fmt.Errorf("translate: OpenCC s2twp lacks STCharacters (have %v)", cc.DictChains[0].Files)
	}
	chars := cc.DictChains[0].Dicts[i]
	traditional := make(map[rune]bool)
	mapped := make(map[rune]bool)
	// The dictionary's own Get misses about a third of its keys (a quirk of
	// the cedar trie under it); PrefixMatch, which Convert uses, finds them.
	get := func(s string) []string {
		m, err := chars.PrefixMatch(s)
		if err != nil {
			return nil
		}
		return m[s]
	}
	for _, rt := range unicode.Han.R16 {
		scanHan(rune(rt.Lo), rune(rt.Hi), rune(rt.Stride), get, mapped, traditional)
	}
	for _, rt := range unicode.Han.R32 {
		scanHan(rune(rt.Lo), rune(rt.Hi), rune(rt.Stride), get, mapped, traditional)
	}
	for _, g := range cc.DictChains[1:] {
		for _, d := range g.Dicts {
			for _, vs := range d.Values {
				for _, v := range vs {
					for _, r := range v {
						traditional[r] = true
					}
				}
			}
		}
	}
	c := &chinese{s2twp: cc, simplified: make(map[rune]bool), repair: make(map[rune]string)}
	for r := range mapped {
		if traditional[r] {
			continue
		}
		c.simplified[r] = true
		t, err := cc.Convert(string(r))
		if err != nil {
			return nil, fmt.Errorf("translate: OpenCC s2twp: %w", err)
		}
		c.repair[r] = t
	}
	return c, nil
})

// scanHan records, for the characters lo..hi, which ones s2t changes and
// which characters are Traditional targets.
func scanHan(lo, hi, stride rune, get func(string) []string, mapped, traditional map[rune]bool) {
	for r := lo; r <= hi; r += stride {
		for _, v := range get(string(r)) { // none: s2t leaves r alone

			if v != string(r) {
				mapped[r] = true
			}
			for _, t := range v {
				traditional[t] = true
			}
		}
	}
}

// mustChinese returns the converter. New loads it first and reports a
// failure as an error, so the panic is reachable only by a broken build of
// the embedded dictionaries, never by data.
func mustChinese() *chinese {
	c, err := loadChinese()
	if err != nil {
		panic(err)
	}
	return c
}

// toTaiwan converts s with OpenCC s2twp: Simplified characters become
// Traditional ones and mainland vocabulary becomes Taiwan usage
// (软件→軟體, 网络→網路, 信息→資訊). Strings without Han characters are
// returned as they are, so text that needs no conversion keeps its bytes.
func toTaiwan(s string) string {
	if !hasHan(s) || !utf8.ValidString(s) {
		return s
	}
	out, err := mustChinese().s2twp.Convert(s)
	if err != nil { // only when a dictionary is missing, which loading rules out
		return s
	}
	return out
}

// toTaiwanRepaired converts s like toTaiwan and then replaces every
// Simplified-only character that is still there with its own conversion.
// OpenCC matches phrases greedily from the left, so a phrase it keeps as a
// proper name can swallow part of a word: in 永恒生命 it matches 恒生 (Hang
// Seng) and leaves 恒, which Taiwan writes 恆.
func toTaiwanRepaired(s string) string {
	s = toTaiwan(s)
	if _, ok := HasSimplifiedOnly(s); !ok || !utf8.ValidString(s) {
		return s
	}
	c := mustChinese()
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

// HasSimplifiedOnly returns the first character of s that OpenCC's s2t would
// change and that is not also a Traditional (or Taiwan standard) form, and
// whether there is one. Characters shared by both scripts (后, 干, 才, 台)
// do not count.
func HasSimplifiedOnly(s string) (rune, bool) {
	c := mustChinese()
	for _, r := range s {
		if r >= 0x2E80 && c.simplified[r] {
			return r, true
		}
	}
	return 0, false
}

func hasHan(s string) bool {
	for _, r := range s {
		if r >= 0x2E80 && unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}
