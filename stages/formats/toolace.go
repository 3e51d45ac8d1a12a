package formats

import (
	"strings"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/pycall"
	"github.com/augmentdata/augment/stages/record"
)

// ToolACE's fixed system template: the tool list sits between these two
// texts. The suffix is followed by " \n" in raw dumps and by nothing in
// copies that were stripped.
const (
	toolacePrefix = "You are an expert in composing functions. You are given a question and a set of possible functions. \n" +
		"Based on the question, you will need to make one or more function/tool calls to achieve the purpose. \n" +
		"If none of the function can be used, point it out. If the given question lacks the parameters required by the function,\n" +
		"also point it out. You should only return the function call in tools call sections.\n" +
		"Here is a list of functions in JSON format that you can invoke:\n"
	toolaceSuffix = ". \nShould you decide to return the function call(s). \n" +
		"Put it in the format of [func1(params_name=params_value, params_name2=params_value2...), func2(params)]\n\n" +
		"NO other text MUST be included."
	toolaceOpen  = "you can invoke:\n"
	toolaceClose = ". \nShould you decide"
)

// parseToolACE reads {"system": "…tools…", "conversations": [{"from", "value"}]}.
func parseToolACE(b *builder, row *jsontree.Value) error {
	sys, err := requiredString(row, "system", "toolace_bad_system")
	if err != nil {
		return err
	}
	tools, system, known := b.w.rowTools, "", true // read from the row (systemLiteral)
	if tools == nil {
		if tools, system, known, err = toolaceSystem(b, sys, true); err != nil {
			return err
		}
	}
	b.rec.Tools, b.rec.System = tools, system
	if known {
		b.rec.SetTag("system_template", "toolace")
	}
	conv := row.Get("conversations")
	if conv == nil || conv.Kind != jsontree.Array {
		return reject("toolace_missing_conversations", "the row has no conversations array")
	}
	b.rec.Messages = make([]record.Message, 0, len(conv.Elems))
	for i := range conv.Elems {
		t := &conv.Elems[i].Val
		if t.Kind != jsontree.Object {
			return reject("toolace_bad_turn", "turn %d is a JSON %s, want an object", i, t.Kind)
		}
		f, v := t.Get("from"), t.Get("value")
		if f == nil || f.Kind != jsontree.String || v == nil || v.Kind != jsontree.String {
			return reject("toolace_bad_turn", "turn %d: from and value must be strings", i)
		}
		from, value := f.Str, v.Str
		switch from {
		case "user":
			b.add(record.Message{Role: record.RoleUser, Content: value})
		case "assistant":
			m, err := toolaceAssistant(value, b.rec.Tools, i)
			if err != nil {
				return err
			}
			b.add(m)
		case "tool":
			m, err := toolaceResults(b, value, i)
			if err != nil {
				return err
			}
			b.add(m)
		default:
			return reject("toolace_unknown_role", "turn %d has role %s, want user, assistant or tool", i, excerpt(from))
		}
	}
	return nil
}

// toolaceSystem splits a ToolACE system text into the tool list and the rest.
// The list is found between the template's two anchors; failing those (and
// when loose is set), as the first "[{" … its matching "]". known reports
// that the text around the list was exactly the fixed template, which is
// then dropped: it only makes sense with ToolACE's call syntax. Other text
// is kept, trimmed.
func toolaceSystem(b *builder, sys string, loose bool) (tools []record.Tool, rest string, known bool, err error) {
	if i := strings.Index(sys, toolaceOpen); i >= 0 {
		if j := strings.Index(sys[i+len(toolaceOpen):], toolaceClose); j >= 0 {
			j += i + len(toolaceOpen)
			list := sys[i+len(toolaceOpen) : j]
			v, perr := b.parse(list)
			if perr != nil {
				return nil, "", false, jsonReject("toolace_bad_tools_json", "tool list in the system text", []byte(list), perr)
			}
			if tools, err = toolsFromArray(b.w, &v, "the tool list in the system text"); err != nil {
				return nil, "", false, err
			}
			before, after := sys[:i+len(toolaceOpen)], sys[j:]
			pre, okPre := strings.CutSuffix(before, toolacePrefix)
			post, okPost := strings.CutPrefix(after, toolaceSuffix)
			if !okPre {
				pre = before
			}
			if !okPost {
				post = after
			}
			return tools, joinTrimmed(pre, post), okPre && okPost, nil
		}
	}
	if !loose {
		return nil, sys, false, nil
	}
	start := strings.Index(sys, "[{")
	if start < 0 {
		return nil, "", false, reject("toolace_missing_tools", "the system text holds no tool list: %s", excerpt(sys))
	}
	p := b.parser(sys[start:])
	v, perr := p.Value()
	if perr != nil {
		return nil, "", false, jsonReject("toolace_bad_tools_json", "tool list in the system text", p.Data, perr)
	}
	if tools, err = toolsFromArray(b.w, &v, "the tool list in the system text"); err != nil {
		return nil, "", false, err
	}
	return tools, joinTrimmed(sys[:start], sys[start+p.Pos:]), false, nil
}

