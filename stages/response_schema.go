package stages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// ResponseSchemaConfig is the optional `response_schema:` stage (seed 001,
// Algorithm 2): it derives each tool's response schema from the tool
// results observed in the run and attaches it to the tool definition
// (record.Tool.Response, compact JSON Schema), so the exported tool list
// documents what each tool returns, as ATC's tool protocols do.
//
//	stages:
//	  - response_schema: {}
//
// Derivation, per observed result (Algorithm 2, with JSON Schema types):
// an object gives {"type":"object","properties":{…}} with every key's
// schema; an array gives {"type":"array","items":…} with items merged over
// ALL its elements ({"type":"array"} when empty; Algorithm 2 reads the
// first element only, which rejects the others when they differ, as
// [{"a":1},{"a":"s","b":true}] does); strings, integers (numbers written
// without fraction or exponent), other numbers, booleans and null give
// {"type":"string"}, "integer", "number", "boolean", "null". A result that
// is not JSON gives {"type":"string"}. Nesting deeper than 32 levels keeps
// the type but not the inside.
//
// Objects whose keys are data, not field names, are maps: an object whose
// keys all look like data (numbers, dates and times such as "2024-01-02"
// or "2024-01-02 10:00", hexadecimal IDs and UUIDs of 8 characters or
// more), or an object place seen with more than 64 distinct keys in all,
// gives {"type":"object","additionalProperties":S} with S the merge of
// every value's schema, not one property per key (a daily price series
// listed 1,912 dates as properties, 138 kB in every record). Finally a
// tool's schema is kept under 8 KiB: while longer, its object with the
// most listed properties (the deepest of those on a tie) becomes a map,
// and when none lists two or more, the deepest level loses its inside.
// Both only loosen the schema.
//
// A result in ToolACE's envelope, [{"name": <the tool>, "results": R}] or
// {"name": <the tool>, "results": R} (optionally with "function_id", as
// meta_tool results in seed 000 Fig 12), gives the schema of R: the
// toolace reader unwraps it, but rows converted to sharegpt keep it around
// the result of a single call, and the tool returns R, not the envelope.
// A list of several envelopes gives the R of the one named after the tool.
//
// Observations are merged per tool, where a tool is identified by its name
// and definition (description and parameters, whatever the order of their
// keys: schemaKey), because one name can carry different definitions in
// different records. Merging is deterministic: the
// runner streams records in input order and merge is applied in that order.
// Merging keeps every observed type: two different types give a type list
// ({"type":["string","number"]} for 530.33 and "$898.09",
// {"type":["string","null"]} for null and "x"; integer with number is
// number, types listed in the order object, array, string, integer,
// number, boolean, null); object parts merge into the union of their
// properties (first-seen order, common properties merged recursively) or,
// for maps, of their values; array parts merge their items. So every
// result a schema was derived from validates against it, and the union
// documents every field a tool was seen to return, which is what a tool
// protocol is for; required lists are not derived.
//
// Results are matched to tools through the call turn they answer (result i
// answers call i) and the definitions in scope there: the record's tools and
// tool definitions returned by earlier meta_tool calls. Schemas are attached
// only to the record's listed tools; definitions inside meta_tool results
// are data of the dialogue and stay as they are. meta_tool itself gets no
// schema: its results are other tools' definitions, whose union would list
// every parameter name of the library as its fields. Tools never seen
// answering keep an empty Response.
type ResponseSchemaConfig struct {
	// Overwrite replaces a response schema a tool already has; by default
	// an existing one (e.g. from the source) is kept.
	Overwrite bool `yaml:"overwrite" json:"overwrite,omitempty"`
}

func (c *ResponseSchemaConfig) defaults()          {}
func (c *ResponseSchemaConfig) validate() []string { return nil }
func (c *ResponseSchemaConfig) version() int       { return 5 } // 2: envelopes unwrapped; 3: absent responses after a present run written NULL (shard encoder); 4: no schema for meta_tool, tools told apart by schemaKey; 5: type lists, items of every element, maps, 8 KiB bound

func (c *ResponseSchemaConfig) build(env *Env) (Stage, error) {
	return &responseSchemas{overwrite: c.Overwrite, stage: env.Stage}, nil
}

type responseSchemas struct {
	overwrite bool
	stage     string

	mu      sync.Mutex
	planned bool
	schemas map[string]json.RawMessage // tool key → compact schema
}

