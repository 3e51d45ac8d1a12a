package stages

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/near"
	"github.com/augmentdata/augment/stages/record"
)

// DecontaminateConfig is the `decontaminate:` stage: it rejects records that
// overlap an evaluation set, so a model trained on the output is not judged
// on what it saw.
//
//	stages:
//	  - decontaminate:
//	      benchmarks:
//	        - {name: bfcl_simple, path: bench/BFCL_v3_simple.json, format: bfcl}
//	        - {name: heldout, path: bench/heldout.jsonl, format: sharegpt}
//	      ngram: 13
//
// Texts are normalised as near.Words does (NFKC, lowercase, punctuation
// dropped). A record hits a benchmark item when
//
//   - ngram overlap: the record's user turns (fields) and the item's user
//     turns share word n-grams (13 by default, as GPT-3 and datatrove; a
//     Han or kana character counts as 2/3 of a word, so 20 such characters
//     make a 13-gram: near.Words.Grams): at least one, or, with threshold
//     > 0, at least that share of the item's distinct n-grams; items
//     shorter than n words have no n-gram and are matched by the next rule
//     only;
//   - exact: the record's user text equals the item's and, when the item
//     comes with calls (sharegpt, openai), the record's calls equal them
//     too (name and arguments, keys sorted; turn by turn, the parallel
//     calls of a turn in any order).
//
// A record with hits is rejected with reason "contaminated"; its detail is
// "contaminated: " and a JSON array with every hit, {benchmark, item, kind,
// shared, of, ngram} (kind "ngram" or "exact"; shared of the item's
// n-grams; ngram the normalised text of the first n-gram the record shares
// with the item), so the rejects files are the report of every hit
// (README: decontaminate has the DuckDB query, TestDecontaminateDuckDB
// runs it).
//
// Counters: "contaminated" (records) and "hits.<benchmark>" (records hitting
// that benchmark). Each benchmark's item count is in the config the
// manifest keeps (benchmarks[].items) and in the stage's notes. The
// benchmark files' SHA-256 are part of the stage's config hash, so editing
// one reruns the stage. Benchmark paths are relative to pipeline.yaml; a
// file that cannot be read whole, or holds no item, stops the run.
type DecontaminateConfig struct {
	Benchmarks []BenchmarkFile `yaml:"benchmarks" json:"benchmarks"`
	// NGram is the n-gram length in words; default 13.
	NGram int `yaml:"ngram" json:"ngram"`
	// Threshold is the share of an item's n-grams a record must hold to hit
	// it, in [0, 1]; 0 (default) means any one n-gram.
	Threshold float64 `yaml:"threshold" json:"threshold"`
	// Fields are the record's parts compared with the items' user turns;
	// default [user].
	Fields []string `yaml:"fields" json:"fields"`
}

// A BenchmarkFile is one evaluation set.
type BenchmarkFile struct {
	Name   string `yaml:"name" json:"name"`
	Path   string `yaml:"path" json:"path"`
	Format string `yaml:"format" json:"format"` // bfcl, sharegpt, openai, text
	// SHA256 is the file's hash, filled in when the stage is built so that
	// the config hash changes with the file.
	SHA256 string `yaml:"-" json:"sha256,omitempty"`
	// Items is the number of items read from the file, filled in with
	// SHA256.
	Items int `yaml:"-" json:"items,omitempty"`
}

// ReasonContaminated is the reject reason of the decontaminate stage.
const ReasonContaminated = "contaminated"

func (c *DecontaminateConfig) defaults() {
	if c.NGram == 0 {
		c.NGram = 13
	}
	if len(c.Fields) == 0 {
		c.Fields = []string{FieldUser}
	}
	for i := range c.Benchmarks {
		b := &c.Benchmarks[i]
		if b.Name == "" {
			base := filepath.Base(b.Path)
			b.Name = strings.TrimSuffix(base, filepath.Ext(base))
		}
	}
}

func (c *DecontaminateConfig) validate() []string {
	_, probs := parseTextFields(c.Fields)
	if len(c.Benchmarks) == 0 {
		probs = append(probs, "benchmarks: list at least one {name, path, format}")
	}
	names := map[string]bool{}
	for i, b := range c.Benchmarks {
		if b.Path == "" {
			probs = append(probs, fmt.Sprintf("benchmarks[%d]: path is required", i))
		}
		if !slices.Contains(benchFormats, b.Format) {
			probs = append(probs, fmt.Sprintf("benchmarks[%d]: format %q is not one of %s", i, b.Format, strings.Join(benchFormats, ", ")))
		}
		if names[b.Name] {
			probs = append(probs, fmt.Sprintf("benchmarks[%d]: name %q is used twice", i, b.Name))
		}
		names[b.Name] = true
	}
	if c.NGram < 1 {
		probs = append(probs, "ngram: must be at least 1")
	}
	if c.Threshold < 0 || c.Threshold > 1 {
		probs = append(probs, "threshold: must be in [0, 1]")
	}
	return probs
}

