package formats

import (
	"errors"
	"fmt"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// MetaTool is the name of Meta-Tool's retrieval function (seed 000, Fig 4).
// Tools a meta_tool result returns count as declared from that turn on.
const MetaTool = "meta_tool"

// MetaToolResult returns the tool definitions a meta_tool result (the
// Content of a Result answering a meta_tool call) hands to the assistant, in
// order. It accepts every shape augment writes or reads:
//
//   - one definition, bare {"name", "description", "parameters"} or wrapped
//     {"type": "function", "function": {…}};
//   - a JSON list of definitions (result_mode retrieved, bare format);
//   - seed 000 Fig 12's envelope {"name": "meta_tool", "function_id": n,
//     "results": X}, X one of the above, or a JSON list of such envelopes
//     (the tool turn of Fig 12 as a whole).
//
// Definitions are normalised like listed tools (see the package doc). The
// error says what is wrong; an envelope named other than meta_tool, an
// empty list or a definition without a name are errors.
func MetaToolResult(content string) ([]record.Tool, error) {
	v, err := jsontree.ParseString(content)
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	var out []record.Tool
	if err := metaToolValue(&v, &out, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// metaToolValue appends the definitions of v, at envelope nesting depth.
func metaToolValue(v *jsontree.Value, out *[]record.Tool, depth int) error {
	switch v.Kind {
	case jsontree.Array:
		if len(v.Elems) == 0 {
			return errors.New("an empty list")
		}
		for i := range v.Elems {
			if err := metaToolValue(&v.Elems[i].Val, out, depth); err != nil {
				return err
			}
		}
		return nil
	case jsontree.Object:
		if inner, ok, err := metaToolEnvelope(v); err != nil {
			return err
		} else if ok {
			if depth > 0 {
				return errors.New("an envelope inside an envelope")
			}
			return metaToolValue(inner, out, depth+1)
		}
		t, err := normalizeTool(nil, v, len(*out))
		if err != nil {
			return err
		}
		*out = append(*out, t)
		return nil
	}
	return fmt.Errorf("a JSON %s, want a tool definition, a list of them, or a meta_tool envelope", v.Kind)
}

// metaToolEnvelope reports whether v is a Fig 12 envelope: "results" with
// at most "name" and "function_id" besides; it returns the results. An
// envelope naming another function is an error.
func metaToolEnvelope(v *jsontree.Value) (*jsontree.Value, bool, error) {
	var results *jsontree.Value
	for i := range v.Elems {
		switch v.Elems[i].Key {
		case "name", "function_id":
		case "results":
			results = &v.Elems[i].Val
		default:
			return nil, false, nil
		}
	}
	if results == nil {
		return nil, false, nil
	}
	if name, ok := v.StringOr("name"); !ok || name != MetaTool && name != "" {
		return nil, false, fmt.Errorf("an envelope of %s, want %q", excerpt(name), MetaTool)
	}
	return results, true, nil
}
