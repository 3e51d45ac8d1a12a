package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/augmentdata/augment/stages/record"
)

// A Match is the outcome of comparing predicted calls with gold calls.
type Match struct {
	// OK is true when every gold call is matched by an equal predicted call
	// and no predicted call is left over.
	OK bool
	// Pairs lists the equal pairs as {gold index, pred index}, by gold index.
	// A gold call that is absent from Pairs was not matched.
	Pairs [][2]int
	// Problems explains every mismatch with a ComplexEval kind: func_error
	// (wrong function, or a predicted call with no gold counterpart),
	// param_missing, hallucination (a parameter the gold call does not have),
	// value_error, stop_early (a gold call nobody made); bad_json for
	// arguments that are not a JSON object. Paths start with "gold[j]" or
	// "pred[i]"; a value_error's path and message name the first element
	// that differs inside the argument (pred[0].arguments.legs[1].to), and
	// show each side cut around the difference.
	Problems []Problem
}

// MatchCalls compares predicted calls with gold calls, BFCL/ComplexEval
// style, without an LLM:
//   - names must be equal;
//   - numbers are compared by exact decimal value (1 equals 1.0 and 1e0;
//     integers beyond 64 bits or 2^53 are not rounded); a string equals a number
//     (or "true"/"false" a boolean) only where the tool's schema types the
//     parameter as number/integer (boolean);
//   - strings are compared after trimming, collapsing runs of white space and
//     Unicode case folding, except for parameters with an enum, which must be
//     spelled exactly;
//   - arrays element by element in order, objects key by key;
//   - an omitted argument equals the parameter's default, and an explicit null
//     equals an omitted argument;
//   - parallel calls are paired order-insensitively by a minimum-cost
//     assignment (Hungarian) that first maximises the number of equal pairs,
//     then of same-name pairs, then the share of agreeing arguments.
//
// tools supplies the schemas (types, enums, defaults); calls to tools not in
// it are compared without schema help.
func MatchCalls(tools []record.Tool, gold, pred []record.Call) Match {
	byName := map[string]*schema{}
	for _, t := range tools {
		if _, ok := byName[t.Name]; ok {
			continue
		}
		s, err := parseSchemaCached(t.Parameters)
		if err != nil {
			s = nil
		}
		byName[t.Name] = s
	}
	var res Match
	bad := func(side string, i int, c record.Call) map[string]any {
		m, err := decodeArgs(c.Arguments)
		if err != nil {
			res.Problems = append(res.Problems, Problem{Check: "match", Kind: "bad_json",
				Path: indexPath(side, i) + ".arguments", Msg: fmt.Sprintf("arguments of %q are not a JSON object: %v", c.Name, err)})
			return nil
		}
		return m
	}
	gargs := make([]map[string]any, len(gold))
	for j, g := range gold {
		gargs[j] = bad("gold", j, g)
	}
	pargs := make([]map[string]any, len(pred))
	for i, p := range pred {
		pargs[i] = bad("pred", i, p)
	}

	// Lexicographic costs: W1 per unequal pair outweighs any number of name
	// mismatches (W2 each), which outweigh any sum of argument disagreement
	// fractions (< 1 each).
	n := float64(max(len(gold), len(pred)))
	w2 := n + 1
	w1 := (n + 1) * (w2 + 1)
	diffs := make([][][]argDiff, len(pred))
	cost := make([][]float64, len(pred))
	for i, p := range pred {
		diffs[i] = make([][]argDiff, len(gold))
		cost[i] = make([]float64, len(gold))
		for j, g := range gold {
			switch {
			case p.Name != g.Name:
				cost[i][j] = w1 + w2
			case pargs[i] == nil || gargs[j] == nil:
				cost[i][j] = w1 + 0.999
			default:
				d, keys := diffArgs(byName[g.Name], gargs[j], pargs[i])
				diffs[i][j] = d
				if len(d) > 0 {
					cost[i][j] = w1 + float64(len(d))/float64(keys+1)
				}
			}
		}
	}
	rows := Hungarian(cost)
	predOf := make([]int, len(gold))
	for j := range predOf {
		predOf[j] = -1
	}
	for i, j := range rows {
		if j >= 0 {
			predOf[j] = i
		}
	}
	for j, i := range predOf {
		g := gold[j]
		switch {
		case i < 0:
			res.Problems = append(res.Problems, Problem{Check: "match", Kind: "stop_early", Path: indexPath("gold", j),
				Msg: fmt.Sprintf("gold call %q was not made (%d predicted, %d gold)", g.Name, len(pred), len(gold))})
		case cost[i][j] == 0:
			res.Pairs = append(res.Pairs, [2]int{j, i})
		case pred[i].Name != g.Name:
			res.Problems = append(res.Problems, Problem{Check: "match", Kind: "func_error", Path: indexPath("pred", i) + ".name",
				Msg: fmt.Sprintf("calls %q where gold calls %q", pred[i].Name, g.Name)})
		default:
			for _, d := range diffs[i][j] {
				res.Problems = append(res.Problems, d.problem(i, g.Name))
			}
		}
	}
	for i, j := range rows {
		if j < 0 {
			res.Problems = append(res.Problems, Problem{Check: "match", Kind: "func_error", Path: indexPath("pred", i),
				Msg: fmt.Sprintf("predicted call %q matches no gold call (%d predicted, %d gold)", pred[i].Name, len(pred), len(gold))})
		}
	}
	res.OK = len(res.Problems) == 0
	return res
}

