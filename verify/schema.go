package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/stages/record"
)

// A schema is the part of a tool's parameters JSON Schema that calls are
// checked against: type (with the aliases the dumps use), enum, const,
// properties, required, additionalProperties, items, default, and the bounds
// minimum/maximum/exclusiveMinimum/exclusiveMaximum, minLength/maxLength,
// minItems/maxItems and pattern. Other keywords (format, anyOf, $ref, …) are
// not checked.
type schema struct {
	types    []string // JSON types ("string", "integer", …); nil means any
	enum     []any    // allowed values; nil means no enum
	props    map[string]*schema
	required []string // in the schema's order
	// addl is the additionalProperties setting: nil when absent, else a
	// boolean or a schema.
	addlSet  bool
	addlOK   bool
	addl     *schema
	items    *schema
	def      any
	hasDef   bool
	min, max *float64
	xmin     *float64
	xmax     *float64
	minLen   *int
	maxLen   *int
	minItems *int
	maxItems *int
	pattern  *regexp.Regexp
}

// decodeJSON decodes one JSON value, keeping numbers as json.Number so that
// integers stay exact; trailing data is an error.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.Trim(b[d.InputOffset():], " \t\n\r")) > 0 { // JSON's whitespace only, not \v or U+00A0
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// parseSchema parses a tool's parameters. An empty schema text means a tool
// without parameters.
func parseSchema(b []byte) (*schema, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return &schema{types: []string{"object"}}, nil
	}
	v, err := decodeJSON(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parameters are a JSON %s, not an object", jsonKind(v))
	}
	return buildSchema(m), nil
}

// schemas memoises parsed parameter schemas by their text: a run checks the
// same few thousand tool definitions over and over. Parsed schemas are never
// modified. The map is dropped when it reaches schemaCacheMax entries.
var schemas struct {
	sync.Mutex
	m map[string]cachedSchema
}

const schemaCacheMax = 8192

type cachedSchema struct {
	s   *schema
	err error
}

// parseSchemaCached is parseSchema through the cache.
func parseSchemaCached(b []byte) (*schema, error) {
	schemas.Lock()
	e, ok := schemas.m[string(b)]
	schemas.Unlock()
	if ok {
		return e.s, e.err
	}
	s, err := parseSchema(b)
	schemas.Lock()
	if schemas.m == nil || len(schemas.m) >= schemaCacheMax {
		schemas.m = make(map[string]cachedSchema)
	}
	schemas.m[string(b)] = cachedSchema{s, err}
	schemas.Unlock()
	return s, err
}

func buildSchema(m map[string]any) *schema {
	s := &schema{}
	switch t := m["type"].(type) {
	case string:
		if n, ok := normType(t); ok {
			s.types = []string{n}
		}
	case []any:
		for _, e := range t {
			str, _ := e.(string)
			n, ok := normType(str)
			if !ok {
				s.types = nil // an alternative we do not know: accept any type
				break
			}
			s.types = append(s.types, n)
		}
	}
	if nullable, _ := m["nullable"].(bool); nullable && s.types != nil {
		s.types = append(s.types, "null")
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		s.enum = e
	}
	if c, ok := m["const"]; ok {
		s.enum = []any{c}
	}
	if p, ok := m["properties"].(map[string]any); ok {
		s.props = make(map[string]*schema, len(p))
		for k, v := range p {
			ps, _ := v.(map[string]any)
			if ps == nil {
				ps = map[string]any{}
			}
			s.props[k] = buildSchema(ps)
			// Some dumps mark a property itself as required.
			if req, _ := ps["required"].(bool); req {
				s.required = append(s.required, k)
			}
		}
		if len(s.required) > 1 {
			slices.Sort(s.required) // from map order; make it stable
		}
	}
	if r, ok := m["required"].([]any); ok {
		for _, e := range r {
			if k, ok := e.(string); ok && !slices.Contains(s.required, k) {
				s.required = append(s.required, k)
			}
		}
	}
	switch a := m["additionalProperties"].(type) {
	case bool:
		s.addlSet, s.addlOK = true, a
	case map[string]any:
		s.addlSet, s.addlOK, s.addl = true, true, buildSchema(a)
	}
	if it, ok := m["items"].(map[string]any); ok {
		s.items = buildSchema(it)
	}
	if d, ok := m["default"]; ok {
		s.def, s.hasDef = d, true
	}
	s.min, s.max = num(m["minimum"]), num(m["maximum"])
	s.xmin, s.xmax = num(m["exclusiveMinimum"]), num(m["exclusiveMaximum"])
	s.minLen, s.maxLen = count(m["minLength"]), count(m["maxLength"])
	s.minItems, s.maxItems = count(m["minItems"]), count(m["maxItems"])
	if p, ok := m["pattern"].(string); ok {
		// ECMA-262 patterns that RE2 cannot compile are not checked.
		s.pattern, _ = regexp.Compile(p)
	}
	return s
}

