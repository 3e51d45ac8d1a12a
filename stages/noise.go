package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/prompts"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// NoiseConfig is the `noise:` stage (seed 000, §3.2, A.2–A.3, Fig 7): the
// teacher rewrites the arguments of every meta_tool call, so the tool
// description the model learns to write differs in wording from the
// definition meta_tool returns, as it would with a real retriever. Only the
// call changes; the tool turn after it still returns the original
// definition.
//
//	stages:
//	  - noise:
//	      threshold: 0.9
//
// The teacher sees the call as {"name": "meta_tool", "arguments":
// {"tool_description": …, "param_description": […]}} (prompt
// prompts/noise_meta_tool.tmpl) and must answer with that object rewritten.
// An answer is accepted when, in this order (the first failing check is
// the reason):
//  1. noise_invalid_json: it is one JSON value (a ``` fence around it is
//     tolerated) with nothing after it;
//  2. noise_bad_shape: it is an object with exactly the keys "name" and
//     "arguments"; name is "meta_tool"; arguments is an object with exactly
//     "tool_description" (a non-empty string) and "param_description" (an
//     array of non-empty strings, as many as the original has); no key
//     appears twice;
//  3. noise_low_similarity: the Algorithm-1 similarity of the original
//     (query) to the rewrite (value), with alpha, is at least threshold.
//
// A failed answer is asked again, up to attempts times; then the record is
// rejected with the last failure's reason (or an llm_* reason when the
// teacher never answered).
//
// The accepted arguments replace the call's, re-encoded compactly with the
// keys in the order above. The tag noise_similarity holds the lowest
// similarity over the record's rewritten calls ("%.4f"). Records without
// meta_tool calls pass through unchanged.
//
// Offline, the stand-in rewrites descriptions by rule (seeded by the call):
// meaning-preserving synonym swaps ("Get" → "Retrieve", "e.g." → "for
// example", …), dropping a leading article of a parameter description, and
// toggling a final period. It tries up to eight variants, from most to
// least changed, and answers with the first whose similarity under the
// run's embedder reaches threshold; if none does, it answers with the call
// unchanged (similarity 1), so the offline run never rejects for
// similarity.
type NoiseConfig struct {
	// Prompt overrides prompts/noise_meta_tool.tmpl with a txtar template
	// file, relative to pipeline.yaml.
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`
	// Attempts is how many times one call is asked before the record is
	// rejected; default 3.
	Attempts int `yaml:"attempts" json:"attempts"`
	// Threshold is the lowest accepted similarity, in (0, 1]; default 0.90
	// (seed 000, A.3).
	Threshold float64 `yaml:"threshold" json:"threshold"`
	// Alpha weighs tool against parameter descriptions in Algorithm 1, in
	// [0, 1]; default 0.5.
	Alpha *float64 `yaml:"alpha" json:"alpha"`
}

// Reject reasons of the noise stage.
const (
	NoiseInvalidJSON   = "noise_invalid_json"
	NoiseBadShape      = "noise_bad_shape"
	NoiseLowSimilarity = "noise_low_similarity"
)

func (c *NoiseConfig) defaults() {
	if c.Attempts == 0 {
		c.Attempts = 3
	}
	if c.Threshold == 0 {
		c.Threshold = 0.90
	}
	if c.Alpha == nil {
		c.Alpha = new(float64(metaToolDefaultAlpha))
	}
}

func (c *NoiseConfig) validate() []string {
	var probs []string
	if c.Attempts < 1 {
		probs = append(probs, fmt.Sprintf("attempts: must be at least 1, got %d", c.Attempts))
	}
	if !(c.Threshold > 0 && c.Threshold <= 1) {
		probs = append(probs, fmt.Sprintf("threshold: %v is outside (0, 1]", c.Threshold))
	}
	if a := ratioOr(c.Alpha, metaToolDefaultAlpha); !(a >= 0 && a <= 1) {
		probs = append(probs, fmt.Sprintf("alpha: %v is outside [0, 1]", a))
	}
	return probs
}

// version 2: a rewrite equal to the original has similarity 1 exactly (a
// float sum came out just below it, and threshold 1 rejected identical
// rewrites). Requests keep version 1 (noiseRequests): none is paid again.
// 3: a reasoning model's thinking written into the answer is taken out of
// it (llm.SplitThinking) before the rewrite is read.
func (c *NoiseConfig) version() int { return 3 }

// noiseRequests is the version in the teacher requests' stage name.
const noiseRequests = 1

func (c *NoiseConfig) build(env *Env) (Stage, error) {
	if env.Teacher == nil {
		return nil, errors.New("noise: no teacher configured")
	}
	if env.Embedder == nil {
		return nil, errors.New("noise: the similarity check needs an embedder, and none is configured")
	}
	q, err := toollib.QueryOf(record.Sample().Tools[0])
	if err != nil {
		return nil, err
	}
	sample, err := noiseData(q)
	if err != nil {
		return nil, err
	}
	tmpl, err := env.Prompt("noise_meta_tool", "prompt", c.Prompt, sample)
	if err != nil {
		return nil, err
	}
	return &noiseStage{cfg: *c, env: env, tmpl: tmpl, alpha: ratioOr(c.Alpha, metaToolDefaultAlpha)}, nil
}

type noiseStage struct {
	cfg   NoiseConfig
	env   *Env
	tmpl  *prompts.Template
	alpha float64
}

func (s *noiseStage) Concurrency() int { return max(1, s.env.Capacity) }

func (s *noiseStage) writesTeacherText() bool { return true }

func (s *noiseStage) usesModels() (teacher, embedder bool) { return true, true }

// noiseCall is a meta_tool call as the prompt shows it and the answer must
// give it back.
type noiseCall struct {
	Name      string        `json:"name"`
	Arguments toollib.Query `json:"arguments"`
}

// noisePrompt is what prompts/noise_meta_tool.tmpl renders.
type noisePrompt struct {
	Call string // the meta_tool call to rewrite, as compact JSON {"name", "arguments"}
}

// noiseData is the prompt data of the meta_tool call asking for q.
func noiseData(q toollib.Query) (noisePrompt, error) {
	b, err := jsonout.Marshal(noiseCall{Name: verify.MetaTool, Arguments: q})
	return noisePrompt{Call: string(b)}, err
}

type noiseSlot struct{ msg, call int }

// Process rewrites every meta_tool call of r (requests in parallel). The
// record is rejected when any call fails; the error reported is that of
// the earliest call, so it does not depend on which answer came first, and
// errors that are not rejects win over rejects.
func (s *noiseStage) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	var slots []noiseSlot
	for i, m := range r.Messages {
		if m.Role != record.RoleAssistant {
			continue
		}
		for j, c := range m.Calls {
			if c.Name == verify.MetaTool {
				slots = append(slots, noiseSlot{i, j})
			}
		}
	}
	if len(slots) == 0 {
		return []*record.Record{r}, nil
	}
	args := make([]json.RawMessage, len(slots))
	sims := make([]float64, len(slots))
	resps := make([]llm.Response, len(slots))
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for k, sl := range slots {
		wg.Go(func() {
			args[k], sims[k], resps[k], errs[k] = s.rewrite(ctx, r, sl)
		})
	}
	wg.Wait()
	var reject error
	for k, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("messages[%d].calls[%d]: %w", slots[k].msg, slots[k].call, err)
		if _, ok := contract.ReasonOf(err); !ok {
			return nil, err
		}
		if reject == nil {
			reject = err
		}
	}
	if reject != nil {
		return nil, reject
	}
	out := r.Clone()
	low := math.Inf(1)
	for k, sl := range slots {
		out.Messages[sl.msg].Calls[sl.call].Arguments = args[k]
		low = min(low, sims[k])
	}
	out.SetTag("noise_similarity", strconv.FormatFloat(low, 'f', 4, 64))
	out.AddStep(s.env.Stage, resps[0].Provider, resps[0].Model)
	return []*record.Record{out}, nil
}

// noiseAnswer is an accepted rewrite.
type noiseAnswer struct {
	q   toollib.Query
	sim float64
}

// rewrite asks for one call's rewrite and returns the new arguments.
func (s *noiseStage) rewrite(ctx context.Context, r *record.Record, sl noiseSlot) (json.RawMessage, float64, llm.Response, error) {
	orig, err := parseMetaToolArgs(r.Messages[sl.msg].Calls[sl.call].Arguments)
	if err != nil {
		return nil, 0, llm.Response{}, contract.Rejectf(NoiseBadShape, "the input meta_tool call: %v", err)
	}
	data, err := noiseData(orig)
	if err != nil {
		return nil, 0, llm.Response{}, err
	}
	msgs, err := s.tmpl.Render(data)
	if err != nil {
		return nil, 0, llm.Response{}, err
	}
	// Embed the original first: if the embedder is down, nothing is asked.
	ov, err := toollib.Embed(ctx, s.env.Embedder, []toollib.Query{orig}, 0)
	if err != nil {
		return nil, 0, llm.Response{}, fmt.Errorf("similarity: %w", err)
	}
	var embedErr error // the embedder failed: not the answer's fault
	simTo := func(q toollib.Query) (float64, error) {
		if embedErr != nil {
			return 0, embedErr
		}
		if q.Description == orig.Description && slices.Equal(q.Params, orig.Params) {
			return 1, nil // the cosine of a vector with itself, without rounding
		}
		v, err := toollib.Embed(ctx, s.env.Embedder, []toollib.Query{q}, 0)
		if err != nil {
			embedErr = err
			return 0, err
		}
		return toollib.Score(s.alpha, ov[0], v[0]), nil
	}
	req := llm.Request{
		Stage:    "noise@" + strconv.Itoa(noiseRequests),
		Template: s.tmpl.Hash,
		Messages: msgs,
		Slot:     fmt.Sprintf("%s/turn%d/call%d", r.ID, sl.msg, sl.call),
		Offline:  func() (string, error) { return s.standIn(orig, []byte(data.Call), simTo) },
	}
	parse := func(content string) (noiseAnswer, error) {
		q, err := parseNoiseAnswer(content, len(orig.Params))
		if err != nil {
			return noiseAnswer{}, err
		}
		sim, err := simTo(q)
		if err != nil {
			return noiseAnswer{}, err
		}
		if sim < s.cfg.Threshold {
			return noiseAnswer{}, contract.Rejectf(NoiseLowSimilarity, "similarity %.4f to the original is below %.4f", sim, s.cfg.Threshold)
		}
		return noiseAnswer{q, sim}, nil
	}
	ans, resp, err := llm.Ask(ctx, s.env.Teacher, req, s.cfg.Attempts, parse)
	if embedErr != nil {
		return nil, 0, resp, fmt.Errorf("similarity: %w", embedErr)
	}
	if err != nil {
		return nil, 0, resp, err
	}
	b, err := jsonout.Marshal(ans.q)
	return b, ans.sim, resp, err
}

// parseMetaToolArgs reads the arguments of an existing meta_tool call.
func parseMetaToolArgs(raw json.RawMessage) (toollib.Query, error) {
	return metaToolArguments(raw, -1)
}

// parseNoiseAnswer checks a teacher's answer (see NoiseConfig) and returns
// the rewritten arguments; wantParams is the original's parameter count.
func parseNoiseAnswer(content string, wantParams int) (toollib.Query, error) {
	body := llm.StripFence(content)
	if !json.Valid([]byte(body)) {
		var v any
		err := json.Unmarshal([]byte(body), &v)
		return toollib.Query{}, contract.Rejectf(NoiseInvalidJSON, "the answer is not one JSON value: %v", err)
	}
	keys, vals, err := toollib.ObjectMembers([]byte(body))
	if err != nil {
		return toollib.Query{}, contract.Rejectf(NoiseBadShape, "the answer: %v", err)
	}
	if err := exactKeys(keys, "name", "arguments"); err != nil {
		return toollib.Query{}, contract.Rejectf(NoiseBadShape, "the answer: %v", err)
	}
	var name string
	if err := json.Unmarshal(vals[indexOf(keys, "name")], &name); err != nil || name != verify.MetaTool {
		return toollib.Query{}, contract.Rejectf(NoiseBadShape, "the answer's name is %s, want \"meta_tool\"", bytes.TrimSpace(vals[indexOf(keys, "name")]))
	}
	q, err := metaToolArguments(vals[indexOf(keys, "arguments")], wantParams)
	if err != nil {
		return toollib.Query{}, contract.Rejectf(NoiseBadShape, "the answer's arguments: %v", err)
	}
	return q, nil
}

// metaToolArguments checks a meta_tool arguments object: exactly
// tool_description (non-empty string) and param_description (array of
// non-empty strings, wantParams of them unless wantParams < 0).
func metaToolArguments(raw json.RawMessage, wantParams int) (toollib.Query, error) {
	keys, vals, err := toollib.ObjectMembers(raw)
	if err != nil {
		return toollib.Query{}, err
	}
	if err := exactKeys(keys, "tool_description", "param_description"); err != nil {
		return toollib.Query{}, err
	}
	var q toollib.Query
	if err := json.Unmarshal(vals[indexOf(keys, "tool_description")], &q.Description); err != nil {
		return q, errors.New("tool_description is not a string")
	}
	if strings.TrimSpace(q.Description) == "" {
		return q, errors.New("tool_description is empty")
	}
	pd := bytes.TrimSpace(vals[indexOf(keys, "param_description")])
	if len(pd) == 0 || pd[0] != '[' || json.Unmarshal(pd, &q.Params) != nil {
		return q, errors.New("param_description is not an array of strings")
	}
	for i, p := range q.Params {
		if strings.TrimSpace(p) == "" {
			return q, fmt.Errorf("param_description[%d] is empty", i)
		}
	}
	if q.Params == nil {
		q.Params = []string{}
	}
	if wantParams >= 0 && len(q.Params) != wantParams {
		return q, fmt.Errorf("param_description has %d entries, the original %d", len(q.Params), wantParams)
	}
	return q, nil
}

// exactKeys reports missing and unexpected keys.
func exactKeys(keys []string, want ...string) error {
	var missing, extra []string
	for _, w := range want {
		if indexOf(keys, w) < 0 {
			missing = append(missing, strconv.Quote(w))
		}
	}
	for _, k := range keys {
		if indexOf(want, k) < 0 {
			extra = append(extra, strconv.Quote(k))
		}
	}
	switch {
	case len(missing) > 0 && len(extra) > 0:
		return fmt.Errorf("missing key(s) %s and unexpected key(s) %s", strings.Join(missing, ", "), strings.Join(extra, ", "))
	case len(missing) > 0:
		return fmt.Errorf("missing key(s) %s", strings.Join(missing, ", "))
	case len(extra) > 0:
		return fmt.Errorf("unexpected key(s) %s", strings.Join(extra, ", "))
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// standIn is the offline teacher (see NoiseConfig); simTo scores a
// rewrite against the original.
func (s *noiseStage) standIn(orig toollib.Query, callJSON []byte, simTo func(toollib.Query) (float64, error)) (string, error) {
	h := fnv.New64a()
	h.Write(callJSON)
	seed := h.Sum64()
	for v, p := range []float64{0.9, 0.75, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1} {
		rng := rand.New(rand.NewPCG(seed, uint64(v)))
		q := toollib.Query{Description: paraphrase(orig.Description, p, false, rng)}
		for _, d := range orig.Params {
			q.Params = append(q.Params, paraphrase(d, p, true, rng))
		}
		if q.Params == nil {
			q.Params = []string{}
		}
		sim, err := simTo(q)
		if err != nil {
			return "", err
		}
		if sim >= s.cfg.Threshold {
			b, err := jsonout.Marshal(noiseCall{Name: verify.MetaTool, Arguments: q})
			return string(b), err
		}
	}
	return string(callJSON), nil
}

// noiseSynonyms maps a lower-case word or phrase to words that mean the
// same in a tool or parameter description.
var noiseSynonyms = map[string][]string{
	"get":         {"retrieve", "fetch", "obtain"},
	"retrieve":    {"get", "fetch", "obtain"},
	"retrieves":   {"gets", "fetches", "obtains"},
	"fetch":       {"retrieve", "get"},
	"fetches":     {"retrieves", "gets"},
	"gets":        {"retrieves", "fetches"},
	"obtain":      {"get", "retrieve"},
	"find":        {"locate", "look up"},
	"finds":       {"locates", "looks up"},
	"calculate":   {"compute", "work out"},
	"calculates":  {"computes", "works out"},
	"compute":     {"calculate"},
	"computes":    {"calculates"},
	"generate":    {"create", "produce"},
	"generates":   {"creates", "produces"},
	"create":      {"generate", "make"},
	"creates":     {"generates", "makes"},
	"check":       {"verify"},
	"checks":      {"verifies"},
	"verify":      {"check"},
	"show":        {"display"},
	"display":     {"show"},
	"provide":     {"supply", "give"},
	"provides":    {"supplies", "gives"},
	"specified":   {"given"},
	"given":       {"specified"},
	"specific":    {"particular"},
	"particular":  {"specific"},
	"information": {"details", "info"},
	"details":     {"information"},
	"info":        {"information"},
	"identifier":  {"ID"},
	"id":          {"identifier"},
	"desired":     {"wanted", "requested"},
	"required":    {"needed"},
	"needed":      {"required"},
	"amount":      {"quantity"},
	"quantity":    {"amount"},
	"type":        {"kind"},
	"kind":        {"type"},
	"maximum":     {"max", "highest"},
	"minimum":     {"min", "lowest"},
	"e.g.":        {"for example", "such as"},
	"for example": {"e.g."},
	"such as":     {"like", "e.g."},
	"获取":          {"取得", "得到"},
	"取得":          {"获取"},
	"查询":          {"查找", "检索"},
	"查找":          {"查询"},
	"指定":          {"给定"},
	"给定":          {"指定"},
	"信息":          {"资讯"},
	"生成":          {"产生"},
	"产生":          {"生成"},
	"搜索":          {"查找", "搜寻"},
	"名称":          {"名字"},
	"名字":          {"名称"},
	"位置":          {"地点"},
	"地点":          {"位置"},
	"当前":          {"目前"},
	"目前":          {"当前"},
	"列表":          {"清单"},
	"类型":          {"种类"},
	"数量":          {"数目"},
	"用户":          {"使用者"},
}

// paraphrase rewrites text by rule: each synonym-table match is swapped
// with probability p; a parameter description may lose a leading "The"/"A";
// with probability p/2 a final period ("." or "。") is dropped, or one is
// added after a final ASCII letter or digit ("."), or Han character ("。").
func paraphrase(text string, p float64, param bool, rng *rand.Rand) string {
	var b strings.Builder
	for i := 0; i < len(text); {
		if alt, n, ok := synonymAt(text[:i], text[i:]); ok && rng.Float64() < p {
			rep := alt[rng.IntN(len(alt))]
			if titleCase(text[i : i+n]) {
				rep = upperFirstRune(rep)
			}
			b.WriteString(rep)
			i += n
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		b.WriteRune(r)
		i += n
	}
	out := b.String()
	if param && rng.Float64() < p/2 {
		for _, art := range []string{"The ", "A ", "An "} {
			if rest, ok := strings.CutPrefix(out, art); ok && rest != "" {
				out = upperFirstRune(rest)
				break
			}
		}
	}
	if rng.Float64() < p/2 {
		r := lastRune(out)
		switch {
		case r == '.' && !strings.HasSuffix(out, ".."):
			out = strings.TrimSuffix(out, ".")
		case r == '。':
			out = strings.TrimSuffix(out, "。")
		case r < utf8.RuneSelf && isWordRune(r):
			out += "."
		case unicode.Is(unicode.Han, r):
			out += "。"
		}
	}
	if strings.TrimSpace(out) == "" {
		return text
	}
	return out
}

// synonymAt finds the longest synonym-table key at the start of s (case
// folded), and returns its alternatives and byte length. A Latin key must
// stand as a whole word: before is the text before s.
func synonymAt(before, s string) ([]string, int, bool) {
	best, bestLen := []string(nil), 0
	for key, alts := range noiseSynonyms {
		if len(key) <= bestLen || len(s) < len(key) || !strings.EqualFold(s[:len(key)], key) {
			continue
		}
		if key[0] < utf8.RuneSelf {
			if before != "" && isWordRune(lastRune(before)) {
				continue
			}
			if rest := s[len(key):]; rest != "" && isWordRune(firstRune(rest)) && !strings.HasSuffix(key, ".") {
				continue
			}
		}
		best, bestLen = alts, len(key)
	}
	return best, bestLen, bestLen > 0
}

// titleCase reports whether s starts with an upper-case letter and has no
// other upper-case letters ("Get", not "ID").
func titleCase(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	if !unicode.IsUpper(r) {
		return false
	}
	return !strings.ContainsFunc(s[n:], unicode.IsUpper)
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func upperFirstRune(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
