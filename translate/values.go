package translate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsontree"
)

// A schema is one JSON Schema object of a tool's parameters, decoded
// loosely; nil means "unknown", which locks nothing by itself.
type schema = map[string]any

// toolSchema decodes a tool's parameters; a malformed schema counts as
// unknown (the verify stage reports those).
func toolSchema(params json.RawMessage) schema {
	var s schema
	if json.Unmarshal(params, &s) != nil {
		return nil
	}
	return s
}

func property(s schema, key string) schema {
	if props, ok := s["properties"].(map[string]any); ok {
		if p, ok := props[key].(map[string]any); ok {
			return p
		}
	}
	if p, ok := s["additionalProperties"].(map[string]any); ok {
		return p
	}
	return nil
}

func item(s schema, i int) schema {
	if tuple, ok := s["prefixItems"].([]any); ok && i < len(tuple) {
		p, _ := tuple[i].(map[string]any)
		return p
	}
	switch it := s["items"].(type) {
	case map[string]any:
		return it
	case []any: // draft-04 tuple form
		if i < len(it) {
			p, _ := it[i].(map[string]any)
			return p
		}
	}
	return nil
}

// A leafClass says what a translation may do to a string value.
type leafClass int

const (
	leafFree   leafClass = iota // free text: may be translated
	leafLocked                  // identifier, code, number, date, URL, e-mail…: must stay as it is
	leafEnum                    // a member of the schema's enum: must stay as it is
	leafJSON                    // JSON text (an object or array): its keys stay, its strings are classified in turn
)

// classify decides whether the string v, found where the schema s applies,
// is free text. The rules follow seed 002 §3.4 ("translate arguments only
// when reasonable"): enum members, values with a declared format, pattern or
// const, or a non-string type are locked by the schema; a string the schema
// does not lock that holds a JSON object or array is JSON text, walked as
// JSON with the schema unknown (see walker.compareJSONText and
// convertedStrings); otherwise the value itself decides (see lockedText).
func classify(s schema, v string) leafClass {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		if slices.Contains(enum, any(v)) {
			return leafEnum
		}
		// Not a member: a word, converted in context like free text (a
		// teacher must still copy it, see walker.compare).
		return leafFree
	}
	if schemaLocks(s) {
		return leafLocked
	}
	if isStructured(v) {
		return leafJSON
	}
	if lockedText(v) {
		return leafLocked
	}
	return leafFree
}

// schemaLocks reports whether the schema s locks a string value: a declared
// format, pattern or const, or a type that is not a string.
func schemaLocks(s schema) bool {
	if f, ok := s["format"].(string); ok && f != "" {
		return true
	}
	if p, ok := s["pattern"].(string); ok && p != "" {
		return true
	}
	if _, ok := s["const"]; ok {
		return true
	}
	return !allowsString(s["type"])
}

// allowsString reports whether a schema "type" admits strings; a missing or
// unusual type admits them.
func allowsString(t any) bool {
	switch t := t.(type) {
	case string:
		switch t {
		case "integer", "number", "boolean", "null", "int", "float", "bool":
			return false
		}
		return true
	case []any:
		if len(t) == 0 {
			return true
		}
		for _, x := range t {
			if s, ok := x.(string); ok && allowsString(s) {
				return true
			}
		}
		return false
	default:
		return true
	}
}

// lockedText reports whether v looks like something a translation must not
// touch even without a schema saying so: blank text, text without letters
// (numbers, dates, times, prices, phone numbers), URLs, e-mail addresses,
// and text made only of code-like tokens (USD, AAPL, en, snake_case,
// camelCase, file.txt, v2, a/b). Words and phrases — also single plain
// words like "chicken" or "Paris" — are free text, left to the teacher's
// judgement and the equivalence check.
func lockedText(v string) bool {
	t := strings.TrimSpace(v)
	if t == "" || !strings.ContainsFunc(t, unicode.IsLetter) {
		return true
	}
	if isAddress(t) {
		return true
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return true
	}
	for tok := range strings.FieldsSeq(t) {
		if !codeToken(tok) {
			return false
		}
	}
	return true
}

// isAddress reports whether t is a URL or an e-mail address.
func isAddress(t string) bool {
	return strings.Contains(t, "://") || strings.HasPrefix(strings.ToLower(t), "www.") || isEmail(t)
}

