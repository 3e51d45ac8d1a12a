package report

import (
	"encoding/json"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/verify"
)

// Partials: the run counts the distributions of an export's records as it
// writes them, shard by shard, into a file beside the shard's outputs
// (PartialFile, listed among them in the manifest, so a resumed run keeps
// the partial of every shard it keeps, and workers hand theirs on with
// their manifests). The report and the cards merge those, in manifest
// order, instead of reading the records again; a run dir written before
// partials existed is read as before (collect).

// PartialFile is the name of the partial of an export shard in its stage
// directory.
func PartialFile(shard string) string { return "dist-" + shard + ".json" }

// partialVersion is the layout of a partial file; a file of another
// version is not read (the records are, as without one). 2: the token
// sample's ID hash is mixed (idHash); a partial of 1 sampled other records.
const partialVersion = 2

// A Partial counts the distributions of one export shard: the records the
// export wrote, and the records of the shard's input the stage rejected (so
// that together they are the distributions of the stage's input, the
// report's "final records"). A record without a tokens tag has its tokens
// counted when its ID is in the sample of SampleBelow(rows), rows being the
// records ingest handed to the chain: known before any later shard is
// written, in one process and in every worker alike.
type Partial struct {
	written, rejected *Dist
	complete          bool
}

// NewPartial starts the partial of a shard of a run whose ingest handed
// rows records to the chain; token counts go through memo.
func NewPartial(rows int64, memo *verify.TokenMemo) *Partial {
	p := &Partial{written: newDist(), rejected: newDist(), complete: true}
	for _, d := range []*Dist{p.written, p.rejected} {
		d.sampleBelow, d.memo = SampleBelow(rows), memo
	}
	return p
}

// Narrow lowers the token sample's threshold to SampleBelow(rows) when
// that is lower, leaving out the lengths counted above it: a partial
// counted for fewer rows than rows (a superset of the sample) becomes the
// one counted for rows, byte for byte.
func (p *Partial) Narrow(rows int64) {
	below := SampleBelow(rows)
	for _, d := range []*Dist{p.written, p.rejected} {
		if below < d.sampleBelow {
			d.sampleBelow = below
			d.sample = slices.DeleteFunc(d.sample, func(s sampled) bool { return !inSample(s.H, below) })
		}
	}
}

// AddWritten counts a record the export wrote.
func (p *Partial) AddWritten(r *record.Record) { p.written.add(r) }

// AddRejected counts a record of the shard's input the stage rejected;
// nil (a reject that does not carry its record) leaves the partial without
// the whole input.
func (p *Partial) AddRejected(r *record.Record) {
	if r == nil {
		p.complete = false
		return
	}
	p.rejected.add(r)
}

// Incomplete records that some records of the shard's input were neither
// written nor rejected (filtered): the partial then holds the written
// records only.
func (p *Partial) Incomplete() { p.complete = false }

// Write writes the partial to name in dir, atomically; the FileRef's Path
// is relative to dir's top directory.
func (p *Partial) Write(dir *atomicfs.Root, name string) (manifests.FileRef, error) {
	b, err := json.Marshal(partialJSON{Version: partialVersion, SampleBelow: p.written.sampleBelow, Complete: p.complete,
		Written: toJSON(p.written), Rejected: toJSON(p.rejected)})
	if err != nil {
		return manifests.FileRef{}, err
	}
	f, err := dir.Create(name)
	if err != nil {
		return manifests.FileRef{}, err
	}
	defer f.Abort()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return manifests.FileRef{}, err
	}
	ref := manifests.FileRef{Path: dir.Rel(name), SHA256: f.SHA256(), Bytes: f.Size()}
	return ref, f.Commit()
}

// partialJSON is a partial file.
type partialJSON struct {
	Version int `json:"version"`
	// SampleBelow is the token sample's threshold the partial was
	// counted with.
	SampleBelow uint64 `json:"sample_below"`
	// Complete: Written and Rejected together are the shard's input.
	Complete bool     `json:"complete"`
	Written  distJSON `json:"written"`
	Rejected distJSON `json:"rejected"`
}

