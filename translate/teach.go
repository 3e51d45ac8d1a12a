package translate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/jsontree"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// promptData is what the translate template renders.
type promptData struct {
	Lang     string     // the target language, in words
	Data     wireRecord // the request object; render it with {{pretty .Data}}
	Feedback []string   // problems of the previous answer; empty on the first ask
}

// maxFeedback bounds the problems quoted back to the teacher on a re-ask.
const maxFeedback = 8

// teach runs the ask–check–re-ask loop for one record.
func (t *Translator) teach(ctx context.Context, r *record.Record) (*record.Record, error) {
	w := toWire(r)
	fb, err := jsonout.MarshalIndent(w.Functions, "")
	if err != nil {
		return nil, rejectf(ReasonSourceInvalid, "functions cannot be encoded: %v", err)
	}
	sentFunctions, err := parseTree(fb)
	if err != nil {
		return nil, rejectf(ReasonSourceInvalid, "functions cannot be encoded: %v", err)
	}
	c := &checker{t: t, src: r, scope: scopeOf(r), functions: sentFunctions, judged: make(map[string]bool)}
	schema := answerSchema(w)
	var feedback []string
	var last []problem
	var earlier []string // what the attempts before the last one got wrong
	req := llm.Request{
		Stage:      fmt.Sprintf("translate@%d", Version),
		Template:   t.tmpl.Hash,
		JSONSchema: schema,
		Slot:       r.ID + "/translate",
		// Offline stays nil: there is no honest rule-based translator,
		// so under provider offline the llm layer reports a fatal error.
	}
	for attempt := range t.cfg.Attempts {
		if last != nil {
			earlier = append(earlier, fmt.Sprintf("attempt %d: %s", attempt, clip.Bytes(joinProblems(last), 200)))
		}
		msgs, err := t.tmpl.Render(promptData{Lang: langName, Data: w, Feedback: feedback})
		if err != nil {
			return nil, fmt.Errorf("translate: %w", err)
		}
		req.Messages, req.Attempt = msgs, attempt
		resp, err := t.client.Complete(ctx, req)
		if err != nil {
			return nil, err
		}
		if resp.FinishReason == "length" {
			// Asked again with the same feedback and twice the token
			// limit, as llm.Ask does: an answer cut off says nothing
			// about the translation.
			last = []problem{{reason: "llm_truncated", detail: fmt.Sprintf("the answer was cut off at the token limit (%d completion tokens)", resp.Usage.CompletionTokens)}}
			req = req.Longer()
			continue
		}
		var out *record.Record
		var probs []problem
		if resp, err = resp.Answer(); err != nil {
			// Text decoding filled with U+FFFD, or thinking and no
			// answer: asked again with the problem, as llm.Ask does.
			probs = []problem{{reason: llm.ReasonThinkingOnly, detail: err.Error()}}
			if r, ok := errors.AsType[*contract.Reject](err); ok {
				probs[0] = problem{reason: r.Reason, detail: r.Detail}
			}
		} else if out, probs, err = c.check(ctx, resp); err != nil {
			return nil, err
		}
		if len(probs) == 0 {
			out.SetTag("lang", Lang)
			out.AddStep(t.stepName(), resp.Provider, resp.Model)
			return out, nil
		}
		last = probs
		feedback = feedback[:0]
		for _, p := range probs[:min(len(probs), maxFeedback)] {
			feedback = append(feedback, p.String())
		}
	}
	detail := fmt.Sprintf("no acceptable answer in %d attempt(s); last answer: %s", t.cfg.Attempts, joinProblems(last))
	if len(earlier) > 0 {
		detail += " (earlier: " + strings.Join(earlier, "; ") + ")"
	}
	return nil, &contract.Reject{Reason: last[0].reason, Detail: detail}
}

// A checker compares answers for one source record.
type checker struct {
	t         *Translator
	src       *record.Record
	scope     *scope          // the tools each turn refers to
	functions *jsontree.Value // the "functions" value as sent
	judged    map[string]bool // equivalence verdicts, reused across attempts
}

// A callPair is a source call and the answer's call aligned with it.
type callPair struct {
	ans answerCall
	w   walker // the source's arguments compared with the answer's
}

