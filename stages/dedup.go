package stages

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/near"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// DedupConfig is the `dedup:` stage: it removes exact and near-duplicate
// records, within and across sources, keeping one record per cluster.
//
//	stages:
//	  - dedup:
//	      fields: [user, calls]
//	      threshold: 0.8
//	      prefer: [toolace]
//
// What is compared is the normalised text of the chosen fields (see
// near.Words: lowercased words, punctuation dropped): by default the user
// turns and the call signatures, a call being its name and its arguments
// with keys sorted (reordered arguments, or parallel calls in another order,
// read the same). With tools, a tool is its name and description, not its
// parameters. Two records are
//
//   - exact duplicates when that text is the same and, with calls among the
//     fields, so are the calls as JSON (callKey: types and case kept, so
//     {"people":"4"} is not {"people":4} and "USD" is not "usd"), both
//     under a 64-bit hash;
//   - near duplicates when the Jaccard similarity of their shingle sets
//     (character or word n-grams of the text, lowercased: there calls that
//     differ only in types or case are the same) reaches threshold, as
//     estimated from MinHash signatures (near.MinHash): records sharing an
//     LSH band's bucket are candidates, a pair of similarity J with
//     probability 1-(1-J^Rows)^Bands (see warnings). In a bucket, taken in
//     keeping order, each record is compared with the bucket's leaders
//     (records that matched no earlier leader, at most dedupMaxLeaders)
//     and pairs with the first whose estimated similarity reaches the
//     threshold, or that is already in its cluster.
//
// Clusters are the connected components of those pairs, so two members of
// one cluster can be less similar than the threshold when others link them
// (template repeats chain this way), and a record similar to a bucket
// member that joined a leader, but not to the leader, is not paired with
// it there: whether a record is removed can depend on which other records
// are in the input. The kept member of a cluster is, in this order, one
// whose calls pass verify's calls_resolved and args_schema checks (they
// name tools it lists and fit their parameters: conforms), one whose
// source comes first in prefer (sources not listed come after the listed
// ones), then the one with the smallest hash of the pipeline seed and its
// ID. The choice depends on neither the order records are read in, the
// order of sources, shard size nor worker count, but it does depend on the
// IDs, which hold row numbers: reordering a dump's rows can keep another
// copy. Every other member is rejected with reason "duplicate" (same exact
// key) or "near_duplicate" and the detail "duplicate_of=<kept id> …", so
// it stays in the rejects file. With scope: within, only records of the
// same source are compared.
//
// dedup is a Planner: it reads its whole input once before processing any
// shard and keeps, per record, only its signature (Bands×Rows bytes), two
// hashes, whether its calls conform, its source and its ID, plus sort
// space while clustering: about 190 bytes a record at the peak with the
// defaults (1M records: about 190 MB).
// Records whose chosen fields hold no word are kept unchecked.
//
// Counters: "removed.exact" and "removed.near" (per removed record),
// "clusters" (per kept record that has duplicates), "cluster_records" (their
// clusters' sizes added up), "cluster_size.<range>" (clusters by size:
// 2, 3-4, 5-8, …) and "unchecked_no_text".
type DedupConfig struct {
	// Fields are the parts of a record compared (system, tools, user,
	// assistant, calls, results); default [user, calls].
	Fields []string `yaml:"fields" json:"fields"`
	// Mode is "both" (default), "exact" or "near".
	Mode string `yaml:"mode" json:"mode"`
	// Shingle is "char" (default: n consecutive characters, robust on the
	// short texts of tool-use dialogues) or "word" (n consecutive words).
	Shingle string `yaml:"shingle" json:"shingle"`
	// NGram is the shingle length; default 5.
	NGram int `yaml:"ngram" json:"ngram"`
	// Bands and Rows shape the LSH (Bands×Rows MinHash values, candidates
	// share all Rows values of one band); default 14 and 8, datatrove's.
	Bands int `yaml:"bands" json:"bands"`
	Rows  int `yaml:"rows" json:"rows"`
	// Threshold is the estimated Jaccard similarity from which two
	// candidates are near duplicates; default 0.8.
	Threshold float64 `yaml:"threshold" json:"threshold"`
	// Scope is "across" (default: all records are compared) or "within"
	// (only records of the same source).
	Scope string `yaml:"scope" json:"scope"`
	// Prefer lists sources whose records are kept first, in order, after
	// records whose calls fit their tools (conforms).
	Prefer []string `yaml:"prefer" json:"prefer,omitempty"`
}

