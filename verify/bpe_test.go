package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/internal/cputime"
	"github.com/augmentdata/augment/internal/swar"
	"github.com/augmentdata/augment/stages/record"
)

// TestPieceTokensMatchLibrary: every piece of the demo dumps, of the
// shared data's dumps when present, and of texts with edges merges into
// as many tokens as the library encodes the piece in, through the
// library's ranks (not a fallback to the library).
func TestPieceTokensMatchLibrary(t *testing.T) {
	if ranks() == nil {
		t.Fatal("the library's ranks were not found: pieces are merged by the library, slowly")
	}
	highRanks() // long pieces cut (segmentTokens), as in a run past highAfter
	texts := append([]string(nil), tokenTexts...)
	read := func(name string) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	for _, name := range []string{"glaive.json", "toolace.json", "xlam.json", "zh.jsonl", "chat.jsonl"} {
		read(filepath.Join("..", "testdata", "demo", "dumps", name))
	}
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "derived", "*.json")); len(names) > 0 {
		for _, name := range names {
			read(name)
		}
	} else {
		t.Logf("no shared data at %s (set AUGMENT_SHARED_DATA): the demo dumps only", dir)
	}
	seen := map[string]bool{}
	merged := 0
	for _, text := range texts {
		for _, piece := range ourPieces(text) {
			if seen[piece] {
				continue
			}
			seen[piece] = true
			if got, want := pieceTokens(piece), libraryCount(piece); got != want {
				t.Fatalf("piece %q: %d tokens, the library %d", piece, got, want)
			}
			if _, ok := ranks()[piece]; !ok {
				merged++
			}
		}
	}
	if merged < 100 {
		t.Fatalf("only %d pieces needed a merge", merged)
	}
	t.Logf("%d distinct pieces, %d merged", len(seen), merged)
}

// TestMergeCountShapes: pieces of every length up to 300 bytes, of bytes
// that merge well and badly, count as the library counts them, and the
// scan and the heap merge them alike.
func TestMergeCountShapes(t *testing.T) {
	for _, unit := range []string{"ab", "qz", "我们", "😀", "x1", "\u0301", "aé", "a", " "} {
		for n := 1; len(strings.Repeat(unit, n)) < 300; n++ {
			piece := strings.Repeat(unit, n)
			if got, want := pieceTokens(piece), libraryCount(piece); got != want {
				t.Fatalf("%q: %d tokens, the library %d", piece, got, want)
			}
			if s, h := mergeScan(ranks(), piece), mergeHeap(ranks(), piece); s != h {
				t.Fatalf("%q: scan %d parts, heap %d", piece, s, h)
			}
		}
	}
}

// FuzzMergeHeap: for any bytes, the heap merges into as many parts as the
// scan (which merges like the library's scan: TestPieceTokensMatchLibrary).
func FuzzMergeHeap(f *testing.F) {
	for _, s := range []string{"abracadabra", "我们的", "😀😀x", "\xff\x00ab", " 'll"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, piece string) {
		if piece == "" || len(piece) > 1024 {
			t.Skip()
		}
		if s, h := mergeScan(ranks(), piece), mergeHeap(ranks(), piece); s != h {
			t.Fatalf("%q: scan %d parts, heap %d", piece, s, h)
		}
	})
}

