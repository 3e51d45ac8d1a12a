package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// Answers shaped as real OpenAI-compatible servers send them, through
// the whole teacher layer: a real Teacher on a loopback server.

func parseObject(s string) (map[string]any, error) {
	var v map[string]any
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// bodyServer answers the i-th chat request with bodies[i] (the last one
// repeats), as Content-Type ctype, and keeps the request bodies.
type bodyServer struct {
	mu     sync.Mutex
	bodies []string
	ctype  string
	got    [][]byte
}

func (s *bodyServer) start(t *testing.T) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		s.mu.Lock()
		s.got = append(s.got, b.Bytes())
		body := s.bodies[min(len(s.got), len(s.bodies))-1]
		s.mu.Unlock()
		ct := s.ctype
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.Write([]byte(body))
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/v1"
}

func (s *bodyServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.got...)
}

// sentMessages decodes the messages of a logged request body.
func sentMessages(t *testing.T, body []byte) []Message {
	t.Helper()
	var b struct {
		Messages []Message `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	return b.Messages
}

// chatLog is the fake's log of chat requests, in arrival order.
func chatLog(fake *fakellm.Server) []fakellm.Seen {
	var out []fakellm.Seen
	for _, s := range fake.Log() {
		if strings.HasSuffix(s.Path, "/chat/completions") {
			out = append(out, s)
		}
	}
	return out
}

func sentMaxTokens(t *testing.T, body []byte) int {
	t.Helper()
	var b struct {
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	return b.MaxTokens
}

// QA r1: an answer of valid JSON and 16 KB of prose, with max_model_len
// 8192 and max_tokens 4096, made the re-ask (the whole answer repeated)
// too long for the context and stopped the run; the cached answer stopped
// every rerun the same way. The re-ask repeats at most maxEcho bytes and
// says so; a re-ask that still does not fit rejects its record
// (llm_context_exceeded) and the run goes on.
func TestReaskOfALongAnswerFitsOrRejects(t *testing.T) {
	// About 11.5 KB: 3,850 tokens at the fake's three bytes a token, under
	// the limit of 4096; tokens are counted the same way here.
	prose := strings.Repeat("the rewrite keeps the meaning of this step exactly as before. ", 185)
	long := `{"name": "get_weather", "arguments": {}}` + "\n\nExplanation: " + prose
	three := func(s string) int { return len(s) / 3 }
	fake, url := startFake(t, fakellm.Config{Model: "served", MaxModelLen: 8192, Record: true,
		Script: []fakellm.Rule{{Contains: "LONGANSWER", Answer: long}}})
	cfg := openaiConfig(url)
	cfg.Model, cfg.MaxTokens = "served", 4096
	teacher := newTeacher(t, cfg, Options{CacheDir: t.TempDir(), CountTokens: three})
	if err := teacher.CheckModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := teacher.Stage("noise")

	_, _, err := Ask(context.Background(), st, userReq("noise@1", "r1/call0", "LONGANSWER rewrite the call"), 2, parseObject)
	var ae *AnswerError
	if IsFatal(err) || !errors.As(err, &ae) || ae.Reason != "llm_invalid_answer" {
		t.Fatalf("got %v, want the record rejected as llm_invalid_answer, not a stop", err)
	}
	log := chatLog(fake)
	if len(log) != 2 {
		t.Fatalf("server saw %d requests, want the ask and its re-ask", len(log))
	}
	msgs := sentMessages(t, log[1].Body)
	if len(msgs) != 4 || msgs[2].Role != "assistant" {
		t.Fatalf("re-ask messages: %+v", msgs)
	}
	if echo := msgs[2].Content; len(echo) > maxEcho+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(echo, "…")) {
		t.Errorf("the re-ask repeats %d bytes of the answer, want its first %d at most", len(echo), maxEcho)
	}
	// The answer as the stage read it: llm.SplitThinking trims it.
	if want := fmt.Sprintf("the answer was %d bytes; only its first 4096 are repeated above", len(strings.TrimSpace(long))); !strings.Contains(msgs[3].Content, want) {
		t.Errorf("the correction does not say what was cut: %q", msgs[3].Content)
	}

	// A prompt that fits on its own (about 3,350 tokens and 4096 to answer)
	// but not with the answer repeated: that record is rejected, the run
	// goes on.
	big := userReq("noise@1", "r2/call0", "LONGANSWER "+strings.Repeat("word ", 2000))
	_, _, err = Ask(context.Background(), st, big, 2, parseObject)
	if IsFatal(err) || !errors.As(err, &ae) || ae.Reason != ReasonContextExceeded || ae.Slot != "r2/call0" {
		t.Fatalf("got %v, want a reject llm_context_exceeded for slot r2/call0, not a stop", err)
	}
	if !strings.Contains(err.Error(), "context of 8192 tokens") {
		t.Errorf("reject detail %q does not name the context", err)
	}
	if got := len(chatLog(fake)); got != 3 {
		t.Errorf("server saw %d requests, want 3 (the re-ask that does not fit is not sent)", got)
	}
	if _, err := st.Complete(context.Background(), userReq("noise@1", "r3/call0", "a short one")); err != nil {
		t.Fatalf("the teacher stopped after a re-ask did not fit: %v", err)
	}
}

// QA r4: after an answer cut at the token limit, the re-ask went out
// byte-identical (max_tokens 256 each time): Ask doubled only a limit the
// stage set itself. The re-ask asks for twice the effective limit, bounded
// by what the served context leaves beside the prompt; the first ask's
// body is unchanged.
func TestTruncatedReaskDoublesTheEffectiveLimit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxModelLen int
		maxTokens   int
		want        []int
	}{
		{"no context known", 0, 256, []int{256, 512, 1024}},
		// userReq's prompt: 2 + 3 tokens of text and 8 per message = 21;
		// 1000 - 21 = 979 left for the answer.
		{"bounded by the context", 1000, 400, []int{400, 800, 979}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, url := startFake(t, fakellm.Config{Model: "served", MaxModelLen: tc.maxModelLen, Record: true,
				Script: []fakellm.Rule{{Contains: "CUT", Answer: `{"a":`, FinishReason: "length"}}})
			cfg := openaiConfig(url)
			cfg.Model, cfg.MaxTokens = "served", tc.maxTokens
			teacher := newTeacher(t, cfg, Options{})
			if err := teacher.CheckModels(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, _, err := Ask(context.Background(), teacher.Stage("noise"), userReq("noise@1", "r1", "CUT please"), 3, parseObject)
			var ae *AnswerError
			if !errors.As(err, &ae) || ae.Reason != "llm_truncated" {
				t.Fatalf("got %v, want llm_truncated", err)
			}
			var got []int
			for _, s := range chatLog(fake) {
				got = append(got, sentMaxTokens(t, s.Body))
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1] || got[2] != tc.want[2] {
				t.Errorf("max_tokens sent %v, want %v", got, tc.want)
			}
		})
	}
}

// QA r3: invalid UTF-8 bytes and lone surrogate escapes in an answer were
// decoded to U+FFFD and reached the data. Such an answer is an invalid
// answer: re-asked, then rejected as llm_invalid_utf8.
func TestAnswerThatIsNotUTF8IsReasked(t *testing.T) {
	answer := func(content string) string {
		return `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` + content + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}`
	}
	srv := &bodyServer{bodies: []string{
		answer("I'm sorry\xe9\xff, I cannot"),      // Latin-1 bytes
		answer(`I'm sorry \ud83d, I cannot`),       // a high surrogate alone
		answer(`I'm sorry \ud83d\ude00, I cannot`), // a pair: fine
	}}
	teacher := newTeacher(t, openaiConfig(srv.start(t)), Options{})
	st := teacher.Stage("negatives")
	text := func(s string) (string, error) { return s, nil }
	got, _, err := Ask(context.Background(), st, userReq("negatives@1", "r1", "reply"), 3, text)
	if err != nil || got != "I'm sorry 😀, I cannot" {
		t.Fatalf("got %q, %v; want the third answer", got, err)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(reqs))
	}
	for i, want := range []string{"invalid UTF-8 byte 0xe9", `lone surrogate escape \ud83d`} {
		msgs := sentMessages(t, reqs[i+1])
		if c := msgs[len(msgs)-1].Content; !strings.Contains(c, "not valid UTF-8") || !strings.Contains(c, want) {
			t.Errorf("re-ask %d correction %q does not say %q", i+1, c, want)
		}
	}

	srv2 := &bodyServer{bodies: []string{answer(`sorry \udc00`)}}
	teacher2 := newTeacher(t, openaiConfig(srv2.start(t)), Options{})
	_, _, err = Ask(context.Background(), teacher2.Stage("negatives"), userReq("negatives@1", "r2", "reply"), 2, text)
	var ae *AnswerError
	if !errors.As(err, &ae) || ae.Reason != ReasonInvalidUTF8 || !strings.Contains(err.Error(), `\udc00`) {
		t.Fatalf("got %v, want a reject %s naming the escape", err, ReasonInvalidUTF8)
	}
}

