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
// Texts are normalised as near.Words does (lowercase, punctuation dropped).
// A record hits a benchmark item when
//
//   - ngram overlap: the record's user turns (fields) and the item's user
//     turns share word n-grams (13 by default, as GPT-3 and datatrove): at
//     least one, or, with threshold > 0, at least that share of the item's
//     distinct n-grams; items shorter than n words have no n-gram and are
//     matched by the next rule only;
//   - exact: the record's user text equals the item's and, when the item
//     comes with calls (sharegpt, openai), the record's calls equal them
//     too (name and arguments, keys sorted; the order of calls kept).
//
// A record with hits is rejected with reason "contaminated"; its detail
// lists every hit as a JSON array of {benchmark, item, kind, shared, of}
// (kind "ngram" or "exact"; shared of the item's n-grams), so the rejects
// files are the report of every hit:
//
//	SELECT id, detail FROM read_json_auto('out/01-decontaminate/rejects-*.jsonl')
//
// Counters: "contaminated" (records) and "hits.<benchmark>" (records hitting
// that benchmark). The benchmark files' SHA-256 are part of the stage's
// config hash, so editing one reruns the stage. Benchmark paths are relative
// to pipeline.yaml; a file that cannot be read whole stops the run.
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

func (c *DecontaminateConfig) version() int { return 1 }

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
		sum, loose, mute, err := ix.addFile(path, b.Name, b.Format)
		if err != nil {
			return nil, fmt.Errorf("benchmark %s: %w", b.Name, err)
		}
		if len(loose) > 0 && env.Log != nil {
			env.Log.Warn("benchmark items the reader rejects are compared by their user turns alone",
				"benchmark", b.Name, "items", len(loose), "first", clip.List(loose, 3))
		}
		if len(mute) > 0 && env.Log != nil {
			env.Log.Warn("benchmark items without a user turn can match no record",
				"benchmark", b.Name, "items", len(mute), "first", clip.List(mute, 3))
		}
		b.SHA256 = sum
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
}

type indexedItem struct {
	bench, id string
	grams     int32 // distinct n-grams
	withCalls bool  // its exact key covers calls
}

func newBenchIndex(n int, threshold float64, f textFields) *benchIndex {
	return &benchIndex{n: n, threshold: threshold, fields: f, grams: map[uint64][]int32{}, exact: map[uint64][]int32{}}
}

// addFile indexes a benchmark file and returns its SHA-256, the items
// indexed by their user turns alone (readChats) and the IDs of the items
// without any user text, which can match nothing.
func (ix *benchIndex) addFile(path, name, format string) (sum string, loose, mute []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, nil, err
	}
	defer f.Close()
	h := sha256.New()
	items, loose, err := readBenchmark(io.TeeReader(f, h), name, format)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := io.Copy(h, f); err != nil { // whatever the reader left unread
		return "", nil, nil, err
	}
	for _, it := range items {
		if strings.TrimSpace(strings.Join(it.User, "")) == "" {
			mute = append(mute, it.ID)
		}
		ix.add(name, it)
	}
	return hex.EncodeToString(h.Sum(nil)), loose, mute, nil
}

// add indexes one item.
func (ix *benchIndex) add(bench string, it benchItem) {
	k := int32(len(ix.items))
	var w near.Words
	for _, u := range it.User {
		w.Add(u)
	}
	seen := map[uint64]bool{}
	near.NGrams(w.Hashes(), ix.n, func(g uint64) {
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

// exactKey combines a user text's sum with its calls (none: the text alone).
func exactKey(user uint64, calls []record.Call) uint64 {
	if len(calls) == 0 {
		return user
	}
	var w near.Words
	for _, c := range calls {
		w.Add(callText(c))
		w.Break()
	}
	return near.Mix(user ^ near.Mix(w.Sum()+1))
}

// A benchHit is one record–item match, as listed in a reject's detail.
type benchHit struct {
	Benchmark string `json:"benchmark"`
	Item      string `json:"item"`
	Kind      string `json:"kind"` // ngram or exact
	Shared    int    `json:"shared,omitempty"`
	Of        int    `json:"of,omitempty"`
}

// hits returns every item r hits, in the order the items were indexed.
func (ix *benchIndex) hits(r *record.Record) []benchHit {
	var w near.Words
	addRecordText(&w, r, ix.fields)
	// n-grams run across turns, as over an item's turns: no boundaries.
	hs := slices.DeleteFunc(slices.Clone(w.Hashes()), func(x uint64) bool { return x == near.Boundary })
	return ix.match(hs, r)
}

// match finds the items hit by a record whose compared words are hs.
func (ix *benchIndex) match(hs []uint64, r *record.Record) []benchHit {
	// Most n-grams hit nothing: keep only those that do, once each.
	var hitGrams map[uint64]bool
	var shared map[int32]int
	near.NGrams(hs, ix.n, func(g uint64) {
		items := ix.grams[g]
		if len(items) == 0 || hitGrams[g] {
			return
		}
		if hitGrams == nil {
			hitGrams = map[uint64]bool{}
		}
		hitGrams[g] = true
		if shared == nil {
			shared = map[int32]int{}
		}
		for _, k := range items {
			shared[k]++
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
		if s >= need {
			fs = append(fs, found{k, benchHit{Benchmark: it.bench, Item: it.id, Kind: "ngram", Shared: s, Of: int(it.grams)}})
		}
	}
	if len(hs) > 0 {
		user := near.SumOf(hs)
		var calls []record.Call
		for _, m := range r.Messages {
			if m.Role == record.RoleAssistant {
				calls = append(calls, m.Calls...)
			}
		}
		keys := []uint64{user}
		if len(calls) > 0 && ix.anyCalls {
			keys = append(keys, exactKey(user, calls))
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
	return nil, &contract.Reject{Reason: ReasonContaminated, Detail: fmt.Sprintf("%d hit(s) in %s: %s", len(hits), strings.Join(benches, ", "), detail)}
}
