package fakellm

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

func chat(t *testing.T, url, user string, maxTokens int) (int, chatResponse, http.Header) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model":      "m",
		"messages":   []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": user}},
		"max_tokens": maxTokens,
	})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out chatResponse
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		json.Unmarshal(b, &out) // an invalid_json fault leaves out empty
	}
	return resp.StatusCode, out, resp.Header
}

func TestScriptAndEcho(t *testing.T) {
	_, hs := newServer(t, Config{Script: []Rule{
		{Contains: "weather", Answer: `{"name":"get_weather"}`},
		{Regexp: `translate (\w+)`, Answer: "translated:$1"},
		{Contains: "long", Answer: "cut", FinishReason: "length"},
	}})
	tests := []struct {
		user, want, finish string
		maxTokens          int
	}{
		{"what is the weather in Paris", `{"name":"get_weather"}`, "stop", 0},
		{"please translate hello now", "translated:hello", "stop", 0},
		{"a long story", "cut", "length", 0},
		{"echo me", "echo me", "stop", 0},
		{"0123456789abcdef0123", "01234567", "length", 2}, // 2 tokens ≈ 8 bytes
	}
	for _, tt := range tests {
		code, resp, _ := chat(t, hs.URL, tt.user, tt.maxTokens)
		if code != 200 || resp.Choices[0].Message.Content != tt.want || resp.Choices[0].FinishReason != tt.finish {
			t.Errorf("%q: %d %+v", tt.user, code, resp)
		}
		if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens != tokens(tt.want) ||
			resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
			t.Errorf("%q: usage %+v", tt.user, resp.Usage)
		}
	}
}

func TestBadRequests(t *testing.T) {
	_, hs := newServer(t, Config{})
	for _, body := range []string{`not json`, `{"messages":[]}`} {
		resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	resp, _ := http.Get(hs.URL + "/v1/unknown")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
}

func TestFaultsAreDeterministicAndCounted(t *testing.T) {
	cfg := Config{Seed: 7, Record: true, Faults: Faults{RateLimit: 0.2, ServerError: 0.2, Truncate: 0.2, InvalidJSON: 0.1, RetryAfter: Duration(1500 * time.Millisecond)}}
	run := func() ([]string, Counters) {
		s, hs := newServer(t, cfg)
		var kinds []string
		for i := range 60 {
			chat(t, hs.URL, strings.Repeat("x", i), 0)
			chat(t, hs.URL, strings.Repeat("x", i), 0) // a repeat gets a fresh draw
		}
		for _, seen := range s.Log() {
			kinds = append(kinds, seen.Fault)
		}
		return kinds, s.Counters()
	}
	a, ca := run()
	b, _ := run()
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatal("same requests met different faults")
	}
	n := map[string]int{}
	for _, k := range a {
		n[k]++
	}
	for _, k := range []string{FaultRateLimit, FaultServerError, FaultTruncate, FaultInvalidJSON, FaultNone} {
		if n[k] == 0 {
			t.Errorf("no %q among 120 requests: %v", k, n)
		}
		if k != FaultNone && ca.Faults[k] != int64(n[k]) {
			t.Errorf("counter %s = %d, log says %d", k, ca.Faults[k], n[k])
		}
	}
	if ca.Requests != 120 || ca.Chat != 120 || ca.Answered != int64(n[FaultNone]+n[FaultTruncate]) {
		t.Errorf("counters %+v vs %v", ca, n)
	}
}

func TestFaultResponses(t *testing.T) {
	tests := []struct {
		faults Faults
		check  func(t *testing.T, code int, resp chatResponse, h http.Header)
	}{
		{Faults{RateLimit: 1, RetryAfter: Duration(2500 * time.Millisecond)}, func(t *testing.T, code int, _ chatResponse, h http.Header) {
			if code != 429 || h.Get("Retry-After") != "3" || h.Get("Retry-After-Ms") != "2500" {
				t.Errorf("429: %d %v", code, h)
			}
		}},
		{Faults{ServerError: 1}, func(t *testing.T, code int, _ chatResponse, _ http.Header) {
			if code != 500 && code != 502 && code != 503 {
				t.Errorf("5xx: %d", code)
			}
		}},
		{Faults{Truncate: 1}, func(t *testing.T, code int, resp chatResponse, _ http.Header) {
			if code != 200 || resp.Choices[0].FinishReason != "length" || resp.Choices[0].Message.Content != "abcd" {
				t.Errorf("truncate: %d %+v", code, resp)
			}
		}},
	}
	for _, tt := range tests {
		_, hs := newServer(t, Config{Faults: tt.faults})
		code, resp, h := chat(t, hs.URL, "abcdefgh", 0)
		tt.check(t, code, resp, h)
	}

	_, hs := newServer(t, Config{Faults: Faults{InvalidJSON: 1}})
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Valid(b) {
		t.Errorf("invalid_json: %d %q", resp.StatusCode, b)
	}

	_, hs = newServer(t, Config{Faults: Faults{Drop: 1}})
	if resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body)); err == nil {
		resp.Body.Close()
		t.Error("dropped connection answered")
	}

	_, hs = newServer(t, Config{Faults: Faults{Hang: 1}})
	client := &http.Client{Timeout: 100 * time.Millisecond}
	if resp, err := client.Post(hs.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body)); err == nil {
		resp.Body.Close()
		t.Error("hung request answered")
	}
}

