package toollib

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/augmentdata/augment/stages/record"
)

// Tool similarity, Meta-Tool style (seed 000 §3.1, Algorithm 1):
//
//	similarity(q, v) = α·S_t + (1 − α)·S_p
//	S_t = cos(E(desc_q), E(desc_v))
//	S_p = mean over q's parameter descriptions of the max cosine to v's parameter descriptions
//
// The comparison is asymmetric: q is the tool asked for (a meta_tool query),
// v the tool offered. Edge cases:
//   - neither q nor v has parameters: S_p = 1 (they agree: nothing to pass);
//   - only one of them has parameters: S_p = 0 (they cannot be called alike);
//   - an empty text (description or parameter description) embeds to no
//     vector and has cosine 0 with everything.
//
// Vectors are normalised to unit length when embedded, so a cosine is a dot
// product. A zero vector from the embedder counts as empty.

// An Embedder turns texts into vectors, one per text, in order.
// llm.Embedder satisfies it.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// A Query is what Algorithm 1 compares: a tool's description and the
// descriptions of its parameters. Its JSON form is the arguments object of a
// meta_tool call.
type Query struct {
	Description string   `json:"tool_description"`
	Params      []string `json:"param_description"`
}

// QueryOf describes t the way a meta_tool call asks for it: t's description
// and, in declaration order, one description per parameter in
// t.Parameters.properties — every parameter, required or not, as the
// paper's examples list optional ones too. A tool or parameter without a
// description is described by its name with "_" and "-" read as spaces
// (a meta_tool call with an empty tool_description is malformed).
// Params is never nil, so a tool without parameters encodes as
// "param_description": []. The error reports parameters that are not a
// JSON Schema object.
func QueryOf(t record.Tool) (Query, error) {
	q := Query{Description: strings.TrimSpace(t.Description), Params: []string{}}
	if q.Description == "" {
		q.Description = nameText(t.Name)
	}
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		return q, nil
	}
	keys, vals, err := ObjectMembers(t.Parameters)
	if err != nil {
		return q, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
	}
	i := slices.Index(keys, "properties")
	if i < 0 || string(bytes.TrimSpace(vals[i])) == "null" {
		return q, nil
	}
	names, props, err := ObjectMembers(vals[i])
	if err != nil {
		return q, fmt.Errorf("tool %q: parameters.properties: %w", t.Name, err)
	}
	for j, name := range names {
		var p struct {
			Description any `json:"description"`
		}
		desc := ""
		if json.Unmarshal(props[j], &p) == nil {
			if s, ok := p.Description.(string); ok {
				desc = strings.TrimSpace(s)
			}
		}
		if desc == "" {
			desc = nameText(name)
		}
		q.Params = append(q.Params, desc)
	}
	return q, nil
}

