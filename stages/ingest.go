package stages

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/formats"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/stages/toollib"
)

// ingestVersion is bumped when ingest's output for the same dump changes
// (it also covers the readers in stages/formats).
const ingestVersion = 2 // 2: tools returned by meta_tool results count as declared

// ingestSettings is what ingest's output depends on besides the dump bytes.
type ingestSettings struct {
	Source       Source `json:"source"`
	ShardSize    int    `json:"shard_size"`
	RowGroupRows int    `json:"row_group_rows"`
	JSONL        bool   `json:"jsonl"`
}

// ingest parses every source into shards of at most ShardSize records
// ("<source>-00000" …), writes rejected rows with their raw text, and writes
// each source's distinct tools ("tools-<source>.jsonl"), from which the
// run's tool library is built. A source whose dump and settings are
// unchanged is skipped as a whole.
func (r *Runner) ingest(ctx context.Context, sr stageRun) (stageResult, error) {
	res := stageResult{report: StageReport{Name: sr.name, Type: sr.typ, Dir: sr.rel}}
	old, err := r.prepareStageDir(sr)
	if err != nil {
		return res, err
	}
	cfgs := make([]ingestSettings, len(r.p.Sources))
	for i, s := range r.p.Sources {
		cfgs[i] = ingestSettings{Source: s, ShardSize: r.p.Output.ShardSize, RowGroupRows: r.p.Output.RowGroupRows, JSONL: r.p.Output.JSONL}
	}
	fp, cfgJSON, err := r.fingerprint("ingest", ingestVersion, cfgs, nil)
	if err != nil {
		return res, err
	}
	m := &manifests.Stage{Name: sr.name, Type: sr.typ, Version: ingestVersion, Tool: r.o.Version,
		ConfigHash: fp, Config: cfgJSON, Started: time.Now().UTC()}
	changed := old == nil || old.ConfigHash != fp
	for _, cfg := range cfgs {
		src := cfg.Source
		path := r.p.Resolve(src.Path)
		sfp, _, err := r.fingerprint("ingest", ingestVersion, cfg, nil)
		if err != nil {
			return res, err
		}
		// With earlier output the dump is hashed first, to skip it when
		// unchanged; otherwise ingest hashes it while reading it.
		sum := ""
		if prev := r.sourceShards(old, src.Name); len(prev) > 0 {
			if sum, err = manifests.HashFile(path); err != nil {
				return res, fmt.Errorf("source %q: %w", src.Name, err)
			}
			if allMatch(prev, sourceKey(sfp, path, sum), r) {
				r.o.Log.Info("skip source", "stage", sr.name, "source", src.Name, "shards", len(prev), "reason", "up to date")
				m.Shards = append(m.Shards, prev...)
				res.report.Skipped += len(prev)
				continue
			}
		}
		if r.o.Explain {
			r.o.Log.Info("explain", "stage", sr.name, "source", src.Name, "why", "no earlier output, or the dump or its settings changed")
		}
		changed = true
		start := time.Now()
		shards, err := r.ingestSource(ctx, sr, src, path, sfp, sum)
		if err != nil {
			return res, fmt.Errorf("source %q: %w", src.Name, err)
		}
		var c manifests.Counts
		for _, s := range shards {
			c.Add(s.Counts)
		}
		r.o.Log.Info("source done", "stage", sr.name, "source", src.Name, "shards", len(shards), "rows", c.In,
			"records", c.Out, "rejected", manifests.Sum(c.Rejected), "filtered", manifests.Sum(c.Filtered),
			"seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
		m.Shards = append(m.Shards, shards...)
		res.report.Ran += len(shards)
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
	if !changed {
		return res, nil
	}
	m.Finished = time.Now().UTC()
	m.Seconds = m.Finished.Sub(m.Started).Seconds()
	// What the earlier manifest named and this one does not goes first: a
	// kill in between leaves the old manifest, which the next run checks.
	if old != nil {
		m.Superseded = superseded(old, func(string) bool { return false })
		if err := r.removeReplaced(sr, m); err != nil {
			return res, err
		}
		m.Superseded = nil
	}
	return res, sr.out.WriteJSON(manifestFile, m)
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

func allMatch(shards []manifests.Shard, key string, r *Runner) bool {
	for _, s := range shards {
		if s.Key != key || !r.outputsExist(s) {
			return false
		}
	}
	return true
}

// rawBatch is up to ShardSize consecutive raw rows of one source.
type rawBatch struct {
	index int // shard number
	rows  [][]byte
	first int64 // row index of rows[0]
	// framing is set when the dump's framing broke after these rows; it is
	// kept as one rejected row and ends the source.
	framing error
}

// ingestSource reads one dump, parses and writes its shards. Shards are
// parsed and written by NumCPU workers while the next rows are read.
// sum is the dump's SHA-256 when the caller already hashed it, else "".
func (r *Runner) ingestSource(ctx context.Context, sr stageRun, src Source, path, fingerprint, sum string) ([]manifests.Shard, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	prog := r.newProgressBytes(sr.name+" "+src.Name, size)
	defer prog.done()
	var in io.Reader = f
	hash := sha256.New()
	if sum == "" {
		in = io.TeeReader(f, hash)
	}
	sc := formats.NewScanner(progressReader{in, prog})
	g, gctx := errgroup.WithContext(ctx)
	// One more worker than CPUs: a worker waiting for its shard's fsync
	// leaves its CPU to another. Memory grows with workers × shard size.
	workers := runtime.NumCPU() + 1
	g.SetLimit(workers + 1)
	var mu sync.Mutex
	var shards []manifests.Shard
	// Distinct tools only: memory must grow with the number of distinct
	// tools, not with the number of records.
	tools := map[string]record.Tool{}
	batches := make(chan rawBatch)
	g.Go(func() error {
		defer close(batches)
		return r.readBatches(gctx, sc, src, batches)
	})
	for range workers {
		g.Go(func() error {
			for b := range batches {
				sh, ts, err := r.ingestBatch(src, sr, b)
				if err != nil {
					return err
				}
				mu.Lock()
				shards = append(shards, sh)
				for _, t := range ts {
					tools[toollib.Key(t)] = t
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if sum == "" {
		// The key covers the whole dump, also when a limit or broken
		// framing stopped the reading early.
		if _, err := io.Copy(hash, f); err != nil {
			return nil, err
		}
		sum = hex.EncodeToString(hash.Sum(nil))
	}
	slices.SortFunc(shards, func(a, b manifests.Shard) int { return strings.Compare(a.Name, b.Name) })
	if len(shards) == 0 { // an empty dump still gets one (empty) shard
		sh, _, err := r.ingestBatch(src, sr, rawBatch{})
		if err != nil {
			return nil, err
		}
		shards = append(shards, sh)
	}
	key := sourceKey(fingerprint, path, sum)
	for i := range shards {
		shards[i].Key = key
		shards[i].Inputs = []manifests.FileRef{{Path: filepath.Base(path), SHA256: sum, Bytes: size}}
	}
	lib := toollib.New(slices.Collect(maps.Values(tools)))
	ref, err := shard.WriteJSONL(sr.out, "tools-"+src.Name+".jsonl", lib.Tools)
	if err != nil {
		return nil, err
	}
	ref.Rows = int64(len(lib.Tools))
	shards[0].Outputs = append(shards[0].Outputs, ref)
	return shards, nil
}

// readBatches cuts the dump into raw batches. Rows are copied: the scanner
// reuses its buffer.
func (r *Runner) readBatches(ctx context.Context, sc *formats.Scanner, src Source, out chan<- rawBatch) error {
	b := rawBatch{}
	send := func() error {
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		b = rawBatch{index: b.index + 1}
		return nil
	}
	var read int64
	for src.Limit == 0 || read < src.Limit {
		row, idx, err := sc.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.framing = err
			if len(b.rows) == 0 {
				b.first = read
			}
			return send()
		}
		if len(b.rows) == 0 {
			b.first = idx
		}
		b.rows = append(b.rows, slices.Clone(row))
		read++
		if len(b.rows) == r.p.Output.ShardSize {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if len(b.rows) > 0 {
		return send()
	}
	return nil
}

// ingestBatch parses one batch into a shard.
func (r *Runner) ingestBatch(src Source, sr stageRun, b rawBatch) (manifests.Shard, []record.Tool, error) {
	start := time.Now()
	name := fmt.Sprintf("%s-%05d", src.Name, b.index)
	sh := manifests.Shard{Name: name}
	var recs []*record.Record
	var rejects []shard.Reject
	var tools []record.Tool
	for i, raw := range b.rows {
		row := b.first + int64(i)
		sh.In++
		if src.Fraction > 0 && !keepFraction(r.p.Seed, src.Name, row, src.Fraction) {
			sh.Filtered = incr(sh.Filtered, "fraction")
			continue
		}
		rec, err := formats.Parse(src.Format, src.Name, row, raw)
		if err != nil {
			reason, ok := rejectReason(err)
			if !ok {
				reason = "parse_error"
			}
			sh.Rejected = incr(sh.Rejected, reason)
			rejects = append(rejects, shard.Reject{Stage: sr.name, ID: fmt.Sprintf("%s:%d", src.Name, row),
				Source: src.Name, Row: row, Reason: reason, Detail: err.Error(), Raw: string(raw)})
			continue
		}
		if reason, err := shard.Check(rec); err != nil {
			sh.Rejected = incr(sh.Rejected, reason)
			rejects = append(rejects, shard.Reject{Stage: sr.name, ID: rec.ID, Source: src.Name, Row: row,
				Reason: reason, Detail: err.Error(), Raw: string(raw)})
			continue
		}
		rec.AddStep(sr.name, "rule", "")
		tools = append(tools, rec.Tools...)
		recs = append(recs, rec)
	}
	if b.framing != nil {
		row := b.first + int64(len(b.rows))
		sh.In++
		sh.Rejected = incr(sh.Rejected, "bad_framing")
		rejects = append(rejects, shard.Reject{Stage: sr.name, ID: fmt.Sprintf("%s:%d", src.Name, row),
			Source: src.Name, Row: row, Reason: "bad_framing",
			Detail: "the dump's framing broke here; the rest of the file was not read: " + b.framing.Error()})
	}
	sh.Out = int64(len(recs))
	refs, err := shard.Write(sr.out, "part-"+name+".parquet", recs, r.shardOptions())
	if err != nil {
		return sh, nil, err
	}
	sh.Outputs = refs
	if len(rejects) > 0 {
		ref, err := shard.WriteRejects(sr.out, "rejects-"+name+".jsonl", rejects)
		if err != nil {
			return sh, nil, err
		}
		sh.Outputs = append(sh.Outputs, ref)
	}
	sh.Seconds = time.Since(start).Seconds()
	return sh, toollib.New(tools).Tools, sh.Counts.Balanced()
}

// keepFraction decides, from the seed and the row's identity only, whether a
// row survives a source's fraction.
func keepFraction(seed uint64, source string, row int64, fraction float64) bool {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(row))
	h.Write(b[:])
	h.Write([]byte(source))
	if fraction >= 1 {
		return true
	}
	return float64(h.Sum64()>>11)/float64(1<<53) < fraction
}
