package stages

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/translate"
)

// TestModelUsersDeclared: a stage's fingerprint covers the teacher's and
// the embedder's settings only when the stage says it asks them
// (modelUser). Every stage type is built here twice: without a teacher and
// an embedder, where a stage that needs one must refuse to build, and with
// both, where it must declare what it asks. A stage added without a
// declaration fails the first half if it needs a model.
func TestModelUsersDeclared(t *testing.T) {
	tests := []struct {
		typ               string
		cfg               stageConfig
		teacher, embedder bool
	}{
		{"sample", &SampleConfig{Quotas: []Quota{{}}}, false, false},
		{"dedup", &DedupConfig{}, false, false},
		{"decontaminate", &DecontaminateConfig{Benchmarks: []BenchmarkFile{{Name: "b", Path: "b.txt", Format: BenchText}}}, false, false},
		{"meta_tool", &MetaToolConfig{}, false, true},
		{"meta_tool", &MetaToolConfig{HardRatio: new(0.0)}, false, false},
		{"noise", &NoiseConfig{}, true, true},
		{"reason", &ReasonConfig{}, true, false},
		{"decision_tokens", &DecisionTokensConfig{}, false, false},
		{"negatives", &NegativesConfig{}, false, false},
		{"negatives", &NegativesConfig{Target: NegativeTargetTeacher}, true, false},
		{"response_schema", &ResponseSchemaConfig{}, false, false},
		{"translate", &TranslateConfig{}, true, false},
		{"translate", &TranslateConfig{Config: translate.Config{Mode: translate.ModeConvert}}, false, false},
		{"tool_dc", &ToolDCConfig{}, true, false},
		{"verify", &VerifyConfig{Checks: []string{"roles", "args_schema"}}, false, false},
		{"verify", &VerifyConfig{Checks: []string{"judge_hallucination"}}, true, false},
		{"export", &ExportConfig{}, false, false},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("what is the weather in Paris today in degrees\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	lib := func() (*toollib.Library, error) { return toollib.New(nil), nil }
	for _, tt := range tests {
		covered[tt.typ] = true
		tt.cfg.defaults()
		if probs := tt.cfg.validate(); len(probs) > 0 {
			t.Fatalf("%s: invalid test config: %v", tt.typ, probs)
		}
		bare := &Env{Stage: tt.typ, Dir: dir, Library: lib, Log: discardLog(), prompts: map[string]string{}}
		_, err := tt.cfg.build(bare)
		if needs := tt.teacher || tt.embedder; (err != nil) != needs {
			t.Errorf("%s %+v: built without models: error %v, want an error %v", tt.typ, tt.cfg, err, needs)
		}
		env := &Env{Stage: tt.typ, Dir: dir, Library: lib, Log: discardLog(), prompts: map[string]string{},
			Teacher: &previewClient{}, Embedder: offlineEmbedder(&Pipeline{})}
		st, err := tt.cfg.build(env)
		if err != nil {
			t.Fatalf("%s: build: %v", tt.typ, err)
		}
		var teacher, embedder bool
		if mu, ok := st.(modelUser); ok {
			teacher, embedder = mu.usesModels()
		}
		if teacher != tt.teacher || embedder != tt.embedder {
			t.Errorf("%s %+v: usesModels() = %v, %v, want %v, %v", tt.typ, tt.cfg, teacher, embedder, tt.teacher, tt.embedder)
		}
	}
	for _, f := range stageFields {
		if !covered[f.name] {
			t.Errorf("stage type %s is not in the table", f.name)
		}
	}
}
