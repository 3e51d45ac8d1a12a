package translate

import (
	"fmt"
	"strings"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/llm"
)

// An answer is the teacher's JSON object, parsed but not yet compared with
// the source.
type answer struct {
	functions *jsontree.Value // nil when missing
	system    *string         // nil when missing
	turns     []answerTurn
}

type answerTurn struct {
	role               string
	content, reasoning *string // nil when missing
	calls              []answerCall
	results            []answerResult
	hasCalls           bool // "tool_calls" present (possibly empty)
	hasResults         bool
}

type answerCall struct {
	name string
	args *jsontree.Value // a JSON object
}

type answerResult struct {
	name    string
	content *jsontree.Value // any JSON value
}

// parseAnswer reads the teacher's answer: one JSON object with the keys of
// the request object and nothing else. White space and one surrounding
// Markdown code fence (```json … ```) are tolerated, since chat models add
// them despite being told not to; anything else that is not exactly the
// requested shape is a translate_invalid_json problem. Checks against the
// source (counts, roles, names, values) are not made here.
func parseAnswer(b []byte) (*answer, *problem) {
	b = []byte(llm.StripFence(string(b)))
	root, err := parseTree(b)
	if err != nil {
		return nil, &problem{reason: ReasonInvalidJSON, detail: "the answer is not valid JSON; answer with the JSON object only"}
	}
	if root.Kind != jsontree.Object {
		return nil, &problem{reason: ReasonInvalidJSON, detail: fmt.Sprintf("the answer is a JSON %s, want an object", root.Kind)}
	}
	bad := func(path, format string, args ...any) (*answer, *problem) {
		return nil, &problem{reason: ReasonInvalidJSON, path: path, detail: fmt.Sprintf(format, args...)}
	}
	if k, dup := duplicateKey(root); dup {
		return bad("", "key %q appears twice", k)
	}
	a := &answer{}
	for i := range root.Elems {
		k, v := root.Elems[i].Key, &root.Elems[i].Val
		switch k {
		case "functions":
			if v.Kind != jsontree.Array {
				return bad("functions", "want a list, got a %s", v.Kind)
			}
			a.functions = v
		case "system":
			if v.Kind != jsontree.String {
				return bad("system", "want a string, got a %s", v.Kind)
			}
			a.system = &v.Str
		case "conversations":
			if v.Kind != jsontree.Array {
				return bad("conversations", "want a list, got a %s", v.Kind)
			}
			a.turns = make([]answerTurn, len(v.Elems))
			for j := range v.Elems {
				if p := parseTurn(turnPath(j), &v.Elems[j].Val, &a.turns[j]); p != nil {
					return nil, p
				}
			}
		default:
			return bad("", "unexpected key %q; keep the keys of the given JSON", k)
		}
	}
	if root.Get("conversations") == nil {
		return bad("", `the key "conversations" is missing`)
	}
	return a, nil
}

func parseTurn(path string, t *jsontree.Value, out *answerTurn) *problem {
	bad := func(p, format string, args ...any) *problem {
		return &problem{reason: ReasonInvalidJSON, path: p, detail: fmt.Sprintf(format, args...)}
	}
	if t.Kind != jsontree.Object {
		return bad(path, "want an object, got a %s", t.Kind)
	}
	if k, dup := duplicateKey(t); dup {
		return bad(path, "key %q appears twice", k)
	}
	for i := range t.Elems {
		k, v := t.Elems[i].Key, &t.Elems[i].Val
		switch k {
		case "role", "content", "reasoning":
			if v.Kind != jsontree.String {
				return bad(path+"."+k, "want a string, got a %s", v.Kind)
			}
			switch k {
			case "role":
				out.role = v.Str
			case "content":
				out.content = &v.Str
			default:
				out.reasoning = &v.Str
			}
		case "tool_calls":
			if v.Kind != jsontree.Array {
				return bad(path+".tool_calls", "want a list, got a %s", v.Kind)
			}
			out.hasCalls = true
			for j := range v.Elems {
				cp := fmt.Sprintf("%s.tool_calls[%d]", path, j)
				name, rest, p := namedObject(cp, &v.Elems[j].Val, "arguments")
				if p != nil {
					return p
				}
				if rest.Kind != jsontree.Object {
					return bad(cp+".arguments", "want an object, got a %s", rest.Kind)
				}
				out.calls = append(out.calls, answerCall{name: name, args: rest})
			}
		case "results":
			if v.Kind != jsontree.Array {
				return bad(path+".results", "want a list, got a %s", v.Kind)
			}
			out.hasResults = true
			for j := range v.Elems {
				name, rest, p := namedObject(fmt.Sprintf("%s.results[%d]", path, j), &v.Elems[j].Val, "content")
				if p != nil {
					return p
				}
				out.results = append(out.results, answerResult{name: name, content: rest})
			}
		default:
			return bad(path, "unexpected key %q", k)
		}
	}
	if t.Get("role") == nil {
		return bad(path, `the key "role" is missing`)
	}
	return nil
}

// namedObject reads {"name": string, <other>: any} and nothing else.
func namedObject(path string, n *jsontree.Value, other string) (string, *jsontree.Value, *problem) {
	bad := func(format string, args ...any) (string, *jsontree.Value, *problem) {
		return "", nil, &problem{reason: ReasonInvalidJSON, path: path, detail: fmt.Sprintf(format, args...)}
	}
	if n.Kind != jsontree.Object {
		return bad("want an object, got a %s", n.Kind)
	}
	name, rest := n.Get("name"), n.Get(other)
	if len(n.Elems) != 2 || name == nil || rest == nil {
		return bad(`want exactly the keys "name" and %q, got %s`, other, strings.Join(quotedKeys(n), ", "))
	}
	if name.Kind != jsontree.String {
		return bad(`"name" must be a string, got a %s`, name.Kind)
	}
	return name.Str, rest, nil
}

func duplicateKey(n *jsontree.Value) (string, bool) {
	for i, m := range n.Elems {
		for _, m2 := range n.Elems[:i] {
			if m.Key == m2.Key {
				return m.Key, true
			}
		}
	}
	return "", false
}

// quotedKeys lists an object's keys quoted, or "none".
func quotedKeys(n *jsontree.Value) []string {
	out := make([]string, len(n.Elems))
	for i, m := range n.Elems {
		out[i] = fmt.Sprintf("%q", m.Key)
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