func BenchmarkPieceTokens(b *testing.B) {
	pieces := []string{" getWeather", "敏捷的棕色狐狸跳过了懒狗", " antidisestablishmentarianism", "qzxv", " 😀😀"}
	b.Run("ours", func(b *testing.B) {
		for b.Loop() {
			for _, p := range pieces {
				pieceTokens(p)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			for _, p := range pieces {
				libraryCount(p)
			}
		}
	})
}

// TestOneByteOneToken: every ASCII character that starts a piece is one
// token of its own, as countPieces counts a piece of one byte unseen.
func TestOneByteOneToken(t *testing.T) {
	for c := range 0x80 {
		s := string(rune(c))
		if _, ok := o200kPiece(s); !ok {
			continue // DEL
		}
		if n := libraryCount(s); n != 1 {
			t.Errorf("%q: %d tokens", s, n)
		}
	}
}

// TestPairRanks: every two-byte string has the library's rank, or none,
// looked up and remembered.
func TestPairRanks(t *testing.T) {
	rk := ranks()
	for round := range 2 {
		for p := range 1 << 16 {
			s := string([]byte{byte(p >> 8), byte(p)})
			want := noRank
			if r, ok := rk[s]; ok {
				want = uint32(r)
			}
			if got := rankOf(rk, s); got != want {
				t.Fatalf("round %d, %q: rank %d, want %d", round, s, got, want)
			}
		}
	}
}

// highRank is the rank (as rankOf finds it) of the string s (inHigh) in t, or noRank.
func highRank(t *highTable, s string) uint32 {
	if !t.mayHold(s) {
		return noRank
	}
	return t.rank(s)
}

// TestHighTable: every token the table answers for (inHigh) is in it with
// the library's rank, and strings of that shape that are no token (each
// such token with its last byte changed, or cut or grown by a byte) are
// not.
func TestHighTable(t *testing.T) {
	rk, ht := ranks(), highRanks()
	if ht == nil {
		t.Fatal("no table of ranks: merges look every string up in the library's map")
	}
	held, absent := 0, 0
	for tok, r := range rk {
		if !inHigh(tok) {
			continue
		}
		held++
		if got := highRank(ht, tok); got != uint32(r) {
			t.Fatalf("%q: rank %d, want %d", tok, got, r)
		}
		for _, s := range []string{tok[:len(tok)-1] + string(tok[len(tok)-1]^0x01), tok[:len(tok)-1], tok + "\x80"} {
			if !inHigh(s) {
				continue
			}
			want := noRank
			if r, ok := rk[s]; ok {
				want = uint32(r)
			} else {
				absent++
			}
			if got := highRank(ht, s); got != want {
				t.Fatalf("%q: rank %d, want %d", s, got, want)
			}
		}
	}
	t.Logf("%d tokens held, %d strings that are none", held, absent)
	if held < 1000 || absent < 1000 {
		t.Fatalf("%d tokens, %d strings that are none: too few to test", held, absent)
	}
}

// TestTokenShapes: every token has a shape the table holds (mayHold), so
// that rankOf rules out no token; and the shapes rule out most strings a
// merge of Chinese text looks up that are none.
func TestTokenShapes(t *testing.T) {
	rk, ht := ranks(), highRanks()
	for tok := range rk {
		if !ht.mayHold(tok) {
			t.Fatalf("%q (%d bytes, tail %d): a token ruled out", tok, len(tok), tail(tok))
		}
	}
	text := "敏捷的棕色狐狸跳过了懒狗，然后在河边的大树下睡了一个长长的午觉"
	none, out := 0, 0
	for i := range len(text) {
		for j := i + 3; j <= len(text) && j <= i+24; j++ {
			s := text[i:j]
			if _, ok := rk[s]; ok {
				continue
			}
			none++
			if !ht.mayHold(s) {
				out++
			}
		}
	}
	t.Logf("%d of %d strings that are no token ruled out", out, none)
	if out < none/2 {
		t.Fatalf("only %d of %d strings that are no token ruled out", out, none)
	}
}

// FuzzRankOf: for any string, rankOf gives the library's rank, or noRank
// for a string that is no token, by every way it looks up (the pairs, the
// shapes, the table, the map). It holds the table to the library too: with
// the table built, rankOf answers a string the table holds (inHigh) from
// it alone.
func FuzzRankOf(f *testing.F) {
	for _, s := range []string{"我们的", " 我们", "\xe4\xbd\xa0\xe5", "\xbd\xa0\xe5", "😀😀", "ещё", " the", "ab", "a", "\xff", "\xff\xfe\xfd",
		" getWeather", strings.Repeat("=", 40), "ি\xe0\xb0"} {
		f.Add(s)
	}
	highRanks()
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			t.Skip()
		}
		want := noRank
		if r, ok := ranks()[s]; ok {
			want = uint32(r)
		}
		if got := rankOf(ranks(), s); got != want {
			t.Fatalf("%q: rank %d, want %d", s, got, want)
		}
	})
}

// BenchmarkHighTable is the cost of building highRanks, which a run pays
// once, when it first merges text in a script other than Latin.
func BenchmarkHighTable(b *testing.B) {
	rk := ranks()
	cpu0 := cputime.Process()
	for b.Loop() {
		newHighTable(rk)
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkMergeSample merges the distinct pieces of a report's token
// sample of each format (sampleRecords) that are no token, each once,
// the remembered counts (of segments) forgotten first: the merges a run's
// first counts make. Reported: CPU ns per byte merged.
func BenchmarkMergeSample(b *testing.B) {
	for _, format := range []string{"glaive", "toolace", "xlam"} {
		recs, _ := sampleRecords(b, format)
		seen := map[string]bool{}
		var pieces []string
		size := 0
		collect := func(text string) int {
			for _, piece := range ourPieces(text) {
				if len(piece) > 1 && !seen[piece] && rankOf(ranks(), piece) == noRank {
					seen[piece] = true
					pieces = append(pieces, piece)
					size += len(piece)
				}
			}
			return 0
		}
		for _, r := range recs {
			recordTokens(r, collect, func(r *record.Record) int { return collect(systemText(r)) },
				func(c *record.Call) int { return collect(callJSON(*c)) })
		}
		for _, p := range pieces { // past highAfter: the tables a run merges with
			pieceTokens(p)
		}
		b.Run(format, func(b *testing.B) {
			cpu0 := cputime.Process()
			for b.Loop() {
				forgetPieces()
				for _, p := range pieces {
					pieceTokens(p)
				}
			}
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*size), "cpu-ns/B")
		})
	}
}

