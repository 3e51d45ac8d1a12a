package stages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/promtext"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

func TestMetricsEqualManifests(t *testing.T) {
	// Rows of Town0003 and Town0004 get a reasoning that names no function,
	// which the reason stage rejects: the metrics must show those rejects.
	script := append([]fakellm.Rule{{Regexp: `Town000[34]`, Answer: "I will just answer without saying which function."}}, llmrunScript...)
	fake, url := llmrunFake(t, fakellm.Config{Script: script, Latency: fakellm.Duration(time.Millisecond)})
	path := llmrunPipeline(t, llmrunRows(60), 20, []llm.Endpoint{{BaseURL: url + "/v1", MaxInFlight: 4}},
		"  price_input_per_mtok: 2\n  price_output_per_mtok: 8")
	// One attempt, so the rows with a bad answer are rejected.
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	y = bytes.Replace(y, []byte("reason: {style: meta_tool}"), []byte("reason: {style: meta_tool, attempts: 1}"), 1)
	if err := os.WriteFile(path, y, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r, err := NewRunner(p, Options{Version: "test", Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	var text bytes.Buffer
	if err := r.WriteMetrics(&text); err != nil {
		t.Fatal(err)
	}
	parsed, err := promtext.Parse(text.String())
	if err != nil {
		t.Fatal(err)
	}
	got := parsed.Samples
	for name, f := range parsed.Families {
		if f.Type == "counter" && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s does not end in _total", name)
		}
	}

	run, err := report.Load(filepath.Join(filepath.Dir(path), "out"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	teacherStages := 0
	for _, st := range run.Stages {
		c := st.Manifest.Totals
		for kind, v := range map[string]int64{"in": c.In, "out": c.Out, "added": c.Added} {
			want[fmt.Sprintf(`augment_stage_records{stage="%s",kind="%s"}`, st.Name, kind)] = float64(v)
		}
		want[fmt.Sprintf(`augment_stage_running{stage="%s"}`, st.Name)] = 0
		for reason, v := range c.Rejected {
			want[fmt.Sprintf(`augment_stage_rejected_records{stage="%s",reason="%s"}`, st.Name, reason)] = float64(v)
		}
		for reason, v := range c.Filtered {
			want[fmt.Sprintf(`augment_stage_filtered_records{stage="%s",reason="%s"}`, st.Name, reason)] = float64(v)
		}
		if st.LLM == nil {
			continue
		}
		teacherStages++
		s := *st.LLM
		lbl := fmt.Sprintf(`{stage="%s"}`, st.Name)
		want["augment_teacher_requests_total"+lbl] = float64(s.Requests)
		want["augment_teacher_cache_hits_total"+lbl] = float64(s.CacheHits)
		want["augment_teacher_sent_total"+lbl] = float64(s.Sent)
		want["augment_teacher_retries_total"+lbl] = float64(s.Retries)
		want["augment_teacher_failed_total"+lbl] = float64(s.Failed)
		want["augment_teacher_cost_total"+lbl] = s.Cost
		want["augment_teacher_in_flight"+lbl] = 0
		want["augment_teacher_latency_observations_total"+lbl] = float64(s.Latency.Count)
		want[fmt.Sprintf(`augment_teacher_tokens_total{stage="%s",direction="in"}`, st.Name)] = float64(s.TokensIn)
		want[fmt.Sprintf(`augment_teacher_tokens_total{stage="%s",direction="out"}`, st.Name)] = float64(s.TokensOut)
		for q, v := range map[string]float64{"0.5": s.Latency.P50, "0.9": s.Latency.P90, "0.99": s.Latency.P99, "1": s.Latency.Max} {
			want[fmt.Sprintf(`augment_teacher_latency_seconds{stage="%s",quantile="%s"}`, st.Name, q)] = v / 1000
		}
		for class, v := range s.Errors {
			want[fmt.Sprintf(`augment_teacher_errors_total{stage="%s",class="%s"}`, st.Name, class)] = float64(v)
		}
	}
	if teacherStages != 1 {
		t.Fatalf("%d stages with teacher accounting in the manifests, want 1 (reason)", teacherStages)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing %s (want %g)", k, w)
		} else if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s = %g, manifests say %g", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("sample %s not in the manifests", k)
		}
	}
	// The figures are the run's, not zeros: the fake answered every request
	// (the first run has no cache) and reported tokens that cost money.
	reason := `{stage="reason"}`
	if n := int64(got["augment_teacher_requests_total"+reason]); n != fake.Counters().Chat || n == 0 {
		t.Errorf("requests %d, the fake counted %d", n, fake.Counters().Chat)
	}
	if n := parsed.Sum(`augment_stage_rejected_records{stage="reason",`); n == 0 {
		t.Errorf("no rejects of the reason stage in the metrics:\n%s", text.String())
	}
	if got["augment_teacher_cost_total"+reason] <= 0 || got[`augment_stage_records{stage="ingest",kind="out"}`] != 60 {
		t.Errorf("cost %g, ingest out %g; want > 0 and 60", got["augment_teacher_cost_total"+reason], got[`augment_stage_records{stage="ingest",kind="out"}`])
	}
}

func TestMetricsLabelEscaping(t *testing.T) {
	var b bytes.Buffer
	m := metricWriter{w: bufio.NewWriter(&b)}
	m.family("x_total", "counter", "a help\\text\nwith a newline")
	m.sample("x_total", []string{"reason", "a\"b\\c\nd"}, 2.5)
	m.w.Flush()
	const want = "# HELP x_total a help\\\\text\\nwith a newline\n# TYPE x_total counter\nx_total{reason=\"a\\\"b\\\\c\\nd\"} 2.5\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	got, err := promtext.Parse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Samples[`x_total{reason="a\"b\\c\nd"}`] != 2.5 {
		t.Errorf("parsed %v", got.Samples)
	}
}
