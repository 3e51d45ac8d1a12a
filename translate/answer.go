package translate

import (
	"bytes"
	"fmt"
	"strings"
)

// An answer is the teacher's JSON object, parsed but not yet compared with
// the source.
type answer struct {
	functions *node   // nil when missing
	system    *string // nil when missing
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
	args *node // a JSON object
}

type answerResult struct {
	name    string
	content *node // any JSON value
}

// parseAnswer reads the teacher's answer: one JSON object with the keys of
// the request object and nothing else. White space and one surrounding
// Markdown code fence (```json … ```) are tolerated, since chat models add
// them despite being told not to; anything else that is not exactly the
// requested shape is a translate_invalid_json problem. Checks against the
// source (counts, roles, names, values) are not made here.
func parseAnswer(b []byte) (*answer, *problem) {
	b = unfence(b)
	root, err := parseTree(b)
	if err != nil {
		return nil, &problem{reason: ReasonInvalidJSON, detail: "the answer is not valid JSON; answer with the JSON object only"}
	}
	if root.kind != '{' {
		return nil, &problem{reason: ReasonInvalidJSON, detail: fmt.Sprintf("the answer is a JSON %s, want an object", kindName(root.kind))}
	}
	bad := func(path, format string, args ...any) (*answer, *problem) {
		return nil, &problem{reason: ReasonInvalidJSON, path: path, detail: fmt.Sprintf(format, args...)}
	}
	if k, dup := duplicateKey(root); dup {
		return bad("", "key %q appears twice", k)
	}
	a := &answer{}
	for i, k := range root.keys {
		v := root.kids[i]
		switch k {
		case "functions":
			if v.kind != '[' {
				return bad("functions", "want a list, got a %s", kindName(v.kind))
			}
			a.functions = v
		case "system":
			if v.kind != '"' {
				return bad("system", "want a string, got a %s", kindName(v.kind))
			}
			a.system = &v.str
		case "conversations":
			if v.kind != '[' {
				return bad("conversations", "want a list, got a %s", kindName(v.kind))
			}
			a.turns = make([]answerTurn, len(v.kids))
			for j, t := range v.kids {
				if p := parseTurn(turnPath(j), t, &a.turns[j]); p != nil {
					return nil, p
				}
			}
		default:
			return bad("", "unexpected key %q; keep the keys of the given JSON", k)
		}
	}
	if root.get("conversations") == nil {
		return bad("", `the key "conversations" is missing`)
	}
	return a, nil
}

func parseTurn(path string, t *node, out *answerTurn) *problem {
	bad := func(p, format string, args ...any) *problem {
		return &problem{reason: ReasonInvalidJSON, path: p, detail: fmt.Sprintf(format, args...)}
	}
	if t.kind != '{' {
		return bad(path, "want an object, got a %s", kindName(t.kind))
	}
	if k, dup := duplicateKey(t); dup {
		return bad(path, "key %q appears twice", k)
	}
	for i, k := range t.keys {
		v := t.kids[i]
		switch k {
		case "role", "content", "reasoning":
			if v.kind != '"' {
				return bad(path+"."+k, "want a string, got a %s", kindName(v.kind))
			}
			switch k {
			case "role":
				out.role = v.str
			case "content":
				out.content = &v.str
			default:
				out.reasoning = &v.str
			}
		case "tool_calls":
			if v.kind != '[' {
				return bad(path+".tool_calls", "want a list, got a %s", kindName(v.kind))
			}
			out.hasCalls = true
			for j, c := range v.kids {
				cp := fmt.Sprintf("%s.tool_calls[%d]", path, j)
				name, rest, p := namedObject(cp, c, "arguments")
				if p != nil {
					return p
				}
				if rest.kind != '{' {
					return bad(cp+".arguments", "want an object, got a %s", kindName(rest.kind))
				}
				out.calls = append(out.calls, answerCall{name: name, args: rest})
			}
		case "results":
			if v.kind != '[' {
				return bad(path+".results", "want a list, got a %s", kindName(v.kind))
			}
			out.hasResults = true
			for j, r := range v.kids {
				name, rest, p := namedObject(fmt.Sprintf("%s.results[%d]", path, j), r, "content")
				if p != nil {
					return p
				}
				out.results = append(out.results, answerResult{name: name, content: rest})
			}
		default:
			return bad(path, "unexpected key %q", k)
		}
	}
	if t.get("role") == nil {
		return bad(path, `the key "role" is missing`)
	}
	return nil
}

// namedObject reads {"name": string, <other>: any} and nothing else.
func namedObject(path string, n *node, other string) (string, *node, *problem) {
	bad := func(format string, args ...any) (string, *node, *problem) {
		return "", nil, &problem{reason: ReasonInvalidJSON, path: path, detail: fmt.Sprintf(format, args...)}
	}
	if n.kind != '{' {
		return bad("want an object, got a %s", kindName(n.kind))
	}
	if len(n.keys) != 2 {
		return bad(`want exactly the keys "name" and %q, got %s`, other, strings.Join(quoteAll(n.keys), ", "))
	}
	name, rest := n.get("name"), n.get(other)
	if name == nil || rest == nil {
		return bad(`want exactly the keys "name" and %q, got %s`, other, strings.Join(quoteAll(n.keys), ", "))
	}
	if name.kind != '"' {
		return bad(`"name" must be a string, got a %s`, kindName(name.kind))
	}
	return name.str, rest, nil
}

func duplicateKey(n *node) (string, bool) {
	for i, k := range n.keys {
		for _, k2 := range n.keys[:i] {
			if k == k2 {
				return k, true
			}
		}
	}
	return "", false
}

func quoteAll(ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = fmt.Sprintf("%q", k)
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// unfence strips surrounding white space and one Markdown code fence.
func unfence(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if !bytes.HasPrefix(b, []byte("```")) || !bytes.HasSuffix(b, []byte("```")) || len(b) < 6 {
		return b
	}
	inner := b[3 : len(b)-3]
	nl := bytes.IndexByte(inner, '\n')
	if nl < 0 {
		return b
	}
	if lang := bytes.TrimSpace(inner[:nl]); len(lang) > 0 && !bytes.EqualFold(lang, []byte("json")) {
		return b
	}
	return bytes.TrimSpace(inner[nl+1:])
}
