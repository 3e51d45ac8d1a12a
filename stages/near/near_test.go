package near

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"  What's the WEATHER, in Paris?? ", "what s the weather in paris"},
		{"get_weather(city=\"Paris\")", "get weather city paris"},
		{"北京天气 today", "北 京 天 气 today"},
		{"Ünïcode ÉTÉ", "ünïcode été"},
		{"tabs\tand\nnewlines", "tabs and newlines"},
		{"...!!!", ""},
		{"x1 2y", "x1 2y"},
	} {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func words(parts ...string) *Words {
	w := &Words{Chars: true}
	for _, p := range parts {
		w.Add(p)
		w.Break()
	}
	return w
}

func TestSumParts(t *testing.T) {
	if words("a b", "c").Sum() == words("a", "b c").Sum() {
		t.Error("parts must count in the exact sum")
	}
	if words("Hello, World!").Sum() != words("hello world").Sum() {
		t.Error("punctuation and case must not count")
	}
	if words("hello", "").Sum() != words("hello").Sum() {
		t.Error("an empty part must not count")
	}
	if words("hello").Len() != 1 {
		t.Error("Len counts boundaries")
	}
}

func mustMinHash(t testing.TB, shingle string, n int) *MinHash {
	t.Helper()
	m, err := NewMinHash(shingle, n, 14, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sign(m *MinHash, w *Words) []byte {
	sig := make([]byte, m.Size())
	if ok, _ := m.Sign(w, sig, nil); !ok {
		return nil
	}
	return sig
}

func TestNewMinHashErrors(t *testing.T) {
	for _, tc := range []struct {
		shingle        string
		n, bands, rows int
	}{
		{"line", 5, 14, 8}, {"word", 0, 14, 8}, {"word", 5, 0, 8}, {"word", 5, 14, 9}, {"char", 5, 14, 0},
	} {
		if _, err := NewMinHash(tc.shingle, tc.n, tc.bands, tc.rows, 1); err == nil {
			t.Errorf("NewMinHash(%q, %d, %d, %d) did not fail", tc.shingle, tc.n, tc.bands, tc.rows)
		}
	}
}

func TestSignEmptyAndShort(t *testing.T) {
	for _, sh := range []string{ShingleWord, ShingleChar} {
		m := mustMinHash(t, sh, 5)
		if sign(m, words("")) != nil || sign(m, words("?!")) != nil {
			t.Errorf("%s: an empty text has a signature", sh)
		}
		a, b := sign(m, words("hi")), sign(m, words("Hi!"))
		if a == nil || Similarity(a, b) != 1 {
			t.Errorf("%s: a text shorter than a shingle must sign as one shingle", sh)
		}
	}
}

// randomText returns n words drawn from a vocabulary large enough that two
// random texts share almost no shingle.
func randomText(r *rand.Rand, n int) []string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = fmt.Sprintf("w%d", r.IntN(50000))
	}
	return ws
}

// TestSimilarityEstimate checks the b-bit estimate against the exact Jaccard
// similarity over pairs with a known share of replaced words.
func TestSimilarityEstimate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range []string{ShingleWord, ShingleChar} {
		m := mustMinHash(t, sh, 3)
		var worst float64
		for trial := range 200 {
			base := randomText(r, 60)
			other := append([]string(nil), base...)
			for i := range trial % 20 {
				other[(i*7)%len(other)] = fmt.Sprintf("x%d", r.IntN(1e6))
			}
			x, y := words(strings.Join(base, " ")), words(strings.Join(other, " "))
			exact, est := m.Jaccard(x, y), Similarity(sign(m, x), sign(m, y))
			worst = max(worst, math.Abs(exact-est))
		}
		// 112 positions: the standard error is at most 0.05; 200 trials
		// stay within 4 of them.
		if worst > 0.2 {
			t.Errorf("%s: estimate off by %.3f", sh, worst)
		}
	}
}

// TestCandidateCurve checks that the LSH S-curve behaves as documented:
// pairs at J ≥ 0.9 nearly always share a band, pairs of unrelated texts
// never do.
func TestCandidateCurve(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := mustMinHash(t, ShingleWord, 1)
	share := func(a, b []byte) bool {
		for i := range m.Bands {
			if m.BandKey(a, i) == m.BandKey(b, i) {
				return true
			}
		}
		return false
	}
	near, far := 0, 0
	for range 300 {
		base := randomText(r, 100)
		other := append([]string(nil), base...)
		other[r.IntN(100)] = "changed" // J = 99/101 with 1-word shingles
		if share(sign(m, words(strings.Join(base, " "))), sign(m, words(strings.Join(other, " ")))) {
			near++
		}
		if share(sign(m, words(strings.Join(base, " "))), sign(m, words(strings.Join(randomText(r, 100), " ")))) {
			far++
		}
	}
	if near < 299 || far > 0 {
		t.Errorf("near pairs sharing a band: %d/300 (want ≥ 299); unrelated pairs: %d/300 (want 0)", near, far)
	}
	if th := m.Threshold(); th < 0.68 || th > 0.69 || math.Abs(m.Candidate(th)-0.5) > 1e-9 {
		t.Errorf("threshold of 14×8 = %.3f (candidate with probability %.3f), want 0.685 (0.5)", th, m.Candidate(th))
	}
	// The S-curve: 21 % at 0.6, 92 % at the default threshold 0.8.
	if lo, hi := m.Candidate(0.6), m.Candidate(0.8); math.Abs(lo-0.211) > 0.001 || math.Abs(hi-0.924) > 0.001 {
		t.Errorf("Candidate(0.6) = %.3f, Candidate(0.8) = %.3f, want 0.211 and 0.924", lo, hi)
	}
}

func TestNGrams(t *testing.T) {
	w := words("one two three four")
	var got []uint64
	NGrams(w.Hashes()[:w.Len()], 3, func(h uint64) { got = append(got, h) })
	if len(got) != 2 {
		t.Fatalf("3-grams of 4 words: %d, want 2", len(got))
	}
	v := words("ONE two, three!")
	var again []uint64
	NGrams(v.Hashes()[:v.Len()], 3, func(h uint64) { again = append(again, h) })
	if len(again) != 1 || again[0] != got[0] {
		t.Error("the same words must give the same 3-gram")
	}
	NGrams(v.Hashes()[:v.Len()], 4, func(uint64) { t.Error("3 words have no 4-gram") })
}

func BenchmarkSign(b *testing.B) {
	text := "Can you find me the cheapest direct flight from San Francisco to Tokyo on the 3rd of March, " +
		"economy class, for two adults? search_flights origin SFO destination NRT date 2025-03-03 cabin economy passengers 2"
	for _, sh := range []string{ShingleWord, ShingleChar} {
		b.Run(sh, func(b *testing.B) {
			m := mustMinHash(b, sh, 5)
			w := &Words{Chars: sh == ShingleChar}
			sig := make([]byte, m.Size())
			var mins []uint64
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				w.Reset()
				w.Add(text)
				_, mins = m.Sign(w, sig, mins)
			}
		})
	}
}