// check compares one answer with the source. It returns the translated
// record when there is no problem; an error only for systemic failures of
// the equivalence judge.
func (c *checker) check(ctx context.Context, resp llm.Response) (*record.Record, []problem, error) {
	a, p := parseAnswer([]byte(resp.Content))
	if p != nil {
		return nil, []problem{*p}, nil
	}
	var probs []problem
	add := func(reason, path, format string, args ...any) {
		probs = append(probs, problem{reason: reason, path: path, detail: fmt.Sprintf(format, args...)})
	}
	r := c.src

	if a.functions == nil {
		add(ReasonToolsChanged, "functions", `"functions" is missing; copy it unchanged`)
	} else if !jsontree.Equal(c.functions, a.functions) {
		add(ReasonToolsChanged, "functions", "%s; copy \"functions\" exactly as given, untranslated", functionsDiff(c.functions, a.functions))
	}
	switch {
	case r.System != "" && (a.system == nil || *a.system == ""):
		add(ReasonTurnsChanged, "system", `"system" is missing or empty`)
	case r.System == "" && a.system != nil && *a.system != "":
		add(ReasonTurnsChanged, "system", `unexpected "system"; the given JSON has none`)
	}
	if len(a.turns) != len(r.Messages) {
		add(ReasonTurnsChanged, "conversations", "%d turns, want %d; keep every turn, in order", len(a.turns), len(r.Messages))
		return nil, probs, nil
	}
	for i, m := range r.Messages {
		if a.turns[i].role != m.Role {
			add(ReasonTurnsChanged, turnPath(i)+".role", "role %q, want %q", a.turns[i].role, m.Role)
		}
	}
	if len(probs) > 0 {
		return nil, probs, nil
	}

	calls := make([][]callPair, len(r.Messages))
	aligns := make([]*alignment, len(r.Messages))
	results := make([][]walker, len(r.Messages))
	for i, m := range r.Messages {
		at := a.turns[i]
		p := turnPath(i)
		textField(add, p+".content", m.Content, at.content)
		textField(add, p+".reasoning", m.Reasoning, at.reasoning)
		switch {
		case len(at.calls) < len(m.Calls):
			add(ReasonCallDropped, p+".tool_calls", "%d calls, want %d; keep every call", len(at.calls), len(m.Calls))
		case len(at.calls) > len(m.Calls):
			add(ReasonCallAdded, p+".tool_calls", "%d calls, want %d; add no calls", len(at.calls), len(m.Calls))
		case len(m.Calls) > 0:
			pairs, al, ps := c.alignCalls(i, m.Calls, at.calls)
			calls[i], aligns[i] = pairs, al
			probs = append(probs, ps...)
		}
		if len(at.results) != len(m.Results) {
			add(ReasonResultsChanged, p+".results", "%d results, want %d", len(at.results), len(m.Results))
			continue
		}
		results[i] = make([]walker, len(m.Results))
		for j, res := range m.Results {
			rp := resultPath(i, j)
			ar := at.results[j]
			if ar.name != res.Name {
				add(ReasonResultsChanged, rp+".name", "result name %q, want %q", ar.name, res.Name)
				continue
			}
			if c.scope.definition(i, j) {
				// isStructured holds: MetaToolResult read JSON.
				if orig, err := parseTree([]byte(res.Content)); err == nil && !jsontree.Equal(orig, ar.content) {
					add(ReasonToolsChanged, rp+".content", "this meta_tool result is a tool definition; copy it exactly as given, untranslated, like \"functions\"")
				}
				continue
			}
			if !isStructured(res.Content) {
				if ar.content.Kind != jsontree.String {
					add(ReasonResultsChanged, rp+".content", "want a string, got a %s", ar.content.Kind)
				}
				continue
			}
			orig, err := parseTree([]byte(res.Content))
			if err != nil { // isStructured checked validity
				continue
			}
			w := walker{keyReason: ReasonResultsChanged}
			w.compare(rp+".content", orig, ar.content, c.scope.response(i, res.Name))
			probs = append(probs, w.problems...)
			results[i][j] = w
		}
	}
	if len(probs) > 0 {
		return nil, probs, nil
	}

	out, err := c.build(a, calls, results)
	if err != nil {
		return nil, nil, err
	}
	c.untranslated(add, out, calls, results)
	if len(probs) > 0 {
		return nil, probs, nil
	}
	realigned, ps, err := c.judge(ctx, calls, aligns)
	if err != nil {
		return nil, nil, err
	}
	if len(ps) > 0 {
		return nil, ps, nil
	}
	if realigned {
		// The same strings in other calls: the checks above hold as they
		// were.
		if out, err = c.build(a, calls, results); err != nil {
			return nil, nil, err
		}
	}
	return out, nil, nil
}

