package stages

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/storage"
	"github.com/augmentdata/augment/verify"
)

// Check validates a loaded pipeline without doing its work: it says which
// sources and stages would run or be skipped, renders every prompt against
// the first input record by passing that record through the stages with the
// teacher's offline stand-ins (nothing is sent), and estimates the requests
// and tokens a run would spend.
func Check(ctx context.Context, p *Pipeline, o Options, w io.Writer) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Log == nil {
		o.Log = discardLog()
	}
	dir, err := p.outputDir()
	if err != nil {
		return err
	}
	src := newOpener(p, o)
	if probs := append(pathProblems(p, src), stageProblems(p)...); len(probs) > 0 {
		return &ConfigError{Problems: probs}
	}
	r := &Runner{p: p, o: o, dir: dir, src: src}
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		if r.root, err = atomicfs.OpenRoot(dir); err != nil {
			return err
		}
		defer r.root.Close()
		// A run refuses this before it starts (NewTeacher): so does check.
		if err := llm.CheckOnline(p.Teacher, r.root.Sub(batchDir)); err != nil {
			if bce, ok := errors.AsType[*llm.BatchStateError](err); ok {
				return &ConfigError{Problems: bce.Problems}
			}
			return fmt.Errorf("teacher: %w", err)
		}
	}
	fmt.Fprintf(w, "pipeline %s: valid\n", p.Path())
	// The output as the run's summary names it: not output.dir, which is
	// relative to the pipeline file.
	output := shownDir(dir)
	if storage.IsRemote(p.Output.Dir) {
		output = fmt.Sprintf("%s (working copy: %s)", p.Output.Dir, output)
	}
	fmt.Fprintf(w, "output: %s  seed: %d  teacher: %s\n", output, p.Seed, strings.TrimSpace(p.Teacher.Provider+" "+p.Teacher.Model))
	for _, msg := range envProblems(p, o.Getenv) {
		fmt.Fprintf(w, "warning: %s (a run needs it)\n", msg)
	}
	if msg := lastStageNote(p, dir); msg != "" {
		fmt.Fprintf(w, "%s\n", msg)
	}
	for _, msg := range offlineExportWarnings(p) {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	for _, msg := range configWarnings(p) {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}

	merge, err := r.unmergedWorkers() // workers.go: a run merges them first
	if err != nil {
		return err
	}

	// Sources: do they exist, and would ingest redo them?
	fmt.Fprintln(w, "\nsources:")
	ingestDir := filepath.Join(dir, "00-ingest")
	old, err := manifests.Read[manifests.Stage](filepath.Join(ingestDir, "manifest.json"))
	if err != nil {
		return err
	}
	var rows int64
	allSourcesCurrent := true
	var first *record.Record
	var sampleTools []record.Tool
	// The lines wait for the first group's passes (firstGroup) when ingest
	// keeps no shards: they say which up-to-date sources are read again.
	type sourceLine struct{ name, format, size, status string }
	var lines []sourceLine
	current := &manifests.Stage{} // the shards of the up-to-date sources
	for _, s := range p.Sources {
		path := p.Resolve(s.Path)
		info, err := r.src.Stat(ctx, path)
		if err != nil {
			return fmt.Errorf("source %q: %w", s.Name, err)
		}
		status := "would ingest (no earlier run)"
		if old != nil && supersedes(old, s.Name) {
			status = "would ingest (a run stopped while ingesting it again, after dropping its earlier shards)"
		}
		if prev := r.sourceShards(old, s.Name); len(prev) > 0 {
			status = "would ingest (dump or settings changed)"
			sum, err := r.sourceSum(ctx, path, prev)
			if err != nil {
				return err
			}
			cfg := ingestSettingsOf(p.Output, s)
			sfp, _, _ := r.fingerprint("ingest", ingestVersion, cfg, nil, nil)
			if allMatch(prev, sourceKey(sfp, path, sum), r, r.streamsIngest()) {
				status = fmt.Sprintf("up to date (%d shards)", len(prev))
				current.Shards = append(current.Shards, prev...)
				for _, sh := range prev {
					rows += sh.Out
				}
			}
		}
		rec, tools, estimate, err := peekSource(ctx, r.src, s, path, 1000)
		if err != nil {
			return fmt.Errorf("source %q: %w", s.Name, err)
		}
		if first == nil {
			first = rec
		}
		sampleTools = append(sampleTools, tools...)
		if !strings.HasPrefix(status, "up to date") {
			rows += sourceRows(s, estimate)
			allSourcesCurrent = false
		}
		lines = append(lines, sourceLine{s.Name, s.Format, humanBytes(info.Size), status})
	}
	var fed *group // the run's first group, when ingest keeps no shards
	if r.streamsIngest() && !merge {
		if fed, err = r.firstGroup(p, current, !allSourcesCurrent); err != nil {
			return err
		}
	}
	again := &ingestFeed{stream: map[string]bool{}}
	if fed != nil {
		r.planFeed(again, fed)
	}
	for _, l := range lines {
		switch {
		case !strings.HasPrefix(l.status, "up to date"):
		case again.stream[l.name]:
			l.status += ", would be read again: ingest keeps no shards, and a stage after it has shards of the source to make"
		default:
			l.status += ", would be skipped"
		}
		fmt.Fprintf(w, "  %-16s %-8s %9s  %s\n", l.name, l.format, l.size, l.status)
	}
	if r.streamsIngest() {
		fmt.Fprintln(w, "  ingest keeps no Parquet shards (ingest: {keep: false}): its records go on to the first stages as they are parsed")
	} else if !p.Ingest.keeps() {
		fmt.Fprintln(w, "  ingest keeps its Parquet shards in batch mode (ingest: {keep: false} has no effect)")
	}
	if first == nil {
		fmt.Fprintln(w, "\nno source has a parseable row in its first 1000: nothing to preview")
		return nil
	}
	lib := toollib.New(sampleTools)
	if old != nil {
		for _, s := range old.Shards {
			for _, o := range s.Outputs {
				if strings.HasPrefix(filepath.Base(o.Path), "tools-") {
					r.libRefs = append(r.libRefs, o)
				}
			}
		}
		if l, err := r.library(); err == nil && len(l.Tools) > 0 {
			lib = l
		}
	}

	fmt.Fprintf(w, "\nstages (previewed on record %s; about %d records enter the first stage):\n", first.ID, rows)
	if merge {
		fmt.Fprintln(w, "  the output dir holds the workers' parts, not merged yet: a run merges them, as augment merge does")
	}
	recs := []*record.Record{first}
	upToDate := old != nil && allSourcesCurrent
	// What the stage is given, as a run would see it: the shards of the
	// sources in pipeline.yaml (those of a removed source are gone).
	var inputs []shardInput
	if old != nil {
		inputs = outputsOf(current, shardNames(current))
	}
	for i := range p.Stages {
		spec := &p.Stages[i]
		typ, cfg := spec.config()
		fmt.Fprintf(w, "  %02d %s (%s)", i+1, spec.Name, typ)
		if spec.Skip {
			fmt.Fprintln(w, ": skipped (skip: true)")
			continue
		}
		prev := &previewClient{}
		env := previewEnv(p, spec.Name, cfg, prev, lib)
		st, err := cfg.build(env)
		if err != nil {
			return fmt.Errorf("stage %s: %w", spec.Name, err)
		}
		status := "would run (no earlier run)"
		_, sink := st.(Sink)
		fp, _, _ := r.fingerprint(typ, cfg.version(), cfg, env, st, r.libraryPart(cfg)...)
		rel := fmt.Sprintf("%02d-%s", i+1, spec.Name)
		var sm *manifests.Stage
		if merge {
			sm, err = r.sharedOld(stageRun{name: spec.Name, rel: rel, out: r.root.Sub(rel)})
		} else {
			sm, err = manifests.Read[manifests.Stage](filepath.Join(dir, rel, "manifest.json"))
		}
		if err != nil {
			return err
		}
		todo, gone := 0, 0 // shards a run would make of a stage whose settings and input stand, and drop
		if sm != nil && sm.ConfigHash == fp && upToDate {
			todo = len(r.pending(stageRun{name: spec.Name, drop: !spec.keeps() && !merge}, sm, fp, sm.Plan, inputs))
		}
		if sm != nil && old != nil && allSourcesCurrent { // the names of its input shards are known
			gone = goneShards(sm, inputs, r.mine)
		}
		_, planner := st.(Planner)
		dropped := fmt.Sprintf("would drop %d shards whose input is gone (a source removed, or a dump with fewer shards)", gone)
		// A sink passes its input through (pass.handed): the stage after
		// it reads the sink's input, as current as it was whatever the
		// sink has to do.
		inputCurrent := upToDate
		switch {
		case sm == nil:
		case sm.ConfigHash != fp:
			status, upToDate = "would run (settings, prompts or teacher changed)", false
		case !upToDate:
			status = "would run where its input changes"
			if gone > 0 {
				status += ", and " + dropped
			}
		case todo > 0:
			status = fmt.Sprintf("would run %d of %d shards (%d done; the rest never ran or lost their outputs)", todo, len(inputs), len(inputs)-todo)
			if gone > 0 {
				status += "; " + dropped
			}
			upToDate = false
		case gone > 0 && planner:
			// Its plan is made again over the shards left, and may
			// change what each of them gives.
			status, upToDate = dropped+", and would plan again over the rest", false
		case gone > 0 && sink:
			status = dropped + ", and would write the files of the whole export again"
		case gone > 0:
			status = dropped + fmt.Sprintf("; the other %d up to date", len(sm.Shards)-gone)
		case merge && sink:
			status = fmt.Sprintf("would finish (%d shards done by the workers; the merge writes the files of the whole export)", len(sm.Shards))
		case merge:
			status = fmt.Sprintf("done by the workers (%d shards), would be merged", len(sm.Shards))
		case sink && !r.finishDone(sm):
			status = fmt.Sprintf("would finish (%d shards up to date; its last run stopped before writing the files of the whole export)", len(sm.Shards))
		default:
			status = fmt.Sprintf("up to date (%d shards), would be skipped", len(sm.Shards))
		}
		switch {
		case sink: // a sink passes its input through (pass.handed)
			upToDate = inputCurrent
		case sm != nil:
			inputs = outputsOf(sm, inputs)
		default:
			inputs = nil
		}
		if !sink && !strings.HasPrefix(status, "up to date") && !strings.HasPrefix(status, "done by the workers") && !strings.HasPrefix(status, "would drop") {
			upToDate = false // a stage that only drops shards gives the rest unchanged
		}
		switch {
		case !spec.keeps() && merge:
			status += "; keep: false has no effect in a merge: its shards are kept"
		case !spec.keeps():
			status += "; keeps no Parquet shards (keep: false)"
			if n := remade(fed, spec.Name); n > 0 {
				status += fmt.Sprintf("; makes %d of them again in memory for the stage after it, recording nothing", n)
			}
		}
		fmt.Fprintf(w, ": %s\n", status)
		if len(recs) == 0 {
			fmt.Fprintln(w, "     (no record reaches this stage in the preview)")
			continue
		}
		if pl, ok := st.(Planner); ok {
			if _, err := pl.Plan(ctx, func(yield func(*record.Record) error) error {
				for _, rec := range recs {
					if err := yield(rec); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return fmt.Errorf("stage %s: plan: %w", spec.Name, err)
			}
		}
		var next []*record.Record
		for _, rec := range recs {
			out, err := st.Process(ctx, rec)
			switch kind, reason := contract.Classify(len(out), err); {
			case llm.IsFatal(err):
				fmt.Fprintf(w, "     preview stops here: %v\n", err)
			case kind == contract.Rejected:
				fmt.Fprintf(w, "     record %s would be rejected: %s (%v)\n", rec.ID, reason, err)
			case kind == contract.Filtered && err != nil:
				fmt.Fprintf(w, "     record %s would be filtered: %v\n", rec.ID, err)
			case kind == contract.Stop:
				return fmt.Errorf("stage %s: %w", spec.Name, err)
			}
			next = append(next, out...)
		}
		prev.print(w, len(recs), rows)
		if pv, ok := st.(Previewer); ok {
			for _, rec := range next {
				if s, ok := pv.Preview(rec); ok {
					fmt.Fprintf(w, "     sample %s: %s\n", rec.ID, clip.Bytes(s, 600))
				}
			}
		}
		if _, ok := st.(Sink); ok {
			continue // a sink passes its input through
		}
		recs = next
	}
	return nil
}

// firstGroup opens, as openPass would and without writing anything, the
// passes of the first group of a run whose ingest keeps no shards: the
// stages before the first Planner (runStages), over the shards of the
// up-to-date sources that current lists, as ingest hands them on
// (ingestFeed.known). fresh says some source is read anew: no pass is then
// up to date as a whole. It returns nil when the first stage is a Planner
// (refused: stageProblems). planFeed then tells the sources the run reads
// again.
func (r *Runner) firstGroup(p *Pipeline, current *manifests.Stage, fresh bool) (*group, error) {
	g := &group{}
	inputs := outputsOf(current, shardNames(current))
	for i := range p.Stages {
		spec := &p.Stages[i]
		if spec.Skip {
			continue
		}
		typ, cfg := spec.config()
		env, st, err := bareStage(p, spec, cfg)
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", spec.Name, err)
		}
		if _, planner := st.(Planner); planner {
			break
		}
		fp, _, err := r.fingerprint(typ, cfg.version(), cfg, env, st, r.libraryPart(cfg)...)
		if err != nil {
			return nil, err
		}
		sr := stageRun{name: spec.Name, rel: fmt.Sprintf("%02d-%s", i+1, spec.Name), drop: !spec.keeps()}
		old, err := manifests.Read[manifests.Stage](filepath.Join(r.dir, sr.rel, "manifest.json"))
		if err != nil {
			return nil, err
		}
		ps := &pass{sr: sr, st: st, old: old, inputs: inputs}
		ps.sink, _ = st.(Sink)
		plan := "" // the earlier plan: none in this group, which has no Planner
		if old != nil && old.ConfigHash == fp {
			plan = old.Plan
		}
		if r.decide(ps, fp, plan, fresh); ps.upToDate {
			ps.res.outputs = outputsOf(old, inputs)
		}
		g.passes = append(g.passes, ps)
		inputs = ps.handed()
	}
	if len(g.passes) == 0 {
		return nil, nil
	}
	return g, nil
}

// supersedes reports whether the ingest manifest m names files of source
// among those it supersedes: a run that ingested the source again dropped
// its shards first (forgetShards) and stopped before recording new ones.
func supersedes(m *manifests.Stage, source string) bool {
	return slices.ContainsFunc(m.Superseded, func(path string) bool {
		base := filepath.Base(path)
		if base == "tools-"+source+".jsonl" {
			return true
		}
		shard, ok := strings.CutPrefix(base, "part-")
		name, _, ok2 := cutShardIndex(strings.TrimSuffix(shard, ".parquet"))
		return ok && ok2 && name == source
	})
}

// remade counts the shards of the pass of g named stage, one that keeps no
// shards, that it does not make in the run but makes again in memory
// (replayShard) because the pass after it needs their records (needs).
func remade(g *group, stage string) int {
	if g == nil {
		return 0
	}
	for k, p := range g.passes {
		if p.sr.name != stage || !p.sr.drop {
			continue
		}
		n := 0
		for _, in := range p.inputs {
			if _, redo := p.todo[in.name]; (p.upToDate || !redo) && needs(g, in.name)[k+1] {
				n++
			}
		}
		return n
	}
	return 0
}

// peekSource parses up to n rows and returns the first record that parsed,
// the tools seen and the dump's row count: exact when the whole dump was
// read (or is Parquet), else extrapolated from the bytes of the rows read,
// the stored size and, for a compressed dump, the compression ratio so far.
func peekSource(ctx context.Context, op *storage.Opener, s Source, path string, n int) (*record.Record, []record.Tool, int64, error) {
	f, err := op.Open(ctx, path)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	var stored int64
	f.Progress(func(k int64) { stored += k })
	in := &countingReader{r: f}
	sc := formats.NewScanner(in)
	sc.SetMaxRowBytes(int(s.MaxRowBytes))
	var first *record.Record
	var tools []record.Tool
	read := 0
	var rowBytes int64
	for read < n {
		row, idx, err := sc.Next()
		if errors.Is(err, io.EOF) {
			return first, tools, int64(read), nil
		}
		var bad *formats.RowError
		if errors.As(err, &bad) { // a row ingest rejects
			read++
			rowBytes += bad.Bytes + 2
			continue
		}
		if err != nil {
			return first, tools, int64(read), nil
		}
		read++
		rowBytes += int64(len(row)) + 2
		rec, err := formats.Parse(s.Format, s.Name, idx, row)
		if err != nil {
			continue
		}
		if first == nil {
			first = rec
		}
		tools = append(tools, rec.Tools...)
	}
	if f.Rows >= 0 {
		return first, tools, f.Rows, nil
	}
	if rowBytes == 0 || stored == 0 || f.Size <= 0 {
		return first, tools, int64(read), nil
	}
	decoded := float64(f.Size) * float64(in.n) / float64(stored)
	return first, tools, int64(float64(read) * decoded / float64(rowBytes)), nil
}

// sourceRows is how many of a dump's rows rows ingest keeps: the first
// limit of them, each kept with probability fraction.
func sourceRows(s Source, rows int64) int64 {
	if s.Limit > 0 {
		rows = min(rows, s.Limit)
	}
	if s.Fraction > 0 {
		rows = int64(math.Round(float64(rows) * s.Fraction))
	}
	return rows
}

// previewClient answers with the stages' offline stand-ins and records what
// would have been sent.
type previewClient struct {
	mu       sync.Mutex
	asked    []previewAsk
	noAnswer int
}

// A previewAsk is one request the preview recorded, with the stand-in's
// answer ("" when it has none).
type previewAsk struct {
	req    llm.Request
	answer string
}

func (c *previewClient) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, previewAsk{req: req})
	if req.Offline == nil {
		c.noAnswer++
		return llm.Response{}, &llm.FatalError{Reason: "llm_offline_unsupported", Msg: "this stage needs a real teacher model (it has no offline stand-in); its first request is shown above"}
	}
	ans, err := req.Offline()
	if err != nil {
		return llm.Response{}, err
	}
	c.asked[len(c.asked)-1].answer = ans
	return llm.Response{Content: ans, FinishReason: "stop", Provider: "preview", Model: "offline"}, nil
}

