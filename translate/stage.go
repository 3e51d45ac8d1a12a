package translate

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// A Stage runs a Translator over a pipeline's records. It has the methods of
// stages.Stage and stages.PlanSaver; the package does not import stages, so
// that the pipeline can embed Config. The pipeline runs it as a Planner only
// when Count is set: with Ratio, Plan reads nothing and Process needs no
// plan.
type Stage struct {
	t    *Translator
	rand func(id string) *rand.Rand
	// chosen holds the IDs picked by Plan when Config.Count is set; Plan
	// runs before any Process call and it is read-only afterwards.
	chosen  map[string]bool
	planned bool
}

// NewStage returns the stage for t, named name in pipeline.yaml: the
// lineage step of every translation carries that name. rnd returns the
// generator seeded for a record ID (stages.Env.Rand), so the choice of
// records depends only on the pipeline seed, the stage name and the ID.
func NewStage(t *Translator, name string, rnd func(id string) *rand.Rand) *Stage {
	t.step = name
	return &Stage{t: t, rand: rnd}
}

// Process translates r if it is chosen and passes it on unchanged otherwise
// (as it does records already tagged lang=zh-TW). A chosen record yields its
// translation, preceded by r itself when Keep is "both" (the translation's ID
// then gets the suffix "/zh-TW"). A record that cannot be translated is
// rejected in both keep modes, so every failure is counted. In convert mode
// a record that is not convertible (no Simplified-only character) is not
// converted and passes on unchanged with its tags; one without Chinese text
// at all (see hasChinese) is dropped instead with NonChinese "filter":
// Process returns no record and a *contract.Filter.
// Errors are those of Translator.Record, plus a systemic one when Count is
// set and Plan was not called.
func (s *Stage) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	if s.t.cfg.Mode == ModeConvert && r.Tag("lang") != Lang && !convertible(r) {
		if s.t.cfg.NonChinese == NonChineseFilter && !hasChinese(r) {
			return nil, &contract.Filter{Reason: FilterNotChinese}
		}
		return []*record.Record{r}, nil
	}
	ok, err := s.selected(r)
	if err != nil {
		return nil, err
	}
	if !ok {
		return []*record.Record{r}, nil
	}
	out, err := s.t.Record(ctx, r)
	if err != nil {
		return nil, err
	}
	if s.t.cfg.Keep == KeepBoth {
		out.ID = r.ID + "/" + Lang
		return []*record.Record{r, out}, nil
	}
	return []*record.Record{out}, nil
}

func (s *Stage) selected(r *record.Record) (bool, error) {
	if r.Tag("lang") == Lang {
		return false, nil
	}
	if s.t.cfg.Count > 0 {
		if !s.planned {
			return false, errors.New("translate: count is set but the stage was not planned (Plan must run before Process)")
		}
		return s.chosen[r.ID], nil
	}
	if s.t.cfg.Ratio >= 1 {
		return true, nil
	}
	return s.rand(r.ID).Float64() < s.t.cfg.Ratio, nil
}

// Plan picks the records to translate when Count is set: the Count records
// (not yet in zh-TW; in convert mode, with Chinese text) whose seeded draws
// are smallest, ties broken by ID, so
// the choice depends on the seed and the set of IDs, not on their order.
// The digest names the chosen set. With Ratio, Plan reads nothing and the
// digest names the ratio.
func (s *Stage) Plan(ctx context.Context, scan func(yield func(*record.Record) error) error) (string, error) {
	if s.t.cfg.Count == 0 {
		return "ratio=" + strconv.FormatFloat(s.t.cfg.Ratio, 'g', -1, 64), nil
	}
	type draw struct {
		key uint64
		id  string
	}
	var draws []draw
	err := scan(func(r *record.Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.Tag("lang") != Lang && (s.t.cfg.Mode != ModeConvert || convertible(r)) {
			// A copy: the ID may be a view of a row group's decoded
			// column, which the stage would keep alive with it.
			draws = append(draws, draw{s.rand(r.ID).Uint64(), strings.Clone(r.ID)})
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.SortFunc(draws, func(a, b draw) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.id, b.id))
	})
	draws = draws[:min(len(draws), s.t.cfg.Count)]
	slices.SortFunc(draws, func(a, b draw) int { return cmp.Compare(a.id, b.id) })
	s.chosen = make(map[string]bool, len(draws))
	h := sha256.New()
	for _, d := range draws {
		s.chosen[d.id] = true
		h.Write([]byte(d.id))
		h.Write([]byte{0})
	}
	s.planned = true
	return "count=" + strconv.Itoa(s.t.cfg.Count) + ":" + hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// What convert mode does with records without Chinese text (NonChinese),
// and the filter reason of those it drops.
const (
	NonChinesePass   = "pass"
	NonChineseFilter = "filter"
	FilterNotChinese = "not_chinese"
)

// convertible reports whether convert mode converts r: whether a Chinese
// translatable text of r (see chineseText) holds a Simplified-only
// character. A record
// without one is Traditional Chinese already, or written in characters
// both scripts share, and s2twp, made for Simplified input, would damage
// its Traditional text (演算法→演演算法, 反烏托邦→反烏託邦).
func convertible(r *record.Record) bool {
	for s := range translatable(r) {
		if _, ok := HasSimplifiedOnly(s.text); ok && chineseText(s.text) {
			return true
		}
	}
	return false
}

// hasChinese reports whether any translatable text of r holds Chinese
// characters: what convert mode needs to have something to convert.
func hasChinese(r *record.Record) bool {
	for s := range translatable(r) {
		if chineseText(s.text) {
			return true
		}
	}
	return false
}

// SavePlan writes the chosen IDs in order (stages.PlanSaver): a count,
// then each ID, every number an unsigned varint and each ID preceded by its
// length. With Ratio there is nothing to save.
func (s *Stage) SavePlan(w io.Writer) error {
	if s.t.cfg.Count == 0 {
		return nil
	}
	if !s.planned {
		return errors.New("translate: no plan to save")
	}
	b := binary.AppendUvarint(nil, uint64(len(s.chosen)))
	for _, id := range slices.Sorted(maps.Keys(s.chosen)) {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	_, err := w.Write(b)
	return err
}

// LoadPlan reads what SavePlan wrote.
func (s *Stage) LoadPlan(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.t.cfg.Count == 0 {
		if len(b) > 0 {
			return errors.New("translate: a plan of chosen records, but count is not set")
		}
		return nil
	}
	bad := errors.New("translate: truncated or corrupt plan")
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return bad
	}
	b = b[k:]
	chosen := make(map[string]bool, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return bad
		}
		chosen[string(b[k:k+int(l)])] = true
		b = b[k+int(l):]
	}
	if len(b) > 0 {
		return bad
	}
	s.chosen, s.planned = chosen, true
	return nil
}
