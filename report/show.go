package report

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// Journey states of a record at one stage.
const (
	StepKept     = "kept"     // in the stage's output
	StepRejected = "rejected" // in the stage's rejects, with its reason
	StepFiltered = "filtered" // dropped on purpose (not written anywhere)
	StepExported = "exported" // written by an export
	StepAbsent   = "absent"   // not there, and not there before either
	StepNotRun   = "not run"  // the stage is pending (no manifest, no workers' parts)
	StepSkipped  = "skipped"  // skip: true in the pipeline: the record goes on as the stage before had it
	// StepNotMerged: the stage has no manifest yet, only workers' parts
	// not merged (augment merge reads them).
	StepNotMerged = "not merged"
	StepNotKept   = "not kept" // the stage kept no records (keep: false), nor rejected this one
	// StepNotProcessed: the stage has not done the record's shard (a run
	// stopped before it did; the stage is partial).
	StepNotProcessed = "not processed"
)

// A Journey is one record's way through the stages of a run.
type Journey struct {
	ID    string `json:"id"`
	Steps []Step `json:"steps"`
	// Unmerged names the stages with workers' parts not merged yet: the
	// steps show them as the last merge (or none) left them.
	Unmerged []string `json:"unmerged,omitempty"`
}

// A Step is the record at one stage.
type Step struct {
	Stage  string         `json:"stage"` // the stage directory
	Status string         `json:"status"`
	Shard  string         `json:"shard,omitempty"`
	Record *record.Record `json:"record,omitempty"`
	Reject *RejectLine    `json:"reject,omitempty"`
	// Retry: the reject's reason is a teacher failure that may pass
	// (timeout, 429, 5xx, …): its shard is recorded without its key, and
	// the next run asks the record again.
	Retry bool `json:"retry,omitempty"`
	// Changes say how the record differs from the previous stage's.
	Changes []string `json:"changes,omitempty"`
	// Added lists the records the stage derived from this one (IDs
	// "<id>/…").
	Added []string `json:"added,omitempty"`
	// Filtered lists the filter reasons of the record's shard at the stage
	// (filtered records are not written anywhere, so which of them applied
	// is not known when there are several).
	Filtered []string `json:"filtered,omitempty"`
	// File, Line and Sample locate an exported sample (Line is 1-based; the
	// sample is read back for JSONL exports).
	File   string          `json:"file,omitempty"`
	Line   int             `json:"line,omitempty"`
	Sample json.RawMessage `json:"sample,omitempty"`
}

// sourceOf is the source part of a record ID ("glaive:3/neg1" → "glaive").
func sourceOf(id string) string {
	src, _, _ := strings.Cut(id, ":")
	return src
}

// shardName is a Parquet shard's name: "03-noise/part-glaive-00000.parquet"
// → "glaive-00000".
func shardName(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "part-"), filepath.Ext(path))
}

// found is a record located in a stage's shards.
type found struct {
	rec   *record.Record
	shard string // shard name
	index int    // position in the shard
	added []string
}