// print shows the first request of each prompt and the estimate. Stages
// ask in parallel, so the requests are put in slot order first: the same
// pipeline previews the same request each time.
func (c *previewClient) print(w io.Writer, previewed int, rows int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.asked) == 0 {
		// A stage that asks for some records only (negatives' ratio)
		// may ask for others.
		fmt.Fprintf(w, "     no teacher requests for the %d previewed record(s)\n", previewed)
		return
	}
	slices.SortStableFunc(c.asked, func(a, b previewAsk) int {
		return cmp.Or(strings.Compare(a.req.Slot, b.req.Slot), strings.Compare(a.req.Stage, b.req.Stage), cmp.Compare(a.req.Attempt, b.req.Attempt))
	})
	prompt, completion, longest := 0, 0, 0
	seen := map[string]bool{}
	for _, a := range c.asked {
		req := a.req
		n := 0
		for _, m := range req.Messages {
			n += verify.Tokens(m.Content)
		}
		prompt, longest = prompt+n, max(longest, n)
		completion += verify.Tokens(a.answer)
		if seen[req.Template] {
			continue
		}
		seen[req.Template] = true
		fmt.Fprintf(w, "     request %s (template %s):\n", req.Stage, req.Template)
		for _, m := range req.Messages {
			fmt.Fprintf(w, "       [%s] %s\n", m.Role, indent(clip.Bytes(m.Content, 1200), "         "))
		}
	}
	prefix := llm.NewPrefixMeter()
	for _, a := range c.asked {
		prefix.Observe(a.req.Messages)
	}
	per := float64(len(c.asked)) / float64(previewed)
	fmt.Fprintf(w, "     estimate: %.1f requests per record → about %.0f requests, %.0f prompt and %.0f completion tokens (from the preview record; re-asks not counted)\n",
		per, per*float64(rows), float64(prompt)/float64(previewed)*float64(rows), float64(completion)/float64(previewed)*float64(rows))
	fmt.Fprintf(w, "     prefix share: %.2f of the preview's prompt bytes repeat the start of an earlier prompt (what a server's prefix cache computes once; a run's manifest gives the stage's own figure as llm.prefix_share)\n",
		prefix.Share())
	fmt.Fprintf(w, "     longest prompt: about %d tokens; with teacher.max_tokens it must fit the served context (max_model_len), which a run checks for every prompt before sending it\n", longest)
}