// textField checks that a text field is present exactly where the source
// has text.
func textField(add func(reason, path, format string, args ...any), path, orig string, ans *string) {
	switch {
	case orig != "" && (ans == nil || *ans == ""):
		add(ReasonTurnsChanged, path, "missing or empty; the given turn has text here")
	case orig == "" && ans != nil && *ans != "":
		add(ReasonTurnsChanged, path, "unexpected text; the given turn has none here")
	}
}

// An alignment is how the parallel calls of one turn were paired with the
// answer's.
type alignment struct {
	ans   []answerCall
	walks [][]walker // walks[j][k]: source call j compared with answer call k
	names [][]bool   // names[j][k]: the two calls name the same function
	perm  []int      // source call j is paired with answer call perm[j]
}

// clean reports whether source call j and answer call k may be paired: the
// same function, and no structural problem between them.
func (al *alignment) clean(j, k int) bool { return al.names[j][k] && len(al.walks[j][k].problems) == 0 }

// alignCalls pairs the calls of one turn with the answer's. Parallel calls
// may come back in another order: they are aligned by Hungarian assignment
// (seed 004 §3.1) on a cost that puts function names first, then argument
// keys, then locked values, then free text that changed, with a tiny
// preference for the original position; the translated record keeps the
// source's order, so tool results stay aligned with their calls. Calls
// that differ only in free text are aligned again on the judge's verdicts
// when this alignment does not hold up (see judge).
func (c *checker) alignCalls(i int, orig []record.Call, ans []answerCall) ([]callPair, *alignment, []problem) {
	n := len(orig)
	al := &alignment{ans: ans, walks: make([][]walker, n), names: make([][]bool, n)}
	cost := make([][]float64, n)
	for j, oc := range orig {
		on, _ := parseTree(oc.Arguments) // checkSource parsed it
		s := c.scope.params(i, oc.Name)
		al.walks[j] = make([]walker, n)
		al.names[j] = make([]bool, n)
		cost[j] = make([]float64, n)
		for k, ac := range ans {
			w := walker{keyReason: ReasonKeyChanged}
			w.compare(callPath(i, j)+".arguments", on, ac.args, s)
			al.walks[j][k] = w
			al.names[j][k] = oc.Name == ac.name
			cost[j][k] = pairCost(oc.Name, ac.name, w) + 1e-3*math.Abs(float64(j-k))
		}
	}
	al.perm = []int{0}
	if n > 1 {
		al.perm = verify.Hungarian(cost)
	}
	pairs := make([]callPair, n)
	var probs []problem
	for j, oc := range orig {
		k := al.perm[j]
		ac := ans[k]
		if ac.name != oc.Name {
			probs = append(probs, problem{reason: ReasonFunctionRenamed, path: callPath(i, j) + ".name",
				detail: fmt.Sprintf("function %q was renamed to %q; function names must be copied exactly", oc.Name, ac.name)})
			continue
		}
		probs = append(probs, al.walks[j][k].problems...)
		pairs[j] = callPair{ans: ac, w: al.walks[j][k]}
	}
	return pairs, al, probs
}

func pairCost(origName, ansName string, w walker) float64 {
	cost := 0.0
	if origName != ansName {
		cost += 1e6
	}
	for _, p := range w.problems {
		if p.reason == ReasonKeyChanged {
			cost += 1e4
		} else {
			cost += 1e2
		}
	}
	for _, f := range w.allFree() {
		if f.ans.Kind == jsontree.String && toTaiwan(f.ans.Str) != toTaiwan(f.orig.Str) {
			cost++
		}
	}
	return cost
}

// build makes the translated record: a clone of the source whose text
// fields and free-text strings are the answer's and whose locked strings
// are the source's, converted as converter says for teacher mode (answer
// text keeps the teacher's words), meta_tool results that return tool
// definitions kept as they are. A damaged
// conversion (see intact.go) gives a *contract.Reject: the converter's
// fault, not the teacher's, so it is not re-asked.
func (c *checker) build(a *answer, calls [][]callPair, results [][]walker) (*record.Record, error) {
	conv := newConverter(false)
	for _, turn := range calls {
		for _, p := range turn {
			for _, l := range p.w.allLocked() {
				conv.addUnit(l.Str)
			}
		}
	}
	conv.prepare()
	out := c.src.Clone()
	if out.System != "" {
		out.System = conv.text(*a.system)
	}
	for i := range out.Messages {
		m := &out.Messages[i]
		at := a.turns[i]
		if m.Content != "" {
			m.Content = conv.text(*at.content)
		}
		if m.Reasoning != "" {
			m.Reasoning = conv.text(*at.reasoning)
		}
		for j := range m.Calls {
			m.Calls[j].Arguments = spliceLeaves(m.Calls[j].Arguments, calls[i][j].w, conv)
		}
		for j := range m.Results {
			res := &m.Results[j]
			switch {
			case c.scope.definition(i, j):
			case isStructured(res.Content):
				res.Content = string(spliceLeaves([]byte(res.Content), results[i][j], conv))
			default:
				res.Content = conv.text(at.results[j].content.Str)
			}
		}
	}
	if conv.err != nil {
		return nil, conv.err
	}
	return out, nil
}

