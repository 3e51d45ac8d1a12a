package hftok

import (
	"unicode"

	"github.com/augmentdata/augment/internal/runes"
)

// The split patterns of the Llama 3 and Qwen 2/2.5/3 tokenizers (the
// cl100k family: Llama 3 takes up to three digits at once, Qwen one). The
// general regex engine needs about 0.5 ms per kilobyte for them; splitFast
// does the same split by hand, about a hundred times faster. Other patterns
// go through the regex engine.
const (
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternQwen   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// fastDigits returns the digit run length of a pattern splitFast handles.
func fastDigits(pattern string) (int, bool) {
	switch pattern {
	case patternLlama3:
		return 3, true
	case patternQwen:
		return 1, true
	}
	return 0, false
}

// Character classes as the patterns use them (\s, \p{L}, \p{N}).
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isNL(r rune) bool     { return r == '\r' || r == '\n' }

// splitFast calls fn with the [start, end) byte ranges of the pattern's
// matches over s, in order, trying the alternatives in the pattern's order
// at each position. The patterns match at every position of a non-empty
// text, so the ranges cover s.
func splitFast(s string, digits int, fn func(a, b int)) {
	for i := 0; i < len(s); {
		n := matchAt(s, i, digits)
		fn(i, i+n)
		i += n
	}
}

func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// matchAt returns the length in bytes of the match at i (at least one rune).
func matchAt(s string, i, digits int) int {
	r, size := runes.At(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' && i+1 < len(s) {
		c, n1 := runes.At(s, i+1)
		switch unicode.ToLower(c) {
		case 's', 't', 'm', 'd':
			return 1 + n1
		}
		if i+1+n1 < len(s) {
			c2, n2 := runes.At(s, i+1+n1)
			c, c2 = unicode.ToLower(c), unicode.ToLower(c2)
			if (c == 'r' && c2 == 'e') || (c == 'v' && c2 == 'e') || (c == 'l' && c2 == 'l') {
				return 1 + n1 + n2
			}
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(r) {
		return runes.Span(s, i, isLetter) - i
	}
	if !isNL(r) && !isNumber(r) && i+size < len(s) {
		if r2, _ := runes.At(s, i+size); isLetter(r2) {
			return runes.Span(s, i+size, isLetter) - i
		}
	}
	// \p{N}{1,digits}
	if isNumber(r) {
		j := i
		for k := 0; k < digits && j < len(s); k++ {
			c, n := runes.At(s, j)
			if !isNumber(c) {
				break
			}
			j += n
		}
		return j - i
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if r == ' ' {
		j++
	}
	if j < len(s) {
		if c, _ := runes.At(s, j); isOther(c) {
			j = runes.Span(s, j, isOther)
			return runes.Span(s, j, isNL) - i
		}
	}
	// From here r is white space: find the run's end, its last line break
	// and the start of its last rune.
	end, lastNL, last := i, -1, i
	for end < len(s) {
		c, n := runes.At(s, end)
		if !isSpace(c) {
			break
		}
		if isNL(c) {
			lastNL = end + n
		}
		last = end
		end += n
	}
	// \s*[\r\n]+: up to the last line break of the run.
	if lastNL > 0 {
		return lastNL - i
	}
	// \s+(?!\S): the run, less its last rune when a non-space follows.
	if end == len(s) || last > i {
		if end == len(s) {
			return end - i
		}
		return last - i
	}
	// \s+
	return size
}
