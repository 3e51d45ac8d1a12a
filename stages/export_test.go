package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

func buildExport(t *testing.T, cfg ExportConfig) *exporter {
	t.Helper()
	cfg.defaults()
	if probs := cfg.validate(); len(probs) > 0 {
		t.Fatalf("validate: %v", probs)
	}
	st, err := cfg.build(fxEnv("export", nil))
	if err != nil {
		t.Fatal(err)
	}
	return st.(*exporter)
}

// exportOne renders r and returns its sample's turns as "from: value" lines.
func exportOne(t *testing.T, e *exporter, r *record.Record) *sample {
	t.Helper()
	if _, err := e.Process(context.Background(), r); err != nil {
		t.Fatalf("%s: %v", r.ID, err)
	}
	s, ok := e.samples.Load(r)
	if !ok {
		t.Fatal("no sample stored")
	}
	return s.(*sample)
}

func withReasoning(r *record.Record, text string) *record.Record {
	r = r.Clone()
	for i := range r.Messages {
		if len(r.Messages[i].Calls) > 0 {
			r.Messages[i].Reasoning = text
		}
	}
	return r
}

func TestExportStyles(t *testing.T) {
	single := withReasoning(fxSingle(), "You want traffic. I will use get_traffic_report.")
	tests := []struct {
		name string
		cfg  ExportConfig
		rec  *record.Record
		want []string // the sample's turns, "from|value"
	}{{
		name: "function_call drops reasoning",
		cfg:  ExportConfig{},
		rec:  single,
		want: []string{
			"human|I need to check the traffic situation in Miami, Florida before I head out. Can you help with that?",
			`function_call|{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}`,
			`observation|{"status":"heavy","incidents":[{"road":"I-95","delay_min":20},{"road":"US-1"}]}`,
			"gpt|Traffic in Miami is heavy right now: expect 20 minutes of delay on I-95.",
		},
	}, {
		name: "function_call with thoughts",
		cfg:  ExportConfig{Thoughts: true},
		rec:  single,
		want: []string{"", `function_call|<think>You want traffic. I will use get_traffic_report.</think>{"name": "get_traffic_report", "arguments": {"location":"Miami, Florida"}}`, "", ""},
	}, {
		name: "parallel calls are one turn and one observation, both lists",
		cfg:  ExportConfig{},
		rec:  fxParallel(),
		want: []string{"",
			`function_call|[{"name": "get_stock_price", "arguments": {"symbol":"AAPL"}}, {"name": "get_stock_price", "arguments": {"symbol":"MSFT"}}, {"name": "get_local_time", "arguments": {"city":"New York"}}]`,
			`observation|[{"price":191.2}, {"price":402.5}, {"time":"09:41"}]`, ""},
	}, {
		name: "inline llama3: reasoning, python_tag, JSON list with parameters",
		cfg:  ExportConfig{Style: "inline"},
		rec:  single,
		want: []string{"", `gpt|You want traffic. I will use get_traffic_report.<|python_tag|>[{"name": "get_traffic_report", "parameters": {"location":"Miami, Florida"}}]`, "", ""},
	}, {
		name: "inline decision: token, reasoning, blank line, Python calls",
		cfg:  ExportConfig{Style: "inline", Surface: "decision"},
		rec: func() *record.Record {
			r := single.Clone()
			r.Messages[1].Content = "<|use_tool|>"
			r.Messages[3].Content = "<|answer|>" + r.Messages[3].Content
			return r
		}(),
		want: []string{"", `gpt|<|use_tool|>You want traffic. I will use get_traffic_report.` + "\n\n" + `[get_traffic_report(location="Miami, Florida")]`, "",
			"gpt|<|answer|>Traffic in Miami is heavy right now: expect 20 minutes of delay on I-95."},
	}, {
		name: "inline tool_dc: think then tool_call",
		cfg:  ExportConfig{Style: "inline", Surface: "tool_dc"},
		rec:  single,
		want: []string{"", `gpt|<think>You want traffic. I will use get_traffic_report.</think><tool_call>[get_traffic_report(location="Miami, Florida")]</tool_call>`, "", ""},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := exportOne(t, buildExport(t, tt.cfg), tt.rec)
			if len(s.Conversations) != len(tt.want) {
				t.Fatalf("%d turns, want %d: %+v", len(s.Conversations), len(tt.want), s.Conversations)
			}
			for i, w := range tt.want {
				if w == "" {
					continue
				}
				if got := s.Conversations[i].From + "|" + s.Conversations[i].Value; got != w {
					t.Errorf("turn %d:\n got %s\nwant %s", i, got, w)
				}
			}
			v := verify.ShareGPT{Conversations: s.Conversations, Tools: s.Tools, ThoughtWords: tt.cfg.Thoughts}
			if ps := verify.CheckShareGPT(&v); len(ps) > 0 {
				t.Errorf("sample breaks LLaMA-Factory's rules: %v", ps)
			}
		})
	}
}