// version 2: NFKC, Hangul runs as words, Han and kana characters as 2/3
// of a word (near.Version 2); parallel calls in any order; the detail a
// JSON array after the reason, with each hit's n-gram text.
func (c *DecontaminateConfig) version() int { return near.Version }

func (c *DecontaminateConfig) build(env *Env) (Stage, error) {
	f, probs := parseTextFields(c.Fields)
	if len(probs) > 0 {
		return nil, errors.New(strings.Join(probs, "; "))
	}
	ix := newBenchIndex(c.NGram, c.Threshold, f)
	for i := range c.Benchmarks {
		b := &c.Benchmarks[i]
		path := b.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(env.Dir, path)
		}
		sum, items, loose, mute, err := ix.addFile(path, b.Name, b.Format)
		if err != nil {
			return nil, fmt.Errorf("benchmark %s: %w", b.Name, err)
		}
		if items == 0 {
			// Checked against nothing, every record would pass: a
			// truncated or wrongly exported file must not look clean.
			return nil, fmt.Errorf("benchmark %s: %s: no item (an empty benchmark would decontaminate nothing)", b.Name, path)
		}
		ix.notes = append(ix.notes, fmt.Sprintf("benchmark %s: %d items (%s)", b.Name, items, b.Path))
		if len(loose) > 0 && env.Log != nil {
			env.Log.Warn("benchmark items the reader rejects are compared by their user turns alone",
				"benchmark", b.Name, "items", len(loose), "first", clip.List(loose, 3))
		}
		if len(mute) > 0 && env.Log != nil {
			env.Log.Warn("benchmark items without a user turn can match no record",
				"benchmark", b.Name, "items", len(mute), "first", clip.List(mute, 3))
		}
		b.SHA256, b.Items = sum, items
	}
	return ix, nil
}

// benchIndex holds every benchmark item's n-grams and exact keys. It is
// built once and read concurrently by Process.
type benchIndex struct {
	n         int
	threshold float64
	fields    textFields

	items []indexedItem
	grams map[uint64][]int32 // n-gram → items holding it (each item once)
	exact map[uint64][]int32 // exact key → items
	// anyCalls: some item has calls, so records' calls are worth reading.
	anyCalls bool
	// notes give each benchmark's item count, noted once per shard: noted
	// is the counters of the shard last noted (Process skips the notes
	// while it is the same).
	notes []string
	noted atomic.Pointer[counters]
}

type indexedItem struct {
	bench, id string
	grams     int32 // distinct n-grams
	withCalls bool  // its exact key covers calls
}

func newBenchIndex(n int, threshold float64, f textFields) *benchIndex {
	return &benchIndex{n: n, threshold: threshold, fields: f, grams: map[uint64][]int32{}, exact: map[uint64][]int32{}}
}

// addFile indexes a benchmark file and returns its SHA-256, its number of
// items, the items indexed by their user turns alone (readChats) and the
// IDs of the items without any user text, which can match nothing.
func (ix *benchIndex) addFile(path, name, format string) (sum string, n int, loose, mute []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, nil, nil, err
	}
	defer f.Close()
	h := sha256.New()
	items, loose, err := readBenchmark(io.TeeReader(f, h), name, format)
	if err != nil {
		return "", 0, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := io.Copy(h, f); err != nil { // whatever the reader left unread
		return "", 0, nil, nil, err
	}
	for _, it := range items {
		if strings.TrimSpace(strings.Join(it.User, "")) == "" {
			mute = append(mute, it.ID)
		}
		ix.add(name, it)
	}
	return hex.EncodeToString(h.Sum(nil)), len(items), loose, mute, nil
}

// add indexes one item.
func (ix *benchIndex) add(bench string, it benchItem) {
	k := int32(len(ix.items))
	var w near.Words
	for _, u := range it.User {
		w.Add(u)
	}
	seen := map[uint64]bool{}
	w.Grams(ix.n, func(g uint64, _, _ int) {
		if !seen[g] {
			seen[g] = true
			ix.grams[g] = append(ix.grams[g], k)
		}
	})
	item := indexedItem{bench: bench, id: it.ID, grams: int32(len(seen)), withCalls: len(it.Calls) > 0}
	ix.items = append(ix.items, item)
	ix.anyCalls = ix.anyCalls || item.withCalls
	if w.Len() > 0 {
		ix.exact[exactKey(w.Sum(), it.Calls)] = append(ix.exact[exactKey(w.Sum(), it.Calls)], k)
	}
}

// exactKey combines a user text's sum with its calls, one list per
// assistant turn (none: the text alone). The calls of a turn are parallel:
// they are sorted by their text, as dedup does (addRecordText), so their
// order does not count; the order of the turns does.
func exactKey(user uint64, turns [][]record.Call) uint64 {
	if len(turns) == 0 {
		return user
	}
	var w near.Words
	for _, calls := range turns {
		texts := make([]string, len(calls))
		for i, c := range calls {
			texts[i] = callText(c)
		}
		slices.Sort(texts)
		for _, t := range texts {
			w.Add(t)
			w.Break()
		}
	}
	return near.Mix(user ^ near.Mix(w.Sum()+1))
}

