package stages

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// rejectingSink is a sink that rejects every third record it is given
// when it writes them.
type rejectingSink struct{ Sink }

func (s rejectingSink) WriteShard(ctx context.Context, dir *atomicfs.Root, name string, recs []*record.Record) ([]manifests.FileRef, []shard.Reject, error) {
	var kept []*record.Record
	var rejects []shard.Reject
	for i, rec := range recs {
		if i%3 == 2 {
			rejects = append(rejects, shard.Reject{Stage: "export", ID: rec.ID, Source: rec.Source, Row: rec.Row,
				Reason: "test_reject", Detail: "rejected by the sink", Record: rec})
			continue
		}
		kept = append(kept, rec)
	}
	refs, _, err := s.Sink.WriteShard(ctx, dir, name, kept)
	return refs, rejects, err
}

// TestSinkShardPartial: the report partial writeShard writes beside a
// sink's shard (counted while the sink writes) is the partial of the
// records as the sink left them: those it rejected while writing count as
// rejected, not written.
func TestSinkShardPartial(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	for _, tc := range []struct {
		name   string
		reject bool
	}{{"sink rejects none", false}, {"sink rejects some", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r, sp, inputs := openExportPass(t, path)
			defer r.Close()
			in := inputs[0]
			recs, err := shard.Read(filepath.Join(r.dir, in.ref.Path))
			if err != nil {
				t.Fatal(err)
			}
			o, err := r.processShard(context.Background(), sp, in.name, recs, false)
			if err != nil {
				t.Fatal(err)
			}
			sink := sp.sink
			if tc.reject {
				sink = rejectingSink{sink}
			}
			dir, root := tempRoot(t)
			sr := sp.sr
			sr.out = root
			// What the partial must hold: o once the sink's rejects are in.
			want := &shardOut{kept: o.kept, rejects: append([]shard.Reject(nil), o.rejects...)}
			want.sh.Filtered = o.sh.Filtered
			for i, rec := range o.kept {
				if tc.reject && i%3 == 2 {
					want.rejects = append(want.rejects, shard.Reject{ID: rec.ID, Record: rec})
				}
			}
			before := manifests.Sum(o.sh.Rejected)
			sh, err := r.writeShard(context.Background(), sr, sink, o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reject && manifests.Sum(sh.Rejected) == before {
				t.Fatalf("the sink rejected none of %d records: the test tests nothing", len(want.kept))
			}
			got, err := os.ReadFile(filepath.Join(dir, report.PartialFile(in.name)))
			if err != nil {
				t.Fatal(err)
			}
			wdir, wroot := tempRoot(t)
			if _, err := r.partialOf(want).Write(wroot, "want.json"); err != nil {
				t.Fatal(err)
			}
			wantBytes, err := os.ReadFile(filepath.Join(wdir, "want.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantBytes) {
				t.Errorf("partial written:\n%s\nwant:\n%s", got, wantBytes)
			}
		})
	}
}
