package verify

import (
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/augmentdata/augment/internal/runes"
	"github.com/augmentdata/augment/internal/swar"
)

// Merging a piece apart (byte-pair encoding) is what costs when a run
// meets a piece for the first time. The library runs its pre-tokenizer
// again on the piece before merging, and allocates; pieceTokens merges
// the piece itself, the same way, with the library's ranks.

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

// mergeScanMax is the length from which pieceTokens merges with a heap
// (mergeHeap) instead of a scan (mergeScan): a scan costs a pass over the
// parts for each merge, a heap a few steps; both give the same parts, as
// the library's two do (it switches at 96 bytes).
const mergeScanMax = 16

// pieceTokens is the number of tokens the library encodes piece in: piece
// is one whole piece of the pre-tokenizer (o200kPiece), which is how the
// library meets it: a piece that is a token is one, any other is merged.
//
// Once highRanks is built, a long piece holding characters of several
// bytes (a run of Chinese) is cut where no token crosses (highTable.cut)
// and its parts merged apart (segmentTokens), which counts the same.
func pieceTokens(piece string) int {
	rk := ranks()
	if rk == nil {
		return libraryCount(piece)
	}
	if t := highBuilt.Load(); t != nil && len(piece) >= mergeScanMax && !swar.ASCII(piece) {
		if rankOf(rk, piece) != noRank {
			return 1
		}
		return t.segmentTokens(rk, piece)
	}
	return mergeTokens(rk, piece)
}

// mergeTokens is the number of parts piece merges into, a token or not.
func mergeTokens(rk map[string]uint, piece string) int {
	if rankOf(rk, piece) != noRank {
		return 1
	}
	if len(piece) < mergeScanMax {
		return mergeScan(rk, piece)
	}
	return mergeHeap(rk, piece)
}

// noRank marks a pair of parts that does not merge.
const noRank = ^uint32(0)

// rankOf is the rank of the token s, or noRank. Two-byte strings, a third
// or more of the look-ups of a merge, are remembered in pairRanks. Once a
// process has merged text in other scripts than Latin (useHigh), other
// strings are first checked against the shapes of the tokens (highTable),
// which rules out most strings that are no token, and those of 3 to 12
// bytes led by a byte that is not ASCII (most of the rest in such text)
// are looked up in highRanks; the rest in the library's map.
func rankOf(rk map[string]uint, s string) uint32 {
	if len(s) != 2 {
		t := highBuilt.Load()
		if t == nil && inHigh(s) && useHigh() {
			t = highRanks()
		}
		if t != nil {
			if !t.mayHold(s) {
				return noRank
			}
			if inHigh(s) {
				return t.rank(s)
			}
		}
		if r, ok := rk[s]; ok {
			return uint32(r)
		}
		return noRank
	}
	w := &pairRanks[int(s[0])<<8|int(s[1])]
	switch v := w.Load(); v {
	case 0: // not looked up yet
	case noRank:
		return noRank
	default:
		return v - 1
	}
	if r, ok := rk[s]; ok {
		w.Store(uint32(r) + 1)
		return uint32(r)
	}
	w.Store(noRank)
	return noRank
}

// highRanks holds the rank of every token of 3 to strKeyMax bytes whose
// first byte is not ASCII (inHigh): such strings are most of a merge's
// look-ups in text of other scripts than Latin (a character and its
// neighbours' bytes), most of them no token. The library's map of 200,000
// strings is far larger than the processor's caches, so a look-up in it
// waits for memory two or three times (its group, the key's bytes); this
// table of some 30,000 tokens (1 MB) holds the whole string in its slot.
// It holds all such tokens, so it answers for strings of that shape on
// its own, "no token" included. With it come the shapes of all tokens
// (highTable.mayHold) and where tokens cross between characters
// (highTable.cut). Building it costs some 14 ms of a CPU
// (BenchmarkHighTable), which pays only where much text is in other
// scripts, so it is built once a process has made highAfter look-ups it
// would answer (text in Latin script alone makes none, a few Chinese rows
// some thousands); nil when ranks is or a rank does not fit; read-only
// once built, and then in highBuilt.
var highRanks = sync.OnceValue(func() *highTable {
	t := newHighTable(ranks())
	if t != nil {
		highBuilt.Store(t)
	}
	return t
})

