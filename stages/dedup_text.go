package stages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/augmentdata/augment/stages/near"
	"github.com/augmentdata/augment/stages/record"
)

// Text fields of a record, as the dedup and decontaminate stages choose
// them (`fields:`).
const (
	FieldSystem    = "system"    // the system prompt
	FieldTools     = "tools"     // the listed tools' names and descriptions, sorted by name
	FieldUser      = "user"      // the user turns
	FieldAssistant = "assistant" // the assistant turns' text (not their calls or reasoning)
	FieldCalls     = "calls"     // the call signatures: name, then each argument key and value, keys sorted
	FieldResults   = "results"   // the tool results
)

var textFieldNames = []string{FieldSystem, FieldTools, FieldUser, FieldAssistant, FieldCalls, FieldResults}

// textFields is a set of fields.
type textFields uint8

func parseTextFields(names []string) (textFields, []string) {
	var f textFields
	var probs []string
	for i, n := range names {
		j := slices.Index(textFieldNames, n)
		if j < 0 {
			probs = append(probs, fmt.Sprintf("fields[%d]: %q is not one of %s", i, n, strings.Join(textFieldNames, ", ")))
			continue
		}
		f |= 1 << j
	}
	return f, probs
}

func (f textFields) has(name string) bool { return f&(1<<slices.Index(textFieldNames, name)) != 0 }

// addRecordText appends the chosen fields of r to w in dialogue order: the
// system prompt, the tools, then turn by turn. Each turn and each call is a
// part of its own (near.Words.Break). The calls of one turn are sorted by
// their text, so parallel calls in another order read the same, and each
// call's arguments are written with their keys sorted, so reordered
// arguments read the same.
func addRecordText(w *near.Words, r *record.Record, f textFields) {
	if f.has(FieldSystem) {
		w.Add(r.System)
		w.Break()
	}
	if f.has(FieldTools) && len(r.Tools) > 0 {
		tools := slices.Clone(r.Tools)
		slices.SortFunc(tools, func(a, b record.Tool) int { return strings.Compare(a.Name, b.Name) })
		for _, t := range tools {
			w.Add(t.Name)
			w.Add(t.Description)
			w.Break()
		}
	}
	user, asst, calls, results := f.has(FieldUser), f.has(FieldAssistant), f.has(FieldCalls), f.has(FieldResults)
	for _, m := range r.Messages {
		switch m.Role {
		case record.RoleUser:
			if user {
				w.Add(m.Content)
				w.Break()
			}
		case record.RoleAssistant:
			if asst {
				w.Add(m.Content)
				w.Break()
			}
			if calls && len(m.Calls) > 0 {
				texts := make([]string, len(m.Calls))
				for i, c := range m.Calls {
					texts[i] = callText(c)
				}
				slices.Sort(texts)
				for _, t := range texts {
					w.Add(t)
					w.Break()
				}
			}
		case record.RoleTool:
			if results {
				for _, res := range m.Results {
					w.Add(res.Content)
					w.Break()
				}
			}
		}
	}
}

// callText is a call as text with its argument keys sorted at every level:
// `name key value key value …`. Arguments that are not JSON are used as
// they are.
func callText(c record.Call) string {
	var sb strings.Builder
	sb.WriteString(c.Name)
	dec := json.NewDecoder(bytes.NewReader(c.Arguments))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		sb.WriteByte(' ')
		sb.Write(c.Arguments)
		return sb.String()
	}
	writeSorted(&sb, v)
	return sb.String()
}

func writeSorted(sb *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sb.WriteByte(' ')
			sb.WriteString(k)
			writeSorted(sb, v[k])
		}
	case []any:
		for _, e := range v {
			writeSorted(sb, e)
		}
	case string:
		sb.WriteByte(' ')
		sb.WriteString(v)
	case json.Number:
		sb.WriteByte(' ')
		sb.WriteString(v.String())
	case bool:
		fmt.Fprintf(sb, " %t", v)
	case nil:
		sb.WriteString(" null")
	}
}
