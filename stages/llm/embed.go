package llm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"unicode"

	openai "github.com/sashabaranov/go-openai"
	"golang.org/x/sync/errgroup"
)

// An EmbedClient is the run's Embedder: the offline lexical embedding, or
// an OpenAI-compatible /embeddings API with the same endpoint balancing,
// retries and caching as the teacher. Safe for concurrent use.
type EmbedClient struct {
	cfg   EmbedderConfig
	pool  *pool // nil for offline
	trs   []*http.Transport
	cache *Cache
	rp    retryPolicy
	st    *stageStats
	halt  halt
}

// NewEmbedder checks cfg (after Defaults) and returns the embedder it
// describes. Close it when done.
func NewEmbedder(cfg EmbedderConfig, o Options) (*EmbedClient, error) {
	o.defaults()
	cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	e := &EmbedClient{
		cfg: cfg,
		st:  newStageStats(),
		rp: retryPolicy{timeout: cfg.Timeout.D(), retries: *cfg.MaxRetries,
			base: cfg.RetryBase.D(), maxWait: cfg.RetryMax.D()},
		// An embedder never stops the run by itself: its failures reach the
		// stage, which decides.
		halt: halt{done: make(chan struct{}), err: func() error { return nil }},
	}
	if cfg.Provider == ProviderOffline {
		return e, nil
	}
	key, err := apiKey("embedder", cfg.APIKeyEnv, o.Getenv)
	if err != nil {
		return nil, err
	}
	e.pool = newPool(poolConfig{breakerFailures: defaultBreakerFailures, breakerCooldown: defaultBreakerCooldown, latencyTolerance: -1, redact: newRedactor(key)},
		cfg.Endpoints, func(ep Endpoint) *openai.Client {
			c, tr := newOpenAIClient(ep, key)
			e.trs = append(e.trs, tr)
			return c
		})
	if e.cache, err = o.openCache(); err != nil {
		return nil, err
	}
	return e, nil
}

// Dimensions is the length of the vectors (0 when the server decides).
func (e *EmbedClient) Dimensions() int { return e.cfg.Dimensions }

// Stats returns a snapshot of the embedder's traffic under the stage name
// "embedder"; Requests counts texts.
func (e *EmbedClient) Stats() Stats { return e.st.snapshot("embedder", e.cfg.Provider, prices{}) }

// Close flushes the cache and releases connections.
func (e *EmbedClient) Close() error {
	for _, tr := range e.trs {
		tr.CloseIdleConnections()
	}
	if e.cache != nil {
		return e.cache.Close()
	}
	return nil
}