// The tools column is what encoding/json makes of the tools, with the
// schemas embedded as they are and no HTML escaping.
func TestExportToolsJSON(t *testing.T) {
	tools := []record.Tool{fxWeather, {Name: "Tide <Table> & \"co\"", Description: "潮汐 times\n", Parameters: json.RawMessage(`{"type":"object","properties":{}}`),
		Response: json.RawMessage(`{"type":"object"}`)}, {Name: "bare"}}
	got, err := toolsJSON(tools)
	if err != nil {
		t.Fatal(err)
	}
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Response    json.RawMessage `json:"response,omitempty"`
	}
	var want []tool
	for _, t := range tools {
		p := t.Parameters
		if len(p) == 0 {
			p = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		want = append(want, tool{t.Name, t.Description, p, t.Response})
	}
	wb, _ := marshalNoEscape(want)
	if got != string(wb) {
		t.Errorf("tools JSON\n got %s\nwant %s", got, wb)
	}
	if _, err := toolsJSON([]record.Tool{{Name: " "}}); err == nil {
		t.Error("a tool without a name must be an error")
	}
	if _, err := toolsJSON([]record.Tool{{Name: "x", Parameters: json.RawMessage(`[]`)}}); err == nil {
		t.Error("parameters that are not an object must be an error")
	}
}

// Records LLaMA-Factory would drop or crash on are rejected with the rule.
func TestExportRejects(t *testing.T) {
	e := buildExport(t, ExportConfig{})
	tests := []struct {
		name   string
		rec    *record.Record
		reason string
	}{
		{"no assistant turn", fxRecord("x:1", nil, fxUser("hello")), "export_no_assistant_turn"},
		{"starts with the assistant", fxRecord("x:2", nil, fxSay("hi"), fxUser("hello"), fxSay("bye")), verify.ReasonLFRoleOrder},
		{"two user turns in a row", fxRecord("x:3", nil, fxUser("a"), fxUser("b"), fxSay("c")), verify.ReasonLFRoleOrder},
		{"arguments not an object", fxRecord("x:4", []record.Tool{fxTime}, fxUser("time?"), fxCalls("get_local_time", `["Paris"]`)), "export_bad_call"},
		{"empty answer", fxRecord("x:5", nil, fxUser("a"), fxSay(" ")), verify.ReasonLFMissingField},
	}
	for _, tt := range tests {
		_, err := e.Process(context.Background(), tt.rec)
		if got, _ := rejectReason(err); got != tt.reason {
			t.Errorf("%s: reason %q (%v), want %q", tt.name, got, err, tt.reason)
		}
	}
	// A dialogue ending on a user turn is cut after its last assistant turn.
	r := fxRecord("x:6", nil, fxUser("a"), fxSay("b"), fxUser("c"))
	if s := exportOne(t, e, r); len(s.Conversations) != 2 {
		t.Errorf("trailing user turn kept: %+v", s.Conversations)
	}
}

// WriteShard and Finish make a directory LLaMA-Factory loads: dataset_info.json
// naming a folder of one file type.
func TestExportWritesDatasetDir(t *testing.T) {
	dir := t.TempDir()
	root, err := manifests.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, format := range []string{"jsonl", "parquet"} {
		e := buildExport(t, ExportConfig{Dataset: "demo_" + format, Format: format})
		var recs []*record.Record
		for _, r := range fxAll() {
			if _, err := e.Process(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		refs, rejects, err := e.WriteShard(context.Background(), root, "fx-00000", recs)
		if err != nil || len(rejects) != 0 || len(refs) != 1 || refs[0].Rows != int64(len(recs)) {
			t.Fatalf("%s: refs %+v rejects %v err %v", format, refs, rejects, err)
		}
		if _, err := e.Finish(root, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "demo_"+format, "part-fx-00000."+format)); err != nil {
			t.Error(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "dataset_info.json"))
	if err != nil || !strings.Contains(string(b), `"file_name": "demo_parquet"`) || !strings.Contains(string(b), `"formatting": "sharegpt"`) {
		t.Errorf("dataset_info.json: %s %v", b, err)
	}
}

// appendSample and writeJSONString write exactly what encoding/json writes.
func TestAppendSampleMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "tabs\tand\nnewlines\r", "<html> & co", "潮汐表 🌊",
		"bell \a and \b \f \x00", "line\u2028sep\u2029", "bad \xff utf8", "mixed é\"\n\u2028"}
	for _, v := range strs {
		s := &sample{Conversations: []verify.Turn{{From: "human", Value: v}, {From: "gpt", Value: v + "!"}}, System: v, Tools: "[" + v + "]"}
		var got bytes.Buffer
		appendSample(&got, s)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		if got.String() != want.String() {
			t.Errorf("%q:\n got %s\nwant %s", v, got.String(), want.String())
		}
	}
}

func FuzzWriteJSONString(f *testing.F) {
	f.Add("a\"b\\c\n\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var got bytes.Buffer
		writeJSONString(&got, s)
		want, _ := marshalNoEscape(s)
		if got.String() != string(want) {
			t.Fatalf("%q: got %s want %s", s, got.String(), want)
		}
	})
}
