package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"slices"
	"strings"

	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
	"github.com/augmentdata/augment/verify"
)

// A shardOut gathers what became of one shard's records, for ingest and for
// every stage alike: the records kept, the rejects, and their counts in the
// shard's manifest entry. writeShard then writes it.
type shardOut struct {
	sh      manifests.Shard
	kept    []*record.Record
	rejects []shard.Reject
	// rowBytes are the bytes of the raw rows ingest parsed into the shard
	// (shardSampleRows).
	rowBytes int64
	// partial is a sink's report partial writeShard left to write once
	// the run's rows are known (writePartial), else nil.
	partial *report.Partial
}

// reject counts rj under its reason and keeps it for the rejects file.
func (o *shardOut) reject(rj shard.Reject) {
	o.sh.Rejected = incr(o.sh.Rejected, rj.Reason)
	o.rejects = append(o.rejects, rj)
}

// filter counts a record dropped on purpose.
func (o *shardOut) filter(reason string) { o.sh.Filtered = incr(o.sh.Filtered, reason) }

// keep passes rec on.
func (o *shardOut) keep(rec *record.Record) { o.kept = append(o.kept, rec) }

// writeShard writes a shard's outputs under the stage directory: the kept
// records through the sink (which may still reject some) and the report's
// partial of them (partialOf), or else as the Parquet shard
// part-<name>.parquet (a stage that drops its shards names that file as
// NotKept, and its hash is set at commit: notKeptDigest); then the
// rejects, if any, as rejects-<name>.jsonl. It completes the entry's Out
// and Outputs and checks that the counts balance before and after writing.
func (r *Runner) writeShard(ctx context.Context, sr stageRun, sink Sink, o *shardOut) (manifests.Shard, error) {
	sh := &o.sh
	sh.Out = int64(len(o.kept))
	if err := sh.Counts.Balanced(); err != nil {
		return *sh, err
	}
	if sink != nil {
		// The partial is counted beside the sink's write, of the records
		// as they were before it: the two are a shard's last work, on one
		// CPU each, and the run's last shard has the CPUs to itself.
		partial := make(chan *report.Partial, 1)
		go func() { partial <- r.partialOf(o) }()
		refs, srejects, err := sink.WriteShard(ctx, sr.out, sh.Name, o.kept)
		p := <-partial
		if err != nil {
			return *sh, err
		}
		for _, rj := range srejects {
			o.reject(rj)
		}
		if len(srejects) > 0 {
			p = r.partialOf(o) // counted again: the sink's rejects are not written
		}
		sh.Out -= int64(len(srejects))
		sh.Outputs = append(sh.Outputs, refs...)
		if _, early := r.sampleRows.Load(sh.Name); early {
			// Counted for the shard's estimate of chainRows, maybe
			// before ingest ended: written at commit (writePartial);
			// its ref holds the place.
			o.partial = p
			sh.Outputs = append(sh.Outputs, manifests.FileRef{Path: sr.out.Rel(report.PartialFile(sh.Name))})
		} else {
			ref, err := p.Write(sr.out, report.PartialFile(sh.Name))
			if err != nil {
				return *sh, err
			}
			sh.Outputs = append(sh.Outputs, ref)
		}
	} else if sr.drop {
		sh.Outputs = append(sh.Outputs, manifests.FileRef{Path: sr.out.Rel("part-" + sh.Name + ".parquet"), Rows: sh.Out, NotKept: true})
	} else {
		refs, err := shard.Write(sr.out, "part-"+sh.Name+".parquet", o.kept, r.shardOptions())
		if err != nil {
			return *sh, err
		}
		r.wrote.Store(refs[0].Path, refs[0].SHA256) // the shard; every record was checked (processShard, ingestBatch)
		sh.Outputs = append(sh.Outputs, refs...)
	}
	if len(o.rejects) > 0 {
		ref, err := shard.WriteRejects(sr.out, "rejects-"+sh.Name+".jsonl", o.rejects)
		if err != nil {
			return *sh, err
		}
		sh.Outputs = append(sh.Outputs, ref)
	}
	return *sh, sh.Counts.Balanced()
}

