package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/verify"
)

// HTMLFile is the report's file name in the run directory.
const HTMLFile = "report.html"

// maxSample caps the text of one reject sample shown in the report.
const maxSample = 64 << 10

type htmlStage struct {
	*Stage
	Shards                             int
	In, Out, Rejected, Filtered, Added int64
	Seconds                            string
	Started                            string
}

type htmlReject struct {
	Stage, Reason string
	Count         int64
	ID, Detail    string
	Sample        string // pretty JSON
	Clipped       bool
}

type htmlChart struct {
	Title, Note string
	SVG         template.HTML
}

type htmlLLM struct {
	Dir                                               string
	Requests, CacheHits, Batch, Sent, Retries, Failed int64
	TokensIn, TokensOut                               int64
	P50, P90, P99, Max                                string
	Cost                                              string
	Errors                                            string
	Unrecorded                                        string // UnrecordedNote, for a merge that lacks a killed worker's traffic
}

type htmlPage struct {
	Title        string
	Run          *Run
	Status       string
	Versions     string
	Models       string
	Stages       []htmlStage
	Funnel       template.HTML
	RejectChart  template.HTML
	Rejects      []htmlReject
	Filtered     []htmlReject // by stage and reason; no sample (a filtered record is written nowhere)
	DistStage    string
	DistPartial  bool // DistStage is partial: the records of the shards it did
	DistRecords  int64
	Tokens       Percentiles
	Charts       []htmlChart
	Checks       []htmlChart
	LLM          []htmlLLM
	TeacherChart []htmlChart
	TotalCost    string
	Terms        string // TrafficTerms
}

// Name is how the report names the run: an output on object storage by
// its URL as pipeline.yaml gave it (config.yaml's output.dir: s3://, gs://,
// azblob://bucket/prefix), not by the name of its local copy (the run's
// work dir, or a temporary one of `augment report`), so every report of
// the same run names it alike; else the run directory's base name.
func (r *Run) Name() string {
	if d := strings.TrimRight(r.Config.Output.Dir, "/"); strings.Contains(d, "://") {
		return d
	}
	return filepath.Base(r.Dir)
}

