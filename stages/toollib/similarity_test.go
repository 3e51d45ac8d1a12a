package toollib

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/record"
)

// wordEmbedder is a lexical test embedder: each lower-cased word adds 1 to
// the dimension its hash picks. It counts requests and texts.
type wordEmbedder struct {
	dim int

	mu       sync.Mutex
	requests int
	texts    []string
}

func (e *wordEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.requests++
	e.texts = append(e.texts, texts...)
	e.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, e.dim)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := fnv.New32a()
			h.Write([]byte(strings.Trim(w, ".,;:!?()\"'")))
			v[h.Sum32()%uint32(e.dim)]++
		}
		out[i] = v
	}
	return out, nil
}

// tableEmbedder answers with fixed vectors per text.
type tableEmbedder map[string][]float32

func (e tableEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v, ok := e[t]
		if !ok {
			return nil, errors.New("unknown text " + t)
		}
		out[i] = v
	}
	return out, nil
}

// funcEmbedder adapts a function.
type funcEmbedder func(ctx context.Context, texts []string) ([][]float32, error)

func (f funcEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

func tool(name, desc, params string) record.Tool {
	return record.Tool{Name: name, Description: desc, Parameters: json.RawMessage(params)}
}

func TestQueryOf(t *testing.T) {
	tests := []struct {
		name    string
		tool    record.Tool
		want    Query
		wantErr string
	}{
		{
			name: "declaration order, not alphabetical",
			tool: tool("get_traffic", " Get the current traffic report ",
				`{"type":"object","properties":{"zeta":{"type":"string","description":"Last letter"},"alpha":{"type":"string","description":"First letter"}},"required":["alpha"]}`),
			want: Query{Description: "Get the current traffic report", Params: []string{"Last letter", "First letter"}},
		},
		{
			name: "optional parameters count too",
			tool: tool("quote", "Fetch a random quote",
				`{"type":"object","properties":{"category":{"type":"string","description":"Narrow down quotes by genre"}}}`),
			want: Query{Description: "Fetch a random quote", Params: []string{"Narrow down quotes by genre"}},
		},
		{
			name: "missing or non-string description falls back to the name",
			tool: tool("f", "d", `{"type":"object","properties":{"start_date":{"type":"string"},"max-results":{"type":"integer","description":7},"q":{"description":"  "}}}`),
			want: Query{Description: "d", Params: []string{"start date", "max results", "q"}},
		},
		{
			name: "a tool without a description is asked for by its name",
			tool: tool("get_exchange-rate", "  ", `{"type":"object","properties":{}}`),
			want: Query{Description: "get exchange rate"},
		},
		{
			name: "no properties",
			tool: tool("now", "Current time", `{"type":"object","properties":{}}`),
			want: Query{Description: "Current time"},
		},
		{
			name: "properties absent or null",
			tool: tool("now", "Current time", `{"type":"object","properties":null}`),
			want: Query{Description: "Current time"},
		},
		{
			name: "empty parameters",
			tool: tool("now", "Current time", ``),
			want: Query{Description: "Current time"},
		},
		{
			name: "nested properties are not parameters",
			tool: tool("f", "d", `{"type":"object","properties":{"filter":{"type":"object","description":"Filter","properties":{"x":{"description":"inner"}}}}}`),
			want: Query{Description: "d", Params: []string{"Filter"}},
		},
		{
			name:    "parameters not an object",
			tool:    tool("f", "d", `["a"]`),
			wantErr: "want a JSON object, got an array",
		},
		{
			name:    "properties not an object",
			tool:    tool("f", "d", `{"properties":"x"}`),
			wantErr: "parameters.properties: want a JSON object, got a string",
		},
		{
			name:    "broken JSON",
			tool:    tool("f", "d", `{"properties":{"a":`),
			wantErr: "parameters",
		},
		{
			name:    "trailing data",
			tool:    tool("f", "d", `{} {}`),
			wantErr: "trailing data",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := QueryOf(tt.tool)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Description != tt.want.Description || !slices.Equal(got.Params, tt.want.Params) || got.Params == nil {
				t.Errorf("got %#v, want %#v (Params never nil)", got, tt.want)
			}
		})
	}
}

