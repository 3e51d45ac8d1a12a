package llm

import (
	"encoding/json"
	"errors"
	"github.com/augmentdata/augment/stages/contract"
	"testing"
)

func TestExtractJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{"bare object", `{"a":1}`, `{"a":1}`, false},
		{"bare array", ` [1, 2] `, `[1, 2]`, false},
		{"fenced", "```json\n{\"a\": [1]}\n```", `{"a": [1]}`, false},
		{"fence without language", "```\n{\"a\":1}\n```", `{"a":1}`, false},
		{"think block", "<think>maybe {\"a\":0}?</think>\n{\"a\":2}", `{"a":2}`, false},
		{"prose around", `Sure! Here it is: {"x":"}"} Hope it helps.`, `{"x":"}"}`, false},
		{"broken first candidate", `use {braces} like {"k":true}`, `{"k":true}`, false},
		{"truncated", `{"a": [1, 2`, "", true},
		{"no json", `I cannot do that.`, "", true},
		{"empty", ``, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExtractJSON(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("want error, got %s", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "```json\n[1]\n```", `<think>x</think>{}`, `{{{{`, `x [1,{"a":}] {"b":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ExtractJSON(s)
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("ExtractJSON(%q) returned invalid JSON %q", s, got)
		}
		if got[0] != '{' && got[0] != '[' {
			t.Fatalf("ExtractJSON(%q) returned a non-container %q", s, got)
		}
	})
}

func TestParseJSON(t *testing.T) {
	schema, err := CompileSchema([]byte(`{
		"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 1},
			"unit": {"enum": ["celsius", "fahrenheit"]}
		},
		"required": ["name", "unit"],
		"additionalProperties": false
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(schema.JSON()[:9]) != `{"type":"` {
		t.Errorf("schema JSON not compacted: %s", schema.JSON())
	}
	type answer struct {
		Name string `json:"name"`
		Unit string `json:"unit"`
	}
	parse := ParseJSON[answer](schema)
	tests := []struct {
		in     string
		want   answer
		reason string
	}{
		{`{"name":"get_weather","unit":"celsius"}`, answer{"get_weather", "celsius"}, ""},
		{"```json\n{\"name\":\"x\",\"unit\":\"fahrenheit\"}\n```", answer{"x", "fahrenheit"}, ""},
		{`{"name":"x","unit":"kelvin"}`, answer{}, "llm_schema_mismatch"},
		{`{"name":"x"}`, answer{}, "llm_schema_mismatch"},
		{`{"name":"x","unit":"celsius","extra":1}`, answer{}, "llm_schema_mismatch"},
		{`{"name":"x","unit":`, answer{}, "llm_invalid_json"},
		{`no json here`, answer{}, "llm_invalid_json"},
	}
	for _, tt := range tests {
		got, err := parse(tt.in)
		if tt.reason == "" {
			if err != nil || got != tt.want {
				t.Errorf("%s: got %+v, %v", tt.in, got, err)
			}
			continue
		}
		var pe *contract.Reject
		if !errors.As(err, &pe) || pe.RejectReason() != tt.reason {
			t.Errorf("%s: want %s, got %v", tt.in, tt.reason, err)
		}
	}
	// Without a schema only the Go type decides.
	if _, err := ParseJSON[[]int](nil)(`{"a":1}`); err == nil {
		t.Error("an object must not decode into []int")
	}
	if _, err := CompileSchema([]byte(`{"type": 3}`)); err == nil {
		t.Error("invalid schema accepted")
	}
}
