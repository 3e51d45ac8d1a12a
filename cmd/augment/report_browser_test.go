package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/verify"
)

// chromium returns the browser the report tests drive: $AUGMENT_CHROMIUM,
// else Debian's /usr/bin/chromium. The test skips, saying so, without one.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("AUGMENT_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no browser at %s (apt-get install chromium, as .ci/run does, or set AUGMENT_CHROMIUM): the report's browser test is skipped", path)
	}
	return path
}

// TestReportInBrowser runs the demo and every recipe's header command, then
// opens each run's report.html in headless Chromium and checks what a
// person would see: the page loads without console errors or exceptions
// and makes no request but for the file itself; every chart is an SVG with
// drawn bars; the stage table and the funnel show the manifests' numbers;
// the distributions count the final stage's records; clicking a reject's
// sample reveals the rejected record. A full-page screenshot is taken (and
// kept in $AUGMENT_REPORT_SCREENSHOTS when set).
func TestReportInBrowser(t *testing.T) {
	exe := chromium(t)
	root := t.TempDir()
	for _, d := range []string{"recipes", "demo"} {
		copyTree(t, filepath.Join("../../testdata", d), filepath.Join(root, "testdata", d))
	}
	runs := map[string]string{} // name → run dir
	e2eMustRun(t, root, "run", "-quiet", "-set", "output.dir=../../out/demo", "testdata/demo/pipeline.yaml")
	runs["demo"] = filepath.Join(root, "out", "demo")
	recipes, _ := filepath.Glob("../../testdata/recipes/*.yaml")
	for _, path := range recipes {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		args := headerCommand(t, path)
		e2eMustRun(t, root, append([]string{args[0], "-quiet"}, args[1:]...)...)
		runs[name] = filepath.Join(root, "out", name)
	}

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1200, 900),
		// No name resolves: a request to the network could not succeed
		// even if the page made one (it is also checked below).
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range runs {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) { checkReportPage(t, bctx, runs[name], name) })
	}
}

// page is what the report shows, read from the DOM.
type page struct {
	Status string
	Charts []struct {
		Name        string
		Bars, Drawn int
		Width       float64
	}
	Stages []map[string]any
	Funnel []struct {
		Label              string
		Out, Rej, Filtered float64
	}
	TokenSum float64
	DistText string
	Rejects  []struct {
		Stage, Reason, ID string
		Count             float64
	}
	LLM         []map[string]any
	Judges      map[string]map[string]float64 // chart → answer → count
	Empty       []string
	DetailsOpen int
}

const readPage = `(() => {
  const num = s => Number(s.trim());
  const p = {status: document.querySelector('#status').textContent, charts: [], stages: [], funnel: [], rejects: [], llm: [],
    empty: [...document.querySelectorAll('[data-empty]')].map(e => e.dataset.empty),
    detailsOpen: document.querySelectorAll('details[open]').length};
  for (const s of document.querySelectorAll('svg.chart')) {
    const bars = [...s.querySelectorAll('.bar, .bar2, .bar3')];
    p.charts.push({name: s.dataset.chart, bars: bars.length, width: s.getBoundingClientRect().width,
      drawn: bars.filter(b => { const r = b.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length});
  }
  for (const tr of document.querySelectorAll('#stages tr[data-stage]')) {
    const o = {dir: tr.dataset.stage};
    for (const td of tr.querySelectorAll('td[data-field]')) o[td.dataset.field] = num(td.textContent);
    p.stages.push(o);
  }
  for (const g of document.querySelectorAll('svg[data-chart=funnel] g[data-label]')) {
    const v = c => { const r = g.querySelector('rect.' + c); return r ? Number(r.dataset.value) : 0; };
    p.funnel.push({label: g.dataset.label, out: v('bar'), rej: v('bar2'), filtered: v('bar3')});
  }
  p.judges = {};
  for (const s of document.querySelectorAll('svg[data-chart^=judge_scores_]')) {
    const h = p.judges[s.dataset.chart] = {};
    for (const g of s.querySelectorAll('g[data-label]')) h[g.dataset.label] = Number(g.querySelector('rect.bar').dataset.value);
  }
  p.tokenSum = [...document.querySelectorAll('svg[data-chart=tokens] rect.bar')].reduce((a, r) => a + Number(r.dataset.value), 0);
  const d = document.querySelector('#dist-records'); p.distText = d ? d.textContent : '';
  for (const tr of document.querySelectorAll('#reject-table tr[data-stage]')) {
    const s = tr.querySelector('summary');
    p.rejects.push({stage: tr.dataset.stage, reason: tr.dataset.reason, id: s ? s.textContent : '', count: num(tr.querySelector('[data-field=count]').textContent)});
  }
  for (const tr of document.querySelectorAll('#llm tr[data-stage]')) {
    const o = {dir: tr.dataset.stage};
    for (const td of tr.querySelectorAll('td[data-field]')) o[td.dataset.field] = num(td.textContent);
    p.llm.push(o);
  }
  return p;
})()`

