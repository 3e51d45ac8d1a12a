package stages

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
)

// SampleConfig is the `sample:` stage: seeded quotas per source and per
// category, e.g. the Meta-Tool training mix (seed 000 A.1):
//
//   - sample:
//     quotas:
//   - {source: glaive, category: chat, n: 2000}
//   - {source: glaive, category: single_call, n: 2000}
//   - {source: toolace}            # n 0: all of them
//
// A record goes to the first quota whose source and category match (an empty
// field matches anything). Within a quota the n records with the smallest
// seeded hash of their ID are kept, so the choice does not depend on record
// order, shard size or on which other records exist. Records matching no
// quota are dropped unless keep_unmatched is set. Dropped records are counted
// as filtered ("quota_full", "unmatched"), not written as rejects.
// Categories: chat, single_call, parallel_calls, multi_turn (record.Category),
// or any value of the record's "category" tag (e.g. negative).
type SampleConfig struct {
	Quotas        []Quota `yaml:"quotas" json:"quotas"`
	KeepUnmatched bool    `yaml:"keep_unmatched" json:"keep_unmatched"`
}

// A Quota selects up to N records of one source and category.
type Quota struct {
	Source   string `yaml:"source" json:"source,omitempty"`
	Category string `yaml:"category" json:"category,omitempty"`
	N        int    `yaml:"n" json:"n"` // 0 keeps every matching record
}

func (c *SampleConfig) defaults()    {}
func (c *SampleConfig) version() int { return 1 }

func (c *SampleConfig) validate() []string {
	var probs []string
	if len(c.Quotas) == 0 {
		probs = append(probs, "quotas: list at least one quota")
	}
	for i, q := range c.Quotas {
		if q.N < 0 {
			probs = append(probs, fmt.Sprintf("quotas[%d]: n must be ≥ 0", i))
		}
	}
	return probs
}

func (c *SampleConfig) build(env *Env) (Stage, error) {
	return &sampler{cfg: c, seed: env.Seed, log: env.Log}, nil
}

type sampler struct {
	cfg  *SampleConfig
	seed uint64
	log  *slog.Logger    // nil in tests
	keep map[string]bool // record IDs chosen by Plan
}

// category is the record's category tag when it has one (negatives carry
// "negative"), else its shape.
func category(r *record.Record) string {
	if c := r.Tag("category"); c != "" {
		return c
	}
	return r.Category()
}

// quotaOf returns the index of the first quota matching r, or -1.
func (s *sampler) quotaOf(r *record.Record) int {
	cat := category(r)
	shape := r.Category()
	for i, q := range s.cfg.Quotas {
		if (q.Source == "" || q.Source == r.Source) && (q.Category == "" || q.Category == cat || q.Category == shape) {
			return i
		}
	}
	return -1
}

func (s *sampler) rank(id string) uint64 { return seedHash(s.seed, id) }

// Plan keeps, per quota, the n smallest ranks seen (a bounded max-heap), so
// memory grows with the quotas, not with the input.
func (s *sampler) Plan(ctx context.Context, scan func(yield func(*record.Record) error) error) (string, error) {
	heaps := make([]rankHeap, len(s.cfg.Quotas))
	all := make([][]string, len(s.cfg.Quotas)) // quotas with n == 0 keep everything
	matched := make([]int, len(s.cfg.Quotas))
	cats := map[string]bool{}
	err := scan(func(r *record.Record) error {
		q := s.quotaOf(r)
		if len(cats) < 64 {
			cats[category(r)], cats[r.Category()] = true, true
		}
		if q < 0 {
			return ctx.Err()
		}
		matched[q]++
		// IDs kept are copies: an ID may be a view of a row group's
		// decoded column, which the stage would keep alive with it.
		if s.cfg.Quotas[q].N == 0 {
			all[q] = append(all[q], strings.Clone(r.ID))
			return nil
		}
		e := ranked{rank: s.rank(r.ID), id: r.ID}
		h := &heaps[q]
		if h.Len() < s.cfg.Quotas[q].N {
			e.id = strings.Clone(e.id)
			heap.Push(h, e)
		} else if e.less((*h)[0]) {
			e.id = strings.Clone(e.id)
			(*h)[0] = e
			heap.Fix(h, 0)
		}
		return ctx.Err()
	})
	if err != nil {
		return "", err
	}
	for q, n := range matched {
		if n == 0 && s.log != nil {
			s.log.Warn("a sample quota matched no record (a typo in source or category?)", "quota", q,
				"source", s.cfg.Quotas[q].Source, "category", s.cfg.Quotas[q].Category,
				"categories_seen", strings.Join(slices.Sorted(maps.Keys(cats)), ", "))
		}
	}
	s.keep = map[string]bool{}
	for q := range s.cfg.Quotas {
		for _, e := range heaps[q] {
			s.keep[e.id] = true
		}
		for _, id := range all[q] {
			s.keep[id] = true
		}
	}
	ids := make([]string, 0, len(s.keep))
	for id := range s.keep {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	d := sha256.New()
	for _, id := range ids {
		d.Write([]byte(id))
		d.Write([]byte{0})
	}
	return hex.EncodeToString(d.Sum(nil)[:16]), nil
}

// Process keeps the records the plan chose, counting them per quota in the
// counters quota.<index in quotas> (a quota that keeps none has none).
func (s *sampler) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	if s.keep == nil {
		return nil, fmt.Errorf("Process called before Plan")
	}
	q := s.quotaOf(r)
	switch {
	case q < 0 && s.cfg.KeepUnmatched:
		return []*record.Record{r}, nil
	case q < 0:
		return nil, &contract.Filter{Reason: "unmatched"}
	case s.keep[r.ID]:
		Count(ctx, "quota."+strconv.Itoa(q), 1)
		return []*record.Record{r}, nil
	default:
		return nil, &contract.Filter{Reason: "quota_full"}
	}
}

type ranked struct {
	rank uint64
	id   string
}

// less orders by rank, then ID, so ties are deterministic.
func (a ranked) less(b ranked) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.id < b.id
}

// rankHeap is a max-heap: the root is the worst record kept so far.
type rankHeap []ranked

func (h rankHeap) Len() int           { return len(h) }
func (h rankHeap) Less(i, j int) bool { return h[j].less(h[i]) }
func (h rankHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rankHeap) Push(x any)        { *h = append(*h, x.(ranked)) }
func (h *rankHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SavePlan writes the chosen record IDs in order.
func (s *sampler) SavePlan(w io.Writer) error {
	if s.keep == nil {
		return errors.New("sample: no plan to save")
	}
	var p planWriter
	p.uint(uint64(len(s.keep)))
	for _, id := range slices.Sorted(maps.Keys(s.keep)) {
		p.str(id)
	}
	return p.flush(w)
}

// LoadPlan reads what SavePlan wrote.
func (s *sampler) LoadPlan(r io.Reader) error {
	p, err := newPlanReader(r)
	if err != nil {
		return err
	}
	n := p.count()
	keep := make(map[string]bool, n)
	for range n {
		keep[p.str()] = true
	}
	if err := p.done(); err != nil {
		return err
	}
	s.keep = keep
	return nil
}