func num(v any) *float64 {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

func count(v any) *int {
	f := num(v)
	if f == nil || *f < 0 || *f != math.Trunc(*f) || *f > math.MaxInt32 {
		return nil
	}
	n := int(*f)
	return &n
}

// normType maps a type name to a JSON Schema type, accepting the spellings
// found in the dumps: ToolACE's "dict", xlam's Python types ("str", "int,
// optional", "List[str]"). ok is false for names it does not know
// ("Union[int, float]", "any"), which are then not checked.
func normType(t string) (string, bool) {
	t = strings.ToLower(strings.TrimSpace(t))
	t = strings.TrimSpace(strings.TrimSuffix(t, ", optional"))
	switch t {
	case "string", "str", "text":
		return "string", true
	case "integer", "int", "long":
		return "integer", true
	case "number", "float", "double", "decimal":
		return "number", true
	case "boolean", "bool":
		return "boolean", true
	case "array", "list", "tuple", "set":
		return "array", true
	case "object", "dict", "map", "mapping":
		return "object", true
	case "null", "none":
		return "null", true
	}
	for _, p := range []string{"list[", "tuple[", "set[", "sequence["} {
		if strings.HasPrefix(t, p) {
			return "array", true
		}
	}
	if strings.HasPrefix(t, "dict[") {
		return "object", true
	}
	return "", false
}

// jsonKind names the JSON type of a decoded value; numbers are "integer"
// when integral.
func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isInteger(x) {
			return "integer"
		}
		return "number"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func isInteger(n json.Number) bool {
	if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return true
	}
	f, err := n.Float64()
	return err == nil && !math.IsInf(f, 0) && f == math.Trunc(f)
}

func hasType(types []string, v any) bool {
	k := jsonKind(v)
	for _, t := range types {
		if t == k || t == "number" && k == "integer" {
			return true
		}
	}
	return false
}

// callCheck is the state of checking one call's arguments.
type callCheck struct {
	check string // checker name for the problems
	fn    string // function name, for messages
	out   []Problem
}

func (c *callCheck) add(kind, path, format string, args ...any) {
	c.out = append(c.out, Problem{Check: c.check, Kind: kind, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// param names the argument at path for messages, its path written once:
// `parameter "city"`, `parameter "legs[0].date"`, `parameter "departure
// date"` (a top-level key), and a path holding a key that needs quotes as
// it is, `parameter legs[0]["seat class"]` (quoting it again garbled it:
// "[\"departure date\"]").
func param(path string) string {
	p := strings.TrimPrefix(strings.TrimPrefix(path, "arguments"), ".")
	if strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]") {
		if k, err := strconv.Unquote(p[1 : len(p)-1]); err == nil && joinPath("", k) == p {
			return "parameter " + strconv.Quote(k)
		}
	}
	if strings.Contains(p, `"`) {
		return "parameter " + p
	}
	return "parameter " + strconv.Quote(p)
}

// object checks an arguments object (top) or a nested object value.
func (c *callCheck) object(s *schema, m map[string]any, path string, top bool) {
	for _, k := range s.required {
		if _, ok := m[k]; ok {
			continue
		}
		if top {
			c.add("param_missing", joinPath(path, k), "function %q is missing required parameter %q", c.fn, k)
		} else {
			c.add("param_missing", joinPath(path, k), "%s of %q is missing required key %q", param(path), c.fn, k)
		}
	}
	// Unknown keys: at the top level every key must be a declared parameter
	// (a tool without properties takes no arguments); in nested objects only
	// when properties are declared. additionalProperties true or a schema
	// allows extra keys, false forbids them everywhere.
	strict := top || len(s.props) > 0
	if s.addlSet {
		strict = !s.addlOK
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := joinPath(path, k)
		ps, ok := s.props[k]
		switch {
		case ok:
			c.value(ps, m[k], p)
		case s.addl != nil:
			c.value(s.addl, m[k], p)
		case strict && top:
			c.add("unknown_param", p, "function %q has no parameter %q", c.fn, k)
		case strict:
			c.add("unknown_param", p, "%s of %q has no key %q", param(path), c.fn, k)
		}
	}
}

func (c *callCheck) value(s *schema, v any, path string) {
	if s.types != nil && !hasType(s.types, v) {
		got := jsonKind(v) + " " + show(v)
		if v == nil {
			got = "null"
		}
		c.add("wrong_type", path, "%s of %q must be %s, got %s", param(path), c.fn, strings.Join(s.types, " or "), got)
		return
	}
	if s.enum != nil && !slices.ContainsFunc(s.enum, func(e any) bool { return jsonEqual(e, v) }) {
		alts := make([]string, len(s.enum))
		for i, e := range s.enum {
			alts[i] = show(e)
		}
		c.add("bad_enum", path, "%s of %q must be one of %s; got %s", param(path), c.fn, clip.Runes(strings.Join(alts, ", "), 200), show(v))
		return
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return
		}
		switch {
		case s.min != nil && f < *s.min:
			c.add("constraint", path, "%s of %q must be at least %v, got %s", param(path), c.fn, *s.min, x)
		case s.max != nil && f > *s.max:
			c.add("constraint", path, "%s of %q must be at most %v, got %s", param(path), c.fn, *s.max, x)
		case s.xmin != nil && f <= *s.xmin:
			c.add("constraint", path, "%s of %q must be greater than %v, got %s", param(path), c.fn, *s.xmin, x)
		case s.xmax != nil && f >= *s.xmax:
			c.add("constraint", path, "%s of %q must be less than %v, got %s", param(path), c.fn, *s.xmax, x)
		}
	case string:
		n := utf8.RuneCountInString(x)
		switch {
		case s.minLen != nil && n < *s.minLen:
			c.add("constraint", path, "%s of %q must have at least %d characters, got %d", param(path), c.fn, *s.minLen, n)
		case s.maxLen != nil && n > *s.maxLen:
			c.add("constraint", path, "%s of %q must have at most %d characters, got %d", param(path), c.fn, *s.maxLen, n)
		case s.pattern != nil && !s.pattern.MatchString(x):
			c.add("constraint", path, "%s of %q must match the pattern %q, got %s", param(path), c.fn, s.pattern.String(), show(x))
		}
	case []any:
		switch {
		case s.minItems != nil && len(x) < *s.minItems:
			c.add("constraint", path, "%s of %q must have at least %d items, got %d", param(path), c.fn, *s.minItems, len(x))
		case s.maxItems != nil && len(x) > *s.maxItems:
			c.add("constraint", path, "%s of %q must have at most %d items, got %d", param(path), c.fn, *s.maxItems, len(x))
		}
		if s.items != nil {
			for i, e := range x {
				c.value(s.items, e, indexPath(path, i))
			}
		}
	case map[string]any:
		if s.props != nil || s.required != nil || s.addlSet {
			c.object(s, x, path, false)
		}
	}
}

