package near

const gramPrime = 0x100000001b3 // odd: powers never vanish mod 2⁶⁴

// NGrams calls fn with the hash of every run of n consecutive word hashes of
// hs, in order; a sequence shorter than n gives nothing. Boundaries are words
// like any other, so callers that want n-grams across parts add no Break.
// The hash is a polynomial over the words, rolled in O(1) per n-gram, then
// mixed.
func NGrams(hs []uint64, n int, fn func(uint64)) {
	if n < 1 || len(hs) < n {
		return
	}
	const p = gramPrime
	top := uint64(1) // p^(n-1)
	for range n - 1 {
		top *= p
	}
	var h uint64
	for i, x := range hs {
		if i >= n {
			h -= hs[i-n] * top
		}
		h = h*p + x
		if i >= n-1 {
			fn(Mix(h ^ uint64(n)))
		}
	}
}

// Weights of Grams, in units: a word is 3, a Han or kana character 2, so
// such a character counts as 2/3 of a word. Chinese takes about 1.5
// characters where English takes a word (README, decontaminate): with one
// unit each, a 13-gram of Chinese was 13 characters, a greeting and a
// request ("你好，我想请你帮我查一下今天") that any two questions may share.
const (
	wordUnits = 3
	wideUnits = 2
)

// Grams calls fn for every n-gram of the words of w, boundaries skipped,
// in order, with its hash and its bounds [from, to) in word positions
// (boundaries not counted). An n-gram is the shortest run of words from a
// position that weighs n words, a Han or kana character weighing 2/3 of a
// word: n words of English, ⌈3n/2⌉ characters of Chinese (20 for n = 13),
// or a mix. Text weighing less than n words has no n-gram. For text
// without Han or kana the hashes are NGrams' over the same words. It
// allocates nothing for n up to len(powers).
func (w *Words) Grams(n int, fn func(h uint64, from, to int)) {
	if n < 1 {
		return
	}
	hs, wide := w.hashes, w.wide
	need := n * wordUnits
	pow := powers[:]
	if longest := (need + wideUnits - 1) / wideUnits; longest > len(pow) {
		pow = make([]uint64, longest)
		pow[0] = 1
		for i := 1; i < longest; i++ {
			pow[i] = pow[i-1] * gramPrime
		}
	}
	// The window is the words of hs[i:j] (boundaries skipped): from and to
	// count them, total weighs them; ki and kj are the next positions in
	// wide at or after i and j.
	var h uint64
	i, j, from, to, total, ki, kj := 0, 0, 0, 0, 0, 0, 0
	for {
		for j < len(hs) && total < need {
			if kj < len(wide) && int(wide[kj]) == j {
				kj++
				total += wideUnits
			} else if hs[j] == Boundary {
				j++
				continue
			} else {
				total += wordUnits
			}
			h = h*gramPrime + hs[j]
			j++
			to++
		}
		if total < need {
			return
		}
		for hs[i] == Boundary && !(ki < len(wide) && int(wide[ki]) == i) {
			i++
		}
		fn(Mix(h^uint64(to-from)), from, to)
		h -= hs[i] * pow[to-from-1]
		if ki < len(wide) && int(wide[ki]) == i {
			ki++
			total -= wideUnits
		} else {
			total -= wordUnits
		}
		i++
		from++
	}
}

// powers are gramPrime's powers, for Grams.
var powers = func() (p [256]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * gramPrime
	}
	return p
}()
