package formats

import (
	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// xlam's tool lists read straight into the record's tools, and its answers
// into calls. A row's "tools" text is most of an xlam row, and its tools nearly always have one shape:
// {"name", "description", "parameters"} with parameters a flat map of
// {"description", "type", "default"} objects (flatParameters). Such a list
// is read token by token from the row's literal (jsontree.Inner, in the row
// parser's pass) and each tool's canonical parameter schema written as it
// is read, without the tree that toolsFromArray and normalizeTool would
// build, rewrite and compact. Anything else — another member, another
// schema shape, a sub-schema (properties, items, anyOf …), a value of
// another type, a tool the normaliser would reject, or text the one-pass
// decoder leaves to the two passes — makes the reader give up, and the row
// is read as before: the same tools, repairs and rejects either way
// (sameEveryWay compares the three ways on the fuzz targets' rows).

// xlamLiteral is the row parser's Literal hook for xlam (see the comment
// above): it takes "tools" or "answers" when it reads the whole text.
func (w *workspace) xlamLiteral(key string, r jsontree.Inner) (jsontree.Value, bool) {
	at := len(w.json)
	switch key {
	case "tools":
		tools, ok := w.readTools(r)
		if ok && r.End() {
			w.rowTools = tools
			// A placeholder: parseXLAM takes the tools from the workspace.
			return jsontree.Value{Kind: jsontree.Array}, true
		}
	case "answers":
		calls, ok := w.readCalls(r)
		if ok && r.End() {
			w.xlamCalls, w.haveCalls = calls, true
			return jsontree.Value{Kind: jsontree.Array}, true
		}
	default:
		return jsontree.Value{}, false
	}
	w.json = w.json[:at]
	return jsontree.Value{}, false
}

// readCalls reads xlam's answers, a list of {"name", "arguments"} calls
// with arguments an object, as jsonCall reads each.
func (w *workspace) readCalls(r jsontree.Inner) ([]record.Call, bool) {
	if !r.Begin(jsontree.Array) {
		return nil, false
	}
	var calls []record.Call
	for r.More() {
		var c record.Call
		if !r.Begin(jsontree.Object) {
			return nil, false
		}
		for r.More() {
			switch r.Key() {
			case "name":
				c.Name = r.KeptString()
			case "arguments":
				// An object; anything else is jsonCall's to judge.
				if r.Peek() != '{' {
					return nil, false
				}
				at := len(w.json)
				w.json = r.AppendValue(w.json)
				c.Arguments = w.json[at:len(w.json):len(w.json)]
			default:
				return nil, false
			}
		}
		if !r.OK() || c.Name == "" || c.Arguments == nil {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, r.OK()
}

// readTools reads xlam's tool list; ok is false when it gave up.
func (w *workspace) readTools(r jsontree.Inner) ([]record.Tool, bool) {
	if !r.Begin(jsontree.Array) {
		return nil, false
	}
	return w.readToolSeq(r, true, flatParams)
}

// The parameters readTool reads: xlam's flat map (readFlatParameters), or
// a JSON Schema, glaive's and ToolACE's (readParameterSchema).
const (
	flatParams   = false
	schemaParams = true
)

// readToolSeq reads tools (readTool) one after another: the elements of a
// list Begin opened when listed, else objects as long as one follows. It
// returns them in a list of their own, never nil (as toolsFromArray makes
// it), or false when it gave up.
func (w *workspace) readToolSeq(r jsontree.Inner, listed, schema bool) ([]record.Tool, bool) {
	ts := w.tools[:0]
	defer func() {
		clear(ts)
		w.tools = ts[:0]
	}()
	for listed && r.More() || !listed && r.Peek() == '{' {
		t, ok := w.readTool(r, schema)
		if !ok {
			return nil, false
		}
		ts = append(ts, t)
	}
	if !r.OK() {
		return nil, false
	}
	return append(make([]record.Tool, 0, len(ts)), ts...), true
}

// readTool reads one {"name", "description", "parameters"} tool, with
// parameters a JSON Schema when schema (flatParams, schemaParams);
// after a schema, a tool-level "required": null, which normalizeTool
// ignores, may come too.
func (w *workspace) readTool(r jsontree.Inner, schema bool) (record.Tool, bool) {
	var t record.Tool
	if !r.Begin(jsontree.Object) {
		return t, false
	}
	for r.More() {
		switch r.Key() {
		case "name":
			t.Name = r.KeptString()
		case "description":
			t.Description = r.KeptString()
		case "parameters":
			if schema {
				t.Parameters = w.readParameterSchema(r)
			} else {
				t.Parameters = w.readFlatParameters(r)
			}
			if t.Parameters == nil {
				return t, false
			}
		case "required":
			if !schema || !w.readNull(r) {
				return t, false
			}
		default:
			return t, false
		}
	}
	if !r.OK() || t.Name == "" {
		return t, false
	}
	if t.Parameters == nil {
		t.Parameters = []byte(emptyParameters)
	}
	return t, true
}

// readFlatParameters reads xlam's flat map of parameters and writes the
// schema flatParameters and normalizeParameters make of it, or returns nil.
func (w *workspace) readFlatParameters(r jsontree.Inner) []byte {
	if !r.Begin(jsontree.Object) {
		return nil
	}
	at := len(w.json)
	b := append(w.json, `{"type":"object","properties":{`...)
	req := w.req[:0]
	defer func() {
		clear(req)
		w.req = req[:0]
	}()
	n := 0
	for r.More() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		var name string
		b, name = r.AppendKey(b)
		// A member "properties" holding objects would make the map read
		// as a JSON Schema (isSchema).
		if name == "properties" || !r.OK() {
			return nil
		}
		var optional, ok bool
		if b, optional, ok = w.readParameter(r, b); !ok {
			return nil
		}
		if !optional {
			req = append(req, name)
		}
	}
	if !r.OK() {
		return nil
	}
	b = append(b, '}')
	if len(req) > 0 {
		b = append(b, `,"required":[`...)
		for i, name := range req {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsontree.AppendString(b, name)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	w.json = b
	return b[at:len(b):len(b)]
}

// readParameter reads one parameter's object and appends it as
// normalizeSchema rewrites it; optional reports a type marked optional.
func (w *workspace) readParameter(r jsontree.Inner, b []byte) (out []byte, optional, ok bool) {
	if !r.Begin(jsontree.Object) {
		return b, false, false
	}
	b = append(b, '{')
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	for r.More() {
		switch k := r.Key(); k {
		case "type":
			s := r.String()
			if !r.OK() {
				return b, false, false
			}
			if isJSONType(s) {
				sep()
				b = jsontree.AppendString(append(b, `"type":`...), s)
				break
			}
			name, opt := cutOptional(s)
			if t, ok := simpleType(name); ok {
				optional = optional || opt
				sep()
				b = jsontree.AppendString(append(b, `"type":`...), t)
				break
			}
			ms, opt, ok := pyType(w, s)
			optional = optional || opt
			if ok {
				// No "items" or "anyOf" of the object's own: those give
				// up below.
				for i := range ms {
					sep()
					b = append(jsontree.AppendString(b, ms[i].Key), ':')
					b = jsontree.AppendCompact(b, &ms[i].Val)
				}
			}
		case "properties", "items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "prefixItems", "required":
			// Sub-schemas and lists of required names: normalizeSchema's.
			return b, false, false
		default:
			sep()
			b = append(jsontree.AppendString(b, k), ':')
			b = r.AppendValue(b)
		}
	}
	return append(b, '}'), optional, r.OK()
}
