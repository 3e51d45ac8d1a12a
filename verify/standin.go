package verify

// Offline stand-ins of the LLM judges: deterministic rules that approximate
// what the judge prompts ask, used as llm.Request.Offline. They are
// deliberately simple; each Checker's Doc says what its stand-in does.

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/record"
)

// A leaf is a string or number argument value found in a call.
type leaf struct {
	raw    string // the string value as written
	s      string // normalised text of the value
	number bool
	param  *schema // the schema of the value, if known
}

// argLeaves lists the string and number values inside a call's arguments
// (booleans and nulls say nothing about where a value came from).
func argLeaves(s *schema, args json.RawMessage) []leaf {
	m, err := decodeArgs(args)
	if err != nil {
		return nil
	}
	var out []leaf
	var walk func(s *schema, v any)
	walk = func(s *schema, v any) {
		switch x := v.(type) {
		case string:
			if t := normText(x); t != "" {
				out = append(out, leaf{raw: x, s: t, param: s})
			}
		case json.Number:
			out = append(out, leaf{s: canonNumber(string(x)), number: true, param: s})
		case []any:
			var is *schema
			if s != nil {
				is = s.items
			}
			for _, e := range x {
				walk(is, e)
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				var ps *schema
				if s != nil {
					ps = s.props[k]
				}
				walk(ps, x[k])
			}
		}
	}
	walk(s, m)
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fromSchema reports whether the value is the parameter's default or one of
// its enum values, i.e. it comes from the tool definition.
func (l leaf) fromSchema() bool {
	if l.param == nil {
		return false
	}
	same := func(v any) bool {
		switch x := v.(type) {
		case string:
			return !l.number && normText(x) == l.s || l.number && canonNumber(strings.TrimSpace(x)) == l.s
		case json.Number:
			return l.number && canonNumber(string(x)) == l.s
		}
		return false
	}
	if l.param.hasDef && same(l.param.def) {
		return true
	}
	return slices.ContainsFunc(l.param.enum, same)
}

// normText lower-cases, width-folds and squashes text for searching.
func normText(s string) string {
	return strings.ToLower(squash(foldWidth(s)))
}

func foldWidth(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= '！' && r <= '～':
			return r - '！' + '!'
		case r == '\u3000':
			return ' '
		}
		return r
	}, s)
}

var numberRE = regexp.MustCompile(`\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?`)

