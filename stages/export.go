package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

// ExportConfig is the `export:` stage: it writes a directory LLaMA-Factory
// can use as its dataset_dir as is — dataset_info.json plus one folder of
// sharegpt files (conversations of human / gpt / function_call / observation
// turns, system, and tools as a JSON string of a list).
//
// Every sample is checked against LLaMA-Factory's rules before it is written
// (verify.CheckShareGPT); a record that would make a sample LLaMA-Factory
// silently drops or crashes on is rejected with the rule it breaks instead.
type ExportConfig struct {
	// Dataset is the dataset's name in dataset_info.json and its folder;
	// default "augment_<stage name>".
	Dataset string `yaml:"dataset" json:"dataset"`
	// Format of the data files: jsonl (default) or parquet.
	Format string `yaml:"format" json:"format"`
	// Style of assistant call turns:
	//   function_call (default): function_call turns holding JSON
	//     {"name","arguments"} (a list for parallel calls), rendered by the
	//     trainer's template; results are observation turns.
	//   inline: the calls are written into gpt turns as text in the chosen
	//     Surface, for MT-LLaMA-style and Decision-Token data.
	Style string `yaml:"style" json:"style"`
	// Surface of inline calls:
	//   llama3 (default): reasoning, then <|python_tag|>, then the JSON list of
	//     {"name","parameters"} (Meta-Tool, seed 000 Fig 13);
	//   decision: the turn's text (which holds the decision token when the
	//     decision_tokens stage ran), the reasoning, a blank line, then the calls
	//     in Python-call syntax (MediaTek, seed 002 Fig 1);
	//   tool_dc: <think>reasoning</think><tool_call>[calls in Python-call
	//     syntax]</tool_call> (Tool-DC, seed 003 Fig 11).
	Surface string `yaml:"surface" json:"surface,omitempty"`
	// Thoughts keeps reasoning in function_call style as a leading
	// <think>…</think>. Only templates with thought words (qwen3 and others)
	// can train on such samples: LLaMA-Factory strips the block before
	// parsing the call there, and crashes on it elsewhere. Without it
	// reasoning is dropped, and the manifest says so.
	Thoughts bool `yaml:"thoughts" json:"thoughts"`
	// System is the system prompt of records that have none.
	System string `yaml:"system" json:"system,omitempty"`
}

func (c *ExportConfig) defaults() {
	if c.Format == "" {
		c.Format = "jsonl"
	}
	if c.Style == "" {
		c.Style = "function_call"
	}
	if c.Style == "inline" && c.Surface == "" {
		c.Surface = "llama3"
	}
}

func (c *ExportConfig) version() int { return 1 }

func (c *ExportConfig) validate() []string {
	var probs []string
	if c.Format != "jsonl" && c.Format != "parquet" {
		probs = append(probs, fmt.Sprintf("format %q: want jsonl or parquet", c.Format))
	}
	switch c.Style {
	case "function_call":
		if c.Surface != "" {
			probs = append(probs, "surface applies to style inline only")
		}
	case "inline":
		if !slices.Contains([]string{"llama3", "decision", "tool_dc"}, c.Surface) {
			probs = append(probs, fmt.Sprintf("surface %q: want llama3, decision or tool_dc", c.Surface))
		}
	default:
		probs = append(probs, fmt.Sprintf("style %q: want function_call or inline", c.Style))
	}
	// dataset is checked with the other path names by Parse (CheckName).
	return probs
}

func (c *ExportConfig) build(env *Env) (Stage, error) {
	e := &exporter{cfg: *c, env: env}
	if e.cfg.Dataset == "" {
		e.cfg.Dataset = "augment_" + env.Stage
	}
	return e, nil
}

type exporter struct {
	cfg     ExportConfig
	env     *Env
	samples sync.Map // *record.Record → *sample, from Process to WriteShard
}

// sample is one LLaMA-Factory sharegpt row.
type sample struct {
	Conversations []verify.Turn `json:"conversations" parquet:"conversations,list"`
	System        string        `json:"system" parquet:"system"`
	Tools         string        `json:"tools" parquet:"tools"`
}

// Process renders the record as a sample and checks it against
// LLaMA-Factory's rules.
func (e *exporter) Process(_ context.Context, r *record.Record) ([]*record.Record, error) {
	s, err := e.render(r)
	if err != nil {
		return nil, err
	}
	// The tools JSON was rendered by toolsJSON from checked tools; only the
	// turns need LLaMA-Factory's rules.
	if probs := verify.CheckTurns(s.Conversations, e.cfg.Thoughts); len(probs) > 0 {
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.String()
		}
		return nil, Rejectf(probs[0].Kind, "%s", strings.Join(msgs, "; "))
	}
	e.samples.Store(r, s)
	return []*record.Record{r}, nil
}

