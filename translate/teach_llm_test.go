package translate

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// realTeacher is the llm layer's Teacher on a loopback server: what the
// translator's requests become on the wire is the layer's doing (the
// token limit it fills in, the answer's decoding).
func realTeacher(t *testing.T, url string, maxTokens int) llm.Client {
	t.Helper()
	retries := 0
	teacher, err := llm.NewTeacher(llm.Config{
		Provider: llm.ProviderOpenAI, Model: "fake-model", MaxTokens: maxTokens, MaxRetries: &retries,
		Endpoints: []llm.Endpoint{{BaseURL: url}},
	}, llm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { teacher.Close() })
	return teacher.Stage("translate")
}

// QA r4 (translate): after a cut answer the re-ask went out byte-identical;
// it asks for twice the effective token limit, as llm.Ask does.
func TestTranslateTruncatedReaskDoublesTheLimit(t *testing.T) {
	fake, err := fakellm.New(fakellm.Config{Record: true, Script: []fakellm.Rule{{Regexp: "(?s).*", Answer: `{"functions":`, FinishReason: "length"}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	tr, err := New(Config{Attempts: 3}, realTeacher(t, hs.URL+"/v1", 256), (&judge{}).fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Record(t.Context(), loadRecord(t))
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.Reason != "llm_truncated" {
		t.Fatalf("got %v, want llm_truncated", err)
	}
	var got []int
	for _, s := range fake.Log() {
		var b struct {
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.Unmarshal(s.Body, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b.MaxTokens)
	}
	if len(got) != 3 || got[0] != 256 || got[1] != 512 || got[2] != 1024 {
		t.Errorf("max_tokens sent %v, want [256 512 1024]", got)
	}
}

// QA r3 (translate): a lone surrogate escape in the answer became U+FFFD in
// the data. The answer is asked again with the problem as feedback, then
// rejected as llm_invalid_utf8.
func TestTranslateAnswerNotUTF8(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"system\": \"\ud800\u4eac\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	}))
	defer hs.Close()
	tr, err := New(Config{Attempts: 2}, realTeacher(t, hs.URL+"/v1", 0), (&judge{}).fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Record(t.Context(), loadRecord(t))
	var rej *contract.Reject
	if !errors.As(err, &rej) || rej.Reason != llm.ReasonInvalidUTF8 || !strings.Contains(rej.Detail, `\ud800`) {
		t.Fatalf("got %v, want %s", err, llm.ReasonInvalidUTF8)
	}
	if len(bodies) != 2 || !strings.Contains(bodies[1], "not valid UTF-8") {
		t.Errorf("the re-ask does not carry the problem as feedback (%d requests)", len(bodies))
	}
}
