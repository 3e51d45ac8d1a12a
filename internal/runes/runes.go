// Package runes holds the two character steps the pre-tokenizers (verify's
// o200k and hftok's tokenizer.json splitter) walk text with.
package runes

import "unicode/utf8"

// At decodes the character at byte i of s, as utf8.DecodeRuneInString(s[i:])
// does; ASCII and characters of three bytes (the scripts of China, Japan,
// Korea, India, South-East Asia) without its general path.
func At(s string, i int) (rune, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	if i+2 < len(s) && c&0xF0 == 0xE0 {
		c1, c2 := s[i+1], s[i+2]
		if c1&0xC0 == 0x80 && c2&0xC0 == 0x80 {
			r := rune(c&0x0F)<<12 | rune(c1&0x3F)<<6 | rune(c2&0x3F)
			if r >= 0x800 && (r < 0xD800 || r > 0xDFFF) { // not overlong, not a surrogate
				return r, 3
			}
		}
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
