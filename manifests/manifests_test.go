package manifests

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFileCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "a.txt")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello"))
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("the file is visible before Commit")
	}
	sum := f.SHA256()
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := HashFile(path); got != sum || f.Size() != 5 {
		t.Errorf("hash %s, want %s; size %d", got, sum, f.Size())
	}
	g, _ := Create(path)
	g.Write([]byte("other"))
	g.Abort()
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Errorf("an aborted write replaced the file: %q", b)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "sub", ".tmp-*")); len(tmps) != 0 {
		t.Errorf("abort left %v", tmps)
	}
	if err := f.Commit(); err == nil {
		t.Error("a second Commit must fail")
	}
}

// A killed writer leaves .tmp- files; Sweep removes them at any depth and
// nothing else.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/.tmp-x", "a/b/.tmp-y", "a/keep.jsonl", ".tmp-z"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), nil, 0o644)
	}
	if err := Sweep(dir); err != nil {
		t.Fatal(err)
	}
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, rel)
		}
		return nil
	})
	if len(left) != 1 || left[0] != filepath.Join("a", "keep.jsonl") {
		t.Errorf("left %v", left)
	}
	if err := Sweep(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("sweeping a missing dir: %v", err)
	}
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
	path := filepath.Join(t.TempDir(), "m.json")
	if m, err := Read[Stage](path); m != nil || err != nil {
		t.Fatalf("missing manifest: %v %v", m, err)
	}
	want := &Stage{Name: "s", Shards: []Shard{{Name: "a", Counts: Counts{In: 1, Out: 1}}}}
	if err := Write(path, want); err != nil {
		t.Fatal(err)
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
