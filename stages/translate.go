package stages

import (
	"context"
	"encoding/json"
	"io"

	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/translate"
	"github.com/augmentdata/augment/verify"
)

// TranslateConfig is the `translate:` stage: Traditional Chinese (Taiwan)
// versions of records with their structure locked (seed 002 §3.4 and App B).
// The settings are those of package translate: mode (teacher | convert),
// ratio or count, attempts, prompt, keep (translated | both), non_chinese
// (convert mode: pass | filter records without Chinese text).
//
// In teacher mode every answer is checked — tool definitions (listed, and
// those meta_tool results return) byte-identical, same turns and calls,
// names, keys, enum members and fixed values unchanged,
// changed free-text arguments equivalent in meaning (verify.Equivalent) —
// and re-asked, then rejected with the failed check as the reason; the
// answer's Simplified-only characters are repaired one by one. Convert mode
// applies OpenCC s2twp to records holding Simplified-only characters only
// and needs no teacher. Every s2twp conversion must read back to its source
// (translate_conversion_damaged).
// Teacher mode has no offline stand-in: under provider offline it stops
// with a clear message.
type TranslateConfig struct {
	translate.Config `yaml:",inline"`
	// EquivPrompt is the path of a template overriding
	// prompts/equiv_value.tmpl, the question the equivalence judge asks
	// about a changed free-text argument (teacher mode only).
	EquivPrompt string `yaml:"equiv_prompt,omitempty" json:"equiv_prompt,omitempty"`
}

func (c *TranslateConfig) defaults() { c.Config.Defaults() }

// version is translate.Version, which is also part of the teacher's request
// keys, plus the changes of the stage's output that leave teacher answers
// as they were (so cached translations stay valid): +1 since convert mode
// passes or filters records without Chinese text instead of rejecting them;
// +2 since s2twp segments as OpenCC does (Taiwan phrases never across
// segments), with OpenCC 1.1.6's dictionaries, and damaged conversions are
// rejected; +3 since an answer cut off at the token limit is asked again
// without feedback on it, and the last such is llm_truncated; +4 since the
// tools a meta_tool result returns lock later calls and results (open-world
// records), the result itself keeps its bytes, locked values are converted
// with s2twp like the text quoting them, and parallel calls told apart only
// by free text are aligned on the judge's verdicts (requests and prompts
// unchanged: cached answers and verdicts stay valid); +5 since s2twp no
// longer runs over Traditional text, which it damaged (演算法→演演算法):
// teacher answers are kept with their Simplified-only characters repaired
// one by one, and convert mode converts only records holding a
// Simplified-only character and leaves Japanese and Korean text alone
// and strings at an enum position that are not members are converted
// (teacher requests unchanged; judge requests change only where the
// conversion changed the value shown); +6 since the thinking written into
// an answer is taken out of it (llm.SplitThinking) and an answer that is
// thinking only is asked again (llm_thinking_only); +7 since a text field
// holding kana or hangul, or mostly left in the source language with a
// Chinese word or two, is translate_untranslated (teacher requests
// unchanged; re-asks carry the new feedback); +8 since a string holding a
// JSON object or array is compared as JSON (keys and locked values inside
// must stay, free text inside is translated and judged, the source's JSON
// text kept with only its strings rewritten); +9 since convert mode does the
// same with such a string (its keys keep their bytes, its strings are
// converted one by one, its locked values are units) instead of converting
// it as one text, and its keys no longer count as Chinese text (records
// without JSON text convert as before; teacher requests unchanged).
func (c *TranslateConfig) version() int { return translate.Version + 9 }

func (c *TranslateConfig) validate() []string {
	var probs []string
	for _, err := range c.Config.Validate() {
		probs = append(probs, err.Error())
	}
	if c.Mode == translate.ModeConvert && c.EquivPrompt != "" {
		probs = append(probs, "equiv_prompt: convert mode asks no teacher, so a prompt is never used")
	}
	return probs
}

func (c *TranslateConfig) build(env *Env) (Stage, error) {
	tmpl, err := env.Prompt("translate", "prompt", c.Prompt, translate.PromptSamples()...)
	if err != nil {
		return nil, err
	}
	// The equivalence judge's prompt is loaded only when overridden, so
	// that the stage's fingerprint stays as it was without the setting.
	var equivPrompts map[string]*prompts.Template
	if c.EquivPrompt != "" {
		t, err := env.Prompt("equiv_value", "equiv_prompt", c.EquivPrompt, verify.PromptSamples("equiv_value")...)
		if err != nil {
			return nil, err
		}
		equivPrompts = map[string]*prompts.Template{"equiv_value": t}
	}
	equiv := func(ctx context.Context, slot, param string, a, b json.RawMessage) (bool, error) {
		return verify.Equivalent(ctx, verify.LLMEnv{Client: env.Teacher, Stage: env.Stage, Slot: slot, Prompts: equivPrompts}, param, a, b)
	}
	cfg := c.Config
	cfg.Prompt = "" // loaded above, relative to pipeline.yaml
	t, err := translate.New(cfg, env.Teacher, equiv, tmpl)
	if err != nil {
		return nil, err // (translate's errors say "translate: …")
	}
	tr := &translator{st: translate.NewStage(t, env.Stage, env.Rand), env: env, teacher: cfg.Mode != translate.ModeConvert}
	if cfg.Count > 0 {
		return countTranslator{tr}, nil
	}
	return tr, nil
}

// translator gives translate.Stage the teacher's concurrency. Without
// count it is no Planner: each record is drawn on its own (ratio, seeded by
// its ID), so the stage reads nothing before it starts and runs in the
// group of the stage before it (runStages), on the records of an ingest or
// a stage that keeps no shards too (stageProblems). Its shards' keys have
// no plan; those of an output dir made when it was a Planner hold the plan
// "ratio=<ratio>", which openPass takes from the stage's manifest as long
// as its settings stand, so they stay up to date.
type translator struct {
	st      *translate.Stage
	env     *Env
	teacher bool // teacher mode (convert mode asks no one)
}

func (t *translator) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	return t.st.Process(ctx, r)
}

func (t *translator) usesModels() (teacher, embedder bool) { return t.teacher, false }

func (t *translator) Concurrency() int { return max(1, t.env.Capacity) }

// countTranslator is translate with count, a PlanSaver: its plan reads
// the whole input to choose the count records with the smallest draws.
type countTranslator struct{ *translator }

func (t countTranslator) Plan(ctx context.Context, scan func(yield func(*record.Record) error) error) (string, error) {
	return t.st.Plan(ctx, scan)
}

func (t countTranslator) SavePlan(w io.Writer) error { return t.st.SavePlan(w) }

func (t countTranslator) LoadPlan(r io.Reader) error { return t.st.LoadPlan(r) }