// An argDiff is one top-level argument on which a predicted call disagrees
// with its gold call.
type argDiff struct {
	key        string
	kind       string // value_error, param_missing, hallucination
	gold, pred any
	declared   bool // the schema declares the parameter
	// at is, for a value_error, the path of the first element that differs
	// inside the argument, from the key (joinPath("", key) when the values
	// themselves differ); gold and pred are then that element's values
	// (nil where it is absent).
	at string
}

func (d argDiff) problem(i int, fn string) Problem {
	args := indexPath("pred", i) + ".arguments"
	p := Problem{Check: "match", Kind: d.kind, Path: joinPath(args, d.key)}
	switch {
	case d.kind == "value_error":
		pred, gold := showPair(d.pred, d.gold)
		if d.at == joinPath("", d.key) {
			p.Msg = fmt.Sprintf("parameter %q of %q is %s where gold has %s", d.key, fn, pred, gold)
		} else {
			p.Path = prefix([]Problem{{Path: d.at}}, args)[0].Path
			p.Msg = fmt.Sprintf("parameter %q of %q differs at %s: %s where gold has %s", d.key, fn, d.at, pred, gold)
		}
		p.Msg += normalisationNote(d.pred, d.gold)
	case d.kind == "param_missing":
		p.Msg = fmt.Sprintf("parameter %q of %q is missing; gold has %s", d.key, fn, show(d.gold))
	case d.declared:
		p.Msg = fmt.Sprintf("parameter %q of %q is set to %s but gold leaves it out", d.key, fn, show(d.pred))
	default:
		p.Msg = fmt.Sprintf("parameter %q is not a parameter of %q", d.key, fn)
	}
	return p
}

// diffArgs lists the top-level arguments on which pred disagrees with gold
// under schema s (nil: none known), by key, and the number of keys compared.
func diffArgs(s *schema, gold, pred map[string]any) ([]argDiff, int) {
	keys := unionKeys(gold, pred)
	var out []argDiff
	for _, k := range keys {
		var ps *schema
		if s != nil {
			ps = s.props[k]
		}
		g, gok := present(gold, k)
		p, pok := present(pred, k)
		switch {
		case gok && pok:
			if !valueEqual(ps, g, p, matchRules) {
				at, g, p := firstDiff(ps, g, p, matchRules, joinPath("", k))
				out = append(out, argDiff{key: k, kind: "value_error", gold: g, pred: p, at: at})
			}
		case gok:
			if ps == nil || !ps.hasDef || !valueEqual(ps, g, ps.def, matchRules) {
				out = append(out, argDiff{key: k, kind: "param_missing", gold: g})
			}
		case pok:
			if ps == nil || !ps.hasDef || !valueEqual(ps, ps.def, p, matchRules) {
				out = append(out, argDiff{key: k, kind: "hallucination", pred: p, declared: ps != nil})
			}
		}
	}
	return out, len(keys)
}