// render turns a record into a sample.
func (e *exporter) render(r *record.Record) (*sample, error) {
	s := &sample{System: r.System}
	if s.System == "" {
		s.System = e.cfg.System
	}
	tools, err := toolsJSON(r.Tools)
	if err != nil {
		return nil, Rejectf("export_bad_tool", "%v", err)
	}
	s.Tools = tools
	msgs := r.Messages
	// A dialogue is a training target only up to its last assistant turn.
	last := -1
	for i, m := range msgs {
		if m.Role == record.RoleAssistant {
			last = i
		}
	}
	if last < 0 {
		return nil, Rejectf("export_no_assistant_turn", "the dialogue has no assistant turn to learn")
	}
	if last < len(msgs)-1 {
		e.env.Note("trailing user or tool turns after the last assistant turn are cut (they have no target)")
	}
	for i, m := range msgs[:last+1] {
		switch m.Role {
		case record.RoleSystem:
			if i != 0 || len(s.Conversations) > 0 {
				return nil, Rejectf("export_system_inside", "message %d: system message inside the dialogue", i)
			}
			s.System = m.Content
		case record.RoleUser:
			s.Conversations = append(s.Conversations, verify.Turn{From: "human", Value: m.Content})
		case record.RoleTool:
			v, err := observation(m.Results)
			if err != nil {
				return nil, Rejectf("export_bad_result", "message %d: %v", i, err)
			}
			s.Conversations = append(s.Conversations, verify.Turn{From: "observation", Value: v})
		case record.RoleAssistant:
			t, err := e.assistant(m)
			if err != nil {
				return nil, Rejectf("export_bad_call", "message %d: %v", i, err)
			}
			s.Conversations = append(s.Conversations, t)
		default:
			return nil, Rejectf("export_bad_role", "message %d: role %q", i, m.Role)
		}
	}
	return s, nil
}

func (e *exporter) assistant(m record.Message) (verify.Turn, error) {
	if len(m.Calls) == 0 {
		text := m.Content
		if m.Reasoning != "" {
			switch {
			case e.cfg.Style == "function_call" && e.cfg.Thoughts, e.cfg.Surface == "tool_dc":
				text = "<think>" + m.Reasoning + "</think>" + text
			case e.cfg.Style == "inline":
				text = joinText(m.Reasoning, text)
			default:
				e.env.Note("reasoning of text answers is dropped (style function_call without thoughts)")
			}
		}
		return verify.Turn{From: "gpt", Value: text}, nil
	}
	if e.cfg.Style == "function_call" {
		v, err := callsJSON(m.Calls, "arguments")
		if err != nil {
			return verify.Turn{}, err
		}
		if m.Reasoning != "" {
			if e.cfg.Thoughts {
				v = "<think>" + m.Reasoning + "</think>" + v
			} else {
				e.env.Note("reasoning before calls is dropped (style function_call without thoughts; set thoughts: true for templates that support them)")
			}
		}
		if strings.TrimSpace(m.Content) != "" {
			e.env.Note("text said alongside calls is dropped (a function_call turn holds only the calls)")
		}
		return verify.Turn{From: "function_call", Value: v}, nil
	}
	switch e.cfg.Surface {
	case "llama3":
		v, err := callsJSON(m.Calls, "parameters")
		if err != nil {
			return verify.Turn{}, err
		}
		return verify.Turn{From: "gpt", Value: joinText(m.Content, m.Reasoning) + "<|python_tag|>" + listJSON(v, len(m.Calls))}, nil
	case "decision":
		calls := formats.PrintPyCalls(m.Calls)
		head := m.Content + m.Reasoning
		if m.Reasoning != "" {
			head += "\n\n"
		}
		return verify.Turn{From: "gpt", Value: head + calls}, nil
	default: // tool_dc
		return verify.Turn{From: "gpt", Value: m.Content + "<think>" + m.Reasoning + "</think><tool_call>" + formats.PrintPyCalls(m.Calls) + "</tool_call>"}, nil
	}
}

// joinText joins non-empty parts with a space.
func joinText(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// listJSON wraps a single call object in a list (llama3 surface always
// writes a list, as in seed 000 Fig 13).
func listJSON(v string, n int) string {
	if n == 1 {
		return "[" + v + "]"
	}
	return v
}

// callsJSON renders calls as {"name","<argsKey>"} objects: one object for a
// single call, a list for parallel calls.
func callsJSON(calls []record.Call, argsKey string) (string, error) {
	var buf bytes.Buffer
	if len(calls) > 1 {
		buf.WriteByte('[')
	}
	for i, c := range calls {
		if i > 0 {
			buf.WriteString(", ")
		}
		name, _ := marshalNoEscape(c.Name)
		args := c.Arguments
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) || bytes.TrimSpace(args)[0] != '{' {
			return "", fmt.Errorf("call %d (%s): arguments are not a JSON object", i, c.Name)
		}
		fmt.Fprintf(&buf, `{"name": %s, "%s": %s}`, name, argsKey, args)
	}
	if len(calls) > 1 {
		buf.WriteByte(']')
	}
	return buf.String(), nil
}

