package verify

import (
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/shard"
)

// The texts that token counts and prompts show a record's tools and calls
// in are compact JSON exactly as jsonout.Marshal writes it; these helpers
// write it without reflection, since building them was most of the cost of
// counting a record whose texts were counted before
// (TestJSONTextMatchesJsonout holds them to jsonout's bytes).

// appendRawOrString appends raw as jsonout.Marshal writes rawOrString(raw):
// {} when it is empty, valid JSON compacted (white space outside strings
// dropped), anything else as a JSON string.
func appendRawOrString(dst, raw []byte) []byte {
	if len(raw) == 0 {
		return append(dst, "{}"...)
	}
	if !shard.ValidJSON(raw) {
		return jsonout.AppendString(dst, string(raw))
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
