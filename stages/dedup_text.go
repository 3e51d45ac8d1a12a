package stages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
// they are. It is what near.Words reads, so JSON types go (a string "4"
// and the number 4 are both the word 4) and case goes with the
// normalisation; callKey keeps both.
func callText(c record.Call) string { return writeCall(c, false) }

// callKey is a call as the exact comparison sees it: its name and its
// arguments with keys sorted at every level, as in callText, but with JSON
// types and case kept. Every value is written with its type: a string as
// s<length>:<text>, a number as n<literal> (as written: 4 and 4.0
// differ), t, f and z for true, false and null, objects and arrays between
// { } and [ ]; arguments that are not JSON are r<length>:<bytes>. So two
// calls have the same key only when they name the same tool with the same
// JSON values, argument order aside: {"people":"4"} is not {"people":4},
// {"currency":"usd"} is not {"currency":"USD"}.
func callKey(c record.Call) string { return writeCall(c, true) }

func writeCall(c record.Call, typed bool) string {
	var sb strings.Builder
	sb.Grow(len(c.Name) + len(c.Arguments) + 8)
	writeName(&sb, c.Name, typed)
	p := jsonText{data: c.Arguments, typed: typed}
	if p.value(&sb) && p.end() {
		return sb.String()
	}
	// Not JSON as far as the fast reader goes (it knows no deep nesting):
	// encoding/json decides.
	return writeCallSlow(c, typed)
}

func writeName(sb *strings.Builder, name string, typed bool) {
	if typed {
		writeTypedString(sb, 's', name)
		return
	}
	sb.WriteString(name)
}

// writeTypedString writes ` <tag><length>:<s>`.
func writeTypedString(sb *strings.Builder, tag byte, s string) {
	sb.WriteByte(' ')
	sb.WriteByte(tag)
	sb.WriteString(strconv.Itoa(len(s)))
	sb.WriteByte(':')
	sb.WriteString(s)
}

// callTextSlow is callText through encoding/json.
func callTextSlow(c record.Call) string { return writeCallSlow(c, false) }

// callKeySlow is callKey through encoding/json.
func callKeySlow(c record.Call) string { return writeCallSlow(c, true) }

func writeCallSlow(c record.Call, typed bool) string {
	var sb strings.Builder
	writeName(&sb, c.Name, typed)
	dec := json.NewDecoder(bytes.NewReader(c.Arguments))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		if typed {
			writeTypedString(&sb, 'r', string(c.Arguments))
			return sb.String()
		}
		sb.WriteByte(' ')
		sb.Write(c.Arguments)
		return sb.String()
	}
	writeSorted(&sb, v, typed)
	return sb.String()
}

// callsKey hashes the calls of r by their callKey, turn by turn, the calls
// of one turn in sorted order (parallel calls in another order are the same
// calls).
func callsKey(r *record.Record) uint64 {
	var hs []uint64
	var keys []string
	for _, m := range r.Messages {
		if m.Role != record.RoleAssistant || len(m.Calls) == 0 {
			continue
		}
		keys = keys[:0]
		for _, c := range m.Calls {
			keys = append(keys, callKey(c))
		}
		slices.Sort(keys)
		for _, k := range keys {
			hs = append(hs, fnvMix(0, k))
		}
		hs = append(hs, near.Boundary)
	}
	return near.SumOf(hs)
}

// fnvMix is FNV-1a of s (fnvAdd) from an offset basis changed by seed,
// then near.Mix: a hash fixed across processes and machines.
func fnvMix(seed uint64, s string) uint64 {
	const offset = 14695981039346656037 // FNV-64a's
	return near.Mix(fnvAdd(offset^seed, s))
}

// jsonText writes a JSON value as writeCall does, without building it: a
// small reader for the compact JSON of call arguments. It reports false
// for anything it does not read exactly as encoding/json would (invalid
// JSON, nesting deeper than 64), and the caller falls back. typed writes
// callKey's form, else callText's.
type jsonText struct {
	data  []byte
	i     int
	depth int
	typed bool
}

func (p *jsonText) space() {
	for p.i < len(p.data) && (p.data[p.i] == ' ' || p.data[p.i] == '\t' || p.data[p.i] == '\n' || p.data[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonText) end() bool { p.space(); return p.i == len(p.data) }

func (p *jsonText) value(sb *strings.Builder) bool {
	p.space()
	if p.i >= len(p.data) {
		return false
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(sb)
	case c == '[':
		return p.array(sb)
	case c == '"':
		s, ok := p.str()
		if ok {
			writeString(sb, s, p.typed)
		}
		return ok
	case c == 't' || c == 'f' || c == 'n':
		for _, w := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.data[p.i:min(len(p.data), p.i+5)]), w) {
				p.i += len(w)
				writeLiteral(sb, w, p.typed)
				return true
			}
		}
		return false
	default:
		start := p.i
		for p.i < len(p.data) && strings.IndexByte("+-0123456789.eE", p.data[p.i]) >= 0 {
			p.i++
		}
		num := p.data[start:p.i]
		if len(num) == 0 || !json.Valid(num) {
			return false
		}
		writeNumber(sb, string(num), p.typed)
		return true
	}
}