// canonNumber writes a number without sign, thousands separators or
// superfluous zeros, so that "1,200.50" and "1200.5" compare equal.
func canonNumber(s string) string {
	s = strings.TrimLeft(strings.ReplaceAll(s, ",", ""), "+-")
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// numbersIn returns the canonical numbers written in text.
func numbersIn(text string) map[string]bool {
	out := map[string]bool{}
	for _, n := range numberRE.FindAllString(text, -1) {
		out[canonNumber(n)] = true
	}
	return out
}

// evidence is what a call turn may draw its values from: the system prompt,
// the tool definitions, and every turn before it (texts, earlier calls,
// results), normalised for searching.
type evidence struct {
	text    string
	numbers map[string]bool
}

func evidenceBefore(r *record.Record, i int) evidence {
	var b strings.Builder
	b.WriteString(r.System)
	for _, t := range r.Tools {
		b.WriteString("\n")
		b.WriteString(t.Name)
		b.WriteString(" ")
		b.WriteString(t.Description)
		b.Write(t.Parameters)
	}
	b.WriteString("\n")
	b.WriteString(renderDialogue(r, 0, i))
	text := normText(b.String())
	return evidence{text: text, numbers: numbersIn(text)}
}

var (
	// codeRE matches short upper-case codes (AAPL, USD, FR) that a model
	// derives from the names the user gave.
	codeRE = regexp.MustCompile(`^[A-Z]{2,5}$`)
	// numericRE matches dates, times and numbers written as text
	// ("2024-11-22", "10:00").
	numericRE = regexp.MustCompile(`^[\d\-/:.,T ]*\d[\d\-/:.,T ]*$`)
)

// where reports how a value relates to the evidence: 0 found, 1 a near miss
// (a small edit distance from some text, but not found), 2 absent. A number
// is also found as a percentage (0.15 for "15%") or the reverse; a date or
// time written as text is found when each of its numbers is.
func (e evidence) where(l leaf) int {
	if l.number {
		f, err := strconv.ParseFloat(l.s, 64)
		if e.numbers[l.s] || err == nil && (e.numbers[canonNumber(strconv.FormatFloat(f*100, 'f', -1, 64))] ||
			e.numbers[canonNumber(strconv.FormatFloat(f/100, 'f', -1, 64))]) {
			return 0
		}
		return 2
	}
	if strings.Contains(e.text, l.s) || codeRE.MatchString(l.raw) {
		return 0
	}
	if numericRE.MatchString(l.raw) {
		for n := range numbersIn(l.raw) {
			if n != "0" && !e.numbers[n] {
				return 2
			}
		}
		return 0
	}
	if rs := []rune(l.s); hasHan(l.s) && len(rs) >= 4 {
		// Chinese text has no spaces: enough of its character pairs must
		// occur.
		found := 0
		for i := 0; i+1 < len(rs); i++ {
			if strings.Contains(e.text, string(rs[i:i+2])) {
				found++
			}
		}
		if found*10 >= (len(rs)-1)*6 {
			return 0
		}
	}
	words := strings.Fields(l.s)
	if len(words) >= 4 || utf8.RuneCountInString(l.s) > 64 {
		// Composed text (a message body, a description): enough of its
		// words must occur.
		found, total := 0, 0
		for _, w := range words {
			if utf8.RuneCountInString(w) < 3 {
				continue
			}
			total++
			if strings.Contains(e.text, w) {
				found++
			}
		}
		if total == 0 || found*10 >= total*6 {
			return 0
		}
		return 2
	}
	n := utf8.RuneCountInString(l.s)
	if k := n / 5; k > 0 && approxDistance([]rune(l.s), []rune(e.text)) <= k {
		return 1
	}
	return 2
}

// approxDistance is the least edit distance between pat and any substring
// of text (Sellers' algorithm, O(len(pat)·len(text)) time).
func approxDistance(pat, text []rune) int {
	m := len(pat)
	prev := make([]int, m+1)
	cur := make([]int, m+1)
	for i := range prev {
		prev[i] = i
	}
	best := prev[m]
	for _, c := range text {
		cur[0] = 0
		for i := 1; i <= m; i++ {
			d := prev[i-1]
			if pat[i-1] != c {
				d++
			}
			d = min(d, prev[i]+1, cur[i-1]+1)
			cur[i] = d
		}
		best = min(best, cur[m])
		if best == 0 {
			return 0
		}
		prev, cur = cur, prev
	}
	return best
}

// special reports whether a call is one of Meta-Tool's special tools, whose
// arguments are written by the model rather than taken from the dialogue.
func special(c record.Call) bool { return c.Name == MetaTool || c.Name == GetUserInput }

// toolsAt returns the tools available to turn i and their schemas by name
// (the first definition of each name).
func toolsAt(r *record.Record, i int) ([]record.Tool, map[string]*schema) {
	var avail []record.Tool
	walkTools(r, func(j int, a []record.Tool) {
		if j == i {
			avail = a
		}
	}, nil)
	byName := map[string]*schema{}
	for _, t := range avail {
		if _, ok := byName[t.Name]; !ok {
			s, err := parseSchemaCached(t.Parameters)
			if err == nil {
				byName[t.Name] = s
			}
		}
	}
	return avail, byName
}

func offlineHallucination(r *record.Record, i int) bool {
	avail, schemas := toolsAt(r, i)
	ev := evidenceBefore(r, i)
	for _, c := range r.Messages[i].Calls {
		if !hasTool(avail, c.Name) {
			return true
		}
		if special(c) {
			continue
		}
		for _, l := range argLeaves(schemas[c.Name], c.Arguments) {
			if !l.fromSchema() && ev.where(l) == 2 {
				return true
			}
		}
	}
	return false
}

func offlineConsistency(r *record.Record, i int) bool {
	_, schemas := toolsAt(r, i)
	ev := evidenceBefore(r, i)
	m := r.Messages[i]
	for _, c := range m.Calls {
		if special(c) {
			continue
		}
		for _, l := range argLeaves(schemas[c.Name], c.Arguments) {
			if !l.number && !l.fromSchema() && ev.where(l) == 1 {
				return true
			}
		}
	}
	// Reasoning that names another listed tool but none of the called ones.
	reasoning := strings.ToLower(m.Reasoning)
	if reasoning == "" || slices.ContainsFunc(m.Calls, special) {
		return false
	}
	for _, c := range m.Calls {
		if mentionsTool(reasoning, c.Name) {
			return false
		}
	}
	for _, t := range r.Tools {
		if !special(record.Call{Name: t.Name}) && mentionsTool(reasoning, t.Name) {
			return true
		}
	}
	return false
}

func offlineMultiStep(r *record.Record, i int) bool {
	m := r.Messages[i]
	reasoning := normText(m.Reasoning)
	if reasoning == "" {
		return true
	}
	for _, c := range m.Calls {
		if !mentionsTool(reasoning, c.Name) {
			return true
		}
		args, err := decodeArgs(c.Arguments)
		if err != nil || len(args) == 0 {
			continue
		}
		named := false
		for _, k := range sortedKeys(args) {
			if mentionsTool(reasoning, k) {
				named = true
				break
			}
		}
		if !named {
			for _, l := range argLeaves(nil, c.Arguments) {
				if l.number && numbersIn(reasoning)[l.s] || !l.number && strings.Contains(reasoning, l.s) {
					named = true
					break
				}
			}
		}
		if !named {
			return true
		}
	}
	return false
}

// mentionsTool reports whether lower-cased text names a tool or parameter:
// as written, or with underscores, hyphens or camel case read as spaces
// ("get_weather", "get weather", "getWeather").
func mentionsTool(text, name string) bool {
	n := strings.ToLower(name)
	if n == "" {
		return false
	}
	if strings.Contains(text, n) {
		return true
	}
	var b strings.Builder
	prevLower := false
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			b.WriteByte(' ')
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	spaced := squash(b.String())
	return spaced != n && strings.Contains(text, spaced)
}

// resultValues lists the salient values of a tool result: string leaves of
// at least three characters and numbers when it is JSON, else its words of
// at least four characters.
func resultValues(content string) []leaf {
	v, err := decodeJSON([]byte(content))
	if err != nil {
		var out []leaf
		for _, w := range strings.Fields(normText(content)) {
			if utf8.RuneCountInString(w) >= 4 {
				out = append(out, leaf{s: strings.Trim(w, ".,;:!?\"'()[]{}")})
			}
		}
		return out
	}
	var out []leaf
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if t := normText(x); utf8.RuneCountInString(t) >= 3 {
				out = append(out, leaf{s: t})
			}
		case json.Number:
			out = append(out, leaf{s: canonNumber(string(x)), number: true})
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k])
			}
		}
	}
	walk(v)
	return out
}