// checkArgs checks the arguments of a call to fn against the parameters
// schema s.
func checkArgs(check, fn string, s *schema, args json.RawMessage) []Problem {
	c := &callCheck{check: check, fn: fn}
	m, err := decodeArgs(args)
	if err != nil {
		c.add("bad_json", "arguments", "arguments of %q are not a JSON object: %v", fn, err)
		return c.out
	}
	c.object(s, m, "arguments", true)
	return c.out
}

// decodeArgs decodes call arguments, which must be one JSON object.
func decodeArgs(args json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		return nil, errors.New("they are empty")
	}
	v, err := decodeJSON(args)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("got %s %s", jsonKind(v), showRaw(args))
	}
	return m, nil
}

// CheckCall returns the format problems of one call against the tools
// available: the function exists (func_not_found), its arguments are a JSON
// object (bad_json), every required parameter is present (param_missing),
// no undeclared parameter is used (unknown_param), and every value has the
// declared type (wrong_type), is one of the enum values (bad_enum) and keeps
// the declared bounds (constraint), recursively through items and nested
// properties. This is Tool-DC's Check step and ComplexFuncBench's format
// check. None means the call is well-formed.
//
// Paths are relative to the call ("name", "arguments.city"). When several
// tools share the call's name, the call passes if it fits any of them;
// otherwise the problems against the first are reported. A tool whose
// parameters are not a JSON object yields one "bad_schema" problem.
func CheckCall(tools []record.Tool, c record.Call) []Problem {
	return checkCall("call", tools, c)
}

func checkCall(check string, tools []record.Tool, c record.Call) []Problem {
	var first []Problem
	found := false
	for _, t := range tools {
		if t.Name != c.Name {
			continue
		}
		ps := checkAgainst(check, t, c)
		if len(ps) == 0 {
			return nil
		}
		if !found {
			first = ps
		}
		found = true
	}
	if !found {
		return []Problem{{Check: check, Kind: "func_not_found", Path: "name",
			Msg: fmt.Sprintf("function %q is not defined in the tool list", c.Name)}}
	}
	return first
}

func checkAgainst(check string, t record.Tool, c record.Call) []Problem {
	s, err := parseSchemaCached(t.Parameters)
	if err != nil {
		return []Problem{{Check: check, Kind: "bad_schema", Path: "name",
			Msg: fmt.Sprintf("tool %q has unusable parameters: %v", t.Name, err)}}
	}
	return checkArgs(check, c.Name, s, c.Arguments)
}
