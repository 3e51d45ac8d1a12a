package verify

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/augmentdata/augment/internal/cputime"
)

var updateRanks = flag.Bool("update", false, "write o200k_ranks.bin from the library's vocabulary")

// libRanks is the library's own table of o200k_base ranks, the oracle of
// the embedded one.
var libRanks = sync.OnceValue(func() map[string]uint { return libraryRanks(encoder()) })

// libraryRanks reads the unexported vocabulary of a tiktoken-go/tokenizer
// codec (v0.10.0: *codec.Codec's field vocabulary, a map[string]uint), or
// returns nil when c is not such a codec.
func libraryRanks(c any) map[string]uint {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("vocabulary")
	want := reflect.TypeFor[map[string]uint]()
	if !f.IsValid() || !f.Type().ConvertibleTo(want) || f.Type().Kind() != reflect.Map {
		return nil
	}
	// The field is unexported: read it through its address.
	m := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Convert(want).Interface().(map[string]uint)
	if len(m) == 0 {
		return nil
	}
	return m
}

// ranksFile is the library's vocabulary in o200kRanks' layout; it fails
// when the ranks are not 0 to n-1 or a token is longer than 255 bytes.
func ranksFile(t testing.TB, lib map[string]uint) []byte {
	byRank := make([]string, len(lib))
	for tok, r := range lib {
		if r >= uint(len(byRank)) || byRank[r] != "" || tok == "" || len(tok) > 255 {
			t.Fatalf("token %q, rank %d: the ranks are not 0 to %d, or the token does not fit a length byte", tok, r, len(lib)-1)
		}
		byRank[r] = tok
	}
	var b bytes.Buffer
	for _, tok := range byRank {
		b.WriteByte(byte(len(tok)))
		b.WriteString(tok)
	}
	return b.Bytes()
}

// TestO200kRanksFile: the embedded vocabulary is the library's, and the
// table made of it gives every token the library's rank. With -update it
// writes the file from the library first (after a library upgrade).
func TestO200kRanksFile(t *testing.T) {
	lib := libRanks()
	if lib == nil {
		t.Fatal("the library's ranks were not found")
	}
	want := ranksFile(t, lib)
	if *updateRanks {
		if err := os.WriteFile("o200k_ranks.bin", want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote o200k_ranks.bin: %d tokens, %d bytes (rebuild to embed it)", len(lib), len(want))
		return
	}
	if o200kRanks != string(want) {
		t.Fatalf("o200k_ranks.bin (%d bytes) is not the library's vocabulary (%d bytes): run go test -run TestO200kRanksFile -update ./verify/", len(o200kRanks), len(want))
	}
	rk := ranks()
	if rk == nil || rk.n != len(lib) {
		t.Fatalf("table of %v tokens, want %d", rk, len(lib))
	}
	for tok, r := range lib {
		if got, ok := rk.rank(tok); !ok || got != uint32(r) {
			t.Fatalf("%q: rank %d, %v; want %d", tok, got, ok, r)
		}
	}
	n := uint32(0)
	rk.each(func(tok string, r uint32) {
		if r != n || lib[tok] != uint(r) {
			t.Fatalf("each: %q rank %d at %d, the library's %d", tok, r, n, lib[tok])
		}
		n++
	})
}

// TestRankTableAbsent: strings that are no token (each token changed in
// its last byte, cut or grown by a byte, and strings longer than any
// token) have no rank, as in the library's map.
func TestRankTableAbsent(t *testing.T) {
	lib, rk := libRanks(), ranks()
	absent := 0
	for tok := range lib {
		for _, s := range []string{tok[:len(tok)-1] + string(tok[len(tok)-1]^0x01), tok[:len(tok)-1], tok + "\x80", tok + " ", string(slices.Repeat([]byte(tok), 300/len(tok)+1))} {
			r, want := lib[s]
			if got, ok := rk.rank(s); ok != want || ok && got != uint32(r) {
				t.Fatalf("%q: rank %d, %v; the library's %d, %v", s, got, ok, r, want)
			}
			if !want {
				absent++
			}
		}
	}
	if absent < 100000 {
		t.Fatalf("only %d strings that are no token", absent)
	}
}

// TestLoadRanksRefuses: data not in the layout, or repeating a token, is
// an error, not a table.
func TestLoadRanksRefuses(t *testing.T) {
	for _, data := range []string{"\x00", "\x02a", "\x01a\x01a", "\x01a\x03bc", "\x01a\x02ab\x01a"} {
		if tb, err := loadRanks(data); err == nil {
			t.Errorf("loadRanks(%q) = %d tokens, no error", data, tb.n)
		}
	}
	tb, err := loadRanks("\x01a\x02ab\x01b")
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]int{"a": 0, "ab": 1, "b": 2, "ba": -1, "": -1, "abc": -1} {
		r, ok := tb.rank(s)
		if want < 0 && ok || want >= 0 && (!ok || r != uint32(want)) {
			t.Errorf("rank(%q) = %d, %v; want %d", s, r, ok, want)
		}
	}
}

// BenchmarkRanksLoad is the cost a run pays once to count tokens: the
// table made from the embedded vocabulary; the library's own load (its
// map, made once per process) is measured apart by BenchmarkLibraryLoad.
func BenchmarkRanksLoad(b *testing.B) {
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := loadRanks(o200kRanks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
