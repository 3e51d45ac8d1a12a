package llm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/jsonout"
	"go.yaml.in/yaml/v3"
)

func decodeStrict(t *testing.T, src string, v any) error {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func TestConfigYAML(t *testing.T) {
	src := `
provider: openai
model: qwen2.5-7b-instruct
api_key_env: VLLM_KEY
endpoints:
  - base_url: http://10.0.0.1:8000/v1
    max_in_flight: 32
  - base_url: http://10.0.0.2:8000/v1
temperature: 0
timeout: 45s
retry_max: 1m
structured_output: json_object
price_input_per_mtok: 0.5
price_output_per_mtok: 1.5
budget: 20
`
	var c Config
	if err := decodeStrict(t, src, &c); err != nil {
		t.Fatal(err)
	}
	c.Defaults()
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatalf("valid config rejected: %v", errs)
	}
	if c.Temperature == nil || *c.Temperature != 0 {
		t.Errorf("temperature 0 lost: %v", c.Temperature)
	}
	if c.Timeout.D() != 45*time.Second || c.RetryMax.D() != time.Minute {
		t.Errorf("durations: timeout %s retry_max %s", c.Timeout, c.RetryMax)
	}
	if c.Endpoints[1].MaxInFlight != DefaultMaxInFlight || c.Endpoints[0].MaxInFlight != 32 {
		t.Errorf("max_in_flight defaults: %+v", c.Endpoints)
	}
	if c.RetryBase.D() != defaultRetryBase || *c.MaxRetries != defaultMaxRetries || c.ErrorWindow != defaultErrorWindow {
		t.Errorf("defaults not applied: %+v", c)
	}
	// max_retries: 0 means no retries, not the default (it became 6).
	var none Config
	if err := yaml.Unmarshal([]byte("provider: offline\nmax_retries: 0\n"), &none); err != nil {
		t.Fatal(err)
	}
	none.Defaults()
	if none.MaxRetries == nil || *none.MaxRetries != 0 {
		t.Errorf("max_retries: 0 became %v", none.MaxRetries)
	}
}

func TestConfigYAMLBatch(t *testing.T) {
	src := `
provider: openai
model: Qwen/Qwen3-8B
mode: batch
batch: {provider: files, max_requests: 1000}
extra_body:
  top_k: 20
  chat_template_kwargs: {enable_thinking: false}
`
	var c Config
	if err := decodeStrict(t, src, &c); err != nil {
		t.Fatal(err)
	}
	c.Defaults()
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatalf("a files-mode batch needs no endpoint, got %v", errs)
	}
	if c.Batch.MaxRequests != 1000 || c.Batch.MaxBytes != defaultBatchMaxBytes || c.Batch.PriceFactor != 0.5 {
		t.Errorf("batch defaults: %+v", c.Batch)
	}
	b, err := jsonout.Marshal(c.ExtraBody)
	if err != nil || string(b) != `{"chat_template_kwargs":{"enable_thinking":false},"top_k":20}` {
		t.Errorf("extra_body as JSON: %s, %v", b, err)
	}
}

func TestConfigYAMLUnknownKey(t *testing.T) {
	var c Config
	err := decodeStrict(t, "provider: openai\ntemprature: 0.2\n", &c)
	if err == nil || !strings.Contains(err.Error(), "temprature") {
		t.Fatalf("unknown key not reported: %v", err)
	}
	// A bad duration is a type error with its line, as the decoder's own
	// are (the pipeline's loader words it for people).
	err = decodeStrict(t, "provider: openai\ntimeout: soon\n", &c)
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) != 1 || te.Errors[0] != "line 2: cannot unmarshal !!str `soon` into llm.Duration" {
		t.Fatalf("bad duration not reported as a type error: %v", err)
	}
	// JSON reads it through UnmarshalText.
	var d Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil || !strings.Contains(err.Error(), "invalid duration") {
		t.Fatalf("bad duration in JSON: %v", err)
	}
}

func TestConfigDefaultsOffline(t *testing.T) {
	var c Config
	c.Defaults()
	if c.Provider != ProviderOffline || c.StructuredOutput != StructuredJSONSchema {
		t.Fatalf("defaults: %+v", c)
	}
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatalf("default config invalid: %v", errs)
	}
}

