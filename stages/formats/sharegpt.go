package formats

import (
	"strings"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// parseShareGPT reads LLaMA-Factory's sharegpt rows,
// {"conversations": [{"from", "value"}], "system"?, "tools"?}, and its "v1"
// rows, {"messages": [{"role", "content": [{"type", "value"}]}], "tools"}.
// Roles: human/user, gpt/assistant, function_call, observation/tool/function,
// system. tools is a JSON text of a list (or a list) of bare or
// {"type":"function","function":…} tools.
func parseShareGPT(b *builder, row *jsontree.Value) error {
	if err := sharegptTools(b, row); err != nil {
		return err
	}
	system, err := fieldString(row, "system", "sharegpt_bad_field")
	if err != nil {
		return err
	}
	b.rec.System = system
	conv := row.Get("conversations")
	if conv == nil {
		conv = row.Get("messages")
	}
	if conv == nil || conv.Kind != jsontree.Array {
		return reject("sharegpt_missing_conversations", "the row has no conversations (or messages) array")
	}
	if len(conv.Elems) == 0 {
		return reject("sharegpt_empty_conversation", "the conversation has no turns")
	}
	turns := conv.Elems
	b.rec.Messages = make([]record.Message, 0, len(turns))
	for i := 0; i < len(turns); i++ {
		role, parts, err := sharegptTurn(&turns[i].Val, i)
		if err != nil {
			return err
		}
		switch role {
		case record.RoleSystem:
			text, err := partsText(parts, i)
			if err != nil {
				return err
			}
			if i == 0 {
				b.rec.System = text // as LLaMA-Factory does: a leading system turn overrides the column
			} else {
				b.add(record.Message{Role: record.RoleSystem, Content: text})
			}
		case record.RoleUser:
			text, err := partsText(parts, i)
			if err != nil {
				return err
			}
			b.add(record.Message{Role: record.RoleUser, Content: text})
		case record.RoleAssistant:
			m, err := sharegptAssistant(b, parts, i)
			if err != nil {
				return err
			}
			b.add(m)
		case "function_call":
			text, err := partsText(parts, i)
			if err != nil {
				return err
			}
			m := record.Message{Role: record.RoleAssistant}
			if m.Reasoning, m.Content, m.Calls, err = functionCallValue(b, text, i); err != nil {
				return err
			}
			b.add(m)
		case record.RoleTool:
			n, err := sharegptObservations(b, turns[i:], i)
			if err != nil {
				return err
			}
			i += n - 1
		}
	}
	if len(b.rec.Tools) == 0 {
		return toolsFromKnownSystem(b)
	}
	return nil
}

// toolsFromKnownSystem takes the tools out of a system text that is one of
// the known templates (ToolACE's, glaive's), for rows converted from those
// dumps that left the tools column empty.
func toolsFromKnownSystem(b *builder) error {
	sys := b.rec.System
	if strings.HasPrefix(sys, glaiveLeadIn) || strings.HasPrefix(sys, glaiveNoTools) {
		return glaiveSystem(b, sys)
	}
	tools, rest, known, err := toolaceSystem(b, sys, false)
	if err != nil || tools == nil {
		return err
	}
	b.rec.Tools, b.rec.System = tools, rest
	if known {
		b.rec.SetTag("system_template", "toolace")
	}
	return nil
}

func sharegptTools(b *builder, row *jsontree.Value) error {
	v := row.Get("tools")
	if v == nil || v.Kind == jsontree.Null {
		return nil
	}
	if v.Kind == jsontree.String {
		s := strings.TrimSpace(v.Str)
		if s == "" {
			return nil
		}
		d, err := jsontree.ParseString(s)
		if err != nil {
			return jsonReject("sharegpt_bad_tools", "tools", []byte(s), err)
		}
		v = &d
	}
	tools, err := toolsFromArray(b.w, v, "tools")
	if err != nil {
		return err
	}
	b.rec.Tools = tools
	return nil
}

// sharegptTurn returns a turn's role (a record role, or "function_call")
// and its content as parts: a plain string is one text part.
func sharegptTurn(t *jsontree.Value, i int) (role string, parts []part, err error) {
	if t.Kind != jsontree.Object {
		return "", nil, reject("sharegpt_bad_turn", "turn %d is a JSON %s, want an object", i, t.Kind)
	}
	from := t.Get("from")
	if from == nil {
		from = t.Get("role")
	}
	content := t.Get("value")
	if content == nil {
		content = t.Get("content")
	}
	if from == nil || from.Kind != jsontree.String || content == nil || content.Kind == jsontree.Null {
		return "", nil, reject("sharegpt_bad_turn", "turn %d lacks a role (from) or content (value)", i)
	}
	switch from.Str {
	case "human", "user":
		role = record.RoleUser
	case "gpt", "assistant":
		role = record.RoleAssistant
	case "function_call":
		role = "function_call"
	case "observation", "tool", "function":
		role = record.RoleTool
	case "system":
		role = record.RoleSystem
	default:
		return "", nil, reject("sharegpt_unknown_role", "turn %d has role %s", i, excerpt(from.Str))
	}
	switch content.Kind {
	case jsontree.String:
		return role, []part{{typ: "text", value: content.Str}}, nil
	case jsontree.Null:
		return role, nil, nil
	case jsontree.Array:
		parts = make([]part, 0, len(content.Elems))
		for k := range content.Elems {
			p := &content.Elems[k].Val
			typ, ok := p.StringOr("type")
			val := p.Get("value")
			if val == nil {
				val = p.Get("text")
			}
			if p.Kind != jsontree.Object || !ok || val == nil {
				return "", nil, reject("sharegpt_bad_turn", "turn %d part %d is not {type, value}", i, k)
			}
			parts = append(parts, part{typ: typ, value: val.Str, json: val})
		}
		return role, parts, nil
	}
	return "", nil, reject("sharegpt_bad_turn", "turn %d content is a JSON %s", i, content.Kind)
}

// A part is one typed piece of a turn's content (LLaMA-Factory v1).
type part struct {
	typ   string
	value string          // the value when it is a string
	json  *jsontree.Value // the value as given; nil for plain-string turns
}

// partsText joins the text parts of a turn that may only hold text.
func partsText(parts []part, i int) (string, error) {
	var sb strings.Builder
	for k, p := range parts {
		if p.typ != "text" || p.json != nil && p.json.Kind != jsontree.String {
			return "", reject("sharegpt_unsupported_content", "turn %d part %d has type %s, want text", i, k, excerpt(p.typ))
		}
		if k > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(p.value)
	}
	return sb.String(), nil
}

// sharegptAssistant reads a gpt/assistant turn: text, and in v1 rows also
// reasoning and tool_call parts.
func sharegptAssistant(b *builder, parts []part, i int) (record.Message, error) {
	m := record.Message{Role: record.RoleAssistant}
	var text, reasoning []string
	for k, p := range parts {
		if (p.typ == "text" || p.typ == "reasoning") && p.json != nil && p.json.Kind != jsontree.String {
			return m, reject("sharegpt_bad_turn", "turn %d part %d: %s value is a JSON %s, want a string", i, k, p.typ, p.json.Kind)
		}
		switch p.typ {
		case "text":
			text = append(text, p.value)
		case "reasoning":
			reasoning = append(reasoning, p.value)
		case "tool_call":
			var calls []record.Call
			var err error
			if p.json != nil && p.json.Kind == jsontree.Object {
				calls, err = callsValue(b, p.json, i)
			} else {
				_, _, calls, err = functionCallValue(b, p.value, i)
			}
			if err != nil {
				return m, err
			}
			m.Calls = append(m.Calls, calls...)
		default:
			return m, reject("sharegpt_unsupported_content", "turn %d part %d has type %s", i, k, excerpt(p.typ))
		}
	}
	m.Content = strings.Join(text, "\n")
	m.Reasoning = strings.Join(reasoning, "\n")
	return m, nil
}

// functionCallValue reads a function_call value: JSON {"name", "arguments"}
// or a list of them, optionally after a <think>…</think> block (with or
// without the newlines of LLaMA-Factory's default thought words), which
// becomes the turn's reasoning. When the calls are inside a
// <tool_call>…</tool_call> block, the text outside it is what the turn
// says with the calls (augment's export writes an answer beside
// get_user_input, or a decision token, there).
func functionCallValue(b *builder, text string, i int) (reasoning, content string, calls []record.Call, err error) {
	t := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(t, "<think>"); ok {
		if r, after, ok := strings.Cut(rest, "</think>"); ok {
			reasoning, t = strings.TrimSpace(r), strings.TrimSpace(after)
		}
	}
	if start := strings.Index(t, "<tool_call>"); start >= 0 {
		inner := t[start+len("<tool_call>"):]
		if end := strings.Index(inner, "</tool_call>"); end >= 0 {
			content = strings.TrimSpace(t[:start] + inner[end+len("</tool_call>"):])
			t = strings.TrimSpace(inner[:end])
		}
	}
	v, perr := jsontree.ParseString(t)
	if perr != nil {
		return "", "", nil, jsonReject("sharegpt_bad_function_call", turnName(i)+": function call", []byte(t), perr)
	}
	calls, err = callsValue(b, &v, i)
	return reasoning, content, calls, err
}

func callsValue(b *builder, v *jsontree.Value, i int) ([]record.Call, error) {
	items := []jsontree.Member{{Val: *v}}
	if v.Kind == jsontree.Array {
		items = v.Elems
	}
	if len(items) == 0 {
		return nil, reject("sharegpt_bad_function_call", "turn %d holds an empty list of calls", i)
	}
	calls := make([]record.Call, 0, len(items))
	for k := range items {
		c, err := jsonCall(nil, &items[k].Val)
		if err != nil {
			return nil, reject("sharegpt_bad_function_call", "turn %d call %d: %v", i, k, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// sharegptObservations reads the observation turn(s) answering the call
// turn just before them and returns how many turns it used. For k calls:
// k observation turns give one result each; otherwise a single observation
// holding a JSON array of k items gives one result per item (the layout our
// exporter writes, since LLaMA-Factory allows one observation turn); for one
// call the observation's text is the result. An item {"name", "content"} or
// {"name", "results"} stands for its content.
func sharegptObservations(b *builder, turns []jsontree.Member, at int) (int, error) {
	prev := b.last()
	if prev == nil || prev.Role != record.RoleAssistant || len(prev.Calls) == 0 {
		return 0, reject("sharegpt_observation_without_call", "turn %d is an observation that follows no function call", at)
	}
	k := len(prev.Calls)
	n := 0
	for n < len(turns) && n <= k {
		role, _, err := sharegptTurn(&turns[n].Val, at+n)
		if err != nil || role != record.RoleTool {
			break
		}
		n++
	}
	texts := make([]string, 0, k)
	if n == k || k == 1 {
		for j := range k {
			_, parts, _ := sharegptTurn(&turns[j].Val, at+j)
			text, err := partsText(parts, at+j)
			if err != nil {
				return 0, err
			}
			texts = append(texts, text)
		}
		m := record.Message{Role: record.RoleTool, Results: make([]record.Result, k)}
		for j, t := range texts {
			m.Results[j] = record.Result{Name: prev.Calls[j].Name, Content: resultText(t)}
		}
		b.add(m)
		return k, nil
	}
	_, parts, _ := sharegptTurn(&turns[0].Val, at)
	text, err := partsText(parts, at)
	if err != nil {
		return 0, err
	}
	v, perr := jsontree.ParseString(strings.TrimSpace(text))
	if perr != nil || v.Kind != jsontree.Array || len(v.Elems) != k || n != 1 {
		return 0, reject("sharegpt_observation_count_mismatch",
			"turn %d: %d observation turn(s) answer %d calls, and the first is not a JSON array of %d results", at, n, k, k)
	}
	m := record.Message{Role: record.RoleTool, Results: make([]record.Result, k)}
	for j := range v.Elems {
		m.Results[j] = record.Result{Name: prev.Calls[j].Name, Content: resultValue(unwrapResult(&v.Elems[j].Val))}
	}
	b.add(m)
	return 1, nil
}

// unwrapResult returns the content of a result wrapper, an object with a
// string "name", one of "content"/"results", and at most "tool_call_id"
// besides; any other value is the result itself.
func unwrapResult(v *jsontree.Value) *jsontree.Value {
	if v.Kind != jsontree.Object {
		return v
	}
	name := v.Get("name")
	var inner *jsontree.Value
	for i := range v.Elems {
		switch v.Elems[i].Key {
		case "name", "tool_call_id":
		case "content", "results":
			if inner != nil {
				return v
			}
			inner = &v.Elems[i].Val
		default:
			return v
		}
	}
	if name == nil || name.Kind != jsontree.String || inner == nil {
		return v
	}
	return inner
}
