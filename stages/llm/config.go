package llm

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"time"

	"go.yaml.in/yaml/v3"
)

// Provider names accepted in Config.Provider and EmbedderConfig.Provider.
const (
	ProviderOffline = "offline" // deterministic stand-ins, no network (the default)
	ProviderOpenAI  = "openai"  // any OpenAI-compatible server: OpenAI, vLLM, SGLang, …
)

// Structured-output modes accepted in Config.StructuredOutput.
const (
	StructuredJSONSchema = "json_schema" // response_format {"type":"json_schema", …} (OpenAI, vLLM, SGLang)
	StructuredJSONObject = "json_object" // response_format {"type":"json_object"}
	StructuredNone       = "none"        // no response_format; the prompt alone asks for JSON
)

// Config is the `teacher:` block of pipeline.yaml. It is decoded strictly
// (unknown keys are errors), so the types here have no custom YAML
// unmarshalers except Duration, a scalar.
//
// A zero field means its default; Defaults fills them in and Validate
// reports what is still wrong.
type Config struct {
	// Provider is "offline" (default: each stage's deterministic stand-in
	// answers, nothing is sent anywhere) or "openai" (an OpenAI-compatible
	// chat completions API at Endpoints).
	Provider string `yaml:"provider" json:"provider"`
	// Model is the model name sent with every request. Required for "openai".
	Model string `yaml:"model" json:"model"`
	// APIKeyEnv names the environment variable holding the API key. Empty
	// means no Authorization header (a local vLLM usually needs none). The
	// key itself is never written anywhere.
	APIKeyEnv string `yaml:"api_key_env" json:"api_key_env,omitempty"`
	// Endpoints are the servers of the model (e.g. four vLLM replicas); each
	// request goes to the least loaded healthy one. Required for "openai".
	Endpoints []Endpoint `yaml:"endpoints" json:"endpoints,omitempty"`

	// Sampling defaults for requests that leave them unset. Nil means the
	// server's default; a temperature of 0 is sent as 0.
	Temperature *float64 `yaml:"temperature" json:"temperature,omitempty"`
	TopP        *float64 `yaml:"top_p" json:"top_p,omitempty"`
	MaxTokens   int      `yaml:"max_tokens" json:"max_tokens,omitempty"` // 0: server default
	Seed        *int     `yaml:"seed" json:"seed,omitempty"`

	// MaxCompletionTokens, when set, is sent as max_completion_tokens (what
	// OpenAI's reasoning models take instead of max_tokens; it bounds the
	// reasoning and the answer together). ReasoningEffort ("low", "medium",
	// "high", …) is sent as reasoning_effort. Both are part of the cache key.
	MaxCompletionTokens int    `yaml:"max_completion_tokens" json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string `yaml:"reasoning_effort" json:"reasoning_effort,omitempty"`
	// ExtraBody is merged verbatim into every chat request body: a server's
	// own parameters such as vLLM's top_k, min_p, repetition_penalty,
	// chat_template_kwargs ({enable_thinking: false} for Qwen3) or
	// guided_json / structured_outputs. It is part of the cache key. It may
	// not set a field augment sets itself (model, messages, sampling,
	// token limits, response_format).
	ExtraBody map[string]any `yaml:"extra_body" json:"extra_body,omitempty"`

	// StructuredOutput says how requests that carry a JSON schema ask for
	// JSON: "json_schema" (default), "json_object" or "none". Answers are
	// validated locally in every mode.
	StructuredOutput string `yaml:"structured_output" json:"structured_output"`

	// Timeout bounds one HTTP attempt (default 2m).
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// MaxRetries is how many times a request is retried after a timeout,
	// connection error, 408, 429 or 5xx (default 6 when unset; 0: never;
	// other 4xx are not retried). It must not be negative.
	MaxRetries *int `yaml:"max_retries" json:"max_retries"`
	// RetryBase and RetryMax shape the jittered exponential backoff between
	// retries (defaults 500ms and 30s). RetryMax also caps how long a
	// Retry-After header can make a request wait.
	RetryBase Duration `yaml:"retry_base" json:"retry_base"`
	RetryMax  Duration `yaml:"retry_max" json:"retry_max"`

	// MaxErrorRate stops the run (a fatal error) when more than this share
	// of the last ErrorWindow finished requests failed after their retries
	// (default 0.25; 1 never stops). It is only checked once at least
	// MinRequestsForErrorRate requests have finished (default 20).
	MaxErrorRate            float64 `yaml:"max_error_rate" json:"max_error_rate"`
	MinRequestsForErrorRate int     `yaml:"min_requests_for_error_rate" json:"min_requests_for_error_rate"`
	ErrorWindow             int     `yaml:"error_window" json:"error_window"` // default 200

	// BreakerFailures consecutive failed attempts (connection errors,
	// timeouts, 5xx, unreadable answers) take an endpoint out of rotation
	// for BreakerCooldown (defaults 5 and 10s), after which one probe
	// request decides whether it comes back; each failed probe doubles the
	// cooldown, up to 16 times the configured one.
	BreakerFailures int      `yaml:"breaker_failures" json:"breaker_failures"`
	BreakerCooldown Duration `yaml:"breaker_cooldown" json:"breaker_cooldown"`

	// LatencyTolerance: an endpoint's concurrency is cut when the latency
	// of its answers rises with the number of requests in flight (a clear
	// correlation, answers of equal length compared) and, at the current
	// number, exceeds this multiple of the latency the fit gives with
	// nothing in flight: that is how a self-hosted server that queues instead of
	// answering 429 shows overload. Latency that only jitters cuts nothing
	// (default 2; a negative value disables the check).
	LatencyTolerance float64 `yaml:"latency_tolerance" json:"latency_tolerance"`

	// Prices in currency units per million tokens; zero means unknown
	// (no cost accounting).
	PriceInputPerMTok  float64 `yaml:"price_input_per_mtok" json:"price_input_per_mtok,omitempty"`
	PriceOutputPerMTok float64 `yaml:"price_output_per_mtok" json:"price_output_per_mtok,omitempty"`
	// Budget stops the run cleanly (fatal, resumable: every answer already
	// paid for is in the cache) once this run's cost reaches it. Zero means
	// no budget. Needs prices.
	Budget float64 `yaml:"budget" json:"budget,omitempty"`

	// Mode is "online" (default: each request is sent when a stage asks) or
	// "batch" (cache misses are collected into batch files, see Batch and
	// batch.go; the run stops until the answers are in).
	Mode  string      `yaml:"mode" json:"mode"`
	Batch BatchConfig `yaml:"batch" json:"batch"`
}

// An Endpoint is one server of the model.
type Endpoint struct {
	// BaseURL is the API root, e.g. "http://10.0.0.5:8000/v1".
	BaseURL string `yaml:"base_url" json:"base_url"`
	// MaxInFlight caps the requests outstanding at this endpoint (default 16).
	// The adaptive limit stays at or below it.
	MaxInFlight int `yaml:"max_in_flight" json:"max_in_flight"`
}

// Defaults for zero Config fields. The retry and breaker numbers follow
// what OpenAI-compatible servers need in practice: a 429 storm clears in
// seconds, a restarting vLLM replica in tens of seconds.
const (
	DefaultMaxInFlight      = 16
	defaultTimeout          = 2 * time.Minute
	defaultMaxRetries       = 6
	defaultRetryBase        = 500 * time.Millisecond
	defaultRetryMax         = 30 * time.Second
	defaultMaxErrorRate     = 0.25
	defaultMinRequests      = 20
	defaultErrorWindow      = 200
	defaultBreakerFailures  = 5
	defaultBreakerCooldown  = 10 * time.Second
	defaultLatencyTolerance = 2.0
	defaultEmbedBatch       = 64
	defaultOfflineDim       = 512
)

// Defaults fills zero fields with their defaults.
func (c *Config) Defaults() {
	if c.Provider == "" {
		c.Provider = ProviderOffline
	}
	if c.StructuredOutput == "" {
		c.StructuredOutput = StructuredJSONSchema
	}
	if c.Mode == "" {
		c.Mode = ModeOnline
	}
	c.Batch.defaults()
	for i := range c.Endpoints {
		if c.Endpoints[i].MaxInFlight == 0 {
			c.Endpoints[i].MaxInFlight = DefaultMaxInFlight
		}
	}
	setDuration(&c.Timeout, defaultTimeout)
	if c.MaxRetries == nil {
		c.MaxRetries = new(defaultMaxRetries)
	}
	setDuration(&c.RetryBase, defaultRetryBase)
	setDuration(&c.RetryMax, defaultRetryMax)
	if c.MaxErrorRate == 0 {
		c.MaxErrorRate = defaultMaxErrorRate
	}
	if c.MinRequestsForErrorRate == 0 {
		c.MinRequestsForErrorRate = defaultMinRequests
	}
	if c.ErrorWindow == 0 {
		c.ErrorWindow = max(defaultErrorWindow, c.MinRequestsForErrorRate)
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = defaultBreakerFailures
	}
	setDuration(&c.BreakerCooldown, defaultBreakerCooldown)
	if c.LatencyTolerance == 0 {
		c.LatencyTolerance = defaultLatencyTolerance
	}
}

// Validate reports every problem of a defaulted Config, each naming the
// field as written in pipeline.yaml. An empty result means the config is
// usable.
func (c *Config) Validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("teacher.%s: "+format, append([]any{field}, args...)...))
	}
	switch c.Provider {
	case ProviderOffline:
	case ProviderOpenAI:
		if c.Model == "" {
			bad("model", "provider %q needs a model name", c.Provider)
		}
		// Batch files run by the user need no endpoint (one is still used,
		// when given, to check the model).
		if len(c.Endpoints) == 0 && !(c.Mode == ModeBatch && c.Batch.Provider == BatchFiles) {
			bad("endpoints", "provider %q needs at least one endpoint with a base_url", c.Provider)
		}
	default:
		bad("provider", "%s", unknownProvider(c.Provider))
	}
	errs = append(errs, validateEndpoints("teacher", c.Endpoints)...)
	errs = append(errs, validateCommon("teacher", c.APIKeyEnv, c.MaxRetries)...)
	switch c.Mode {
	case ModeOnline:
	case ModeBatch:
		if c.Provider != ProviderOpenAI {
			bad("mode", "batch mode needs provider %q (the offline stand-ins answer at once)", ProviderOpenAI)
		}
		errs = append(errs, c.Batch.validate()...)
	default:
		bad("mode", "unknown mode %q (want %q or %q)", c.Mode, ModeOnline, ModeBatch)
	}
	if c.MaxCompletionTokens < 0 {
		bad("max_completion_tokens", "must not be negative, got %d", c.MaxCompletionTokens)
	}
	for _, k := range sortedKeys(c.ExtraBody) {
		if reservedBodyFields[k] {
			bad("extra_body."+k, "is set by augment itself; use the teacher setting or the stage's own instead")
		}
	}
	if _, err := json.Marshal(c.ExtraBody); err != nil {
		bad("extra_body", "cannot be written as JSON: %v", err)
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2 || math.IsNaN(*c.Temperature)) {
		bad("temperature", "%v is outside [0, 2]", *c.Temperature)
	}
	if c.TopP != nil && (*c.TopP <= 0 || *c.TopP > 1 || math.IsNaN(*c.TopP)) {
		bad("top_p", "%v is outside (0, 1]", *c.TopP)
	}
	if c.MaxTokens < 0 {
		bad("max_tokens", "must not be negative, got %d", c.MaxTokens)
	}
	switch c.StructuredOutput {
	case StructuredJSONSchema, StructuredJSONObject, StructuredNone:
	default:
		bad("structured_output", "unknown mode %q (want json_schema, json_object or none)", c.StructuredOutput)
	}
	if c.Timeout <= 0 {
		bad("timeout", "must be positive, got %s", c.Timeout)
	}
	if c.RetryBase <= 0 {
		bad("retry_base", "must be positive, got %s", c.RetryBase)
	}
	if c.RetryMax < c.RetryBase {
		bad("retry_max", "%s is shorter than retry_base %s", c.RetryMax, c.RetryBase)
	}
	if c.MaxErrorRate < 0 || c.MaxErrorRate > 1 || math.IsNaN(c.MaxErrorRate) {
		bad("max_error_rate", "%v is outside [0, 1]", c.MaxErrorRate)
	}
	if c.MinRequestsForErrorRate < 1 {
		bad("min_requests_for_error_rate", "must be at least 1, got %d", c.MinRequestsForErrorRate)
	}
	if c.ErrorWindow < c.MinRequestsForErrorRate {
		bad("error_window", "%d is smaller than min_requests_for_error_rate %d", c.ErrorWindow, c.MinRequestsForErrorRate)
	}
	if c.BreakerFailures < 1 {
		bad("breaker_failures", "must be at least 1, got %d", c.BreakerFailures)
	}
	if c.BreakerCooldown <= 0 {
		bad("breaker_cooldown", "must be positive, got %s", c.BreakerCooldown)
	}
	if c.LatencyTolerance > 0 && c.LatencyTolerance < 1.1 {
		bad("latency_tolerance", "%v would cut concurrency on noise; use at least 1.1 or a negative value to disable", c.LatencyTolerance)
	}
	if c.PriceInputPerMTok < 0 {
		bad("price_input_per_mtok", "must not be negative")
	}
	if c.PriceOutputPerMTok < 0 {
		bad("price_output_per_mtok", "must not be negative")
	}
	if c.Budget < 0 {
		bad("budget", "must not be negative")
	}
	if c.Budget > 0 && c.PriceInputPerMTok == 0 && c.PriceOutputPerMTok == 0 {
		bad("budget", "a budget needs price_input_per_mtok or price_output_per_mtok to count cost")
	}
	return errs
}

func validateEndpoints(block string, eps []Endpoint) []error {
	var errs []error
	seen := map[string]int{}
	for i, ep := range eps {
		field := fmt.Sprintf("%s.endpoints[%d]", block, i)
		u, err := url.Parse(ep.BaseURL)
		switch {
		case ep.BaseURL == "":
			errs = append(errs, fmt.Errorf("%s.base_url: missing", field))
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, fmt.Errorf("%s.base_url: %q is not an http(s) URL", field, RedactURL(ep.BaseURL)))
		case u.RawQuery != "" || u.Fragment != "":
			// The client appends the API's paths to base_url as text: a
			// query would swallow them (/v1?key=…/chat/completions).
			errs = append(errs, fmt.Errorf("%s.base_url: %q has a query or fragment, which requests would not carry; give a key through api_key_env", field, RedactURL(ep.BaseURL)))
		}
		if j, dup := seen[ep.BaseURL]; dup && ep.BaseURL != "" {
			errs = append(errs, fmt.Errorf("%s.base_url: %q repeats endpoints[%d]", field, RedactURL(ep.BaseURL), j))
		}
		seen[ep.BaseURL] = i
		if ep.MaxInFlight < 1 {
			errs = append(errs, fmt.Errorf("%s.max_in_flight: must be at least 1, got %d", field, ep.MaxInFlight))
		}
	}
	return errs
}

// EmbedderConfig is the `embedder:` block of pipeline.yaml.
type EmbedderConfig struct {
	// Provider is "offline" (default: a deterministic lexical embedding of
	// hashed word and character n-gram features) or "openai" (an
	// OpenAI-compatible /embeddings API).
	Provider  string     `yaml:"provider" json:"provider"`
	Model     string     `yaml:"model" json:"model"` // required for "openai"
	APIKeyEnv string     `yaml:"api_key_env" json:"api_key_env,omitempty"`
	Endpoints []Endpoint `yaml:"endpoints" json:"endpoints,omitempty"`
	// BatchSize is the number of texts per /embeddings request (default 64).
	BatchSize int `yaml:"batch_size" json:"batch_size"`
	// Dimensions is the vector size: for "offline" the feature space
	// (default 512); for "openai" it is sent as `dimensions` when set.
	Dimensions int `yaml:"dimensions" json:"dimensions,omitempty"`
	// Timeout, MaxRetries, RetryBase and RetryMax as in Config.
	Timeout    Duration `yaml:"timeout" json:"timeout"`
	MaxRetries *int     `yaml:"max_retries" json:"max_retries"`
	RetryBase  Duration `yaml:"retry_base" json:"retry_base"`
	RetryMax   Duration `yaml:"retry_max" json:"retry_max"`
}

// Defaults fills zero fields with their defaults.
func (c *EmbedderConfig) Defaults() {
	if c.Provider == "" {
		c.Provider = ProviderOffline
	}
	for i := range c.Endpoints {
		if c.Endpoints[i].MaxInFlight == 0 {
			c.Endpoints[i].MaxInFlight = DefaultMaxInFlight
		}
	}
	if c.BatchSize == 0 {
		c.BatchSize = defaultEmbedBatch
	}
	if c.Dimensions == 0 && c.Provider == ProviderOffline {
		c.Dimensions = defaultOfflineDim
	}
	setDuration(&c.Timeout, defaultTimeout)
	if c.MaxRetries == nil {
		c.MaxRetries = new(defaultMaxRetries)
	}
	setDuration(&c.RetryBase, defaultRetryBase)
	setDuration(&c.RetryMax, defaultRetryMax)
}

// Validate reports every problem of a defaulted EmbedderConfig.
func (c *EmbedderConfig) Validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("embedder.%s: "+format, append([]any{field}, args...)...))
	}
	switch c.Provider {
	case ProviderOffline:
		if len(c.Endpoints) > 0 {
			bad("endpoints", "provider %q sends nothing; remove the endpoints or set provider: openai", c.Provider)
		}
	case ProviderOpenAI:
		if c.Model == "" {
			bad("model", "provider %q needs a model name", c.Provider)
		}
		if len(c.Endpoints) == 0 {
			bad("endpoints", "provider %q needs at least one endpoint with a base_url", c.Provider)
		}
	default:
		bad("provider", "%s", unknownProvider(c.Provider))
	}
	errs = append(errs, validateEndpoints("embedder", c.Endpoints)...)
	errs = append(errs, validateCommon("embedder", c.APIKeyEnv, c.MaxRetries)...)
	if c.BatchSize < 1 || c.BatchSize > 2048 {
		bad("batch_size", "%d is outside [1, 2048]", c.BatchSize)
	}
	if c.Dimensions < 0 || (c.Provider == ProviderOffline && c.Dimensions < 16) {
		bad("dimensions", "%d is too small", c.Dimensions)
	}
	if c.Timeout <= 0 {
		bad("timeout", "must be positive, got %s", c.Timeout)
	}
	if c.RetryBase <= 0 {
		bad("retry_base", "must be positive, got %s", c.RetryBase)
	}
	if c.RetryMax < c.RetryBase {
		bad("retry_max", "%s is shorter than retry_base %s", c.RetryMax, c.RetryBase)
	}
	return errs
}

// unknownProvider says that name is not a provider, and which one serves
// the servers people name instead (vLLM, SGLang: OpenAI-compatible).
func unknownProvider(name string) string {
	return fmt.Sprintf("unknown provider %q (want %q or %q; a vLLM or SGLang server is %q too, with its base_url)",
		name, ProviderOffline, ProviderOpenAI, ProviderOpenAI)
}

// Duration is a time.Duration written as in Go ("30s", "1m30s") in YAML
// and JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as "1m30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses "1m30s"; a bare "0" is zero.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"30s\" or \"2m\")", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML parses as UnmarshalText does. A bad value is a
// *yaml.TypeError worded and placed as the decoder's own type errors are,
// so that the pipeline's message names its key and what it takes.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into llm.Duration", n.Line, n.ShortTag())}}
	}
	if d.UnmarshalText([]byte(n.Value)) != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s `%s` into llm.Duration", n.Line, n.ShortTag(), n.Value)}}
	}
	return nil
}

func setDuration(d *Duration, def time.Duration) {
	if *d == 0 {
		*d = Duration(def)
	}
}

// validateCommon checks the settings the teacher and embedder blocks share.
// api_key_env must name a variable: a value that is not a variable name is
// most likely the key itself, which is never repeated in the message.
func validateCommon(block, apiKeyEnv string, maxRetries *int) []error {
	var errs []error
	if apiKeyEnv != "" && !isEnvName(apiKeyEnv) {
		errs = append(errs, fmt.Errorf("%s.api_key_env: must name an environment variable (letters, digits and _), "+
			"not hold the key; the value given is not shown", block))
	}
	if maxRetries != nil && *maxRetries < 0 {
		errs = append(errs, fmt.Errorf("%s.max_retries: must not be negative, got %d", block, *maxRetries))
	}
	return errs
}

func isEnvName(s string) bool {
	if s == "" || len(s) > 128 || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// RedactURL returns u with its credentials hidden: the user info and
// every query value are replaced by "REDACTED", so a base_url such as
// https://user:token@host/v1?api-key=… can be logged, written to
// config.yaml or a manifest. A string that does not parse as a URL is
// hidden whole.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "REDACTED (not a URL)"
	}
	if p.User != nil {
		p.User = url.User("REDACTED")
	}
	if p.RawQuery != "" {
		q := p.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		p.RawQuery = q.Encode()
	}
	if p.Fragment != "" {
		p.Fragment = "REDACTED"
	}
	return p.String()
}
