package formats

import (
	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

// parseXLAM reads xlam-function-calling-60k's {"id", "query", "answers",
// "tools"}, where answers and tools are JSON texts held in strings (actual
// arrays are accepted too). The record is one user turn and, when answers
// holds calls, one assistant turn with all of them; xlam has no results.
func parseXLAM(b *builder, row *jsontree.Value) error {
	switch id := row.Get("id"); {
	case id == nil || id.Kind == jsontree.Null:
	case id.Kind == jsontree.String || id.Kind == jsontree.Number:
		b.rec.SetTag("xlam_id", id.Str)
	default:
		return reject("xlam_bad_field", "id is a JSON %s, want a number or string", id.Kind)
	}
	query, ok := row.StringOr("query")
	if !ok || !row.Has("query") {
		return reject("xlam_bad_field", "the row has no query string")
	}
	if b.w != nil && b.w.rowTools != nil { // read with the row (xlamtools.go)
		b.rec.Tools = b.w.rowTools
	} else {
		tools, err := embeddedJSON(b, row, "tools", "xlam")
		if err != nil {
			return err
		}
		if b.rec.Tools, err = toolsFromArray(b.w, &tools, "tools"); err != nil {
			return err
		}
	}
	if b.w != nil && b.w.haveCalls { // read with the row (xlamtools.go)
		b.rec.Messages = b.messages2()
		b.add(record.Message{Role: record.RoleUser, Content: query})
		if len(b.w.xlamCalls) > 0 {
			b.add(record.Message{Role: record.RoleAssistant, Calls: b.w.xlamCalls})
		}
		return nil
	}
	answers, err := embeddedJSON(b, row, "answers", "xlam")
	if err != nil {
		return err
	}
	if answers.Kind != jsontree.Array {
		return reject("xlam_bad_answers", "answers is a JSON %s, want an array of calls", answers.Kind)
	}
	b.rec.Messages = b.messages2()
	b.add(record.Message{Role: record.RoleUser, Content: query})
	if len(answers.Elems) == 0 {
		return nil
	}
	m := record.Message{Role: record.RoleAssistant}
	for i := range answers.Elems {
		c, err := jsonCall(b, &answers.Elems[i].Val)
		if err != nil {
			return reject("xlam_bad_answers", "call %d: %v", i, err)
		}
		m.Calls = append(m.Calls, c)
	}
	b.add(m)
	return nil
}

// xlamEmbedded names the members whose JSON text the row parser may decode
// in its own pass (an array or object then, as embeddedJSON would give).
func xlamEmbedded(key string) bool { return key == "tools" || key == "answers" }

// embeddedJSON returns the member key decoded: a string holding JSON is
// decoded, an array or object is taken as it is.
func embeddedJSON(b *builder, row *jsontree.Value, key, format string) (jsontree.Value, error) {
	v := row.Get(key)
	switch {
	case v == nil || v.Kind == jsontree.Null:
		return jsontree.Value{}, reject(format+"_bad_field", "the row has no %s", key)
	case v.Kind == jsontree.String:
		d, err := b.parse(v.Str)
		if err != nil {
			return jsontree.Value{}, jsonReject("bad_json", key, []byte(v.Str), err)
		}
		return d, nil
	case v.Kind == jsontree.Array || v.Kind == jsontree.Object:
		return *v, nil
	}
	return jsontree.Value{}, reject(format+"_bad_field", "%s is a JSON %s, want JSON text or an array", key, v.Kind)
}

type callError string

func (e callError) Error() string { return string(e) }

// jsonCall reads {"name": "…", "arguments": {…}}. Arguments held in a JSON
// string are decoded (repair "string_arguments"); missing arguments are an
// error.
func jsonCall(b *builder, v *jsontree.Value) (record.Call, error) {
	if v.Kind != jsontree.Object {
		return record.Call{}, callError("a call is a JSON " + v.Kind.String() + ", want {name, arguments}")
	}
	name, ok := v.StringOr("name")
	if !ok || name == "" {
		return record.Call{}, callError("the call has no name")
	}
	a := v.Get("arguments")
	if a == nil {
		return record.Call{}, callError("call " + excerpt(name) + " has no arguments")
	}
	var w *workspace
	if b != nil {
		w = b.w
	}
	args, fromString, err := objectArguments(w, a)
	if err != nil {
		return record.Call{}, callError("call " + excerpt(name) + ": " + err.Error())
	}
	if fromString && b != nil {
		b.repair("string_arguments")
	}
	return record.Call{Name: name, Arguments: args}, nil
}

// messages2 returns an empty list for an xlam record's two messages: the
// record's room for them when it has it.
func (b *builder) messages2() []record.Message {
	if b.w != nil && b.w.xlam != nil {
		return b.w.xlam.msgs[:0:2]
	}
	return make([]record.Message, 0, 2)
}