// Embed returns one vector per text, in order. Offline vectors are
// L2-normalised (all zeros for a text without words), so a dot product is
// the cosine similarity.
//
// A request that fails after retries gives an *AnswerError with reason
// "llm_embed_error_<class>".
func (e *EmbedClient) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.st.requests.Add(int64(len(texts)))
	if e.pool == nil {
		out := make([][]float32, len(texts))
		for i, t := range texts {
			out[i] = LexicalEmbedding(t, e.cfg.Dimensions)
		}
		return out, nil
	}
	out := make([][]float32, len(texts))
	keys := make([][]byte, len(texts))
	// Distinct uncached texts, in first-seen order, and where each goes.
	var todo []string
	var todoKeys [][]byte
	where := map[string][]int{}
	for i, t := range texts {
		k := sha256.Sum256([]byte(t))
		keys[i] = k[:]
		if e.cache != nil {
			v, ok, err := e.cache.getEmbedding(e.cfg.Model, e.cfg.Dimensions, k[:])
			if err != nil {
				return nil, fmt.Errorf("llm cache read: %w", err)
			}
			if ok {
				out[i] = v
				e.st.hits.Add(1)
				continue
			}
		}
		if _, seen := where[t]; !seen {
			todo = append(todo, t)
			todoKeys = append(todoKeys, k[:])
		}
		where[t] = append(where[t], i)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.pool.capacity())
	for from := 0; from < len(todo); from += e.cfg.BatchSize {
		batch := todo[from:min(len(todo), from+e.cfg.BatchSize)]
		bkeys := todoKeys[from:min(len(todo), from+e.cfg.BatchSize)]
		g.Go(func() error {
			vecs, err := e.send(gctx, batch, bkeys)
			if err != nil {
				return err
			}
			mu.Lock()
			for j, t := range batch {
				for _, i := range where[t] {
					out[i] = vecs[j]
				}
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// send embeds batch and caches the vectors under keys.
func (e *EmbedClient) send(ctx context.Context, batch []string, keys [][]byte) ([][]float32, error) {
	var vecs [][]float32
	var keep func() error
	if e.cache != nil {
		keep = func() error { return e.cache.putEmbeddings(e.cfg.Model, e.cfg.Dimensions, keys, vecs) }
	}
	attempts, class, err := e.pool.run(ctx, e.rp, e.st, e.halt, func(actx context.Context, _ *callMeta, c *openai.Client) error {
		r, err := c.CreateEmbeddings(actx, openai.EmbeddingRequestStrings{
			Input: batch, Model: openai.EmbeddingModel(e.cfg.Model),
			EncodingFormat: openai.EmbeddingEncodingFormatFloat, Dimensions: e.cfg.Dimensions,
		})
		if err != nil {
			return err
		}
		if len(r.Data) != len(batch) {
			return fmt.Errorf("embeddings answer has %d vectors for %d texts", len(r.Data), len(batch))
		}
		sort.SliceStable(r.Data, func(i, j int) bool { return r.Data[i].Index < r.Data[j].Index })
		vecs = make([][]float32, len(batch))
		for i, d := range r.Data {
			if d.Index != i || len(d.Embedding) == 0 {
				return fmt.Errorf("embeddings answer: bad vector at index %d", i)
			}
			if !usableVector(d.Embedding) {
				// A broken embedder, not a property of the text: every
				// similarity to it would be 0 (or NaN) and blame the data.
				return fmt.Errorf("embeddings answer: the vector at index %d is all zeros or holds a value that is not a finite number", i)
			}
			vecs[i] = d.Embedding
		}
		e.st.tokIn.Add(int64(r.Usage.PromptTokens))
		return nil
	}, keep)
	if err != nil {
		if class == "" {
			return nil, err
		}
		return nil, &AnswerError{Reason: "llm_embed_error_" + class, Stage: "embedder", Attempts: attempts, Err: err}
	}
	return vecs, nil
}

// LexicalEmbedding is the offline embedding: hashed features of the
// text's words (camelCase and snake_case split, lower-cased, English
// function words dropped), adjacent word pairs, character trigrams of each
// word, and Han characters with their bigrams, in dim dimensions with
// signed feature hashing, L2-normalised. Texts sharing words or word
// stems score a high cosine similarity, which is what matching paraphrased
// tool descriptions needs; it knows no synonyms.
func LexicalEmbedding(text string, dim int) []float32 {
	v := make([]float64, dim)
	add := func(kind byte, feature string, w float64) {
		h := fnv.New64a()
		h.Write([]byte{kind})
		h.Write([]byte(feature))
		x := h.Sum64()
		if x>>63 == 1 {
			w = -w
		}
		v[x%uint64(dim)] += w
	}
	prev := ""
	for _, tok := range lexTokens(text) {
		if tok.han {
			add('h', tok.text, 1)
			if prev != "" && isHan(prev) {
				add('b', prev+tok.text, 1)
			}
			prev = tok.text
			continue
		}
		if stopWords[tok.text] {
			continue
		}
		w := stem(tok.text)
		add('w', w, 1)
		if prev != "" && !isHan(prev) {
			add('b', prev+" "+w, 0.5)
		}
		prev = w
		padded := []rune("^" + w + "$")
		if n := len(padded) - 2; n > 1 {
			for i := 0; i+3 <= len(padded); i++ {
				add('c', string(padded[i:i+3]), 1/float64(n))
			}
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, dim)
	if norm == 0 {
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

type lexToken struct {
	text string
	han  bool
}

// lexTokens splits text into lower-cased words (breaking camelCase,
// snake_case and letter/digit boundaries) and single Han characters.
func lexTokens(text string) []lexToken {
	var toks []lexToken
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			toks = append(toks, lexToken{text: strings.ToLower(string(cur))})
			cur = cur[:0]
		}
	}
	var last rune
	for _, r := range text {
		switch {
		case unicode.Is(unicode.Han, r):
			flush()
			toks = append(toks, lexToken{text: string(r), han: true})
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if len(cur) > 0 && (unicode.IsUpper(r) && unicode.IsLower(last) ||
				unicode.IsDigit(r) != unicode.IsDigit(last)) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
		last = r
	}
	flush()
	return toks
}

func isHan(s string) bool {
	for _, r := range s {
		return unicode.Is(unicode.Han, r)
	}
	return false
}

// stem removes an English plural "s" so "flights" and "flight" match.
func stem(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") {
		return w[:len(w)-1]
	}
	return w
}

// stopWords are English function words, which say nothing about what a
// tool or request is about.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the of to in on at by for from with about into over and or but if then
		is are was were be been being am do does did doing have has had having it its this that these those
		i me my we our you your he him his she her they them their what which who whom whose when where why how
		can could would should will shall may might must please as so than too very just also not no any some all`) {
		m[w] = true
	}
	return m
}()

// usableVector reports whether v has a finite, non-zero length: one a
// cosine similarity can be taken of.
func usableVector(v []float32) bool {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	return sum > 0 && !math.IsInf(sum, 0) && !math.IsNaN(sum)
}
