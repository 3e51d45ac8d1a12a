package llm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// After CheckModels, a prompt whose size and the token limit do not fit
// the served max_model_len stops the run before it is sent, with a
// *ModelError (exit 2) naming the stage, the prompt size and the context;
// prompts that fit, and answers already cached, go through.
func TestContextFitsPrompt(t *testing.T) {
	fake, url := startFake(t, fakellm.Config{Model: "served", MaxModelLen: 1000})
	cfg := openaiConfig(url)
	cfg.Model, cfg.MaxTokens = "served", 512
	cacheDir := t.TempDir()
	teacher := newTeacher(t, cfg, Options{CacheDir: cacheDir, CountTokens: func(s string) int { return len(s) / 4 }})
	if err := teacher.CheckModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := teacher.Stage("reason")
	short := userReq("reason@2", "r1/turn1", strings.Repeat("word ", 300)) // 1500 bytes: counted, about 375 tokens
	if _, err := st.Complete(context.Background(), short); err != nil {
		t.Fatalf("a prompt that fits: %v", err)
	}
	long := userReq("reason@2", "r2/turn1", strings.Repeat("word ", 500)) // about 625 tokens + 512 > 1000
	_, err := st.Complete(context.Background(), long)
	var me *ModelError
	if !errors.As(err, &me) || !IsFatal(err) {
		t.Fatalf("got %v, want a fatal *ModelError", err)
	}
	for _, want := range []string{"stage reason@2", "about 642 tokens", "2506 bytes", "slot r2/turn1", "token limit of 512", "context of 1000 tokens"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	if got := fake.Counters().Chat; got != 1 {
		t.Errorf("server saw %d chat requests, want only the one that fits", got)
	}

	// Without CheckModels (or a context listed) nothing is checked here.
	fresh := newTeacher(t, cfg, Options{})
	if _, err := fresh.Stage("reason").Complete(context.Background(), long); err != nil {
		t.Errorf("unchecked teacher: %v", err)
	}
}
