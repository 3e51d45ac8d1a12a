// Package near holds the text fingerprints behind the dedup and
// decontaminate stages: normalised words, MinHash signatures with LSH bands
// for near-duplicates, and word n-gram hashes for benchmark overlap.
//
// Normalisation (the same everywhere): text is put in Unicode NFKC form
// (compatibility characters folded: full-width "Ｐａｒｉｓ" is "Paris", a
// decomposed "café" the composed one, "ﬁ" is "fi"; text that is all ASCII
// is left as it is, NFKC would not change it), then lowercased; every run of
// letters, digits and combining marks is a word, every Han, Hiragana or
// Katakana character is a word on its own (those scripts write no spaces
// between words; Hangul does, and a run of Hangul is a word like a run of
// Latin letters), and everything else (punctuation, symbols, white space)
// only separates words. So "What's the weather, Paris?" and "whats the
// weather paris" differ in one word ("what s" against "whats"), and
// "北京天气" is four words.
//
// Every hash is fixed by this package (FNV-1a over UTF-8, then a 64-bit
// finaliser) and does not depend on the process, so fingerprints are the same
// across runs and machines.
package near

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Version names the normalisation and the n-gram rule of this package:
// a stage whose output depends on them includes it in its version, so a
// change here reruns it.
const Version = 2

// Words collects the normalised words of one or more texts as 64-bit
// hashes, and optionally their characters (for character n-grams). The zero
// value is ready to use; Reset reuses its memory.
type Words struct {
	// Chars keeps the normalised text as runes (words separated by one
	// space, parts by Boundary), needed for character shingles.
	Chars bool

	hashes []uint64
	runes  []rune
	parts  int
	// wide holds the positions in hashes of the words that are one Han or
	// kana character (Grams weighs them less), ascending.
	wide []int32
}

// Boundary is the word hash (and rune) that Break inserts between parts, so
// that "a b" + "c" and "a" + "b c" do not give the same sequence.
const (
	Boundary     uint64 = 0x9e3779b97f4a7c15
	boundaryRune rune   = 0x1f // unit separator; never part of a word
)

// Reset empties w, keeping its memory.
func (w *Words) Reset() {
	w.hashes, w.runes, w.parts, w.wide = w.hashes[:0], w.runes[:0], 0, w.wide[:0]
}

// Hashes returns the word hashes in order, boundaries included. The slice is
// reused by the next Reset.
func (w *Words) Hashes() []uint64 { return w.hashes }

// Runes returns the normalised text when Chars is set.
func (w *Words) Runes() []rune { return w.runes }

// Len is the number of words, boundaries excluded.
func (w *Words) Len() int { return len(w.hashes) - w.parts }

// Break marks the end of a part (a turn, a call): n-grams may span it, but
// the exact sum tells the parts apart. Breaks at the start or doubled are
// dropped, so empty parts do not count.
func (w *Words) Break() {
	if len(w.hashes) == 0 || w.hashes[len(w.hashes)-1] == Boundary {
		return
	}
	w.hashes = append(w.hashes, Boundary)
	w.parts++
	if w.Chars {
		w.runes = append(w.runes, boundaryRune)
	}
}

// Sum is a hash of the whole word sequence, boundaries included but a
// trailing boundary ignored: equal for texts that normalise the same.
func (w *Words) Sum() uint64 {
	hs := w.hashes
	if n := len(hs); n > 0 && hs[n-1] == Boundary {
		hs = hs[:n-1]
	}
	return SumOf(hs)
}

// WordSum is SumOf the word hashes without the boundaries: equal for
// texts with the same words, however they were split into parts.
func (w *Words) WordSum() uint64 {
	h := uint64(w.Len())
	for _, x := range w.hashes {
		if x != Boundary {
			h = Mix(h ^ x)
		}
	}
	return h
}

// SumOf hashes a sequence of word hashes.
func SumOf(hs []uint64) uint64 {
	h := uint64(len(hs))
	for _, x := range hs {
		h = Mix(h ^ x)
	}
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// Mix is a 64-bit finaliser (splitmix64's): every input bit affects every
// output bit.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Add appends the normalised words of s.
func (w *Words) Add(s string) {
	if !isASCII(s) {
		s = norm.NFKC.String(s) // s itself when it is in NFKC already
	}
	w.add(s)
}

// add appends the words of s, in NFKC form.
func (w *Words) add(s string) {
	h, in := uint64(fnvOffset), false
	flush := func() {
		if in {
			w.hashes = append(w.hashes, Mix(h))
			h, in = fnvOffset, false
		}
	}
	space := func() {
		if w.Chars && len(w.runes) > 0 {
			if last := w.runes[len(w.runes)-1]; last != ' ' && last != boundaryRune {
				w.runes = append(w.runes, ' ')
			}
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			default:
				if in {
					flush()
				}
				continue
			}
			if !in {
				space()
			}
			h = (h ^ uint64(c)) * fnvPrime
			in = true
			if w.Chars {
				w.runes = append(w.runes, rune(c))
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case isIdeograph(r):
			flush()
			space()
			var buf [4]byte
			n := utf8.EncodeRune(buf[:], r)
			for _, b := range buf[:n] {
				h = (h ^ uint64(b)) * fnvPrime
			}
			w.wide = append(w.wide, int32(len(w.hashes)))
			w.hashes = append(w.hashes, Mix(h))
			h = fnvOffset
			if w.Chars {
				w.runes = append(w.runes, r)
			}
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			r = unicode.ToLower(r)
			if !in {
				space()
			}
			var buf [4]byte
			n := utf8.EncodeRune(buf[:], r)
			for _, b := range buf[:n] {
				h = (h ^ uint64(b)) * fnvPrime
			}
			in = true
			if w.Chars {
				w.runes = append(w.runes, r)
			}
		default:
			flush()
		}
	}
	flush()
}

// isIdeograph reports whether r belongs to a script written without spaces
// between words, whose characters are words on their own here: Han and
// kana. (Hangul puts spaces between words: its runs are words.)
func isIdeograph(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r)
}

// isASCII reports whether s is all ASCII, which NFKC leaves as it is. It
// reads 8 bytes at a time (the compiler makes the shifts one load).
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if x&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Text returns the normalised text of the words at positions [from, to)
// (boundaries not counted, as in Grams), separated by one space, none
// between two Han or kana characters: "北京天气 today". It needs Chars.
func (w *Words) Text(from, to int) string {
	var out []rune
	k, in := -1, false // k: position of the word being read
	for _, r := range w.runes {
		if r == ' ' || r == boundaryRune {
			in = false
			continue
		}
		if !in {
			k++
			in = true
			if k >= from && k < to && len(out) > 0 && !(isIdeograph(out[len(out)-1]) && isIdeograph(r)) {
				out = append(out, ' ')
			}
		}
		if k >= to {
			break
		}
		if k >= from {
			out = append(out, r)
		}
	}
	return string(out)
}

// Normalize returns s as Words sees it: lowercased words separated by single
// spaces. It is for people and tests; the stages work on hashes.
func Normalize(s string) string {
	w := Words{Chars: true}
	w.Add(s)
	return string(w.runes)
}
