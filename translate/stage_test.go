package translate

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// seeded mimics stages.Env.Rand: a generator per record ID.
func seeded(seed uint64) func(id string) *rand.Rand {
	return func(id string) *rand.Rand {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], seed)
		h.Write(b[:])
		h.Write([]byte(id))
		s := h.Sum64()
		return rand.New(rand.NewPCG(s, s))
	}
}

func zhRecords(n int) []*record.Record {
	rs := make([]*record.Record, n)
	for i := range rs {
		rs[i] = &record.Record{ID: "zh:" + strconv.Itoa(i), Messages: []record.Message{{Role: "user", Content: "请帮我查一下网络设置"}}}
	}
	return rs
}

func newConvertStage(t *testing.T, cfg Config, seed uint64) *Stage {
	t.Helper()
	cfg.Mode = ModeConvert
	tr, err := New(cfg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewStage(tr, "translate", seeded(seed))
}

func run(t *testing.T, s *Stage, rs []*record.Record) (out []*record.Record) {
	t.Helper()
	for _, r := range rs {
		got, err := s.Process(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got...)
	}
	return out
}

func translatedIDs(rs []*record.Record) []string {
	var ids []string
	for _, r := range rs {
		if r.Tag("lang") == Lang {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func TestStageRatio(t *testing.T) {
	rs := zhRecords(400)
	a := translatedIDs(run(t, newConvertStage(t, Config{Ratio: 0.25}, 7), rs))
	if len(a) < 60 || len(a) > 140 {
		t.Errorf("ratio 0.25 of 400 chose %d", len(a))
	}
	// Same seed: same choice, whatever the order of arrival.
	rev := slices.Clone(rs)
	slices.Reverse(rev)
	b := translatedIDs(run(t, newConvertStage(t, Config{Ratio: 0.25}, 7), rev))
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Error("choice depends on record order")
	}
	c := translatedIDs(run(t, newConvertStage(t, Config{Ratio: 0.25}, 8), rs))
	slices.Sort(c)
	if slices.Equal(a, c) {
		t.Error("choice does not depend on the seed")
	}
	all := run(t, newConvertStage(t, Config{}, 7), rs)
	if len(translatedIDs(all)) != 400 {
		t.Error("default ratio does not translate everything")
	}
}

func TestStageCount(t *testing.T) {
	rs := zhRecords(50)
	rs = append(rs, mustConvertRecord(t, &record.Record{ID: "done:1", Messages: []record.Message{{Role: "user", Content: "已翻譯"}}}))
	scan := func(order []*record.Record) func(yield func(*record.Record) error) error {
		return func(yield func(*record.Record) error) error {
			for _, r := range order {
				if err := yield(r); err != nil {
					return err
				}
			}
			return nil
		}
	}
	s := newConvertStage(t, Config{Count: 10}, 3)
	if _, err := s.Process(t.Context(), rs[0]); err == nil {
		t.Fatal("count without Plan must be an error")
	}
	d1, err := s.Plan(t.Context(), scan(rs))
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, s, rs)
	if len(out) != len(rs) {
		t.Errorf("%d records out of %d", len(out), len(rs))
	}
	got := translatedIDs(out)
	if len(got) != 11 || !slices.Contains(got, "done:1") { // 10 chosen + the one already in zh-TW, passed through
		t.Errorf("translated %v", got)
	}
	rev := slices.Clone(rs)
	slices.Reverse(rev)
	s2 := newConvertStage(t, Config{Count: 10}, 3)
	d2, err := s2.Plan(t.Context(), scan(rev))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("plan digest depends on order: %s vs %s", d1, d2)
	}
	s3 := newConvertStage(t, Config{Count: 100}, 3)
	if _, err := s3.Plan(t.Context(), scan(rs)); err != nil {
		t.Fatal(err)
	}
	if n := len(translatedIDs(run(t, s3, rs))); n != len(rs) {
		t.Errorf("count above the input size translated %d of %d", n, len(rs))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := newConvertStage(t, Config{Count: 1}, 3).Plan(ctx, scan(rs)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled plan: %v", err)
	}
	if d, err := newConvertStage(t, Config{Ratio: 0.5}, 3).Plan(t.Context(), func(func(*record.Record) error) error {
		t.Error("ratio mode scanned the input")
		return nil
	}); err != nil || d != "ratio=0.5" {
		t.Errorf("ratio plan: %q %v", d, err)
	}
}

func TestStageKeepBoth(t *testing.T) {
	rs := zhRecords(1)
	out := run(t, newConvertStage(t, Config{Keep: KeepBoth}, 1), rs)
	if len(out) != 2 || out[0] != rs[0] || out[1].ID != "zh:0/zh-TW" || out[1].Messages[0].Content != "請幫我查一下網路設定" {
		t.Fatalf("keep both: %+v", out)
	}
	if rs[0].Messages[0].Content != "请帮我查一下网络设置" || rs[0].Tag("lang") != "" {
		t.Error("the original was modified")
	}
}

// TestStageConvertMixedInput: in convert mode a record without Chinese
// text (the English half of a mixed source) is never rejected as
// translate_not_chinese: it passes on unchanged (non_chinese: pass, the
// default) or is dropped as filtered (non_chinese: filter); count picks
// only records with something to convert.
func TestStageConvertMixedInput(t *testing.T) {
	en := &record.Record{ID: "en:1", Messages: []record.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "Hi! How can I help?"}}}
	zh := zhRecords(2)
	in := []*record.Record{zh[0], en, zh[1]}
	for _, keep := range []string{KeepTranslated, KeepBoth} {
		out := run(t, newConvertStage(t, Config{Keep: keep}, 1), in)
		var ids []string
		for _, r := range out {
			ids = append(ids, r.ID)
		}
		want := []string{"zh:0", "en:1", "zh:1"}
		if keep == KeepBoth {
			want = []string{"zh:0", "zh:0/zh-TW", "en:1", "zh:1", "zh:1/zh-TW"}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("keep %s: ids %v, want %v", keep, ids, want)
		}
		for _, r := range out {
			if r.ID == "en:1" && r != en {
				t.Errorf("keep %s: the English record was changed: %+v", keep, r)
			}
		}
	}
	s := newConvertStage(t, Config{NonChinese: NonChineseFilter}, 1)
	got, err := s.Process(t.Context(), en)
	var f *contract.Filter
	if !errors.As(err, &f) || f.Reason != FilterNotChinese || len(got) != 0 {
		t.Errorf("filter: %v %v", got, err)
	}
	if out := run(t, s, zh); len(out) != 2 || out[0].Tag("lang") != Lang {
		t.Errorf("filter drops Chinese records too: %v", out)
	}
	// count 2 over one English and two Chinese records converts both.
	c := newConvertStage(t, Config{Count: 2}, 1)
	_, err = c.Plan(t.Context(), scanOf(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := translatedIDs(run(t, c, in)); !slices.Equal(got, []string{"zh:0", "zh:1"}) {
		t.Errorf("count 2 converted %v", got)
	}
	// Record itself still says why it cannot convert.
	var rej *contract.Reject
	if _, err := s.t.Record(t.Context(), en); !errors.As(err, &rej) || rej.RejectReason() != ReasonNotChinese {
		t.Errorf("Record on English text: %v", err)
	}
}

func TestNonChineseConfig(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Mode: ModeConvert, NonChinese: "keep"}, `non_chinese: "keep" is not one of pass, filter`},
		{Config{Mode: ModeTeacher, NonChinese: NonChinesePass}, "non_chinese: applies to mode convert only"},
	}
	for _, tt := range tests {
		tt.cfg.Defaults()
		errs := tt.cfg.Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.cfg, errs, tt.want)
		}
	}
	c := Config{Mode: ModeConvert}
	c.Defaults()
	if c.NonChinese != NonChinesePass || len(c.Validate()) != 0 {
		t.Errorf("convert default: %+v %v", c, c.Validate())
	}
	c = Config{}
	c.Defaults()
	if c.NonChinese != "" || len(c.Validate()) != 0 {
		t.Errorf("teacher default: %+v %v", c, c.Validate())
	}
}