// Dedup modes and scopes.
const (
	DedupBoth   = "both"
	DedupExact  = "exact"
	DedupNear   = "near"
	ScopeAcross = "across"
	ScopeWithin = "within"
)

// Reject reasons of the dedup stage.
const (
	ReasonDuplicate     = "duplicate"
	ReasonNearDuplicate = "near_duplicate"
)

// dedupMaxLeaders bounds the members of one LSH bucket that later members
// are compared with (the lowest-ranked ones that joined no earlier one), so
// a bucket of thousands of records costs thousands of comparisons, not
// millions.
const dedupMaxLeaders = 8

func (c *DedupConfig) defaults() {
	if len(c.Fields) == 0 {
		c.Fields = []string{FieldUser, FieldCalls}
	}
	if c.Mode == "" {
		c.Mode = DedupBoth
	}
	if c.Shingle == "" {
		c.Shingle = near.ShingleChar
	}
	if c.NGram == 0 {
		c.NGram = 5
	}
	if c.Bands == 0 {
		c.Bands = 14
	}
	if c.Rows == 0 {
		c.Rows = 8
	}
	if c.Threshold == 0 {
		c.Threshold = 0.8
	}
	if c.Scope == "" {
		c.Scope = ScopeAcross
	}
}

func (c *DedupConfig) validate() []string {
	_, probs := parseTextFields(c.Fields)
	if !slices.Contains([]string{DedupBoth, DedupExact, DedupNear}, c.Mode) {
		probs = append(probs, fmt.Sprintf("mode: %q is not one of both, exact, near", c.Mode))
	}
	if c.Mode != DedupExact {
		if _, err := near.NewMinHash(c.Shingle, c.NGram, c.Bands, c.Rows, 0); err != nil {
			probs = append(probs, err.Error())
		}
		if c.Bands > 64 {
			probs = append(probs, "bands: at most 64")
		}
	}
	if c.Threshold <= 0 || c.Threshold > 1 {
		probs = append(probs, "threshold: must be in (0, 1]")
	}
	if c.Scope != ScopeAcross && c.Scope != ScopeWithin {
		probs = append(probs, fmt.Sprintf("scope: %q is not one of across, within", c.Scope))
	}
	return probs
}

// warnings is advice on settings that work but do not do what they seem
// to: a threshold below where the LSH finds pairs. check prints it, and a
// run logs it when it builds the stage.
func (c *DedupConfig) warnings() []string {
	if c.Mode == DedupExact {
		return nil
	}
	mh, err := near.NewMinHash(c.Shingle, c.NGram, c.Bands, c.Rows, 0)
	if err != nil || mh.Candidate(c.Threshold) >= 0.5 {
		return nil
	}
	msg := fmt.Sprintf("threshold %.2f is below the similarity LSH finds with bands %d × rows %d: "+
		"a pair becomes a candidate with probability 1-(1-J^rows)^bands, %.0f %% at J = %.2f and 50 %% at J = %.3f, "+
		"so most pairs near the threshold are never compared",
		c.Threshold, c.Bands, c.Rows, 100*mh.Candidate(c.Threshold), c.Threshold, mh.Threshold())
	// Advice: the most rows (the fewest false candidates) that find a pair
	// at the threshold 9 times in 10, with as many MinHash values as now
	// (the accuracy of the estimate) and at most 64 bands.
	for rows := c.Rows - 1; rows >= 1; rows-- {
		bands := max(c.Bands, (c.Bands*c.Rows+rows-1)/rows)
		if bands > 64 {
			break
		}
		if alt, err := near.NewMinHash(c.Shingle, c.NGram, bands, rows, 0); err == nil && alt.Candidate(c.Threshold) >= 0.9 {
			msg += fmt.Sprintf("; bands: %d, rows: %d find one at J = %.2f with probability %.0f %% (50 %% at J = %.3f)",
				bands, rows, c.Threshold, 100*alt.Candidate(c.Threshold), alt.Threshold())
			break
		}
	}
	return []string{msg}
}