// spliceLeaves writes the converted answer strings over the source's
// free-text literals, and the converted source strings over its locked
// ones.
func spliceLeaves(src []byte, w walker, conv *converter) []byte {
	var edits []edit
	for _, f := range w.free {
		if v := conv.text(f.ans.Str); v != f.orig.Str {
			edits = append(edits, stringEdit(src, f.orig, v))
		}
	}
	for _, l := range w.locked {
		if v := conv.value(l.Str, true); v != l.Str {
			edits = append(edits, stringEdit(src, l, v))
		}
	}
	for _, n := range w.nested {
		if v := spliceLeaves(n.src, n.w, conv); string(v) != n.orig.Str {
			edits = append(edits, stringEdit(src, n.orig, string(v)))
		}
	}
	return splice(src, edits)
}

// untranslated reports text fields that the teacher did not translate into
// Chinese: a field holding kana or hangul where its source has none
// (Japanese or Korean), and a field whose source has no Chinese and at
// least three words but whose translation has no Chinese or is mostly in
// another script (see mostlyForeign; the locked values of the record's
// calls and results quoted in it do not count).
func (c *checker) untranslated(add func(reason, path, format string, args ...any), out *record.Record, calls [][]callPair, results [][]walker) {
	var keep []string
	walks := func(w *walker) {
		for _, l := range w.allLocked() {
			keep = append(keep, l.Str)
		}
		keep = append(keep, w.kept...)
	}
	for i := range calls {
		for j := range calls[i] {
			walks(&calls[i][j].w)
		}
		for j := range results[i] {
			walks(&results[i][j])
		}
	}
	check := func(path, orig, got string) {
		switch {
		case got == "":
		case hasKanaHangul(got) && !hasKanaHangul(orig):
			add(ReasonUntranslated, path, "%q is Japanese or Korean (kana or hangul), not Traditional Chinese; translate the whole text into Traditional Chinese", clip.Runes(got, 40))
		case hasHan(orig) || words(orig) < 3:
		case !hasHan(got):
			add(ReasonUntranslated, path, "%q was not translated into Traditional Chinese", clip.Runes(got, 40))
		case mostlyForeign(got, keep):
			add(ReasonUntranslated, path, "%q is mostly left in the source language; translate the whole text into Traditional Chinese, keeping only names, codes and quoted values as they are", clip.Runes(got, 40))
		}
	}
	check("system", c.src.System, out.System)
	for i, m := range c.src.Messages {
		check(turnPath(i)+".content", m.Content, out.Messages[i].Content)
		check(turnPath(i)+".reasoning", m.Reasoning, out.Messages[i].Reasoning)
	}
}

// words counts runs of at least two letters.
func words(s string) int {
	n, run := 0, 0
	for _, r := range s + " " {
		if unicode.IsLetter(r) {
			run++
			continue
		}
		if run >= 2 {
			n++
		}
		run = 0
	}
	return n
}

// judge asks the equivalence judge about every free-text argument value
// whose translation is not just its s2twp conversion (rule-based matching
// settles those, as ComplexEval's exact match does). When aligned parallel
// calls fail and the structure left their pairing open (calls of one
// function that differ only in free text), the failed calls are aligned
// again among themselves by Hungarian assignment on the number of values
// the judge finds not equivalent, so a correct translation that reorders
// such calls passes; pairs the judge accepted stay as they are.
// realigned reports that a pairing changed (calls is updated).
func (c *checker) judge(ctx context.Context, calls [][]callPair, aligns []*alignment) (realigned bool, probs []problem, err error) {
	for i, turn := range calls {
		bad := make([][]problem, len(turn))
		var failed []int // source calls with a value not equivalent
		for j, pair := range turn {
			if bad[j], err = c.judgePair(ctx, i, j, pair.ans.name, pair.w); err != nil {
				return false, nil, err
			}
			if len(bad[j]) > 0 {
				failed = append(failed, j)
			}
		}
		if al := aligns[i]; len(failed) > 1 && al.open(failed) {
			changed, err := c.realign(ctx, i, al, failed)
			if err != nil {
				return false, nil, err
			}
			for _, j := range changed {
				k := al.perm[j]
				turn[j] = callPair{ans: al.ans[k], w: al.walks[j][k]}
				bad[j], _ = c.judgePair(ctx, i, j, turn[j].ans.name, turn[j].w) // realign judged them all
			}
			realigned = realigned || len(changed) > 0
		}
		for _, ps := range bad {
			probs = append(probs, ps...)
		}
	}
	return realigned, probs, nil
}

