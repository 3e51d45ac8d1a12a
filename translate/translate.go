// Package translate turns tool-use dialogues into Traditional Chinese as used
// in Taiwan (zh-TW) while keeping what a function-calling model relies on:
// tool definitions — the record's and those a meta_tool result returns —,
// function names, argument keys and enum members byte for byte, and
// numbers, dates, identifiers, URLs and e-mail addresses untranslated (seed
// 002 §3.4 and Appendix B).
//
// In "teacher" mode each record goes to the teacher model as one JSON object
// and every answer is checked against the source before it is used: the same
// turns, roles and calls, unchanged locked values, and free-text argument
// values whose meaning an equivalence judge confirms (ComplexEval's LLM-based
// matching, seed 004 §3.1 and Fig 10). The answer's text is kept as the
// teacher wrote it, Simplified-only characters repaired one by one (s2twp
// is made for Simplified input and damages Taiwan Traditional text:
// 演算法→演演算法). In "convert" mode no model is involved: the translatable
// text of a record holding Simplified-only characters is converted with
// s2twp only. Every s2twp conversion (package zhconv: OpenCC's algorithm
// and dictionaries) is read back against its source (intact.go), and a
// damaged one rejects the record.
//
// Choices the papers leave open:
//   - Tool results are translated like the rest of the conversation
//     (Appendix B excludes only "functions"); their keys and locked values
//     are checked, their free text is not judged, since no call depends on it.
//   - Parallel calls may come back reordered: they are aligned to the source
//     by Hungarian assignment and written back in the source's order. Calls
//     that only free text tells apart are aligned on the judge's verdicts
//     when the first alignment fails them.
//   - Open-world records (seed 000): the tools a meta_tool result returns
//     lock the later calls and results as listed tools do, and the result
//     itself, a tool definition, keeps its bytes (see scope).
//   - Locked values are locked against translation, not against script
//     conversion: after the checks, locked values holding Simplified-only
//     characters (a Chinese e-mail address, URL or date) are converted with
//     s2twp, and so are their copies in the text, so no Simplified-only
//     character is left outside keys and what the tool definitions fix
//     (see converter).
//   - Beyond OpenCC, Simplified-only characters that s2twp leaves (OpenCC
//     keeps proper names such as 恒生银行) are repaired one by one.
//   - Attempts counts answers, the first included.
package translate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
)

// Version is bumped whenever the stage's output for the same input and
// settings changes (prompt wording lives in the template hash instead).
const Version = 1

// Lang is the tag value set on translated records (key "lang").
const Lang = "zh-TW"

// Reject reasons. Every record the stage gives up on carries one of these.
const (
	ReasonInvalidJSON       = "translate_invalid_json"       // the answer is not the requested JSON object
	ReasonToolsChanged      = "translate_tools_changed"      // the answer's "functions", or a tool definition a meta_tool result returns, differ from the source's
	ReasonTurnsChanged      = "translate_turns_changed"      // turns added, dropped, reordered, or a role or text field lost
	ReasonCallDropped       = "translate_call_dropped"       // a call turn has fewer calls than the source
	ReasonCallAdded         = "translate_call_added"         // a call turn has more calls than the source
	ReasonFunctionRenamed   = "translate_function_renamed"   // a call's function name differs from the source's
	ReasonKeyChanged        = "translate_key_changed"        // an argument key was renamed, dropped or added
	ReasonEnumChanged       = "translate_enum_changed"       // an enum member was translated or replaced
	ReasonValueChanged      = "translate_value_changed"      // a locked value (number, boolean, date, ID, URL, e-mail, code, const) changed, or a value's type or list length
	ReasonResultsChanged    = "translate_results_changed"    // a tool turn's results changed in number, names or keys
	ReasonNotEquivalent     = "translate_not_equivalent"     // the judge found a translated argument value not equivalent to the source's
	ReasonUntranslated      = "translate_untranslated"       // the teacher left English text untranslated
	ReasonNotChinese        = "translate_not_chinese"        // Record in convert mode: the record has no Simplified Chinese text to convert (the stage passes or filters such records instead)
	ReasonSourceInvalid     = "translate_source_invalid"     // the source record's arguments or tool parameters are not valid JSON
	ReasonConversionDamaged = "translate_conversion_damaged" // the s2twp conversion of a text does not read back to it: a character dropped, doubled or replaced outside a Taiwan phrase substitution (see intact.go)
)

