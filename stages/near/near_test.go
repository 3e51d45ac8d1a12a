package near

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
		// NFKC: decomposed and composed, full-width and ASCII, ligatures
		// and compatibility characters read the same.
		{"cafe\u0301 CAFÉ", "café café"},
		{"Ｐａｒｉｓ　ｔｏｄａｙ！", "paris today"},
		{"ﬁnd ①②", "find 12"},
		{"ＡＢＣ１２３", "abc123"},
		{"ｶﾀｶﾅ", "カ タ カ ナ"},  // half-width katakana: full-width, a word each
		{"\uF900", "\u8C48"}, // a compatibility ideograph: its unified one
		// Hangul writes spaces between words: a run is a word.
		{"안녕하세요, 저는 오늘 서울의 날씨를 알고 싶어요.", "안녕하세요 저는 오늘 서울의 날씨를 알고 싶어요"},
		{"서울weather", "서울weather"},
		// Han and kana write none: each character is a word.
		{"東京の天気は？", "東 京 の 天 気 は"},
		{"我需要为John Doe生成", "我 需 要 为 john doe 生 成"},
	} {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestNormalizeNFKCSums: a text and its NFKC-equivalent variants have the
// same exact sum (dedup's mode: exact, decontaminate's exact rule).
func TestNormalizeNFKCSums(t *testing.T) {
	for _, pair := range [][2]string{
		{"Café au lait for two, please", "Cafe\u0301 au lait for two, please"},
		{"Please book a table for 4 people at 7pm", "Ｐｌｅａｓｅ　ｂｏｏｋ　ａ　ｔａｂｌｅ　ｆｏｒ　４　ｐｅｏｐｌｅ　ａｔ　７ｐｍ"},
		{"北京的天气怎么样？", "北京的天气怎么样?"},
	} {
		if words(pair[0]).Sum() != words(pair[1]).Sum() {
			t.Errorf("%q and %q differ: %q, %q", pair[0], pair[1], Normalize(pair[0]), Normalize(pair[1]))
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

type gram struct {
	h        uint64
	from, to int
	text     string
}

func grams(w *Words, n int) []gram {
	var gs []gram
	w.Grams(n, func(h uint64, from, to int) { gs = append(gs, gram{h, from, to, w.Text(from, to)}) })
	return gs
}

func TestGrams(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
		n     int
		want  []string // texts of the n-grams, in order
	}{
		{"words", []string{"one two three four"}, 3, []string{"one two three", "two three four"}},
		{"short", []string{"one two"}, 3, nil},
		{"boundaries skipped", []string{"one two", "three"}, 3, []string{"one two three"}},
		// 2/3 of a word per character: 3 words are 5 characters (10 ≥ 9 units).
		{"han", []string{"北京的天气怎么样"}, 3, []string{"北京的天气", "京的天气怎", "的天气怎么", "天气怎么样"}},
		{"han short", []string{"北京的天"}, 3, nil},
		// In units (word 3, character 2, n = 3 words = 9): 为 john doe is
		// 8, one more character makes 10; doe 生成发 is 9; 生成发票 is 8.
		{"mixed", []string{"为John Doe生成发票"}, 3, []string{"为 john doe 生", "john doe 生成", "doe 生成发"}},
		{"hangul runs are words", []string{"서울의 날씨를 알고 싶어요"}, 3, []string{"서울의 날씨를 알고", "날씨를 알고 싶어요"}},
		{"13-gram of Chinese is 20 characters", []string{"你好，我想请你帮我查一下今天北京的天气怎么样？"}, 13,
			[]string{"你好我想请你帮我查一下今天北京的天气怎么", "好我想请你帮我查一下今天北京的天气怎么样"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, g := range grams(words(tc.parts...), tc.n) {
				got = append(got, g.text)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGramsEnglishAsNGrams: without Han or kana, Grams is NGrams over the
// words (the same hashes, n words each), so English decontamination is
// what it was.
func TestGramsEnglishAsNGrams(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 50 {
		w := words(strings.Join(randomText(r, 1+r.IntN(40)), " "), "Ünïcode ÉTÉ café", strings.Join(randomText(r, r.IntN(20)), " "))
		for _, n := range []int{1, 5, 13} {
			var want []uint64
			flat := slices.DeleteFunc(slices.Clone(w.Hashes()), func(x uint64) bool { return x == Boundary })
			NGrams(flat, n, func(h uint64) { want = append(want, h) })
			gs := grams(w, n)
			if len(gs) != len(want) {
				t.Fatalf("n=%d: %d grams, want %d", n, len(gs), len(want))
			}
			for i, g := range gs {
				if g.h != want[i] || g.from != i || g.to != i+n {
					t.Fatalf("n=%d gram %d: %+v, want hash %x over [%d, %d)", n, i, g, want[i], i, i+n)
				}
			}
		}
	}
}

// TestGramsSameInside: an n-gram depends only on the words it covers and
// what follows from its start, so a text copied inside another gives the
// other its n-grams (a leak is found whatever surrounds it).
func TestGramsSameInside(t *testing.T) {
	item := "你能帮我找到最新的美国体育新闻吗？那太好了！"
	inner := map[uint64]bool{}
	for _, g := range grams(words(item), 13) {
		inner[g.h] = true
	}
	if len(inner) == 0 {
		t.Fatal("no 13-gram in a 21-character question")
	}
	outer := grams(words("Hello 你好，"+item+"还有 other words 谢谢"), 13)
	for _, g := range outer {
		delete(inner, g.h)
	}
	if len(inner) != 0 {
		t.Errorf("%d of the item's n-grams are not found in the text holding it", len(inner))
	}
}

func TestText(t *testing.T) {
	w := words("Hello, 北京 today!", "天气 ok")
	for _, tc := range []struct {
		from, to int
		want     string
	}{{0, 7, "hello 北京 today 天气 ok"}, {1, 3, "北京"}, {2, 5, "京 today 天"}, {6, 9, "ok"}, {3, 3, ""}} {
		if got := w.Text(tc.from, tc.to); got != tc.want {
			t.Errorf("Text(%d, %d) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
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

// FuzzWords: the runes kept for Text hold exactly the words hashed (Text
// finds each word by position), and every n-gram lies within the words.
func FuzzWords(f *testing.F) {
	f.Add("What's the weather, Paris?", "北京天气 today")
	f.Add("Ｐａｒｉｓ cafe\u0301", "안녕하세요 ｶﾀｶﾅ ①")
	f.Add("\x1f \uFEFF", "a\x1fb")
	f.Add("你好，我想请你帮我查一下今天北京的天气怎么样？", "谢谢 thanks 東京の天気")
	f.Fuzz(func(t *testing.T, a, b string) {
		w := &Words{Chars: true}
		w.Add(a)
		w.Break()
		w.Add(b)
		n := len(strings.FieldsFunc(string(w.Runes()), func(r rune) bool { return r == ' ' || r == boundaryRune }))
		if n != w.Len() {
			t.Fatalf("%d words kept as runes, %d hashed: %q", n, w.Len(), string(w.Runes()))
		}
		last := -1
		w.Grams(2, func(_ uint64, from, to int) {
			if from <= last || from >= to || to > w.Len() || w.Text(from, to) == "" {
				t.Fatalf("gram [%d, %d) of %d words after %d", from, to, w.Len(), last)
			}
			last = from
		})
		for _, n := range []int{1, 2, 3, 13} {
			if got, want := fmt.Sprint(grams(w, n)), fmt.Sprint(refGrams(w, n)); got != want {
				t.Fatalf("n=%d: Grams %s, want %s", n, got, want)
			}
		}
		flat := slices.DeleteFunc(slices.Clone(w.Hashes()), func(x uint64) bool { return x == Boundary })
		if w.WordSum() != SumOf(flat) {
			t.Fatal("WordSum is not SumOf the words")
		}
	})
}

// refGrams is Grams written plainly: the words without boundaries, each
// window summed from its start, its hash the polynomial over its words.
func refGrams(w *Words, n int) []gram {
	type word struct {
		h    uint64
		wide bool
	}
	var ws []word
	for i, x := range w.Hashes() {
		wide := slices.Contains(w.wide, int32(i))
		if x != Boundary || wide {
			ws = append(ws, word{x, wide})
		}
	}
	var gs []gram
	for i := range ws {
		units, j := 0, i
		for j < len(ws) && units < 3*n {
			units += 3
			if ws[j].wide {
				units--
			}
			j++
		}
		if units < 3*n {
			break
		}
		var h uint64
		for _, x := range ws[i:j] {
			h = h*0x100000001b3 + x.h
		}
		gs = append(gs, gram{Mix(h ^ uint64(j-i)), i, j, w.Text(i, j)})
	}
	return gs
}

func BenchmarkAdd(b *testing.B) {
	for _, tc := range []struct{ name, text string }{
		{"ascii", "Can you find me the cheapest direct flight from San Francisco to Tokyo on the 3rd of March, economy class, for two adults?"},
		{"latin", "Pouvez-vous me trouver le vol direct le moins cher de San Francisco à Tokyo le 3 mars, en classe économique, pour deux adultes ?"},
		{"zh", "你能帮我找到三月三日从旧金山飞往东京最便宜的直飞航班吗？经济舱，两位成人。"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var w Words
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				w.Reset()
				w.Add(tc.text)
			}
		})
	}
}

func TestIsASCII(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{{"", true}, {"abc", true}, {"exactly8", true}, {"seventeen bytes!!", true}, {"é", false}, {"1234567é", false}, {"12345678é", false}, {"abcdefghijklmno\x80", false}, {"\x7f", true}} {
		if got := isASCII(tc.s); got != tc.want {
			t.Errorf("isASCII(%q) = %v", tc.s, got)
		}
	}
}