// highBuilt is highRanks once built (and not nil).
var highBuilt atomic.Pointer[highTable]

// newHighTable is highRanks' table of the ranks rk (nil for nil).
func newHighTable(rk map[string]uint) *highTable {
	if rk == nil {
		return nil
	}
	t := new(highTable)
	t.pairs, t.pairsShift = make([]uint64, 1<<16), 64-16
	entries := make([]strKey, 0, 1<<15)
	for tok, r := range rk {
		b, tl := tok[0], tail(tok)
		t.shapes[b][min(len(tok), shapeLens-1)] |= 1 << tl
		t.longest[b] = max(t.longest[b], len(tok))
		if inHigh(tok) {
			if r >= 1<<strValBits {
				return nil
			}
			k := strKeyOf(tok)
			entries = append(entries, strKey{k.lo, k.hi | uint64(r)<<strValAt})
		}
		t.addCrossings(tok, tl)
	}
	t.ranks.fill(entries, 1<<16)
	return t
}

// addCrossings adds what cut reads of the token tok (of tail tl): its
// pairs of neighbouring bytes if it starts or ends inside a character,
// its pairs of neighbouring characters of several bytes.
func (t *highTable) addCrossings(tok string, tl uint8) {
	if tok[0] >= utf8.RuneSelf && !utf8.RuneStart(tok[0]) || tl&1 != 0 { // tail 1 or 3
		for i := 1; i < len(tok); i++ {
			b := int(tok[i-1])<<8 | int(tok[i])
			t.splitBytes[b/64] |= 1 << (b % 64)
		}
	}
	i := 0
	for i < len(tok) && tok[i] < utf8.RuneSelf {
		i++
	}
	prev := rune(-1)
	for i < len(tok) {
		r, n := utf8.DecodeRuneInString(tok[i:])
		if n < 2 { // ASCII, or a byte that starts no character
			prev = -1
		} else {
			if prev >= 0 {
				t.addPair(uint64(prev)<<32 | uint64(r))
			}
			prev = r
		}
		i += n
	}
}

// addPair adds p to the set of pairs, grown to keep it at most half full.
func (t *highTable) addPair(p uint64) {
	mask := uint64(len(t.pairs) - 1)
	i := t.pairSlot(p)
	for ; t.pairs[i] != 0; i = (i + 1) & mask {
		if t.pairs[i] == p {
			return
		}
	}
	t.pairs[i] = p
	if t.npairs++; 2*t.npairs > len(t.pairs) {
		old := t.pairs
		t.pairs, t.pairsShift, t.npairs = make([]uint64, 2*len(old)), t.pairsShift-1, 0
		for _, p := range old {
			if p != 0 {
				t.addPair(p)
			}
		}
	}
}

func (t *highTable) pairSlot(p uint64) uint64 { return p * 0x9E3779B97F4A7C15 >> t.pairsShift }

// hasPair reports whether some token holds the characters of p
// (r1<<32|r2) side by side.
func (t *highTable) hasPair(p uint64) bool {
	for i := t.pairSlot(p); ; i = (i + 1) & uint64(len(t.pairs)-1) {
		switch t.pairs[i] {
		case p:
			return true
		case 0:
			return false
		}
	}
}

// cut reports whether no token crosses from character c1 (of several
// bytes, ending at byte i of s) to the next, c2 (also of several): a
// token that did would hold c1 and c2 whole (pairs), or start inside c1
// or end inside c2 and hold the two bytes either side of i (splitBytes).
// Byte-pair merging then never makes a part that crosses i, and merging
// the two sides apart makes the same parts: a merge on one side neither
// makes nor changes a pair on the other, so each side merges as it
// would alone, the lowest rank first.
func (t *highTable) cut(s string, i int, c1, c2 rune) bool {
	b := int(s[i-1])<<8 | int(s[i])
	return t.splitBytes[b/64]&(1<<(b%64)) == 0 && !t.hasPair(uint64(c1)<<32|uint64(c2))
}