// segmentAlphabet is what FuzzSegmentTokens writes its pieces in: common
// Chinese characters, which tokens join in pairs, and letters and signs
// of scripts with tokens that start or end inside a character (Bengali,
// Tamil, Thai, Georgian, Korean), and a few ASCII characters.
var segmentAlphabet = []rune("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质信িীুূেোাৃ্ংঃকখগঘঙচছজঝটঠডঢণতথদধনপফবভমযরলশষসহதிமுவாகெேைொோௌ்டணறனแกขคงจฉชซญดตถทธนบปผพฟภมยรลวศษสหอฮะัาำิีึืุูเแโใไ่้๊๋็ვაბგდეზთიკლმნოპჟრსტუფქღყშჩცძწჭხჯჰ가나다라마바사아자차카타파하한국어는의에를을이다 ,\"(a1")

// segmentText is the fuzzers' text of code: a character of
// segmentAlphabet for each byte (shifted by its place, so that repeated
// bytes vary).
func segmentText(code []byte) string {
	var b strings.Builder
	for i, c := range code {
		b.WriteRune(segmentAlphabet[(int(c)+i*int(code[0]))%len(segmentAlphabet)])
	}
	return b.String()
}

// FuzzSegmentTokens: any run of characters of several bytes, cut where no
// token crosses and merged in parts, merges into as many parts as merged
// whole (mergeTokens, which TestPieceTokensMatchLibrary compares with the
// library on whole pieces).
func FuzzSegmentTokens(f *testing.F) {
	for _, s := range []string{"\x00\x01\x02\x03", "abcabcabc", "\xff\xfe\x10\x20\x30\x40\x50", "数据据数"} {
		f.Add([]byte(s))
	}
	ht := highRanks()
	f.Fuzz(func(t *testing.T, code []byte) {
		if len(code) == 0 || len(code) > 256 {
			t.Skip()
		}
		s := segmentText(code)
		if got, want := ht.segmentTokens(ranks(), s), mergeTokens(ranks(), s); got != want {
			t.Fatalf("%q: %d parts merged in segments, %d whole", s, got, want)
		}
	})
}

// FuzzTokensSegmented: any text in segmentAlphabet counts as the library
// counts it (Count), with highRanks built, so that its long pieces are
// cut into segments.
func FuzzTokensSegmented(f *testing.F) {
	for _, s := range []string{"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09", "abcabcabcabcabcabc", "\xff\xfe\x10\x20\x30\x40\x50"} {
		f.Add([]byte(s))
	}
	highRanks()
	f.Fuzz(func(t *testing.T, code []byte) {
		if len(code) == 0 || len(code) > 256 {
			t.Skip()
		}
		s := segmentText(code)
		if got, want := Tokens(s), libraryCount(s); got != want {
			t.Fatalf("%q: %d tokens, the library %d", s, got, want)
		}
	})
}

// TestSegmentTokens: every piece of the shared data's (or the demo's)
// dumps that holds a character of several bytes counts the same
// cut into segments as merged whole and as the library counts it, and
// the Chinese pieces are cut.
func TestSegmentTokens(t *testing.T) {
	ht := highRanks()
	var texts []string
	dir := os.Getenv("AUGMENT_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	names, _ := filepath.Glob(filepath.Join(dir, "derived", "*_zh_demo.json"))
	shared := len(names) > 0
	if !shared {
		t.Logf("%s holds no derived/*_zh_demo.json (../shared/data is not beside the repository): the demo's zh.jsonl alone is checked, without the floor on long pieces", dir)
	}
	names = append(names, filepath.Join("..", "testdata", "demo", "dumps", "zh.jsonl"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	seen := map[string]bool{}
	long, cut := 0, 0
	for _, text := range texts {
		for _, piece := range ourPieces(text) {
			if seen[piece] || len(piece) < mergeScanMax || swar.ASCII(piece) {
				continue
			}
			seen[piece] = true
			whole := mergeTokens(ranks(), piece)
			if got := ht.segmentTokens(ranks(), piece); got != whole {
				t.Fatalf("%q: %d parts merged in segments, %d whole", piece, got, whole)
			}
			if lib := libraryCount(piece); lib != whole {
				t.Fatalf("%q: %d parts, the library %d", piece, whole, lib)
			}
			long++
			for i, r := range piece {
				if i > 0 {
					p, _ := utf8.DecodeLastRuneInString(piece[:i])
					if utf8.RuneLen(p) > 1 && utf8.RuneLen(r) > 1 && ht.cut(piece, i, p, r) {
						cut++
						break
					}
				}
			}
		}
	}
	t.Logf("%d long pieces, %d of them cut", long, cut)
	if shared && (long < 100 || cut < long/2) {
		t.Fatalf("%d long pieces, %d of them cut", long, cut)
	}
}
