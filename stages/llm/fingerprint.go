package llm

import (
	"encoding/json"
	"fmt"
)

// Fingerprint identifies the teacher settings that change answers. The
// runner puts it in every LLM stage's skip key, so changing one of them
// redoes the stage's shards, while changing how requests travel (endpoints,
// key, retries, limits, prices, online or batch) does not.
//
// Every Config field is in fingerprintFields, with the decision whether it
// changes answers; TestFingerprintDecisions fails for a field added without
// one, and checks that the decision and Fingerprint agree.
func (c Config) Fingerprint() string {
	b, _ := json.Marshal(struct {
		Provider, Model, StructuredOutput string
		Temperature, TopP                 *float64
		MaxTokens                         int
		Seed                              *int
		// Omitted when unset, so fingerprints of runs without them stay.
		MaxCompletionTokens int            `json:",omitempty"`
		ReasoningEffort     string         `json:",omitempty"`
		ExtraBody           map[string]any `json:",omitempty"`
	}{c.Provider, c.Model, c.StructuredOutput, c.Temperature, c.TopP, c.MaxTokens, c.Seed,
		c.MaxCompletionTokens, c.ReasoningEffort, c.ExtraBody})
	return string(b)
}

// fingerprintFields decides, for every field of Config, whether it changes
// answers (true: it is part of Fingerprint).
var fingerprintFields = map[string]bool{
	"Provider":            true,
	"Model":               true,
	"Temperature":         true,
	"TopP":                true,
	"MaxTokens":           true,
	"Seed":                true,
	"MaxCompletionTokens": true,
	"ReasoningEffort":     true,
	"ExtraBody":           true,
	"StructuredOutput":    true, // how JSON is asked for shapes the answer

	"APIKeyEnv":               false,
	"Endpoints":               false, // replicas of one model
	"Timeout":                 false,
	"MaxRetries":              false,
	"RetryBase":               false,
	"RetryMax":                false,
	"MaxErrorRate":            false,
	"MinRequestsForErrorRate": false,
	"ErrorWindow":             false,
	"BreakerFailures":         false,
	"BreakerCooldown":         false,
	"LatencyTolerance":        false,
	"PriceInputPerMTok":       false,
	"PriceOutputPerMTok":      false,
	"Budget":                  false,
	"Mode":                    false, // the same requests, sent now or in a batch file
	"Batch":                   false,
}

// Fingerprint identifies the embedder settings that change vectors, for
// the skip keys of stages that embed.
func (c EmbedderConfig) Fingerprint() string {
	return fmt.Sprintf("%s/%s/%d", c.Provider, c.Model, c.Dimensions)
}

// embedderFingerprintFields is fingerprintFields for EmbedderConfig.
var embedderFingerprintFields = map[string]bool{
	"Provider":   true,
	"Model":      true,
	"Dimensions": true,

	"APIKeyEnv":  false,
	"Endpoints":  false,
	"BatchSize":  false, // texts per request; each text's vector is its own
	"Timeout":    false,
	"MaxRetries": false,
	"RetryBase":  false,
	"RetryMax":   false,
}