// version 2: the exact key keeps the calls' JSON types and case, and a
// cluster keeps a record whose calls fit its tools first. Above 2, the
// words' rules (near.Version: 2 brought NFKC and Hangul words).
func (c *DedupConfig) version() int { return 2 + near.Version - 1 }

func (c *DedupConfig) build(env *Env) (Stage, error) {
	f, probs := parseTextFields(c.Fields)
	if len(probs) > 0 {
		return nil, errors.New(strings.Join(probs, "; "))
	}
	if env.Log != nil {
		for _, msg := range c.warnings() {
			env.Log.Warn(msg) // the stage's logger names the stage
		}
	}
	d := &deduper{cfg: *c, fields: f, seed: env.Seed}
	if c.Mode != DedupExact {
		mh, err := near.NewMinHash(c.Shingle, c.NGram, c.Bands, c.Rows, env.Seed)
		if err != nil {
			return nil, err
		}
		d.mh = mh
	}
	return d, nil
}

type deduper struct {
	cfg    DedupConfig
	fields textFields
	seed   uint64
	mh     *near.MinHash // nil in exact mode

	// Set by Plan, read-only afterwards.
	planned bool
	dups    []dupEntry    // removed records, by rank
	keepers []keeperEntry // kept records with duplicates, by rank
	noText  []uint64      // ranks of records with no text in the fields, sorted
}

// A dupEntry is a removed record.
type dupEntry struct {
	rank   uint64
	keeper int32 // index in keepers
	sim    uint8 // estimated similarity to the keeper, in hundredths
	exact  bool  // same text as the keeper
}

// A keeperEntry is the kept member of a cluster.
type keeperEntry struct {
	rank uint64
	id   string
	size int32
}

// rank is the seeded hash of a record ID that orders cluster members and
// identifies records between Plan and Process.
func (d *deduper) rank(id string) uint64 { return fnvMix(d.seed, id) }

// dedupTable holds what Plan keeps per record, in scan order of batches.
type dedupTable struct {
	rank  []uint64
	exact []uint64 // 0: no text in the chosen fields
	bad   []bool   // calls that do not fit the record's tools (conforms)
	src   []uint16
	sig   [][]byte // size bytes per record, in chunks of sigChunk records; zero for records without text
	size  int
	ids   []byte // IDs back to back
	idEnd []uint32
}

// sigChunk is the number of signatures per allocation: the table grows by
// whole chunks, so it holds no spare capacity beyond the last one.
const sigChunk = 1 << 14

func (t *dedupTable) appendSig(sig []byte) {
	for len(sig) > 0 {
		last := len(t.sig) - 1
		if last < 0 || len(t.sig[last]) == cap(t.sig[last]) {
			t.sig = append(t.sig, make([]byte, 0, sigChunk*t.size))
			last++
		}
		n := min(len(sig), cap(t.sig[last])-len(t.sig[last]))
		t.sig[last] = append(t.sig[last], sig[:n]...)
		sig = sig[n:]
	}
}

// sigOf returns record i's signature.
func (t *dedupTable) sigOf(i int) []byte {
	c, o := i/sigChunk, i%sigChunk*t.size
	return t.sig[c][o : o+t.size]
}

func (t *dedupTable) id(i int) string {
	start := uint32(0)
	if i > 0 {
		start = t.idEnd[i-1]
	}
	return string(t.ids[start:t.idEnd[i]])
}

// dedupBatch is records on their way to a signing worker.
type dedupBatch struct {
	recs []*record.Record
	src  []uint16
}

// dedupSigned is a batch's results.
type dedupSigned struct {
	b     *dedupBatch
	rank  []uint64
	exact []uint64
	bad   []bool
	sig   []byte
}

