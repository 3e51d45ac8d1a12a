package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
)

// A Problem is one thing wrong with a record, a call or a sample. Problems are
// data: a checker that finds nothing returns none, and finding problems is
// never an error.
type Problem struct {
	Check string `json:"check"` // the checker's stable name ("roles", "args_schema", "match", "sharegpt", …)
	// Kind classifies the problem with a stable snake_case code: a ComplexEval
	// error kind (func_error, param_missing, hallucination, value_error,
	// stop_early), a format kind (func_not_found, unknown_param, wrong_type,
	// bad_enum, bad_json, …), a dialogue-shape kind or an LLaMA-Factory rule
	// (lf_*). doc.go lists them all.
	Kind string `json:"kind"`
	Path string `json:"path"` // where, e.g. "messages[3].calls[0].arguments.city"
	Msg  string `json:"msg"`  // what exactly, for people
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Check + ": " + p.Kind + ": " + p.Msg
	}
	return p.Check + ": " + p.Kind + " at " + p.Path + ": " + p.Msg
}

// A Checker inspects records for one kind of problem. Exactly one of Check
// and CheckLLM is set. Neither modifies the record.
type Checker struct {
	Name string // stable; used in pipeline.yaml and as the reject reason "verify:<name>"
	Doc  string // one line

	// Check reports the problems of r; none means r passed.
	Check func(r *record.Record) []Problem

	// CheckLLM asks a judge model about r. Problems are the judge's findings
	// (and "judge_unparseable" when no readable answer came within
	// env.Attempts); an error is systemic (endpoint down, budget spent,
	// context cancelled) and says nothing about r.
	CheckLLM func(ctx context.Context, env LLMEnv, r *record.Record) ([]Problem, error)

	// Answers lists, in order, the readable answers an LLM judge gives
	// (LLMEnv.Judged's values besides JudgedUnparseable): the bins of its
	// score histogram. Nil for rule checks.
	Answers []string
}

// Checkers lists every checker in a fixed order: the rule-based ones first,
// then the LLM judges. Names are unique.
var Checkers = []*Checker{
	Roles,
	CallsResolved,
	ArgsSchema,
	MetaToolShape,
	JudgeHallucination,
	JudgeConsistency,
	JudgeMultiStep,
	JudgeCompleteness,
	JudgeCorrectness,
}

// Lookup returns the checker called name.
func Lookup(name string) (*Checker, bool) {
	for _, c := range Checkers {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// Special tool names of the Meta-Tool method (seed 000, Fig 4 and Fig 6).
const (
	MetaTool     = formats.MetaTool
	GetUserInput = "get_user_input"
)

// MetaToolDef returns the meta_tool definition of seed 000, Fig 4, word for
// word, with "required" inside "parameters" where JSON Schema wants it (the
// figure puts it beside them).
func MetaToolDef() record.Tool {
	return record.Tool{
		Name:        MetaTool,
		Description: "Use this tool when no suitable tool is available in the current list, and an external tool is required to provide an accurate response to the user.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"tool_description":{"description":"A clear and concise description of the external tool you need to use.","type":"string"},` +
			`"param_description":{"type":"array","description":"A list of descriptions for each parameter required by the external tool.","items":{"type":"string"}}},` +
			`"required":["tool_description","param_description"]}`),
	}
}

// GetUserInputDef returns the get_user_input definition of seed 000, Fig 6,
// word for word: a function that invokes nothing and hands the turn to the
// user.
func GetUserInputDef() record.Tool {
	return record.Tool{
		Name:        GetUserInput,
		Description: "Not invoke any additional functions.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	}
}

// joinPath appends a key to a dotted path, quoting keys that are not plain
// identifiers: arguments.city, arguments["departure date"].
func joinPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func msgPath(i int) string { return indexPath("messages", i) }

func callPath(msg, call int) string { return indexPath(msgPath(msg)+".calls", call) }

// prefix prepends p to the path of every problem.
func prefix(ps []Problem, p string) []Problem {
	for i := range ps {
		switch {
		case ps[i].Path == "":
			ps[i].Path = p
		case strings.HasPrefix(ps[i].Path, "["):
			ps[i].Path = p + ps[i].Path
		default:
			ps[i].Path = p + "." + ps[i].Path
		}
	}
	return ps
}

// show renders a JSON value for a message, shortened to keep messages readable.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clip.Runes(string(b), showWidth)
}

func showRaw(b []byte) string { return clip.Runes(strings.TrimSpace(string(b)), showWidth) }

// showWidth is how many characters show and showPair keep of a value.
const showWidth = 80

// showPair renders two JSON values that differ for a message, each cut to
// showWidth characters around the first character where they differ
// (case aside), so that the difference shows even when they share a long
// beginning; a nil value (absent) shows as "absent".
func showPair(a, b any) (string, string) {
	text := func(v any) []rune {
		if v == nil {
			return []rune("absent")
		}
		j, err := jsonout.Marshal(v)
		if err != nil {
			return []rune(fmt.Sprint(v))
		}
		return []rune(string(j))
	}
	ra, rb := text(a), text(b)
	if len(ra) <= showWidth && len(rb) <= showWidth {
		return string(ra), string(rb)
	}
	k := 0
	for k < len(ra) && k < len(rb) && unicode.ToLower(ra[k]) == unicode.ToLower(rb[k]) {
		k++
	}
	// Keep some context before the difference, and as much of it as fits
	// when the difference is near the end.
	start := max(0, min(k-showWidth/3, max(len(ra), len(rb))-showWidth+1))
	cut := func(r []rune) string {
		if start == 0 {
			return clip.Runes(string(r), showWidth)
		}
		return "…" + clip.Runes(string(r[min(start, len(r)):]), showWidth-1)
	}
	return cut(ra), cut(rb)
}

// normalisationNote explains a difference that does not show: two strings
// equal in Unicode normalisation form NFC but not byte for byte (é written
// as one character or as e and a combining accent).
func normalisationNote(pred, gold any) string {
	p, ok1 := pred.(string)
	g, ok2 := gold.(string)
	if !ok1 || !ok2 || p == g || norm.NFC.String(p) != norm.NFC.String(g) {
		return ""
	}
	form := func(s string) string {
		switch {
		case norm.NFC.IsNormalString(s):
			return "NFC"
		case norm.NFD.IsNormalString(s):
			return "NFD"
		}
		return "neither NFC nor NFD"
	}
	return fmt.Sprintf(" (the same text in another Unicode normalisation: %s where gold is %s)", form(p), form(g))
}

// marshal writes v as compact JSON without HTML escaping.
