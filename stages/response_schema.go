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
// schema; an array gives {"type":"array","items":…} with items derived from
// its FIRST element only ({"type":"array"} when empty); strings, integers
// (numbers written without fraction or exponent), other numbers, booleans
// and null give {"type":"string"}, "integer", "number", "boolean", "null".
// A result that is not JSON gives {"type":"string"}. Nesting deeper than 32
// levels keeps the type but not the inside.
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
// Two object schemas merge into the union of their properties (first-seen
// order, common properties merged recursively); two array schemas merge
// their items; integer and number merge into number; null gives way to any
// other type; for any other conflict the first observation wins. The union
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
func (c *ResponseSchemaConfig) version() int       { return 4 } // 2: envelopes unwrapped; 3: absent responses after a present run written NULL (shard encoder); 4: no schema for meta_tool, tools told apart by schemaKey

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

// maxSchemaDepth bounds how deep a derived schema goes.
const maxSchemaDepth = 32

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
		var buf bytes.Buffer
		nodes[k].write(&buf)
		schemas[k] = buf.Bytes()
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(buf.Bytes())
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

// A schemaNode is a derived schema: a JSON type and, for objects and
// arrays, what is inside.
type schemaNode struct {
	typ   string                 // object, array, string, integer, number, boolean, null
	names []string               // object properties in first-seen order
	props map[string]*schemaNode // object properties
	items *schemaNode            // array items; nil when no element was seen
}

// deriveSchema derives the schema of one tool result (Algorithm 2).
func deriveSchema(content string) *schemaNode {
	text := strings.TrimSpace(content)
	if text == "" || !json.Valid([]byte(text)) {
		return &schemaNode{typ: "string"}
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	n, err := observeJSON(dec, 0)
	if err != nil {
		// Valid JSON always decodes; keep the fallback total anyway.
		return &schemaNode{typ: "string"}
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
			n = &schemaNode{typ: "object", props: map[string]*schemaNode{}}
		} else {
			n = &schemaNode{typ: "array"}
		}
		first := true
		for dec.More() {
			var key string
			if t == '{' {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ = kt.(string)
			}
			if depth >= maxSchemaDepth || (t == '[' && !first) {
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
				n.items, first = child, false
			} else {
				n.setProp(key, child)
			}
		}
		if _, err := dec.Token(); err != nil { // closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &schemaNode{typ: "string"}, nil
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return &schemaNode{typ: "number"}, nil
		}
		return &schemaNode{typ: "integer"}, nil
	case bool:
		return &schemaNode{typ: "boolean"}, nil
	default:
		return &schemaNode{typ: "null"}, nil
	}
}

// setProp adds or merges (for a key repeated in one object) a property.
func (n *schemaNode) setProp(key string, child *schemaNode) {
	if old, ok := n.props[key]; ok {
		n.props[key] = mergeSchema(old, child)
		return
	}
	n.names = append(n.names, key)
	n.props[key] = child
}

// mergeSchema merges observation b into a (see ResponseSchemaConfig) and
// returns the result; a is changed in place when it survives.
func mergeSchema(a, b *schemaNode) *schemaNode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.typ == "null":
		return b
	case b.typ == "null":
		return a
	case a.typ == "integer" && b.typ == "number":
		return b
	case a.typ != b.typ:
		return a
	case a.typ == "object":
		for _, k := range b.names {
			a.setProp(k, b.props[k])
		}
	case a.typ == "array":
		a.items = mergeSchema(a.items, b.items)
	}
	return a
}

// write renders n as compact JSON Schema, properties in first-seen order.
func (n *schemaNode) write(buf *bytes.Buffer) {
	buf.WriteString(`{"type":"` + n.typ + `"`)
	switch n.typ {
	case "object":
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
	case "array":
		if n.items != nil {
			buf.WriteString(`,"items":`)
			n.items.write(buf)
		}
	}
	buf.WriteByte('}')
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