func checkReportPage(t *testing.T, bctx context.Context, dir, name string) {
	run, err := report.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(bctx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var mu sync.Mutex
	var problems, requests []string
	err = chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, fmt.Sprintf("console %s: %v", e.Type, e.Args))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			requests = append(requests, e.Request.URL)
		case *network.EventLoadingFailed:
			problems = append(problems, "loading failed: "+e.ErrorText)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + filepath.Join(dir, report.HTMLFile)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatal(err)
	}
	p, err := chromedp.Run(ctx, chromedp.Evaluate[page](readPage))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}

	// Every chart is drawn, with at least one visible bar.
	charts := map[string]int{}
	for _, c := range p.Charts {
		charts[c.Name] = c.Drawn
		if c.Bars == 0 || c.Drawn == 0 || c.Width == 0 {
			t.Errorf("chart %s: %d bars, %d drawn, width %v", c.Name, c.Bars, c.Drawn, c.Width)
		}
	}
	for _, want := range []string{"funnel", "category", "source", "lang", "tools", "calls_per_turn", "turns", "tokens"} {
		if _, ok := charts[want]; !ok {
			t.Errorf("no %s chart (charts: %v, empty: %v)", want, charts, p.Empty)
		}
	}

	// The stage table and the funnel show the manifests' counts.
	if len(p.Stages) != len(run.Stages) {
		t.Errorf("%d stage rows, run has %d stages", len(p.Stages), len(run.Stages))
	}
	funnel := map[string]int{}
	for i, f := range p.Funnel {
		funnel[f.Label] = i
	}
	for i, row := range p.Stages {
		st := run.Stages[i]
		if row["dir"] != st.Dir {
			t.Errorf("row %d is %v, want %s", i, row["dir"], st.Dir)
			continue
		}
		m, err := manifests.Read[manifests.Stage](filepath.Join(dir, st.Dir, "manifest.json"))
		if err != nil || m == nil {
			t.Errorf("%s: manifest %v", st.Dir, err)
			continue
		}
		c := m.Totals
		want := map[string]float64{"shards": float64(len(m.Shards)), "in": float64(c.In), "out": float64(c.Out),
			"rejected": float64(manifests.Sum(c.Rejected)), "filtered": float64(manifests.Sum(c.Filtered)), "added": float64(c.Added)}
		for k, v := range want {
			if row[k] != v {
				t.Errorf("%s %s: page %v, manifest %v", st.Dir, k, row[k], v)
			}
		}
		j, ok := funnel[st.Dir]
		if !ok {
			t.Errorf("funnel has no bar for %s", st.Dir)
			continue
		}
		if f := p.Funnel[j]; f.Out != want["out"] || f.Rej != want["rejected"] || f.Filtered != want["filtered"] {
			t.Errorf("funnel %s: %+v, manifest %v", st.Dir, f, want)
		}
	}

	// The distributions count every record of the final stage.
	final := run.Final()
	if final == nil {
		t.Fatal("no final stage")
	}
	if out := float64(final.Manifest.Totals.Out); p.TokenSum != out || !strings.Contains(p.DistText, fmt.Sprint(out)) {
		t.Errorf("token histogram counts %v records, %q; %s wrote %v", p.TokenSum, p.DistText, final.Dir, out)
	}

	// Rejects: one row per stage and reason, with the manifest's count.
	var rejects int
	for _, st := range run.Stages {
		rejects += len(st.Totals().Rejected)
	}
	if len(p.Rejects) != rejects {
		t.Errorf("%d reject rows, manifests have %d stage/reason pairs", len(p.Rejects), rejects)
	}
	for _, r := range p.Rejects {
		st, err := run.Stage(r.Stage)
		if err != nil || float64(st.Totals().Rejected[r.Reason]) != r.Count || r.ID == "" {
			t.Errorf("reject row %+v: manifest %v, %v", r, st.Totals().Rejected, err)
		}
	}

	// Teacher rows equal the manifests' accounting.
	for _, row := range p.LLM {
		st, err := run.Stage(row["dir"].(string))
		if err != nil || st.LLM == nil || row["requests"] != float64(st.LLM.Requests) || row["cache_hits"] != float64(st.LLM.CacheHits) {
			t.Errorf("teacher row %v: manifest %+v %v", row, st.LLM, err)
		}
	}

	// Each LLM judge of a verify stage has a histogram of its answers whose
	// bars are the manifest's judge.<judge>=<answer> counters.
	judgeCharts := 0
	for _, st := range run.Stages {
		if st.Type != "verify" || st.Manifest == nil {
			continue
		}
		var cfg struct {
			Checks []string `json:"checks"`
		}
		if err := json.Unmarshal(st.Manifest.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		counters := st.Manifest.Totals.Counters
		for _, judge := range cfg.Checks {
			ch, _ := verify.Lookup(judge)
			if len(ch.Answers) == 0 {
				continue
			}
			chart := "judge_scores_" + st.Name + "_" + judge
			got, ok := p.Judges[chart]
			if !ok {
				t.Errorf("no %s histogram (charts %v)", chart, charts)
				continue
			}
			judgeCharts++
			t.Logf("%s: %v", chart, got)
			want := map[string]float64{}
			for k, v := range counters {
				if a, ok := strings.CutPrefix(k, "judge."+judge+"="); ok {
					want[a] = float64(v)
				}
			}
			for _, a := range ch.Answers {
				if _, ok := want[a]; !ok {
					want[a] = 0 // every answer has its bin
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: page %v, manifest %v", chart, got, want)
			}
			if charts[chart] == 0 {
				t.Errorf("%s: no bar drawn", chart)
			}
		}
	}
	if name == "mt-llama" && judgeCharts != 3 {
		t.Errorf("mt-llama runs three judges: %d histograms", judgeCharts)
	}

	// Clicking a reject's sample reveals the record; before, it is hidden.
	if len(p.Rejects) > 0 {
		type shown struct {
			Visible bool
			Text    string
		}
		const sel = `#reject-table details.reject`
		const js = `(() => { const pre = document.querySelector('` + sel + ` pre.record'); const r = pre.getBoundingClientRect();
			return {visible: pre.checkVisibility() && r.width > 0 && r.height > 0, text: pre.innerText}; })()`
		before, err := chromedp.Run(ctx, chromedp.Evaluate[shown](js))
		if err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel+` summary`))); err != nil {
			t.Fatal(err)
		}
		after, err := chromedp.Run(ctx, chromedp.Evaluate[shown](js))
		if err != nil {
			t.Fatal(err)
		}
		id := p.Rejects[0].ID
		if before.Visible || !after.Visible || !strings.Contains(after.Text, `"id": "`+id+`"`) || !strings.Contains(after.Text, `"reason": "`+p.Rejects[0].Reason+`"`) {
			t.Errorf("clicking the sample of %s: visible before %v, after %v, text %.200q", id, before.Visible, after.Visible, after.Text)
		}
	} else if name == "demo" {
		t.Error("the demo rejects two rows: the page lists none")
	}

	mu.Lock()
	for _, u := range requests {
		if u != url {
			t.Errorf("the page requested %s", u)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	mu.Unlock()

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 900 {
		t.Errorf("screenshot is %v", b)
	}
	if keep := os.Getenv("AUGMENT_REPORT_SCREENSHOTS"); keep != "" {
		if err := os.WriteFile(filepath.Join(keep, "report-"+name+".png"), shot, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestReportRejectNoteWraps opens the reject sample of a report whose
// reject has a long detail (a tool call's arguments of 600 characters,
// quoted in the reason) in a 1300 px wide window: the page must not widen
// past the window (the note under a sample's summary wraps instead of
// inheriting the table cells' nowrap).
func TestReportRejectNoteWraps(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	long := "{bad " + strings.Repeat("lorem ipsum dolor sit amet ", 24)
	row := func(user, args string) string {
		b, _ := json.Marshal(map[string]any{
			"messages": []any{
				map[string]any{"role": "user", "content": user},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
					"function": map[string]any{"name": "get_weather", "arguments": args}}}},
			},
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
		})
		return string(b) + "\n"
	}
	rows := row("weather in Paris?", `{"city": "Paris"}`) + row("weather in Rome?", long) + row(strings.Repeat("W", 3000), long+"x")
	if err := os.WriteFile(filepath.Join(dir, "rows.jsonl"), []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	pipeline := "output: {dir: out}\nsources: [{name: rows, path: rows.jsonl, format: openai}]\nstages: [{verify: {checks: [roles]}}]\n"
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	e2eMustRun(t, dir, "run", "-quiet", "p.yaml")

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1300, 900),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	url := "file://" + filepath.Join(dir, "out", report.HTMLFile)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatal(err)
	}
	type widths struct {
		Scroll, Client, Details int
		Note                    string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[widths](`(() => {
  const ds = document.querySelectorAll('details.reject');
  for (const d of ds) d.open = true;
  const e = document.documentElement, n = document.querySelector('details.reject p.note');
  return {scroll: e.scrollWidth, client: e.clientWidth, details: ds.length, note: n ? n.textContent : ''};
})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Details != 1 || !strings.Contains(got.Note, "lorem ipsum dolor") {
		t.Fatalf("the report shows %d reject samples (want 1: one per stage and reason), the first note %.300q", got.Details, got.Note)
	}
	if got.Scroll > got.Client {
		t.Errorf("with the reject samples open the page is %d px wide in a %d px window: a note does not wrap", got.Scroll, got.Client)
	}
}