// ObjectMembers returns the keys and values of a JSON object in document
// order (encoding/json maps would lose the order). The error says what else
// the value is, or names a key that appears twice.
func ObjectMembers(raw []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("want a JSON object, got %s", jsonKind(tok))
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string)
		if slices.Contains(keys, key) {
			return nil, nil, fmt.Errorf("key %q appears twice", key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, key)
		vals = append(vals, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if len(bytes.Trim(raw[dec.InputOffset():], jsonSpace)) > 0 { // not TrimSpace: \v or U+00A0 is not JSON's
		return nil, nil, errors.New("trailing data after the object")
	}
	return keys, vals, nil
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\n\r"

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// Vectors are the embeddings of a Query, each of unit length; a nil vector
// stands for an empty text.
type Vectors struct {
	Desc   []float32
	Params [][]float32
}

// Score returns the similarity of q to v (see the top of this file); alpha
// weighs the description against the parameters. The result lies in
// [−1, 1] and is 1 for a query scored against itself unless a text is empty.
func Score(alpha float64, q, v Vectors) float64 {
	return alpha*float64(dot(q.Desc, v.Desc)) + (1-alpha)*paramScore(q.Params, v.Params)
}

// Scores returns Score(alpha, a, b) and Score(alpha, b, a), exactly, with
// every cosine computed once: the description cosine is symmetric and the
// two parameter scores average the row and the column maxima of the same
// cosines.
func Scores(alpha float64, a, b Vectors) (ab, ba float64) {
	d := alpha * float64(dot(a.Desc, b.Desc))
	pa, pb := len(a.Params), len(b.Params)
	switch {
	case pa == 0 && pb == 0:
		return d + (1 - alpha), d + (1 - alpha)
	case pa == 0 || pb == 0:
		return d, d
	}
	var buf [64]float32
	m := buf[:0]
	if pa*pb > len(buf) {
		m = make([]float32, 0, pa*pb)
	}
	for _, x := range a.Params {
		for _, y := range b.Params {
			m = append(m, dot(x, y))
		}
	}
	var sum float64
	for i := range pa {
		best := float32(math.Inf(-1))
		for _, c := range m[i*pb : (i+1)*pb] {
			best = max(best, c)
		}
		sum += float64(best)
	}
	ab = d + (1-alpha)*(sum/float64(pa))
	sum = 0
	for j := range pb {
		best := float32(math.Inf(-1))
		for i := range pa {
			best = max(best, m[i*pb+j])
		}
		sum += float64(best)
	}
	return ab, d + (1-alpha)*(sum/float64(pb))
}

// ScoresExceed reports whether Score(alpha, a, b) or Score(alpha, b, a)
// exceeds limit: exactly what Scores' two values say, for vectors of unit
// length as Embed and Index make them. The parameter cosines are skipped
// when the description cosine alone keeps both scores at or below limit (a
// parameter score is at most 1, plus float32 rounding far below the margin
// used here): a distractor draw tests every candidate against every
// invoked tool, and most candidates are unrelated.
func ScoresExceed(alpha float64, a, b Vectors, limit float64) bool {
	if len(a.Params) > 0 && len(b.Params) > 0 {
		if d := alpha * float64(dot(a.Desc, b.Desc)); d+(1-alpha)*paramBound <= limit {
			return false
		}
	}
	ab, ba := Scores(alpha, a, b)
	return ab > limit || ba > limit
}

// paramBound is above any parameter score of unit vectors: a float32 dot
// product of two unit vectors exceeds 1 by rounding only, by less than
// 1e-4 even at thousands of dimensions.
const paramBound = 1.01

func paramScore(q, v [][]float32) float64 {
	switch {
	case len(q) == 0 && len(v) == 0:
		return 1
	case len(q) == 0 || len(v) == 0:
		return 0
	}
	var sum float64
	for _, a := range q {
		best := float32(math.Inf(-1))
		for _, b := range v {
			best = max(best, dot(a, b))
		}
		sum += float64(best)
	}
	return sum / float64(len(q))
}

// dot is the cosine of two unit vectors; 0 when either is empty.
func dot(a, b []float32) float32 {
	if len(a) == 0 || len(b) == 0 || len(a) != len(b) {
		return 0
	}
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Embed embeds the texts of qs, each distinct non-empty text once, in
// requests of at most batch texts (batch ≤ 0: one request). The error is
// the embedder's, or a malformed answer (wrong count, mixed dimensions).
func Embed(ctx context.Context, e Embedder, qs []Query, batch int) ([]Vectors, error) {
	var tb textTable
	ids := make([][]int32, len(qs)) // per query: description, then parameters
	for i, q := range qs {
		ids[i] = append(ids[i], tb.add(q.Description))
		for _, p := range q.Params {
			ids[i] = append(ids[i], tb.add(p))
		}
	}
	if err := tb.embed(ctx, e, batch); err != nil {
		return nil, err
	}
	out := make([]Vectors, len(qs))
	for i := range qs {
		out[i].Desc = tb.vector(ids[i][0])
		if n := len(ids[i]) - 1; n > 0 {
			out[i].Params = make([][]float32, n)
			for j, id := range ids[i][1:] {
				out[i].Params[j] = tb.vector(id)
			}
		}
	}
	return out, nil
}

// Similarity embeds q and v with one request and scores q against v.
func Similarity(ctx context.Context, e Embedder, alpha float64, q, v Query) (float64, error) {
	vs, err := Embed(ctx, e, []Query{q, v}, 0)
	if err != nil {
		return 0, err
	}
	return Score(alpha, vs[0], vs[1]), nil
}

// textTable deduplicates texts and stores their unit vectors in one arena.
type textTable struct {
	texts []string
	index map[string]int32
	dim   int
	arena []float32 // row i holds texts[i]'s vector; all-zero for empty results
	zero  []bool
}

// add returns the row of text, or -1 for an empty text.
func (tb *textTable) add(text string) int32 {
	text = strings.TrimSpace(text)
	if text == "" {
		return -1
	}
	if tb.index == nil {
		tb.index = map[string]int32{}
	}
	if id, ok := tb.index[text]; ok {
		return id
	}
	id := int32(len(tb.texts))
	tb.index[text] = id
	tb.texts = append(tb.texts, text)
	return id
}

func (tb *textTable) embed(ctx context.Context, e Embedder, batch int) error {
	if len(tb.texts) == 0 {
		return nil
	}
	if e == nil {
		return errors.New("similarity: no embedder configured")
	}
	if batch <= 0 {
		batch = len(tb.texts)
	}
	tb.zero = make([]bool, len(tb.texts))
	for start := 0; start < len(tb.texts); start += batch {
		end := min(start+batch, len(tb.texts))
		vecs, err := e.Embed(ctx, tb.texts[start:end])
		if err != nil {
			return fmt.Errorf("similarity: embedding texts %d–%d of %d: %w", start+1, end, len(tb.texts), err)
		}
		if len(vecs) != end-start {
			return fmt.Errorf("similarity: embedder returned %d vectors for %d texts", len(vecs), end-start)
		}
		for i, v := range vecs {
			if tb.dim == 0 {
				if len(v) == 0 {
					return errors.New("similarity: embedder returned an empty vector")
				}
				tb.dim = len(v)
				tb.arena = make([]float32, 0, len(tb.texts)*tb.dim)
			}
			if len(v) != tb.dim {
				return fmt.Errorf("similarity: embedder returned vectors of %d and %d dimensions", tb.dim, len(v))
			}
			// Copy first: the embedder may hand out vectors it caches.
			tb.arena = append(tb.arena, v...)
			row := tb.arena[len(tb.arena)-tb.dim:]
			if !normalize(row) {
				tb.zero[start+i] = true
				clear(row)
			}
		}
	}
	tb.index = nil // only the arena is needed from here on
	tb.texts = nil
	return nil
}

// vector returns row id of the arena, or nil for an empty text.
func (tb *textTable) vector(id int32) []float32 {
	if id < 0 || tb.zero[id] {
		return nil
	}
	off := int(id) * tb.dim
	return tb.arena[off : off+tb.dim : off+tb.dim]
}

// normalize scales v to unit length in place; false for a zero (or
// non-finite) vector.
func normalize(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return false
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return true
}

// An Index holds the embeddings of a list of tools, computed once, for
// scoring and top-k retrieval by Algorithm 1. It is safe for concurrent
// use once built.
//
// Memory: one float32 vector per distinct non-empty text (descriptions and
// parameter descriptions; repeated texts such as "The city and state" are
// stored once), i.e. about distinct_texts × dim × 4 bytes plus 4 bytes per
// text reference and 24 per parameter reference (its vector's slice, so
// that Vectors allocates nothing). The demo data has ~2 distinct texts per tool, so 30,000
// tools take ~60k × 1024 × 4 B ≈ 250 MB with a 1024-dimensional model
// (multilingual-e5-large), ~120 MB at 512. While it is built, the texts
// and a map over them are held as well. Top allocates a scratch array of
// 4 bytes per distinct text and query parameter.
type Index struct {
	tb     textTable
	desc   []int32 // per tool: row of its description, -1 if empty
	pstart []int32 // per tool i: its parameter rows are prow[pstart[i]:pstart[i+1]]
	prow   []int32
	pvec   [][]float32 // the vector of each of prow, for Vectors without allocating
}

// NewIndex embeds qs (typically QueryOf of every library tool, in library
// order) in requests of batch texts; tool i of the index is qs[i].
func NewIndex(ctx context.Context, e Embedder, qs []Query, batch int) (*Index, error) {
	ix := &Index{desc: make([]int32, len(qs)), pstart: make([]int32, len(qs)+1)}
	for i, q := range qs {
		ix.desc[i] = ix.tb.add(q.Description)
		for _, p := range q.Params {
			ix.prow = append(ix.prow, ix.tb.add(p))
		}
		ix.pstart[i+1] = int32(len(ix.prow))
	}
	if err := ix.tb.embed(ctx, e, batch); err != nil {
		return nil, err
	}
	ix.pvec = make([][]float32, len(ix.prow))
	for j, r := range ix.prow {
		ix.pvec[j] = ix.tb.vector(r)
	}
	return ix, nil
}

// Len is the number of tools in the index.
func (ix *Index) Len() int { return len(ix.desc) }

// Vectors returns tool i's vectors; they share the index's memory and must
// not be changed.
func (ix *Index) Vectors(i int) Vectors {
	v := Vectors{Desc: ix.tb.vector(ix.desc[i])}
	if a, b := ix.pstart[i], ix.pstart[i+1]; b > a {
		v.Params = ix.pvec[a:b:b]
	}
	return v
}

// Score returns the similarity of q to tool i.
func (ix *Index) Score(alpha float64, q Vectors, i int) float64 {
	return alpha*float64(dot(q.Desc, ix.tb.vector(ix.desc[i]))) + (1-alpha)*ix.paramScore(q.Params, i)
}

func (ix *Index) paramScore(q [][]float32, i int) float64 {
	return ix.paramScoreMemo(q, i, nil)
}

// paramScoreMemo is paramScore remembering cosines in memo (NaN: not yet
// computed; row r of query parameter a at a*rows+r), so parameter texts
// shared by many tools are compared once per query. memo may be nil.
func (ix *Index) paramScoreMemo(q [][]float32, i int, memo []float32) float64 {
	rows := ix.prow[ix.pstart[i]:ix.pstart[i+1]]
	switch {
	case len(q) == 0 && len(rows) == 0:
		return 1
	case len(q) == 0 || len(rows) == 0:
		return 0
	}
	n := len(ix.tb.zero)
	var sum float64
	for a, qv := range q {
		best := float32(math.Inf(-1))
		for _, r := range rows {
			var c float32
			switch {
			case r < 0:
			case memo == nil:
				c = dot(qv, ix.tb.vector(r))
			default:
				if c = memo[a*n+int(r)]; c != c {
					c = dot(qv, ix.tb.vector(r))
					memo[a*n+int(r)] = c
				}
			}
			best = max(best, c)
		}
		sum += float64(best)
	}
	return sum / float64(len(q))
}

// orderedBits maps a float32 to a uint32 of the same order as
// cmp.Compare's: NaN lowest, then -Inf … +Inf, with -0 equal to +0.
func orderedBits(f float32) uint32 {
	switch {
	case f != f:
		return 0
	case f == 0:
		f = 0 // -0 sorts as +0
	}
	b := math.Float32bits(f)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

// Top returns the k tools most similar to q among those keep accepts (nil
// keeps all), best first, as Hits whose Doc is the tool's index; ties go to
// the lower index. It returns fewer
// than k hits when fewer tools are kept.
//
// The result is exactly Algorithm 1's ranking, found without scoring every
// tool in full: description cosines are computed for all tools, and
// parameters are scored in decreasing order of description cosine until
// even a perfect parameter score could not enter the top k.
func (ix *Index) Top(alpha float64, q Vectors, k int, keep func(tool int) bool) []Hit {
	if k <= 0 || ix.Len() == 0 {
		return nil
	}
	// Candidates are taken best first: by description cosine, then lower
	// index. Each is sorted as one integer key (the cosine's bits made to
	// order as integers, inverted, above the index), which sorts several
	// times faster than a comparison function.
	st := make([]float32, ix.Len())
	keys := make([]uint64, 0, ix.Len())
	for i := range ix.desc {
		if keep != nil && !keep(i) {
			continue
		}
		st[i] = dot(q.Desc, ix.tb.vector(ix.desc[i]))
		keys = append(keys, uint64(^orderedBits(st[i]))<<32|uint64(i))
	}
	slices.Sort(keys)
	ahead := func(a, b Hit) bool { return a.Score > b.Score || a.Score == b.Score && a.Doc < b.Doc }
	memo := make([]float32, len(q.Params)*len(ix.tb.zero))
	for i := range memo {
		memo[i] = float32(math.NaN())
	}
	// The weight of a perfect parameter score, with room for float32
	// rounding (the cosine of a unit vector with itself can exceed 1).
	maxParam := (1 - alpha) * (1 + 1e-4)
	hits := make([]Hit, 0, k+1)
	for _, key := range keys {
		tool := int(uint32(key))
		if len(hits) == k && alpha*float64(st[tool])+maxParam < hits[k-1].Score {
			break // sorted by description cosine: no later tool can do better
		}
		h := Hit{Doc: tool, Score: alpha*float64(st[tool]) + (1-alpha)*ix.paramScoreMemo(q.Params, tool, memo)}
		if len(hits) == k && !ahead(h, hits[k-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(hits, h, func(a, b Hit) int {
			if ahead(a, b) {
				return -1
			}
			return 1
		})
		hits = slices.Insert(hits, i, h)
		if len(hits) > k {
			hits = hits[:k]
		}
	}
	return hits
}

// nameText reads a tool or parameter name as words: "_" and "-" are
// spaces.
func nameText(name string) string {
	return strings.TrimSpace(strings.NewReplacer("_", " ", "-", " ").Replace(name))
}
