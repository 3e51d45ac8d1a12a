// Package jsonout encodes JSON the way augment writes it everywhere (prompts,
// outputs, cache keys, rejects): without HTML escaping, since tool
// descriptions are full of <, > and &; json.RawMessage values formatted like
// the rest; no trailing newline. Changing it changes bytes of every stage.
package jsonout

import (
	"bytes"
	"encoding/json"
)

// Marshal returns v as compact JSON.
func Marshal(v any) ([]byte, error) { return MarshalIndent(v, "") }

// MarshalIndent returns v as JSON indented by indent per level, or compact
// when indent is "".
func MarshalIndent(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
