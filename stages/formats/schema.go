package formats

import (
	"strings"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// emptyParameters is the canonical schema of a tool without parameters.
const emptyParameters = `{"type":"object","properties":{}}`

// toolsFromArray normalises a JSON array of tool definitions (see
// normalizeTool); what names the array in error details.
func toolsFromArray(w *workspace, v *jsontree.Value, what string) ([]record.Tool, error) {
	if v.Kind != jsontree.Array {
		return nil, reject("bad_tools", "%s is a JSON %s, want an array of tools", what, v.Kind)
	}
	tools := make([]record.Tool, 0, len(v.Elems))
	for i := range v.Elems {
		t, err := normalizeTool(w, &v.Elems[i].Val, i)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// normalizeTool turns one tool definition into the canonical shape: bare
// {name, description, parameters} or OpenAI's {"type":"function",
// "function":{…}}; parameters a JSON Schema (normalizeSchema) or xlam's flat
// map of parameters (flatParameters); a stray tool-level "required": null is
// dropped and a tool-level "required" list moves into parameters when they
// have none.
func normalizeTool(w *workspace, v *jsontree.Value, i int) (record.Tool, error) {
	if v.Kind != jsontree.Object {
		return record.Tool{}, reject("bad_tool", "tool %d is a JSON %s, want an object", i, v.Kind)
	}
	if fn := v.Get("function"); fn != nil && fn.Kind == jsontree.Object && !v.Has("name") {
		v = fn
	}
	name, ok := v.StringOr("name")
	if !ok || name == "" {
		return record.Tool{}, reject("bad_tool", "tool %d has no name", i)
	}
	desc, ok := v.StringOr("description")
	if !ok {
		return record.Tool{}, reject("bad_tool", "tool %s: description is a JSON %s, want a string", excerpt(name), v.Get("description").Kind)
	}
	params, err := normalizeParameters(w, v.Get("parameters"), v.Get("required"))
	if err != nil {
		return record.Tool{}, reject("bad_tool_parameters", "tool %s: %v", excerpt(name), err)
	}
	return record.Tool{Name: name, Description: desc, Parameters: params}, nil
}

type schemaError string

func (e schemaError) Error() string { return string(e) }

// normalizeParameters gives the compact canonical parameter schema. hoisted
// is a tool-level "required" member, or nil.
func normalizeParameters(w *workspace, p, hoisted *jsontree.Value) ([]byte, error) {
	if p == nil || p.Kind == jsontree.Null {
		return []byte(emptyParameters), nil
	}
	if p.Kind != jsontree.Object {
		return nil, schemaError("parameters are a JSON " + p.Kind.String() + ", want an object")
	}
	var s jsontree.Value
	switch {
	case isSchema(p):
		normalizeSchema(w, p)
		s = *p
	case isFlat(p):
		s = flatParameters(w, p)
	default:
		return nil, schemaError("parameters are neither a JSON Schema nor a map of parameter objects")
	}
	// The top level must be an object schema with properties.
	if t := s.Get("type"); t == nil {
		s.Elems = append([]jsontree.Member{{Key: "type", Val: jsontree.NewString("object")}}, s.Elems...)
	} else if t.Kind != jsontree.String || t.Str != "object" {
		return nil, schemaError("parameters have type " + string(jsontree.Compact(t)) + ", want \"object\"")
	}
	if props := s.Get("properties"); props != nil && props.Kind != jsontree.Object {
		return nil, schemaError("properties are a JSON " + props.Kind.String() + ", want an object")
	}
	if req := s.Get("required"); req != nil {
		ok := req.Kind == jsontree.Array
		for _, e := range req.Elems {
			ok = ok && e.Val.Kind == jsontree.String
		}
		if !ok {
			return nil, schemaError("required is not a list of names: " + string(jsontree.Compact(req)))
		}
	}
	if !s.Has("properties") {
		at := 0
		for i, m := range s.Elems {
			if m.Key == "type" {
				at = i + 1
			}
		}
		s.Elems = insertMember(s.Elems, at, jsontree.Member{Key: "properties", Val: jsontree.Value{Kind: jsontree.Object}})
	}
	if hoisted != nil && hoisted.Kind == jsontree.Array && len(hoisted.Elems) > 0 && !s.Has("required") {
		for _, e := range hoisted.Elems {
			if e.Val.Kind != jsontree.String {
				return nil, schemaError("tool-level required holds a JSON " + e.Val.Kind.String())
			}
		}
		s.Elems = append(s.Elems, jsontree.Member{Key: "required", Val: *hoisted})
	}
	return w.compact(&s), nil
}

func insertMember(ms []jsontree.Member, at int, m jsontree.Member) []jsontree.Member {
	ms = append(ms, jsontree.Member{})
	copy(ms[at+1:], ms[at:])
	ms[at] = m
	return ms
}

// isSchema reports whether an object reads as a JSON Schema: a "type" given
// as a string or list, or "properties" that map names to objects. xlam's flat
// maps have neither (a parameter called "type" maps to an object).
func isSchema(p *jsontree.Value) bool {
	if t := p.Get("type"); t != nil && (t.Kind == jsontree.String || t.Kind == jsontree.Array) {
		return true
	}
	props := p.Get("properties")
	if props == nil || props.Kind != jsontree.Object {
		return false
	}
	for _, m := range props.Elems {
		if m.Val.Kind != jsontree.Object {
			return false
		}
	}
	return true
}

// isFlat reports whether every member of p is an object (one per parameter).
func isFlat(p *jsontree.Value) bool {
	for _, m := range p.Elems {
		if m.Val.Kind != jsontree.Object {
			return false
		}
	}
	return true
}

// flatParameters converts xlam's {param: {description, type, default}} into
// {"type":"object","properties":{…},"required":[…]}: every parameter whose
// type is not marked optional is required.
func flatParameters(w *workspace, p *jsontree.Value) jsontree.Value {
	props := jsontree.Value{Kind: jsontree.Object, Elems: p.Elems}
	// One allocation: the three members of the result, then the names.
	buf := w.members(3 + len(props.Elems))
	req := buf[3:3:len(buf)]
	for i := range props.Elems {
		if !normalizeSchema(w, &props.Elems[i].Val) {
			req = append(req, jsontree.Member{Val: jsontree.NewString(props.Elems[i].Key)})
		}
	}
	buf[0] = jsontree.Member{Key: "type", Val: jsontree.NewString("object")}
	buf[1] = jsontree.Member{Key: "properties", Val: props}
	out := jsontree.Value{Kind: jsontree.Object, Elems: buf[0:2:3]}
	if len(req) > 0 {
		out.Elems = append(out.Elems, jsontree.Member{Key: "required", Val: jsontree.Value{Kind: jsontree.Array, Elems: req}})
	}
	return out
}

// normalizeSchema rewrites a JSON Schema node and its sub-schemas in place,
// keeping member order: types are mapped to JSON Schema names ("dict" →
// "object", Python annotations such as "List[str]" → "array" with items);
// an unknown type is dropped; "required": null is dropped. optional reports
// that the node's type was marked optional (", optional", Optional[…]); when
// some properties are so marked and the node lists no "required", the
// others become required.
func normalizeSchema(w *workspace, v *jsontree.Value) (optional bool) {
	if v.Kind != jsontree.Object {
		return false
	}
	in := v.Elems
	out := in[:0] // written behind the reading position, until it must grow
	shared := true
	put := func(read int, ms ...jsontree.Member) {
		if shared && len(out)+len(ms) > read {
			out = append(w.members(len(in) + len(ms) + 1)[:0], out...)
			shared = false
		}
		out = append(out, ms...)
	}
	hasRequired, anyOptional := false, false
	hasItems, hasAnyOf := v.Has("items"), v.Has("anyOf") // read before out overwrites in
	propsAt := -1
	var propOptional []bool
	for i := range in {
		m := in[i]
		switch m.Key {
		case "type":
			switch m.Val.Kind {
			case jsontree.String:
				if isJSONType(m.Val.Str) {
					break
				}
				name, opt := cutOptional(m.Val.Str)
				if t, ok := simpleType(name); ok { // "dict", "str, optional" …
					optional = optional || opt
					m.Val = jsontree.NewString(t)
					break
				}
				ms, opt, ok := pyType(w, m.Val.Str)
				optional = optional || opt
				if ok {
					for _, x := range ms {
						if x.Key == "items" && hasItems || x.Key == "anyOf" && hasAnyOf {
							continue // the schema's own wins
						}
						put(i+1, x)
					}
				}
				continue
			case jsontree.Array:
				names := jsontree.Value{Kind: jsontree.Array}
				for _, e := range m.Val.Elems {
					if e.Val.Kind != jsontree.String {
						continue
					}
					if t, ok := simpleType(e.Val.Str); ok {
						names.Elems = append(names.Elems, jsontree.Member{Val: jsontree.NewString(t)})
					}
				}
				if len(names.Elems) == 0 {
					continue
				}
				m.Val = names
			default: // null, a number, an object: no type at all
				continue
			}
		case "properties":
			if m.Val.Kind == jsontree.Object {
				propOptional = make([]bool, len(m.Val.Elems))
				for j := range m.Val.Elems {
					propOptional[j] = normalizeSchema(w, &m.Val.Elems[j].Val)
					anyOptional = anyOptional || propOptional[j]
				}
				propsAt = len(out)
			}
		// The sub-schemas are rewritten through in[i], which out has not
		// overwritten yet: taking m's address would move every m to the heap.
		case "items", "additionalProperties", "not":
			if m.Val.Kind == jsontree.Object {
				normalizeSchema(w, &in[i].Val)
			} else if m.Val.Kind == jsontree.Array {
				normalizeList(w, &in[i].Val)
			}
			m.Val = in[i].Val
		case "anyOf", "oneOf", "allOf", "prefixItems":
			if m.Val.Kind == jsontree.Array {
				normalizeList(w, &in[i].Val)
			}
			m.Val = in[i].Val
		case "required":
			if m.Val.Kind == jsontree.Null {
				continue
			}
			hasRequired = true
		}
		put(i+1, m)
	}
	if anyOptional && !hasRequired {
		props := out[propsAt].Val
		var req []jsontree.Member
		for j, p := range props.Elems {
			if !propOptional[j] {
				req = append(req, jsontree.Member{Val: jsontree.NewString(p.Key)})
			}
		}
		if len(req) > 0 {
			if shared {
				out = append(w.members(len(out) + 1)[:0], out...)
			}
			out = insertMember(out, propsAt+1, jsontree.Member{Key: "required", Val: jsontree.Value{Kind: jsontree.Array, Elems: req}})
		}
	}
	v.Elems = out
	return optional
}

func normalizeList(w *workspace, v *jsontree.Value) {
	for i := range v.Elems {
		normalizeSchema(w, &v.Elems[i].Val)
	}
}

// isJSONType reports whether s is a JSON Schema type name.
func isJSONType(s string) bool {
	switch s {
	case "string", "integer", "number", "boolean", "array", "object", "null":
		return true
	}
	return false
}

// simpleType maps a bare type name to its JSON Schema name.
func simpleType(name string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "str", "string", "text":
		return "string", true
	case "int", "integer", "long":
		return "integer", true
	case "float", "number", "double", "decimal":
		return "number", true
	case "bool", "boolean":
		return "boolean", true
	case "list", "array", "set", "frozenset", "tuple", "sequence", "iterable":
		return "array", true
	case "dict", "object", "mapping", "map":
		return "object", true
	case "none", "nonetype", "null":
		return "null", true
	}
	return "", false
}

// pyType maps a type annotation to JSON Schema members: a JSON Schema type
// name, or a Python annotation as xlam writes them ("str", "int, optional",
// "List[int]", "Tuple[float, float]", "Dict", "Union[int, float]",
// "Optional[str]"). members is what replaces the "type" member: "type" with
// "items" for element-typed lists, or "anyOf" for unions. ok is false for
// annotations it does not know; optional reports ", optional" or Optional.
func pyType(w *workspace, s string) (members []jsontree.Member, optional, ok bool) {
	s, optional = cutOptional(s)
	p := typeParser{s: s, w: w}
	sch, opt, ok := p.expr()
	if !ok || p.i != len(p.s) {
		return nil, optional, false
	}
	return sch.Elems, optional || opt, true
}

// cutOptional removes xlam's ", optional" suffix and reports whether it
// was there.
func cutOptional(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, ','); i >= 0 && strings.EqualFold(strings.TrimSpace(s[i+1:]), "optional") {
		return strings.TrimSpace(s[:i]), true
	}
	return s, false
}

// A typeParser reads a Python type annotation: Name or Name[arg, …].
type typeParser struct {
	s string
	i int
	w *workspace // for the schemas' members
}

func (p *typeParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// expr returns the schema of one annotation; opt reports Optional[…] or a
// Union with None.
func (p *typeParser) expr() (sch jsontree.Value, opt, ok bool) {
	p.space()
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			p.i++
			continue
		}
		break
	}
	name := p.s[start:p.i]
	if j := strings.LastIndexByte(name, '.'); j >= 0 {
		name = name[j+1:] // typing.List → List
	}
	if name == "" {
		return sch, false, false
	}
	var argsBuf [2]jsontree.Value
	var argOptBuf [2]bool
	args, argOpt := argsBuf[:0], argOptBuf[:0]
	ellipsis := false
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '[' {
		p.i++
		for {
			p.space()
			if strings.HasPrefix(p.s[p.i:], "...") {
				p.i += 3
				ellipsis = true
			} else {
				a, o, ok := p.expr()
				if !ok {
					return sch, false, false
				}
				args = append(args, a)
				argOpt = append(argOpt, o)
			}
			p.space()
			if p.i >= len(p.s) {
				return sch, false, false
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] == ']' {
				p.i++
				break
			}
			return sch, false, false
		}
	}
	obj := func(ms ...jsontree.Member) jsontree.Value {
		// Room for "items" after "type".
		elems := p.w.members(len(ms) + 1)[:len(ms)]
		copy(elems, ms)
		return jsontree.Value{Kind: jsontree.Object, Elems: elems}
	}
	typ := func(t string) jsontree.Member { return jsontree.Member{Key: "type", Val: jsontree.NewString(t)} }
	lower := strings.ToLower(name)
	switch lower {
	case "optional":
		if len(args) != 1 {
			return sch, false, false
		}
		return args[0], true, true
	case "union":
		var alts []jsontree.Member
		for i, a := range args {
			if t := a.Get("type"); t != nil && t.Kind == jsontree.String && t.Str == "null" {
				opt = true
				continue
			}
			opt = opt || argOpt[i]
			alts = append(alts, jsontree.Member{Val: a})
		}
		switch len(alts) {
		case 0:
			return sch, false, false
		case 1:
			return alts[0].Val, opt, true
		}
		return obj(jsontree.Member{Key: "anyOf", Val: jsontree.Value{Kind: jsontree.Array, Elems: alts}}), opt, true
	case "any":
		return obj(), false, true
	}
	t, known := simpleType(lower)
	if !known {
		return sch, false, false
	}
	sch = obj(typ(t))
	if t == "array" && len(args) > 0 {
		items := args[0]
		same := true
		for _, a := range args[1:] {
			if string(jsontree.Compact(&a)) != string(jsontree.Compact(&items)) {
				same = false
			}
		}
		if lower != "tuple" || ellipsis || same {
			if len(items.Elems) > 0 && (lower == "tuple" || len(args) == 1) {
				sch.Elems = append(sch.Elems, jsontree.Member{Key: "items", Val: items})
			}
		}
	}
	return sch, false, true
}
