package record

import (
	"encoding/json"
	"testing"
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