// Config is the `translate:` block of a pipeline stage. Zero values mean
// "default" (see Defaults).
type Config struct {
	// Mode is "teacher" (default): translate with the teacher and check every
	// answer; or "convert": OpenCC s2twp only, for Simplified Chinese sources,
	// no teacher needed.
	Mode string `yaml:"mode"`
	// Ratio is the share of records to translate, chosen per record with the
	// pipeline's seed; default 1 (all) unless Count is set. Records not chosen
	// pass through unchanged.
	Ratio float64 `yaml:"ratio"`
	// Count translates exactly this many records (or all, if fewer), chosen
	// with the pipeline's seed over the whole input; an alternative to Ratio.
	Count int `yaml:"count"`
	// Attempts is how many answers the teacher may give for one record,
	// the first ask included; each failed answer is re-asked with the
	// problems found. Default 3.
	Attempts int `yaml:"attempts"`
	// Prompt is the path of a template overriding prompts/translate.tmpl.
	Prompt string `yaml:"prompt"`
	// Keep is "translated" (default): a chosen record is replaced by its
	// translation, which keeps its ID; or "both": the original goes on
	// followed by the translation, whose ID gets the suffix "/zh-TW".
	Keep string `yaml:"keep"`
	// NonChinese says what convert mode does with a record whose text holds
	// no Chinese (nothing to convert, e.g. the English half of a mixed
	// source): "pass" (default) passes it on unchanged, "filter" drops it
	// (counted as filtered "not_chinese"). Such records are never chosen
	// for count. Teacher mode translates them and takes no setting.
	NonChinese string `yaml:"non_chinese,omitempty"`
}

// Modes and keep policies.
const (
	ModeTeacher    = "teacher"
	ModeConvert    = "convert"
	KeepTranslated = "translated"
	KeepBoth       = "both"
)

// Defaults fills zero fields with their defaults.
func (c *Config) Defaults() {
	if c.Mode == "" {
		c.Mode = ModeTeacher
	}
	if c.Keep == "" {
		c.Keep = KeepTranslated
	}
	if c.Mode == ModeConvert && c.NonChinese == "" {
		c.NonChinese = NonChinesePass
	}
	if c.Attempts == 0 {
		// Three answers: a first try and two re-asks carrying the problems
		// found; a teacher that fails three times on one record rarely
		// succeeds on the fourth, and every attempt costs a full translation.
		c.Attempts = 3
	}
	if c.Ratio == 0 && c.Count == 0 {
		c.Ratio = 1
	}
}

// Validate returns one error per problem, naming the field. Call Defaults
// first.
func (c *Config) Validate() []error {
	var errs []error
	switch c.Mode {
	case ModeTeacher, ModeConvert:
	default:
		errs = append(errs, fmt.Errorf("mode: %q is not one of teacher, convert", c.Mode))
	}
	switch c.Keep {
	case KeepTranslated, KeepBoth:
	default:
		errs = append(errs, fmt.Errorf("keep: %q is not one of translated, both", c.Keep))
	}
	if c.Ratio < 0 || c.Ratio > 1 {
		errs = append(errs, fmt.Errorf("ratio: %v is outside [0, 1]", c.Ratio))
	}
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count: %d is negative", c.Count))
	}
	if c.Ratio > 0 && c.Count > 0 {
		errs = append(errs, errors.New("ratio and count: set one of them, not both"))
	}
	if c.Attempts < 1 {
		errs = append(errs, fmt.Errorf("attempts: %d; want at least 1", c.Attempts))
	}
	switch {
	case c.Mode != ModeConvert && c.NonChinese != "":
		errs = append(errs, errors.New("non_chinese: applies to mode convert only (teacher mode translates every record)"))
	case c.Mode == ModeConvert && c.NonChinese != NonChinesePass && c.NonChinese != NonChineseFilter:
		errs = append(errs, fmt.Errorf("non_chinese: %q is not one of pass, filter", c.NonChinese))
	}
	if c.Mode == ModeConvert && c.Prompt != "" {
		errs = append(errs, errors.New("prompt: convert mode asks no teacher, so a prompt is never used"))
	}
	return errs
}

