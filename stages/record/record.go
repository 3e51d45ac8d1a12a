// Package record defines the canonical tool-use dialogue that every stage of
// augment reads and writes. The struct tags are the on-disk schema: the JSON
// tags shape the JSONL mirrors and rejects, the parquet tags shape the Parquet
// shards (real nested lists of structs, readable as such by DuckDB and Arrow).
package record

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// A Record is one dialogue with the tools available to it.
//
// ID is stable across stages and runs ("<source>:<row>"); a record derived
// from another gets the parent's ID plus a "/suffix" so lineage survives.
// Records are values owned by the stage holding them: a stage that keeps an
// input record and changes it must Clone it first.
type Record struct {
	ID       string    `json:"id" parquet:"id"`
	Source   string    `json:"source" parquet:"source"` // the source's name in pipeline.yaml
	Format   string    `json:"format" parquet:"format"` // the reader that parsed it: toolace, glaive, xlam, sharegpt, openai
	Row      int64     `json:"row" parquet:"row"`       // 0-based row in the source file
	System   string    `json:"system" parquet:"system"` // system prompt without the tool list
	Tools    []Tool    `json:"tools" parquet:"tools,list"`
	Messages []Message `json:"messages" parquet:"messages,list"`
	Tags     []Tag     `json:"tags" parquet:"tags,list"`       // sorted by key; see Tag
	Lineage  []Step    `json:"lineage" parquet:"lineage,list"` // one entry per stage that changed or made the record

	// Rendered is what a sink's Process made of the record for its own
	// WriteShard of the same shard (the export's sample): it travels with
	// the record instead of being parked in the sink. It is no part of the
	// schema (never stored in shards, mirrors or rejects), only the sink
	// that set it reads it, and Clone drops it (a changed record is not
	// what was rendered).
	Rendered any `json:"-" parquet:"-"`
}

// A Tool is one function the assistant may call, in the OpenAI function shape.
type Tool struct {
	Name        string `json:"name" parquet:"name"`
	Description string `json:"description" parquet:"description"`
	// Parameters is a JSON Schema object ({"type":"object","properties":…,
	// "required":[…]}) as compact JSON text. Never empty: a tool without
	// parameters has {"type":"object","properties":{}}.
	Parameters json.RawMessage `json:"parameters" parquet:"parameters,json"`
	// Response is the JSON Schema of the tool's results when known (ATC
	// response schemas), else empty (NULL in Parquet).
	Response json.RawMessage `json:"response,omitempty" parquet:"response,json,optional"`
}

// A Message is one turn. Which fields are used depends on Role:
// system and user turns carry Content; assistant turns carry optional
// Reasoning, optional Content (the text answer, or text said alongside the
// calls) and Calls; tool turns carry Results, one per call of the assistant
// turn they answer, in the same order.
type Message struct {
	Role      string   `json:"role" parquet:"role"`
	Content   string   `json:"content" parquet:"content"`
	Reasoning string   `json:"reasoning,omitempty" parquet:"reasoning"`
	Calls     []Call   `json:"calls,omitempty" parquet:"calls,list"`
	Results   []Result `json:"results,omitempty" parquet:"results,list"`
}

// A Call is one function call made by the assistant.
type Call struct {
	Name string `json:"name" parquet:"name"`
	// Arguments is a JSON object as compact JSON text.
	Arguments json.RawMessage `json:"arguments" parquet:"arguments,json"`
}

// A Result is the output of one call.
type Result struct {
	Name string `json:"name" parquet:"name"`
	// Content is the result as the source gave it: JSON text where the
	// source had JSON, plain text otherwise.
	Content string `json:"content" parquet:"content"`
}

// A Tag is a key/value label used by later stages and for filtering
// (world=open, difficulty=hard, category=multi_call, lang=zh-TW …).
// In DuckDB, map_from_entries(tags) turns the list into a map.
type Tag struct {
	Key   string `json:"key" parquet:"key"`
	Value string `json:"value" parquet:"value"`
}

// A Step records that a stage changed or produced a record, and with what:
// Provider is "rule" for deterministic code, "offline" for the built-in
// stand-in teacher, or the teacher's provider (e.g. "openai"); Model names
// the teacher model when there is one.
type Step struct {
	Stage    string `json:"stage" parquet:"stage"`
	Provider string `json:"provider" parquet:"provider"`
	Model    string `json:"model,omitempty" parquet:"model"`
}

// Tag returns the value of the tag key, or "".
func (r *Record) Tag(key string) string {
	i, ok := searchTags(r.Tags, key)
	if !ok {
		return ""
	}
	return r.Tags[i].Value
}

// searchTags is slices.BinarySearchFunc(tags, key) by Key, step for step
// (the same answer on any list, sorted or not), with keyLess for the
// comparison.
func searchTags(tags []Tag, key string) (int, bool) {
	i, j := 0, len(tags)
	for i < j {
		h := int(uint(i+j) >> 1)
		if keyLess(tags[h].Key, key) {
			i = h + 1
		} else {
			j = h
		}
	}
	return i, i < len(tags) && tags[i].Key == key
}

// SetTag sets the tag key to value, keeping Tags sorted.
func (r *Record) SetTag(key, value string) {
	i, ok := searchTags(r.Tags, key)
	if ok {
		r.Tags[i].Value = value
		return
	}
	r.Tags = slices.Insert(r.Tags, i, Tag{Key: key, Value: value})
}

