package verify

import (
	"fmt"
	"strings"

	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
)

// Roles checks the dialogue's shape.
var Roles = &Checker{
	Name: "roles",
	Doc: "dialogue shape: optional system turn first, then a user turn; user and assistant alternate; " +
		"each assistant call turn is answered by one tool turn with one result per call, names in order; " +
		"turns are non-empty; the dialogue ends on an assistant turn",
	Check: checkRoles,
}

func checkRoles(r *record.Record) []Problem {
	var out []Problem
	add := func(kind string, i int, format string, args ...any) {
		out = append(out, Problem{Check: "roles", Kind: kind, Path: msgPath(i), Msg: fmt.Sprintf(format, args...)})
	}
	if len(r.Messages) == 0 {
		return []Problem{{Check: "roles", Kind: "empty_dialogue", Path: "messages", Msg: "the dialogue has no messages"}}
	}
	// prev is the role the previous turn played in the shape: "" at the
	// start, "system", "user", "call" (assistant with calls), "answer"
	// (assistant without calls) or "tool".
	prev := ""
	var calls []record.Call // of the last call turn, until answered
	for i, m := range r.Messages {
		switch m.Role {
		case record.RoleSystem:
			if i != 0 {
				add("misplaced_system", i, "a system turn may only open the dialogue")
				continue // judge the next turn against the one before this
			}
			prev = "system"
			continue
		case record.RoleUser:
			if strings.TrimSpace(m.Content) == "" {
				add("empty_turn", i, "user turn %d is empty", i)
			}
			switch prev {
			case "user":
				add("role_order", i, "two user turns in a row")
			case "tool":
				add("role_order", i, "a user turn follows a tool turn; the assistant must answer the results first")
			case "call":
				if !Reply(calls) {
					add("missing_results", i-1, "the calls of turn %d get no tool turn", i-1)
				}
			}
			prev, calls = "user", nil
		case record.RoleAssistant:
			switch {
			case prev == "" || prev == "system":
				add("first_not_user", i, "the dialogue must start with a user turn (after an optional system turn), not an assistant turn")
			case prev == "call" || prev == "answer":
				add("role_order", i, "two assistant turns in a row")
			}
			if strings.TrimSpace(m.Content) == "" && len(m.Calls) == 0 {
				add("empty_turn", i, "assistant turn %d has neither text nor calls", i)
			}
			if len(m.Calls) > 0 {
				prev, calls = "call", m.Calls
			} else {
				prev, calls = "answer", nil
			}
		case record.RoleTool:
			if prev != "call" {
				add("orphan_tool_turn", i, "a tool turn must directly follow an assistant turn with calls")
				prev = "tool"
				continue
			}
			if len(m.Results) != len(calls) {
				add("result_count", i, "%d result(s) for %d call(s)", len(m.Results), len(calls))
			}
			for j := range min(len(m.Results), len(calls)) {
				if m.Results[j].Name != calls[j].Name {
					out = append(out, Problem{Check: "roles", Kind: "result_name", Path: indexPath(msgPath(i)+".results", j),
						Msg: fmt.Sprintf("result %d is named %q but call %d is %q", j, m.Results[j].Name, j, calls[j].Name)})
				}
			}
			prev, calls = "tool", nil
		default:
			add("unknown_role", i, "unknown role %q", m.Role)
			continue
		}
	}
	last := len(r.Messages) - 1
	if lr := r.Messages[last].Role; lr != record.RoleAssistant {
		add("bad_ending", last, "the dialogue ends on a %s turn, not an assistant turn", lr)
	}
	return out
}

// Reply reports whether every call of a turn asks the user
// (get_user_input): such a turn is a reply to the user (seed 000 Fig 6, 19)
// whose answer is the next user turn rather than a tool turn, and it is not
// a tool call to reason about or judge.
func Reply(calls []record.Call) bool {
	for _, c := range calls {
		if c.Name != GetUserInput {
			return false
		}
	}
	return len(calls) > 0
}

// CallsResolved checks that every call names a tool available at that point.
var CallsResolved = &Checker{
	Name: "calls_resolved",
	Doc: "every call names a tool listed in the record's tools or returned earlier by a meta_tool call " +
		"(meta_tool and get_user_input themselves must be listed); meta_tool results must be tool definitions",
	Check: func(r *record.Record) []Problem {
		var out []Problem
		walkTools(r, func(i int, avail []record.Tool) {
			for j, c := range r.Messages[i].Calls {
				if !hasTool(avail, c.Name) {
					out = append(out, Problem{Check: "calls_resolved", Kind: "func_not_found", Path: callPath(i, j) + ".name",
						Msg: fmt.Sprintf("function %q is neither listed in the record's tools nor returned by an earlier meta_tool call", c.Name)})
				}
			}
		}, func(i, j int, err error) {
			out = append(out, Problem{Check: "calls_resolved", Kind: "bad_meta_result", Path: indexPath(msgPath(i)+".results", j) + ".content",
				Msg: fmt.Sprintf("the meta_tool result is not a tool definition (a JSON object with a \"name\", a list of them, or Fig 12's {\"name\": \"meta_tool\", \"results\": …} envelope): %v", err)})
		})
		return out
	},
}

