package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/augmentdata/augment/internal/promtext"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunServesMetrics runs augment with -metrics-addr 127.0.0.1:0 against
// the fake teacher, finds the bound address on stderr, scrapes /metrics
// while the teacher stage runs, and checks the scrape against the manifests
// the run ends with: counters never above the final figures, in-flight
// within the endpoint's cap, and teacher traffic under way.
func TestRunServesMetrics(t *testing.T) {
	const maxInFlight = 2
	fake, dir := e2eSetup(t, fakellm.Config{Latency: fakellm.Duration(15 * time.Millisecond)},
		e2ePipeline{MaxInFlight: maxInFlight, ShardSize: 20, Teacher: "  price_input_per_mtok: 2\n  price_output_per_mtok: 8"}, e2eRows(90))
	cmd, stdout, _ := e2eCommand(t, dir, "run", "-metrics-addr", "127.0.0.1:0", "pipeline.yaml")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	addrRE := regexp.MustCompile(`metrics listening on (http://127\.0\.0\.1:[0-9]+/metrics)`)
	var url string
	var mid *promtext.Metrics
	for mid == nil {
		select {
		case err := <-exited:
			t.Fatalf("augment ended (%v) before a scrape during the teacher stage; stdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if url == "" {
			if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
				url = m[1]
			}
			continue
		}
		if fake.Counters().Answered < 10 {
			continue
		}
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("scrape: %v, status %d", err, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Content-Type %q", ct)
		}
		if mid, err = promtext.Parse(string(body)); err != nil {
			t.Fatalf("%v\n%s", err, body)
		}
		// The fake counts an answer once sent, augment once decoded: up
		// to max_in_flight answers can be on their way (a while on a
		// loaded machine). Scrape again until augment has finished 10.
		if mid.Samples[`augment_teacher_requests_total{stage="reason"}`] < 10 {
			mid = nil
		}
	}
	if err := <-exited; err != nil {
		t.Fatalf("augment: %v\nstderr:\n%s", err, stderr.String())
	}
	run, err := report.Load(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	var final *report.Stage
	for i := range run.Stages {
		if run.Stages[i].Name == "reason" {
			final = &run.Stages[i]
		}
	}
	if final == nil || final.LLM == nil {
		t.Fatal("no teacher accounting in the reason manifest")
	}
	s := mid.Samples
	lbl := `{stage="reason"}`
	req := s["augment_teacher_requests_total"+lbl]
	if req < 10 || req > float64(final.LLM.Requests) {
		t.Errorf("requests mid-run %v, want between 10 and the final %d", req, final.LLM.Requests)
	}
	if c := s["augment_teacher_cost_total"+lbl]; c <= 0 || c > final.LLM.Cost {
		t.Errorf("cost mid-run %v, want in (0, final %v]", c, final.LLM.Cost)
	}
	tokOut := s[`augment_teacher_tokens_total{stage="reason",direction="out"}`]
	if tokOut <= 0 || tokOut > float64(final.LLM.TokensOut) {
		t.Errorf("tokens out mid-run %v, final %d", tokOut, final.LLM.TokensOut)
	}
	if f := s["augment_teacher_in_flight"+lbl]; f < 0 || f > maxInFlight {
		t.Errorf("in flight %v, cap %d", f, maxInFlight)
	}
	if n := s["augment_teacher_latency_observations_total"+lbl]; n < 10 || s[`augment_teacher_latency_seconds{stage="reason",quantile="0.5"}`] < 0.015 {
		t.Errorf("latency count %v, p50 %vs; the fake answers after 15ms", n, s[`augment_teacher_latency_seconds{stage="reason",quantile="0.5"}`])
	}
	// Ingest has finished before the teacher stage starts: its counts are final.
	for _, kind := range []string{"in", "out"} {
		k := fmt.Sprintf(`augment_stage_records{stage="ingest",kind="%s"}`, kind)
		if s[k] != 90 {
			t.Errorf("%s = %v, want 90", k, s[k])
		}
	}
	if s[`augment_stage_running{stage="ingest"}`] != 0 {
		t.Errorf("ingest still running in the metrics")
	}
	if out := s[`augment_stage_records{stage="reason",kind="out"}`]; out > float64(final.Manifest.Totals.Out) {
		t.Errorf("reason out mid-run %v above the final %d", out, final.Manifest.Totals.Out)
	}
}