// codeToken reports whether one white-space free token reads as a code or
// identifier rather than a word.
func codeToken(tok string) bool {
	tok = strings.TrimRight(tok, ".,!?;:")
	if tok == "" || !strings.ContainsFunc(tok, unicode.IsLetter) {
		return true
	}
	ascii := true
	for _, r := range tok {
		if r > unicode.MaxASCII {
			ascii = false
			break
		}
	}
	if !ascii { // Chinese, accented words…: language, not code
		return false
	}
	if strings.ContainsAny(tok, "0123456789_/\\@#:=&?%{}[]<>|~^$*+()'\";`.") {
		return true
	}
	switch strings.ToLower(tok) {
	case "true", "false", "null", "none", "nil":
		return true
	}
	letters, upper := 0, 0
	for i, r := range tok {
		if unicode.IsLetter(r) {
			letters++
		}
		if unicode.IsUpper(r) {
			upper++
			if i > 0 && !strings.ContainsRune("-'", rune(tok[i-1])) {
				return true // camelCase, iPhone, McDonald-style inner capitals
			}
		}
	}
	if letters <= 2 { // en, fr, km, kg
		return true
	}
	return upper == letters // USD, NYC, AAPL
}

func isEmail(t string) bool {
	at := strings.IndexByte(t, '@')
	if at <= 0 || strings.ContainsAny(t, " \t\n") || strings.Count(t, "@") != 1 {
		return false
	}
	dot := strings.LastIndexByte(t, '.')
	return dot > at+1 && dot < len(t)-1
}

// A problem is one way an answer breaks the locked structure.
type problem struct {
	reason string // one of the Reason* codes
	path   string // where, in the request's naming: conversations[2].tool_calls[0].arguments.city
	detail string // what, for people and for the teacher's re-ask
}

func (p problem) String() string {
	if p.path == "" {
		return p.detail
	}
	return p.path + ": " + p.detail
}

// A freeLeaf is a free-text string of the source and its counterpart in the
// answer.
type freeLeaf struct {
	path      string
	orig, ans *jsontree.Value
}

// A walker compares a source JSON value with its translation under the
// locking rules, collecting problems and the free-text pairs.
type walker struct {
	keyReason string // reason for added or missing object keys
	problems  []problem
	free      []freeLeaf
	locked    []*jsontree.Value // the source's locked strings (not enum or const members), copied exactly
	kept      []string          // the source's enum and const members, copied exactly
	nested    []nested          // strings holding JSON text, compared as structure
}

// A nested is a string value of the source whose text is a JSON object or
// array, compared with the answer's string as JSON: its keys must stay, its
// values are locked or free as arguments' values are (schema unknown).
type nested struct {
	orig *jsontree.Value // the source's string
	src  []byte          // its text, which w's spans point into
	w    walker
}

// allFree returns the free-text pairs of w and of the JSON text in its
// strings.
func (w *walker) allFree() []freeLeaf {
	free := w.free
	for i := range w.nested {
		free = append(slices.Clip(free), w.nested[i].w.allFree()...)
	}
	return free
}

// allLocked returns the locked strings of w and of the JSON text in its
// strings.
func (w *walker) allLocked() []*jsontree.Value {
	locked := w.locked
	for i := range w.nested {
		locked = append(slices.Clip(locked), w.nested[i].w.allLocked()...)
	}
	return locked
}

func (w *walker) add(reason, path, format string, args ...any) {
	w.problems = append(w.problems, problem{reason: reason, path: path, detail: fmt.Sprintf(format, args...)})
}

// compare walks orig and ans together; s is the schema applying at this
// point (nil when unknown).
func (w *walker) compare(path string, orig, ans *jsontree.Value, s schema) {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		if !jsontree.Equal(orig, ans) {
			w.add(ReasonEnumChanged, path, "enum value %s was changed to %s; enum members must be copied exactly", show(orig), show(ans))
		} else if !fixed(s, orig) {
			w.locked = append(w.locked, orig)
		} else if orig.Kind == jsontree.String {
			w.kept = append(w.kept, orig.Str)
		}
		return
	}
	if _, ok := s["const"]; ok {
		if !jsontree.Equal(orig, ans) {
			w.add(ReasonValueChanged, path, "%s was changed to %s; the parameter allows only this value, copy it exactly", show(orig), show(ans))
		} else if !fixed(s, orig) {
			w.locked = append(w.locked, orig)
		} else if orig.Kind == jsontree.String {
			w.kept = append(w.kept, orig.Str)
		}
		return
	}
	if orig.Kind != ans.Kind && !(isBool(orig.Kind) && isBool(ans.Kind)) {
		w.add(ReasonValueChanged, path, "a %s became a %s; keep the value's type", orig.Kind, ans.Kind)
		return
	}
	switch orig.Kind {
	case jsontree.Object:
		seen := make(map[string]bool, len(ans.Elems))
		for _, m := range ans.Elems {
			if seen[m.Key] {
				w.add(w.keyReason, path, "key %q appears twice", m.Key)
			}
			seen[m.Key] = true
		}
		for i := range orig.Elems {
			k := orig.Elems[i].Key
			a := ans.Get(k)
			if a == nil {
				w.add(w.keyReason, joinKey(path, k), "key %q is missing; keep every key exactly as given", k)
				continue
			}
			w.compare(joinKey(path, k), &orig.Elems[i].Val, a, property(s, k))
		}
		for _, m := range ans.Elems {
			if k := m.Key; orig.Get(k) == nil {
				w.add(w.keyReason, joinKey(path, k), "unexpected key %q; keys must not be translated, renamed or added", k)
			}
		}
	case jsontree.Array:
		if len(orig.Elems) != len(ans.Elems) {
			w.add(ReasonValueChanged, path, "list has %d items, want %d", len(ans.Elems), len(orig.Elems))
			return
		}
		for i := range orig.Elems {
			w.compare(path+"["+strconv.Itoa(i)+"]", &orig.Elems[i].Val, &ans.Elems[i].Val, item(s, i))
		}
	case jsontree.String:
		switch class := classify(s, orig.Str); {
		case class == leafJSON:
			w.compareJSONText(path, orig, ans)
		case class == leafFree:
			w.free = append(w.free, freeLeaf{path: path, orig: orig, ans: ans})
		case orig.Str != ans.Str:
			w.add(ReasonValueChanged, path, "%s was changed to %s; identifiers, codes, dates, URLs and e-mail addresses must be copied exactly", show(orig), show(ans))
		default:
			w.locked = append(w.locked, orig)
		}
	default:
		if !jsontree.Equal(orig, ans) {
			w.add(ReasonValueChanged, path, "%s was changed to %s; numbers and booleans must be copied exactly", show(orig), show(ans))
		}
	}
}

