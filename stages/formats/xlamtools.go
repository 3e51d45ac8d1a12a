package formats

import (
	"slices"
	"strings"

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
// (sameEveryWay compares the four ways on the fuzz targets' rows).
//
// Text as Python's json.dumps writes it by default, which is how xlam's
// texts come, is read first by its layout (laidTools, laidCalls below:
// the punctuation and keys between values matched as fixed text), and
// through Inner when that gives up.
//
// A dump repeats its tools row after row: a tool whose text is byte for
// byte one the workspace read before is taken from its memo (laidTool,
// readSchemaTool), the same tool read again without reading it.

// xlamLiteral is the row parser's Literal hook for xlam (see the comment
// above): it takes "tools" or "answers" when it reads the whole text.
func (w *workspace) xlamLiteral(key string, r jsontree.Inner) (jsontree.Value, bool) {
	at := len(w.json)
	switch key {
	case "tools":
		if w.laid {
			if tools, ok := w.laidTools(r); ok {
				w.rowTools = tools
				return jsontree.Value{Kind: jsontree.Array}, true
			}
			w.json = w.json[:at]
		}
		tools, ok := w.readTools(r)
		if ok && r.End() {
			w.rowTools = tools
			// A placeholder: parseXLAM takes the tools from the workspace.
			return jsontree.Value{Kind: jsontree.Array}, true
		}
	case "answers":
		if w.laid {
			if w.tookCalls(w.laidCalls(r)) {
				return jsontree.Value{Kind: jsontree.Array}, true
			}
			w.json = w.json[:at]
		}
		calls, ok := w.readCalls(r)
		if w.tookCalls(calls, ok && r.End()) {
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
	calls := w.callList()
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
		var t record.Tool
		var ok bool
		if schema {
			t, ok = w.readSchemaTool(r, listed)
		} else {
			t, ok = w.readTool(r, schema)
		}
		if !ok {
			return nil, false
		}
		ts = append(ts, t)
	}
	if !r.OK() {
		return nil, false
	}
	return w.toolList(ts), true
}

// readSchemaTool is readTool for a tool with a JSON Schema, in a list
// when listed: a tool whose text was read before (in an earlier row, by
// this workspace, as listed) is taken from the workspace's memo, its
// strings and parameters the memo's, which no one changes; else it is
// read and remembered. The memo is keyed by the start of the text
// (schemaMemoKey bytes), the whole text compared.
func (w *workspace) readSchemaTool(r jsontree.Inner, listed bool) (record.Tool, bool) {
	l := 0
	if listed {
		l = 1
	}
	key := r.Ahead(schemaMemoKey)
	known := w.schemaMemo[l][key]
	for i := range known {
		if r.Again(known[i].text) {
			return known[i].tool, true
		}
	}
	at := r.Start()
	t, ok := w.readTool(r, schemaParams)
	if !ok {
		return t, false
	}
	w.remember(&w.schemaMemo[l], key, r.Since(at), t)
	return t, true
}

// schemaMemoKey is how many bytes of a tool's text key readSchemaTool's
// memo.
const schemaMemoKey = 64

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
	return w.endFlatParameters(b, at, req)
}

// endFlatParameters closes the schema of a flat map of parameters that
// readFlatParameters or laidFlatParameters wrote into b from at: the
// properties, then the names of the required ones.
func (w *workspace) endFlatParameters(b []byte, at int, req []string) []byte {
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
			var opt bool
			b, opt = w.appendType(b, &n, s)
			optional = optional || opt
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

// appendType appends the members a parameter's "type" s becomes, as
// normalizeSchema rewrites it, each after a comma once n (the members
// written so far, which it counts) is above zero; optional reports a type
// marked optional. No "items" or "anyOf" of the parameter's own may come
// (the readers give up on those). What a type becomes is remembered: a
// dump's types are few ("str", "int, optional", "List[str]" …).
func (w *workspace) appendType(b []byte, n *int, s string) ([]byte, bool) {
	t, ok := w.types[s]
	if !ok {
		t = rewriteType(w, s)
		if len(w.types) < maxTypes && len(s) <= maxTypeLen {
			if w.types == nil {
				w.types = make(map[string]typeRewrite)
			}
			w.types[strings.Clone(s)] = t
		}
	}
	if t.n > 0 {
		if *n > 0 {
			b = append(b, ',')
		}
		*n += t.n
		b = append(b, t.members...)
	}
	return b, t.optional
}

// maxTypes and maxTypeLen bound the types a workspace remembers: how
// many, and how long each (a longer one, rare, is rewritten each time).
const (
	maxTypes   = 256
	maxTypeLen = 64
)

// A typeRewrite is what a parameter's type becomes: n members, compact
// and separated by commas, and whether it was marked optional.
type typeRewrite struct {
	members  string
	n        int
	optional bool
}

// rewriteType gives what appendType writes for the type s.
func rewriteType(w *workspace, s string) typeRewrite {
	if isJSONType(s) {
		return typeRewrite{members: string(jsontree.AppendString([]byte(`"type":`), s)), n: 1}
	}
	name, optional := cutOptional(s)
	if t, ok := simpleType(name); ok {
		return typeRewrite{members: string(jsontree.AppendString([]byte(`"type":`), t)), n: 1, optional: optional}
	}
	ms, optional, ok := pyType(w, s)
	if !ok {
		return typeRewrite{optional: optional}
	}
	var b []byte
	for i := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(jsontree.AppendString(b, ms[i].Key), ':')
		b = jsontree.AppendCompact(b, &ms[i].Val)
	}
	return typeRewrite{members: string(b), n: len(ms), optional: optional}
}

// The readers of text in Python json.dumps's layout (jsontree.Laid): xlam's
// tools and answers as json.dumps writes them by default, the members of a
// tool and of a call in the order xlam writes them. They write what
// readTools and readCalls write, and give up where those would, and
// besides on anything else (another order or layout, an escape in a
// string, a parameter member other than description, type and default):
// then the Inner readers above read the text.

// laidTools is readTools for a tool list in json.dumps's layout.
func (w *workspace) laidTools(r jsontree.Inner) ([]record.Tool, bool) {
	l := r.Laid()
	if !l.Open('[') {
		return nil, false
	}
	var room [4]record.Tool // on the stack: nothing to clear afterwards
	ts := room[:0]
	var known uint64 // bit i: ts[i] came from the memo, its strings its own
	for more := !l.Close(']'); more; {
		t, memo, ok := w.laidTool(&l)
		if !ok {
			return nil, false
		}
		if memo && len(ts) < 64 {
			known |= 1 << len(ts)
		}
		ts = append(ts, t)
		if more, ok = l.Next(']'); !ok {
			return nil, false
		}
	}
	if l.Peek() != '"' { // the literal's end (Inner.End)
		return nil, false
	}
	for i := range ts {
		if i >= 64 || known&(1<<i) == 0 {
			ts[i].Name, ts[i].Description = r.Keep(ts[i].Name), r.Keep(ts[i].Description)
		}
	}
	if !r.Took(l) || !r.End() {
		return nil, false
	}
	return w.toolList(ts), true
}

// laidTool reads one tool of a list in json.dumps's layout. A tool whose
// text was read before (in an earlier row, by this workspace) is taken
// from the workspace's memo (memo reports it: its strings and parameters
// are the memo's, which no one changes); else it is read, its strings
// views of the row, and remembered.
func (w *workspace) laidTool(l *jsontree.Laid) (t record.Tool, memo, ok bool) {
	from := *l
	if !(l.Open('{') && l.Lit(`\"name\": `)) {
		return t, false, false
	}
	if t.Name, ok = l.Str(); !ok || t.Name == "" {
		return t, false, false
	}
	known := w.toolMemo[t.Name]
	for i := range known {
		if again := from; again.Again(known[i].text) {
			*l = again
			return known[i].tool, true, true
		}
	}
	if !l.Lit(`, \"description\": `) {
		return t, false, false
	}
	if t.Description, ok = l.Str(); !ok || !l.Lit(`, \"parameters\": `) {
		return t, false, false
	}
	if t.Parameters = w.laidFlatParameters(l); t.Parameters == nil || !l.Close('}') {
		return t, false, false
	}
	w.remember(&w.toolMemo, t.Name, l.Since(from), t)
	return t, false, true
}

// Bounds on a workspace's memos of tools (laidTool, readSchemaTool): the
// bytes they hold (texts, names, descriptions and parameters), and the
// tools under one key (a dump whose tools of a name differ row by row
// gains nothing from it).
const (
	maxToolMemoBytes = 4 << 20
	maxToolsOfName   = 8
)

// A memoTool is a tool read before, with its text in the row.
type memoTool struct {
	text string
	tool record.Tool
}

// remember adds the tool t, read from text, to *memo under key (a view of
// the row or of t is fine: the memo keeps copies), unless the key holds
// maxToolsOfName tools already or the memos' bytes would pass their bound.
func (w *workspace) remember(memo *map[string][]memoTool, key, text string, t record.Tool) {
	known := (*memo)[key]
	if len(known) >= maxToolsOfName || text == "" {
		return
	}
	size := len(text) + len(t.Name) + len(t.Description) + len(t.Parameters)
	if w.toolMemoBytes+size > maxToolMemoBytes {
		return
	}
	w.toolMemoBytes += size
	if *memo == nil {
		*memo = make(map[string][]memoTool)
	}
	if known == nil {
		key = strings.Clone(key)
	}
	(*memo)[key] = append(known, memoTool{text: strings.Clone(text), tool: record.Tool{Name: strings.Clone(t.Name),
		Description: strings.Clone(t.Description), Parameters: slices.Clone(t.Parameters)}})
}

// laidFlatParameters is readFlatParameters for a map in json.dumps's
// layout.
func (w *workspace) laidFlatParameters(l *jsontree.Laid) []byte {
	if !l.Open('{') {
		return nil
	}
	at := len(w.json)
	b := append(w.json, `{"type":"object","properties":{`...)
	// The names on the stack (no references into the row to clear
	// afterwards); a map of more is left to readFlatParameters.
	var nameRoom, reqRoom [maxLaidParams]string
	names, req := nameRoom[:0], reqRoom[:0]
	for more := !l.Close('}'); more; {
		name, ok := l.Str()
		// A member "properties" holding objects would make the map read
		// as a JSON Schema (isSchema).
		if !ok || name == "properties" || len(names) == maxLaidParams || slices.Contains(names, name) || !l.Lit(": ") {
			return nil
		}
		if len(names) > 0 {
			b = append(b, ',')
		}
		names = append(names, name)
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		var optional bool
		if b, optional, ok = w.laidParameter(l, b); !ok {
			return nil
		}
		if !optional {
			req = append(req, name)
		}
		if more, ok = l.Next('}'); !ok {
			return nil
		}
	}
	return w.endFlatParameters(b, at, req)
}

// maxLaidParams is the most parameters laidFlatParameters reads.
const maxLaidParams = 32

// laidParameter is readParameter for a parameter in json.dumps's layout
// with the members description, type and default, each at most once.
func (w *workspace) laidParameter(l *jsontree.Laid, b []byte) (out []byte, optional, ok bool) {
	if !l.Open('{') {
		return b, false, false
	}
	b = append(b, '{')
	n := 0
	var seen uint8
	for more := !l.Close('}'); more; {
		k, ok := l.Str()
		if !ok || !l.Lit(": ") {
			return b, false, false
		}
		var bit uint8
		switch k {
		case "type":
			bit = 1
			s, ok := l.Str()
			if !ok {
				return b, false, false
			}
			var opt bool
			b, opt = w.appendType(b, &n, s)
			optional = optional || opt
		case "description", "default":
			bit = 2
			if k == "default" {
				bit = 4
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, '"', ':')
			if b, ok = l.AppendValue(b); !ok {
				return b, false, false
			}
		default:
			return b, false, false
		}
		if seen&bit != 0 {
			return b, false, false
		}
		seen |= bit
		if more, ok = l.Next('}'); !ok {
			return b, false, false
		}
	}
	return append(b, '}'), optional, true
}

// laidCalls is readCalls for answers in json.dumps's layout.
func (w *workspace) laidCalls(r jsontree.Inner) ([]record.Call, bool) {
	l := r.Laid()
	if !l.Open('[') {
		return nil, false
	}
	calls := w.callList()
	for more := !l.Close(']'); more; {
		var c record.Call
		var ok bool
		if !(l.Open('{') && l.Lit(`\"name\": `)) {
			return nil, false
		}
		if c.Name, ok = l.Str(); !ok || c.Name == "" || !l.Lit(`, \"arguments\": `) || l.Peek() != '{' {
			return nil, false
		}
		at := len(w.json)
		if w.json, ok = l.AppendValue(w.json); !ok || !l.Close('}') {
			return nil, false
		}
		c.Arguments = w.json[at:len(w.json):len(w.json)]
		calls = append(calls, c)
		if more, ok = l.Next(']'); !ok {
			return nil, false
		}
	}
	if l.Peek() != '"' {
		return nil, false
	}
	for i := range calls {
		calls[i].Name = r.Keep(calls[i].Name)
	}
	if !r.Took(l) || !r.End() {
		return nil, false
	}
	return calls, true
}