// bareStage builds the stage of spec, of config cfg, as check's preview
// does with a stand-in teacher and an empty tool library: enough to tell
// what it is (a Planner, a Sink) and its fingerprint.
func bareStage(p *Pipeline, spec *StageSpec, cfg stageConfig) (*Env, Stage, error) {
	env := previewEnv(p, spec.Name, cfg, &previewClient{}, toollib.New(nil))
	st, err := cfg.build(env)
	return env, st, err
}

// previewEnv is the Env of stage name when nothing is sent: augment check
// and config validation build stages with it. The teacher is a previewClient
// (the offline stand-ins), the embedder the offline one, the library lib
// (for a stage that reads it). A run's Env is Runner.newEnv.
func previewEnv(p *Pipeline, name string, cfg stageConfig, teacher *previewClient, lib *toollib.Library) *Env {
	env := &Env{Stage: name, Seed: p.Seed, Dir: p.Dir(), Teacher: teacher, Embedder: offlineEmbedder(p),
		Provider: p.Teacher.Provider, Model: p.Teacher.Model, Capacity: 1, Log: discardLog()}
	if readsLibrary(cfg) { // as newEnv
		env.Library = func() (*toollib.Library, error) { return lib, nil }
	}
	return env
}

func offlineEmbedder(p *Pipeline) llm.Embedder {
	e, err := llm.NewEmbedder(llm.EmbedderConfig{Provider: "offline", Dimensions: p.Embedder.Dimensions}, llm.Options{})
	if err != nil {
		return nil
	}
	return e
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func humanBytes(n int64) string {
	switch {
	case n < 0:
		return "size unknown"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// lastStage says where a run's final records are when they do not end in
// an export: warn is set when stages follow the last export (their records
// are written as shards but never exported), else msg says where the data
// is for a pipeline without an export; "" when the last stage that runs is
// an export. dir is the run's output directory (local: the working copy of
// one on object storage), absolute.
func lastStage(p *Pipeline, dir string) (msg string, warn bool) {
	lastExport, last := -1, -1
	for i := range p.Stages {
		s := &p.Stages[i]
		if s.Skip {
			continue
		}
		last = i
		if s.Export != nil {
			lastExport = i
		}
	}
	stageDir := func(i int) string {
		if i < 0 {
			return shownDir(filepath.Join(dir, "00-ingest"))
		}
		return shownDir(filepath.Join(dir, fmt.Sprintf("%02d-%s", i+1, p.Stages[i].Name)))
	}
	switch {
	case last == lastExport && last >= 0:
		return "", false
	case lastExport < 0:
		return fmt.Sprintf("no export stage: the final records are the Parquet shards in %s", stageDir(last)), false
	}
	var after []string
	for i := lastExport + 1; i <= last; i++ {
		if !p.Stages[i].Skip {
			after = append(after, p.Stages[i].Name)
		}
	}
	return fmt.Sprintf("stages after the last export (%s) are not exported: end the pipeline with an export, "+
		"or read their records from %s", strings.Join(after, ", "), stageDir(last)), true
}

// lastStageNote is lastStage as a line of augment check.
func lastStageNote(p *Pipeline, dir string) string {
	msg, warn := lastStage(p, dir)
	if warn {
		return "warning: " + msg
	}
	return msg
}

// offlineExportWarnings: under the offline teacher, an export without
// allow_offline that follows a stage writing the teacher's answers would
// stop a run with a config error (exit 2) at the first record holding the
// stand-in text. check's preview cannot show that (its stand-in answers
// are not marked offline), so it says so here, once per such export.
func offlineExportWarnings(p *Pipeline) []string {
	if p.Teacher.Provider != llm.ProviderOffline {
		return nil
	}
	var msgs []string
	writer := "" // the first stage before here that writes the teacher's answers
	for i := range p.Stages {
		spec := &p.Stages[i]
		if spec.Skip {
			continue
		}
		if spec.Export != nil && writer != "" && !spec.Export.AllowOffline {
			msgs = append(msgs, p.problem(fmt.Sprintf("stages[%d]", i),
				"the teacher is offline, so stage %q writes stand-in text, which export %q refuses: a run stops there with exit 2. "+
					"Set allow_offline: true on export %q (-set stages.%d.export.allow_offline=true) to export it marked as stand-in data, or configure a real teacher",
				writer, spec.Name, spec.Name, i))
			continue
		}
		if writer != "" {
			continue
		}
		_, cfg := spec.config()
		_, st, err := bareStage(p, spec, cfg)
		if tw, ok := st.(teacherWriter); err == nil && ok && tw.writesTeacherText() {
			writer = spec.Name
		}
	}
	return msgs
}

// A configWarner has advice on settings that work but do not do what they
// seem to (dedup's threshold below its LSH curve): check prints it and the
// stage's build logs it as a warning.
type configWarner interface{ warnings() []string }

// configWarnings is the advice of every stage that would run, each with
// the line of its stage.
func configWarnings(p *Pipeline) []string {
	var msgs []string
	for i := range p.Stages {
		spec := &p.Stages[i]
		if spec.Skip {
			continue
		}
		typ, cfg := spec.config()
		if cw, ok := cfg.(configWarner); ok {
			for _, m := range cw.warnings() {
				msgs = append(msgs, p.problem(fmt.Sprintf("stages[%d].%s", i, typ), "stage %q: %s", spec.Name, m))
			}
		}
	}
	return msgs
}

// stageProblems builds every stage that would run, without running it, so
// that what only a build checks (a prompt file, a check name) is reported
// as a config error before anything is written.
func stageProblems(p *Pipeline) []string {
	var probs []string
	// dropped is the last stage with keep: false while its records are
	// what the stages after it read (an export passes its input on); took
	// says a stage after it read them. ingest is the stage before the
	// first, none no stage; group says whether the stage is in the first group, which
	// takes ingest's records as they are parsed (no Planner up to it: a
	// Planner first is refused on its own).
	const ingest, none = -1, -2
	dropped, took, group := none, false, true
	if !p.Ingest.keeps() {
		dropped = ingest
	}
	for i := range p.Stages {
		spec := &p.Stages[i]
		if spec.Skip {
			continue
		}
		typ, cfg := spec.config()
		_, st, err := bareStage(p, spec, cfg)
		if err != nil {
			key := fmt.Sprintf("stages[%d]", i)
			if ke := (*keyError)(nil); errors.As(err, &ke) {
				key += "." + typ + "." + ke.key
			}
			probs = append(probs, p.problem(key, "stage %q: %v", spec.Name, err))
		}
		_, sink := st.(Sink)
		_, planner := st.(Planner)
		group = group && !planner
		if !p.Ingest.keeps() && group && readsLibrary(cfg) {
			probs = append(probs, p.problem("ingest.keep",
				"ingest: keep: false, but the stage %q runs on ingest's records as they are parsed and reads the tool library, known only once every dump is read",
				spec.Name))
		}
		if dropped == ingest && planner {
			probs = append(probs, p.problem("ingest.keep",
				"ingest: keep: false, but the stage %q reads its whole input before it starts, from the shards ingest would not keep", spec.Name))
		} else if dropped >= 0 && planner {
			probs = append(probs, p.problem(fmt.Sprintf("stages[%d].keep", dropped),
				"stage %q: keep: false, but the stage %q after it reads its whole input before it starts, from the shards %q would not keep",
				p.Stages[dropped].Name, spec.Name, p.Stages[dropped].Name))
		}
		if dropped >= ingest {
			took = true
			if !sink {
				dropped = none
			}
		}
		if !spec.keeps() {
			if sink {
				probs = append(probs, p.problem(fmt.Sprintf("stages[%d].keep", i),
					"stage %q: keep: false on an export, which writes no Parquet shards (its files are its output)", spec.Name))
				continue
			}
			dropped, took = i, false
		}
	}
	switch {
	case dropped == ingest && !took:
		probs = append(probs, p.problem("ingest.keep", "ingest: keep: false, but no stage runs after ingest: its records would go nowhere"))
	case dropped >= 0 && !took:
		probs = append(probs, p.problem(fmt.Sprintf("stages[%d].keep", dropped),
			"stage %q: keep: false on the last stage that runs: its records would go nowhere", p.Stages[dropped].Name))
	}
	return probs
}