func (d *deduper) sign(b *dedupBatch, size int) *dedupSigned {
	out := &dedupSigned{b: b, rank: make([]uint64, len(b.recs)), exact: make([]uint64, len(b.recs)),
		bad: make([]bool, len(b.recs)), sig: make([]byte, size*len(b.recs))}
	calls := d.fields.has(FieldCalls)
	w := &near.Words{Chars: d.mh != nil && d.mh.Shingle == near.ShingleChar}
	var mins []uint64
	for i, r := range b.recs {
		out.rank[i] = d.rank(r.ID)
		w.Reset()
		addRecordText(w, r, d.fields)
		if w.Len() == 0 {
			continue
		}
		// The exact key: the normalised words, and with calls among the
		// fields, the calls with their JSON types and case (callKey).
		out.exact[i] = w.Sum()
		if calls {
			out.exact[i] = near.SumOf([]uint64{out.exact[i], callsKey(r)})
		}
		if out.exact[i] == 0 {
			out.exact[i] = 1
		}
		out.bad[i] = !conforms(r)
		if d.mh != nil {
			// A text with a word has a shingle: the signature exists.
			_, mins = d.mh.Sign(w, out.sig[i*size:(i+1)*size], mins)
		}
	}
	return out
}

// dedupPeakHook, when set (by benchmarks), is called when Plan holds the
// most memory, to measure it.
var dedupPeakHook func()

// Plan reads every input record, signs it on all CPUs, clusters the
// duplicates and decides which record of each cluster is kept. The digest
// covers every decision.
func (d *deduper) Plan(ctx context.Context, scan func(yield func(*record.Record) error) error) (string, error) {
	size := 0
	if d.mh != nil {
		size = d.mh.Size()
	}
	t := &dedupTable{size: size}
	sources := map[string]uint16{}
	var srcNames []string

	// Signing runs on every CPU; the table is filled by one collector in the
	// order batches finish. That order does not matter: records are
	// re-ordered by preference and rank below.
	workers := runtime.NumCPU()
	jobs := make(chan *dedupBatch, 2*workers)
	results := make(chan *dedupSigned, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range jobs {
				results <- d.sign(b, size)
			}
		})
	}
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for s := range results {
			t.rank = append(t.rank, s.rank...)
			t.exact = append(t.exact, s.exact...)
			t.bad = append(t.bad, s.bad...)
			t.src = append(t.src, s.b.src...)
			if size > 0 {
				t.appendSig(s.sig)
			}
			for _, r := range s.b.recs {
				t.ids = append(t.ids, r.ID...)
				t.idEnd = append(t.idEnd, uint32(len(t.ids)))
			}
		}
	}()
	const batchSize = 512
	cur := &dedupBatch{}
	scanErr := scan(func(r *record.Record) error {
		s, ok := sources[r.Source]
		if !ok {
			if len(sources) == 1<<16-1 {
				return fmt.Errorf("more than %d sources", 1<<16-1)
			}
			s = uint16(len(sources))
			sources[r.Source] = s
			srcNames = append(srcNames, r.Source)
		}
		cur.recs = append(cur.recs, r)
		cur.src = append(cur.src, s)
		if len(cur.recs) == batchSize {
			jobs <- cur
			cur = &dedupBatch{}
		}
		return ctx.Err()
	})
	if len(cur.recs) > 0 && scanErr == nil {
		jobs <- cur
	}
	close(jobs)
	wg.Wait()
	close(results)
	<-collected
	if scanErr != nil {
		return "", scanErr
	}
	if len(t.ids) > 1<<32-1 {
		return "", fmt.Errorf("record IDs of more than 4 GiB")
	}
	return d.cluster(t, srcNames)
}