// ArgsSchema checks every call's arguments against its tool's parameters.
var ArgsSchema = &Checker{
	Name: "args_schema",
	Doc: "every call's arguments fit the parameters schema of the tool it calls: a JSON object, required parameters present, " +
		"no unknown parameters, types, enums, items and bounds respected (calls to unknown tools are left to calls_resolved)",
	Check: func(r *record.Record) []Problem {
		var out []Problem
		walkTools(r, func(i int, avail []record.Tool) {
			for j, c := range r.Messages[i].Calls {
				if !hasTool(avail, c.Name) {
					continue
				}
				out = append(out, prefix(checkCall("args_schema", avail, c), callPath(i, j))...)
			}
		}, nil)
		return out
	},
}

// MetaToolShape checks the arguments of meta_tool calls (seed 000, A.3 JSON
// structure verification and Fig 4).
var MetaToolShape = &Checker{
	Name: "meta_tool_shape",
	Doc:  `meta_tool calls have exactly "tool_description" (a non-empty string) and "param_description" (a list of strings) and nothing else`,
	Check: func(r *record.Record) []Problem {
		var out []Problem
		for i, m := range r.Messages {
			for j, c := range m.Calls {
				if c.Name == MetaTool {
					out = append(out, prefix(checkMetaCall(c), callPath(i, j))...)
				}
			}
		}
		return out
	},
}

func checkMetaCall(c record.Call) []Problem {
	cc := &callCheck{check: "meta_tool_shape", fn: MetaTool}
	m, err := decodeArgs(c.Arguments)
	if err != nil {
		cc.add("bad_json", "arguments", "arguments of %q are not a JSON object: %v", MetaTool, err)
		return cc.out
	}
	cc.object(metaSchema, m, "arguments", true)
	if d, ok := m["tool_description"].(string); ok && strings.TrimSpace(d) == "" {
		cc.add("empty_value", "arguments.tool_description", `parameter "tool_description" of %q is empty`, MetaTool)
	}
	return cc.out
}

var metaSchema = buildSchema(map[string]any{
	"type": "object",
	"properties": map[string]any{
		"tool_description":  map[string]any{"type": "string"},
		"param_description": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	},
	"required":             []any{"tool_description", "param_description"},
	"additionalProperties": false,
})

func hasTool(tools []record.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// walkTools calls turn for every assistant turn with calls, with the tools
// available to it (WalkScope). badResult, if set, is called for meta_tool
// results that are not tool definitions.
func walkTools(r *record.Record, turn func(i int, avail []record.Tool), badResult func(i, j int, err error)) {
	WalkScope(r, func(i int, avail []record.Tool) {
		if m := r.Messages[i]; m.Role == record.RoleAssistant && len(m.Calls) > 0 {
			turn(i, avail)
		}
	}, func(i, j int, _ []record.Tool, err error) {
		if err != nil && badResult != nil {
			badResult(i, j, err)
		}
	})
}

// WalkScope calls msg for every message i of r with the tools available
// to it: the record's tools, then those returned by the meta_tool results
// of earlier messages (seed 000 Fig 12), in order. result, if set, is
// called for each meta_tool result (result j of message i) with the
// definitions it returns, or why it is not a list of definitions. A
// result's tool is its call's (result j answers call j of the turn
// before). avail aliases r.Tools until a result adds to it; the slices
// given are never written after (later ones may share their array).
func WalkScope(r *record.Record, msg func(i int, avail []record.Tool), result func(i, j int, defs []record.Tool, err error)) {
	avail := r.Tools
	shared := true // avail still aliases r.Tools
	var calls []record.Call
	for i, m := range r.Messages {
		msg(i, avail)
		switch m.Role {
		case record.RoleAssistant:
			calls = m.Calls
		case record.RoleTool:
			for j, res := range m.Results {
				name := res.Name
				if j < len(calls) {
					name = calls[j].Name
				}
				if name != MetaTool {
					continue
				}
				ts, err := formats.MetaToolResult(res.Content)
				if result != nil {
					result(i, j, ts, err)
				}
				if err != nil {
					continue
				}
				if shared {
					avail = append([]record.Tool(nil), avail...)
					shared = false
				}
				avail = append(avail, ts...)
			}
			calls = nil
		default:
			calls = nil
		}
	}
}