// HTML renders the report page.
func (r *Run) HTML() ([]byte, error) {
	p := &htmlPage{Title: "augment report: " + r.Name(), Run: r}
	versions := map[string]bool{}
	running := ""
	var statuses, partial []string
	var funnel []bar
	for i := range r.Stages {
		s := &r.Stages[i]
		hs := htmlStage{Stage: s}
		if m := s.Manifest; m != nil {
			c := m.Totals
			hs.Shards, hs.In, hs.Out, hs.Added = len(m.Shards), c.In, c.Out, c.Added
			hs.Rejected, hs.Filtered = manifests.Sum(c.Rejected), manifests.Sum(c.Filtered)
			started, secs := m.Work() // a merge's: the workers' too
			hs.Seconds = fmt.Sprintf("%.1f", secs)
			hs.Started = started.UTC().Format(time.DateTime)
			versions[m.Tool] = true
			funnel = append(funnel, bar{Label: s.Dir, Value: float64(c.In + c.Added),
				Parts: []float64{float64(c.Out), float64(hs.Rejected), float64(hs.Filtered)},
				Title: fmt.Sprintf("%s: in %d + added %d → out %d, rejected %d, filtered %d", s.Dir, c.In, c.Added, c.Out, hs.Rejected, hs.Filtered)})
		}
		statuses = append(statuses, s.Status)
		switch s.Status {
		case StatusPartial:
			partial = append(partial, s.Dir)
		case StatusRunning:
			if running == "" {
				running = s.Dir
			}
		}
		p.Stages = append(p.Stages, hs)
	}
	p.Status = doneSummary(statuses)
	if len(partial) > 0 {
		p.Status += "; " + partialNote(partial)
	}
	var unmerged []string
	for _, s := range r.Stages {
		if s.Unmerged > 0 {
			unmerged = append(unmerged, s.Dir)
		}
	}
	if len(unmerged) > 0 {
		p.Status += "; " + unmergedNote(unmerged)
	}
	for i := range r.Stages {
		s := &r.Stages[i]
		if len(s.Retry) > 0 {
			ids, err := r.retryIDs(s, retryShown)
			if err != nil {
				return nil, err
			}
			p.Status += "; " + RetryNote(s.Dir, s.Retry, s.RetryRejected, ids)
		}
		if s.Status == StatusWaiting {
			p.Status += "; " + WaitingNote(s.Dir, s.BatchOpen(), s.LLM)
		}
	}
	switch {
	case running != "" && r.LiveKnown:
		p.Status += "; " + running + " is running now (a process holds the run's lock)"
	case running != "":
		p.Status += "; " + running + " has no finish time (running now, or stopped part way: rerun to resume)"
	}
	p.Versions = strings.Join(slices.Sorted(keysOf(versions)), ", ")
	p.Models = strings.Join(r.Models(), ", ")
	p.Funnel = hbars("funnel", funnel, "")

	// Rejects by stage and reason, with the first record of each.
	var rbars []bar
	for i := range r.Stages {
		s := &r.Stages[i]
		rej := s.Totals().Rejected
		if len(rej) == 0 {
			continue
		}
		samples, err := RejectSamples(r.Dir, s)
		if err != nil {
			return nil, err
		}
		for _, reason := range Counts(rej).Keys() {
			rbars = append(rbars, bar{Label: s.Name + ": " + reason, Value: float64(rej[reason])})
			hr := htmlReject{Stage: s.Dir, Reason: reason, Count: rej[reason]}
			if rl, ok := samples[reason]; ok {
				hr.ID, hr.Detail = rl.ID, rl.Detail
				hr.Sample, hr.Clipped = prettySample(rl)
			}
			p.Rejects = append(p.Rejects, hr)
		}
	}
	p.RejectChart = hbars("rejects", rbars, "")
	for i := range r.Stages {
		s := &r.Stages[i]
		filtered := s.Totals().Filtered
		for _, reason := range Counts(filtered).Keys() {
			p.Filtered = append(p.Filtered, htmlReject{Stage: s.Dir, Reason: reason, Count: filtered[reason]})
		}
	}

	// Distributions of the last stage's records.
	if fs := r.Final(); fs != nil {
		d, err := r.FinalDist(fs)
		if err != nil {
			return nil, err
		}
		p.DistStage, p.DistRecords, p.Tokens = fs.Dir, d.Records, d.Tokens
		p.DistPartial = fs.Status == StatusPartial
		add := func(title, note string, svg template.HTML) {
			p.Charts = append(p.Charts, htmlChart{Title: title, Note: note, SVG: svg})
		}
		add("Category", "the category tag, else the dialogue's shape", hbars("category", countBars(d.Category), ""))
		add("Source", "", hbars("source", countBars(d.Source), ""))
		add("Language", "the lang tag, else en for Latin-script user turns", hbars("lang", countBars(d.Lang), ""))
		if len(d.World) > 0 {
			add("World (meta_tool)", "", hbars("world", countBars(d.World), ""))
		}
		if len(d.Difficulty) > 0 {
			add("Difficulty (meta_tool)", "", hbars("difficulty", countBars(d.Difficulty), ""))
		}
		add("Tools per sample", fmt.Sprintf("mean %.2f", d.Tools.Mean()), vbars("tools", intBars(d.Tools)))
		add("Calls per calling turn", fmt.Sprintf("mean %.2f", d.CallsPerTurn.Mean()), vbars("calls_per_turn", intBars(d.CallsPerTurn)))
		add("Turns per sample", fmt.Sprintf("mean %.2f; system messages not counted", d.Turns.Mean()), vbars("turns", intBars(d.Turns)))
		t := d.Tokens
		tnote := fmt.Sprintf("o200k; p50 %d, p90 %d, p99 %d, max %d", t.P50, t.P90, t.P99, t.Max)
		if t.Count < d.Records {
			tnote += fmt.Sprintf("; counted on a seeded sample of %d records (no tokens tag)", t.Count)
		}
		add("Token length", tnote, vbars("tokens", tokenBars(d.TokenHist())))
		if len(d.NoiseSimilarity) > 0 {
			var nb []bar
			for _, k := range slices.Sorted(keysOf(d.NoiseSimilarity)) {
				nb = append(nb, bar{Label: k, Value: float64(d.NoiseSimilarity[k])})
			}
			add("Noise similarity", "lowest Algorithm-1 similarity of a record's reworded meta_tool calls, bins of 0.01", vbars("noise_similarity", nb))
		}
		if len(d.VerifyFail) > 0 {
			add("Kept records tagged verify.<check>=fail", "verify with action: tag", hbars("verify_tagged", countBars(d.VerifyFail), ""))
		}
	}

	// Verify checks and LLM judges: records failing each check.
	for i := range r.Stages {
		s := &r.Stages[i]
		if s.Type != "verify" || s.Manifest == nil {
			continue
		}
		var cfg struct {
			Checks []string `json:"checks"`
		}
		_ = json.Unmarshal(s.Manifest.Config, &cfg)
		c := s.Manifest.Totals
		var cb, kb []bar
		for _, name := range cfg.Checks {
			fail := c.Counters["check."+name]
			cb = append(cb, bar{Label: name, Value: float64(c.In), Parts: []float64{float64(c.In - fail), float64(fail)},
				Title: fmt.Sprintf("%s: %d of %d records pass, %d fail", name, c.In-fail, c.In, fail)})
		}
		for _, k := range manifests.Reasons(c.Counters) {
			if kind, ok := strings.CutPrefix(k, "kind."); ok {
				kb = append(kb, bar{Label: kind, Value: float64(c.Counters[k])})
			}
		}
		p.Checks = append(p.Checks, htmlChart{Title: s.Dir + ": records passing (dark) and failing (light) each check and judge",
			SVG: hbars("checks_"+s.Name, cb, "")})
		if len(kb) > 0 {
			p.Checks = append(p.Checks, htmlChart{Title: s.Dir + ": problems by kind", SVG: hbars("kinds_"+s.Name, kb, "")})
		}
		for _, name := range cfg.Checks {
			if sb := judgeBars(name, c.Counters); sb != nil {
				p.Checks = append(p.Checks, htmlChart{Title: s.Dir + ": " + name + " answers" + judgeMeaning(name),
					SVG: vbars("judge_scores_"+s.Name+"_"+name, sb)})
			}
		}
	}

	// Teacher traffic.
	var reqBars, latBars []bar
	var costPts []point
	var cum float64
	var t0 time.Time
	for i := range r.Stages {
		s := &r.Stages[i]
		if s.LLM == nil {
			continue
		}
		l := s.LLM
		h := htmlLLM{Dir: s.Dir, Requests: l.Requests, CacheHits: l.CacheHits, Batch: l.Pending, Sent: l.Sent, Retries: l.Retries, Failed: l.Failed,
			TokensIn: l.TokensIn, TokensOut: l.TokensOut, Cost: fmt.Sprintf("%.4f", l.Cost),
			P50: num(l.Latency.P50), P90: num(l.Latency.P90), P99: num(l.Latency.P99), Max: num(l.Latency.Max)}
		h.Errors = manifests.FormatCounts(l.Errors)
		if s.Manifest != nil && len(s.Manifest.LLMUnrecorded) > 0 {
			h.Unrecorded = UnrecordedNote(s.Manifest.LLMUnrecorded)
		}
		p.LLM = append(p.LLM, h)
		online := max(l.Requests-l.CacheHits-l.Pending, 0)
		reqBars = append(reqBars, bar{Label: s.Dir, Value: float64(l.Requests),
			Parts: []float64{float64(online), float64(l.CacheHits), float64(l.Pending)},
			Title: fmt.Sprintf("%s: %d requests: %d asked online (%d HTTP attempts, retries included), %d answered from the cache, %d in batch files",
				s.Dir, l.Requests, online, l.Sent, l.CacheHits, l.Pending)})
		if l.Latency.Count > 0 {
			latBars = append(latBars, bar{Label: s.Dir, Value: l.Latency.P99,
				Parts: []float64{l.Latency.P50, l.Latency.P90 - l.Latency.P50, l.Latency.P99 - l.Latency.P90},
				Title: fmt.Sprintf("%s: p50 %s ms, p90 %s ms, p99 %s ms", s.Dir, num(l.Latency.P50), num(l.Latency.P90), num(l.Latency.P99))})
		}
		m := s.Manifest
		if t0.IsZero() || m.Started.Before(t0) {
			t0 = m.Started
		}
		end := m.Finished
		if end.IsZero() {
			end = m.Started.Add(time.Duration(m.Seconds * float64(time.Second)))
		}
		if len(costPts) == 0 {
			costPts = append(costPts, point{X: float64(m.Started.UnixMilli()), Y: 0, Label: s.Dir + " started: 0"})
		}
		cum += l.Cost
		at := "done"
		if s.Status != StatusDone {
			at = s.Status + ", as last recorded"
		}
		costPts = append(costPts, point{X: float64(end.UnixMilli()), Y: cum, Label: fmt.Sprintf("%s %s: %.4f so far", s.Dir, at, cum)})
	}
	for i := range costPts {
		costPts[i].X = (costPts[i].X - float64(t0.UnixMilli())) / 1000
	}
	if len(p.LLM) > 0 {
		total, _ := r.Teacher()
		p.TotalCost = fmt.Sprintf("%.4f", total.Cost)
		p.Terms = TrafficTerms
		p.TeacherChart = append(p.TeacherChart,
			htmlChart{Title: "Requests: asked online (dark), answered from the cache (light), in batch files (grey)",
				Note: "a bar is the stage's requests; sent (the table) counts HTTP attempts, retries included", SVG: hbars("requests", reqBars, "")},
			htmlChart{Title: "Latency p50 / p90 / p99 (ms)", Note: "answered HTTP attempts; none for the offline stand-in", SVG: hbars("latency", latBars, " ms")})
		costNote := "cumulative cost at the end of each teacher stage"
		if total.Cost == 0 {
			costNote += "; zero: no prices configured, or only cache hits and offline answers"
		}
		p.TeacherChart = append(p.TeacherChart, htmlChart{Title: "Cost over time", Note: costNote, SVG: line("cost", costPts, " s", "")})
	}

	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// prettySample renders a reject for people: the reject line indented, its
// raw row (for ingest rejects) parsed as JSON when it is JSON. The text
// keeps <, > and & as they are (the page's template escapes them), not as
// JSON's \u003c escapes.
func prettySample(rl RejectLine) (string, bool) {
	raw := rl.Raw
	rl.Raw = ""
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rl)
	s := strings.TrimSuffix(buf.String(), "\n")
	if raw != "" {
		buf.Reset()
		if json.Indent(&buf, []byte(raw), "", "  ") == nil {
			raw = buf.String()
		}
		s += "\n\nraw row as read:\n" + raw
	}
	if len(s) > maxSample {
		return s[:maxSample], true
	}
	return s, false
}

