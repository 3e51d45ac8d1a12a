package translate

import (
	"context"
	"encoding/json"
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
	c := &checker{t: t, src: r, functions: sentFunctions, judged: make(map[string]bool)}
	schema := answerSchema(w)
	var feedback []string
	var last []problem
	for attempt := range t.cfg.Attempts {
		msgs, err := t.tmpl.Render(promptData{Lang: langName, Data: w, Feedback: feedback})
		if err != nil {
			return nil, fmt.Errorf("translate: %w", err)
		}
		resp, err := t.client.Complete(ctx, llm.Request{
			Stage:      fmt.Sprintf("translate@%d", Version),
			Template:   t.tmpl.Hash,
			Messages:   msgs,
			JSONSchema: schema,
			Attempt:    attempt,
			Slot:       r.ID + "/translate",
			// Offline stays nil: there is no honest rule-based translator,
			// so under provider offline the llm layer reports a fatal error.
		})
		if err != nil {
			return nil, err
		}
		if resp.FinishReason == "length" {
			// Asked again with the same feedback, as llm.Ask does: an
			// answer cut off says nothing about the translation.
			last = []problem{{reason: "llm_truncated", detail: fmt.Sprintf("the answer was cut off at the token limit (%d completion tokens)", resp.Usage.CompletionTokens)}}
			continue
		}
		out, probs, err := c.check(ctx, resp)
		if err != nil {
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
	return nil, &contract.Reject{
		Reason: last[0].reason,
		Detail: fmt.Sprintf("no acceptable answer in %d attempt(s); last answer: %s", t.cfg.Attempts, joinProblems(last)),
	}
}

// A checker compares answers for one source record.
type checker struct {
	t         *Translator
	src       *record.Record
	functions *jsontree.Value // the "functions" value as sent
	judged    map[string]bool // equivalence verdicts, reused across attempts
}

// A callPair is a source call and the answer's call aligned with it.
type callPair struct {
	ans  answerCall
	free []freeLeaf
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
	results := make([][][]freeLeaf, len(r.Messages))
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
			pairs, ps := c.alignCalls(i, m.Calls, at.calls)
			calls[i] = pairs
			probs = append(probs, ps...)
		}
		if len(at.results) != len(m.Results) {
			add(ReasonResultsChanged, p+".results", "%d results, want %d", len(at.results), len(m.Results))
			continue
		}
		results[i] = make([][]freeLeaf, len(m.Results))
		for j, res := range m.Results {
			rp := resultPath(i, j)
			ar := at.results[j]
			if ar.name != res.Name {
				add(ReasonResultsChanged, rp+".name", "result name %q, want %q", ar.name, res.Name)
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
			w.compare(rp+".content", orig, ar.content, resultSchema(r, res.Name))
			probs = append(probs, w.problems...)
			results[i][j] = w.free
		}
	}
	if len(probs) > 0 {
		return nil, probs, nil
	}

	out, err := c.build(a, calls, results)
	if err != nil {
		return nil, nil, err
	}
	for s := range translatable(out) {
		if ch, ok := HasSimplifiedOnly(s.text); ok {
			add(ReasonSimplifiedLeft, s.path, "%q keeps the Simplified-only character %q even after s2twp conversion; write it in Traditional characters", clip.Runes(s.text, 40), ch)
		}
	}
	c.untranslated(add, out)
	if len(probs) > 0 {
		return nil, probs, nil
	}
	ps, err := c.judge(ctx, calls)
	if err != nil {
		return nil, nil, err
	}
	if len(ps) > 0 {
		return nil, ps, nil
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

// alignCalls pairs the calls of one turn with the answer's. Parallel calls
// may come back in another order: they are aligned by Hungarian assignment
// (seed 004 §3.1) on a cost that puts function names first, then argument
// keys, then locked values, then free text that changed, with a tiny
// preference for the original position; the translated record keeps the
// source's order, so tool results stay aligned with their calls.
func (c *checker) alignCalls(i int, orig []record.Call, ans []answerCall) ([]callPair, []problem) {
	n := len(orig)
	walks := make([][]walker, n)
	cost := make([][]float64, n)
	for j, oc := range orig {
		on, _ := parseTree(oc.Arguments) // checkSource parsed it
		s := callSchema(c.src, oc.Name)
		walks[j] = make([]walker, n)
		cost[j] = make([]float64, n)
		for k, ac := range ans {
			w := walker{keyReason: ReasonKeyChanged}
			w.compare(callPath(i, j)+".arguments", on, ac.args, s)
			walks[j][k] = w
			cost[j][k] = pairCost(oc.Name, ac.name, w) + 1e-3*math.Abs(float64(j-k))
		}
	}
	perm := []int{0}
	if n > 1 {
		perm = verify.Hungarian(cost)
	}
	pairs := make([]callPair, n)
	var probs []problem
	for j, oc := range orig {
		k := perm[j]
		ac := ans[k]
		if ac.name != oc.Name {
			probs = append(probs, problem{reason: ReasonFunctionRenamed, path: callPath(i, j) + ".name",
				detail: fmt.Sprintf("function %q was renamed to %q; function names must be copied exactly", oc.Name, ac.name)})
			continue
		}
		probs = append(probs, walks[j][k].problems...)
		pairs[j] = callPair{ans: ac, free: walks[j][k].free}
	}
	return pairs, probs
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
	for _, f := range w.free {
		if f.ans.Kind == jsontree.String && toTaiwan(f.ans.Str) != toTaiwan(f.orig.Str) {
			cost++
		}
	}
	return cost
}

// build makes the translated record: a clone of the source whose text
// fields and free-text strings are the answer's, converted with s2twp. A
// damaged conversion (see intact.go) gives a *contract.Reject: the converter's
// fault, not the teacher's, so it is not re-asked.
func (c *checker) build(a *answer, calls [][]callPair, results [][][]freeLeaf) (*record.Record, error) {
	var err error
	conv := func(s string) string {
		if err != nil {
			return s
		}
		var v string
		v, err = convertText(s, false)
		return v
	}
	out := c.src.Clone()
	if out.System != "" {
		out.System = conv(*a.system)
	}
	for i := range out.Messages {
		m := &out.Messages[i]
		at := a.turns[i]
		if m.Content != "" {
			m.Content = conv(*at.content)
		}
		if m.Reasoning != "" {
			m.Reasoning = conv(*at.reasoning)
		}
		for j := range m.Calls {
			m.Calls[j].Arguments = spliceFree(m.Calls[j].Arguments, calls[i][j].free, conv)
		}
		for j := range m.Results {
			res := &m.Results[j]
			if isStructured(res.Content) {
				res.Content = string(spliceFree([]byte(res.Content), results[i][j], conv))
			} else {
				res.Content = conv(at.results[j].content.Str)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// spliceFree writes the converted answer strings over the source's free-text
// literals.
func spliceFree(src []byte, free []freeLeaf, conv func(string) string) []byte {
	var edits []edit
	for _, f := range free {
		if v := conv(f.ans.Str); v != f.orig.Str {
			edits = append(edits, stringEdit(src, f.orig, v))
		}
	}
	return splice(src, edits)
}

// untranslated reports text fields that the teacher handed back in English:
// a field whose source has no Chinese and at least three words must have
// some Chinese in the translation.
func (c *checker) untranslated(add func(reason, path, format string, args ...any), out *record.Record) {
	check := func(path, orig, got string) {
		if !hasHan(orig) && words(orig) >= 3 && !hasHan(got) {
			add(ReasonUntranslated, path, "%q was not translated into Traditional Chinese", clip.Runes(got, 40))
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
// settles those, as ComplexEval's exact match does).
func (c *checker) judge(ctx context.Context, calls [][]callPair) ([]problem, error) {
	var probs []problem
	for i, turn := range calls {
		for j, pair := range turn {
			for _, f := range pair.free {
				orig, got := toTaiwan(f.orig.Str), toTaiwan(f.ans.Str)
				if orig == got {
					continue
				}
				param := pair.ans.name + "." + strings.TrimPrefix(f.path, callPath(i, j)+".arguments.")
				key := param + "\x00" + f.orig.Str + "\x00" + got
				ok, seen := c.judged[key]
				if !seen {
					a, _ := json.Marshal(f.orig.Str)
					b, _ := json.Marshal(got)
					var err error
					if ok, err = c.t.equiv(ctx, param, a, b); err != nil {
						return nil, err
					}
					c.judged[key] = ok
				}
				if !ok {
					probs = append(probs, problem{reason: ReasonNotEquivalent, path: f.path,
						detail: fmt.Sprintf("%q does not mean the same as the original %q; translate the value faithfully or keep it unchanged", clip.Runes(got, 60), clip.Runes(f.orig.Str, 60))})
				}
			}
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
