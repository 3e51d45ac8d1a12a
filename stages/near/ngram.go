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
// without Han or kana the hashes are NGrams' over the same words.
func (w *Words) Grams(n int, fn func(h uint64, from, to int)) {
	if n < 1 {
		return
	}
	hs, wide := w.flat[:0], w.flatW[:0]
	k := 0 // next position in w.wide
	for i, x := range w.hashes {
		if k < len(w.wide) && int(w.wide[k]) == i {
			k++
			hs, wide = append(hs, x), append(wide, true)
			continue
		}
		if x != Boundary {
			hs, wide = append(hs, x), append(wide, false)
		}
	}
	w.flat, w.flatW = hs, wide
	need := n * wordUnits
	longest := (need + wideUnits - 1) / wideUnits
	if len(w.pow) < longest {
		w.pow = make([]uint64, longest)
		w.pow[0] = 1
		for i := 1; i < longest; i++ {
			w.pow[i] = w.pow[i-1] * gramPrime
		}
	}
	units := func(i int) int {
		if wide[i] {
			return wideUnits
		}
		return wordUnits
	}
	var h uint64
	j, total := 0, 0
	for i := range hs {
		for j < len(hs) && total < need {
			h = h*gramPrime + hs[j]
			total += units(j)
			j++
		}
		if total < need {
			return
		}
		fn(Mix(h^uint64(j-i)), i, j)
		h -= hs[i] * w.pow[j-1-i]
		total -= units(i)
	}
}
