package stages

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
)

// MetricsHandler serves the run's metrics (WriteMetrics) to a Prometheus
// scraper; augment run -metrics-addr mounts it at /metrics.
func (r *Runner) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := r.WriteMetrics(w); err != nil {
			r.o.Log.Warn("metrics", "err", err)
		}
	})
}

// WriteMetrics writes the run's state in the Prometheus text exposition
// format (version 0.0.4). Record counts per stage are the stage manifests'
// totals as last saved (every few seconds while a stage runs, so they lag
// the work by at most that); they are gauges because a stage whose settings
// changed starts its counts over. Teacher traffic is this process's, live,
// per stage, the same accounting the manifests' "llm" sections record.
func (r *Runner) WriteMetrics(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m := metricWriter{w: bw}
	if run, err := report.Load(r.dir); err == nil {
		var counts []stageCounts
		for _, st := range run.Stages {
			if st.Manifest != nil {
				counts = append(counts, stageCounts{st.Name, st.Status, st.Manifest.Totals})
			}
		}
		writeStageMetrics(&m, counts)
	} else {
		// A run dir without config.yaml yet has nothing to count.
		m.family("augment_metrics_errors", "gauge", "Problems reading the run directory for these metrics (1 when its manifests could not be read).")
		m.sample("augment_metrics_errors", nil, 1)
	}
	var teacher []llm.Stats
	if r.teacher != nil {
		for _, s := range r.teacher.Stats() {
			if s.Requests > 0 || s.CacheHits > 0 { // as in the manifests (Env.stats)
				teacher = append(teacher, s)
			}
		}
	}
	writeTeacherMetrics(&m, teacher)
	return bw.Flush()
}

// stageCounts is one stage's line of the record metrics.
type stageCounts struct {
	stage, status string
	c             manifests.Counts
}

func writeStageMetrics(m *metricWriter, stages []stageCounts) {
	m.family("augment_stage_running", "gauge", "1 while the stage's manifest has no finish time, 0 once it finished.")
	for _, s := range stages {
		m.sample("augment_stage_running", []string{"stage", s.stage}, b2f(s.status == report.StatusRunning))
	}
	m.family("augment_stage_records", "gauge", "Records of the stage by kind: in (read), out (written), added (made by the stage).")
	for _, s := range stages {
		m.sample("augment_stage_records", []string{"stage", s.stage, "kind", "in"}, float64(s.c.In))
		m.sample("augment_stage_records", []string{"stage", s.stage, "kind", "out"}, float64(s.c.Out))
		m.sample("augment_stage_records", []string{"stage", s.stage, "kind", "added"}, float64(s.c.Added))
	}
	m.family("augment_stage_rejected_records", "gauge", "Records the stage rejected, by reason (kept in its rejects files).")
	for _, s := range stages {
		for _, reason := range slices.Sorted(maps.Keys(s.c.Rejected)) {
			m.sample("augment_stage_rejected_records", []string{"stage", s.stage, "reason", reason}, float64(s.c.Rejected[reason]))
		}
	}
	m.family("augment_stage_filtered_records", "gauge", "Records the stage dropped on purpose (sample quotas), by reason.")
	for _, s := range stages {
		for _, reason := range slices.Sorted(maps.Keys(s.c.Filtered)) {
			m.sample("augment_stage_filtered_records", []string{"stage", s.stage, "reason", reason}, float64(s.c.Filtered[reason]))
		}
	}
}

func writeTeacherMetrics(m *metricWriter, stats []llm.Stats) {
	counter := func(name, help string, v func(llm.Stats) float64) {
		m.family(name, "counter", help)
		for _, s := range stats {
			m.sample(name, []string{"stage", s.Stage}, v(s))
		}
	}
	counter("augment_teacher_requests_total", "Teacher requests finished (answered or failed), cache hits included.",
		func(s llm.Stats) float64 { return float64(s.Requests) })
	counter("augment_teacher_cache_hits_total", "Teacher requests answered without sending (cache, or an identical request in flight).",
		func(s llm.Stats) float64 { return float64(s.CacheHits) })
	counter("augment_teacher_sent_total", "HTTP attempts sent to the teacher, retries included.",
		func(s llm.Stats) float64 { return float64(s.Sent) })
	counter("augment_teacher_retries_total", "HTTP attempts that repeated a failed one.",
		func(s llm.Stats) float64 { return float64(s.Retries) })
	counter("augment_teacher_failed_total", "Teacher requests that ended in an error.",
		func(s llm.Stats) float64 { return float64(s.Failed) })
	counter("augment_teacher_cost_total", "Cost of this run's teacher tokens at the configured prices (0 without prices).",
		func(s llm.Stats) float64 { return s.Cost })
	m.family("augment_teacher_tokens_total", "counter", "Tokens of this run's teacher answers as the server reported them, by direction.")
	for _, s := range stats {
		m.sample("augment_teacher_tokens_total", []string{"stage", s.Stage, "direction", "in"}, float64(s.TokensIn))
		m.sample("augment_teacher_tokens_total", []string{"stage", s.Stage, "direction", "out"}, float64(s.TokensOut))
	}
	m.family("augment_teacher_errors_total", "counter", "Failed teacher attempts by class (timeout, rate_limited, server, connection, ...).")
	for _, s := range stats {
		for _, class := range slices.Sorted(maps.Keys(s.Errors)) {
			m.sample("augment_teacher_errors_total", []string{"stage", s.Stage, "class", class}, float64(s.Errors[class]))
		}
	}
	m.family("augment_teacher_in_flight", "gauge", "Teacher requests of the stage being sent now.")
	for _, s := range stats {
		m.sample("augment_teacher_in_flight", []string{"stage", s.Stage}, float64(s.InFlight))
	}
	// The latency histogram keeps no sum, so the quantiles are gauges (a
	// summary must have a _sum) and the count a counter of its own.
	m.family("augment_teacher_latency_seconds", "gauge", "Quantiles of the latency of answered teacher attempts (about 3% accurate).")
	for _, s := range stats {
		l := s.Latency
		for _, q := range []struct {
			q string
			v float64
		}{{"0.5", l.P50}, {"0.9", l.P90}, {"0.99", l.P99}, {"1", l.Max}} {
			m.sample("augment_teacher_latency_seconds", []string{"stage", s.Stage, "quantile", q.q}, q.v/1000)
		}
	}
	counter("augment_teacher_latency_observations_total", "Answered teacher attempts the latency quantiles are taken over.",
		func(s llm.Stats) float64 { return float64(s.Latency.Count) })
}

// metricWriter writes the text exposition format; the first write error
// is kept by the bufio.Writer and returned by its Flush.
type metricWriter struct{ w *bufio.Writer }

func (m *metricWriter) family(name, typ, help string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes one line; labels are name, value pairs.
func (m *metricWriter) sample(name string, labels []string, v float64) {
	m.w.WriteString(name)
	if len(labels) > 0 {
		m.w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				m.w.WriteByte(',')
			}
			fmt.Fprintf(m.w, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
		}
		m.w.WriteByte('}')
	}
	m.w.WriteByte(' ')
	m.w.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	m.w.WriteByte('\n')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
