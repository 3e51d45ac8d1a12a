package verify

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// o200kPattern is o200k_base's pre-tokenizer as tiktoken-go/tokenizer
// compiles it; regexp2 runs the library's generated matcher for it.
const o200kPattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

var o200kRegexp = regexp2.MustCompile(o200kPattern, regexp2.None)

// libraryPieces are the library matcher's pieces of text.
func libraryPieces(t testing.TB, text string) []string {
	var out []string
	m, err := o200kRegexp.FindStringMatch(text)
	for ; m != nil && err == nil; m, err = o200kRegexp.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ourPieces(text string) []string {
	var out []string
	for text != "" {
		n, ok := o200kPiece(text)
		if ok {
			out = append(out, text[:n])
		}
		text = text[n:]
	}
	return out
}

// pieceAlphabet holds characters of every class the pre-tokenizer tells
// apart: ASCII letters of both cases, digits, symbols, apostrophes and
// contraction letters, white space of several kinds (NEL, NBSP, ideographic
// space, line separator), title case, modifier letters, other letters
// (Chinese), marks, other numbers, long s, Kelvin sign.
var pieceAlphabet = []rune("aAsStTrReEvVmMlLdDxZ019'’\" ./\\\n\r\t\v\f,!?{}[]:_-\u0085\u00a0\u3000\u2028ǅʰ々中文한㐀䶿鿿，。０Ａａ\u0301\u0903\u20dd²Ⅻſ\u212aÉéÀ😀\x7f")

// TestO200kPiecesMatchLibrary: o200kPiece cuts text exactly where the
// library's matcher does, and counting the pieces one by one gives the
// library's count of the whole.
func TestO200kPiecesMatchLibrary(t *testing.T) {
	texts := slices.Clone(tokenTexts)
	texts = append(texts, "  \n \n  x", "a  b", "x \t\n", "'s 'S 'ſ 're 'Ve 'LL 'l don't I'M", "\u0301", "A\u0301b", "ʰA", "AʰB.", "ǅx", "1234567", "², ½", "a\x7fb", "\x7f", " \x7f!", "!\x7f!", "x//\n\n/", " !!\r\n/ y")
	for _, name := range []string{"glaive.json", "toolace.json", "xlam.json", "zh.jsonl", "chat.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "demo", "dumps", name))
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var sb strings.Builder
		for range rng.IntN(24) + 1 {
			sb.WriteRune(pieceAlphabet[rng.IntN(len(pieceAlphabet))])
		}
		texts = append(texts, sb.String())
	}
	for _, text := range texts {
		checkPieces(t, text)
	}
}

func checkPieces(t testing.TB, text string) {
	got, want := ourPieces(text), libraryPieces(t, text)
	if !slices.Equal(got, want) {
		t.Fatalf("pieces of %q:\n got %q\nwant %q", text, got, want)
	}
	whole, err := encoder().Count(text)
	if err != nil {
		t.Fatal(err)
	}
	if n := countPieces(text); n != whole {
		t.Fatalf("%q: %d tokens piece by piece, %d whole", text, n, whole)
	}
	merged := 0
	for _, piece := range got {
		merged += pieceTokens(piece)
	}
	if merged != whole {
		t.Fatalf("%q: %d tokens merging the pieces, %d whole", text, merged, whole)
	}
}

// FuzzO200kPieces: for any valid UTF-8 text, the pieces and the count are
// the library's.
func FuzzO200kPieces(f *testing.F) {
	for _, s := range tokenTexts {
		f.Add(s)
	}
	f.Add("  \n \n  x'll ſ 'ſ")
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || len(text) > tokenChunk {
			t.Skip()
		}
		checkPieces(t, text)
		if got, want := Tokens(text), countPieces(text); got != want {
			t.Fatalf("Tokens = %d, pieces %d", got, want)
		}
	})
}

// TestTokensLongAsBefore: text longer than tokenChunk is counted piece by
// piece when countChunked would cut it only where the pre-tokenizer always
// splits (the counts are then equal), and by countChunked otherwise.
func TestTokensLongAsBefore(t *testing.T) {
	for _, text := range []string{
		strings.Repeat("The weather in Paris is sunny, 21 degrees.\n", 400),
		strings.Repeat("今天天气很好，我们去公园。", 900),
		strings.Repeat("a", 10000),
		"start " + strings.Repeat("9", 5000) + " end",
		strings.Repeat("x", 3000) + strings.Repeat("ab ", 2000),
		string([]byte{'a', 0xff, 'b'}) + strings.Repeat("word ", 2000),
	} {
		want, _ := countChunked(text, tokenChunk, libraryCount)
		if got := Tokens(text); got != want {
			t.Errorf("%.30q… (%d bytes): Tokens = %d, countChunked = %d", text, len(text), got, want)
		}
	}
}

// FuzzTokensLong: text longer than tokenChunk (the fuzzer's text repeated
// past it, after a prefix of long runs) counts as the library counts its
// chunks, also where a cut is forced.
func FuzzTokensLong(f *testing.F) {
	for _, s := range tokenTexts {
		f.Add(s, uint16(0))
	}
	f.Add("a", uint16(5000))
	f.Add(" 9", uint16(4090))
	f.Fuzz(func(t *testing.T, unit string, run uint16) {
		if unit == "" {
			t.Skip()
		}
		text := strings.Repeat("x", int(run)) + strings.Repeat(unit, tokenChunk/len(unit)+1)
		want, _ := countChunked(text, tokenChunk, libraryCount)
		if got := Tokens(text); got != want {
			t.Fatalf("Tokens = %d, the library's chunks %d", got, want)
		}
	})
}

