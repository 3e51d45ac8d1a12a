package main

import (
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// A served context (max_model_len) too small for the reason stage's prompt
// and max_tokens stops the run with exit 2 before any chat request, and the
// message names the stage, the prompt size and the context.
func TestContextTooSmallForPrompt(t *testing.T) {
	// 300 tokens of max_tokens fit 400 (the start check passes); the
	// reason prompt (tools, dialogue, instructions) does not fit the rest.
	fake, dir := e2eSetup(t, fakellm.Config{MaxModelLen: 400}, e2ePipeline{MaxInFlight: 2, ShardSize: 10, Teacher: "  max_tokens: 300"}, e2eRows(4))
	code, _, stderr := e2eAugment(t, dir, "run", "pipeline.yaml")
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, stderr)
	}
	for _, want := range []string{"stage reason@", "a prompt of about", "token limit of 300", "context of 400 tokens (max_model_len)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if got := fake.Counters().Chat; got != 0 {
		t.Errorf("server saw %d chat requests, want none", got)
	}
}
