package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/augmentdata/augment/translate/zhconv"
)

// Equivalent decides whether two argument values mean the same thing
// (ComplexEval's LLM-based matching, seed 004 Fig 10): the same value written
// in another language or another form is equivalent ("New York", "NY",
// "紐約"), a different value is not.
//
// The rules decide first, without a request: values equal under MatchCalls'
// comparison, extended so that numeric and boolean strings equal numbers and
// booleans, full-width ASCII equals ASCII, and Traditional and Simplified
// Chinese spellings of the same text are equal. Values that differ anywhere
// but in their strings (another number, another shape) are not equivalent.
// Only values that differ in their strings go to the judge, with the prompt
// equiv_value (env.Prompts can override it); its offline stand-in is the rules
// alone, so offline such values are not equivalent. With env.Client nil the
// rules decide alone. A value that is not valid JSON equals only the
// byte-identical value.
//
// An error wraps either the client's (an *llm.AnswerError still rejects just
// one record) or the *llm.AnswerError of llm.Ask with the reason
// "judge_unparseable" (or "llm_truncated", or llm.ReasonThinkingOnly) when
// no answer could be used within env.Attempts.
func Equivalent(ctx context.Context, env LLMEnv, param string, a, b json.RawMessage) (bool, error) {
	va, errA := decodeJSON(a)
	vb, errB := decodeJSON(b)
	if errA != nil || errB != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b)), nil
	}
	if valueEqual(nil, va, vb, equivRules) {
		return true, nil
	}
	if !sameButStrings(va, vb) || env.Client == nil {
		return false, nil
	}
	data := equivData{param, strings.TrimSpace(string(a)), strings.TrimSpace(string(b))}
	slot := env.Slot + "/equiv/" + param
	offline := func() (string, error) {
		return `{"is_equal": false, "reason": "offline: the values differ after normalisation"}`, nil
	}
	eq, err := ask(ctx, env, "equiv_value", slot, data, offline, parseEqual)
	if err != nil {
		return false, err
	}
	return eq, nil
}

// equivData is what the equiv_value template renders.
type equivData struct {
	Param          string // the parameter's name
	Value1, Value2 string // the two values as JSON
}

// equivRules extend the MatchCalls comparison for Equivalent.
var equivRules = rules{anyNumericString: true, fold: foldText}

// sameButStrings reports whether a and b have the same shape and agree on
// everything except some string leaves (numbers and booleans compared
// leniently), so that only a judge of meaning can tell them apart.
func sameButStrings(a, b any) bool {
	return sameTree(a, b, func(a, b any) bool {
		if _, ok := a.(string); ok {
			_, ok := b.(string)
			return ok
		}
		return valueEqual(nil, a, b, equivRules)
	})
}

// foldText maps full-width ASCII to ASCII and Traditional Chinese characters
// to Simplified ones (OpenCC t2s), so that spellings that differ only so
// compare equal. Should the embedded dictionaries not load (a broken build),
// Chinese text is compared as written.
func foldText(s string) string {
	s = foldWidth(s)
	if !hasHan(s) {
		return s
	}
	cc, err := zhconv.T2S()
	if err != nil {
		return s
	}
	return cc.Convert(s)
}

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// parseEqual reads an equiv_value answer: the JSON object
// {"is_equal": true|false, "reason": "…"}, optionally inside one ```json
// fence. Anything else is unreadable.
func parseEqual(answer string) (bool, error) {
	var v struct {
		IsEqual *bool   `json:"is_equal"`
		Reason  *string `json:"reason"`
	}
	if err := strictObject(answer, &v); err != nil {
		return false, err
	}
	if v.IsEqual == nil {
		return false, fmt.Errorf(`the object has no boolean "is_equal"`)
	}
	return *v.IsEqual, nil
}