// QA r6: a 200 answer with an error object lost the server's message
// ("answer has no choices"), and an event stream gave "invalid character
// 'd'". The error quotes the server, or says it streamed.
func TestErrorAnswersQuoteTheServer(t *testing.T) {
	zero := 0
	// The error object's code gives the class, as a batch's error lines
	// do: a 400 inside a 200 is not asked again (it would fail the same
	// way), a 503 may pass, an object without a code is an invalid answer.
	for _, tc := range []struct {
		name, body, ctype, want, class string
	}{
		{"OpenAI error object", `{"error":{"message":"upstream model overloaded","type":"server_error","code":503}}`, "",
			`(code 503): "upstream model overloaded"`, classServer},
		{"OpenAI error object without code", `{"error":{"message":"upstream model overloaded"}}`, "",
			`"upstream model overloaded"`, classInvalid},
		{"OpenAI error kind", `{"error":{"message":"context too long","type":"invalid_request_error","code":"invalid_request_error"}}`, "",
			`"context too long"`, classBadRequest},
		{"vLLM error object", `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`, "",
			`"This model's maximum context length is 4096 tokens."`, classBadRequest},
		{"event stream", "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", "text/event-stream",
			"the server streamed its answer", classInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &bodyServer{bodies: []string{tc.body}, ctype: tc.ctype}
			cfg := openaiConfig(srv.start(t))
			cfg.MaxRetries = &zero
			_, err := newTeacher(t, cfg, Options{}).Stage("s").Complete(context.Background(), userReq("s@1", "r1", "hi"))
			var ae *AnswerError
			if !errors.As(err, &ae) || ae.Reason != "llm_error_"+tc.class || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want llm_error_%s saying %q", err, tc.class, tc.want)
			}
		})
	}
	// Batch output lines go through the same decoding.
	for body, class := range map[string]string{
		`{"error":{"message":"upstream model overloaded"}}`:                                            classInvalid,
		`{"object":"error","message":"upstream model overloaded","type":"BadRequestError","code":400}`: classBadRequest,
	} {
		line := `{"custom_id":"` + strings.Repeat("ab", 32) + `","response":{"status_code":200,"body":` + body + `}}`
		r, err := parseBatchOutput([]byte(line), "m")
		if err != nil || r.class != class || !strings.Contains(r.message, `"upstream model overloaded"`) {
			t.Errorf("batch line %s: %+v, %v; want class %s", body, r, err, class)
		}
	}
}