// Plan derives the schemas from every input record and returns a digest of
// them (sha256 over the tool keys and schemas in key order).
func (s *responseSchemas) Plan(ctx context.Context, scan func(yield func(*record.Record) error) error) (string, error) {
	nodes := map[string]*schemaNode{}
	err := scan(func(r *record.Record) error {
		observeRecord(r, func(key string, n *schemaNode) {
			if old, ok := nodes[key]; ok {
				nodes[key] = mergeSchema(old, n)
			} else {
				nodes[key] = n
			}
		})
		return ctx.Err()
	})
	if err != nil {
		return "", err
	}
	keys := make([]string, 0, len(nodes))
	for k := range nodes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	schemas := make(map[string]json.RawMessage, len(nodes))
	h := sha256.New()
	for _, k := range keys {
		schema := boundSchema(nodes[k])
		schemas[k] = schema
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(schema)
		h.Write([]byte{0})
	}
	s.mu.Lock()
	s.schemas, s.planned = schemas, true
	s.mu.Unlock()
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Process attaches the planned schemas to r's tools. It returns r itself
// when nothing changes.
func (s *responseSchemas) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	s.mu.Lock()
	schemas, planned := s.schemas, s.planned
	s.mu.Unlock()
	if !planned {
		return nil, errors.New("response_schema: Process called before Plan")
	}
	var out *record.Record
	for i, t := range r.Tools {
		schema, ok := schemas[schemaKey(t)]
		if !ok || (len(t.Response) > 0 && !s.overwrite) || bytes.Equal(t.Response, schema) {
			continue
		}
		if out == nil {
			out = r.Clone()
		}
		out.Tools[i].Response = slices.Clone(schema)
	}
	if out == nil {
		return []*record.Record{r}, nil
	}
	out.AddStep(s.stage, "rule", "")
	return []*record.Record{out}, nil
}

// schemaKey identifies a tool for its response schema: its name,
// description and parameters with every object's keys sorted, so that one
// tool whose schema sources write in another key order is one tool (it
// gets its schema in every record). Parameters that are not JSON count as
// written.
func schemaKey(t record.Tool) string {
	params := t.Parameters
	dec := json.NewDecoder(bytes.NewReader(t.Parameters))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil { // maps marshal with sorted keys
			params = b
		}
	}
	return t.Name + "\x00" + t.Description + "\x00" + string(params)
}

// observeRecord calls see with the tool key and derived schema of every
// tool result of r that can be matched to a tool definition, in order.
func observeRecord(r *record.Record, see func(key string, n *schemaNode)) {
	var calls []record.Call // of the latest call turn
	// scope is toolsInScope(r, k) for the message k at hand, kept up as
	// the messages go (computing it for each tool turn read every turn
	// before it again: one record of 64k rounds took 36 s).
	scope := toolsInScope(r, 0)
	for _, m := range r.Messages {
		switch m.Role {
		case record.RoleAssistant:
			if len(m.Calls) > 0 {
				calls = m.Calls
			}
		case record.RoleTool:
			for i, res := range m.Results {
				name := res.Name
				if name == "" && i < len(calls) {
					name = calls[i].Name
				}
				t, ok := scope[name]
				if !ok || name == verify.MetaTool {
					continue
				}
				see(schemaKey(t), deriveSchema(unwrapEnvelope(res.Content, name)))
			}
			for _, t := range retrievedTools([]record.Message{m}) { // in scope for the turns after this one
				if _, ok := scope[t.Name]; !ok {
					scope[t.Name] = t
				}
			}
		}
	}
}

// unwrapEnvelope returns R when content is name's result R in ToolACE's
// envelope (see ResponseSchemaConfig), else content. In a list of
// envelopes (rows whose converter dropped a parallel call keep the results
// of all), the one envelope named after the tool counts.
func unwrapEnvelope(content, name string) string {
	text := strings.TrimSpace(content)
	if text == "" || text[0] != '[' && text[0] != '{' || !strings.Contains(text, `"results"`) {
		return content
	}
	items := []json.RawMessage{json.RawMessage(text)}
	if text[0] == '[' {
		if json.Unmarshal([]byte(text), &items) != nil {
			return content
		}
	}
	var found json.RawMessage
	for _, it := range items {
		n, results, ok := envelope(it)
		if !ok {
			return content
		}
		if n == name {
			if found != nil {
				return content
			}
			found = results
		}
	}
	if found == nil {
		return content
	}
	return string(found)
}

// envelope reads {"name": n, "results": r} with at most "function_id"
// besides.
func envelope(b json.RawMessage) (name string, results json.RawMessage, ok bool) {
	keys, vals, err := toollib.ObjectMembers(b)
	if err != nil {
		return "", nil, false
	}
	for i, k := range keys {
		switch k {
		case "name":
			if json.Unmarshal(vals[i], &name) != nil {
				return "", nil, false
			}
		case "results":
			results = vals[i]
		case "function_id":
		default:
			return "", nil, false
		}
	}
	return name, results, results != nil
}

