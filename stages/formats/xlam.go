package formats

import (
	"github.com/augmentdata/augment/stages/record"
)

// parseXLAM reads xlam-function-calling-60k's {"id", "query", "answers",
// "tools"}, where answers and tools are JSON texts held in strings (actual
// arrays are accepted too). The record is one user turn and, when answers
// holds calls, one assistant turn with all of them; xlam has no results.
func parseXLAM(b *builder, row *jvalue) error {
	switch id := row.get("id"); {
	case id == nil || id.kind == jNull:
	case id.kind == jString || id.kind == jNumber:
		b.rec.SetTag("xlam_id", id.str)
	default:
		return reject("xlam_bad_field", "id is a JSON %s, want a number or string", id.kind)
	}
	query, ok := row.stringOr("query")
	if !ok || !row.has("query") {
		return reject("xlam_bad_field", "the row has no query string")
	}
	tools, err := embeddedJSON(row, "tools", "xlam")
	if err != nil {
		return err
	}
	if b.rec.Tools, err = toolsFromArray(&tools, "tools"); err != nil {
		return err
	}
	answers, err := embeddedJSON(row, "answers", "xlam")
	if err != nil {
		return err
	}
	if answers.kind != jArray {
		return reject("xlam_bad_answers", "answers is a JSON %s, want an array of calls", answers.kind)
	}
	b.rec.Messages = make([]record.Message, 0, 2)
	b.add(record.Message{Role: record.RoleUser, Content: query})
	if len(answers.elems) == 0 {
		return nil
	}
	m := record.Message{Role: record.RoleAssistant}
	for i := range answers.elems {
		c, err := jsonCall(b, &answers.elems[i].val)
		if err != nil {
			return reject("xlam_bad_answers", "call %d: %v", i, err)
		}
		m.Calls = append(m.Calls, c)
	}
	b.add(m)
	return nil
}

// embeddedJSON returns the member key decoded: a string holding JSON is
// decoded, an array or object is taken as it is.
func embeddedJSON(row *jvalue, key, format string) (jvalue, error) {
	v := row.get(key)
	switch {
	case v == nil || v.kind == jNull:
		return jvalue{}, reject(format+"_bad_field", "the row has no %s", key)
	case v.kind == jString:
		d, err := parseJSONString(v.str)
		if err != nil {
			return jvalue{}, jsonReject("bad_json", key, []byte(v.str), err)
		}
		return d, nil
	case v.kind == jArray || v.kind == jObject:
		return *v, nil
	}
	return jvalue{}, reject(format+"_bad_field", "%s is a JSON %s, want JSON text or an array", key, v.kind)
}

type callError string

func (e callError) Error() string { return string(e) }

// jsonCall reads {"name": "…", "arguments": {…}}. Arguments held in a JSON
// string are decoded (repair "string_arguments"); missing arguments are an
// error.
func jsonCall(b *builder, v *jvalue) (record.Call, error) {
	if v.kind != jObject {
		return record.Call{}, callError("a call is a JSON " + v.kind.String() + ", want {name, arguments}")
	}
	name, ok := v.stringOr("name")
	if !ok || name == "" {
		return record.Call{}, callError("the call has no name")
	}
	a := v.get("arguments")
	if a == nil {
		return record.Call{}, callError("call " + excerpt(name) + " has no arguments")
	}
	args, fromString, err := objectArguments(a)
	if err != nil {
		return record.Call{}, callError("call " + excerpt(name) + ": " + err.Error())
	}
	if fromString && b != nil {
		b.repair("string_arguments")
	}
	return record.Call{Name: name, Arguments: args}, nil
}
