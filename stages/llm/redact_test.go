package llm

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

func TestRedactorText(t *testing.T) {
	r := newRedactor("k3y-value-0123", "abc") // too short to replace as text
	tests := []struct{ in, want string }{
		{"no secrets here", "no secrets here"},
		{"bad key k3y-value-0123 given", "bad key [redacted] given"},
		{"headers: Authorization: Bearer xyz.123-456, api-key: other", "headers: Authorization: Bearer [redacted], api-key: [redacted]"},
		{`{"authorization":"Basic dXNlcjpwYXNz","model":"m"}`, `{"authorization":"Basic [redacted]","model":"m"}`},
		{"https://h/v1?api_key=abc&x=1", "https://h/v1?api_key=[redacted]&x=1"},
		{"X-Api-Key=zzz", "X-Api-Key=[redacted]"},
		{"token was bearer QWERTYUIOP", "token was bearer [redacted]"},
		{"Incorrect API key provided: sk-proj-ab****cdef", "Incorrect API key provided: [redacted]"},
		{"authorization failed: check your key", "authorization failed: check your key"},
		{"the abc key", "the abc key"},
	}
	for _, tt := range tests {
		if got := r.text(tt.in); got != tt.want {
			t.Errorf("text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := r.literal("Authorization: Bearer k3y-value-0123"); got != "Authorization: Bearer [redacted]" {
		t.Errorf("literal: %q", got)
	}
}

func FuzzRedactorText(f *testing.F) {
	f.Add("Authorization: Bearer sk-abcdefgh12345678", "sk-abcdefgh12345678")
	f.Add(`{"api-key":"secret-value"}`, "secret-value")
	f.Fuzz(func(t *testing.T, s, key string) {
		r := newRedactor(key)
		got := r.text(s)
		if len(key) >= minSecret && strings.Contains(got, key) && !strings.Contains(redacted, key) {
			t.Fatalf("key %q left in %q", key, got)
		}
		if r.text(got) != got {
			t.Fatalf("not idempotent: %q → %q → %q", s, got, r.text(got))
		}
	})
}

// A server whose 400 quotes the Authorization header, and one whose
// answer echoes the key: the key reaches neither the error (rejects, logs)
// nor the cache.
func TestKeyEchoedByServerIsRedacted(t *testing.T) {
	const key = "sk-test-SECRET-0123456789"
	getenv := func(string) string { return key }
	for _, tc := range []struct {
		name string
		cfg  fakellm.Config
	}{
		{"error", fakellm.Config{Faults: fakellm.Faults{EchoAuth: 1}}},
		{"answer", fakellm.Config{Script: []fakellm.Rule{{Contains: "echo", Answer: "your key is " + key}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startFake(t, tc.cfg)
			cfg := openaiConfig(url)
			cfg.APIKeyEnv = "TEST_KEY"
			dir := t.TempDir()
			teacher := newTeacher(t, cfg, Options{CacheDir: dir, Getenv: getenv})
			resp, err := teacher.Stage("s").Complete(context.Background(), userReq("s@1", "slot", "echo"))
			teacher.Close()
			var text string
			var ae *AnswerError
			switch {
			case errors.As(err, &ae):
				text = err.Error()
				if ae.Reason != "llm_error_bad_request" || !strings.Contains(text, "Authorization: Bearer [redacted]") {
					t.Fatalf("error: %v", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				text = resp.Content
			}
			if strings.Contains(text, key) {
				t.Fatalf("key in %q", text)
			}
			if b := readTree(t, dir); strings.Contains(b, key) {
				t.Fatal("key in the cache")
			}
		})
	}
}

// readTree returns the contents of every file under dir, concatenated.
func readTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
