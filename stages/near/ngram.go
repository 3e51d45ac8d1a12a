package near

// NGrams calls fn with the hash of every run of n consecutive word hashes of
// hs, in order; a sequence shorter than n gives nothing. Boundaries are words
// like any other, so callers that want n-grams across parts add no Break.
func NGrams(hs []uint64, n int, fn func(uint64)) {
	for i := 0; i+n <= len(hs); i++ {
		fn(SumOf(hs[i : i+n]))
	}
}