// writeString, writeLiteral (true, false, null) and writeNumber write one
// JSON value as callText (` value`) or callKey (typed) reads it.
func writeString(sb *strings.Builder, s string, typed bool) {
	if typed {
		writeTypedString(sb, 's', s)
		return
	}
	sb.WriteByte(' ')
	sb.WriteString(s)
}

func writeLiteral(sb *strings.Builder, w string, typed bool) {
	sb.WriteByte(' ')
	switch {
	case !typed:
		sb.WriteString(w)
	case w == "null":
		sb.WriteByte('z')
	default:
		sb.WriteByte(w[0]) // t, f
	}
}

func writeNumber(sb *strings.Builder, num string, typed bool) {
	sb.WriteByte(' ')
	if typed {
		sb.WriteByte('n')
	}
	sb.WriteString(num)
}

// writeBracket writes the brackets of an object or array in callKey's
// form; callText writes none.
func writeBracket(sb *strings.Builder, b byte, typed bool) {
	if typed {
		sb.WriteByte(' ')
		sb.WriteByte(b)
	}
}

// str reads a string; only strings with escapes go through encoding/json.
func (p *jsonText) str() (string, bool) {
	start := p.i
	p.i++
	escaped := false
	for p.i < len(p.data) {
		switch c := p.data[p.i]; {
		case c == '\\':
			escaped = true
			p.i += 2
			continue
		case c == '"':
			p.i++
			raw := p.data[start:p.i]
			if !escaped {
				if !utf8.Valid(raw) {
					return "", false // encoding/json would replace bad bytes
				}
				return string(raw[1 : len(raw)-1]), true
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *jsonText) array(sb *strings.Builder) bool {
	if p.depth++; p.depth > 64 {
		return false
	}
	defer func() { p.depth-- }()
	p.i++
	p.space()
	writeBracket(sb, '[', p.typed)
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		writeBracket(sb, ']', p.typed)
		return true
	}
	for {
		if !p.value(sb) {
			return false
		}
		p.space()
		if p.i >= len(p.data) {
			return false
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			writeBracket(sb, ']', p.typed)
			return true
		default:
			return false
		}
	}
}

func (p *jsonText) object(sb *strings.Builder) bool {
	if p.depth++; p.depth > 64 {
		return false
	}
	defer func() { p.depth-- }()
	p.i++
	type member struct{ key, text string }
	var members []member
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		writeBracket(sb, '{', p.typed)
		writeBracket(sb, '}', p.typed)
		return true
	}
	for {
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return false
		}
		k, ok := p.str()
		if !ok {
			return false
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return false
		}
		p.i++
		var v strings.Builder
		if !p.value(&v) {
			return false
		}
		// A repeated key: encoding/json keeps the last value.
		if j := slices.IndexFunc(members, func(m member) bool { return m.key == k }); j >= 0 {
			members = slices.Delete(members, j, j+1)
		}
		members = append(members, member{k, v.String()})
		p.space()
		if p.i >= len(p.data) {
			return false
		}
		if p.data[p.i] == ',' {
			p.i++
			continue
		}
		if p.data[p.i] != '}' {
			return false
		}
		p.i++
		break
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	writeBracket(sb, '{', p.typed)
	for _, m := range members {
		writeString(sb, m.key, p.typed)
		sb.WriteString(m.text)
	}
	writeBracket(sb, '}', p.typed)
	return true
}

// writeSorted writes a value decoded by encoding/json as jsonText does.
func writeSorted(sb *strings.Builder, v any, typed bool) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		writeBracket(sb, '{', typed)
		for _, k := range keys {
			writeString(sb, k, typed)
			writeSorted(sb, v[k], typed)
		}
		writeBracket(sb, '}', typed)
	case []any:
		writeBracket(sb, '[', typed)
		for _, e := range v {
			writeSorted(sb, e, typed)
		}
		writeBracket(sb, ']', typed)
	case string:
		writeString(sb, v, typed)
	case json.Number:
		writeNumber(sb, v.String(), typed)
	case bool:
		writeLiteral(sb, strconv.FormatBool(v), typed)
	case nil:
		writeLiteral(sb, "null", typed)
	}
}