// QA r7: a server that sends no usage turned the budget off without a
// word (cost 0). Such answers are counted apart (Stats.NoUsage) and,
// with a budget set, the first one warns, once per run.
func TestAnswersWithoutUsageAreCountedAndWarned(t *testing.T) {
	srv := &bodyServer{bodies: []string{`{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`}}
	url := srv.start(t)
	for _, budget := range []float64{0.05, 0} {
		var logs bytes.Buffer
		cfg := openaiConfig(url)
		cfg.Budget, cfg.PriceInputPerMTok, cfg.PriceOutputPerMTok = budget, 100, 100
		teacher := newTeacher(t, cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
		for _, stage := range []string{"a", "a", "b"} {
			if _, err := teacher.Stage(stage).Complete(context.Background(), userReq(stage+"@1", "", "q "+stage)); err != nil {
				t.Fatal(err)
			}
		}
		stats := teacher.Stats()
		if stats[0].NoUsage != 2 || stats[1].NoUsage != 1 || stats[0].Cost != 0 {
			t.Errorf("budget %v: stats %+v", budget, stats)
		}
		warns := strings.Count(logs.String(), "level=WARN")
		if want := map[bool]int{true: 1, false: 0}[budget > 0]; warns != want || warns > 0 && !strings.Contains(logs.String(), "no usage") {
			t.Errorf("budget %v: %d WARN lines, want %d:\n%s", budget, warns, want, logs.String())
		}
	}
}

func TestBadText(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`"plain"`, ""},
		{`"中文 and é"`, ""},
		{`"pair \ud83d\ude00 ok"`, ""},
		{`"escaped backslash \\ud800 is text"`, ""},
		{`"\u00e9\n\"\\"`, ""},
		{`"bad \xff"`, ""}, // the four characters \ x f f, not a byte
		{"\"bad \xe9 byte\"", "an invalid UTF-8 byte 0xe9 at byte 5"},
		{`"lone \ud800"`, `a lone surrogate escape \ud800 at byte 6`},
		{`"low first \udc00\ud800"`, `a lone surrogate escape \udc00 at byte 11`},
		{`"high then text \ud83dx"`, `a lone surrogate escape \ud83d at byte 16`},
		{`"high at the end \uD83D"`, `a lone surrogate escape \ud83d at byte 17`},
		{`"two highs \ud83d\ud83d\ude00"`, `a lone surrogate escape \ud83d at byte 11`},
	} {
		if got := badText([]byte(tc.raw)); got != tc.want {
			t.Errorf("badText(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// FuzzBadText: badText names a problem exactly when encoding/json would
// put a U+FFFD in the string that the raw text does not hold itself.
func FuzzBadText(f *testing.F) {
	for _, s := range []string{`"ok"`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `"\\ud800"`, `"\ufffd"`, "\"\xef\xbf\xbd\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return
		}
		bad := badText(raw)
		replaced := strings.Count(s, "\uFFFD")
		own := bytes.Count(raw, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
		if bad != "" && replaced == 0 {
			t.Fatalf("badText(%q) = %q, but %q holds no U+FFFD", raw, bad, s)
		}
		if bad == "" && replaced > own {
			t.Fatalf("badText(%q) found nothing, but decoding made %d U+FFFD (the text holds %d)", raw, replaced, own)
		}
		if bad == "" && !utf8.Valid(raw) {
			t.Fatalf("badText(%q) passed invalid UTF-8", raw)
		}
	})
}
