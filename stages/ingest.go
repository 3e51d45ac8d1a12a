package stages

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/storage"
)

// ingestVersion is bumped when ingest's output for the same dump changes
// (it also covers the readers in stages/formats).
// 3: a broken JSON Lines line or array element costs one row, not the rest
// of the dump; rows over max_row_bytes are row_too_large; U+FFFD
// replacements are tagged.
// 4: skipping a broken array element looks for the next element within
// max_row_bytes only, whatever a read brought (the result no longer
// depends on read sizes).
// 5: a dump that starts with a UTF-16 or UTF-32 byte order mark, or with
// '[' or '{' beside a NUL byte, stops the reading with a message that says
// so (it was one bad_json row); reject
// details name keys repeated once invalid UTF-8 is replaced; a call whose
// arguments hold a number beyond a float's range is number_out_of_range;
// a schema "type" that is neither a name nor a list of names is dropped;
// a null glaive chat, ToolACE system, from or value, or sharegpt content is
// its format's bad field or turn; half a surrogate pair inside a JSON text
// or Python call held in a string is tagged repairs=lone_surrogate; glaive
// chats with CRLF line ends are read.
const ingestVersion = 5

// ingestSettings is what ingest's output depends on besides the dump bytes.
type ingestSettings struct {
	Source       Source `json:"source"`
	ShardSize    int    `json:"shard_size"`
	RowGroupRows int    `json:"row_group_rows"`
	JSONL        bool   `json:"jsonl"`
	Compression  string `json:"compression"`
}

// ingestSettingsOf returns source s's settings under output o.
func ingestSettingsOf(o Output, s Source) ingestSettings {
	return ingestSettings{Source: s, ShardSize: o.ShardSize, RowGroupRows: o.RowGroupRows, JSONL: o.JSONL, Compression: o.Compression}
}

// ingest parses every source into shards of at most ShardSize records
// ("<source>-00000" …), writes rejected rows with their raw text, and writes
// each source's distinct tools ("tools-<source>.jsonl"), from which the
// run's tool library is built. A source whose dump and settings are
// unchanged is skipped as a whole.
func (r *Runner) ingest(ctx context.Context, sr stageRun) (stageResult, error) {
	in, err := r.openIngest(ctx, sr)
	if err != nil {
		return in.res, err
	}
	for i := range in.srcs {
		if !in.srcs[i].current {
			if err := r.readSource(ctx, in, i, nil); err != nil {
				return in.res, err
			}
		}
	}
	return in.res, r.closeIngest(in)
}

// An ingestPass is ingest's pass over the sources: opened (openIngest), its
// sources read (readSource), closed (closeIngest).
type ingestPass struct {
	sr      stageRun
	old, m  *manifests.Stage
	res     stageResult
	changed bool // the manifest is written again
	srcs    []sourceRead
}

// A sourceRead is one source of an ingestPass.
type sourceRead struct {
	src      Source
	path, fp string
	sum      string // the dump's SHA-256 when hashed before reading, else ""
	current  bool   // its earlier shards are up to date
	shards   []manifests.Shard
}

// openIngest hashes each source that has earlier shards and finds which
// are up to date, whose shards it takes as they are.
func (r *Runner) openIngest(ctx context.Context, sr stageRun) (*ingestPass, error) {
	in := &ingestPass{sr: sr, res: stageResult{report: StageReport{Name: sr.name, Type: sr.typ, Dir: sr.rel}}}
	old, err := r.prepareStageDir(sr)
	if err != nil {
		return in, err
	}
	in.old = old
	cfgs := make([]ingestSettings, len(r.p.Sources))
	for i, s := range r.p.Sources {
		cfgs[i] = ingestSettingsOf(r.p.Output, s)
	}
	fp, cfgJSON, err := r.fingerprint("ingest", ingestVersion, cfgs, nil, nil)
	if err != nil {
		return in, err
	}
	in.m = &manifests.Stage{Name: sr.name, Type: sr.typ, Version: ingestVersion, Tool: r.o.Version,
		ConfigHash: fp, Config: cfgJSON, Started: time.Now().UTC()}
	in.changed = old == nil || old.ConfigHash != fp
	for _, cfg := range cfgs {
		src := cfg.Source
		s := sourceRead{src: src, path: r.p.Resolve(src.Path)}
		if s.fp, _, err = r.fingerprint("ingest", ingestVersion, cfg, nil, nil); err != nil {
			return in, err
		}
		// With earlier output the dump is hashed first, to skip it when
		// unchanged; otherwise ingest hashes it while reading it.
		if prev := r.sourceShards(old, src.Name); len(prev) > 0 {
			if s.sum, err = r.sourceSum(ctx, s.path, prev); err != nil {
				return in, fmt.Errorf("source %q: %w", src.Name, err)
			}
			if allMatch(prev, sourceKey(s.fp, s.path, s.sum), r, sr.drop) {
				r.o.Log.Info("skip source", "stage", sr.name, "source", src.Name, "shards", len(prev), "reason", "up to date")
				s.current, s.shards = true, prev
			}
		}
		in.srcs = append(in.srcs, s)
	}
	return in, nil
}