func TestConfigValidate(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name string
		edit func(*Config)
		want string // substring of one error
	}{
		{"unknown provider", func(c *Config) { c.Provider = "anthropic" }, "teacher.provider: unknown provider"},
		{"a server's name for a provider", func(c *Config) { c.Provider = "vllm" }, `a vLLM or SGLang server is "openai" too, with its base_url`},
		{"openai without model", func(c *Config) { c.Provider = ProviderOpenAI; c.Endpoints = []Endpoint{{BaseURL: "http://x/v1"}} }, "teacher.model"},
		{"openai without endpoints", func(c *Config) { c.Provider = ProviderOpenAI; c.Model = "m" }, "teacher.endpoints: provider"},
		{"bad url", func(c *Config) { c.Endpoints = []Endpoint{{BaseURL: "localhost:8000"}} }, "teacher.endpoints[0].base_url"},
		{"a query in the url", func(c *Config) { c.Endpoints = []Endpoint{{BaseURL: "http://a/v1?key=s3cret"}} }, `"http://a/v1?key=REDACTED" has a query or fragment, which requests would not carry`},
		{"duplicate url", func(c *Config) {
			c.Endpoints = []Endpoint{{BaseURL: "http://a/v1"}, {BaseURL: "http://a/v1"}}
		}, "repeats endpoints[0]"},
		{"negative in flight", func(c *Config) { c.Endpoints = []Endpoint{{BaseURL: "http://a/v1", MaxInFlight: -1}} }, "max_in_flight"},
		{"temperature", func(c *Config) { c.Temperature = f(2.5) }, "teacher.temperature"},
		{"top_p", func(c *Config) { c.TopP = f(0) }, "teacher.top_p"},
		{"structured", func(c *Config) { c.StructuredOutput = "xml" }, "teacher.structured_output"},
		{"error rate", func(c *Config) { c.MaxErrorRate = 1.5 }, "teacher.max_error_rate"},
		{"window", func(c *Config) { c.ErrorWindow = 5; c.MinRequestsForErrorRate = 10 }, "teacher.error_window"},
		{"retry max", func(c *Config) { c.RetryMax = Duration(time.Millisecond) }, "teacher.retry_max"},
		{"latency tolerance", func(c *Config) { c.LatencyTolerance = 1.01 }, "teacher.latency_tolerance"},
		{"budget without prices", func(c *Config) { c.Budget = 5 }, "teacher.budget: a budget needs"},
		{"unknown mode", func(c *Config) { c.Mode = "bulk" }, "teacher.mode: unknown mode"},
		{"batch offline", func(c *Config) { c.Mode = ModeBatch }, "teacher.mode: batch mode needs provider"},
		{"batch provider", func(c *Config) { c.Mode, c.Batch.Provider = ModeBatch, "s3" }, "teacher.batch.provider"},
		{"batch price factor", func(c *Config) { c.Batch.PriceFactor = 2; c.Mode = ModeBatch }, "teacher.batch.price_factor"},
		{"batch rounds", func(c *Config) { c.Batch.MaxRounds = -1; c.Mode = ModeBatch }, "teacher.batch.max_rounds"},
		{"files mode still needs a model", func(c *Config) {
			c.Provider, c.Mode, c.Batch.Provider = ProviderOpenAI, ModeBatch, BatchFiles
		}, "teacher.model"},
		{"extra body sets a field of augment's", func(c *Config) { c.ExtraBody = map[string]any{"temperature": 1} }, "teacher.extra_body.temperature"},
		{"max completion tokens", func(c *Config) { c.MaxCompletionTokens = -1 }, "teacher.max_completion_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			tt.edit(&c)
			c.Defaults()
			errs := c.Validate()
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tt.want) {
				t.Fatalf("want an error containing %q, got %q", tt.want, all)
			}
		})
	}
}

func TestEmbedderConfigValidate(t *testing.T) {
	var c EmbedderConfig
	c.Defaults()
	if errs := c.Validate(); len(errs) > 0 || c.Dimensions != defaultOfflineDim {
		t.Fatalf("default embedder config: %+v %v", c, errs)
	}
	c = EmbedderConfig{Provider: ProviderOpenAI}
	c.Defaults()
	errs := c.Validate()
	if len(errs) != 2 {
		t.Fatalf("want model and endpoints errors, got %v", errs)
	}
	if c.Dimensions != 0 {
		t.Errorf("openai embedder must leave dimensions to the server, got %d", c.Dimensions)
	}
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || d.D() != 90*time.Second {
		t.Fatalf("got %v %v", d, err)
	}
	b, _ := d.MarshalText()
	if string(b) != "1m30s" {
		t.Fatalf("marshal: %s", b)
	}
	if err := d.UnmarshalText([]byte("90")); err == nil {
		t.Fatal("a bare number must be rejected (unit missing)")
	}
}

func FuzzDurationText(f *testing.F) {
	for _, s := range []string{"30s", "1h2m", "-5ms", "", "90", "1e9s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d Duration
		if d.UnmarshalText([]byte(s)) != nil {
			return
		}
		b, _ := d.MarshalText()
		var e Duration
		if err := e.UnmarshalText(b); err != nil || e != d {
			t.Fatalf("round trip %q → %s → %v (%v)", s, b, e, err)
		}
	})
}
