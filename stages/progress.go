package stages

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"golang.org/x/term"

	"github.com/augmentdata/augment/stages/llm"
)

// progress reports how far a stage is: a progress bar on a terminal, a log
// line every logEvery otherwise. LLM stages add the teacher's counters.
type progress struct {
	bar   *progressbar.ProgressBar
	n     atomic.Int64
	total atomic.Int64 // what n counts up to (grow)
	stop  chan struct{}
	ended chan struct{}
}

// logEvery is the interval of plain progress lines (a variable for tests).
var logEvery = 10 * time.Second

// newProgress tracks records out of total.
func (r *Runner) newProgress(name string, total int64, env *Env) *progress {
	return r.startProgress(name, total, "records", env)
}

// newProgressBytes tracks bytes of a dump.
func (r *Runner) newProgressBytes(name string, size int64) *progress {
	return r.startProgress(name, size, "bytes", nil)
}

func (r *Runner) startProgress(name string, total int64, unit string, env *Env) *progress {
	p := &progress{stop: make(chan struct{}), ended: make(chan struct{})}
	p.total.Store(total)
	w := r.o.Progress
	if w == nil {
		close(p.ended)
		return p
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(name),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200 * time.Millisecond),
			progressbar.OptionClearOnFinish(),
		}
		if unit == "bytes" {
			opts = append(opts, progressbar.OptionShowBytes(true))
		}
		p.bar = progressbar.NewOptions64(total, opts...)
	}
	start := time.Now()
	var last llm.Stats
	lastAt := start
	go func() {
		defer close(p.ended)
		every := logEvery
		if p.bar != nil {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				n, total := p.n.Load(), p.total.Load()
				extra := ""
				if env != nil {
					if s := env.stats(); s != nil {
						extra = " " + llmProgress(last, *s, time.Since(lastAt).Seconds(), n, total)
						last, lastAt = *s, time.Now()
					}
				}
				if p.bar != nil {
					p.bar.Describe(name + extra)
					continue
				}
				el := time.Since(start).Seconds()
				rate := float64(n) / el
				eta := "?"
				if rate > 0 && total > 0 {
					eta = (time.Duration(float64(total-n)/rate) * time.Second).Round(time.Second).String()
				}
				fmt.Fprintf(w, "progress stage=%q %s=%d/%d rate=%.0f/s eta=%s%s\n", name, unit, n, total, rate, eta, extra)
			}
		}
	}()
	return p
}

// grow adds n to what p counts up to: records known once p started (a
// shard ingest hands on as it reads its dump, pass.add).
func (p *progress) grow(n int64) {
	if p == nil {
		return
	}
	total := p.total.Add(n)
	if p.bar != nil {
		p.bar.ChangeMax64(total)
	}
}

// add counts n records done; a nil progress (a stage skipped as a whole
// whose shard is made again for the stage after it) counts nothing.
func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.n.Add(n)
	if p.bar != nil {
		p.bar.Add64(n)
	}
}

func (p *progress) done() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.ended
	if p.bar != nil {
		p.bar.Finish()
	}
}

// llmProgress describes teacher traffic since the previous snapshot: sent
// requests and tokens per second over secs, and, with prices configured, the
// cost so far and the cost projected for the whole stage from the share of
// its records done (done of total).
func llmProgress(prev, cur llm.Stats, secs float64, done, total int64) string {
	if secs <= 0 {
		secs = 1
	}
	sent := float64(cur.Requests-cur.CacheHits-(prev.Requests-prev.CacheHits)) / secs
	toks := float64(cur.TokensIn+cur.TokensOut-prev.TokensIn-prev.TokensOut) / secs
	s := fmt.Sprintf("req/s=%.1f tok/s=%.0f in_flight=%d cache_hits=%d failed=%d", sent, toks, cur.InFlight, cur.CacheHits, cur.Failed)
	if cur.Cost > 0 {
		s += fmt.Sprintf(" cost=%.2f", cur.Cost)
		if done > 0 && total > 0 {
			s += fmt.Sprintf(" projected=%.2f", cur.ProjectedCost(min(float64(done)/float64(total), 1)))
		}
	}
	return s
}