// observation renders a tool turn: the result itself for one call, a JSON
// list of the results for parallel calls (JSON results embedded as JSON).
func observation(results []record.Result) (string, error) {
	if len(results) == 1 {
		return results[0].Content, nil
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, res := range results {
		if i > 0 {
			buf.WriteString(", ")
		}
		c := strings.TrimSpace(res.Content)
		if json.Valid([]byte(c)) && c != "" {
			buf.WriteString(c)
			continue
		}
		b, err := marshalNoEscape(res.Content)
		if err != nil {
			return "", err
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.String(), nil
}

// toolsJSON renders tools as LLaMA-Factory's templates print them: a JSON
// list of {"name", "description", "parameters"[, "response"]}. The schemas
// are embedded as they are (compact JSON, checked when their shard was
// written), so only the strings are encoded here. A tool without a name or
// whose parameters are not a JSON object is an error: LLaMA-Factory's tool
// formatters would fail on it.
func toolsJSON(tools []record.Tool) (string, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, t := range tools {
		if strings.TrimSpace(t.Name) == "" {
			return "", fmt.Errorf("tool %d has no name", i)
		}
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		if params[0] != '{' {
			return "", fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		writeJSONString(&b, t.Name)
		b.WriteString(`,"description":`)
		writeJSONString(&b, t.Description)
		b.WriteString(`,"parameters":`)
		b.Write(params)
		if resp := bytes.TrimSpace(t.Response); len(resp) > 0 {
			b.WriteString(`,"response":`)
			b.Write(resp)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String(), nil
}

// writeJSONString writes s as a JSON string exactly as encoding/json does
// without HTML escaping; the common cases are written directly, rare ones
// (control characters other than \n \r \t, U+2028/U+2029, invalid UTF-8)
// through encoding/json.
func writeJSONString(b *bytes.Buffer, s string) {
	start := b.Len()
	b.WriteByte('"')
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		var esc string
		switch c {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case '\t':
			esc = `\t`
		}
		if esc != "" {
			b.WriteString(s[last:i])
			b.WriteString(esc)
			i++
			last = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if c < 0x20 || r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
			b.Truncate(start)
			q, _ := marshalNoEscape(s)
			b.Write(q)
			return
		}
		i += n
	}
	b.WriteString(s[last:])
	b.WriteByte('"')
}

// marshalNoEscape is compact JSON without HTML escaping.
func marshalNoEscape(v any) ([]byte, error) { return prompts.JSON(v, "") }

// WriteShard writes one data file of the dataset folder.
func (e *exporter) WriteShard(_ context.Context, dir *manifests.Root, name string, recs []*record.Record) ([]manifests.FileRef, []shard.Reject, error) {
	samples := make([]*sample, 0, len(recs))
	for _, r := range recs {
		s, ok := e.samples.LoadAndDelete(r)
		if !ok {
			return nil, nil, fmt.Errorf("export: record %s was not rendered", r.ID)
		}
		samples = append(samples, s.(*sample))
	}
	file := e.cfg.Dataset + "/part-" + name + "." + e.cfg.Format
	f, err := dir.Create(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Abort()
	if e.cfg.Format == "parquet" {
		err = writeSamplesParquet(f, samples)
	} else {
		err = writeSamplesJSONL(f, samples)
	}
	if err != nil {
		return nil, nil, err
	}
	ref := manifests.FileRef{Path: dir.Rel(file), SHA256: f.SHA256(), Rows: int64(len(samples)), Bytes: f.Size()}
	return []manifests.FileRef{ref}, nil, f.Commit()
}

func writeSamplesJSONL(f *manifests.File, samples []*sample) error {
	w := bufio.NewWriterSize(f, 1<<20)
	var b bytes.Buffer
	for _, s := range samples {
		b.Reset()
		appendSample(&b, s)
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return w.Flush()
}

// appendSample writes s as one JSON line, byte for byte what encoding/json
// writes without HTML escaping (the test holds it to that); by hand, because
// encoding the samples was a tenth of ingest→export.
func appendSample(b *bytes.Buffer, s *sample) {
	b.WriteString(`{"conversations":[`)
	for i, t := range s.Conversations {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"from":`)
		writeJSONString(b, t.From)
		b.WriteString(`,"value":`)
		writeJSONString(b, t.Value)
		b.WriteByte('}')
	}
	b.WriteString(`],"system":`)
	writeJSONString(b, s.System)
	b.WriteString(`,"tools":`)
	writeJSONString(b, s.Tools)
	b.WriteString("}\n")
}

func writeSamplesParquet(f *manifests.File, samples []*sample) error {
	w := parquet.NewGenericWriter[sample](f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(1000))
	rows := make([]sample, len(samples))
	for i, s := range samples {
		rows[i] = *s
	}
	if _, err := w.Write(rows); err != nil {
		return err
	}
	return w.Close()
}

// Finish writes dataset_info.json, which names the dataset folder.
func (e *exporter) Finish(dir *manifests.Root, shards []manifests.Shard) ([]string, error) {
	info := map[string]any{
		e.cfg.Dataset: map[string]any{
			"file_name":  e.cfg.Dataset,
			"formatting": "sharegpt",
			"columns":    map[string]string{"messages": "conversations", "system": "system", "tools": "tools"},
		},
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	_, err = dir.WriteFile("dataset_info.json", append(b, '\n'))
	notes := []string{fmt.Sprintf("LLaMA-Factory: dataset_dir=%s dataset=%s", dir.Base(), e.cfg.Dataset)}
	return notes, err
}