// compareJSONText compares a source string holding a JSON object or array
// (an argument like "{\"note\": \"bring slides\", \"code\": \"AX9\"}"),
// where the schema does not lock the string, with the answer's string as
// JSON by the rules of compare (the inner schema unknown), so the keys and
// locked values inside cannot change unseen and the free text inside is
// translated and judged like any other. The translated record keeps the
// source's JSON text with only its strings rewritten (spliceLeaves).
func (w *walker) compareJSONText(path string, orig, ans *jsontree.Value) {
	src := []byte(orig.Str)
	o, _ := parseTree(src) // isStructured checked it
	a, err := parseTree([]byte(ans.Str))
	if err != nil || a.Kind != o.Kind {
		w.add(ReasonValueChanged, path, "%s is JSON text and became %s; keep it JSON with the same keys, translating only its free text", show(orig), show(ans))
		return
	}
	n := nested{orig: orig, src: src, w: walker{keyReason: w.keyReason}}
	n.w.compare(path, o, a, nil)
	w.problems = append(w.problems, n.w.problems...)
	w.nested = append(w.nested, n)
}

func isBool(k jsontree.Kind) bool { return k == jsontree.True || k == jsontree.False }

// fixed reports whether n is one of the values the schema s names as the
// only ones allowed at its point (enum, const). Such values keep their
// bytes in both modes, as the tool definitions that list them do; a string
// at an enum or const position that is not a member (意大利 where the enum
// lists "Italian") is converted. A value that is not a string is fixed at
// such a position.
func fixed(s schema, n *jsontree.Value) bool {
	enum, isEnum := s["enum"].([]any)
	isEnum = isEnum && len(enum) > 0
	c, isConst := s["const"]
	switch {
	case !isEnum && !isConst:
		return false
	case n.Kind != jsontree.String:
		return true
	case isEnum:
		return slices.Contains(enum, any(n.Str))
	default:
		return c == any(n.Str)
	}
}

// convertedStrings calls fn for every string of n that the stage converts
// with s2twp: every string but those fixed by the schema (see fixed). class
// says what the string is (see classify): leafLocked for a locked value,
// which a teacher must copy unchanged before it is converted; leafFree for
// free text; leafJSON for JSON text, which is not converted as a whole: fn
// walks its JSON in turn (parseTree, then convertedStrings with the schema
// unknown, as walker.compareJSONText compares it), so its keys keep their
// bytes and only its strings change.
func convertedStrings(path string, n *jsontree.Value, s schema, fn func(path string, n *jsontree.Value, class leafClass)) {
	if fixed(s, n) {
		return
	}
	switch n.Kind {
	case jsontree.Object:
		for i := range n.Elems {
			k := n.Elems[i].Key
			convertedStrings(joinKey(path, k), &n.Elems[i].Val, property(s, k), fn)
		}
	case jsontree.Array:
		for i := range n.Elems {
			convertedStrings(path+"["+strconv.Itoa(i)+"]", &n.Elems[i].Val, item(s, i), fn)
		}
	case jsontree.String:
		fn(path, n, classify(s, n.Str))
	}
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// show renders a node briefly for messages.
func show(n *jsontree.Value) string {
	switch n.Kind {
	case jsontree.String:
		return strconv.Quote(clip.Runes(n.Str, 60))
	case jsontree.Object:
		return "an object"
	case jsontree.Array:
		return "a list"
	default: // a number's literal, true, false or null
		return clip.Runes(string(jsontree.AppendCompact(nil, n)), 60)
	}
}