// A schemaNode is a derived schema: the JSON types observed at one place
// and, for objects and arrays, what is inside.
type schemaNode struct {
	types   uint8                  // set of typ* bits
	names   []string               // object properties in first-seen order
	props   map[string]*schemaNode // object properties
	mapLike bool                   // object described by values, not by names
	values  *schemaNode            // map-like object's additionalProperties
	items   *schemaNode            // array items; nil when no element was seen
}

// JSON types, in the order a schema lists them.
const (
	typObject uint8 = 1 << iota
	typArray
	typString
	typInteger
	typNumber
	typBoolean
	typNull
)

var typNames = [...]string{"object", "array", "string", "integer", "number", "boolean", "null"}

const (
	// maxSchemaDepth bounds how deep a derived schema goes.
	maxSchemaDepth = 32
	// maxSchemaProperties: an object place seen with more distinct keys
	// than this is described as a map (see ResponseSchemaConfig).
	maxSchemaProperties = 64
	// maxSchemaBytes bounds a tool's rendered schema (see boundSchema).
	maxSchemaBytes = 8192
)

func typeNode(t uint8) *schemaNode { return &schemaNode{types: t} }

// deriveSchema derives the schema of one tool result (Algorithm 2). A
// result that is not JSON is a string.
func deriveSchema(content string) *schemaNode {
	text := strings.TrimSpace(content)
	if text == "" || !json.Valid([]byte(text)) {
		return typeNode(typString)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	n, err := observeJSON(dec, 0)
	if err != nil {
		// Valid JSON always decodes; keep the fallback total anyway.
		return typeNode(typString)
	}
	return n
}

func observeJSON(dec *json.Decoder, depth int) (*schemaNode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		var n *schemaNode
		if t == '{' {
			n = &schemaNode{types: typObject, props: map[string]*schemaNode{}}
		} else {
			n = typeNode(typArray)
		}
		dataKeys := true
		for dec.More() {
			var key string
			if t == '{' {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ = kt.(string)
				dataKeys = dataKeys && keyLooksLikeData(key)
			}
			if depth >= maxSchemaDepth {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, err
				}
				continue
			}
			child, err := observeJSON(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if t == '[' {
				n.items = mergeSchema(n.items, child) // every element, not only the first
			} else {
				n.setProp(key, child)
			}
		}
		if _, err := dec.Token(); err != nil { // closing delimiter
			return nil, err
		}
		if t == '{' && len(n.names) > 0 && (dataKeys || len(n.names) > maxSchemaProperties) {
			n.toMap()
		}
		return n, nil
	case string:
		return typeNode(typString), nil
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return typeNode(typNumber), nil
		}
		return typeNode(typInteger), nil
	case bool:
		return typeNode(typBoolean), nil
	default:
		return typeNode(typNull), nil
	}
}

// keyLooksLikeData reports whether an object key is a value rather than a
// field name: a number, date or time (digits with at most -:./+ T Z and
// spaces between them), or a hexadecimal ID or UUID of 8 characters or
// more holding a digit.
func keyLooksLikeData(k string) bool {
	if k == "" {
		return false
	}
	digit, dateLike, hexLike := false, true, len(k) >= 8
	for _, c := range k {
		isDigit := c >= '0' && c <= '9'
		digit = digit || isDigit
		dateLike = dateLike && (isDigit || strings.ContainsRune("-:./+ TZ", c))
		hexLike = hexLike && (isDigit || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-')
	}
	return digit && (dateLike || hexLike)
}

// setProp adds or merges (for a key repeated in one object or seen again)
// a property.
func (n *schemaNode) setProp(key string, child *schemaNode) {
	if n.mapLike {
		n.values = mergeSchema(n.values, child)
		return
	}
	if old, ok := n.props[key]; ok {
		n.props[key] = mergeSchema(old, child)
		return
	}
	n.names = append(n.names, key)
	n.props[key] = child
}

// toMap turns n's object part into a map: its values' schema is the
// merge of every property's.
func (n *schemaNode) toMap() {
	if n.mapLike {
		return
	}
	n.mapLike = true
	for _, k := range n.names {
		n.values = mergeSchema(n.values, n.props[k])
	}
	n.names, n.props = nil, nil
}

// mergeSchema merges observation b into a (see ResponseSchemaConfig) and
// returns the result; a is changed in place when it survives. Every value
// valid against a or b is valid against the result.
func mergeSchema(a, b *schemaNode) *schemaNode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	if a.types&typObject != 0 && b.types&typObject != 0 {
		if b.mapLike {
			a.toMap()
			a.values = mergeSchema(a.values, b.values)
		}
		for _, k := range b.names {
			a.setProp(k, b.props[k])
		}
		if len(a.names) > maxSchemaProperties {
			a.toMap()
		}
	} else if b.types&typObject != 0 {
		a.names, a.props, a.mapLike, a.values = b.names, b.props, b.mapLike, b.values
	}
	if a.types&typArray != 0 && b.types&typArray != 0 {
		a.items = mergeSchema(a.items, b.items)
	} else if b.types&typArray != 0 {
		a.items = b.items
	}
	a.types |= b.types
	return a
}