func TestQueryJSON(t *testing.T) {
	b, err := json.Marshal(Query{Description: "d", Params: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tool_description":"d","param_description":["p"]}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestScore(t *testing.T) {
	x := []float32{1, 0, 0}
	y := []float32{0, 1, 0}
	xy := []float32{float32(math.Sqrt2 / 2), float32(math.Sqrt2 / 2), 0}
	tests := []struct {
		name  string
		alpha float64
		q, v  Vectors
		want  float64
	}{
		{"identical", 0.5, Vectors{x, [][]float32{y}}, Vectors{x, [][]float32{y}}, 1},
		{"orthogonal", 0.5, Vectors{x, [][]float32{x}}, Vectors{y, [][]float32{y}}, 0},
		{"alpha weighs description", 0.8, Vectors{x, [][]float32{x}}, Vectors{x, [][]float32{y}}, 0.8},
		{"alpha weighs parameters", 0.2, Vectors{x, [][]float32{x}}, Vectors{y, [][]float32{x}}, 0.8},
		{"half angle", 1, Vectors{Desc: x}, Vectors{Desc: xy}, math.Sqrt2 / 2},
		{"no parameters on either side", 0.5, Vectors{Desc: x}, Vectors{Desc: y}, 0.5},
		{"query has parameters, value none", 0.5, Vectors{x, [][]float32{x}}, Vectors{Desc: x}, 0.5},
		{"value has parameters, query none", 0.5, Vectors{Desc: x}, Vectors{x, [][]float32{x}}, 0.5},
		{"max over value parameters", 0, Vectors{x, [][]float32{x}}, Vectors{x, [][]float32{y, x}}, 1},
		// Mean over the query's parameters: extra value parameters do not count…
		{"asymmetric: extra value parameter ignored", 0, Vectors{x, [][]float32{x}}, Vectors{x, [][]float32{x, y}}, 1},
		// …but an unmatched query parameter does.
		{"asymmetric: unmatched query parameter", 0, Vectors{x, [][]float32{x, y}}, Vectors{x, [][]float32{x}}, 0.5},
		{"empty description", 1, Vectors{Desc: nil}, Vectors{Desc: x}, 0},
		{"empty parameter text", 0, Vectors{x, [][]float32{nil}}, Vectors{x, [][]float32{x}}, 0},
		{"opposite", 1, Vectors{Desc: x}, Vectors{Desc: []float32{-1, 0, 0}}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Score(tt.alpha, tt.q, tt.v); math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("Score = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEmbed(t *testing.T) {
	e := &wordEmbedder{dim: 32}
	qs := []Query{
		{Description: "Get the weather", Params: []string{"The city", "The unit"}},
		{Description: "Get the weather", Params: []string{"The city", " "}},
		{Description: ""},
	}
	vs, err := Embed(context.Background(), e, qs, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Distinct non-empty texts: "Get the weather", "The city", "The unit" → 3
	// texts in batches of 2.
	if len(e.texts) != 3 || e.requests != 2 {
		t.Errorf("embedded %q in %d requests, want 3 distinct texts in 2", e.texts, e.requests)
	}
	if len(vs) != 3 {
		t.Fatalf("got %d vectors, want 3", len(vs))
	}
	if vs[1].Params[1] != nil || vs[2].Desc != nil || vs[2].Params != nil {
		t.Errorf("empty texts must have no vector: %v %v", vs[1].Params[1], vs[2])
	}
	if s := Score(0.5, vs[0], vs[0]); math.Abs(s-1) > 1e-6 {
		t.Errorf("self score = %v, want 1", s)
	}
	if d := dot(vs[0].Desc, vs[1].Desc); math.Abs(float64(d)-1) > 1e-6 {
		t.Errorf("same text must embed alike, cos = %v", d)
	}
}

func TestEmbedDoesNotChangeEmbedderVectors(t *testing.T) {
	cached := []float32{3, 4}
	e := tableEmbedder{"a": cached}
	if _, err := Embed(context.Background(), e, []Query{{Description: "a"}}, 0); err != nil {
		t.Fatal(err)
	}
	if cached[0] != 3 || cached[1] != 4 {
		t.Errorf("embedder's vector changed to %v", cached)
	}
}

func TestEmbedErrors(t *testing.T) {
	ctx := context.Background()
	q := []Query{{Description: "a", Params: []string{"b"}}}
	tests := []struct {
		name string
		e    Embedder
		want string
	}{
		{"no embedder", nil, "no embedder configured"},
		{"embedder error", funcEmbedder(func(context.Context, []string) ([][]float32, error) {
			return nil, errors.New("boom")
		}), "boom"},
		{"wrong count", funcEmbedder(func(context.Context, []string) ([][]float32, error) {
			return [][]float32{{1}}, nil
		}), "returned 1 vectors for 2 texts"},
		{"mixed dimensions", tableEmbedder{"a": {1, 0}, "b": {1}}, "vectors of 2 and 1 dimensions"},
		{"empty vector", tableEmbedder{"a": {}, "b": {}}, "empty vector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Embed(ctx, tt.e, q, 0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// Nothing to embed needs no embedder.
	if _, err := Embed(ctx, nil, []Query{{}}, 0); err != nil {
		t.Errorf("empty query: %v", err)
	}
}

func TestZeroVectorIsEmpty(t *testing.T) {
	e := tableEmbedder{"a": {0, 0}, "b": {1, 0}}
	s, err := Similarity(context.Background(), e, 1, Query{Description: "a"}, Query{Description: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if s != 0 {
		t.Errorf("zero vector scored %v, want 0", s)
	}
}

func TestSimilarityLexical(t *testing.T) {
	e := &wordEmbedder{dim: 256}
	ctx := context.Background()
	weather := Query{Description: "Get the current weather for a city", Params: []string{"The city name", "Temperature unit"}}
	reworded := Query{Description: "Get the current weather of a city", Params: []string{"The city name", "The temperature unit"}}
	stocks := Query{Description: "Look up stock prices", Params: []string{"Ticker symbol"}}
	same, err := Similarity(ctx, e, 0.5, weather, reworded)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Similarity(ctx, e, 0.5, weather, stocks)
	if err != nil {
		t.Fatal(err)
	}
	if same < 0.8 || other > 0.3 || same <= other {
		t.Errorf("reworded = %.3f, unrelated = %.3f; want reworded high, unrelated low", same, other)
	}
}

// randomIndex builds an index of n tools over random unit vectors. shared
// (0…1) mixes a common direction into every vector, so cosines between
// unrelated texts sit high the way they do with real embedding models.
func randomIndex(t testing.TB, n, dim int, shared float64, seed uint64) (*Index, func(string) []float32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	common := make([]float32, dim)
	for i := range common {
		common[i] = float32(rng.NormFloat64())
	}
	vecs := map[string][]float32{}
	vec := func(text string) []float32 {
		if v, ok := vecs[text]; ok {
			return v
		}
		h := fnv.New64a()
		h.Write([]byte(text))
		r := rand.New(rand.NewPCG(h.Sum64(), seed))
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32((1-shared)*r.NormFloat64() + shared*float64(common[i]))
		}
		vecs[text] = v
		return v
	}
	qs := make([]Query, n)
	for i := range qs {
		qs[i].Description = "tool " + strconv.Itoa(i)
		for j := range rng.IntN(5) {
			// Some parameter texts repeat across tools.
			qs[i].Params = append(qs[i].Params, "param "+strconv.Itoa(rng.IntN(n/2+1))+"/"+strconv.Itoa(j))
		}
	}
	e := funcEmbedder(func(_ context.Context, texts []string) ([][]float32, error) {
		out := make([][]float32, len(texts))
		for i, tx := range texts {
			out[i] = slices.Clone(vec(tx))
		}
		return out, nil
	})
	ix, err := NewIndex(context.Background(), e, qs, 512)
	if err != nil {
		t.Fatal(err)
	}
	return ix, func(text string) []float32 {
		v := slices.Clone(vec(text))
		normalize(v)
		return v
	}
}

func TestIndexTopMatchesBruteForce(t *testing.T) {
	for _, shared := range []float64{0, 0.7} {
		ix, vec := randomIndex(t, 600, 24, shared, 7)
		rng := rand.New(rand.NewPCG(3, 4))
		for trial := range 60 {
			var q Vectors
			if trial%3 == 0 {
				q = ix.Vectors(rng.IntN(ix.Len())) // a library tool itself
			} else {
				q.Desc = vec("query " + strconv.Itoa(trial))
				for j := range trial % 4 {
					q.Params = append(q.Params, vec("qp "+strconv.Itoa(trial)+"/"+strconv.Itoa(j)))
				}
			}
			alpha := []float64{0, 0.35, 0.5, 0.8, 1}[trial%5]
			k := []int{1, 3, 5, 10}[trial%4]
			keep := func(i int) bool { return i%7 != trial%7 }
			var want []Hit
			for i := range ix.Len() {
				if keep(i) {
					want = append(want, Hit{Doc: i, Score: ix.Score(alpha, q, i)})
				}
			}
			slices.SortFunc(want, func(a, b Hit) int {
				if c := cmp.Compare(b.Score, a.Score); c != 0 {
					return c
				}
				return cmp.Compare(a.Doc, b.Doc)
			})
			want = want[:k]
			got := ix.Top(alpha, q, k, keep)
			if !slices.Equal(got, want) {
				t.Fatalf("shared %.1f trial %d (alpha %.2f, k %d):\n got %v\nwant %v", shared, trial, alpha, k, got, want)
			}
		}
	}
}

func TestIndexScoreAgreesWithScore(t *testing.T) {
	ix, vec := randomIndex(t, 50, 16, 0.3, 11)
	q := Vectors{Desc: vec("q"), Params: [][]float32{vec("a"), vec("b")}}
	for i := range ix.Len() {
		if a, b := ix.Score(0.65, q, i), Score(0.65, q, ix.Vectors(i)); a != b {
			t.Fatalf("tool %d: Index.Score %v != Score %v", i, a, b)
		}
	}
}

func TestIndexTopEdges(t *testing.T) {
	ix, _ := randomIndex(t, 10, 8, 0, 5)
	q := ix.Vectors(4)
	if got := ix.Top(0.5, q, 0, nil); got != nil {
		t.Errorf("k=0: %v", got)
	}
	if got := ix.Top(0.5, q, 50, nil); len(got) != 10 || got[0].Doc != 4 {
		t.Errorf("k > n: got %d hits, first %v; want all 10, tool 4 first", len(got), got)
	}
	if got := ix.Top(0.5, q, 3, func(int) bool { return false }); len(got) != 0 {
		t.Errorf("nothing kept: %v", got)
	}
	// Ties go to the lower index: two tools with identical texts.
	e := &wordEmbedder{dim: 16}
	dup, err := NewIndex(context.Background(), e, []Query{{Description: "b"}, {Description: "a"}, {Description: "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := dup.Top(0.5, dup.Vectors(2), 2, nil)
	if len(got) != 2 || got[0].Doc != 1 || got[1].Doc != 2 {
		t.Errorf("tie order: %v, want tools 1 then 2", got)
	}
	empty, err := NewIndex(context.Background(), nil, nil, 0)
	if err != nil || empty.Len() != 0 || empty.Top(0.5, q, 3, nil) != nil {
		t.Errorf("empty index: %v %v", empty, err)
	}
}

func TestIndexStoresRepeatedTextsOnce(t *testing.T) {
	e := &wordEmbedder{dim: 8}
	qs := []Query{
		{Description: "Weather now", Params: []string{"The city and state"}},
		{Description: "Weather tomorrow", Params: []string{"The city and state"}},
	}
	ix, err := NewIndex(context.Background(), e, qs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.texts) != 3 || len(ix.tb.arena) != 3*8 {
		t.Errorf("embedded %d texts, arena %d floats; want 3 texts, 24 floats", len(e.texts), len(ix.tb.arena))
	}
}

func FuzzQueryOf(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","description":"x"}}}`,
		`{"properties":{"b_c":{}}}`, `{"properties":null}`, `[]`, `{`, `{"properties":[1]}`, `"x"`, ``,
	} {
		f.Add("d", s)
	}
	f.Fuzz(func(t *testing.T, desc, params string) {
		q, err := QueryOf(tool("f", desc, params))
		if err != nil {
			return
		}
		for _, p := range q.Params {
			if strings.TrimSpace(p) == "" && p != "" {
				t.Errorf("untrimmed blank parameter description %q", p)
			}
		}
		var obj map[string]json.RawMessage
		if strings.TrimSpace(params) != "" && json.Unmarshal([]byte(params), &obj) != nil {
			t.Errorf("accepted parameters that are not a JSON object: %q", params)
		}
	})
}

// BenchmarkIndexTop30k ranks a 30k-tool library against one query: a new
// text (random) or a library tool's own texts (as meta_tool's retrieved
// mode does). "clustered" vectors share a common direction, so unrelated
// texts have high cosines as with real embedding models and pruning helps
// less.
func BenchmarkIndexTop30k(b *testing.B) {
	for _, c := range []struct {
		name      string
		dim       int
		shared    float64
		toolQuery bool
	}{
		{"dim256/spread/random-query", 256, 0, false},
		{"dim256/clustered/random-query", 256, 0.7, false},
		{"dim512/clustered/tool-query", 512, 0.7, true},
		{"dim1024/clustered/tool-query", 1024, 0.7, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ix, vec := randomIndex(b, 30000, c.dim, c.shared, 9)
			q := Vectors{Desc: vec("query"), Params: [][]float32{vec("p1"), vec("p2")}}
			if c.toolQuery {
				q = ix.Vectors(12345)
			}
			for b.Loop() {
				if hits := ix.Top(0.5, q, 5, nil); len(hits) != 5 {
					b.Fatal(hits)
				}
			}
		})
	}
}

// Scores gives exactly Score in both directions, for every shape of
// parameter lists (none, one side empty, more than its stack buffer holds).
func TestScoresBothWays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	vec := func() []float32 {
		v := make([]float32, 16)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		normalize(v)
		return v
	}
	vectors := func(params int) Vectors {
		v := Vectors{Desc: vec()}
		for range params {
			v.Params = append(v.Params, vec())
		}
		return v
	}
	for _, n := range [][2]int{{0, 0}, {0, 3}, {2, 0}, {1, 1}, {3, 5}, {9, 8}, {12, 1}} {
		for range 20 {
			a, b := vectors(n[0]), vectors(n[1])
			for _, alpha := range []float64{0, 0.5, 0.7, 1} {
				ab, ba := Scores(alpha, a, b)
				if want := Score(alpha, a, b); ab != want {
					t.Fatalf("%v alpha %v: Scores a→b %v, Score %v", n, alpha, ab, want)
				}
				if want := Score(alpha, b, a); ba != want {
					t.Fatalf("%v alpha %v: Scores b→a %v, Score %v", n, alpha, ba, want)
				}
			}
		}
	}
}

// orderedBits orders float32s as cmp.Compare does (Top's sort key).
func TestOrderedBits(t *testing.T) {
	nan := float32(math.NaN())
	vals := []float32{nan, -nan, float32(math.Inf(-1)), -1, -0.5, -math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 0,
		math.SmallestNonzeroFloat32, 0.5, 0.99999994, 1, 1.0001, math.MaxFloat32, float32(math.Inf(1))}
	for _, a := range vals {
		for _, b := range vals {
			if got, want := cmp.Compare(orderedBits(a), orderedBits(b)), cmp.Compare(a, b); got != want {
				t.Errorf("%v vs %v: orderedBits compare %d, cmp.Compare %d", a, b, got, want)
			}
		}
	}
}

// TestScoresExceed: ScoresExceed says what Scores' values say, for every
// pair of tools of random indexes (unrelated and related texts, a tool
// against itself), with limits at, just above and just below the scores.
func TestScoresExceed(t *testing.T) {
	for _, shared := range []float64{0, 0.7, 0.95} {
		ix, _ := randomIndex(t, 120, 16, shared, 11)
		for _, alpha := range []float64{0, 0.35, 0.5, 0.8, 1} {
			skipped := 0
			for i := range ix.Len() {
				for j := i; j < ix.Len(); j++ {
					a, b := ix.Vectors(i), ix.Vectors(j)
					ab, ba := Scores(alpha, a, b)
					hi := max(ab, ba)
					for _, limit := range []float64{hi, math.Nextafter(hi, 2), math.Nextafter(hi, -2), 0.85, 0.5, 0.99, 1} {
						if got, want := ScoresExceed(alpha, a, b, limit), ab > limit || ba > limit; got != want {
							t.Fatalf("shared %v alpha %v tools %d, %d limit %v: ScoresExceed = %v, Scores %v, %v", shared, alpha, i, j, limit, got, ab, ba)
						}
					}
					if len(a.Params) > 0 && len(b.Params) > 0 && alpha*float64(dot(a.Desc, b.Desc))+(1-alpha)*paramBound <= 0.85 {
						skipped++
					}
				}
			}
			if shared == 0 && alpha == 0.5 && skipped == 0 {
				t.Error("no pair took the short path: the test does not cover it")
			}
		}
	}
}
