package stages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augmentdata/augment/report"
)

// chainStages is a pipeline whose stages form groups: deterministic and
// offline-teacher stages, a sink inside a group (its input passes
// through), and a Planner that starts a new group.
const chainStages = `  - meta_tool: {}
  - decision_tokens: {}
  - negatives: {target: token}
  - verify: {checks: [roles, calls_resolved, args_schema, meta_tool_shape]}
  - export: {}
  - name: reason
    reason: {}
  - dedup: {}
  - name: export_inline
    export: {style: inline, surface: llama3, allow_offline: true, dataset: inline}
`

// TestGroupMatchesStagesAlone runs the same pipeline with consecutive
// stages grouped (records handed on in memory) and with every stage alone
// (each reading its input shards back): every file has the same bytes,
// manifests up to their timings.
func TestGroupMatchesStagesAlone(t *testing.T) {
	grouped := demoPipeline(t, chainStages)
	alone := demoPipeline(t, chainStages)
	repG := runPipeline(t, grouped)
	fuseGroups = false
	repA := runPipeline(t, alone)
	fuseGroups = true
	if len(repG.Stages) != len(repA.Stages) {
		t.Fatalf("grouped run reported %d stages, alone %d", len(repG.Stages), len(repA.Stages))
	}
	for i, s := range repG.Stages {
		if a := repA.Stages[i]; s.Ran != a.Ran || s.Skipped != a.Skipped || s.Counts.In != a.Counts.In || s.Counts.Out != a.Counts.Out {
			t.Errorf("%s: grouped ran %d skipped %d in %d out %d; alone %d %d %d %d", s.Dir,
				s.Ran, s.Skipped, s.Counts.In, s.Counts.Out, a.Ran, a.Skipped, a.Counts.In, a.Counts.Out)
		}
	}
	sameOutputs(t, filepath.Join(filepath.Dir(grouped), "out"), filepath.Join(filepath.Dir(alone), "out"))
}

// sameOutputs compares two run directories: every file byte for byte,
// manifests without their timings.
func sameOutputs(t *testing.T, a, b string) {
	t.Helper()
	ta, tb := tree(t, a), tree(t, b)
	if len(ta) != len(tb) {
		t.Errorf("runs wrote %d and %d files", len(ta), len(tb))
	}
	for name, sum := range ta {
		switch {
		case name == report.HTMLFile:
		case strings.HasSuffix(name, "manifest.json"):
			if ma, mb := untimed(t, filepath.Join(a, name)), untimed(t, filepath.Join(b, name)); ma != mb {
				t.Errorf("%s differs:\n%s\n%s", name, ma, mb)
			}
		case tb[name] != sum:
			t.Errorf("%s differs", name)
		}
	}
}

// untimed returns a manifest's JSON without the fields that hold times.
func untimed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"started", "finished", "seconds"} {
				delete(v, k)
			}
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}
