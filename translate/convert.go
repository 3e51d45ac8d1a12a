package translate

import (
	"encoding/json"
	"iter"
	"strconv"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// Convert returns a clone of r with every translatable string converted from
// Simplified Chinese to Taiwan usage by OpenCC s2twp (with the character
// repair of convertText, since no teacher can be asked): the system prompt,
// message text and reasoning, free-text argument values, and free-text values
// of tool results (plain-text results as a whole). Tool definitions, function
// names, argument keys, enum members and locked values (see classify) keep
// their bytes; so does all JSON around a converted string. The clone is
// tagged lang=zh-TW with a rule lineage step. Arguments or results that are
// not valid JSON are left as they are (Record rejects such sources). A
// conversion that does not read back to its source gives a *contract.Reject with
// ReasonConversionDamaged.
func Convert(r *record.Record) (*record.Record, error) { return convert(r, "translate") }

// convert is Convert with the lineage step named step.
func convert(r *record.Record, step string) (*record.Record, error) {
	out := r.Clone()
	var err error
	conv := func(s string) string {
		if err != nil {
			return s
		}
		var c string
		c, err = convertText(s, true)
		return c
	}
	out.System = conv(out.System)
	for i := range out.Messages {
		m := &out.Messages[i]
		m.Content = conv(m.Content)
		m.Reasoning = conv(m.Reasoning)
		for j := range m.Calls {
			c := &m.Calls[j]
			c.Arguments = convertJSON(c.Arguments, callSchema(r, c.Name), conv)
		}
		for j := range m.Results {
			res := &m.Results[j]
			if isStructured(res.Content) {
				res.Content = string(convertJSON([]byte(res.Content), resultSchema(r, res.Name), conv))
			} else {
				res.Content = conv(res.Content)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	out.SetTag("lang", Lang)
	out.AddStep(step, "rule", "")
	return out, nil
}

// convertJSON converts the free-text strings of a JSON value with conv in
// place of their literals.
func convertJSON(b []byte, s schema, conv func(string) string) []byte {
	n, err := parseTree(b)
	if err != nil {
		return b
	}
	var edits []edit
	freeStrings("", n, s, func(_ string, leaf *jsontree.Value) {
		if c := conv(leaf.Str); c != leaf.Str {
			edits = append(edits, stringEdit(b, leaf, c))
		}
	})
	return splice(b, edits)
}

// callSchema returns the parameter schema of the tool called name in r.
func callSchema(r *record.Record, name string) schema {
	if t, ok := r.ToolByName(name); ok {
		return toolSchema(t.Parameters)
	}
	return nil
}

// resultSchema returns the response schema of the tool called name in r,
// when the source has one.
func resultSchema(r *record.Record, name string) schema {
	if t, ok := r.ToolByName(name); ok && len(t.Response) > 0 {
		return toolSchema(t.Response)
	}
	return nil
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
// system prompt, message text and reasoning, free-text argument values and
// free-text (or plain-text) tool results.
func translatable(r *record.Record) iter.Seq[text] {
	return func(yield func(text) bool) {
		if r.System != "" && !yield(text{"system", r.System}) {
			return
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
				n, err := parseTree(c.Arguments)
				if err != nil {
					continue
				}
				stop := false
				freeStrings(callPath(i, j)+".arguments", n, callSchema(r, c.Name), func(path string, leaf *jsontree.Value) {
					stop = stop || !yield(text{path, leaf.Str})
				})
				if stop {
					return
				}
			}
			for j, res := range m.Results {
				p := resultPath(i, j) + ".content"
				if !isStructured(res.Content) {
					if res.Content != "" && !yield(text{p, res.Content}) {
						return
					}
					continue
				}
				n, err := parseTree([]byte(res.Content))
				if err != nil {
					continue
				}
				stop := false
				freeStrings(p, n, resultSchema(r, res.Name), func(path string, leaf *jsontree.Value) {
					stop = stop || !yield(text{path, leaf.Str})
				})
				if stop {
					return
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
