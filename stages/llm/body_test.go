package llm

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

func TestChatBody(t *testing.T) {
	zero, seed := 0.0, 7
	base := Request{Model: "m", Messages: []Message{{Role: "user", Content: "a<b"}}}
	tests := []struct {
		name   string
		edit   func(*Request)
		format string
		want   string
	}{
		{"plain", func(*Request) {}, StructuredJSONSchema,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}]}`},
		{"zero temperature and seed", func(r *Request) { r.Temperature, r.Seed = &zero, &seed }, StructuredJSONSchema,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}],"temperature":0,"seed":7}`},
		{"reasoning model", func(r *Request) { r.MaxCompletionTokens, r.ReasoningEffort = 900, "low" }, StructuredJSONSchema,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}],"max_completion_tokens":900,"reasoning_effort":"low"}`},
		{"schema", func(r *Request) { r.JSONSchema = json.RawMessage(`{"type":"object"}`) }, StructuredJSONSchema,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}],"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}}}`},
		{"json object", func(r *Request) { r.JSONSchema = json.RawMessage(`{"type":"object"}`) }, StructuredJSONObject,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}],"response_format":{"type":"json_object"}}`},
		{"no format", func(r *Request) { r.JSONSchema = json.RawMessage(`{"type":"object"}`) }, StructuredNone,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}]}`},
		{"extra body in key order", func(r *Request) {
			r.ExtraBody = json.RawMessage(`{"top_k":20,"chat_template_kwargs":{"enable_thinking":false}}`)
		}, StructuredJSONSchema,
			`{"model":"m","messages":[{"role":"user","content":"a<b"}],"chat_template_kwargs":{"enable_thinking":false},"top_k":20}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := base
			tt.edit(&req)
			got, err := chatBody(req, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	for _, extra := range []string{`{"model":"x"}`, `[1]`, `{"a":`} {
		req := base
		req.ExtraBody = json.RawMessage(extra)
		if b, err := chatBody(req, StructuredNone); err == nil {
			t.Errorf("extra body %s accepted: %s", extra, b)
		}
	}
}

func FuzzChatBody(f *testing.F) {
	f.Add("hi", `{"top_k":3}`)
	f.Add("", `{}`)
	f.Add("\u2028<&>", `{"a":{"b":[1,2]}}`)
	f.Fuzz(func(t *testing.T, content, extra string) {
		req := Request{Model: "m", Messages: []Message{{Role: "user", Content: content}}, ExtraBody: json.RawMessage(extra)}
		body, err := chatBody(req, StructuredJSONSchema)
		if err != nil {
			return
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("body is not a JSON object: %v\n%s", err, body)
		}
		var msgs []Message
		if json.Unmarshal(out["messages"], &msgs) != nil || len(msgs) != 1 || utf8.ValidString(content) && msgs[0].Content != content {
			t.Fatalf("messages changed: %s", out["messages"])
		}
	})
}

func TestDecodeChat(t *testing.T) {
	tests := []struct {
		name, body string
		want       Response
		bad        bool
	}{
		{"answer", `{"model":"x","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			Response{Content: "hi", FinishReason: "stop", Usage: Usage{3, 1}, Provider: ProviderOpenAI, Model: "x"}, false},
		{"reasoning_content kept apart", `{"choices":[{"message":{"content":"42","reasoning_content":"think"},"finish_reason":"stop"}]}`,
			Response{Content: "42", Reasoning: "think", FinishReason: "stop", Provider: ProviderOpenAI, Model: "m", NoUsage: true}, false},
		{"newer vLLM reasoning field", `{"choices":[{"message":{"content":"42","reasoning":"think"},"finish_reason":"stop"}]}`,
			Response{Content: "42", Reasoning: "think", FinishReason: "stop", Provider: ProviderOpenAI, Model: "m", NoUsage: true}, false},
		{"null content", `{"choices":[{"message":{"content":null,"reasoning_content":"only thought"},"finish_reason":"length"}]}`,
			Response{Reasoning: "only thought", FinishReason: "length", Provider: ProviderOpenAI, Model: "m", NoUsage: true}, false},
		{"null usage", `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":null}`,
			Response{Content: "hi", FinishReason: "stop", Provider: ProviderOpenAI, Model: "m", NoUsage: true}, false},
		{"lone surrogate in the thinking", `{"choices":[{"message":{"content":"hi","reasoning_content":"a \udc00"},"finish_reason":"stop"}],"usage":{}}`,
			Response{Content: "hi", Reasoning: "a \ufffd", FinishReason: "stop", Provider: ProviderOpenAI, Model: "m",
				InvalidText: `message.reasoning_content: a lone surrogate escape \udc00 at byte 3`}, false},
		{"invalid UTF-8 in the answer", "{\"choices\":[{\"message\":{\"content\":\"caf\xe9\"},\"finish_reason\":\"stop\"}],\"usage\":{}}",
			Response{Content: "caf\ufffd", FinishReason: "stop", Provider: ProviderOpenAI, Model: "m",
				InvalidText: "message.content: an invalid UTF-8 byte 0xe9 at byte 4"}, false},
		{"error object", `{"error":{"message":"upstream model overloaded","code":503}}`, Response{}, true},
		{"event stream", "data: {\"choices\":[]}\n\n", Response{}, true},
		{"no choices", `{"choices":[]}`, Response{}, true},
		{"not json", `{"choices":`, Response{}, true},
	}
	for _, tt := range tests {
		got, err := decodeChat([]byte(tt.body), "m")
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v (error %v)", tt.name, got, err, tt.want, tt.bad)
		}
	}
}