// turnCalls returns the calls of the assistant turns in m, one list per
// turn with calls.
func turnCalls(m []record.Message) [][]record.Call {
	var turns [][]record.Call
	for _, t := range m {
		if t.Role == record.RoleAssistant && len(t.Calls) > 0 {
			turns = append(turns, t.Calls)
		}
	}
	return turns
}

// A benchHit is one record–item match, as listed in a reject's detail.
type benchHit struct {
	Benchmark string `json:"benchmark"`
	Item      string `json:"item"`
	Kind      string `json:"kind"` // ngram or exact
	Shared    int    `json:"shared,omitempty"`
	Of        int    `json:"of,omitempty"`
	// NGram is the normalised text of the first n-gram of the record the
	// item holds (ngram hits): a greeting both share, or the question.
	NGram string `json:"ngram,omitempty"`

	from, to int // the n-gram's words in the record (Words.Grams)
}

// hits returns every item r hits, in the order the items were indexed.
func (ix *benchIndex) hits(r *record.Record) []benchHit {
	var w near.Words
	addRecordText(&w, r, ix.fields)
	hits := ix.match(&w, r)
	if slices.ContainsFunc(hits, func(h benchHit) bool { return h.Kind == "ngram" }) {
		// The n-grams' text, for the detail: the words again, as text.
		t := near.Words{Chars: true}
		addRecordText(&t, r, ix.fields)
		for i := range hits {
			if h := &hits[i]; h.Kind == "ngram" {
				h.NGram = t.Text(h.from, h.to)
			}
		}
	}
	return hits
}

// sharedGrams counts the n-grams a record shares with an item, and where
// the first of them is in the record's words.
type sharedGrams struct {
	n        int
	from, to int
}

// match finds the items hit by a record whose compared words are w.
// N-grams run across turns, as over an item's turns (Grams skips the
// boundaries).
func (ix *benchIndex) match(w *near.Words, r *record.Record) []benchHit {
	// Most n-grams hit nothing: keep only those that do, once each.
	var hitGrams map[uint64]bool
	var shared map[int32]*sharedGrams
	w.Grams(ix.n, func(g uint64, from, to int) {
		items := ix.grams[g]
		if len(items) == 0 || hitGrams[g] {
			return
		}
		if hitGrams == nil {
			hitGrams = map[uint64]bool{}
		}
		hitGrams[g] = true
		if shared == nil {
			shared = map[int32]*sharedGrams{}
		}
		for _, k := range items {
			if s := shared[k]; s != nil {
				s.n++
			} else {
				shared[k] = &sharedGrams{1, from, to}
			}
		}
	})
	type found struct {
		k int32
		h benchHit
	}
	var fs []found
	for k, s := range shared {
		it := ix.items[k]
		need := max(1, int(math.Ceil(ix.threshold*float64(it.grams)-1e-9)))
		if s.n >= need {
			fs = append(fs, found{k, benchHit{Benchmark: it.bench, Item: it.id, Kind: "ngram", Shared: s.n, Of: int(it.grams), from: s.from, to: s.to}})
		}
	}
	if w.Len() > 0 {
		user := w.WordSum() // without boundaries, as an item's
		keys := []uint64{user}
		if turns := turnCalls(r.Messages); len(turns) > 0 && ix.anyCalls {
			keys = append(keys, exactKey(user, turns))
		}
		for _, key := range keys {
			for _, k := range ix.exact[key] {
				if slices.ContainsFunc(fs, func(f found) bool { return f.k == k }) {
					continue // already an n-gram hit
				}
				fs = append(fs, found{k, benchHit{Benchmark: ix.items[k].bench, Item: ix.items[k].id, Kind: "exact"}})
			}
		}
	}
	slices.SortFunc(fs, func(a, b found) int { return cmp.Compare(a.k, b.k) })
	hits := make([]benchHit, len(fs))
	for i, f := range fs {
		hits[i] = f.h
	}
	return hits
}

// Process rejects records that hit a benchmark item.
func (ix *benchIndex) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	if c, _ := ctx.Value(countersKey{}).(*counters); c != nil && ix.noted.Load() != c {
		ix.noted.Store(c)
		for _, n := range ix.notes {
			Note(ctx, "%s", n)
		}
	}
	hits := ix.hits(r)
	if len(hits) == 0 {
		return []*record.Record{r}, nil
	}
	Count(ctx, ReasonContaminated, 1)
	var benches []string
	for _, h := range hits {
		if !slices.Contains(benches, h.Benchmark) {
			benches = append(benches, h.Benchmark)
			Count(ctx, "hits."+h.Benchmark, 1)
		}
	}
	detail, err := jsonout.Marshal(hits)
	if err != nil {
		return nil, err
	}
	return nil, &contract.Reject{Reason: ReasonContaminated, Detail: string(detail)}
}