// cluster groups the table's records and keeps the plan.
func (d *deduper) cluster(t *dedupTable, srcNames []string) (string, error) {
	n := len(t.rank)
	// Preference of each source: its place in prefer, unlisted last.
	prio := make([]int, len(srcNames))
	for i, s := range srcNames {
		prio[i] = len(d.cfg.Prefer)
		if j := slices.Index(d.cfg.Prefer, s); j >= 0 {
			prio[i] = j
		}
	}
	// Positions: records in order of preference (records whose calls fit
	// their tools, then by source, then by rank). A cluster keeps its
	// member of smallest position, which union-find makes the root.
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	slices.SortFunc(perm, func(a, b uint32) int {
		if t.bad[a] != t.bad[b] {
			if t.bad[a] {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(prio[t.src[a]], prio[t.src[b]]); c != 0 {
			return c
		}
		return cmp.Compare(t.rank[a], t.rank[b])
	})
	// Ranks identify records in Process: they must be unique.
	{
		ranks := slices.Clone(t.rank)
		slices.Sort(ranks)
		for i := 1; i < n; i++ {
			if ranks[i] == ranks[i-1] {
				var same []string
				for j := range n {
					if t.rank[j] == ranks[i] {
						same = append(same, t.id(j))
					}
				}
				return "", fmt.Errorf("records %s have the same ID hash (an ID occurs twice in the input?)", strings.Join(same, ", "))
			}
		}
	}
	group := func(i uint32) uint16 {
		if d.cfg.Scope == ScopeWithin {
			return t.src[i]
		}
		return 0
	}
	sigOf := func(pos uint32) []byte { return t.sigOf(int(perm[pos])) }

	uf := newUnionFind(n)
	entries := make([]bucketEntry, 0, n)
	scratch := make([]bucketEntry, n)
	if dedupPeakHook != nil {
		entries = entries[:n]
		dedupPeakHook()
		entries = entries[:0]
	}
	if d.cfg.Mode != DedupNear {
		for pos := range n {
			if i := perm[pos]; t.exact[i] != 0 {
				entries = append(entries, bucketEntry{key: t.exact[i], grp: group(i), pos: uint32(pos)})
			}
		}
		sortBuckets(entries, scratch)
		eachBucket(entries, func(run []bucketEntry) {
			for _, e := range run[1:] {
				uf.union(run[0].pos, e.pos)
			}
		})
	}
	if d.mh != nil {
		var leaders []uint32
		for band := range d.mh.Bands {
			entries = entries[:0]
			for pos := range n {
				if i := perm[pos]; t.exact[i] != 0 {
					entries = append(entries, bucketEntry{key: d.mh.BandKey(sigOf(uint32(pos)), band), grp: group(i), pos: uint32(pos)})
				}
			}
			sortBuckets(entries, scratch)
			eachBucket(entries, func(run []bucketEntry) {
				leaders = leaders[:0]
				for _, e := range run {
					joined := false
					for _, l := range leaders {
						if uf.find(l) == uf.find(e.pos) || near.Similarity(sigOf(l), sigOf(e.pos)) >= d.cfg.Threshold {
							uf.union(l, e.pos)
							joined = true
							break
						}
					}
					if !joined && len(leaders) < dedupMaxLeaders {
						leaders = append(leaders, e.pos)
					}
				}
			})
		}
	}
	entries, scratch = nil, nil

	// The decisions: every record that is not its cluster's root is removed.
	type removed struct {
		pos, root uint32
		sim       uint8
		exact     bool
	}
	var rem []removed
	for pos := range n {
		root := uf.find(uint32(pos))
		if int(root) == pos {
			continue
		}
		ri, pi := perm[root], perm[pos]
		r := removed{pos: uint32(pos), root: uint32(root), exact: t.exact[ri] == t.exact[pi] && t.exact[pi] != 0}
		switch {
		case r.exact:
			r.sim = 100
		case d.mh != nil && t.exact[ri] != 0 && t.exact[pi] != 0:
			r.sim = uint8(near.Similarity(sigOf(uint32(root)), sigOf(uint32(pos)))*100 + 0.5)
		}
		rem = append(rem, r)
	}
	// Clusters, by root.
	slices.SortFunc(rem, func(a, b removed) int { return cmp.Compare(a.root, b.root) })
	keepers := []keeperEntry{}
	keeperOf := map[uint32]int32{} // root → index in keepers, before sorting
	for _, r := range rem {
		k, ok := keeperOf[r.root]
		if !ok {
			k = int32(len(keepers))
			keeperOf[r.root] = k
			i := int(perm[r.root])
			keepers = append(keepers, keeperEntry{rank: t.rank[i], id: t.id(i), size: 1})
		}
		keepers[k].size++
	}
	order := make([]int32, len(keepers)) // keepers sorted by rank
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(keepers[a].rank, keepers[b].rank) })
	newIndex := make([]int32, len(keepers))
	sorted := make([]keeperEntry, len(keepers))
	for i, k := range order {
		newIndex[k] = int32(i)
		sorted[i] = keepers[k]
	}
	dups := make([]dupEntry, len(rem))
	dupIDs := make([]string, len(rem))
	for i, r := range rem {
		dups[i] = dupEntry{rank: t.rank[perm[r.pos]], keeper: newIndex[keeperOf[r.root]], sim: r.sim, exact: r.exact}
		dupIDs[i] = t.id(int(perm[r.pos]))
	}
	idx := make([]int, len(dups))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(dups[a].rank, dups[b].rank) })
	h := sha256.New()
	sortedDups := make([]dupEntry, len(dups))
	for j, i := range idx {
		sortedDups[j] = dups[i]
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%t\n", dupIDs[i], sorted[dups[i].keeper].id, dups[i].sim, dups[i].exact)
	}
	var noText []uint64
	for i, x := range t.exact {
		if x == 0 {
			noText = append(noText, t.rank[i])
		}
	}
	slices.Sort(noText)
	d.dups, d.keepers, d.noText, d.planned = sortedDups, sorted, noText, true
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// Process rejects the records Plan found to duplicate a kept one.
func (d *deduper) Process(ctx context.Context, r *record.Record) ([]*record.Record, error) {
	if !d.planned {
		return nil, fmt.Errorf("Process called before Plan")
	}
	rk := d.rank(r.ID)
	if i, ok := slices.BinarySearchFunc(d.dups, rk, func(e dupEntry, k uint64) int { return cmp.Compare(e.rank, k) }); ok {
		e := d.dups[i]
		keeper := d.keepers[e.keeper].id
		if e.exact {
			Count(ctx, "removed.exact", 1)
			return nil, contract.Rejectf(ReasonDuplicate, "duplicate_of=%s (the same normalised %s)", keeper, strings.Join(d.cfg.Fields, " and "))
		}
		Count(ctx, "removed.near", 1)
		via := ""
		if float64(e.sim)/100 < d.cfg.Threshold {
			via = ", joined through other members of the cluster"
		}
		return nil, contract.Rejectf(ReasonNearDuplicate, "duplicate_of=%s (estimated Jaccard similarity %.2f of %s %d-grams of %s, threshold %.2f%s)",
			keeper, float64(e.sim)/100, d.cfg.Shingle, d.cfg.NGram, strings.Join(d.cfg.Fields, " and "), d.cfg.Threshold, via)
	}
	if i, ok := slices.BinarySearchFunc(d.keepers, rk, func(e keeperEntry, k uint64) int { return cmp.Compare(e.rank, k) }); ok {
		size := d.keepers[i].size
		Count(ctx, "clusters", 1)
		Count(ctx, "cluster_records", int64(size))
		Count(ctx, "cluster_size."+sizeRange(int(size)), 1)
	}
	if _, ok := slices.BinarySearch(d.noText, rk); ok {
		Count(ctx, "unchecked_no_text", 1)
	}
	return []*record.Record{r}, nil
}

