package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

func TestLexicalEmbeddingParaphrases(t *testing.T) {
	const dim = 512
	e := func(s string) []float32 { return LexicalEmbedding(s, dim) }
	tests := []struct {
		anchor, paraphrase, unrelated string
	}{
		{"Get the current weather for a city", "Retrieve current weather conditions in a given city", "Book a flight between two airports"},
		{"get_stock_price: fetch the latest stock price for a ticker symbol", "getStockPrice returns latest prices of stocks by ticker", "send_email: send an email to a recipient"},
		{"Convert an amount from one currency to another", "currency conversion of an amount", "Calculate the area of a circle"},
		{"查询城市天气", "查询天气预报", "预订机票"},
	}
	for _, tt := range tests {
		a, p, u := e(tt.anchor), e(tt.paraphrase), e(tt.unrelated)
		sp, su := cosine(a, p), cosine(a, u)
		if sp <= su+0.1 {
			t.Errorf("%q: paraphrase %.3f not clearly above unrelated %.3f", tt.anchor, sp, su)
		}
	}
}

func TestLexicalEmbeddingProperties(t *testing.T) {
	v := LexicalEmbedding("Search for restaurants near me", 256)
	if len(v) != 256 {
		t.Fatalf("dimension %d", len(v))
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Fatalf("not L2-normalised: |v|² = %v", norm)
	}
	if !reflect.DeepEqual(v, LexicalEmbedding("Search for restaurants near me", 256)) {
		t.Fatal("not deterministic")
	}
	if c := cosine(v, LexicalEmbedding("search for Restaurants, near me!", 256)); c < 0.999 {
		t.Fatalf("case and punctuation changed the vector: cosine %v", c)
	}
	for _, empty := range []string{"", "   ", "the of and", "!!!"} {
		for _, x := range LexicalEmbedding(empty, 64) {
			if x != 0 {
				t.Fatalf("%q: want the zero vector for a text without content words", empty)
			}
		}
	}
}

func TestLexTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"getWeatherForecast", []string{"get", "weather", "forecast"}},
		{"send_email v2", []string{"send", "email", "v", "2"}},
		{"HTTP request", []string{"http", "request"}},
		{"查询天气 API", []string{"查", "询", "天", "气", "api"}},
	}
	for _, tt := range tests {
		var got []string
		for _, tok := range lexTokens(tt.in) {
			got = append(got, tok.text)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("lexTokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzLexicalEmbedding(f *testing.F) {
	for _, s := range []string{"getWeather", "查询天气", "", "a_b-c.d", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := LexicalEmbedding(s, 32)
		var norm float64
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%q: non-finite component", s)
			}
			norm += float64(x) * float64(x)
		}
		if norm != 0 && math.Abs(norm-1) > 1e-4 {
			t.Fatalf("%q: norm² %v", s, norm)
		}
	})
}

func TestOfflineEmbedder(t *testing.T) {
	e, err := NewEmbedder(EmbedderConfig{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var _ Embedder = e
	vs, err := e.Embed(context.Background(), []string{"find hotels", "look for a hotel", "translate text"})
	if err != nil || len(vs) != 3 || len(vs[0]) != defaultOfflineDim || e.Dimensions() != defaultOfflineDim {
		t.Fatalf("got %d vectors, %v", len(vs), err)
	}
	if cosine(vs[0], vs[1]) <= cosine(vs[0], vs[2]) {
		t.Fatal("paraphrase not closer than unrelated text")
	}
}

func TestRemoteEmbedderCachesAndDedupes(t *testing.T) {
	fake, url := startFake(t, fakellm.Config{Record: true, EmbedDim: 8})
	dir := t.TempDir()
	cfg := EmbedderConfig{Provider: ProviderOpenAI, Model: "emb", BatchSize: 2,
		Endpoints: []Endpoint{{BaseURL: url}}, RetryBase: Duration(time.Millisecond), RetryMax: Duration(10 * time.Millisecond)}
	texts := []string{"alpha", "beta", "alpha", "gamma", "delta", "beta"}
	run := func() [][]float32 {
		e, err := NewEmbedder(cfg, Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		vs, err := e.Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	first := run()
	if got := fake.Counters().Embeddings; got != 2 {
		t.Fatalf("4 distinct texts in batches of 2: %d requests, want 2", got)
	}
	for i, text := range texts {
		if !reflect.DeepEqual(first[i], fakellm.Vector(text, 8)) {
			t.Fatalf("vector %d (%s) out of order", i, text)
		}
	}
	second := run()
	if got := fake.Counters().Embeddings; got != 2 {
		t.Fatalf("second run sent %d requests, want 0", got-2)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatal("cached vectors differ")
	}
	c, err := OpenCacheReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := c.Stats()
	if len(st.Embeddings) != 1 || st.Embeddings[0] != (CacheCount{Name: "emb#0", Entries: 4}) {
		t.Fatalf("cache stats %+v", st)
	}
}

func TestRemoteEmbedderFailure(t *testing.T) {
	_, url := startFake(t, fakellm.Config{Faults: fakellm.Faults{ServerError: 1}})
	e, err := NewEmbedder(EmbedderConfig{Provider: ProviderOpenAI, Model: "emb", MaxRetries: new(1),
		Endpoints: []Endpoint{{BaseURL: url}}, RetryBase: Duration(time.Millisecond), RetryMax: Duration(time.Millisecond)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Embed(context.Background(), []string{"x"})
	var ae *AnswerError
	if !errors.As(err, &ae) || ae.RejectReason() != "llm_embed_error_server" || ae.Attempts != 2 {
		t.Fatalf("got %v", err)
	}
}

// An embedder answering all-zero (or NaN) vectors is broken: its vectors
// are refused with that said, and once the endpoint is out of rotation
// the error still names what took it out.
func TestRemoteEmbedderUnusableVectors(t *testing.T) {
	for name, vec := range map[string]string{"zeros": "[0, 0, 0]", "nan": `[1, "NaN", 0]`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": %s}], "model": "emb", "usage": {"prompt_tokens": 1, "total_tokens": 1}}`, vec)
		}))
		e, err := NewEmbedder(EmbedderConfig{Provider: ProviderOpenAI, Model: "emb", MaxRetries: new(8),
			Endpoints: []Endpoint{{BaseURL: srv.URL + "/v1"}}, RetryBase: Duration(time.Millisecond), RetryMax: Duration(time.Millisecond)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Embed(context.Background(), []string{"x"})
		e.Close()
		srv.Close()
		if name == "zeros" && (err == nil || !strings.Contains(err.Error(), "all zeros")) {
			t.Errorf("%s: %v, want the vector named", name, err)
		}
		if name == "nan" && err == nil {
			t.Errorf("%s: NaN vector accepted", name)
		}
	}
}