// EquivFunc decides whether translated is an acceptable rendering of the
// argument value orig of parameter param ("function.path"), by ComplexEval's
// criteria: the same value in another language or another form with the same
// meaning is equivalent. Both values are JSON; slot says where the value is
// ("translate/<record id>/m<turn>/c<call>", for the request and its
// errors). An error that carries a RejectReason rejects the record; any
// other error is systemic.
type EquivFunc func(ctx context.Context, slot, param string, orig, translated json.RawMessage) (bool, error)

// rejectf returns the *contract.Reject Record returns for a record it gives
// up on; reason is one of the Reason* codes.
func rejectf(reason, format string, args ...any) *contract.Reject {
	return &contract.Reject{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// A Translator translates records. It is safe for concurrent use.
type Translator struct {
	cfg    Config
	client llm.Client
	equiv  EquivFunc
	tmpl   *prompts.Template
	step   string // the stage name lineage steps carry (see NewStage)
}

// New returns a Translator for cfg (defaults applied and validated here).
// Teacher mode needs client and equiv; tmpl nil means the template at
// cfg.Prompt, or the built-in "translate" one. Convert mode uses none of
// them.
func New(cfg Config, client llm.Client, equiv EquivFunc, tmpl *prompts.Template) (*Translator, error) {
	cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("translate: %w", errors.Join(errs...))
	}
	if _, err := loadChinese(); err != nil {
		return nil, err
	}
	t := &Translator{cfg: cfg, client: client, equiv: equiv, tmpl: tmpl}
	if cfg.Mode == ModeConvert {
		return t, nil
	}
	if client == nil {
		return nil, errors.New("translate: teacher mode needs a teacher (llm client)")
	}
	if equiv == nil {
		return nil, errors.New("translate: teacher mode needs an equivalence judge")
	}
	if t.tmpl == nil {
		var err error
		if t.tmpl, err = prompts.Load("translate", cfg.Prompt); err != nil {
			return nil, fmt.Errorf("translate: %w", err)
		}
	}
	// Render against the samples so a broken override fails now, not on
	// the first record.
	if err := t.tmpl.Check(PromptSamples()...); err != nil {
		return nil, fmt.Errorf("translate: %w", err)
	}
	return t, nil
}

// Record translates one record. It returns the translated record: a clone of
// r tagged lang=zh-TW with a lineage step, whose tool definitions (listed or
// returned by meta_tool), function names, argument keys and enum and const
// members are r's own bytes and whose other locked values are r's converted
// with s2twp (unchanged unless they hold Simplified-only characters). A record whose
// answers never passed the checks (or, in convert mode, one that is not
// convertible) gives a *contract.Reject. Any
// other error — context, a fatal teacher error, an error of the equivalence
// judge without a reject reason — is systemic and passed through.
func (t *Translator) Record(ctx context.Context, r *record.Record) (*record.Record, error) {
	if err := checkSource(r); err != nil {
		return nil, err
	}
	if t.cfg.Mode == ModeConvert {
		// Convert leaves no Simplified-only character (its character repair
		// sees to that), so it fails only on a damaged conversion or when
		// there is nothing to convert: no Simplified-only character in
		// Chinese text (see convertible).
		if !convertible(r) {
			return nil, rejectf(ReasonNotChinese, "no translatable text holds a Simplified-only character; convert mode only converts Simplified Chinese")
		}
		return convert(r, t.stepName())
	}
	return t.teach(ctx, r)
}

// stepName is the stage name of the lineage steps t adds: the stage's name
// in pipeline.yaml, or "translate" outside a pipeline.
func (t *Translator) stepName() string {
	if t.step == "" {
		return "translate"
	}
	return t.step
}

// langName is how the prompt names the target language.
const langName = "Traditional Chinese as written in Taiwan (zh-TW)"

func joinProblems(ps []problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}