// conforms reports whether every call of r names a tool available to it
// and fits that tool's parameters: verify's calls_resolved and args_schema
// checks pass. A record without calls conforms.
func conforms(r *record.Record) bool {
	for _, m := range r.Messages {
		if len(m.Calls) > 0 {
			return len(verify.CallsResolved.Check(r)) == 0 && len(verify.ArgsSchema.Check(r)) == 0
		}
	}
	return true
}

// unionFind joins record positions into clusters; a cluster's root is its
// smallest position, the record it keeps.
type unionFind []uint32

func newUnionFind(n int) unionFind {
	uf := make(unionFind, n)
	for i := range uf {
		uf[i] = uint32(i)
	}
	return uf
}

func (uf unionFind) find(x uint32) uint32 {
	for uf[x] != x {
		uf[x] = uf[uf[x]] // path halving
		x = uf[x]
	}
	return x
}

func (uf unionFind) union(a, b uint32) {
	ra, rb := uf.find(a), uf.find(b)
	switch {
	case ra < rb:
		uf[rb] = ra
	case rb < ra:
		uf[ra] = rb
	}
}

// A bucketEntry places a record (by position) in a bucket: an exact-text
// hash or an LSH band key, within a group (its source with scope: within).
type bucketEntry struct {
	key uint64
	grp uint16
	pos uint32
}