// WriteHTML writes report.html into the run directory, atomically.
func (r *Run) WriteHTML() error {
	b, err := r.HTML()
	if err != nil {
		return err
	}
	return r.writeFile(HTMLFile, b)
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#1d2430;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}h3{font-size:14px;margin:16px 0 4px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;border-bottom:1px solid #edf0f4;text-align:right;white-space:nowrap}
td:first-child,th:first-child,td.l,th.l{text-align:left}th{font-weight:600;background:#f6f8fa}
.meta{color:#566070}.note{color:#566070;font-size:12px;margin:0 0 4px}code{font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:8px 24px}.charts>div{flex:0 0 auto}
svg.chart{display:block;max-width:100%;height:auto}
svg .bar{fill:#3b6fd4}svg .bar2{fill:#e0703a}svg .bar3{fill:#b9c3d3}svg .label{font-size:11px;fill:#3a4452}svg .value{font-size:11px;fill:#566070}
svg .axis{stroke:#9aa5b5;stroke-width:1}svg .line{fill:none;stroke:#3b6fd4;stroke-width:2}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;vertical-align:middle}
details{margin:2px 0}summary{cursor:pointer;color:#3b6fd4}details.reject p.note{white-space:normal;overflow-wrap:anywhere}pre.record{background:#f6f8fa;border:1px solid #dde2ea;padding:8px;max-height:420px;overflow:auto;font-size:12px;white-space:pre-wrap;word-break:break-word;text-align:left}
.status-done{color:#237a3b}.status-running,.status-partial,.status-waiting{color:#b86e00}.status-pending,.status-skipped{color:#8a93a3}
.empty{color:#8a93a3;font-style:italic}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta" id="status">{{.Status}}.
{{with .Versions}}augment {{.}}.{{end}}
{{if .Run.ConfigHash}}Config sha256 <code>{{.Run.ConfigHash}}</code>, seed {{.Run.Config.Seed}}.
Teacher: {{.Run.Config.Teacher.Provider}}{{with .Models}} ({{.}}){{end}}.{{else}}No config.yaml in the run directory: its seed, sources and teacher are not known{{with .Models}}; teacher models that answered: {{.}}{{end}}.{{end}}</p>

<h2 id="funnel">Records through the stages</h2>
<p class="legend note"><span style="background:#3b6fd4"></span>out<span style="background:#e0703a"></span>rejected<span style="background:#b9c3d3"></span>filtered — the bar is in + added</p>
{{.Funnel}}
<table id="stages">
<tr><th>dir</th><th class="l">type</th><th class="l">status</th><th>shards</th><th>in</th><th>out</th><th>rejected</th><th>filtered</th><th>added</th><th>seconds</th><th class="l">started (UTC)</th></tr>
{{range .Stages}}<tr data-stage="{{.Dir}}"><td>{{.Dir}}</td><td class="l">{{.Type}}</td><td class="l status-{{.Status}}">{{.Status}}{{if .NotKept}}, records not kept (keep: false){{end}}</td>
{{if .Manifest}}<td data-field="shards">{{.Shards}}</td><td data-field="in">{{.In}}</td><td data-field="out">{{.Out}}</td><td data-field="rejected">{{.Rejected}}</td><td data-field="filtered">{{.Filtered}}</td><td data-field="added">{{.Added}}</td><td>{{.Seconds}}</td><td class="l">{{.Started}}</td>
{{else}}<td colspan="8"></td>{{end}}</tr>
{{end}}</table>

<h2 id="rejects">Rejected records</h2>
{{.RejectChart}}
{{if .Rejects}}<p class="note">Click a sample to see the record as the stage got it (ingest rejects show the raw row).</p>
<table id="reject-table">
<tr><th>stage</th><th class="l">reason</th><th>records</th><th class="l">sample</th></tr>
{{range .Rejects}}<tr data-stage="{{.Stage}}" data-reason="{{.Reason}}"><td>{{.Stage}}</td><td class="l"><code>{{.Reason}}</code></td><td data-field="count">{{.Count}}</td>
<td class="l">{{if .Sample}}<details class="reject"><summary>{{.ID}}</summary><p class="note">{{.Detail}}</p><pre class="record">{{.Sample}}{{if .Clipped}}
… (cut; the whole reject is in the stage's rejects-*.jsonl){{end}}</pre></details>{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Filtered}}<h3 id="filtered">Filtered records</h3>
<p class="note">Dropped on purpose (sample quotas, dedup…), by stage and reason; they are written nowhere.</p>
<table id="filtered-table">
<tr><th>stage</th><th class="l">reason</th><th>records</th></tr>
{{range .Filtered}}<tr data-stage="{{.Stage}}" data-reason="{{.Reason}}"><td>{{.Stage}}</td><td class="l"><code>{{.Reason}}</code></td><td data-field="count">{{.Count}}</td></tr>
{{end}}</table>{{end}}

<h2 id="distributions">Distributions</h2>
{{if .DistStage}}<p class="meta" id="dist-records">Over the {{.DistRecords}} records of <code>{{.DistStage}}</code>, the input of the exports{{if .DistPartial}}: those of the shards it did (it is partial){{end}}.</p>
<div class="charts">{{range .Charts}}<div><h3>{{.Title}}</h3>{{with .Note}}<p class="note">{{.}}</p>{{end}}{{.SVG}}</div>
{{end}}</div>{{else}}<p class="empty">No stage has written records yet.</p>{{end}}

{{if .Checks}}<h2 id="checks">Checks and judges</h2>
<div class="charts">{{range .Checks}}<div><h3>{{.Title}}</h3>{{.SVG}}</div>
{{end}}</div>{{end}}

<h2 id="teacher">Teacher</h2>
{{if .LLM}}<table id="llm">
<tr><th>stage</th><th>requests</th><th>cache hits</th><th>in batch</th><th>sent</th><th>retries</th><th>failed</th><th>tokens in</th><th>tokens out</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>cost</th><th class="l">errors</th></tr>
{{range .LLM}}<tr data-stage="{{.Dir}}"><td>{{.Dir}}</td><td data-field="requests">{{.Requests}}</td><td data-field="cache_hits">{{.CacheHits}}</td><td data-field="batch">{{.Batch}}</td><td data-field="sent">{{.Sent}}</td><td>{{.Retries}}</td><td data-field="failed">{{.Failed}}</td><td>{{.TokensIn}}</td><td>{{.TokensOut}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td data-field="cost">{{.Cost}}</td><td class="l">{{.Errors}}</td></tr>
{{end}}</table>
{{range .LLM}}{{if .Unrecorded}}<p class="note" data-stage="{{.Dir}}">{{.Dir}}: {{.Unrecorded}}.</p>
{{end}}{{end}}<p class="note">{{.Terms}}.</p>
<p class="meta">Total cost {{.TotalCost}}. Each stage's traffic is that of the run that last wrote its manifest.</p>
<div class="charts">{{range .TeacherChart}}<div><h3>{{.Title}}</h3>{{with .Note}}<p class="note">{{.}}</p>{{end}}{{.SVG}}</div>
{{end}}</div>{{else}}<p class="empty">No stage has asked the teacher.</p>{{end}}
</body>
</html>
`))

// judgeBars is the histogram of an LLM judge's answers from verify's
// "judge.<judge>=<value>" counters: a bin per answer the judge can give,
// and one for unreadable answers when there were any; nil for a rule check
// or a manifest without the counters (made before they were kept).
func judgeBars(name string, counters map[string]int64) []bar {
	ch, ok := verify.Lookup(name)
	if !ok || len(ch.Answers) == 0 {
		return nil
	}
	var bars []bar
	var total int64
	for _, a := range append(slices.Clone(ch.Answers), verify.JudgedUnparseable) {
		n, seen := counters["judge."+name+"="+a]
		total += n
		if a == verify.JudgedUnparseable && !seen {
			continue
		}
		bars = append(bars, bar{Label: a, Value: float64(n), Title: fmt.Sprintf("%s answered %s: %d times", name, a, n)})
	}
	if total == 0 {
		return nil
	}
	return bars
}

// judgeMeaning says what a judge's answers mean, for a chart's title.
func judgeMeaning(name string) string {
	ch, _ := verify.Lookup(name)
	if len(ch.Answers) == 2 {
		return " (0: no problem, 1: problem found), per judged call turn"
	}
	return " (score 0–2, higher is better), per judged final answer"
}
