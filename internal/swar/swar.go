// Package swar holds the byte-parallel tests the JSON scanners and writers
// (jsontree, jsonout, shard.ValidJSON), the language counters (formats,
// report) and the token counter (verify) share: eight bytes of text read
// as one 64-bit word and tested at once.
package swar

import "math/bits"

// Ones has the low bit of each byte of a word set; Ones*c repeats byte c.
// Tops has the high bit of each byte set.
const (
	Ones = 0x0101010101010101
	Tops = 0x8080808080808080
)

// Load returns s[i:i+8] as a little-endian word (the compiler makes it one
// load).
func Load(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Load4 returns s[i:i+4] as a little-endian word.
func Load4(s string, i int) uint32 {
	s = s[i : i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// StringSpecial flags the bytes of w that cannot stand as they are inside
// a JSON string: '"', '\\' and control characters (below 0x20). Each flag
// is a byte's high bit in the result; the lowest flag is exact (a borrow
// can only add false flags above a true one), so TrailingZeros64/8 is the
// index of the first such byte, and 0 means none.
func StringSpecial(w uint64) uint64 {
	q := w ^ Ones*'"'
	bs := w ^ Ones*'\\'
	return ((q-Ones)&^q | (bs-Ones)&^bs | (w-Ones*0x20)&^w) & Tops
}

// Letters counts the ASCII letters among the bytes of w; bytes outside
// ASCII are not counted. Each byte, its high bit cleared and lowered by
// |0x20, is a letter when adding 0x1F carries into the high bit (>= 'a')
// and adding 0x05 does not (<= 'z'); no addition crosses a byte.
func Letters(w uint64) int {
	y := w&^Tops | Ones*0x20
	return bits.OnesCount64((y + Ones*0x1F) &^ (y + Ones*0x05) &^ w & Tops)
}

// ASCII reports whether s holds only ASCII bytes, eight at a time: the
// last word is read where it overlaps the one before, and a text of 4 to 7
// bytes as two words of four that overlap, so no byte is tested alone past
// the first four.
func ASCII(s string) bool {
	n := len(s)
	switch {
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if Load(s, i)&Tops != 0 {
				return false
			}
		}
		return Load(s, n-8)&Tops == 0
	case n >= 4:
		return (Load4(s, 0)|Load4(s, n-4))&(Tops&0xFFFFFFFF) == 0
	}
	for i := range n {
		if s[i]&0x80 != 0 {
			return false
		}
	}
	return true
}