// segmentTokens is mergeTokens(rk, piece), piece (valid UTF-8) cut where
// no token crosses between two characters of several bytes, and each
// part merged apart, its count remembered (segmentCounts): a run of
// Chinese is one piece, rarely seen twice, but its parts, a few
// characters each, come back again and again.
func (t *highTable) segmentTokens(rk map[string]uint, piece string) int {
	n, start := 0, 0
	prev := rune(-1)
	for i := 0; i < len(piece); {
		r, w := runes.At(piece, i)
		if w < 2 {
			prev = -1
		} else {
			if prev >= 0 && t.cut(piece, i, prev, r) {
				n += segmentCount(rk, piece[start:i])
				start = i
			}
			prev = r
		}
		i += w
	}
	return n + segmentCount(rk, piece[start:])
}

// segmentCounts remembers the counts of the parts segmentTokens merges,
// up to segmentBytesMax bytes of them.
var segmentCounts struct {
	sync.RWMutex
	m     map[string]int
	bytes int
}

const segmentBytesMax = 8 << 20

// segmentCount is mergeTokens(rk, s), remembered.
func segmentCount(rk map[string]uint, s string) int {
	segmentCounts.RLock()
	n, ok := segmentCounts.m[s]
	segmentCounts.RUnlock()
	if ok {
		return n
	}
	n = mergeTokens(rk, s)
	segmentCounts.Lock()
	defer segmentCounts.Unlock()
	if _, ok := segmentCounts.m[s]; !ok && segmentCounts.bytes+len(s) <= segmentBytesMax {
		if segmentCounts.m == nil {
			segmentCounts.m = map[string]int{}
		}
		// A copy: the text may live in a buffer its owner reuses.
		segmentCounts.m[strings.Clone(s)] = n
		segmentCounts.bytes += len(s)
	}
	return n
}

// A highTable is highRanks: the ranks, and the shapes of all tokens (by
// first byte, length and tail; and the longest token of each first
// byte), which rule most strings that are no token out before a look-up,
// in the table, whose slots are spread over 1 MB, or in the library's
// map: in text of characters of several bytes (Chinese, Japanese), a
// merge's parts split characters, and the string of two such parts
// starts or ends inside a character, which few tokens do; a whole piece
// is looked up before it is merged, and few long pieces are tokens.
type highTable struct {
	ranks   strTable
	shapes  [256][shapeLens]uint8 // bit tail(tok) of [tok[0]][min(len(tok), shapeLens-1)]
	longest [256]int

	// Where tokens cross from one character to the next (cuts): the
	// pairs of neighbouring characters of several bytes that some token
	// holds (a set of r1<<32|r2, open-addressed, 0 empty), and the pairs
	// of neighbouring bytes of the tokens that start or end inside a
	// character (a bit each, b1<<8|b2).
	pairs      []uint64
	pairsShift uint
	npairs     int
	splitBytes [1 << 16 / 64]uint64
}

const shapeLens = 32

// mayHold reports whether a token has the shape of s (not empty): when
// not, s is no token.
func (t *highTable) mayHold(s string) bool {
	return len(s) <= t.longest[s[0]] && t.shapes[s[0]][min(len(s), shapeLens-1)]&(1<<tail(s)) != 0
}

// rank is the rank of the token s (inHigh), or noRank.
func (t *highTable) rank(s string) uint32 {
	if r, ok := t.ranks.get(strKeyOf(s)); ok {
		return r
	}
	return noRank
}

// tail classes how s (not empty) ends: 0 with an ASCII byte, 1 with the
// first byte of a character of several, 2 with the last byte of one
// (its first byte as many bytes back as it says), 3 in another way.
// Any classing keeps mayHold exact (a string whose shape no token has is
// no token); this one splits the strings a merge meets in text of
// characters of several bytes by whether they end where a character does.
func tail(s string) uint8 {
	b := s[len(s)-1]
	switch {
	case b < utf8.RuneSelf:
		return 0
	case utf8.RuneStart(b):
		return 1
	}
	for k := 2; k <= utf8.UTFMax && k <= len(s); k++ {
		switch c := s[len(s)-k]; {
		case c < utf8.RuneSelf:
			return 3
		case utf8.RuneStart(c):
			if k == 2 && c < 0xE0 || k == 3 && c >= 0xE0 && c < 0xF0 || k == 4 && c >= 0xF0 {
				return 2
			}
			return 3
		}
	}
	return 3
}

