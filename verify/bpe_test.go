package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/internal/cputime"
)

// TestPieceTokensMatchLibrary: every piece of the demo dumps, of the
// shared data's dumps when present, and of texts with edges merges into
// as many tokens as the library encodes the piece in, through the
// library's ranks (not a fallback to the library).
func TestPieceTokensMatchLibrary(t *testing.T) {
	if ranks() == nil {
		t.Fatal("the library's ranks were not found: pieces are merged by the library, slowly")
	}
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

// FuzzHighTable: for any string the table answers for, its rank is the
// library's.
func FuzzHighTable(f *testing.F) {
	for _, s := range []string{"我们的", "\xe4\xbd\xa0\xe5", "\xbd\xa0\xe5", "😀😀", "ещё", "\xff\xfe\xfd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !inHigh(s) {
			t.Skip()
		}
		want := noRank
		if r, ok := ranks()[s]; ok {
			want = uint32(r)
		}
		if got := highRank(highRanks(), s); got != want {
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
		t := new(strTable)
		for tok, r := range rk {
			if inHigh(tok) {
				t.put(strKeyOf(tok), uint32(r), 1<<16)
			}
		}
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
