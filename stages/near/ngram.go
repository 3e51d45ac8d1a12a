package near

// NGrams calls fn with the hash of every run of n consecutive word hashes of
// hs, in order; a sequence shorter than n gives nothing. Boundaries are words
// like any other, so callers that want n-grams across parts add no Break.
// The hash is a polynomial over the words, rolled in O(1) per n-gram, then
// mixed.
func NGrams(hs []uint64, n int, fn func(uint64)) {
	if n < 1 || len(hs) < n {
		return
	}
	const p = 0x100000001b3 // odd: powers never vanish mod 2⁶⁴
	top := uint64(1)        // p^(n-1)
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
