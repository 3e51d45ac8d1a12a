package formats

import (
	"strings"

	"github.com/augmentdata/augment/stages/record"
)

// emptyParameters is the canonical schema of a tool without parameters.
const emptyParameters = `{"type":"object","properties":{}}`

// toolsFromArray normalises a JSON array of tool definitions (see
// normalizeTool); what names the array in error details.
func toolsFromArray(v *jvalue, what string) ([]record.Tool, error) {
	if v.kind != jArray {
		return nil, reject("bad_tools", "%s is a JSON %s, want an array of tools", what, v.kind)
	}
	tools := make([]record.Tool, 0, len(v.elems))
	for i := range v.elems {
		t, err := normalizeTool(&v.elems[i].val, i)
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
func normalizeTool(v *jvalue, i int) (record.Tool, error) {
	if v.kind != jObject {
		return record.Tool{}, reject("bad_tool", "tool %d is a JSON %s, want an object", i, v.kind)
	}
	if fn := v.get("function"); fn != nil && fn.kind == jObject && !v.has("name") {
		v = fn
	}
	name, ok := v.stringOr("name")
	if !ok || name == "" {
		return record.Tool{}, reject("bad_tool", "tool %d has no name", i)
	}
	desc, ok := v.stringOr("description")
	if !ok {
		return record.Tool{}, reject("bad_tool", "tool %s: description is a JSON %s, want a string", excerpt(name), v.get("description").kind)
	}
	params, err := normalizeParameters(v.get("parameters"), v.get("required"))
	if err != nil {
		return record.Tool{}, reject("bad_tool_parameters", "tool %s: %v", excerpt(name), err)
	}
	return record.Tool{Name: name, Description: desc, Parameters: params}, nil
}

type schemaError string

func (e schemaError) Error() string { return string(e) }

// normalizeParameters gives the compact canonical parameter schema. hoisted
// is a tool-level "required" member, or nil.
func normalizeParameters(p, hoisted *jvalue) ([]byte, error) {
	if p == nil || p.kind == jNull {
		return []byte(emptyParameters), nil
	}
	if p.kind != jObject {
		return nil, schemaError("parameters are a JSON " + p.kind.String() + ", want an object")
	}
	var s jvalue
	switch {
	case isSchema(p):
		normalizeSchema(p)
		s = *p
	case isFlat(p):
		s = flatParameters(p)
	default:
		return nil, schemaError("parameters are neither a JSON Schema nor a map of parameter objects")
	}
	// The top level must be an object schema with properties.
	if t := s.get("type"); t == nil {
		s.elems = append([]jmember{{key: "type", val: jstr("object")}}, s.elems...)
	} else if t.kind != jString || t.str != "object" {
		return nil, schemaError("parameters have type " + string(compact(t)) + ", want \"object\"")
	}
	if props := s.get("properties"); props != nil && props.kind != jObject {
		return nil, schemaError("properties are a JSON " + props.kind.String() + ", want an object")
	}
	if req := s.get("required"); req != nil {
		ok := req.kind == jArray
		for _, e := range req.elems {
			ok = ok && e.val.kind == jString
		}
		if !ok {
			return nil, schemaError("required is not a list of names: " + string(compact(req)))
		}
	}
	if !s.has("properties") {
		at := 0
		for i, m := range s.elems {
			if m.key == "type" {
				at = i + 1
			}
		}
		s.elems = insertMember(s.elems, at, jmember{key: "properties", val: jvalue{kind: jObject}})
	}
	if hoisted != nil && hoisted.kind == jArray && len(hoisted.elems) > 0 && !s.has("required") {
		for _, e := range hoisted.elems {
			if e.val.kind != jString {
				return nil, schemaError("tool-level required holds a JSON " + e.val.kind.String())
			}
		}
		s.elems = append(s.elems, jmember{key: "required", val: *hoisted})
	}
	return compact(&s), nil
}

func insertMember(ms []jmember, at int, m jmember) []jmember {
	ms = append(ms, jmember{})
	copy(ms[at+1:], ms[at:])
	ms[at] = m
	return ms
}

// isSchema reports whether an object reads as a JSON Schema: a "type" given
// as a string or list, or "properties" that map names to objects. xlam's flat
// maps have neither (a parameter called "type" maps to an object).
func isSchema(p *jvalue) bool {
	if t := p.get("type"); t != nil && (t.kind == jString || t.kind == jArray) {
		return true
	}
	props := p.get("properties")
	if props == nil || props.kind != jObject {
		return false
	}
	for _, m := range props.elems {
		if m.val.kind != jObject {
			return false
		}
	}
	return true
}

// isFlat reports whether every member of p is an object (one per parameter).
func isFlat(p *jvalue) bool {
	for _, m := range p.elems {
		if m.val.kind != jObject {
			return false
		}
	}
	return true
}

// flatParameters converts xlam's {param: {description, type, default}} into
// {"type":"object","properties":{…},"required":[…]}: every parameter whose
// type is not marked optional is required.
func flatParameters(p *jvalue) jvalue {
	props := jvalue{kind: jObject, elems: p.elems}
	req := make([]jmember, 0, len(props.elems))
	for i := range props.elems {
		if !normalizeSchema(&props.elems[i].val) {
			req = append(req, jmember{val: jstr(props.elems[i].key)})
		}
	}
	out := jvalue{kind: jObject, elems: []jmember{{key: "type", val: jstr("object")}, {key: "properties", val: props}}}
	if len(req) > 0 {
		out.elems = append(out.elems, jmember{key: "required", val: jvalue{kind: jArray, elems: req}})
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
func normalizeSchema(v *jvalue) (optional bool) {
	if v.kind != jObject {
		return false
	}
	in := v.elems
	out := in[:0] // written behind the reading position, until it must grow
	shared := true
	put := func(read int, ms ...jmember) {
		if shared && len(out)+len(ms) > read {
			out = append(make([]jmember, 0, len(in)+len(ms)+1), out...)
			shared = false
		}
		out = append(out, ms...)
	}
	hasRequired, anyOptional := false, false
	hasItems, hasAnyOf := v.has("items"), v.has("anyOf") // read before out overwrites in
	propsAt := -1
	var propOptional []bool
	for i := range in {
		m := in[i]
		switch m.key {
		case "type":
			switch m.val.kind {
			case jString:
				if isJSONType(m.val.str) {
					break
				}
				name, opt := cutOptional(m.val.str)
				if t, ok := simpleType(name); ok { // "dict", "str, optional" …
					optional = optional || opt
					m.val = jstr(t)
					break
				}
				ms, opt, ok := pyType(m.val.str)
				optional = optional || opt
				if ok {
					for _, x := range ms {
						if x.key == "items" && hasItems || x.key == "anyOf" && hasAnyOf {
							continue // the schema's own wins
						}
						put(i+1, x)
					}
				}
				continue
			case jArray:
				names := jvalue{kind: jArray}
				for _, e := range m.val.elems {
					if e.val.kind != jString {
						continue
					}
					if t, ok := simpleType(e.val.str); ok {
						names.elems = append(names.elems, jmember{val: jstr(t)})
					}
				}
				if len(names.elems) == 0 {
					continue
				}
				m.val = names
			}
		case "properties":
			if m.val.kind == jObject {
				propOptional = make([]bool, len(m.val.elems))
				for j := range m.val.elems {
					propOptional[j] = normalizeSchema(&m.val.elems[j].val)
					anyOptional = anyOptional || propOptional[j]
				}
				propsAt = len(out)
			}
		case "items", "additionalProperties", "not":
			if m.val.kind == jObject {
				normalizeSchema(&m.val)
			} else if m.val.kind == jArray {
				normalizeList(&m.val)
			}
		case "anyOf", "oneOf", "allOf", "prefixItems":
			if m.val.kind == jArray {
				normalizeList(&m.val)
			}
		case "required":
			if m.val.kind == jNull {
				continue
			}
			hasRequired = true
		}
		put(i+1, m)
	}
	if anyOptional && !hasRequired {
		props := out[propsAt].val
		var req []jmember
		for j, p := range props.elems {
			if !propOptional[j] {
				req = append(req, jmember{val: jstr(p.key)})
			}
		}
		if len(req) > 0 {
			if shared {
				out = append(make([]jmember, 0, len(out)+1), out...)
			}
			out = insertMember(out, propsAt+1, jmember{key: "required", val: jvalue{kind: jArray, elems: req}})
		}
	}
	v.elems = out
	return optional
}

func normalizeList(v *jvalue) {
	for i := range v.elems {
		normalizeSchema(&v.elems[i].val)
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
func pyType(s string) (members []jmember, optional, ok bool) {
	s, optional = cutOptional(s)
	p := typeParser{s: s}
	sch, opt, ok := p.expr()
	if !ok || p.i != len(p.s) {
		return nil, optional, false
	}
	return sch.elems, optional || opt, true
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
}

func (p *typeParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// expr returns the schema of one annotation; opt reports Optional[…] or a
// Union with None.
func (p *typeParser) expr() (sch jvalue, opt, ok bool) {
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
	var args []jvalue
	var argOpt []bool
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
	obj := func(ms ...jmember) jvalue { return jvalue{kind: jObject, elems: ms} }
	typ := func(t string) jmember { return jmember{key: "type", val: jstr(t)} }
	lower := strings.ToLower(name)
	switch lower {
	case "optional":
		if len(args) != 1 {
			return sch, false, false
		}
		return args[0], true, true
	case "union":
		var alts []jmember
		for i, a := range args {
			if t := a.get("type"); t != nil && t.kind == jString && t.str == "null" {
				opt = true
				continue
			}
			opt = opt || argOpt[i]
			alts = append(alts, jmember{val: a})
		}
		switch len(alts) {
		case 0:
			return sch, false, false
		case 1:
			return alts[0].val, opt, true
		}
		return obj(jmember{key: "anyOf", val: jvalue{kind: jArray, elems: alts}}), opt, true
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
			if string(compact(&a)) != string(compact(&items)) {
				same = false
			}
		}
		if lower != "tuple" || ellipsis || same {
			if len(items.elems) > 0 && (lower == "tuple" || len(args) == 1) {
				sch.elems = append(sch.elems, jmember{key: "items", val: items})
			}
		}
	}
	return sch, false, true
}