// present returns m[k] unless it is absent or null.
func present(m map[string]any, k string) (any, bool) {
	v, ok := m[k]
	return v, ok && v != nil
}

func unionKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// rules says how tolerant a value comparison is.
type rules struct {
	// anyNumericString lets a numeric string equal a number whatever the
	// schema says; otherwise only where the schema types the value as a
	// number, integer or boolean.
	anyNumericString bool
	// fold, when set, normalises a string further (width, script variants).
	fold func(string) string
}

var matchRules = rules{}

// valueEqual reports whether gold value a and predicted value b are equal
// under schema s (nil when unknown) and the tolerances of r.
func valueEqual(s *schema, a, b any, r rules) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return stringEqual(s, x, y, r)
		}
		return scalarCoerced(s, x, b, r)
	case json.Number:
		if y, ok := b.(json.Number); ok {
			return numberEqual(x, y)
		}
		if y, ok := b.(string); ok {
			return scalarCoerced(s, y, x, r)
		}
		return false
	case bool:
		if y, ok := b.(bool); ok {
			return x == y
		}
		if y, ok := b.(string); ok {
			return scalarCoerced(s, y, x, r)
		}
		return false
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		var is *schema
		if s != nil {
			is = s.items
		}
		for i := range x {
			if !valueEqual(is, x[i], y[i], r) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for _, k := range unionKeys(x, y) {
			if _, _, _, eq := memberEqual(s, x, y, k, r); !eq {
				return false
			}
		}
		return true
	}
	return false
}

// memberEqual compares key k of gold object x and predicted object y
// under s (the objects' schema): present on both sides, the values must
// be equal; on one side only (null counts as absent), the value must equal
// the property's default. It returns the property's schema and both
// values (nil where absent).
func memberEqual(s *schema, x, y map[string]any, k string, r rules) (ps *schema, g, p any, eq bool) {
	if s != nil {
		ps = s.props[k]
	}
	g, gok := present(x, k)
	p, pok := present(y, k)
	switch {
	case gok && pok:
		return ps, g, p, valueEqual(ps, g, p, r)
	case gok:
		return ps, g, p, ps != nil && ps.hasDef && valueEqual(ps, ps.def, g, r)
	case pok:
		return ps, g, p, ps != nil && ps.hasDef && valueEqual(ps, ps.def, p, r)
	}
	return ps, g, p, true
}

// firstDiff returns the path (from path) and values of the first element
// on which gold value a and predicted value b, unequal under valueEqual,
// differ: the first unequal element of arrays of one length, the first
// unequal key of objects (in key order; a value absent on one side is
// nil), else a and b themselves.
func firstDiff(s *schema, a, b any, r rules, path string) (string, any, any) {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			break
		}
		var is *schema
		if s != nil {
			is = s.items
		}
		for i := range x {
			if !valueEqual(is, x[i], y[i], r) {
				return firstDiff(is, x[i], y[i], r, indexPath(path, i))
			}
		}
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range unionKeys(x, y) {
			ps, g, p, eq := memberEqual(s, x, y, k, r)
			switch {
			case eq:
			case g != nil && p != nil:
				return firstDiff(ps, g, p, r, joinPath(path, k))
			default:
				return joinPath(path, k), g, p
			}
		}
	}
	return path, a, b
}