// readSource reads source i of in. An up-to-date source is read again
// only to hand its records on (runFeed): its shards must come out as
// recorded. hand, when not nil, takes each shard's records as the shard is
// written (see ingestRead).
func (r *Runner) readSource(ctx context.Context, in *ingestPass, i int, hand *handOff) error {
	s := &in.srcs[i]
	if r.o.Explain && !s.current {
		r.o.Log.Info("explain", "stage", in.sr.name, "source", s.src.Name, "why", "no earlier output, or the dump or its settings changed")
	}
	if !s.current {
		in.changed = true
		if err := r.forgetShards(in.sr, in.old, r.sourceShards(in.old, s.src.Name)); err != nil {
			return err
		}
	}
	start := time.Now()
	shards, err := r.ingestSource(ctx, in.sr, s.src, s.path, s.fp, s.sum, hand)
	if err != nil {
		return fmt.Errorf("source %q: %w", s.src.Name, err)
	}
	if s.current {
		for j, sh := range shards {
			if j >= len(s.shards) || sh.Name != s.shards[j].Name || !sameCounts(sh.Counts, s.shards[j].Counts) {
				return fmt.Errorf("source %q: read again to hand its records on, it gave other shards than ingest's manifest records: remove %s to make ingest again", s.src.Name, in.sr.rel)
			}
		}
		if len(shards) != len(s.shards) {
			return fmt.Errorf("source %q: read again to hand its records on, it gave %d shards, not the %d ingest's manifest records: remove %s to make ingest again", s.src.Name, len(shards), len(s.shards), in.sr.rel)
		}
		return nil
	}
	var c manifests.Counts
	for _, sh := range shards {
		c.Add(sh.Counts)
	}
	r.o.Log.Info("source done", "stage", in.sr.name, "source", s.src.Name, "shards", len(shards), "rows", c.In,
		"records", c.Out, "rejected", manifests.Sum(c.Rejected), "filtered", manifests.Sum(c.Filtered),
		"seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	s.shards = shards
	return nil
}

// skippedReport is in's report when the run stops before any source is
// read: the up-to-date sources, skipped, with their recorded counts.
func (in *ingestPass) skippedReport() StageReport {
	rep := in.res.report
	for _, s := range in.srcs {
		if s.current {
			rep.Skipped += len(s.shards)
			for _, sh := range s.shards {
				rep.Counts.Add(sh.Counts)
			}
		}
	}
	return rep
}

// closeIngest logs and reports each source, and writes ingest's manifest
// when a source was made again.
func (r *Runner) closeIngest(in *ingestPass) error {
	sr, m, res := in.sr, in.m, &in.res
	var partial *PartialError // the first source with an unread part that does not allow it
	for _, s := range in.srcs {
		if s.current {
			res.report.Skipped += len(s.shards)
		} else {
			res.report.Ran += len(s.shards)
		}
		m.Shards = append(m.Shards, s.shards...)
		partial = r.checkSource(s.src, s.shards, partial)
	}
	for _, s := range m.Shards {
		m.Totals.Add(s.Counts)
		for _, o := range s.Outputs {
			if strings.HasPrefix(filepath.Base(o.Path), "tools-") {
				r.libRefs = append(r.libRefs, o)
			}
		}
	}
	res.report.Counts = m.Totals
	res.outputs = outputsOf(m, shardNames(m))
	if !in.changed {
		if stale := r.staleNotKept(in.old); len(stale) > 0 {
			// Left by an augment that kept them (see owned).
			if err := r.removeOwned(sr.rel, stale); err != nil {
				return err
			}
		}
		return partialErr(partial)
	}
	for _, s := range m.Shards {
		if s.Unread != nil {
			name, _, _ := cutShardIndex(s.Name)
			m.Notes = append(m.Notes, fmt.Sprintf("source %s: %s", name, unreadText(*s.Unread)))
		}
	}
	m.Finished = time.Now().UTC()
	m.Seconds = m.Finished.Sub(m.Started).Seconds()
	// What the earlier manifest named and this one does not goes first: a
	// kill in between leaves the old manifest, which the next run checks.
	if old := in.old; old != nil {
		m.Superseded = superseded(old, func(string) bool { return false })
		if err := r.removeReplaced(sr, m); err != nil {
			return err
		}
		m.Superseded = nil
	}
	if err := sr.out.WriteJSON(manifestFile, m); err != nil {
		return err
	}
	return partialErr(partial)
}

// forgetShards rewrites the earlier manifest old on disk without the shards
// gone, which are about to be made again, before their files are rewritten:
// a kill in between must not leave the manifest naming bytes that are no
// longer there. Their files move to old's Superseded, so that the run's end
// still deletes those it does not write again.
func (r *Runner) forgetShards(sr stageRun, old *manifests.Stage, gone []manifests.Shard) error {
	if old == nil || len(gone) == 0 {
		return nil
	}
	names := map[string]bool{}
	for _, s := range gone {
		names[s.Name] = true
	}
	old.Superseded = superseded(&manifests.Stage{Superseded: old.Superseded, Shards: gone}, func(string) bool { return false })
	old.Shards = slices.DeleteFunc(old.Shards, func(s manifests.Shard) bool { return names[s.Name] })
	old.Totals = manifests.Counts{}
	for _, s := range old.Shards {
		old.Totals.Add(s.Counts)
	}
	return sr.out.WriteJSON(manifestFile, old)
}

// partialErr returns p as an error, nil when p is nil.
func partialErr(p *PartialError) error {
	if p == nil {
		return nil
	}
	return p
}

// checkSource warns about a source that gave no rows or could not be read
// to its end, and returns partial, or the source's PartialError when it is
// the first and the source does not allow it.
func (r *Runner) checkSource(src Source, shards []manifests.Shard, partial *PartialError) *PartialError {
	var in int64
	for _, s := range shards {
		in += s.In
	}
	if in == 0 && (len(shards) == 0 || shards[0].Unread == nil) {
		r.o.Log.Warn(fmt.Sprintf("source %s: 0 rows", src.Name), "path", src.Path)
	}
	if len(shards) == 0 || shards[0].Unread == nil {
		return partial
	}
	u := *shards[0].Unread
	r.o.Log.Warn(fmt.Sprintf("source %s: the dump could not be read to its end", src.Name), "path", src.Path,
		"unread_bytes", u.Bytes, "unread_rows_estimated", u.Rows, "offset", u.Offset, "reason", u.Reason, "allow_partial", src.AllowPartial)
	if partial == nil && unreadRefused(src, shards) {
		partial = &PartialError{Source: src.Name, Unread: u}
	}
	return partial
}

// unreadRefused reports whether a source's shards record a part of its
// dump left unread, which the source does not allow (allow_partial): the
// run stops (checkSource's PartialError).
func unreadRefused(src Source, shards []manifests.Shard) bool {
	return len(shards) > 0 && shards[0].Unread != nil && !src.AllowPartial
}

// sourceKey is the key of every shard of a source: its ingest settings and
// the dump's content.
func sourceKey(fingerprint, path, sum string) string {
	return shardKey(fingerprint, "", manifests.FileRef{Path: filepath.Base(path), SHA256: sum})
}

func shardNames(m *manifests.Stage) []shardInput {
	var ins []shardInput
	for _, s := range m.Shards {
		ins = append(ins, shardInput{name: s.Name})
	}
	return ins
}

// sourceShards returns the shards an earlier run recorded for a source.
func (r *Runner) sourceShards(old *manifests.Stage, source string) []manifests.Shard {
	if old == nil {
		return nil
	}
	var out []manifests.Shard
	for _, s := range old.Shards {
		if name, _, ok := cutShardIndex(s.Name); ok && name == source {
			out = append(out, s)
		}
	}
	return out
}

// cutShardIndex splits "toolace-00012" into "toolace" and "00012".
func cutShardIndex(shardName string) (string, string, bool) {
	i := strings.LastIndexByte(shardName, '-')
	if i < 0 {
		return "", "", false
	}
	return shardName[:i], shardName[i+1:], true
}

// allMatch reports whether every shard has key and its outputs (drop:
// ingest keeps no shards in this run, see outputsExist).
func allMatch(shards []manifests.Shard, key string, r *Runner, drop bool) bool {
	for _, s := range shards {
		if s.Key != key || !r.outputsExist(s, drop) {
			return false
		}
	}
	return true
}

// rawBatch is a part of a shard: consecutive raw rows of one source, of
// about partBytes (a shard holds ShardSize rows).
type rawBatch struct {
	index int  // shard number
	part  int  // the part's number in its shard, from 0
	last  bool // the shard's last part (it may have no rows)
	rows  []rawRow
	first int64 // row index of rows[0]
	// chunks hold the texts of rows (see readBatches); release hands them
	// back to pool
	chunks []*[]byte
	pool   *rowChunks
}

// A rawRow is one row's bytes, or a row the scanner could not frame (bad
// set, text its raw bytes or their start).
type rawRow struct {
	text  []byte
	bad   *formats.RowError
	quick bool // cut at the layout's separator (formats.Scanner.Quick)
}

// A PartialError says that part of a source's dump could not be read and
// the source does not set allow_partial. Ingest's output and manifest
// (with the unread part) are written; running again fails the same way
// until the dump is repaired or allow_partial is set, so it is not a
// failure to resume from.
type PartialError struct {
	Source string
	Unread manifests.Unread
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("source %q: %s; repair the dump, or set allow_partial: true on the source to go on without that part",
		e.Source, unreadText(e.Unread))
}

func unreadText(u manifests.Unread) string {
	if u.Bytes == 0 {
		// Nothing followed, or nothing after could be decoded (a
		// damaged compressed dump).
		return fmt.Sprintf("nothing could be read past byte offset %d: %s", u.Offset, u.Reason)
	}
	rows := fmt.Sprintf("about %d rows", u.Rows)
	switch {
	case u.Rows == 0: // no row read before to estimate from
		rows = "rows unknown"
	case u.Rows == 1:
		rows = "about 1 row"
	}
	return fmt.Sprintf("%d bytes (%s) from byte offset %d were not read: %s", u.Bytes, rows, u.Offset, u.Reason)
}

// quickFraming lets ingest cut one-element-per-line arrays at the learned
// separator (formats.Scanner.SetQuick); tests turn it off for the full
// scan's outputs.
var quickFraming = true

// errFramingDoubt: a row cut at the layout's separator is not the one the
// full scan frames; the source is read again with the full scan.
var errFramingDoubt = errors.New("a row cut at the layout's separator is not one framed object")

// ingestSource reads one dump, parses and writes its shards. When a source
// keeps every row, rows may be cut at the layout's separator: a row Parse
// rejects is then checked against the full scan (formats.Framed), and if it
// is not the full scan's row the shards written are removed and the dump is
// read again with the full scan, so the outputs are the full scan's.
// A source whose records are handed on (hand, see ingestRead) is read with
// the full scan: records handed on cannot be taken back.
// sum is the dump's SHA-256 when the caller already hashed it, else "".
func (r *Runner) ingestSource(ctx context.Context, sr stageRun, src Source, path, fingerprint, sum string, hand *handOff) ([]manifests.Shard, error) {
	quick := quickFraming && src.Fraction == 0 && hand == nil // a filtered row is never parsed, so never checked
	shards, err := r.ingestRead(ctx, sr, src, path, fingerprint, sum, quick, hand)
	if !errors.Is(err, errFramingDoubt) {
		return shards, err
	}
	r.o.Log.Info("source read again", "stage", sr.name, "source", src.Name, "reason", err.Error())
	if err := r.removeOutputs(sr, shards); err != nil {
		return nil, err
	}
	return r.ingestRead(ctx, sr, src, path, fingerprint, sum, false, nil)
}

// A handOff takes ingest's shards on as they are parsed, when ingest keeps
// no shards (runFeed).
type handOff struct {
	// take takes the records of ingest's shard sh, as a read of its
	// Parquet shard would give them, once the shard is written (before
	// its key is known: the dump is not hashed yet). sampleRows estimates
	// the records the shard's source hands on in all (shardSampleRows).
	take func(sh manifests.Shard, recs []*record.Record, sampleRows int64) error
	// slots holds a token for each shard being read, parsed or worked on
	// after ingest: the reading of a shard starts once a token is free,
	// and the stages after ingest free it when they are done with the
	// shard. Its capacity bounds the shards in memory.
	slots chan struct{}
}

// hold takes a slot for the next shard, waiting for a free one.
func (h *handOff) hold(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// free frees a shard's slot.
func (h *handOff) free() { <-h.slots }

// shardSampleRows estimates, from shard sh of src alone, how many records
// src's dump of size bytes hands on: its records for each of its rowBytes
// bytes of rows, times size, less a fifth, and no more than the source's
// limit allows. It is deterministic (the shard's own counts), and a low
// estimate for a dump of rows of even length: the report's token sample
// is drawn for a lower bound of the rows (see Runner.sampleRows).
func shardSampleRows(src Source, size int64, sh manifests.Shard, rowBytes int64) int64 {
	if rowBytes <= 0 || size <= 0 || sh.In == 0 {
		return sh.Out
	}
	est := float64(sh.Out) * float64(size) / float64(rowBytes) * 0.8
	if src.Limit > 0 {
		est = min(est, float64(src.Limit)*float64(sh.Out)/float64(sh.In))
	}
	return max(sh.Out, int64(est))
}

// removeOutputs removes the files the shards' outputs name (the reading
// that wrote them is void): none of them is left for the next reading not
// to write.
func (r *Runner) removeOutputs(sr stageRun, shards []manifests.Shard) error {
	for _, sh := range shards {
		for _, o := range sh.Outputs {
			if o.NotKept {
				continue
			}
			if err := sr.out.Remove(filepath.Base(o.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			r.wrote.Delete(o.Path)
		}
	}
	return nil
}

// ingestRead is one reading of the dump for ingestSource. The rows are
// handed to the workers in parts of about partBytes as they are read, so
// parsing starts with the first part rather than after a whole shard's
// rows, and one shard's parts (the last shard's too) are parsed on every
// CPU; the worker that parses a shard's last part writes the shard. With
// quick, it returns errFramingDoubt and the shards written so far when a
// quick row is not framed.
//
// With hand, each shard's records are handed on once the shard is written
// (a shard of ingest not kept: sr.drop), in the form a read of the shard
// gives them; see handOff.
func (r *Runner) ingestRead(ctx context.Context, sr stageRun, src Source, path, fingerprint, sum string, quick bool, hand *handOff) ([]manifests.Shard, error) {
	// The dump, wherever it is stored, decompressed; Parquet rows arrive
	// as JSON Lines. Progress counts stored bytes.
	f, err := r.src.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if sum != "" {
		f.SkipSum() // hashed already: not twice
	}
	size := f.Size
	prog := r.newProgressBytes(sr.name+" "+src.Name, size)
	defer prog.done()
	f.Progress(prog.add)
	in := &countingReader{r: f}
	sc := formats.NewScanner(in)
	sc.SetMaxRowBytes(int(src.MaxRowBytes))
	sc.SetQuick(quick)
	g, gctx := errgroup.WithContext(ctx)
	// One more worker than CPUs: a worker waiting for its shard's fsync
	// leaves its CPU to another. Memory grows with workers × shard size.
	workers := runtime.NumCPU() + 1
	g.SetLimit(workers + 1)
	var mu sync.Mutex
	var shards []manifests.Shard
	// Distinct tools only: memory must grow with the number of distinct
	// tools, not with the number of records. Ranked by row, so that the
	// tool kept of equal ones does not depend on which worker came first.
	var tools toollib.Set
	batches := make(chan rawBatch)
	parts := &shardParts{m: map[int]*partsOf{}}
	chunks := &rowChunks{}
	var unread *formats.ScanError
	var read int64 // rows read before unread
	g.Go(func() error {
		defer close(batches)
		var err error
		read, unread, err = r.readBatches(gctx, sc, src, batches, chunks, hand)
		r.loadTokens() // while the last parts are parsed and written
		return err
	})
	for range workers {
		g.Go(func() error {
			for b := range batches {
				start := time.Now()
				o, ts, err := r.parsePart(src, sr, b)
				if err != nil {
					return err
				}
				mu.Lock()
				tools.AddSet(ts, int(b.first))
				mu.Unlock()
				o, start = parts.add(b, o, start)
				if o == nil { // other parts of the shard are still being parsed
					continue
				}
				sh, err := r.writeShard(context.Background(), sr, nil, o)
				if err != nil {
					return err
				}
				sh.Seconds = time.Since(start).Seconds()
				mu.Lock()
				shards = append(shards, sh)
				mu.Unlock()
				if hand != nil {
					for _, rec := range o.kept {
						normalize(rec)
					}
					if err := hand.take(sh, o.kept, shardSampleRows(src, size, sh, o.rowBytes)); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if errors.Is(err, errFramingDoubt) {
			return shards, err
		}
		return nil, err
	}
	if unread != nil {
		// Offsets are in the decoded rows: count the rest of them, as far
		// as a damaged compressed dump lets them be decoded.
		if _, err := io.Copy(io.Discard, in); err != nil {
			if _, ok := errors.AsType[*storage.DamagedError](err); !ok {
				return nil, err
			}
		}
		size = in.n
	}
	if sum == "" {
		// The key covers the whole dump, also when a limit or broken
		// framing stopped the reading early.
		if sum, err = f.Sum(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(shards, func(a, b manifests.Shard) int { return strings.Compare(a.Name, b.Name) })
	if len(shards) == 0 { // an empty dump still gets one (empty) shard
		o, _, _ := r.parsePart(src, sr, rawBatch{})
		sh, err := r.writeShard(context.Background(), sr, nil, o)
		if err != nil {
			return nil, err
		}
		shards = append(shards, sh)
		if hand != nil {
			if err := hand.hold(ctx); err != nil {
				return nil, err
			}
			if err := hand.take(sh, nil, 0); err != nil {
				return nil, err
			}
		}
	}
	if unread != nil {
		u := manifests.Unread{Offset: unread.Offset, Bytes: max(0, size-unread.Offset), Reason: unread.Msg}
		if read > 0 && unread.Offset > 0 && u.Bytes > 0 {
			u.Rows = max(1, (u.Bytes*read+unread.Offset-1)/unread.Offset)
		}
		shards[0].Unread = &u
	}
	key := sourceKey(fingerprint, path, sum)
	for i := range shards {
		shards[i].Key = key
		shards[i].Inputs = []manifests.FileRef{{Path: filepath.Base(path), SHA256: sum, Bytes: f.Size, Source: f.Pin}}
		notKeptDigest(&shards[i], shardKey(key, shards[i].Name)) // a shard not kept (sr.drop): its hash stands for its records
	}
	lib := toollib.New(tools.Tools())
	ref, err := shard.WriteJSONL(sr.out, "tools-"+src.Name+".jsonl", lib.Tools)
	if err != nil {
		return nil, err
	}
	ref.Rows = int64(len(lib.Tools))
	shards[0].Outputs = append(shards[0].Outputs, ref)
	return shards, nil
}

// rowChunk is the size of the chunks readBatches copies rows into; a row
// larger than a quarter of it gets a buffer of its own.
const rowChunk = 256 << 10

// rowChunks recycles the chunks of one source's batches: a worker hands a
// batch's chunks back once its rows are parsed (Parse keeps no reference to
// a row). Chunks are kept until the source is read, so the memory they
// hold is that of the most batches in flight at once; reusing them spares
// allocating, zeroing and faulting in fresh memory for every batch.
type rowChunks struct {
	mu   sync.Mutex
	free []*[]byte
}

func (c *rowChunks) get() *[]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		return b
	}
	b := make([]byte, rowChunk)
	return &b
}

// release hands the batch's chunks back; its rows are no longer valid.
func (b *rawBatch) release() {
	if len(b.chunks) == 0 {
		return
	}
	b.pool.mu.Lock()
	b.pool.free = append(b.pool.free, b.chunks...)
	b.pool.mu.Unlock()
	b.chunks = nil
}

// partBytes is about how many bytes of rows a part of a shard holds: a
// worker parses it in some milliseconds, and the first part is handed on
// long before a shard's rows are read.
var partBytes = 4 * rowChunk

// readBatches cuts the dump into the parts of its shards. The scanner reuses its
// buffer, so rows are copied, back to back, into fixed-size chunks that
// the batch holds until a worker has parsed it and releases them (before
// writing its shard): memory follows the rows in flight, without a copy
// per row. It returns the rows
// read and, when the scanner had to stop early, its *formats.ScanError
// (the rest of the dump is unread).
//
// With hand, a shard's reading starts once it holds a slot (handOff).
func (r *Runner) readBatches(ctx context.Context, sc *formats.Scanner, src Source, out chan<- rawBatch, chunks *rowChunks, hand *handOff) (int64, *formats.ScanError, error) {
	b := rawBatch{pool: chunks}
	var free []byte       // the rest of the batch's last chunk
	inShard, held := 0, 0 // rows of the current shard read; bytes of b's rows
	send := func(last bool) error {
		b.last = last
		select {
		case out <- b:
		case <-ctx.Done():
			b.release()
			return ctx.Err()
		}
		free, held = nil, 0
		next := rawBatch{index: b.index, part: b.part + 1, rows: make([]rawRow, 0, len(b.rows)), pool: chunks}
		if last {
			next.index, next.part, inShard = b.index+1, 0, 0
		}
		b = next
		return nil
	}
	copyRow := func(row []byte) []byte {
		if len(row) > rowChunk/4 {
			return slices.Clone(row)
		}
		if len(row) > len(free) {
			c := chunks.get()
			b.chunks = append(b.chunks, c)
			free = *c
		}
		t := free[:len(row):len(row)]
		copy(t, row)
		free = free[len(row):]
		return t
	}
	var read int64
	var unread *formats.ScanError
	for src.Limit == 0 || read < src.Limit {
		row, idx, err := sc.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var bad *formats.RowError
		if err != nil {
			var re *formats.RowError // declared here: its address escapes
			switch {
			case errors.As(err, &unread):
			case errors.As(err, &re):
				bad, row = re, re.Raw
			default:
				return read, nil, err
			}
		}
		if unread != nil {
			break
		}
		if held >= partBytes {
			if err := send(false); err != nil {
				return read, nil, err
			}
		}
		if inShard == 0 && hand != nil {
			if err := hand.hold(ctx); err != nil {
				return read, nil, err
			}
		}
		if len(b.rows) == 0 {
			b.first = idx
		}
		text := copyRow(row)
		if bad != nil {
			bad.Raw = text // it was the scanner's
		}
		b.rows = append(b.rows, rawRow{text: text, bad: bad, quick: bad == nil && sc.Quick()})
		held += len(text)
		read++
		if inShard++; inShard == r.p.Output.ShardSize {
			if err := send(true); err != nil {
				return read, nil, err
			}
		}
	}
	if inShard > 0 { // the shard's last part, with no rows when the one before was full
		return read, unread, send(true)
	}
	return read, unread, nil
}

// parsePart parses one part of a shard into what the part's rows became,
// with the distinct tools of the records kept, in row order; or
// errFramingDoubt for a quick row that is not framed.
func (r *Runner) parsePart(src Source, sr stageRun, b rawBatch) (*shardOut, *toollib.Set, error) {
	name := fmt.Sprintf("%s-%05d", src.Name, b.index)
	o := &shardOut{sh: manifests.Shard{Name: name}}
	var tools toollib.Set
	var steps stepper // the part's records share their lineage
	// formats.Parse's records pass shard.Check when the source name is
	// valid UTF-8 (Parse's contract, which its fuzz targets hold): they
	// are checked only for a source named otherwise (CheckName allows none).
	parsedOK := utf8.ValidString(src.Name)
	for i, rr := range b.rows {
		row, raw := b.first+int64(i), rr.text
		o.sh.In++
		o.rowBytes += int64(len(raw))
		if src.Fraction > 0 && !keepFraction(r.p.Seed, src.Name, row, src.Fraction) {
			o.filter("fraction")
			continue
		}
		if rr.bad != nil {
			o.reject(shard.Reject{Stage: sr.name, ID: fmt.Sprintf("%s:%d", src.Name, row),
				Source: src.Name, Row: row, Reason: rr.bad.Reason, Detail: rr.bad.Error(), Raw: string(raw)})
			continue
		}
		rec, err := formats.Parse(src.Format, src.Name, row, raw)
		// A row jsontree parses is framed (formats.Framed); only a
		// rejected one needs the check.
		if err != nil && rr.quick && !formats.Framed(raw) {
			b.release()
			return nil, nil, errFramingDoubt
		}
		if err != nil {
			reason, ok := contract.ReasonOf(err)
			if !ok {
				reason = "parse_error"
			}
			o.reject(shard.Reject{Stage: sr.name, ID: fmt.Sprintf("%s:%d", src.Name, row),
				Source: src.Name, Row: row, Reason: reason, Detail: err.Error(), Raw: string(raw)})
			continue
		}
		if !parsedOK {
			if reason, err := shard.Check(rec); err != nil {
				o.reject(shard.Reject{Stage: sr.name, ID: rec.ID, Source: src.Name, Row: row,
					Reason: reason, Detail: err.Error(), Raw: string(raw)})
				continue
			}
		}
		steps.add(rec, sr.name, "rule", "")
		if rp := rec.Tag("repairs"); rp != "" {
			for _, kind := range strings.Split(rp, ",") {
				o.sh.Counters = incr(o.sh.Counters, "repair."+kind)
			}
		}
		for _, t := range rec.Tools {
			tools.Add(t, 0)
		}
		o.keep(rec)
	}
	b.release() // the rows are parsed: their memory goes to the next parts
	return o, &tools, nil
}

// shardParts gathers the parsed parts of the shards being parsed.
type shardParts struct {
	mu sync.Mutex
	m  map[int]*partsOf // by shard number
}

// partsOf is one shard's parts parsed so far.
type partsOf struct {
	outs  []*shardOut // by part number; nil while the part is parsed
	got   int
	total int // the number of parts, once the last is parsed; else 0
	start time.Time
}

// add records o, the parsed part b started at start. When o completes its
// shard it returns the shard's parts joined in row order, and when the
// shard's first part started; else nil.
func (sp *shardParts) add(b rawBatch, o *shardOut, start time.Time) (*shardOut, time.Time) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	p := sp.m[b.index]
	if p == nil {
		p = &partsOf{start: start}
		sp.m[b.index] = p
	}
	if b.part >= len(p.outs) {
		p.outs = append(p.outs, make([]*shardOut, b.part+1-len(p.outs))...)
	}
	p.outs[b.part] = o
	p.got++
	if b.last {
		p.total = b.part + 1
	}
	if start.Before(p.start) {
		p.start = start
	}
	if p.total == 0 || p.got < p.total {
		return nil, time.Time{}
	}
	delete(sp.m, b.index)
	if len(p.outs) == 1 {
		return p.outs[0], p.start
	}
	all := &shardOut{sh: manifests.Shard{Name: o.sh.Name}}
	n := 0
	for _, q := range p.outs {
		n += len(q.kept)
	}
	all.kept = make([]*record.Record, 0, n)
	for _, q := range p.outs {
		all.sh.Counts.Add(q.sh.Counts)
		all.rowBytes += q.rowBytes
		all.kept = append(all.kept, q.kept...)
		all.rejects = append(all.rejects, q.rejects...)
	}
	return all, p.start
}

// keepFraction decides, from the seed and the row's identity only, whether a
// row survives a source's fraction.
func keepFraction(seed uint64, source string, row int64, fraction float64) bool {
	if fraction >= 1 {
		return true
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(row))
	return float64(seedHash(seed, string(b[:]), source)>>11)/float64(1<<53) < fraction
}
