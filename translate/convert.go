package translate

import (
	"encoding/json"
	"iter"
	"strconv"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// Convert returns a clone of r with every string the stage converts
// converted from Simplified Chinese to Taiwan usage by OpenCC s2twp (with
// the character repair of convertText, since no teacher can be asked): the
// system prompt, message text and reasoning, and every argument value and
// tool-result value but enum and const members (see fixed), a value holding
// JSON text string by string, as teacher mode compares it (see
// convertedStrings: its keys and the rest of its text keep their bytes);
// plain-text results as a whole. A locked argument value quoted in the text converts
// there as it does in the call (see converter). Tool definitions — the record's and
// those a meta_tool result returns (see scope) — function names, keys and
// enum and const members keep their bytes, and so does all JSON around a
// converted string; the tools a call refers to are those available at its
// turn. The clone is tagged lang=zh-TW with a rule lineage step. Arguments
// or results that are not valid JSON are left as they are (Record rejects
// such sources). A conversion that does not read back to its source gives a
// *contract.Reject with ReasonConversionDamaged.
func Convert(r *record.Record) (*record.Record, error) { return convert(r, "translate") }

// convert is Convert with the lineage step named step.
func convert(r *record.Record, step string) (*record.Record, error) {
	sc := scopeOf(r)
	c := newConverter(true)
	for i, m := range r.Messages {
		for _, call := range m.Calls {
			addUnits(call.Arguments, sc.params(i, call.Name), c)
		}
	}
	c.prepare()
	out := r.Clone()
	out.System = c.text(out.System)
	for i := range out.Messages {
		m := &out.Messages[i]
		m.Content = c.text(m.Content)
		m.Reasoning = c.text(m.Reasoning)
		for j := range m.Calls {
			call := &m.Calls[j]
			call.Arguments = convertJSON(call.Arguments, sc.params(i, call.Name), c)
		}
		for j := range m.Results {
			res := &m.Results[j]
			switch {
			case sc.definition(i, j):
			case isStructured(res.Content):
				res.Content = string(convertJSON([]byte(res.Content), sc.response(i, res.Name), c))
			default:
				res.Content = c.text(res.Content)
			}
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	out.SetTag("lang", Lang)
	out.AddStep(step, "rule", "")
	return out, nil
}

// addUnits makes the locked values of the JSON value b, arguments where
// the schema s applies, units of c, also those inside JSON text (as teacher
// mode makes a walker's allLocked units).
func addUnits(b []byte, s schema, c *converter) {
	n, err := parseTree(b)
	if err != nil {
		return
	}
	convertedStrings("", n, s, func(_ string, leaf *jsontree.Value, class leafClass) {
		switch class {
		case leafLocked:
			c.addUnit(leaf.Str)
		case leafJSON:
			addUnits([]byte(leaf.Str), nil, c)
		}
	})
}

// convertJSON converts the strings of a JSON value that the stage converts
// (see convertedStrings) in place of their literals; a string holding JSON
// text gets its own text with only its strings converted (keys, spacing and
// the other strings' escapes kept), as teacher mode's spliceLeaves writes it.
func convertJSON(b []byte, s schema, c *converter) []byte {
	n, err := parseTree(b)
	if err != nil {
		return b
	}
	var edits []edit
	convertedStrings("", n, s, func(_ string, leaf *jsontree.Value, class leafClass) {
		var v string
		if class == leafJSON {
			v = string(convertJSON([]byte(leaf.Str), nil, c))
		} else {
			v = c.value(leaf.Str, class == leafLocked)
		}
		if v != leaf.Str {
			edits = append(edits, stringEdit(b, leaf, v))
		}
	})
	return splice(b, edits)
}

// isStructured reports whether a tool result is a JSON object or array, whose
// keys and locked values are kept; any other result is plain text.
func isStructured(content string) bool {
	for i := 0; i < len(content); i++ {
		switch content[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			return json.Valid([]byte(content))
		}
		return false
	}
	return false
}

// A text is one translatable string of a record and where it is.
type text struct {
	path string // request naming, e.g. conversations[2].tool_calls[0].arguments.title
	text string
}

// translatable yields every string of r that a translation changes: the
// system prompt, message text and reasoning, the argument and tool-result
// values the stage converts (see convertedStrings; for a value holding JSON
// text, the strings of its JSON, not its keys) and plain-text tool results;
// not the tool definitions meta_tool results return.
func translatable(r *record.Record) iter.Seq[text] {
	return func(yield func(text) bool) {
		if r.System != "" && !yield(text{"system", r.System}) {
			return
		}
		sc := scopeOf(r)
		stop := false
		var leaves func(path string, b []byte, s schema)
		leaves = func(path string, b []byte, s schema) {
			n, err := parseTree(b)
			if err != nil {
				return
			}
			convertedStrings(path, n, s, func(path string, leaf *jsontree.Value, class leafClass) {
				if class == leafJSON { // its strings, not its keys
					leaves(path, []byte(leaf.Str), nil)
					return
				}
				stop = stop || !yield(text{path, leaf.Str})
			})
		}
		for i, m := range r.Messages {
			p := turnPath(i)
			if m.Content != "" && !yield(text{p + ".content", m.Content}) {
				return
			}
			if m.Reasoning != "" && !yield(text{p + ".reasoning", m.Reasoning}) {
				return
			}
			for j, c := range m.Calls {
				if leaves(callPath(i, j)+".arguments", c.Arguments, sc.params(i, c.Name)); stop {
					return
				}
			}
			for j, res := range m.Results {
				p := resultPath(i, j) + ".content"
				switch {
				case sc.definition(i, j):
				case isStructured(res.Content):
					if leaves(p, []byte(res.Content), sc.response(i, res.Name)); stop {
						return
					}
				case res.Content != "":
					if !yield(text{p, res.Content}) {
						return
					}
				}
			}
		}
	}
}

// checkSource rejects records whose JSON parts cannot be handled: the
// structure lock needs every argument object and tool schema to parse.
func checkSource(r *record.Record) error {
	for i, t := range r.Tools {
		if !json.Valid(t.Parameters) {
			return rejectf(ReasonSourceInvalid, "functions[%d] (%s): parameters are not valid JSON", i, t.Name)
		}
	}
	for i, m := range r.Messages {
		for j, c := range m.Calls {
			n, err := parseTree(c.Arguments)
			if err != nil || n.Kind != jsontree.Object {
				return rejectf(ReasonSourceInvalid, "%s: arguments are not a JSON object", callPath(i, j))
			}
		}
	}
	return nil
}

func turnPath(i int) string      { return "conversations[" + strconv.Itoa(i) + "]" }
func callPath(i, j int) string   { return turnPath(i) + ".tool_calls[" + strconv.Itoa(j) + "]" }
func resultPath(i, j int) string { return turnPath(i) + ".results[" + strconv.Itoa(j) + "]" }