// open reports whether, among the source calls js and the answer calls
// paired with them, some source call could be paired with more than one.
func (al *alignment) open(js []int) bool {
	for _, j := range js {
		n := 0
		for _, j2 := range js {
			if al.clean(j, al.perm[j2]) {
				n++
			}
		}
		if n > 1 {
			return true
		}
	}
	return false
}

// realign pairs the source calls js of turn i again with the answer calls
// paired with them: clean pairs (see clean) cost the number of free-text
// values the judge finds not equivalent, with the same tiny preference for
// the original position; other pairs are never better. It updates al.perm
// and returns the source calls whose partner changed.
func (c *checker) realign(ctx context.Context, i int, al *alignment, js []int) ([]int, error) {
	ks := make([]int, len(js))
	for a, j := range js {
		ks[a] = al.perm[j]
	}
	cost := make([][]float64, len(js))
	for a, j := range js {
		cost[a] = make([]float64, len(ks))
		for b, k := range ks {
			cost[a][b] = 1e-3 * math.Abs(float64(j-k))
			if !al.clean(j, k) {
				cost[a][b] += 1e9
				continue
			}
			ps, err := c.judgePair(ctx, i, j, "", al.walks[j][k])
			if err != nil {
				return nil, err
			}
			cost[a][b] += float64(len(ps))
		}
	}
	var changed []int
	for a, b := range verify.Hungarian(cost) {
		if j := js[a]; al.perm[j] != ks[b] {
			al.perm[j] = ks[b]
			changed = append(changed, j)
		}
	}
	return changed, nil
}

// judgePair judges the free-text values of source call j of turn i against
// those of an answer call of function name ("" means the source call's
// name: a clean pair names the same function).
func (c *checker) judgePair(ctx context.Context, i, j int, name string, w walker) ([]problem, error) {
	if name == "" {
		name = c.src.Messages[i].Calls[j].Name
	}
	var probs []problem
	for _, f := range w.allFree() {
		// Equal up to s2twp: the same words, whatever the script. The judge
		// is shown the value as the record will hold it.
		if toTaiwan(f.orig.Str) == toTaiwan(f.ans.Str) {
			continue
		}
		got := mustChinese().repairText(f.ans.Str)
		param := name + "." + strings.TrimPrefix(f.path, callPath(i, j)+".arguments.")
		key := param + "\x00" + f.orig.Str + "\x00" + got
		ok, seen := c.judged[key]
		if !seen {
			a, _ := json.Marshal(f.orig.Str)
			b, _ := json.Marshal(got)
			var err error
			if ok, err = c.t.equiv(ctx, fmt.Sprintf("translate/%s/m%d/c%d", c.src.ID, i, j), param, a, b); err != nil {
				return nil, err
			}
			c.judged[key] = ok
		}
		if !ok {
			probs = append(probs, problem{reason: ReasonNotEquivalent, path: f.path,
				detail: fmt.Sprintf("%q does not mean the same as the original %q; translate the value faithfully or keep it unchanged", clip.Runes(got, 60), clip.Runes(f.orig.Str, 60))})
		}
	}
	return probs, nil
}

// functionsDiff says briefly how the answer's functions differ.
func functionsDiff(sent, got *jsontree.Value) string {
	if len(sent.Elems) != len(got.Elems) {
		return fmt.Sprintf("%d functions, want %d", len(got.Elems), len(sent.Elems))
	}
	for i := range sent.Elems {
		if !jsontree.Equal(&sent.Elems[i].Val, &got.Elems[i].Val) {
			name := ""
			if n := sent.Elems[i].Val.Get("name"); n != nil {
				name = n.Str
			}
			return fmt.Sprintf("functions[%d] (%s) was changed", i, name)
		}
	}
	return "functions were changed"
}