func FuzzDecodeChat(f *testing.F) {
	f.Add(`{"choices":[{"message":{"content":"hi","reasoning_content":"r"},"finish_reason":"stop"}]}`)
	f.Add(`{"choices":[]}`)
	f.Fuzz(func(t *testing.T, body string) {
		r, err := decodeChat([]byte(body), "m")
		if err == nil && (r.Provider != ProviderOpenAI || r.Model == "") {
			t.Fatalf("decoded without provider or model: %+v", r)
		}
	})
}

// teacher.extra_body, max_completion_tokens and reasoning_effort reach the
// wire, are part of the cache key, and the answer's reasoning is kept apart
// from its content.
func TestExtraBodyAndReasoningOnTheWire(t *testing.T) {
	fake, url := startFake(t, fakellm.Config{Record: true})
	cfg := openaiConfig(url)
	cfg.ExtraBody = map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}}
	cfg.MaxCompletionTokens, cfg.ReasoningEffort = 512, "low"
	dir := t.TempDir()
	s := newTeacher(t, cfg, Options{CacheDir: dir}).Stage("s")
	if _, err := s.Complete(context.Background(), userReq("s@1", "", "hello")); err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(fake.Log()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"top_k": "20", "chat_template_kwargs": `{"enable_thinking":false}`,
		"max_completion_tokens": "512", "reasoning_effort": `"low"`} {
		if got := string(body[k]); got != want {
			t.Errorf("%s on the wire: %s, want %s", k, got, want)
		}
	}
	// Another extra body is another request: not served from the cache.
	cfg.ExtraBody = map[string]any{"top_k": 40}
	s2 := newTeacher(t, cfg, Options{CacheDir: dir}).Stage("s")
	if r, err := s2.Complete(context.Background(), userReq("s@1", "", "hello")); err != nil || r.Cached {
		t.Fatalf("changed extra_body served from the cache: %+v %v", r, err)
	}

	// A reasoning parser's output: reasoning_content is not the answer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"1","object":"chat.completion","model":"r1","choices":[{"index":0,"message":{"role":"assistant","content":"Paris","reasoning_content":"The capital of France is Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12}}`))
	}))
	defer srv.Close()
	r, err := newTeacher(t, openaiConfig(srv.URL+"/v1"), Options{}).Stage("s").Complete(context.Background(), userReq("s@1", "", "capital?"))
	if err != nil || r.Content != "Paris" || r.Reasoning != "The capital of France is Paris." || r.Model != "r1" {
		t.Fatalf("got %+v, %v", r, err)
	}
}

func TestCheckModels(t *testing.T) {
	_, url := startFake(t, fakellm.Config{Model: "served", MaxModelLen: 4096})
	dead := httptest.NewServer(http.NotFoundHandler())
	defer dead.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"no"}}`, http.StatusUnauthorized)
	}))
	defer denied.Close()
	tests := []struct {
		name      string
		model     string
		maxTokens int
		urls      []string
		want      string // "" for no error
	}{
		{"served", "served", 1024, []string{url}, ""},
		{"absent", "other", 0, []string{url}, `does not serve model "other" (it lists: served)`},
		{"no room for the prompt", "served", 4096, []string{url}, "context of 4096 tokens"},
		{"an endpoint without /models is skipped", "served", 0, []string{dead.URL + "/v1", url}, ""},
		{"refused credentials", "served", 0, []string{denied.URL + "/v1"}, "refused the credentials"},
	}
	// An endpoint that cannot be asked is a WARN line, naming it without
	// the credentials its URL holds.
	var log strings.Builder
	gone := strings.Replace(dead.URL, "http://", "http://user:pw-s3cret@", 1) + "/nothing-here"
	cfg := openaiConfig(gone)
	cfg.Model = "served"
	if err := newTeacher(t, cfg, Options{Log: slog.New(slog.NewTextHandler(&log, nil))}).CheckModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "cannot check the teacher model") || strings.Contains(log.String(), "pw-s3cret") || strings.Contains(log.String(), "user:") {
		t.Errorf("the WARN line shows the credentials or is missing:\n%s", log.String())
	}
	for _, tt := range tests {
		cfg := openaiConfig(tt.urls...)
		cfg.Model, cfg.MaxTokens = tt.model, tt.maxTokens
		err := newTeacher(t, cfg, Options{}).CheckModels(context.Background())
		var me *ModelError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (!errors.As(err, &me) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}
