// Package runes holds the two character steps the pre-tokenizers (verify's
// o200k and hftok's tokenizer.json splitter) walk text with.
package runes

import "unicode/utf8"

// At decodes the character at byte i of s (ASCII without a call).
func At(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// Span returns the end of the run of characters in class from byte i of s.
func Span(s string, i int, class func(rune) bool) int {
	for i < len(s) {
		r, n := At(s, i)
		if !class(r) {
			break
		}
		i += n
	}
	return i
}
