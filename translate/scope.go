package translate

import (
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// A scope says which tool definitions the calls and results of each turn of
// a record refer to: the record's listed tools, plus those returned by the
// meta_tool results of earlier turns (open-world records, seed 000 Fig 12,
// verify.WalkScope, as verify reads them).
// Locking follows these definitions exactly as it follows listed ones, so a
// retrieved tool's enum members and formats are as locked as a listed
// tool's. A name listed or returned more than once means its first
// definition.
//
// A meta_tool result that returns definitions is itself a tool definition:
// it keeps its bytes, in both modes, like the record's "functions".
type scope struct {
	avail [][]record.Tool // per message: the tools its calls and results may refer to
	defs  map[[2]int]bool // {message, result} of meta_tool results that return definitions
}

func scopeOf(r *record.Record) *scope {
	s := &scope{avail: make([][]record.Tool, len(r.Messages))}
	verify.WalkScope(r, func(i int, avail []record.Tool) { s.avail[i] = avail }, func(i, j int, _ []record.Tool, err error) {
		if err != nil {
			return // not a definition: a result like any other
		}
		if s.defs == nil {
			s.defs = make(map[[2]int]bool)
		}
		s.defs[[2]int{i, j}] = true
	})
	return s
}

// tool returns the definition of name available at message i.
func (s *scope) tool(i int, name string) (record.Tool, bool) {
	if k := record.ToolIndex(s.avail[i], name); k >= 0 {
		return s.avail[i][k], true
	}
	return record.Tool{}, false
}

// params returns the parameter schema of the tool name as called in message
// i; nil when unknown.
func (s *scope) params(i int, name string) schema {
	if t, ok := s.tool(i, name); ok {
		return toolSchema(t.Parameters)
	}
	return nil
}

// response returns the response schema of the tool name whose result is in
// message i, when its definition has one.
func (s *scope) response(i int, name string) schema {
	if t, ok := s.tool(i, name); ok && len(t.Response) > 0 {
		return toolSchema(t.Response)
	}
	return nil
}

// definition reports whether result j of message i is a meta_tool result
// returning tool definitions.
func (s *scope) definition(i, j int) bool { return s.defs[[2]int{i, j}] }