// WithTags returns tags (sorted by key) with each tag of set (sorted by
// key, each key once) set as SetTag sets it, in a new list; tags itself
// when set is empty. One pass for all: SetTag after SetTag searched and
// shifted the list for each. Whether tags are sorted is seen as they are
// copied; unsorted tags take SetTag after SetTag.
func WithTags(tags []Tag, set ...Tag) []Tag {
	if len(set) == 0 {
		return tags
	}
	out := make([]Tag, 0, len(tags)+len(set))
	// unsorted reports whether tags[i] sorts before the tag before it:
	// tested on each tag as it is passed, so unsorted tags cost no pass of
	// their own.
	unsorted := func(i int) bool { return i > 0 && keyLess(tags[i].Key, tags[i-1].Key) }
	i := 0
	for _, t := range set {
		for ; i < len(tags) && keyLess(tags[i].Key, t.Key); i++ {
			if unsorted(i) {
				return setEach(out[:0], tags, set)
			}
			out = append(out, tags[i])
		}
		if i < len(tags) && tags[i].Key == t.Key {
			if unsorted(i) {
				return setEach(out[:0], tags, set)
			}
			i++
		}
		out = append(out, t)
	}
	for ; i < len(tags); i++ {
		if unsorted(i) {
			return setEach(out[:0], tags, set)
		}
		out = append(out, tags[i])
	}
	return out
}

// setEach is WithTags of tags that are not sorted, into out (empty, with
// room for them all): its binary search decides, as SetTag's does.
func setEach(out, tags, set []Tag) []Tag {
	r := Record{Tags: append(out, tags...)}
	for _, t := range set {
		r.SetTag(t.Key, t.Value)
	}
	return r.Tags
}

// keyLess is a < b, told by the first bytes when they differ (tag keys
// mostly do) without a call.
func keyLess(a, b string) bool {
	if a != "" && b != "" && a[0] != b[0] {
		return a[0] < b[0]
	}
	return a < b
}

// AddStep appends a lineage entry.
func (r *Record) AddStep(stage, provider, model string) {
	r.Lineage = append(r.Lineage, Step{Stage: stage, Provider: provider, Model: model})
}

// ToolByName returns the first listed tool called name.
func (r *Record) ToolByName(name string) (Tool, bool) {
	if i := ToolIndex(r.Tools, name); i >= 0 {
		return r.Tools[i], true
	}
	return Tool{}, false
}

// ToolIndex returns the position of the first of tools called name, or -1;
// it reads the tools in place.
func ToolIndex(tools []Tool, name string) int {
	for i := range tools {
		if tools[i].Name == name {
			return i
		}
	}
	return -1
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Rendered = nil
	c.Tools = make([]Tool, len(r.Tools))
	for i, t := range r.Tools {
		c.Tools[i] = t.Clone()
	}
	c.Messages = make([]Message, len(r.Messages))
	for i, m := range r.Messages {
		c.Messages[i] = m.Clone()
	}
	c.Tags = slices.Clone(r.Tags)
	c.Lineage = slices.Clone(r.Lineage)
	return &c
}

// Equal reports whether t and u are the same definition, byte for byte in
// every field.
func (t *Tool) Equal(u *Tool) bool {
	return t.Name == u.Name && t.Description == u.Description &&
		bytes.Equal(t.Parameters, u.Parameters) && bytes.Equal(t.Response, u.Response)
}

// Owned returns a copy of t that shares no memory with it, its strings
// included: what a memo keeps past the record, whose strings may be views
// of a whole row group's decoded columns.
func (t Tool) Owned() Tool {
	return Tool{Name: strings.Clone(t.Name), Description: strings.Clone(t.Description),
		Parameters: bytes.Clone(t.Parameters), Response: bytes.Clone(t.Response)}
}

// Clone returns a deep copy of t.
func (t Tool) Clone() Tool {
	t.Parameters = slices.Clone(t.Parameters)
	t.Response = slices.Clone(t.Response)
	return t
}

// Clone returns a deep copy of m.
func (m Message) Clone() Message {
	if m.Calls != nil {
		calls := make([]Call, len(m.Calls))
		for i, c := range m.Calls {
			calls[i] = Call{Name: c.Name, Arguments: slices.Clone(c.Arguments)}
		}
		m.Calls = calls
	}
	m.Results = slices.Clone(m.Results)
	return m
}

// Category classifies a dialogue the way the sample stage and Meta-Bench-like
// splits do: "chat" (no calls at all), "single_call" (one assistant turn with
// calls, holding one call), "parallel_calls" (one call turn holding several
// calls) or "multi_turn" (calls in more than one assistant turn).
func (r *Record) Category() string {
	turns, calls := 0, 0
	for _, m := range r.Messages {
		if m.Role == RoleAssistant && len(m.Calls) > 0 {
			turns++
			calls += len(m.Calls)
		}
	}
	switch {
	case turns == 0:
		return "chat"
	case turns > 1:
		return "multi_turn"
	case calls > 1:
		return "parallel_calls"
	default:
		return "single_call"
	}
}

// Sample returns a small record with every part a prompt can show: a system
// text, a tool, a user request, a call turn with its reasoning, the call's
// result and the final answer. The LLM stages render their prompt templates
// against data made from it when they are built, so that a template that
// cannot render fails before any record is read (prompts.Template.Check).
func Sample() *Record {
	return &Record{
		ID:     "sample:0",
		System: "You are a helpful assistant with access to functions.",
		Tools: []Tool{{
			Name:        "get_weather",
			Description: "Current weather for a city",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"the city name"}},"required":["city"]}`),
		}},
		Messages: []Message{
			{Role: RoleUser, Content: "What is the weather in Taipei?"},
			{Role: RoleAssistant, Reasoning: "The user asks for the weather in Taipei: get_weather with city Taipei.",
				Calls: []Call{{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Taipei"}`)}}},
			{Role: RoleTool, Results: []Result{{Name: "get_weather", Content: `{"temp_c":28,"sky":"sunny"}`}}},
			{Role: RoleAssistant, Content: "It is sunny and 28 °C in Taipei."},
		},
	}
}
