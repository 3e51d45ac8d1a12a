package translate

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/augmentdata/augment/translate/zhconv"
)

// chinese is the loaded OpenCC s2twp converter and the set of
// Simplified-only characters derived from its dictionaries.
type chinese struct {
	s2twp *zhconv.Converter
	// simplified holds every character that s2t maps to something else and
	// that is not itself a Traditional form: not a target of any
	// Simplified→Traditional character mapping, nor of the Taiwan phrase and
	// variant dictionaries (痴, 群, 秘 and 粽 are Taiwan standard forms even
	// though s2t would change them).
	simplified map[rune]bool
	// repair maps each Simplified-only character to its s2twp conversion on
	// its own, for the few that phrase matching leaves behind.
	repair map[rune]string
	// readBack checks conversions (see intact).
	readBack *readBack
}

// loadChinese builds the converter once; the dictionaries are embedded in
// package zhconv, so an error here means a broken build, not bad data.
var loadChinese = sync.OnceValues(func() (*chinese, error) {
	s2twp, err := zhconv.S2TWP()
	if err != nil {
		return nil, fmt.Errorf("translate: loading OpenCC s2twp: %w", err)
	}
	chars, err := zhconv.Entries(zhconv.STCharacters)
	if err != nil {
		return nil, err
	}
	traditional := make(map[rune]bool)
	mapped := make(map[rune]bool)
	for _, e := range chars {
		r, _ := utf8.DecodeRuneInString(e.Key)
		for _, v := range e.Values {
			if v != e.Key {
				mapped[r] = true
			}
			for _, t := range v {
				traditional[t] = true
			}
		}
	}
	for _, name := range append([]string{zhconv.TWVariants}, zhconv.TWPhrases...) {
		es, err := zhconv.Entries(name)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			for _, v := range e.Values {
				for _, t := range v {
					traditional[t] = true
				}
			}
		}
	}
	rb, err := loadReadBack(s2twp)
	if err != nil {
		return nil, err
	}
	c := &chinese{s2twp: s2twp, simplified: make(map[rune]bool), repair: make(map[rune]string), readBack: rb}
	for r := range mapped {
		if traditional[r] {
			continue
		}
		c.simplified[r] = true
		c.repair[r] = s2twp.Convert(string(r))
	}
	return c, nil
})

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
// It is for comparing strings; text the stage writes goes through
// convertText, which checks the conversion.
func toTaiwan(s string) string {
	if !hasHan(s) || !utf8.ValidString(s) {
		return s
	}
	return mustChinese().s2twp.Convert(s)
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

// chineseText reports whether s is Chinese: it holds Han characters and no
// kana or hangul, which make it Japanese or Korean (台風が来ますか).
func chineseText(s string) bool {
	return hasHan(s) && !hasKanaHangul(s)
}

func hasKanaHangul(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
	})
}

// mostlyForeign reports whether translated text has fewer Chinese characters
// than half its words in other scripts, as when a teacher translates a word
// or two of an English sentence (請 book a meeting called …) and keeps the
// rest. A Chinese translation says in one or two characters what English
// says in a word, so this holds only when most of the text was left
// untranslated; English names and product names in a Chinese sentence
// (請幫我在 Google Calendar 上預約會議) stay well clear of it. What is not
// language does not count: URLs, e-mail addresses, code-like tokens (see
// codeToken: IDs, snake_case, camelCase, numbers, words of one or two
// letters), Markdown code (fenced blocks and `spans`, closed ones) and the
// occurrences of the strings in keep (the record's locked values, quoted in
// the text).
func mostlyForeign(s string, keep []string) bool {
	for _, fence := range []string{"```", "`"} {
		parts := strings.Split(s, fence)
		var b strings.Builder
		for i, p := range parts {
			if i%2 == 0 || i == len(parts)-1 { // text, or after a fence never closed
				b.WriteString(p)
				b.WriteByte(' ')
			}
		}
		s = b.String()
	}
	for _, k := range keep {
		if strings.ContainsFunc(k, unicode.IsLetter) {
			s = strings.ReplaceAll(s, k, " ")
		}
	}
	han, foreign := 0, 0
	count := func(seg string) {
		seg = strings.TrimFunc(seg, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if isAddress(seg) || codeToken(seg) {
			return
		}
		foreign += words(seg)
	}
	for tok := range strings.FieldsSeq(s) {
		start := 0 // of the current run without Han characters
		for i, r := range tok {
			if isHan(r) {
				count(tok[start:i])
				han++
				start = i + utf8.RuneLen(r)
			}
		}
		count(tok[start:])
	}
	return 2*han < foreign
}

func hasHan(s string) bool { return strings.ContainsFunc(s, isHan) }

// isHan reports whether r is a Han character (the test below U+2E80 spares
// the table lookup for Latin text).
func isHan(r rune) bool { return r >= 0x2E80 && unicode.Is(unicode.Han, r) }