func TestLatencyAndPeak(t *testing.T) {
	s, hs := newServer(t, Config{Latency: Duration(50 * time.Millisecond), TTFB: Duration(20 * time.Millisecond)})
	done := make(chan struct{})
	for range 5 {
		go func() {
			chat(t, hs.URL, "hi", 0)
			done <- struct{}{}
		}()
	}
	for range 5 {
		<-done
	}
	c := s.Counters()
	if c.PeakInFlight < 2 || c.PeakInFlight > 5 || c.InFlight != 0 || c.Answered != 5 {
		t.Fatalf("counters %+v", c)
	}
	resp, err := http.Get(hs.URL + "/fake/counters")
	if err != nil {
		t.Fatal(err)
	}
	var got Counters
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got.Chat != 5 {
		t.Fatalf("/fake/counters: %+v", got)
	}
}

func TestEmbeddings(t *testing.T) {
	_, hs := newServer(t, Config{EmbedDim: 8})
	post := func(body string) embeddingResponse {
		resp, err := http.Post(hs.URL+"/v1/embeddings", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out embeddingResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		return out
	}
	r := post(`{"model":"e","input":["alpha","beta","alpha"]}`)
	if len(r.Data) != 3 || len(r.Data[0].Embedding) != 8 || r.Data[2].Index != 2 {
		t.Fatalf("%+v", r)
	}
	var norm float64
	for _, x := range r.Data[0].Embedding {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("norm² %v", norm)
	}
	for i := range 8 {
		if r.Data[0].Embedding[i] != r.Data[2].Embedding[i] {
			t.Fatal("equal texts, different vectors")
		}
	}
	if one := post(`{"input":"alpha","dimensions":4}`); len(one.Data) != 1 || len(one.Data[0].Embedding) != 4 {
		t.Fatalf("single input: %+v", one)
	}
}

func TestParseConfigAndFlags(t *testing.T) {
	c, err := ParseConfig([]byte(`{"latency":"50ms","faults":{"rate_limit":0.1,"retry_after":"2s"},"script":[{"contains":"x","answer":"y"}]}`))
	if err != nil || c.Latency.D() != 50*time.Millisecond || c.Faults.RetryAfter.D() != 2*time.Second || len(c.Script) != 1 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseConfig([]byte(`{"latncy":"50ms"}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
	bad := []Config{
		{Faults: Faults{RateLimit: 0.7, Drop: 0.5}},
		{Faults: Faults{Hang: -0.1}},
		{Script: []Rule{{Answer: "no matcher"}}},
		{Script: []Rule{{Regexp: "("}}},
		{Latency: Duration(-time.Second)},
	}
	for _, b := range bad {
		if _, err := New(b); err == nil {
			t.Errorf("accepted %+v", b)
		}
	}
	var fc Config
	fs := flag.NewFlagSet("fake-llm", flag.ContinueOnError)
	fc.RegisterFlags(fs)
	if err := fs.Parse([]string{"-latency", "50ms", "-fault-429", "0.1", "-retry-after", "3s", "-seed", "9"}); err != nil {
		t.Fatal(err)
	}
	if fc.Latency.D() != 50*time.Millisecond || fc.Faults.RateLimit != 0.1 || fc.Faults.RetryAfter.D() != 3*time.Second || fc.Seed != 9 {
		t.Fatalf("flags: %+v", fc)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"latency":"5ms","faults":{"drop":0.5}}`))
	f.Add([]byte(`{"script":[{"regexp":"a(b)","answer":"$1"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if s, err := New(c); err == nil && s == nil {
			t.Fatal("nil server without error")
		}
	})
}

func TestEchoAuthDelayAndDown(t *testing.T) {
	s, hs := newServer(t, Config{Faults: Faults{EchoAuth: 1, Delay: Duration(30 * time.Millisecond)}})
	body := `{"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-secret-123")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "Bearer sk-secret-123") {
		t.Errorf("echo_auth: %d %s", resp.StatusCode, b)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("fault came after %v, before its delay", d)
	}
	if s.Counters().Faults[FaultEchoAuth] != 1 {
		t.Errorf("counters %+v", s.Counters())
	}

	// Down after two requests; healed by SetFaults.
	if err := s.SetFaults(Faults{DownAfter: 2}); err != nil {
		t.Fatal(err)
	}
	var codes []int
	for range 4 {
		code, _, _ := chat(t, hs.URL, "hello", 0)
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 503 503]" {
		t.Errorf("down_after 2: %v", codes)
	}
	if err := s.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := chat(t, hs.URL, "hello", 0); code != 200 {
		t.Errorf("after recovery: %d", code)
	}
	if err := s.SetFaults(Faults{Drop: 2}); err == nil {
		t.Error("SetFaults accepted a share above 1")
	}
}

// With a capacity, requests beyond it queue: latency grows with the number
// in flight.
func TestCapacityQueues(t *testing.T) {
	const latency = 40 * time.Millisecond
	_, hs := newServer(t, Config{Latency: Duration(latency), Capacity: 2})
	var wg sync.WaitGroup
	took := make([]time.Duration, 6)
	for i := range took {
		wg.Go(func() {
			start := time.Now()
			chat(t, hs.URL, fmt.Sprint("q", i), 0)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	slices.Sort(took)
	// Served two at a time: the last pair waits for two pairs before it.
	if took[0] < latency || took[5] < 3*latency {
		t.Errorf("latencies %v with capacity 2 and latency %v", took, latency)
	}
}