// scalarCoerced compares string str with the number or boolean v where the
// schema (or r) allows writing that value as a string.
func scalarCoerced(s *schema, str string, v any, r rules) bool {
	str = strings.TrimSpace(str)
	switch y := v.(type) {
	case json.Number:
		if !r.anyNumericString && !(s != nil && (slices.Contains(s.types, "number") || slices.Contains(s.types, "integer"))) {
			return false
		}
		if _, err := strconv.ParseFloat(str, 64); err != nil {
			return false
		}
		return numberEqual(json.Number(str), y)
	case bool:
		if !r.anyNumericString && !(s != nil && slices.Contains(s.types, "boolean")) {
			return false
		}
		l := strings.ToLower(str)
		return l == "true" && y || l == "false" && !y
	}
	return false
}

// numberEqual reports whether two numbers written in decimal (JSON
// grammar, a leading + and surrounding space allowed) have the same value,
// exactly: 5 equals 5.0 and 5e0, 12345678901234567890 does not equal
// 12345678901234567891, nor 9007199254740993 equal 9007199254740992.0
// (a float64 comparison took them for equal). Other spellings that
// strconv.ParseFloat reads (hexadecimal) are compared as float64.
func numberEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	da, okA := decimalOf(string(a))
	db, okB := decimalOf(string(b))
	if okA && okB {
		return da == db
	}
	af, errA := strconv.ParseFloat(strings.TrimSpace(string(a)), 64)
	bf, errB := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	return errA == nil && errB == nil && af == bf && !math.IsNaN(af) && !math.IsInf(af, 0)
}

// A decimal is a number's exact value: sign, significant digits (no
// leading or trailing zeros) and the power of ten of the last one, in
// decimal (an exponent may have any number of digits); zero is the zero
// decimal whatever its sign.
type decimal struct {
	neg    bool
	digits string
	exp    string
}

// decimalOf reads a decimal number: [+-]digits[.digits][(e|E)[+-]digits]
// with at least one digit before or after the point, space around it
// allowed; false for anything else.
func decimalOf(s string) (decimal, bool) {
	s = strings.TrimSpace(s)
	var d decimal
	if s != "" && (s[0] == '-' || s[0] == '+') {
		d.neg = s[0] == '-'
		s = s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return decimal{}, false
	}
	e := new(big.Int)
	if hasExp {
		t := expText
		if t != "" && (t[0] == '+' || t[0] == '-') {
			t = t[1:]
		}
		if t == "" || !allDigits(t) {
			return decimal{}, false
		}
		e.SetString(expText, 10) // digits with one sign: always read
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return decimal{}, true // zero
	}
	e.Add(e, big.NewInt(int64(len(digits)-len(trimmed)-len(frac))))
	d.digits, d.exp = trimmed, e.String()
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func stringEqual(s *schema, a, b string, r rules) bool {
	if a == b {
		return true
	}
	if s != nil && s.enum != nil {
		return false // enum values are identifiers: spelled exactly
	}
	a, b = squash(a), squash(b)
	if r.fold != nil {
		a, b = r.fold(a), r.fold(b)
	}
	return strings.EqualFold(a, b)
}

// squash trims s and collapses every run of white space to one space.
func squash(s string) string {
	return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
}

// jsonEqual reports whether two decoded JSON values are the same value
// (numbers by value, everything else exactly).
func jsonEqual(a, b any) bool {
	return sameTree(a, b, func(a, b any) bool {
		switch x := a.(type) {
		case nil:
			return b == nil
		case bool:
			y, ok := b.(bool)
			return ok && x == y
		case string:
			y, ok := b.(string)
			return ok && x == y
		case json.Number:
			y, ok := b.(json.Number)
			return ok && numberEqual(x, y)
		}
		return false
	})
}

// sameTree reports whether decoded JSON values a and b have the same shape
// (arrays of the same length, objects with the same keys) and every pair of
// leaves (values that are neither) satisfies leaf.
func sameTree(a, b any, leaf func(a, b any) bool) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameTree(x[i], y[i], leaf) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameTree(v, w, leaf) {
				return false
			}
		}
		return true
	}
	return leaf(a, b)
}
