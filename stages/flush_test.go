package stages

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/shard"
)

// lostFileSink is a sink whose shards end with a file whose temporary
// file is gone before the write's Flush: the files queued before it are
// renamed into place, then its rename fails.
type lostFileSink struct{ Sink }

func (s lostFileSink) WriteShard(ctx context.Context, dir *atomicfs.Root, name string, recs []*record.Record) ([]manifests.FileRef, []shard.Reject, error) {
	refs, rejects, err := s.Sink.WriteShard(ctx, dir, name, recs)
	if err != nil {
		return nil, nil, err
	}
	lost := "lost/" + name
	f, err := dir.Create(lost)
	if err != nil {
		return nil, nil, err
	}
	f.Write([]byte("x"))
	if err := f.Commit(); err != nil {
		return nil, nil, err
	}
	if err := dir.RemoveAll("lost"); err != nil {
		return nil, nil, err
	}
	return append(refs, manifests.FileRef{Path: dir.Rel(lost), SHA256: f.SHA256(), Bytes: f.Size()}), rejects, nil
}

// TestFlushFailureRemovesFiles: when a shard's deferred files fail to
// commit (Flush), the error stops the group (the next chain does not
// start) and none of the shard's files stays, not even those renamed into
// place before the failing one: no manifest names them.
func TestFlushFailureRemovesFiles(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	exportDir := filepath.Join(out, "02-export")
	if err := os.RemoveAll(exportDir); err != nil {
		t.Fatal(err)
	}

	r, sp, inputs := openExportPass(t, path)
	defer r.Close()
	ctx := context.Background()
	sp.sink = lostFileSink{sp.sink}
	g := &group{passes: []*pass{sp}, lastSave: time.Now()}
	name := inputs[0].name
	if err := r.runChain(ctx, g, name, nil, nil); err != nil {
		t.Fatalf("runChain: %v (the bytes were written; the Flush fails later)", err)
	}
	g.syncing[0].wait() // the chain's write, its Flush failed
	if err := r.runChain(ctx, g, inputs[1].name, nil, nil); err == nil {
		t.Error("a chain started after a shard's files failed to commit: the group goes on")
	}
	if err := g.synced(); err == nil {
		t.Fatal("a shard whose files failed to commit was committed")
	}
	filepath.WalkDir(exportDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "manifest.json" {
			if strings.Contains(d.Name(), name) {
				t.Errorf("%s stays after its shard's Flush failed", p)
			}
		}
		return nil
	})
	if s, ok := sp.done[name]; ok {
		t.Errorf("shard %s recorded as done: %+v", name, s)
	}
}