// BenchmarkTokensDumps counts the lines of the demo dumps (prose, JSON,
// Chinese): "pieces" as Tokens does, remembered pieces forgotten before
// each round ("cold") or kept ("warm", a run's steady state: words
// repeat), against "chunked", the library counting whole chunks.
func BenchmarkTokensDumps(b *testing.B) {
	var lines []string
	size := 0
	for _, name := range []string{"glaive.json", "toolace.json", "xlam.json", "zh.jsonl", "chat.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "demo", "dumps", name))
		if err != nil {
			b.Fatal(err)
		}
		for l := range strings.Lines(string(data)) {
			lines = append(lines, l)
			size += len(l)
		}
	}
	Tokens("warm up")
	b.Run("chunked", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			for _, l := range lines {
				countChunked(l, tokenChunk, libraryCount)
			}
		}
	})
	b.Run("pieces/cold", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			forgetPieces()
			for _, l := range lines {
				Tokens(l)
			}
		}
	})
	b.Run("pieces/warm", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			for _, l := range lines {
				Tokens(l)
			}
		}
	})
}

// TestClassesOf: the remembered classes of every character of the BMP,
// and of some beyond, are the unicode tables', asked twice (the second
// time remembered), and the class functions answer as the tables do for
// ASCII too.
func TestClassesOf(t *testing.T) {
	check := func(r rune) {
		want := map[string]bool{
			"letter": unicode.IsLetter(r), "number": unicode.IsNumber(r), "space": unicode.IsSpace(r),
			"upper": unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M),
			"lower": unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M), "mark": unicode.Is(unicode.M, r),
			"symbol": r != 0x7f && !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r),
		}
		for range 2 {
			got := map[string]bool{"letter": isLetter(r), "number": isNumber(r), "space": isSpace(r),
				"upper": isUpperKind(r), "lower": isLowerKind(r), "mark": isMark(r), "symbol": isSymbol(r)}
			if r >= utf8.RuneSelf { // span's bits beyond ASCII
				c := classesOf(r)
				got["upper"], got["lower"], got["symbol"] = c&cUpperKind != 0, c&cLowerKind != 0, c&cSymbol != 0
			}
			for k, w := range want {
				if got[k] != w {
					t.Fatalf("%U: %s is %v, the tables say %v", r, k, got[k], w)
				}
			}
		}
	}
	for r := rune(0); r <= 0xFFFF; r++ {
		check(r)
	}
	for _, r := range []rune{0x10000, 0x1F600, 0x20000, 0x2A6DF, 0x1D7CE, 0xE0100, unicode.MaxRune} {
		check(r)
	}
}

// TestASCIIClass: the ASCII table of span agrees with the classes.
func TestASCIIClass(t *testing.T) {
	for c := range rune(utf8.RuneSelf) {
		for _, k := range []struct {
			mask  uint8
			class func(rune) bool
		}{{aUpper, isUpperKind}, {aLower, isLowerKind}, {aSymbol, isSymbol}, {aPrefix, isPrefix}, {aSpace, isSpace}} {
			if got := asciiClass[c]&k.mask != 0; got != k.class(c) {
				t.Errorf("%q: mask %b says %v", c, k.mask, got)
			}
		}
	}
	for c := utf8.RuneSelf; c < len(asciiClass); c++ {
		if asciiClass[c] != 0 {
			t.Errorf("byte %#x has classes %b", c, asciiClass[c])
		}
	}
}

// FuzzASCIIPiece: where asciiPiece cuts a piece, anyPiece (the whole
// pre-tokenizer, which FuzzO200kPieces compares with the library) cuts
// the same.
func FuzzASCIIPiece(f *testing.F) {
	for _, s := range tokenTexts {
		f.Add(s)
	}
	f.Add("\x7fa 'S\vx!!\x7f 12² a'ſ\u0301")
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			t.Skip()
		}
		for s := text; s != ""; {
			want, _ := anyPiece(s)
			if got := asciiPiece(s); got != 0 && got != want {
				t.Fatalf("%q: asciiPiece %d, anyPiece %d", s, got, want)
			}
			s = s[want:]
		}
	})
}

// TestASCIIPieceOnDumps: on the demo dumps asciiPiece cuts most pieces,
// each as anyPiece does.
func TestASCIIPieceOnDumps(t *testing.T) {
	fast, all := 0, 0
	for _, name := range []string{"glaive.json", "toolace.json", "xlam.json", "zh.jsonl", "chat.jsonl"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "demo", "dumps", name))
		if err != nil {
			t.Fatal(err)
		}
		for s := string(b); s != ""; all++ {
			want, _ := anyPiece(s)
			if got := asciiPiece(s); got != 0 {
				fast++
				if got != want {
					t.Fatalf("%.40q: asciiPiece %d, anyPiece %d", s, got, want)
				}
			}
			s = s[want:]
		}
	}
	if fast < all/2 {
		t.Errorf("asciiPiece cut %d of %d pieces", fast, all)
	}
}
