package record

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestTags(t *testing.T) {
	var r Record
	r.SetTag("world", "open")
	r.SetTag("category", "chat")
	r.SetTag("world", "closed")
	if r.Tag("world") != "closed" || r.Tag("category") != "chat" || r.Tag("none") != "" {
		t.Errorf("tags %+v", r.Tags)
	}
	if len(r.Tags) != 2 || r.Tags[0].Key != "category" {
		t.Errorf("tags are kept sorted and unique: %+v", r.Tags)
	}
}

func TestCloneIsDeep(t *testing.T) {
	r := &Record{ID: "a:1",
		Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Messages: []Message{{Role: RoleAssistant, Calls: []Call{{Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}},
			{Role: RoleTool, Results: []Result{{Name: "f", Content: "1"}}}},
		Tags: []Tag{{"k", "v"}}, Lineage: []Step{{Stage: "ingest", Provider: "rule"}}}
	c := r.Clone()
	c.Tools[0].Parameters[2] = 'X'
	c.Messages[0].Calls[0].Arguments[2] = 'X'
	c.Messages[1].Results[0].Content = "2"
	c.Tags[0].Value = "w"
	c.Lineage[0].Stage = "other"
	if string(r.Tools[0].Parameters) != `{"type":"object"}` || string(r.Messages[0].Calls[0].Arguments) != `{"x":1}` ||
		r.Messages[1].Results[0].Content != "1" || r.Tags[0].Value != "v" || r.Lineage[0].Stage != "ingest" {
		t.Errorf("changing the clone changed the original: %+v", r)
	}
}

func TestCategory(t *testing.T) {
	call := func(n int) Message {
		m := Message{Role: RoleAssistant}
		for range n {
			m.Calls = append(m.Calls, Call{Name: "f", Arguments: json.RawMessage(`{}`)})
		}
		return m
	}
	tests := []struct {
		msgs []Message
		want string
	}{
		{[]Message{{Role: RoleUser}, {Role: RoleAssistant, Content: "hi"}}, "chat"},
		{[]Message{{Role: RoleUser}, call(1)}, "single_call"},
		{[]Message{{Role: RoleUser}, call(2)}, "parallel_calls"},
		{[]Message{{Role: RoleUser}, call(1), {Role: RoleUser}, call(1)}, "multi_turn"},
	}
	for _, tt := range tests {
		r := Record{Messages: tt.msgs}
		if got := r.Category(); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.msgs, got, tt.want)
		}
	}
}