func joinTrimmed(a, b string) string {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

// toolaceAssistant reads an assistant value: calls when it is a bracketed
// list that parses as Python calls, else prose. A bracketed value that
// starts like a call (a listed tool's name, or an identifier, then "(") but
// does not parse, or lacks its closing bracket, is rejected rather than kept
// as prose.
func toolaceAssistant(value string, tools []record.Tool, turn int) (record.Message, error) {
	t := strings.TrimSpace(value)
	if len(t) < 2 || t[0] != '[' {
		return record.Message{Role: record.RoleAssistant, Content: value}, nil
	}
	if t[len(t)-1] != ']' {
		if looksLikeCall(t[1:], tools) {
			return record.Message{}, reject("toolace_truncated_call", "turn %d: a call list without its closing ]: %s", turn, excerpt(t))
		}
		return record.Message{Role: record.RoleAssistant, Content: value}, nil
	}
	calls, err := pycall.Parse(t)
	if err == nil {
		return record.Message{Role: record.RoleAssistant, Calls: calls}, nil
	}
	if looksLikeCall(t[1:], tools) {
		return record.Message{}, reject("toolace_bad_call_syntax", "turn %d: %v in %s", turn, err, excerpt(t))
	}
	return record.Message{Role: record.RoleAssistant, Content: value}, nil
}

// looksLikeCall reports whether s starts with a listed tool's name or a
// Python identifier, followed by "(".
func looksLikeCall(s string, tools []record.Tool) bool {
	s = strings.TrimLeft(s, " \t\n")
	for _, t := range tools {
		if rest, ok := strings.CutPrefix(s, t.Name); ok && strings.HasPrefix(strings.TrimLeft(rest, " "), "(") {
			return true
		}
	}
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] == '.' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || i > 0 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return i > 0 && i < len(s) && s[i] == '('
}

