package formats

import (
	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// glaive's and ToolACE's tool lists read straight into the record's tools
// from the system text, as xlam's are from its "tools" (xlamtools.go).
// Both formats put the tools, JSON Schema definitions, inside the system
// prompt after a fixed lead-in: glaive as indented objects one after
// another, ToolACE as a list followed by a fixed closing text. Read the
// usual way, the system text is copied out of the row, parsed again into a
// tree, normalised and compacted. Here the row parser offers the
// literal to systemLiteral, which matches the lead-in in the literal's
// bytes and reads the tools token by token (jsontree.Inner), writing each
// parameter schema compact as it is read, as normalizeParameters would
// give it. It gives up on anything else — other system text, a tool
// member other than name, description, parameters (and ToolACE's
// "required": null), a schema the normaliser would rewrite (a type that is
// not a JSON Schema name other than one simpleType maps, optional types,
// type lists, "required": null, properties that are not objects, a missing
// type or properties at the top), text around the tools other than the
// template's, and what the one-pass decoder leaves — and the system text
// is then read as before: the same records, repairs and rejects either way
// (sameEveryWay compares the two ways on the fuzz targets' rows).

// systemKey names the member systemLiteral is offered.
func systemKey(key string) bool { return key == "system" }

// The fixed texts of the system prompts, in the JSON form a literal holds
// them in (jsontree.Inner.Text).
var (
	glaiveLeadInJSON  = jsonForm(glaiveLeadIn)
	toolacePrefixJSON = jsonForm(toolacePrefix)
	toolaceSuffixJSON = jsonForm(toolaceSuffix)
)

// jsonForm returns s as a JSON string without its quotes.
func jsonForm(s string) string {
	q := jsontree.AppendString(nil, s)
	return string(q[1 : len(q)-1])
}

// systemLiteral is the row parser's Hooked hook for glaive and ToolACE
// (see above): it takes "system" when it reads the whole text as the
// template with its tools.
func (w *workspace) systemLiteral(key string, r jsontree.Inner) (jsontree.Value, bool) {
	if key != "system" {
		return jsontree.Value{}, false
	}
	at := len(w.json)
	var tools []record.Tool
	ok := false
	switch w.format {
	case "glaive":
		tools, ok = w.glaiveTools(r)
	case "toolace":
		tools, ok = w.toolaceTools(r)
	}
	if ok && r.End() {
		w.rowTools = tools
		// A placeholder: the readers take the tools from the workspace,
		// and the system text left after the template is empty.
		return jsontree.Value{Kind: jsontree.String}, true
	}
	w.json = w.json[:at]
	return jsontree.Value{}, false
}

// glaiveTools reads glaive's lead-in and the tool objects after it, as
// glaiveSystem would, when nothing but white space follows them.
func (w *workspace) glaiveTools(r jsontree.Inner) ([]record.Tool, bool) {
	if !r.Text(glaiveLeadInJSON) {
		return nil, false
	}
	return w.readToolSeq(r, false, schemaParams)
}

// toolaceTools reads ToolACE's template around a list of tools, as
// toolaceSystem would, when nothing but white space follows it.
func (w *workspace) toolaceTools(r jsontree.Inner) ([]record.Tool, bool) {
	if !r.Text(toolacePrefixJSON) || !r.Begin(jsontree.Array) {
		return nil, false
	}
	tools, ok := w.readToolSeq(r, true, schemaParams)
	// The list ends right before the closing text: toolaceSystem cuts
	// the list at its first line break, which the list's own JSON cannot
	// hold (its strings hold none raw).
	if !ok || !r.Text(toolaceSuffixJSON) {
		return nil, false
	}
	return tools, true
}

// readNull reads a value and reports whether it was null.
func (w *workspace) readNull(r jsontree.Inner) bool {
	if r.Peek() != 'n' {
		return false
	}
	at := len(w.json)
	w.json = r.AppendValue(w.json)
	null := string(w.json[at:]) == "null"
	w.json = w.json[:at]
	return null && r.OK()
}

// readParameterSchema reads a tool's parameters, a JSON Schema of type
// object with properties or an empty object, and writes it as
// normalizeParameters gives it, or returns nil.
func (w *workspace) readParameterSchema(r jsontree.Inner) []byte {
	at := len(w.json)
	b, typ, props, ok := w.readSchema(r, w.json, true)
	switch {
	case !ok:
		return nil
	case string(b[at:]) == "{}": // no parameters (flatParameters of none)
		return []byte(emptyParameters)
	case typ != "object" || !props:
		return nil
	}
	w.json = b
	return b[at:len(b):len(b)]
}

// readSchema reads a schema object and appends it as normalizeSchema
// rewrites it, when the rewriting is no more than mapping type names
// (simpleType); typ is its type and props reports properties. At the top
// (the parameters), "required" must be a list of names.
func (w *workspace) readSchema(r jsontree.Inner, b []byte, top bool) (out []byte, typ string, props, ok bool) {
	if !r.Begin(jsontree.Object) {
		return b, "", false, false
	}
	b = append(b, '{')
	for n := 0; r.More(); n++ {
		if n > 0 {
			b = append(b, ',')
		}
		var k string
		b, k = r.AppendKey(b)
		switch k {
		case "type":
			s := r.String()
			if !r.OK() {
				return b, "", false, false
			}
			if !isJSONType(s) {
				name, opt := cutOptional(s)
				t, ok := simpleType(name)
				if !ok || opt {
					return b, "", false, false
				}
				s = t
			}
			b = jsontree.AppendString(b, s)
			typ = s
		case "properties":
			if !r.Begin(jsontree.Object) {
				return b, "", false, false
			}
			b = append(b, '{')
			for m := 0; r.More(); m++ {
				if m > 0 {
					b = append(b, ',')
				}
				b, _ = r.AppendKey(b)
				if b, _, _, ok = w.readSchema(r, b, false); !ok {
					return b, "", false, false
				}
			}
			b = append(b, '}')
			props = true
		case "items", "additionalProperties", "not":
			switch r.Peek() {
			case '{':
				if b, _, _, ok = w.readSchema(r, b, false); !ok {
					return b, "", false, false
				}
			case '[':
				if b, ok = w.readSchemaList(r, b); !ok {
					return b, "", false, false
				}
			default:
				b = r.AppendValue(b)
			}
		case "anyOf", "oneOf", "allOf", "prefixItems":
			if r.Peek() == '[' {
				if b, ok = w.readSchemaList(r, b); !ok {
					return b, "", false, false
				}
			} else {
				b = r.AppendValue(b)
			}
		case "required":
			switch {
			case r.Peek() == 'n': // null, which normalizeSchema drops
				return b, "", false, false
			case top:
				if b, ok = readNames(r, b); !ok {
					return b, "", false, false
				}
			default:
				b = r.AppendValue(b)
			}
		default:
			b = r.AppendValue(b)
		}
	}
	return append(b, '}'), typ, props, r.OK()
}

// readSchemaList reads a list of schemas (normalizeList); elements that
// are not objects are kept as they are.
func (w *workspace) readSchemaList(r jsontree.Inner, b []byte) ([]byte, bool) {
	if !r.Begin(jsontree.Array) {
		return b, false
	}
	b = append(b, '[')
	for n := 0; r.More(); n++ {
		if n > 0 {
			b = append(b, ',')
		}
		if r.Peek() == '{' {
			var ok bool
			if b, _, _, ok = w.readSchema(r, b, false); !ok {
				return b, false
			}
			continue
		}
		b = r.AppendValue(b)
	}
	return append(b, ']'), r.OK()
}

// readNames reads a list of strings, which normalizeParameters asks of
// the parameters' "required".
func readNames(r jsontree.Inner, b []byte) ([]byte, bool) {
	if !r.Begin(jsontree.Array) {
		return b, false
	}
	b = append(b, '[')
	for n := 0; r.More(); n++ {
		if n > 0 {
			b = append(b, ',')
		}
		if r.Peek() != '\\' { // an inner string starts with \"
			return b, false
		}
		b = jsontree.AppendString(b, r.String())
	}
	return append(b, ']'), r.OK()
}
