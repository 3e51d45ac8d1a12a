package stages

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
	"github.com/augmentdata/augment/verify/hftok"
)

// With a tokenizer, verify's tokens tag and max_tokens use the student's
// count, and the tokenizer file's hash is part of the config.
func TestVerifyStudentTokenizer(t *testing.T) {
	dir, _ := filepath.Abs("../verify/hftok/testdata")
	r := &record.Record{ID: "a:0", Messages: []record.Message{{Role: record.RoleUser, Content: "abc ab abcabc"}, {Role: record.RoleAssistant, Content: "bc"}}}
	tok, err := hftok.Load(filepath.Join(dir, "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := verify.StudentTokens(r, tok, verify.TemplateNone)
	if want != 7 { // abc | Ġ ab | Ġ abc abc | bc
		t.Fatalf("student count %d, want 7", want)
	}
	c := &VerifyConfig{Checks: []string{"roles"}, Tokenizer: "tiny.json"}
	c.defaults()
	if probs := c.validate(); len(probs) > 0 {
		t.Fatal(probs)
	}
	st, err := c.build(&Env{Stage: "verify", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TokenizerSHA256) != 64 {
		t.Errorf("tokenizer hash %q", c.TokenizerSHA256)
	}
	out, err := st.Process(context.Background(), r)
	if err != nil || out[0].Tag("tokens") != "7" {
		t.Fatalf("tokens tag %v, %v", out, err)
	}
	c.MaxTokens = 6
	st, _ = c.build(&Env{Stage: "verify", Dir: dir})
	var rj *contract.Reject
	if _, err := st.Process(context.Background(), r); !errors.As(err, &rj) || rj.Reason != TooLong {
		t.Errorf("max_tokens 6: %v", err)
	}
	bad := &VerifyConfig{Checks: []string{"roles"}, ChatTemplate: "mistral"}
	bad.defaults()
	if probs := strings.Join(bad.validate(), "; "); !strings.Contains(probs, "chat_template") || !strings.Contains(probs, "needs tokenizer") {
		t.Errorf("problems %q", probs)
	}
}