// toolaceResults reads a tool turn, [{"name", "results"}, …], answering the
// calls of the assistant turn just before it. Results are matched to calls
// by name in order; results listed in another order than the calls are put
// in call order (repair "results_reordered").
func toolaceResults(b *builder, value string, turn int) (record.Message, error) {
	prev := b.last()
	if prev == nil || prev.Role != record.RoleAssistant || len(prev.Calls) == 0 {
		return record.Message{}, reject("toolace_result_without_call", "turn %d is a tool turn that follows no call turn", turn)
	}
	var room [4]resultItem // most turns answer one or two calls
	items, ok := b.flatResults(value, room[:0])
	if !ok {
		v, err := b.parse(value)
		if err != nil {
			return record.Message{}, jsonReject("toolace_bad_tool_turn", turnName(turn), []byte(value), err)
		}
		if v.Kind == jsontree.Object && len(prev.Calls) == 1 {
			v = jsontree.Value{Kind: jsontree.Array, Elems: []jsontree.Member{{Val: v}}}
		}
		if v.Kind != jsontree.Array {
			return record.Message{}, reject("toolace_bad_tool_turn", "turn %d is a JSON %s, want an array of {name, results}", turn, v.Kind)
		}
		items = make([]resultItem, len(v.Elems))
		for k := range v.Elems {
			e := &v.Elems[k].Val
			name, ok := e.StringOr("name")
			res := e.Get("results")
			if e.Kind != jsontree.Object || !ok || res == nil {
				return record.Message{}, reject("toolace_bad_tool_turn", "turn %d item %d is not {name, results}", turn, k)
			}
			items[k] = resultItem{name: name, val: res}
		}
	}
	if len(items) != len(prev.Calls) {
		return record.Message{}, reject("toolace_result_mismatch", "turn %d holds %d results for %d calls", turn, len(items), len(prev.Calls))
	}
	used := make([]bool, len(items))
	results := make([]record.Result, len(prev.Calls))
	for c, call := range prev.Calls {
		found := -1
		for k, it := range items {
			if !used[k] && it.name == call.Name {
				found = k
				break
			}
		}
		if found < 0 {
			return record.Message{}, reject("toolace_result_mismatch", "turn %d has no result for call %d (%s)", turn, c, excerpt(call.Name))
		}
		if found != c {
			b.repair("results_reordered")
		}
		used[found] = true
		content := items[found].content
		if v := items[found].val; v != nil {
			content = resultValue(v)
		}
		results[c] = record.Result{Name: call.Name, Content: content}
	}
	return record.Message{Role: record.RoleTool, Results: results}, nil
}

// A resultItem is an item of a ToolACE tool turn: the name, and the
// results as a tree (val) or, read without one, as resultValue gives them.
type resultItem struct {
	name    string
	val     *jsontree.Value
	content string
}

// flatResults reads a tool turn, a list of {"name": "…", "results": …}
// items, without a tree (the workspace's flat), and appends the items to
// items (room the caller keeps on its stack), each one's results as
// resultValue gives them: compact (jsontree.Parser.AppendValueIn, the list
// and the item counted toward the nesting limit as the tree counts them),
// a string through resultText. ok is false when the workspace does not read so or
// the text is anything else (an empty list, an item with another member or
// without one of the two, a name that is not a string, text that is not
// JSON), which the tree then reads.
func (b *builder) flatResults(value string, items []resultItem) ([]resultItem, bool) {
	w := b.w
	if w == nil || !w.laid {
		return nil, false
	}
	p := b.parser(value)
	d := p.Data
	// next moves past white space to the next byte and reports whether
	// it is c.
	next := func(c byte) bool {
		p.SkipSpace()
		if p.Pos < len(d) && d[p.Pos] == c {
			p.Pos++
			return true
		}
		return false
	}
	if !next('[') {
		return nil, false
	}
	for {
		if !next('{') {
			return nil, false
		}
		var it resultItem
		haveName, haveResults := false, false
		for n := 0; n < 2; n++ {
			if n > 0 && !next(',') {
				return nil, false
			}
			p.SkipSpace()
			if p.Pos >= len(d) || d[p.Pos] != '"' {
				return nil, false
			}
			k, err := p.ReadString()
			if err != nil || !next(':') {
				return nil, false
			}
			p.SkipSpace()
			switch {
			case k == "name" && !haveName:
				if p.Pos >= len(d) || d[p.Pos] != '"' {
					return nil, false
				}
				if it.name, err = p.ReadString(); err != nil {
					return nil, false
				}
				haveName = true
			case k == "results" && !haveResults:
				if p.Pos < len(d) && d[p.Pos] == '"' {
					s, err := p.ReadString()
					if err != nil {
						return nil, false
					}
					it.content = resultText(s)
				} else {
					at := len(w.json)
					out, ok := p.AppendValueIn(w.json, 2) // in the list and its item
					if ok {
						it.content = string(out[at:])
					}
					w.json = out[:at]
					if !ok {
						return nil, false
					}
				}
				haveResults = true
			default:
				return nil, false
			}
		}
		if !next('}') {
			return nil, false
		}
		items = append(items, it)
		if next(']') {
			break
		}
		if !next(',') {
			return nil, false
		}
	}
	p.SkipSpace()
	return items, p.Pos == len(d)
}