// distJSON is an unfinished Dist as a partial file holds it: Dist's own
// counts, and its token lengths, the sampled ones with their ID's hash.
// Tokens, the percentiles finish makes of them, is not there yet: the nil
// field hides Dist's (encoding/json takes the shallower of two fields of
// one name).
type distJSON struct {
	Dist
	Tokens       *Percentiles `json:"tokens,omitempty"`
	TokensTagged IntHist      `json:"tokens_tagged,omitempty"`
	TokensSample []sampled    `json:"tokens_sample,omitempty"`
}

func toJSON(d *Dist) distJSON {
	return distJSON{Dist: *d, TokensTagged: d.tagged, TokensSample: d.sample}
}

// fromJSON is the Dist of j, counted with the token sample below.
func fromJSON(j distJSON, below uint64) *Dist {
	d := j.Dist
	d.tagged, d.sample, d.sampleBelow = j.TokensTagged, j.TokensSample, below
	return &d
}

// partialDists are the merged partials of an export stage.
type partialDists struct {
	written *Dist // the records the export wrote
	input   *Dist // and those it rejected: its input; nil when some partial lacks them
}

// partials merges the partials of the export stage s in manifest order
// (the merge does not depend on the order: counts add up, and the sample
// is the records below the smallest threshold of the parts); nil when some
// shard has none, or one of another layout (written by another augment
// version): the report then reads the records.
func (r *Run) partials(s *Stage) (*partialDists, error) {
	if s.Manifest == nil {
		return nil, nil
	}
	if pd, ok := r.merged[s.Dir]; ok {
		return pd, nil
	}
	written, input := newDist(), newDist()
	complete := true
	for _, sh := range s.Manifest.Shards {
		i := slices.IndexFunc(sh.Outputs, func(o manifests.FileRef) bool { return path.Base(o.Path) == PartialFile(sh.Name) })
		if i < 0 {
			return r.remember(s, nil), nil
		}
		p, err := atomicfs.ReadJSONFile[partialJSON](filepath.Join(r.Dir, sh.Outputs[i].Path))
		if err != nil {
			return nil, err
		}
		if p == nil || p.Version != partialVersion {
			return r.remember(s, nil), nil
		}
		w := fromJSON(p.Written, p.SampleBelow)
		written.merge(w)
		input.merge(w)
		input.merge(fromJSON(p.Rejected, p.SampleBelow))
		complete = complete && p.Complete
	}
	written.finish()
	pd := &partialDists{written: written}
	if complete {
		input.finish()
		pd.input = input
	}
	return r.remember(s, pd), nil
}

func (r *Run) remember(s *Stage, pd *partialDists) *partialDists {
	if r.merged == nil {
		r.merged = map[string]*partialDists{}
	}
	r.merged[s.Dir] = pd
	return pd
}

// FinalDist returns the distributions of the records of fs, the final
// stage (Final): merged from the partials of an export that read exactly
// fs's shards, else read from the shards.
func (r *Run) FinalDist(fs *Stage) (*Dist, error) {
	want := refKeys(fs.Parquet())
	for i := range r.Stages {
		e := &r.Stages[i]
		if !e.Sink() || e.Manifest == nil {
			continue
		}
		var in []manifests.FileRef
		for _, sh := range e.Manifest.Shards {
			for _, ref := range sh.Inputs {
				if strings.HasSuffix(ref.Path, ".parquet") {
					in = append(in, ref)
				}
			}
		}
		if !slices.Equal(refKeys(in), want) {
			continue
		}
		pd, err := r.partials(e)
		if err != nil {
			return nil, err
		}
		if pd != nil && pd.input != nil {
			return pd.input, nil
		}
	}
	return r.Collect(fs.Parquet(), nil)
}

// refKeys are the paths and hashes of refs, sorted.
func refKeys(refs []manifests.FileRef) []string {
	keys := make([]string, len(refs))
	for i, ref := range refs {
		keys[i] = ref.Path + " " + ref.SHA256
	}
	slices.Sort(keys)
	return keys
}
