package formats

import (
	"strings"

	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/record"
)

const (
	glaiveLeadIn  = "SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -"
	glaiveNoTools = "SYSTEM: You are a helpful assistant, with no access to external functions."
	glaiveEnd     = "<|endoftext|>"
	glaiveCall    = "<functioncall>"
	glaiveAITo    = "AI to="
)

// parseGlaive reads glaive-function-calling-v2's {"system": "…", "chat": "…"}.
func parseGlaive(b *builder, row *jsontree.Value) error {
	sys, err := fieldString(row, "system", "glaive_bad_field")
	if err != nil {
		return err
	}
	chat, err := requiredString(row, "chat", "glaive_bad_field")
	if err != nil {
		return err
	}
	if b.w.rowTools != nil { // read from the row (systemLiteral): sys is empty
		b.rec.Tools = b.w.rowTools
		b.rec.SetTag("system_template", "glaive")
	} else if err := glaiveSystem(b, sys); err != nil {
		return err
	}
	turns, err := splitGlaive(chat, b.w.turns[:0])
	if err != nil {
		return err
	}
	b.w.turns = turns // reused by the next row (parse clears it)
	b.rec.Messages = make([]record.Message, 0, len(turns))
	for i, t := range turns {
		var err error
		switch t.role {
		case record.RoleUser:
			err = glaiveUser(b, t.body, i)
		case record.RoleAssistant:
			err = glaiveAssistant(b, t.body, i)
		default:
			err = glaiveResponse(b, t.body, i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// glaiveSystem takes the tools out of the system text. The two fixed
// lead-ins are dropped (their wording only fits glaive's own call syntax);
// any text after the tool objects is kept. A system text without a known
// lead-in is kept without its "SYSTEM:" label.
func glaiveSystem(b *builder, sys string) error {
	switch {
	case strings.HasPrefix(sys, glaiveLeadIn):
		text := sys[len(glaiveLeadIn):]
		p := b.parser(text)
		for {
			p.SkipSpace()
			if p.Pos >= len(p.Data) || p.Data[p.Pos] != '{' {
				break
			}
			v, err := p.Value()
			if err != nil {
				return jsonReject("glaive_bad_tool_json", "tool definition in the system text", p.Data, err)
			}
			t, err := normalizeTool(b.w, &v, len(b.rec.Tools))
			if err != nil {
				return err
			}
			b.rec.Tools = append(b.rec.Tools, t)
		}
		rest := strings.TrimSpace(text[p.Pos:])
		if rest != "" && strings.ContainsRune(",[]{}", rune(rest[0])) {
			return reject("glaive_bad_tool_json", "tool definitions are followed by %s", excerpt(rest))
		}
		b.rec.System = rest
		b.rec.SetTag("system_template", "glaive")
	case strings.HasPrefix(sys, glaiveNoTools):
		b.rec.System = strings.TrimSpace(sys[len(glaiveNoTools):])
		b.rec.SetTag("system_template", "glaive_no_tools")
	default:
		t := strings.TrimSpace(sys)
		t = strings.TrimPrefix(t, "SYSTEM:")
		b.rec.System = strings.TrimSpace(t)
	}
	return nil
}

type glaiveTurn struct {
	role string
	body string // trimmed text after the marker
}

var glaiveMarkers = [...]struct{ text, role string }{
	{"USER:", record.RoleUser},
	{"ASSISTANT:", record.RoleAssistant},
	{"FUNCTION RESPONSE:", record.RoleTool},
}

// glaiveMarkerStart marks the first bytes of the markers.
var glaiveMarkerStart = func() (t [256]bool) {
	for _, m := range glaiveMarkers {
		t[m.text[0]] = true
	}
	return t
}()

// splitGlaive cuts a chat at the turn markers found at the start of a line.
// A turn normally ends with a blank line ("\n\n" or "\n\n\n"); a marker right
// after a single newline is the known damage where the source's "AI:"
// became a marker inside a turn, and is rejected.
// The turns are appended to turns (a buffer to reuse, or nil).
func splitGlaive(chat string, turns []glaiveTurn) ([]glaiveTurn, error) {
	bodyAt := -1
	for line := 0; line < len(chat); {
		role, n := "", 0
		if glaiveMarkerStart[chat[line]] { // most lines start otherwise, or are blank
			for _, m := range glaiveMarkers {
				if strings.HasPrefix(chat[line:], m.text) {
					role, n = m.role, len(m.text)
					break
				}
			}
		}
		if n > 0 {
			if bodyAt < 0 {
				if strings.TrimSpace(chat[:line]) != "" {
					return nil, reject("glaive_text_before_first_turn", "the chat starts with %s before any turn marker", excerpt(chat[:line]))
				}
			} else {
				// A blank line before: "\n\n", or "\n\r\n" in a chat with
				// CRLF line ends.
				if line < 2 || chat[line-2] != '\n' && (chat[line-2] != '\r' || line < 3 || chat[line-3] != '\n') {
					return nil, reject("glaive_stray_turn_marker", "byte %d: marker %s inside turn %d, not after a blank line: %s",
						line, chat[line:line+n], len(turns)-1, excerpt(chat[max(bodyAt, line-40):min(len(chat), line+40)]))
				}
				turns[len(turns)-1].body = strings.TrimSpace(chat[bodyAt:line])
			}
			turns = append(turns, glaiveTurn{role: role})
			bodyAt = line + n
		}
		nl := strings.IndexByte(chat[line:], '\n')
		if nl < 0 {
			break
		}
		line += nl + 1
	}
	if len(turns) == 0 {
		return nil, reject("glaive_empty_chat", "the chat holds no turn marker: %s", excerpt(chat))
	}
	turns[len(turns)-1].body = strings.TrimSpace(chat[bodyAt:])
	return turns, nil
}

// cutEnd removes an <|endoftext|> that ends a user or function-response
// turn, where it does not belong (repair "stray_endoftext"); one anywhere
// else in the turn is rejected.
func cutEnd(b *builder, body string, turn int) (string, error) {
	if s, ok := strings.CutSuffix(body, glaiveEnd); ok {
		body = strings.TrimSpace(s)
		b.repair("stray_endoftext")
	}
	if strings.Contains(body, glaiveEnd) {
		return "", reject("glaive_stray_endoftext", "turn %d holds %s inside its text", turn, glaiveEnd)
	}
	return body, nil
}

// glaiveUser adds a user turn; a user turn right after another is merged
// into it, separated by a blank line (repair "merged_user_turns").
func glaiveUser(b *builder, body string, turn int) error {
	body, err := cutEnd(b, body, turn)
	if err != nil {
		return err
	}
	if prev := b.last(); prev != nil && prev.Role == record.RoleUser {
		prev.Content = joinTrimmed(prev.Content, body)
		b.repair("merged_user_turns")
		return nil
	}
	b.add(record.Message{Role: record.RoleUser, Content: body})
	return nil
}

// glaiveAssistant adds an assistant turn, which must end with <|endoftext|>
// (a turn without it was cut off). A prose turn followed by a call turn
// becomes one turn with text and call (repair "merged_assistant_turns");
// any other pair of assistant turns is rejected: the known cases are a
// turn split by a stray marker and two competing answers.
func glaiveAssistant(b *builder, body string, turn int) error {
	body, ok := strings.CutSuffix(body, glaiveEnd)
	if !ok {
		return reject("glaive_unterminated_assistant_turn", "turn %d does not end with %s (cut off?): %s", turn, glaiveEnd, excerpt(tail(body)))
	}
	body = strings.TrimSpace(body)
	if strings.Contains(body, glaiveEnd) {
		return reject("glaive_stray_endoftext", "turn %d holds %s inside its text", turn, glaiveEnd)
	}
	m := record.Message{Role: record.RoleAssistant, Content: body}
	if i := strings.Index(body, glaiveCall); i >= 0 {
		text := body[i+len(glaiveCall):]
		if strings.Contains(text, glaiveCall) {
			return reject("glaive_multiple_calls", "turn %d holds more than one %s", turn, glaiveCall)
		}
		call, err := parseGlaiveCall(b, text, turn)
		if err != nil {
			return err
		}
		m.Content, m.Calls = strings.TrimSpace(body[:i]), []record.Call{call}
		if m.Content != "" {
			b.repair("text_before_call")
		}
	} else if text, call, ok := aiToCall(body); ok {
		m.Content, m.Calls = text, []record.Call{call}
		b.repair("ai_to_call_syntax")
	}
	if prev := b.last(); prev != nil && prev.Role == record.RoleAssistant {
		if len(prev.Calls) > 0 || len(m.Calls) == 0 {
			return reject("glaive_consecutive_assistant_turns", "turn %d follows another assistant turn: %s", turn, excerpt(body))
		}
		prev.Content = joinTrimmed(prev.Content, m.Content)
		prev.Calls = m.Calls
		b.repair("merged_assistant_turns")
		return nil
	}
	b.add(m)
	return nil
}

func tail(s string) string {
	if len(s) > 60 {
		i := len(s) - 60
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		return s[i:]
	}
	return s
}

// glaiveResponse adds a FUNCTION RESPONSE turn as the result of the call
// just before it. A response that starts like JSON but ends inside it was
// cut off and is rejected.
func glaiveResponse(b *builder, body string, turn int) error {
	body, err := cutEnd(b, body, turn)
	if err != nil {
		return err
	}
	prev := b.last()
	if prev == nil || prev.Role != record.RoleAssistant || len(prev.Calls) == 0 {
		return reject("glaive_response_without_call", "turn %d is a FUNCTION RESPONSE that follows no call", turn)
	}
	content := body
	if s, ok := b.flatText(body); ok {
		content = s
	} else if body != "" {
		v, err := b.parse(body)
		switch {
		case err == nil:
			content = jsontree.CompactString(&v)
		case (body[0] == '{' || body[0] == '[') && jsontree.IsEOF(err):
			return reject("glaive_truncated_response", "turn %d: the JSON response ends early: %s", turn, excerpt(tail(body)))
		}
	}
	b.add(record.Message{Role: record.RoleTool, Results: []record.Result{{Name: prev.Calls[0].Name, Content: content}}})
	return nil
}

// parseGlaiveCall reads the text after <functioncall>:
// {"name": "f", "arguments": '<JSON object>'}. The single-quoted span is
// read as JSON, so apostrophes and newlines inside it are fine. Repairs:
// arguments given as a bare object ("bare_object_arguments") or as a JSON
// string ("string_arguments"); \' inside the quoted JSON
// ("escaped_apostrophe"); the key "parameters" for "arguments"
// ("parameters_key"); no arguments at all ("missing_arguments", read as {});
// extra closing braces after the call ("extra_closing_brace").
func parseGlaiveCall(b *builder, text string, turn int) (record.Call, error) {
	p := b.parser(text)
	truncated := func() error {
		return reject("glaive_truncated_call", "turn %d: the call ends early: %s", turn, excerpt(tail(strings.TrimSpace(text))))
	}
	bad := func(what string) error {
		return reject("glaive_bad_call", "turn %d: %s at byte %d of %s", turn, what, p.Pos, excerpt(strings.TrimSpace(text)))
	}
	valueErr := func(err error, quoted bool) error {
		off := p.Pos
		if je, ok := err.(*jsontree.Error); ok {
			off = je.Off
		}
		rest := string(p.Data[min(off, len(p.Data)):])
		switch {
		case jsontree.IsEOF(err):
			return truncated()
		case strings.HasPrefix(rest, "Infinity") || strings.HasPrefix(rest, "NaN"):
			return reject("glaive_arguments_nonfinite", "turn %d: %s is not a JSON number: %s", turn, rest[:min(len(rest), 8)], excerpt(strings.TrimSpace(text)))
		case quoted:
			return jsonReject("glaive_arguments_not_json", turnName(turn)+": quoted arguments", p.Data, err)
		}
		return jsonReject("glaive_bad_call", turnName(turn)+": call", p.Data, err)
	}
	p.SkipSpace()
	if p.Pos >= len(p.Data) {
		return record.Call{}, truncated()
	}
	if p.Data[p.Pos] != '{' {
		return record.Call{}, bad("expected {")
	}
	p.Pos++
	var name string
	var args []byte
	haveName, haveArgs := false, false
	for {
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return record.Call{}, truncated()
		}
		if p.Data[p.Pos] == '}' && !haveName && !haveArgs {
			p.Pos++
			break
		}
		if p.Data[p.Pos] != '"' {
			return record.Call{}, bad("expected a key")
		}
		key, err := p.ReadString()
		if err != nil {
			return record.Call{}, valueErr(err, false)
		}
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return record.Call{}, truncated()
		}
		if p.Data[p.Pos] != ':' {
			return record.Call{}, bad("expected :")
		}
		p.Pos++
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return record.Call{}, truncated()
		}
		quoted := p.Data[p.Pos] == '\''
		argKey := key == "arguments" || key == "parameters"
		var v jsontree.Value
		var flat []byte // the arguments object read without a tree (flatObject)
		if quoted {
			p.Pos++
			p.SingleQuoteEscape = true
			if argKey {
				flat = b.flatObject(&p)
			}
			if flat == nil {
				v, err = p.Value()
			}
			p.SingleQuoteEscape = false
			if err != nil {
				return record.Call{}, valueErr(err, true)
			}
			p.SkipSpace()
			if p.Pos >= len(p.Data) {
				return record.Call{}, truncated()
			}
			if p.Data[p.Pos] != '\'' {
				return record.Call{}, jsonReject("glaive_arguments_not_json", turnName(turn)+": quoted arguments",
					p.Data, &jsontree.Error{Off: p.Pos, Msg: "text after the JSON value inside the quotes"})
			}
			p.Pos++
		} else if argKey && p.Data[p.Pos] == '{' {
			if flat = b.flatObject(&p); flat == nil {
				if v, err = p.Value(); err != nil {
					return record.Call{}, valueErr(err, false)
				}
			}
		} else if v, err = p.Value(); err != nil {
			return record.Call{}, valueErr(err, false)
		}
		switch key {
		case "name":
			if v.Kind != jsontree.String || v.Str == "" {
				return record.Call{}, bad("the name is not a non-empty string")
			}
			name, haveName = v.Str, true
		case "arguments", "parameters":
			if haveArgs {
				return record.Call{}, bad("both arguments and parameters")
			}
			if key == "parameters" {
				b.repair("parameters_key")
			}
			a, fromString := flat, false
			if a == nil {
				var err error
				if a, fromString, err = objectArguments(b.w, &v); err != nil {
					return record.Call{}, reject("glaive_arguments_not_object", "turn %d: %v", turn, err)
				}
			}
			switch {
			case fromString: // '"{…}"' too: glaive's quotes around a JSON string
				b.repair("string_arguments")
			case !quoted && (flat != nil || v.Kind == jsontree.Object):
				b.repair("bare_object_arguments")
			}
			args, haveArgs = a, true
		}
		p.SkipSpace()
		if p.Pos >= len(p.Data) {
			return record.Call{}, truncated()
		}
		if p.Data[p.Pos] == ',' {
			p.Pos++
			continue
		}
		if p.Data[p.Pos] == '}' {
			p.Pos++
			break
		}
		return record.Call{}, bad("expected , or }")
	}
	if rest := strings.TrimSpace(text[p.Pos:]); rest != "" {
		if strings.Trim(rest, "}") != "" {
			return record.Call{}, reject("glaive_text_after_call", "turn %d: %s follows the call", turn, excerpt(rest))
		}
		b.repair("extra_closing_brace")
	}
	if !haveName {
		return record.Call{}, bad("the call has no name")
	}
	if !haveArgs {
		args = []byte("{}")
		b.repair("missing_arguments")
	}
	if p.SawSingleQuote {
		b.repair("escaped_apostrophe")
	}
	return record.Call{Name: name, Arguments: args}, nil
}

// aiToCall reads the other call syntax some glaive turns use,
// "AI to= name: {JSON object}" on its own line at the end of the turn.
// text is what precedes it.
func aiToCall(body string) (text string, call record.Call, ok bool) {
	i := strings.Index(body, glaiveAITo)
	if i < 0 || i > 0 && body[i-1] != '\n' {
		return "", call, false
	}
	rest := body[i+len(glaiveAITo):]
	colon := strings.IndexByte(rest, ':')
	if colon < 0 {
		return "", call, false
	}
	name := strings.TrimSpace(rest[:colon])
	if name == "" || strings.ContainsAny(name, " \t\n{}\"'") {
		return "", call, false
	}
	v, err := jsontree.ParseString(rest[colon+1:])
	if err != nil || v.Kind != jsontree.Object {
		return "", call, false
	}
	return strings.TrimSpace(body[:i]), record.Call{Name: name, Arguments: jsontree.Compact(&v)}, true
}