// sortBuckets orders entries by group, then key, keeping the order of equal
// ones (entries are filled in position order): a stable radix sort over
// 16-bit digits, skipping digits all entries share. scratch holds at least
// len(entries).
func sortBuckets(entries, scratch []bucketEntry) {
	var counts [1 << 16]int
	src, dst := entries, scratch[:len(entries)]
	for pass := range 5 {
		digit := func(e *bucketEntry) int {
			if pass == 4 {
				return int(e.grp)
			}
			return int(e.key >> (16 * pass) & 0xffff)
		}
		counts = [1 << 16]int{}
		for i := range src {
			counts[digit(&src[i])]++
		}
		if len(src) == 0 || counts[digit(&src[0])] == len(src) {
			continue
		}
		sum := 0
		for i, c := range counts {
			counts[i] = sum
			sum += c
		}
		for i := range src {
			k := digit(&src[i])
			dst[counts[k]] = src[i]
			counts[k]++
		}
		src, dst = dst, src
	}
	if len(src) > 0 && &src[0] != &entries[0] {
		copy(entries, src)
	}
}

// eachBucket calls fn for each run of sorted entries with equal key and
// group that holds more than one entry.
func eachBucket(entries []bucketEntry, fn func(run []bucketEntry)) {
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].key == entries[i].key && entries[j].grp == entries[i].grp {
			j++
		}
		if j-i > 1 {
			fn(entries[i:j])
		}
		i = j
	}
}

// sizeRange names the power-of-two range holding n ≥ 2: "2", "3-4", "5-8", ….
func sizeRange(n int) string {
	if n <= 2 {
		return "2"
	}
	hi := 4
	for hi < n {
		hi *= 2
	}
	return strconv.Itoa(hi/2+1) + "-" + strconv.Itoa(hi)
}

// SavePlan writes the decisions Process needs: the kept members of
// clusters, the removed records and the records without text, each by
// rank in ascending order.
func (d *deduper) SavePlan(w io.Writer) error {
	if !d.planned {
		return errors.New("dedup: no plan to save")
	}
	var p planWriter
	p.uint(uint64(len(d.keepers)))
	for _, k := range d.keepers {
		p.u64(k.rank)
		p.str(k.id)
		p.uint(uint64(k.size))
	}
	p.uint(uint64(len(d.dups)))
	for _, e := range d.dups {
		p.u64(e.rank)
		p.uint(uint64(e.keeper))
		flags := uint64(e.sim) << 1
		if e.exact {
			flags |= 1
		}
		p.uint(flags)
	}
	p.uint(uint64(len(d.noText)))
	for _, r := range d.noText {
		p.u64(r)
	}
	return p.flush(w)
}

// LoadPlan reads what SavePlan wrote and checks what Process relies on:
// ranks in ascending order, keepers that exist.
func (d *deduper) LoadPlan(r io.Reader) error {
	p, err := newPlanReader(r)
	if err != nil {
		return err
	}
	ascending := func(i int, prev, rank uint64) bool { return i == 0 || prev < rank }
	keepers := make([]keeperEntry, p.count())
	for i := range keepers {
		k := keeperEntry{rank: p.u64(), id: p.str(), size: int32(min(p.uint(), 1<<31-1))}
		if p.err == nil && !ascending(i, keepers[max(i-1, 0)].rank, k.rank) {
			return errors.New("dedup plan: keepers out of order")
		}
		keepers[i] = k
	}
	dups := make([]dupEntry, p.count())
	for i := range dups {
		e := dupEntry{rank: p.u64()}
		keeper, flags := p.uint(), p.uint()
		if p.err == nil && (keeper >= uint64(len(keepers)) || flags>>1 > 100 || !ascending(i, dups[max(i-1, 0)].rank, e.rank)) {
			return errors.New("dedup plan: a removed record is out of order or names no keeper")
		}
		e.keeper, e.sim, e.exact = int32(keeper), uint8(flags>>1), flags&1 == 1
		dups[i] = e
	}
	noText := make([]uint64, p.count())
	for i := range noText {
		noText[i] = p.u64()
		if p.err == nil && !ascending(i, noText[max(i-1, 0)], noText[i]) {
			return errors.New("dedup plan: records without text out of order")
		}
	}
	if err := p.done(); err != nil {
		return err
	}
	d.dups, d.keepers, d.noText, d.planned = dups, keepers, noText, true
	return nil
}
