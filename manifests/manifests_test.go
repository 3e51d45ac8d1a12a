package manifests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
)

func openRoot(t *testing.T, dir string) *atomicfs.Root {
	t.Helper()
	r, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestCounts(t *testing.T) {
	c := Counts{In: 10, Out: 7, Added: 2, Rejected: map[string]int64{"x": 3}, Filtered: map[string]int64{"q": 2}}
	if err := c.Balanced(); err != nil {
		t.Error(err)
	}
	c.Out++
	if c.Balanced() == nil {
		t.Error("unbalanced counts pass")
	}
	var total Counts
	total.Add(c)
	total.Add(Counts{In: 1, Out: 1, Counters: map[string]int64{"check.roles": 2}})
	if total.In != 11 || total.Rejected["x"] != 3 || total.Counters["check.roles"] != 2 {
		t.Errorf("add: %+v", total)
	}
}

func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	if m, err := Read[Stage](path); m != nil || err != nil {
		t.Fatalf("missing manifest: %v %v", m, err)
	}
	want := &Stage{Name: "s", Shards: []Shard{{Name: "a", Counts: Counts{In: 1, Out: 1}}}}
	if err := openRoot(t, dir).WriteJSON("m.json", want); err != nil {
		t.Fatal(err)
	}
	if got, err := atomicfs.ReadJSON[Stage](openRoot(t, dir), "m.json"); err != nil || got.Name != "s" {
		t.Fatalf("ReadJSON: %+v, %v", got, err)
	}
	got, err := Read[Stage](path)
	if err != nil || got.Name != "s" || got.Shards[0].In != 1 {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if sh, ok := got.Shard("a"); !ok || sh.Out != 1 {
		t.Error("Shard lookup")
	}
	os.WriteFile(path, []byte("{"), 0o644)
	if _, err := Read[Stage](path); err == nil {
		t.Error("a broken manifest reads without error")
	}
}