// find looks for id in the stage's Parquet shards of its source.
func (r *Run) find(st *Stage, id string) (*found, error) {
	src := sourceOf(id)
	var f *found
	for _, ref := range st.Parquet() {
		name := shardName(ref.Path)
		if !strings.HasPrefix(name, src+"-") {
			continue
		}
		i := 0
		err := shard.Scan(filepath.Join(r.Dir, ref.Path), func(rec *record.Record) error {
			switch {
			case rec.ID == id:
				if f == nil {
					f = &found{}
				}
				f.rec, f.shard, f.index = rec, name, i
			case strings.HasPrefix(rec.ID, id+"/"):
				if f == nil {
					f = &found{}
				}
				f.added = append(f.added, rec.ID)
			}
			i++
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return f, nil
}

// findReject looks for id in the stage's rejects.
func (r *Run) findReject(st *Stage, id string) (*RejectLine, error) {
	var out *RejectLine
	err := ScanRejects(r.Dir, st, func(rl RejectLine) error {
		if rl.ID == id {
			out = &rl
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return out, err
}

// Journey follows the record id through every stage.
func (r *Run) Journey(id string) (*Journey, error) {
	j := &Journey{ID: id}
	var prev *found
	// lost: a stage before rejected the record, or a stage that keeps its
	// records did not have it. Until then, where no stage before kept the
	// record (they kept none: keep: false), its shard is the one ingest
	// read its row into (rowShard).
	lost := false
	for i := range r.Stages {
		st := &r.Stages[i]
		step := Step{Stage: st.Dir}
		if st.Unmerged > 0 {
			j.Unmerged = append(j.Unmerged, st.Dir)
		}
		at := r.shardAt(id, prev, lost)
		switch {
		case st.Status == StatusSkipped:
			step.Status = StepSkipped
		case st.Manifest == nil && st.Unmerged > 0:
			step.Status = StepNotMerged
		case st.Manifest == nil:
			step.Status = StepNotRun
		case unprocessed(st, at):
			step.Status, step.Shard, prev, lost = StepNotProcessed, at, nil, true
		case st.Sink():
			if err := r.exportStep(st, id, prev, at, &step); err != nil {
				return nil, err
			}
		case st.NotKept():
			// Its rejects are on disk, its records are not: the record
			// goes on as the last kept stage had it.
			rj, err := r.findReject(st, id)
			if err != nil {
				return nil, err
			}
			switch {
			case rj != nil:
				step.Status, step.Reject, step.Retry, prev, lost = StepRejected, rj, llm.Transient(rj.Reason), nil, true
			case at != "" && notKeptShard(st, at):
				step.Status, step.Shard = StepNotKept, at
			default:
				step.Status = StepAbsent
			}
		default:
			f, err := r.find(st, id)
			if err != nil {
				return nil, err
			}
			if f != nil && f.rec != nil {
				step.Status, step.Record, step.Shard = StepKept, f.rec, f.shard
				if prev != nil && prev.rec != nil {
					step.Changes = Diff(prev.rec, f.rec)
					for _, a := range f.added {
						if !slices.Contains(prev.added, a) {
							step.Added = append(step.Added, a)
						}
					}
				} else {
					step.Added = f.added
				}
				prev = f
				break
			}
			rj, err := r.findReject(st, id)
			if err != nil {
				return nil, err
			}
			switch {
			case rj != nil:
				step.Status, step.Reject, step.Retry = StepRejected, rj, llm.Transient(rj.Reason)
			case at != "":
				sh, _ := st.Manifest.Shard(at)
				step.Status, step.Filtered = StepFiltered, Counts(sh.Filtered).Keys()
			default:
				step.Status = StepAbsent
			}
			prev, lost = nil, true
		}
		j.Steps = append(j.Steps, step)
	}
	for _, s := range j.Steps {
		if s.Status != StepAbsent && s.Status != StepNotRun && s.Status != StepSkipped && s.Status != StepNotMerged {
			return j, nil
		}
	}
	return j, fmt.Errorf("no record %q in any stage of %s", id, r.Dir)
}

// shardAt names the shard the record id is in before the next stage: the
// shard of the last stage that kept it (prev); else, unless it was lost,
// the ingest shard its row was read into, as no stage before kept it
// (rowShard); "" when not known.
func (r *Run) shardAt(id string, prev *found, lost bool) string {
	switch {
	case prev != nil && prev.rec != nil:
		return prev.shard
	case lost || prev != nil:
		return ""
	}
	return r.rowShard(id)
}

// rowShard names the ingest shard that read the row of id ("gl:3" → row 3
// of source gl), from ingest's manifest: a source's shards, in the order of
// their numbers, each read In rows of its dump, and a row's ID holds its
// 0-based index in the dump. "" for a record a stage added ("gl:3/neg1":
// its parent's shard does not say it exists), or a row no shard read.
func (r *Run) rowShard(id string) string {
	src, rest, ok := strings.Cut(id, ":")
	row, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil || row < 0 || len(r.Stages) == 0 || r.Stages[0].Type != "ingest" || r.Stages[0].Manifest == nil {
		return ""
	}
	type part struct {
		n    int64 // the shard's number
		name string
		in   int64
	}
	var parts []part
	for _, sh := range r.Stages[0].Manifest.Shards {
		num, ok := strings.CutPrefix(sh.Name, src+"-")
		n, err := strconv.ParseInt(num, 10, 64)
		if ok && err == nil {
			parts = append(parts, part{n, sh.Name, sh.In})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(a.n, b.n) })
	first := int64(0)
	for i, p := range parts {
		if p.n != int64(i) { // a shard missing from the manifest: rows after it are not placed
			return ""
		}
		if row < first+p.in {
			return p.name
		}
		first += p.in
	}
	return ""
}

// notKeptShard reports whether the stage's manifest names the shard's
// records as not kept.
func notKeptShard(st *Stage, name string) bool {
	sh, ok := st.Manifest.Shard(name)
	return ok && slices.ContainsFunc(sh.Outputs, func(o manifests.FileRef) bool { return o.NotKept })
}

// unprocessed reports whether the stage has not done the shard the record
// is in (at, shardAt): its manifest does not list it.
func unprocessed(st *Stage, at string) bool {
	if at == "" {
		return false
	}
	_, ok := st.Manifest.Shard(at)
	return !ok
}

// exportStep locates id's sample in an export: the export writes its input
// shard's records, less those it rejects, in order, to one file per shard.
// at is the shard the record is in (shardAt), prev the record where a stage
// before kept it.
func (r *Run) exportStep(st *Stage, id string, prev *found, at string, step *Step) error {
	rj, err := r.findReject(st, id)
	if err != nil {
		return err
	}
	if rj != nil {
		step.Status, step.Reject, step.Retry = StepRejected, rj, llm.Transient(rj.Reason)
		return nil
	}
	if at == "" {
		step.Status = StepAbsent
		return nil
	}
	sh, ok := st.Manifest.Shard(at)
	if !ok || len(sh.Inputs) == 0 {
		step.Status = StepAbsent
		return nil
	}
	if sh.Inputs[0].NotKept || prev == nil {
		// The export's input was not kept: which line holds the sample
		// is not known.
		step.Status, step.Shard = StepExported, at
		return nil
	}
	rejected, err := rejectedIDs(r.Dir, st)
	if err != nil {
		return err
	}
	line := 0
	err = shard.Scan(filepath.Join(r.Dir, sh.Inputs[0].Path), func(rec *record.Record) error {
		if !rejected[rec.ID] {
			line++
		}
		if rec.ID == id {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	err = nil
	step.Status, step.Shard, step.Line = StepExported, at, line
	for _, o := range sh.Outputs {
		if strings.Contains(filepath.Base(o.Path), "part-") {
			step.File = o.Path
		}
	}
	if strings.HasSuffix(step.File, ".jsonl") {
		step.Sample, err = readLine(filepath.Join(r.Dir, step.File), line)
	}
	return err
}

// readLine returns line n (1-based) of a file.
func readLine(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for i := 1; ; i++ {
		b, err := br.ReadBytes('\n')
		if i == n {
			return bytes.TrimRight(b, "\n"), nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s has no line %d", path, n)
		}
	}
}

// Diff says, one line each, how b differs from a: system prompt, tools
// added or removed or changed, turns added, removed or changed (aligned by
// a longest common subsequence), tags and lineage.
func Diff(a, b *record.Record) []string {
	var out []string
	if a.System != b.System {
		out = append(out, "~ system: "+printable(clip.Runes(oneLine(b.System), 100)))
	}
	at, bt := map[string]string{}, map[string]string{}
	for _, t := range a.Tools {
		at[t.Name] = toolSig(t)
	}
	for _, t := range b.Tools {
		bt[t.Name] = toolSig(t)
		switch old, ok := at[t.Name]; {
		case !ok:
			out = append(out, "+ tool "+printable(t.Name))
		case old != bt[t.Name]:
			out = append(out, "~ tool "+printable(t.Name)+" (definition changed)")
		}
	}
	for _, t := range a.Tools {
		if _, ok := bt[t.Name]; !ok {
			out = append(out, "- tool "+printable(t.Name))
		}
	}
	out = append(out, diffTurns(a.Messages, b.Messages)...)
	for _, t := range b.Tags {
		switch old := a.Tag(t.Key); {
		case old == "" && !hasTag(a, t.Key):
			out = append(out, printable(fmt.Sprintf("+ tag %s=%s", t.Key, t.Value)))
		case old != t.Value:
			out = append(out, printable(fmt.Sprintf("~ tag %s=%s (was %s)", t.Key, t.Value, old)))
		}
	}
	for _, t := range a.Tags {
		if !hasTag(b, t.Key) {
			out = append(out, printable(fmt.Sprintf("- tag %s=%s", t.Key, t.Value)))
		}
	}
	if len(b.Lineage) > len(a.Lineage) {
		for _, s := range b.Lineage[len(a.Lineage):] {
			l := "+ lineage " + s.Stage + " (" + s.Provider
			if s.Model != "" && s.Model != s.Provider {
				l += ", " + s.Model
			}
			out = append(out, l+")")
		}
	}
	return out
}

func hasTag(r *record.Record, key string) bool {
	return slices.ContainsFunc(r.Tags, func(t record.Tag) bool { return t.Key == key })
}

func toolSig(t record.Tool) string {
	return t.Description + "\x00" + string(t.Parameters) + "\x00" + string(t.Response)
}

func msgSig(m record.Message) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// diffTurns aligns two message lists by their longest common subsequence;
// a removed and an added turn of the same role at the same place read as
// one changed turn.
func diffTurns(a, b []record.Message) []string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if msgSig(a[i]) == msgSig(b[j]) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && msgSig(a[i]) == msgSig(b[j]):
			i, j = i+1, j+1
		case i < n && j < m && a[i].Role == b[j].Role && lcs[i+1][j+1] == lcs[i][j]:
			out = append(out, fmt.Sprintf("~ turn %d %s: %s", j, b[j].Role, changedParts(a[i], b[j])))
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, fmt.Sprintf("+ turn %d %s", j, TurnSummary(b[j])))
			j++
		default:
			out = append(out, fmt.Sprintf("- turn %d %s", i, TurnSummary(a[i])))
			i++
		}
	}
	return out
}

func changedParts(a, b record.Message) string {
	var parts []string
	if a.Content != b.Content {
		parts = append(parts, "content "+quote(b.Content))
	}
	if a.Reasoning != b.Reasoning {
		parts = append(parts, "reasoning "+quote(b.Reasoning))
	}
	if msgSig(record.Message{Calls: a.Calls}) != msgSig(record.Message{Calls: b.Calls}) {
		parts = append(parts, "calls "+callsText(b.Calls))
	}
	if msgSig(record.Message{Results: a.Results}) != msgSig(record.Message{Results: b.Results}) {
		parts = append(parts, "results "+resultsText(b.Results))
	}
	return strings.Join(parts, "; ")
}

// TurnSummary is one line about a message: its role and what it holds.
func TurnSummary(m record.Message) string {
	var parts []string
	if m.Reasoning != "" {
		parts = append(parts, "reasoning "+quote(m.Reasoning))
	}
	if m.Content != "" || len(m.Calls) == 0 && len(m.Results) == 0 {
		parts = append(parts, quote(m.Content))
	}
	if len(m.Calls) > 0 {
		parts = append(parts, "calls "+callsText(m.Calls))
	}
	if len(m.Results) > 0 {
		parts = append(parts, "results "+resultsText(m.Results))
	}
	return m.Role + ": " + strings.Join(parts, "; ")
}

func callsText(calls []record.Call) string {
	var s []string
	for _, c := range calls {
		s = append(s, printable(c.Name+clip.Runes(string(c.Arguments), 80)))
	}
	return strings.Join(s, ", ")
}

func resultsText(rs []record.Result) string {
	var s []string
	for _, r := range rs {
		s = append(s, printable(r.Name+" → "+clip.Runes(oneLine(r.Content), 80)))
	}
	return strings.Join(s, ", ")
}

func quote(s string) string { return fmt.Sprintf("%q", clip.Runes(oneLine(s), 100)) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// PrintJourney writes a journey for people.
func PrintJourney(w io.Writer, j *Journey) {
	fmt.Fprintf(w, "%s\n", j.ID)
	first := true // the first stage holding the record shows it whole
	gone := false // rejected or filtered: later stages cannot have it
	for _, s := range j.Steps {
		if gone && s.Status == StepAbsent {
			continue
		}
		gone = gone || s.Status == StepRejected || s.Status == StepFiltered || s.Status == StepNotProcessed
		head := fmt.Sprintf("%-14s %-9s", s.Stage, s.Status)
		switch s.Status {
		case StepKept:
			if !first && len(s.Changes) == 0 {
				head += " unchanged"
			}
		case StepRejected:
			// A detail is the reject's error text, which starts with the
			// reason already.
			detail := strings.TrimPrefix(s.Reject.Detail, s.Reject.Reason+": ")
			head += " " + s.Reject.Reason + ": " + printable(clip.Runes(oneLine(detail), 160))
			if s.Retry {
				head += " (asked again by the next run)"
			}
		case StepFiltered:
			if len(s.Filtered) > 0 {
				head += " by the stage's filter (" + strings.Join(s.Filtered, ", ") + ")"
			} else {
				head += " (not in the stage's output, though its shard counts no filtered record)"
			}
		case StepNotProcessed:
			head += " (shard " + s.Shard + ": the run stopped before this stage did it; rerun to resume)"
		case StepSkipped:
			head += " (skip: true: the record goes on as the stage before had it)"
		case StepNotMerged:
			head += " (workers' parts not merged yet: run augment merge)"
		case StepExported:
			if s.Line > 0 {
				head += fmt.Sprintf(" %s line %d", s.File, s.Line)
			} else {
				head += " (which line is not known: the export's input was not kept)"
			}
		}
		fmt.Fprintln(w, strings.TrimRight(head, " "))
		if s.Status == StepKept && first {
			first = false
			r := s.Record
			fmt.Fprintf(w, "%15s source %s row %d (%s), %d tools, %d turns, shard %s\n", "", printable(r.Source), r.Row, r.Format, len(r.Tools), len(r.Messages), s.Shard)
			for i, m := range r.Messages {
				fmt.Fprintf(w, "%15s turn %d %s\n", "", i, TurnSummary(m))
			}
		}
		for _, c := range s.Changes {
			fmt.Fprintf(w, "%15s %s\n", "", c)
		}
		for _, a := range s.Added {
			fmt.Fprintf(w, "%15s + record %s\n", "", a)
		}
		if len(s.Sample) > 0 {
			fmt.Fprintf(w, "%15s %s\n", "", printable(clip.Runes(string(s.Sample), 300)))
		}
	}
	if len(j.Unmerged) > 0 {
		fmt.Fprintln(w, unmergedNote(j.Unmerged))
	}
}

// PrintRecord writes one record for people: tools, turns, tags, lineage.
func PrintRecord(w io.Writer, r *record.Record) {
	fmt.Fprintf(w, "%s  source %s row %d (%s)\n", printable(r.ID), printable(r.Source), r.Row, r.Format)
	if r.System != "" {
		fmt.Fprintf(w, "  system: %s\n", printable(clip.Runes(oneLine(r.System), 200)))
	}
	for _, t := range r.Tools {
		fmt.Fprintf(w, "  tool %s: %s\n", printable(t.Name), printable(clip.Runes(oneLine(t.Description), 100)))
	}
	for i, m := range r.Messages {
		fmt.Fprintf(w, "  [%d] %s\n", i, printable(m.Role))
		if m.Reasoning != "" {
			fmt.Fprintf(w, "      reasoning: %s\n", printable(m.Reasoning))
		}
		if m.Content != "" {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(printable(m.Content), "\n", "\n      "))
		}
		for _, c := range m.Calls {
			fmt.Fprintf(w, "      call %s %s\n", printable(c.Name), printable(string(c.Arguments)))
		}
		for _, res := range m.Results {
			fmt.Fprintf(w, "      result %s: %s\n", printable(res.Name), printable(clip.Runes(oneLine(res.Content), 300)))
		}
	}
	var tags []string
	for _, t := range r.Tags {
		tags = append(tags, t.Key+"="+t.Value)
	}
	fmt.Fprintf(w, "  tags: %s\n", printable(strings.Join(tags, " ")))
	var steps []string
	for _, s := range r.Lineage {
		steps = append(steps, s.Stage+"("+s.Provider+")")
	}
	fmt.Fprintf(w, "  lineage: %s\n", printable(strings.Join(steps, " → ")))
}

// printable is s for a terminal: a character a terminal would act on
// rather than show (control characters, escape sequences' ESC, bidi
// overrides and other format characters) is written as the journey's
// quoted text writes it (\x1b, \r, \u202e), and so is a byte that is not
// UTF-8 (\xff); line breaks and tabs stay as they are.
func printable(s string) string {
	clean := true
	for _, c := range s {
		if c == utf8.RuneError || c != '\n' && c != '\t' && !strconv.IsPrint(c) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case c == '\n' || c == '\t' || strconv.IsPrint(c):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// Records calls fn for each record of the stage whose tags include every
// key=value of where (a value "*" matches any value of the key), in shard
// order, until fn returns false.
func (r *Run) Records(st *Stage, where map[string]string, fn func(*record.Record) bool) error {
	err := func() error {
		for _, ref := range st.Parquet() {
			if ref.NotKept {
				return notKeptError(ref)
			}
			err := shard.Scan(filepath.Join(r.Dir, ref.Path), func(rec *record.Record) error {
				for k, v := range where {
					if !hasTag(rec, k) || v != "*" && rec.Tag(k) != v {
						return nil
					}
				}
				if !fn(rec) {
					return errStop
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}()
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}
