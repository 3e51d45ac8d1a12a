package verify

import (
	"unicode/utf8"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/shard"
)

// The texts that token counts and prompts show a record's tools and calls
// in are compact JSON exactly as jsonout.Marshal writes it; these helpers
// write it without reflection, since building them was most of the cost of
// counting a record whose texts were counted before
// (TestJSONTextMatchesJsonout holds them to jsonout's bytes).

// appendJSONString appends s as jsonout.Marshal writes a string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c == 0xE2 || c >= utf8.RuneSelf && !utf8.ValidString(s[i:]) {
			// Escapes, U+2028/U+2029 or bad UTF-8: as encoding/json has it.
			q, _ := jsonout.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendRawOrString appends raw as jsonout.Marshal writes rawOrString(raw):
// {} when it is empty, valid JSON compacted (white space outside strings
// dropped), anything else as a JSON string.
func appendRawOrString(dst, raw []byte) []byte {
	if len(raw) == 0 {
		return append(dst, "{}"...)
	}
	if !shard.ValidJSON(raw) {
		return appendJSONString(dst, string(raw))
	}
	return appendCompact(dst, raw)
}

// appendCompact appends valid JSON raw with the white space outside its
// strings dropped, as encoding/json compacts a json.RawMessage when it does
// not escape HTML.
func appendCompact(dst, raw []byte) []byte {
	in := false // inside a string
	start := 0  // of the bytes not yet copied
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			dst = append(dst, raw[start:i]...)
			start = i + 1
		}
	}
	return append(dst, raw[start:]...)
}
