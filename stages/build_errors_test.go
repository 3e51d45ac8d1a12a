package stages

import (
	"strings"
	"testing"
)

// TestBuildErrorsNameNoType: the runner puts `stage NAME: ` before a
// stage's build error, so the error itself does not start with the stage
// type again ("stage verify: verify: …").
func TestBuildErrorsNameNoType(t *testing.T) {
	tests := []struct {
		typ  string
		cfg  stageConfig
		want string
	}{
		{"negatives", &NegativesConfig{Target: "teacher"}, "target teacher needs a teacher"},
		{"verify", &VerifyConfig{Checks: []string{"judge_hallucination"}}, "the judges in checks need a teacher"},
		{"export", &ExportConfig{Template: "nope"}, `unknown template "nope"`},
	}
	for _, tt := range tests {
		tt.cfg.defaults()
		_, err := tt.cfg.build(&Env{Stage: tt.typ, Dir: t.TempDir()})
		if err == nil || strings.HasPrefix(err.Error(), tt.typ) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: build error %v, want %q without the type first", tt.typ, err, tt.want)
		}
	}
}
