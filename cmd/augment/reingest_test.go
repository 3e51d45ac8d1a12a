package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReingestDemoExports runs the demo, then reads both of its LLaMA-Factory
// exports back with the sharegpt reader (issue 17): no record is rejected as
// undeclared_call, since tools returned by meta_tool count as declared from
// their result on. The function_call export (07-sharegpt) comes back whole,
// open-world records included, and passes roles, calls_resolved and
// args_schema; the inline export (06-mt_llama) writes calls as text in gpt
// turns, which the reader takes for text, so only its call-less records come
// back (see the README's reader table).
func TestReingestDemoExports(t *testing.T) {
	demo, err := filepath.Abs("../../testdata/demo/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e2eMustRun(t, dir, "run", "-quiet", "-set", "output.dir="+filepath.Join(dir, "demo"), demo)
	files, _ := filepath.Glob(filepath.Join(dir, "demo", "0[67]-*", "augment_*", "part-*.jsonl"))
	if len(files) < 2 {
		t.Fatalf("demo exports: %v", files)
	}
	var y strings.Builder
	y.WriteString("seed: 1\noutput: {dir: out, jsonl: true}\nsources:\n")
	for i, f := range files {
		export := filepath.Base(filepath.Dir(filepath.Dir(f)))
		fmt.Fprintf(&y, "  - {name: %s_%d, path: %q, format: sharegpt}\n", strings.ReplaceAll(export, "-", "_"), i, f)
	}
	y.WriteString("stages:\n  - verify: {checks: [roles, calls_resolved, args_schema, meta_tool_shape]}\n")
	if err := os.WriteFile(filepath.Join(dir, "reingest.yaml"), []byte(y.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eMustRun(t, dir, "run", "-quiet", "reingest.yaml")
	out := filepath.Join(dir, "out")
	ingest := e2eManifest(t, out, "00-ingest")
	if n := ingest.Totals.Rejected["undeclared_call"]; n > 0 {
		t.Errorf("%d records rejected as undeclared_call: %v", n, ingest.Totals.Rejected)
	}
	var function, inline, open int64
	for _, sh := range ingest.Shards {
		switch {
		case strings.HasPrefix(sh.Name, "07_sharegpt"):
			function += sh.Out
			if len(sh.Rejected) > 0 {
				t.Errorf("function_call export %s: rejected %v", sh.Name, sh.Rejected)
			}
		default:
			inline += sh.Out
		}
	}
	recs, _ := filepath.Glob(filepath.Join(out, "00-ingest", "part-07_sharegpt*.jsonl"))
	for _, f := range recs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		open += int64(strings.Count(string(b), `"name":"meta_tool","arguments"`))
	}
	if function != 12 || open == 0 {
		t.Errorf("function_call export: %d records back, want the demo's 12; %d meta_tool calls among them", function, open)
	}
	if v := e2eManifest(t, out, "01-verify"); len(v.Totals.Rejected) > 0 || v.Totals.Out != v.Totals.In {
		t.Errorf("verify of the re-ingested records: %+v", v.Totals)
	}
	t.Logf("re-ingested: %d records of the function_call export (%d meta_tool calls), %d of the inline export; ingest rejects %v",
		function, open, inline, ingest.Totals.Rejected)
}
