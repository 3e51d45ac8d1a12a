package formats

import (
	"strings"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// parseOpenAI reads OpenAI chat rows: {"messages": [{"role", "content",
// "tool_calls": [{"id", "type", "function": {"name", "arguments"}}],
// "tool_call_id"}], "tools": [{"type": "function", "function": {…}}]}.
// The run of tool messages after an assistant turn answers its tool_calls,
// matched by tool_call_id when every message has a known one, else in order.
// A leading system (or developer) message is the record's System.
func parseOpenAI(b *builder, row *jsontree.Value) error {
	if err := openaiTools(b, row); err != nil {
		return err
	}
	msgs := row.Get("messages")
	if msgs == nil || msgs.Kind != jsontree.Array {
		return reject("openai_missing_messages", "the row has no messages array")
	}
	if len(msgs.Elems) == 0 {
		return reject("openai_empty_messages", "the messages array is empty")
	}
	b.rec.Messages = make([]record.Message, 0, len(msgs.Elems))
	var ids []string // tool_call ids of the last assistant turn
	for i := 0; i < len(msgs.Elems); i++ {
		m := &msgs.Elems[i].Val
		if m.Kind != jsontree.Object {
			return reject("openai_bad_message", "message %d is a JSON %s, want an object", i, m.Kind)
		}
		role, ok := m.StringOr("role")
		if !ok || role == "" {
			return reject("openai_bad_message", "message %d has no role", i)
		}
		content, err := openaiContent(m, i)
		if err != nil {
			return err
		}
		switch role {
		case "system", "developer":
			if i == 0 {
				b.rec.System = content
			} else {
				b.add(record.Message{Role: record.RoleSystem, Content: content})
			}
		case "user":
			b.add(record.Message{Role: record.RoleUser, Content: content})
		case "assistant":
			var msg record.Message
			msg, ids, err = openaiAssistant(m, content, i)
			if err != nil {
				return err
			}
			b.add(msg)
		case "tool", "function":
			n, err := openaiResults(b, msgs.Elems[i:], ids, i)
			if err != nil {
				return err
			}
			i += n - 1
		default:
			return reject("openai_unknown_role", "message %d has role %s", i, excerpt(role))
		}
	}
	return nil
}

func openaiTools(b *builder, row *jsontree.Value) error {
	v := row.Get("tools")
	if v == nil || v.Kind == jsontree.Null {
		v = row.Get("functions") // the API's older name
	}
	if v == nil || v.Kind == jsontree.Null {
		return nil
	}
	if v.Kind == jsontree.String {
		d, err := jsontree.ParseString(v.Str)
		if err != nil {
			return jsonReject("openai_bad_tools", "tools", []byte(v.Str), err)
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

// openaiContent returns a message's text: a string, null, or a list of
// {"type": "text", "text"} parts (joined by newlines).
func openaiContent(m *jsontree.Value, i int) (string, error) {
	c := m.Get("content")
	switch {
	case c == nil || c.Kind == jsontree.Null:
		return "", nil
	case c.Kind == jsontree.String:
		return c.Str, nil
	case c.Kind == jsontree.Array:
		texts := make([]string, 0, len(c.Elems))
		for k := range c.Elems {
			p := &c.Elems[k].Val
			typ, _ := p.StringOr("type")
			t := p.Get("text")
			if typ != "text" || t == nil || t.Kind != jsontree.String {
				return "", reject("openai_unsupported_content", "message %d part %d is not a text part", i, k)
			}
			texts = append(texts, t.Str)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", reject("openai_bad_message", "message %d content is a JSON %s", i, c.Kind)
}

// openaiAssistant reads an assistant message's calls (tool_calls, or the
// older single function_call) and reasoning (reasoning_content or
// reasoning). ids are the calls' tool_call ids ("" where absent).
func openaiAssistant(m *jsontree.Value, content string, i int) (record.Message, []string, error) {
	msg := record.Message{Role: record.RoleAssistant, Content: content}
	for _, key := range []string{"reasoning_content", "reasoning"} {
		if r, ok := m.StringOr(key); ok && r != "" {
			msg.Reasoning = r
			break
		}
	}
	var ids []string
	if tc := m.Get("tool_calls"); tc != nil && tc.Kind != jsontree.Null {
		if tc.Kind != jsontree.Array {
			return msg, nil, reject("openai_bad_tool_call", "message %d: tool_calls is a JSON %s", i, tc.Kind)
		}
		for k := range tc.Elems {
			t := &tc.Elems[k].Val
			fn := t.Get("function")
			if t.Kind != jsontree.Object || fn == nil {
				return msg, nil, reject("openai_bad_tool_call", "message %d tool call %d has no function", i, k)
			}
			c, err := jsonCall(nil, fn)
			if err != nil {
				return msg, nil, reject("openai_bad_tool_call", "message %d tool call %d: %v", i, k, err)
			}
			id, _ := t.StringOr("id")
			msg.Calls = append(msg.Calls, c)
			ids = append(ids, id)
		}
	}
	if fc := m.Get("function_call"); fc != nil && fc.Kind != jsontree.Null && len(msg.Calls) == 0 {
		c, err := jsonCall(nil, fc)
		if err != nil {
			return msg, nil, reject("openai_bad_tool_call", "message %d function_call: %v", i, err)
		}
		msg.Calls, ids = []record.Call{c}, []string{""}
	}
	return msg, ids, nil
}

// openaiResults reads the run of tool messages at msgs[0:] answering the
// last assistant turn, and returns its length.
func openaiResults(b *builder, msgs []jsontree.Member, ids []string, at int) (int, error) {
	prev := b.last()
	if prev == nil || prev.Role != record.RoleAssistant || len(prev.Calls) == 0 {
		return 0, reject("openai_result_without_call", "message %d is a tool message that follows no tool call", at)
	}
	n := 0
	for n < len(msgs) {
		r, _ := msgs[n].Val.StringOr("role")
		if r != "tool" && r != "function" {
			break
		}
		n++
	}
	k := len(prev.Calls)
	if n != k {
		return 0, reject("openai_tool_result_mismatch", "message %d: %d tool messages answer %d tool calls", at, n, k)
	}
	byID := true
	for j := range n {
		id, _ := msgs[j].Val.StringOr("tool_call_id")
		if id == "" || !containsOnce(ids, id) {
			byID = false
		}
	}
	out := record.Message{Role: record.RoleTool, Results: make([]record.Result, k)}
	filled := make([]bool, k)
	for j := range n {
		content, err := openaiContent(&msgs[j].Val, at+j)
		if err != nil {
			return 0, err
		}
		slot := j
		if byID {
			id, _ := msgs[j].Val.StringOr("tool_call_id")
			for s, cid := range ids {
				if cid == id {
					slot = s
				}
			}
		}
		if filled[slot] {
			return 0, reject("openai_tool_result_mismatch", "message %d answers tool call %d twice", at+j, slot)
		}
		filled[slot] = true
		out.Results[slot] = record.Result{Name: prev.Calls[slot].Name, Content: resultText(content)}
	}
	b.add(out)
	return n, nil
}

func containsOnce(ids []string, id string) bool {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n == 1
}
