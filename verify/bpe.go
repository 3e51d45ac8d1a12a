package verify

import (
	"reflect"
	"sync"
	"unsafe"
)

// Merging a piece apart (byte-pair encoding) is what costs when a run
// meets a piece for the first time. The library runs its pre-tokenizer
// again on the piece before merging, and allocates; pieceTokens merges
// the piece itself, the same way, with the library's own table of ranks.

// ranks is the library's table of o200k_base ranks (token bytes to rank),
// read from the codec, or nil when this version of the library keeps it
// elsewhere (pieceTokens then asks the library). It is the library's map,
// shared: only read.
var ranks = sync.OnceValue(func() map[string]uint { return libraryRanks(encoder()) })

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

// mergeScanMax is the length from which the library merges with a heap
// instead of a scan; pieceTokens merges shorter pieces itself and hands
// longer ones (rare, and remembered) to the library.
const mergeScanMax = 96

// pieceTokens is the number of tokens the library encodes piece in: piece
// is one whole piece of the pre-tokenizer (o200kPiece), which is how the
// library meets it.
func pieceTokens(piece string) int {
	rk := ranks()
	if rk == nil || len(piece) >= mergeScanMax {
		return libraryCount(piece)
	}
	if _, ok := rk[piece]; ok {
		return 1
	}
	return mergeCount(rk, piece)
}

// noRank marks a pair of parts that does not merge.
const noRank = ^uint32(0)

// mergeCount merges piece (shorter than mergeScanMax, not itself a token)
// as the library's mergePairsScan does and returns the number of parts:
// parts start as single bytes; the leftmost adjacent pair whose joined
// bytes have the lowest rank merges, until no adjacent pair is a token.
func mergeCount(rk map[string]uint, piece string) int {
	type part struct {
		offset int32
		rank   uint32 // of this part joined with the next
	}
	var buf [mergeScanMax + 1]part
	parts := buf[:len(piece)+1]
	for i := range parts {
		parts[i] = part{int32(i), noRank}
	}
	// rank is the rank of parts i to i+skip+1 joined (skip 0: a part and
	// the next; 1: a part and the two after it).
	rank := func(i, skip int) uint32 {
		if i+skip+2 < len(parts) {
			if r, ok := rk[piece[parts[i].offset:parts[i+skip+2].offset]]; ok {
				return uint32(r)
			}
		}
		return noRank
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		low, at := noRank, 0
		for i, p := range parts[:len(parts)-1] {
			if p.rank < low {
				low, at = p.rank, i
			}
		}
		if low == noRank {
			break
		}
		parts[at].rank = rank(at, 1)
		if at > 0 {
			parts[at-1].rank = rank(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}