// highLookups counts the look-ups highRanks would answer, up to
// highAfter.
var highLookups atomic.Int64

const highAfter = 1 << 15

// useHigh reports whether a look-up highRanks answers is made there.
func useHigh() bool {
	if highLookups.Load() >= highAfter {
		return true
	}
	highLookups.Add(1)
	return false
}

// inHigh reports whether highRanks answers for s.
func inHigh(s string) bool { return len(s) >= 3 && len(s) <= strKeyMax && s[0] >= utf8.RuneSelf }

// pairRanks remembers the two-byte strings looked up so far: 0 not yet,
// noRank not a token, else the rank plus one (the library's ranks are
// below 2^18).
var pairRanks [1 << 16]atomic.Uint32

// mergeScan merges piece (in use shorter than mergeScanMax) by byte pairs and
// returns the number of parts: parts start as single bytes; the leftmost
// adjacent pair whose joined bytes have the lowest rank merges, until no
// adjacent pair is a token.
func mergeScan(rk map[string]uint, piece string) int {
	type part struct {
		offset int32
		rank   uint32 // of this part joined with the next
	}
	var buf [mergeScanMax + 1]part
	parts := buf[:0]
	if len(piece)+1 > len(buf) {
		parts = make([]part, 0, len(piece)+1) // the tests' longer pieces
	}
	for i := range len(piece) + 1 {
		parts = append(parts, part{int32(i), noRank})
	}
	// rank is the rank of parts i to i+skip+1 joined (skip 0: a part and
	// the next; 1: a part and the two after it).
	rank := func(i, skip int) uint32 {
		if i+skip+2 < len(parts) {
			return rankOf(rk, piece[parts[i].offset:parts[i+skip+2].offset])
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

// mergeHeap is mergeScan for a piece of any length (up to 4 GB): the parts
// are a linked list of their starts, and the pairs that may merge wait in
// a min-heap of rank<<32 | start, so that the pair that pops first is the
// one of lowest rank, the leftmost of those. A pair whose left part has
// merged since it was pushed is stale: the part's rank no longer matches
// (a part merged into its left neighbour has noRank); it is dropped when
// it pops. (A stale pair with the same rank as the part's new pair is that
// new pair, also pushed: merging it is the same.)
func mergeHeap(rk map[string]uint, piece string) int {
	type part struct {
		prev, next int32 // starts of the neighbours; next -1 after the last
		rank       uint32
	}
	n := len(piece)
	var pbuf [128]part
	var hbuf [128]uint64
	parts := pbuf[:0]
	if n+1 > len(pbuf) {
		parts = make([]part, 0, n+1)
	}
	for i := range n + 1 {
		parts = append(parts, part{int32(i) - 1, int32(i) + 1, noRank})
	}
	parts[n].next = -1
	rank := func(i int32) uint32 {
		j := parts[i].next
		if j < 0 || parts[j].next < 0 {
			return noRank
		}
		return rankOf(rk, piece[i:parts[j].next])
	}
	h := hbuf[:0]
	for i := int32(0); i < int32(n)-1; i++ {
		if r := rank(i); r != noRank {
			parts[i].rank = r
			h = append(h, uint64(r)<<32|uint64(i))
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
	count := n
	for len(h) > 0 {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		heapDown(h, 0)
		i := int32(top & 0xFFFFFFFF)
		if parts[i].rank != uint32(top>>32) {
			continue // stale
		}
		j := parts[i].next
		k := parts[j].next
		parts[j].rank = noRank
		parts[i].next = k
		if k >= 0 {
			parts[k].prev = i
		}
		count--
		for _, b := range [2]int32{i, parts[i].prev} {
			if b < 0 {
				continue
			}
			if parts[b].rank = rank(b); parts[b].rank != noRank {
				h = append(h, uint64(parts[b].rank)<<32|uint64(b))
				heapUp(h, len(h)-1)
			}
		}
	}
	return count
}

func heapDown(h []uint64, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func heapUp(h []uint64, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}