// A translation's lineage step carries the stage's name in pipeline.yaml.
func TestStageNamesLineage(t *testing.T) {
	tr, err := New(Config{Mode: ModeConvert}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStage(tr, "to_taiwan", seeded(1))
	for _, r := range run(t, s, zhRecords(2)) {
		if n := len(r.Lineage); n == 0 || r.Lineage[n-1].Stage != "to_taiwan" {
			t.Errorf("%s: lineage %+v, want a last step of stage to_taiwan", r.ID, r.Lineage)
		}
	}
	if out, err := Convert(zhRecords(1)[0]); err != nil || out.Lineage[len(out.Lineage)-1].Stage != "translate" {
		t.Errorf("Convert outside a stage: %+v, %v", out, err)
	}
}

// TestStageSaveLoadPlan: a stage loaded from a saved plan chooses the
// records the planned one chose; a corrupt or mismatched plan is refused.
func TestStageSaveLoadPlan(t *testing.T) {
	rs := zhRecords(40)
	s := newConvertStage(t, Config{Count: 7}, 3)
	if _, err := s.Plan(t.Context(), scanOf(rs)); err != nil {
		t.Fatal(err)
	}
	var saved strings.Builder
	if err := s.SavePlan(&saved); err != nil {
		t.Fatal(err)
	}
	l := newConvertStage(t, Config{Count: 7}, 3)
	if err := l.LoadPlan(strings.NewReader(saved.String())); err != nil {
		t.Fatal(err)
	}
	a, b := translatedIDs(run(t, s, rs)), translatedIDs(run(t, l, rs))
	if len(a) != 7 || !slices.Equal(a, b) {
		t.Errorf("planned chose %v, loaded %v", a, b)
	}
	var again strings.Builder
	if err := l.SavePlan(&again); err != nil || again.String() != saved.String() {
		t.Errorf("saved again differs (%v)", err)
	}
	for _, bad := range []string{"", saved.String()[:len(saved.String())-1], saved.String() + "x", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"} {
		if err := newConvertStage(t, Config{Count: 7}, 3).LoadPlan(strings.NewReader(bad)); err == nil {
			t.Errorf("plan %q loaded", bad)
		}
	}
	if err := newConvertStage(t, Config{Ratio: 0.5}, 3).LoadPlan(strings.NewReader(saved.String())); err == nil {
		t.Error("a plan of chosen records loaded into a ratio stage")
	}
}

// scanOf is a Plan scan that yields rs in order.
func scanOf(rs []*record.Record) func(yield func(*record.Record) error) error {
	return func(yield func(*record.Record) error) error {
		for _, r := range rs {
			if err := yield(r); err != nil {
				return err
			}
		}
		return nil
	}
}