// partialOf is the report's distributions of a sink's shard, of the
// records it wrote and those the stage rejected (report.Partial), so that
// the report and the dataset cards need not read the records again. A
// record is written unless its ID was rejected, as the report reads it.
// It reads o and its records only.
//
// The token sample is drawn for r.chainRows, the records ingest handed
// on; for a shard ingest handed on as it read its dump (sampleRows), for
// the shard's estimate of them, a superset of the sample when the
// estimate is low, which writePartial narrows to chainRows's.
func (r *Runner) partialOf(o *shardOut) *report.Partial {
	var rows int64
	if v, early := r.sampleRows.Load(o.sh.Name); early {
		rows = v.(int64)
	} else {
		rows = r.chainRows
	}
	p := report.NewPartial(rows, &r.tokens)
	rejected := make(map[string]bool, len(o.rejects))
	for _, rj := range o.rejects {
		rejected[rj.ID] = true
		p.AddRejected(rj.Record)
	}
	for _, rec := range o.kept {
		if !rejected[rec.ID] {
			p.AddWritten(rec)
		}
	}
	if len(o.sh.Filtered) > 0 {
		p.Incomplete()
	}
	return p
}

// writePartial writes part, the report partial of sh that writeShard
// counted for the shard's estimate (sampleRows), once r.chainRows is
// known (at commit, which waits for ingest's end): the sample is
// narrowed to the one drawn for chainRows (report.Partial.Narrow), so
// the file is the one a run that kept ingest's shards writes whenever the
// shard's estimate was no more than chainRows; else it keeps the smaller
// sample it counted (the report merges partials on their smallest
// threshold), which depends on the dump only.
func (r *Runner) writePartial(sr stageRun, sh *manifests.Shard, part *report.Partial) error {
	part.Narrow(r.chainRows)
	name := report.PartialFile(sh.Name)
	ref, err := part.Write(sr.out, name)
	if err != nil {
		return err
	}
	for i, o := range sh.Outputs {
		if o.Path == ref.Path {
			sh.Outputs[i] = ref
		}
	}
	return nil
}

// loadTokens loads the token counter's tables in the background, once, when
// the run has an export (the only sink), whose report partials count tokens
// (partialOf).
// Ingest calls it once a dump is read: the load, some 30 ms of one CPU,
// then runs beside ingest's last shard writes, which leave a CPU idle,
// instead of in the first sink writes of a group, which its chains wait
// for (two of them at once, one idle).
func (r *Runner) loadTokens() {
	r.tokensOnce.Do(func() {
		for _, s := range r.p.Stages {
			if typ, _ := s.config(); typ == "export" && !s.Skip {
				go verify.LoadTokens()
				return
			}
		}
	})
}

// notKeptDigest sets the hash of sh's NotKept Parquet shard, if any, from
// key, the shard's key, and its rejects file's hash. It stands for the
// records the shard would hold in the next stage's key: the same input and
// settings make the same records, unless some answers failed for a reason
// that may pass, and the rejects then say which.
func notKeptDigest(sh *manifests.Shard, key string) {
	rejects := ""
	for _, o := range sh.Outputs {
		if strings.HasPrefix(path.Base(o.Path), "rejects-") {
			rejects = o.SHA256
		}
	}
	for i, o := range sh.Outputs {
		if o.NotKept {
			sum := sha256.Sum256([]byte("not kept\n" + key + "\n" + rejects + "\n"))
			sh.Outputs[i].SHA256 = hex.EncodeToString(sum[:])
		}
	}
}

// notKept reports whether s is a shard its stage did not keep.
func notKept(s manifests.Shard) bool {
	return slices.ContainsFunc(s.Outputs, func(o manifests.FileRef) bool { return o.NotKept })
}