// write renders n as compact JSON Schema, properties in first-seen order.
func (n *schemaNode) write(buf *bytes.Buffer) {
	types := n.types
	if types&typNumber != 0 {
		types &^= typInteger // number includes the integers
	}
	var names []string
	for i, name := range typNames {
		if types&(1<<i) != 0 {
			names = append(names, `"`+name+`"`)
		}
	}
	if len(names) == 1 {
		buf.WriteString(`{"type":` + names[0])
	} else {
		buf.WriteString(`{"type":[` + strings.Join(names, ",") + `]`)
	}
	if types&typObject != 0 {
		if n.mapLike {
			buf.WriteString(`,"additionalProperties":`)
			n.values.write(buf)
		} else {
			buf.WriteString(`,"properties":{`)
			for i, k := range n.names {
				if i > 0 {
					buf.WriteByte(',')
				}
				key, _ := jsonout.Marshal(k)
				buf.Write(key)
				buf.WriteByte(':')
				n.props[k].write(buf)
			}
			buf.WriteByte('}')
		}
	}
	if types&typArray != 0 && n.items != nil {
		buf.WriteString(`,"items":`)
		n.items.write(buf)
	}
	buf.WriteByte('}')
}

// boundSchema renders n within maxSchemaBytes: while it is longer, the
// object place with the most listed properties becomes a map, and when
// none has two or more, the deepest level loses its inside. Both only
// loosen the schema, so what it was derived from stays valid.
func boundSchema(n *schemaNode) []byte {
	var buf bytes.Buffer
	for {
		buf.Reset()
		n.write(&buf)
		if buf.Len() <= maxSchemaBytes {
			return buf.Bytes()
		}
		if widest := n.widestObject(); widest != nil && len(widest.names) >= 2 {
			widest.toMap()
			continue
		}
		n.cut(n.depth() - 1)
	}
}

// widestObject returns the node under n (n included) listing the most
// properties; on a tie the deepest, then the first in document order, so
// that the names nearest the top are the last to go.
func (n *schemaNode) widestObject() *schemaNode {
	var best *schemaNode
	bestDepth := -1
	var walk func(m *schemaNode, depth int)
	walk = func(m *schemaNode, depth int) {
		if m == nil {
			return
		}
		if len(m.names) > 0 && (best == nil || len(m.names) > len(best.names) || len(m.names) == len(best.names) && depth > bestDepth) {
			best, bestDepth = m, depth
		}
		for _, k := range m.names {
			walk(m.props[k], depth+1)
		}
		walk(m.values, depth+1)
		walk(m.items, depth+1)
	}
	walk(n, 0)
	return best
}

// depth is the number of levels of n (1 for a node with nothing inside).
func (n *schemaNode) depth() int {
	if n == nil {
		return 0
	}
	d := max(n.values.depth(), n.items.depth())
	for _, k := range n.names {
		d = max(d, n.props[k].depth())
	}
	return d + 1
}

// cut drops what is inside n below levels levels (levels ≥ 1).
func (n *schemaNode) cut(levels int) {
	if n == nil {
		return
	}
	if levels <= 1 {
		n.names, n.values, n.items, n.mapLike = nil, nil, nil, false
		if n.types&typObject != 0 {
			n.props = map[string]*schemaNode{}
		}
		return
	}
	for _, k := range n.names {
		n.props[k].cut(levels - 1)
	}
	n.values.cut(levels - 1)
	n.items.cut(levels - 1)
}

// SavePlan writes the derived schemas in tool key order.
func (s *responseSchemas) SavePlan(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.planned {
		return errors.New("response_schema: no plan to save")
	}
	var p planWriter
	p.uint(uint64(len(s.schemas)))
	for _, k := range slices.Sorted(maps.Keys(s.schemas)) {
		p.str(k)
		p.bytes(s.schemas[k])
	}
	return p.flush(w)
}

// LoadPlan reads what SavePlan wrote.
func (s *responseSchemas) LoadPlan(r io.Reader) error {
	p, err := newPlanReader(r)
	if err != nil {
		return err
	}
	n := p.count()
	schemas := make(map[string]json.RawMessage, n)
	for range n {
		k := p.str()
		schemas[k] = json.RawMessage(p.bytes())
	}
	if err := p.done(); err != nil {
		return err
	}
	s.mu.Lock()
	s.schemas, s.planned = schemas, true
	s.mu.Unlock()
	return nil
}