// Equal tells tools apart by any field, compared byte for byte.
func TestToolEqual(t *testing.T) {
	base := Tool{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`), Response: json.RawMessage(`{}`)}
	same := base.Clone()
	if !base.Equal(&same) {
		t.Error("a clone is not Equal")
	}
	for name, change := range map[string]func(*Tool){
		"name":        func(u *Tool) { u.Name = "g" },
		"description": func(u *Tool) { u.Description = "e" },
		"parameters":  func(u *Tool) { u.Parameters = json.RawMessage(`{"type": "object"}`) },
		"response":    func(u *Tool) { u.Response = nil },
	} {
		u := base.Clone()
		change(&u)
		if base.Equal(&u) || u.Equal(&base) {
			t.Errorf("tools differing in %s are Equal", name)
		}
	}
}

// TestWithTags holds WithTags to SetTag after SetTag: keys before, between,
// after and equal to the record's, on sorted tags, tags with a key twice and
// unsorted tags (wherever the disorder is); the input list is not changed.
func TestWithTags(t *testing.T) {
	tg := func(kv ...string) []Tag {
		var out []Tag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, Tag{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	sets := [][]Tag{nil, tg("a", "1"), tg("category", "x", "difficulty", "hard", "result_mode", "oracle", "world", "open"),
		tg("b", "2", "m", "3", "z", "4"), tg("lang", "de")}
	inputs := [][]Tag{nil, tg("lang", "en"), tg("category", "chat", "lang", "en", "world", "closed"),
		tg("a", "0", "lang", "en", "lang", "fr"), tg("world", "w", "a", "0", "lang", "en"), tg("m", "0"),
		// Unsorted only after the last key set, only at a key set, and by
		// a later byte than the first.
		tg("a", "0", "zz", "1", "zb", "2"), tg("k", "0", "lang", "x", "a", "y"), tg("lb", "0", "la", "1")}
	for _, in := range inputs {
		for _, set := range sets {
			want := Record{Tags: slices.Clone(in)}
			for _, s := range set {
				want.SetTag(s.Key, s.Value)
			}
			orig := slices.Clone(in)
			got := WithTags(in, set...)
			if !slices.Equal(got, want.Tags) {
				t.Errorf("WithTags(%v, %v) = %v, SetTag gives %v", in, set, got, want.Tags)
			}
			if !slices.Equal(in, orig) {
				t.Errorf("WithTags(%v, %v) changed its input", orig, set)
			}
		}
	}
}

// TestSearchTags holds searchTags to slices.BinarySearchFunc by key on
// sorted and unsorted lists, keys with a first byte in common or not, the
// empty key among them (SetTag on unsorted tags relies on the same steps).
func TestSearchTags(t *testing.T) {
	keys := []string{"", "a", "ab", "b", "ba", "bb", "category", "cat", "world", "\xff"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		tags := make([]Tag, rng.IntN(7))
		for i := range tags {
			tags[i].Key = keys[rng.IntN(len(keys))]
		}
		if rng.IntN(2) == 0 {
			slices.SortFunc(tags, func(a, b Tag) int { return strings.Compare(a.Key, b.Key) })
		}
		for _, k := range keys {
			wi, wok := slices.BinarySearchFunc(tags, k, func(t Tag, k string) int { return strings.Compare(t.Key, k) })
			if i, ok := searchTags(tags, k); i != wi || ok != wok {
				t.Fatalf("searchTags(%v, %q) = %d, %v; BinarySearchFunc gives %d, %v", tags, k, i, ok, wi, wok)
			}
		}
	}
}

// TestToolOwned: the copy equals the tool and shares none of its memory.
func TestToolOwned(t *testing.T) {
	buf := []byte(`getweather{"type":"object"}{"type":"string"}`)
	src := Tool{Name: string(buf[:3]), Description: string(buf[3:10]), Parameters: buf[10:27], Response: buf[27:]}
	got := src.Owned()
	if !got.Equal(&src) {
		t.Fatalf("Owned = %+v, want %+v", got, src)
	}
	if unsafe.StringData(got.Name) == unsafe.StringData(src.Name) ||
		unsafe.StringData(got.Description) == unsafe.StringData(src.Description) ||
		&got.Parameters[0] == &src.Parameters[0] || &got.Response[0] == &src.Response[0] {
		t.Error("Owned shares memory with the tool")
	}
	if z := (Tool{Name: "x"}).Owned(); z.Parameters != nil || z.Response != nil {
		t.Errorf("Owned of nil fields = %+v, want nil fields", z)
	}
}

// TestToolIndex: the first tool of the name, -1 for none; ToolByName
// returns that tool.
func TestToolIndex(t *testing.T) {
	r := &Record{Tools: []Tool{{Name: "a"}, {Name: "b", Description: "first"}, {Name: "b", Description: "second"}}}
	for _, c := range []struct {
		name string
		want int
	}{{"a", 0}, {"b", 1}, {"c", -1}, {"", -1}} {
		if got := ToolIndex(r.Tools, c.name); got != c.want {
			t.Errorf("ToolIndex(%q) = %d, want %d", c.name, got, c.want)
		}
		tool, ok := r.ToolByName(c.name)
		if ok != (c.want >= 0) || ok && tool.Description != r.Tools[c.want].Description {
			t.Errorf("ToolByName(%q) = %+v, %v", c.name, tool, ok)
		}
	}
}