func offlineCompleteness(r *record.Record, x exchange) int {
	answer := normText(r.Messages[x.answer].Content)
	if answer == "" {
		return 0
	}
	nums := numbersIn(answer)
	covered, total := 0, 0
	for _, m := range r.Messages[x.user+1 : x.answer] {
		if m.Role != record.RoleTool {
			continue
		}
		for _, res := range m.Results {
			if res.Name == MetaTool || res.Name == GetUserInput {
				continue
			}
			vals := resultValues(res.Content)
			total++
			if len(vals) == 0 || slices.ContainsFunc(vals, func(l leaf) bool {
				if l.number {
					return nums[l.s]
				}
				return l.s != "" && strings.Contains(answer, l.s)
			}) {
				covered++
			}
		}
	}
	switch {
	case covered == total:
		return 2
	case covered > 0:
		return 1
	}
	return 0
}

func offlineCorrectness(r *record.Record, x exchange) int {
	var b strings.Builder
	b.WriteString(r.System)
	for _, m := range r.Messages[:x.answer] {
		switch m.Role {
		case record.RoleUser, record.RoleSystem:
			b.WriteString("\n")
			b.WriteString(m.Content)
		case record.RoleTool:
			for _, res := range m.Results {
				b.WriteString("\n")
				b.WriteString(res.Content)
			}
		}
	}
	known := numbersIn(normText(b.String()))
	supported, total := 0, 0
	for n := range numbersIn(normText(r.Messages[x.answer].Content)) {
		if f, err := strconv.ParseFloat(n, 64); err == nil && f <= 10 && f == float64(int(f)) {
			continue // counts and list numbers are too common to judge
		}
		total++
		if known[n] {
			supported++
		}
	}
	switch {
	case supported == total:
		return 2
	case supported > 0:
		return 1
	}
	return 0
}
