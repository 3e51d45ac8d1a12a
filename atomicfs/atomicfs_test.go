package atomicfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func openRoot(t *testing.T, dir string) *Root {
	t.Helper()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestFileCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	r := openRoot(t, dir)
	path := filepath.Join(dir, "sub", "a.txt")
	f, err := r.Create("sub/a.txt")
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
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("mode %v: outputs are readable by all (0644), %v", fi.Mode(), err)
	}
	g, _ := r.Sub("sub").Create("a.txt")
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

// Names that lead outside the root, by ".." or through a link planted in
// the tree, are refused; a link at the final name is replaced, never
// written through.
func TestRootConfines(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	r := openRoot(t, dir)
	victim := filepath.Join(outside, "victim.txt")
	os.WriteFile(victim, []byte("mine"), 0o644)
	if _, err := r.Create("../" + filepath.Base(outside) + "/victim.txt"); err == nil {
		t.Error(".. out of the root accepted")
	}
	if _, err := r.Sub("../x").WriteFile("a", nil); err == nil {
		t.Error("a Sub out of the root accepted")
	}
	os.Symlink(outside, filepath.Join(dir, "stage"))
	if _, err := r.WriteFile("stage/victim.txt", []byte("pwned")); err == nil {
		t.Error("a write through a linked folder pointing out accepted")
	}
	if err := r.Remove("stage/victim.txt"); err == nil {
		t.Error("a delete through a linked folder pointing out accepted")
	}
	os.Symlink(victim, filepath.Join(dir, "part.jsonl"))
	if _, err := r.WriteFile("part.jsonl", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "mine" {
		t.Errorf("written through a link: the outside file holds %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "part.jsonl")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced by the file: %v %v", fi, err)
	}
	if err := r.Sweep("stage"); err == nil {
		t.Error("a sweep through a linked folder pointing out accepted")
	}
}

// A killed writer leaves .tmp- files; Sweep removes them at any depth and
// nothing else.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/.tmp-x.jsonl-0a1b", "a/b/.tmp-y-123", "a/keep.jsonl", ".tmp-z-f", "a/.tmp-notes", "a/.tmp-x-yz"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), nil, 0o644)
	}
	r := openRoot(t, dir)
	if err := r.Sweep("."); err != nil {
		t.Fatal(err)
	}
	var left []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return nil
	})
	if want := []string{"a/.tmp-notes", "a/.tmp-x-yz", "a/keep.jsonl"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if err := r.Sweep("missing"); err != nil {
		t.Errorf("sweeping a missing dir: %v", err)
	}
}

// A deferred Root's Commit only queues the file: nothing is visible until
// Flush, which commits the files in order; Discard removes them instead.
func TestDeferred(t *testing.T) {
	dir := t.TempDir()
	r := openRoot(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(d *Root, name, text string) string {
		t.Helper()
		f, err := d.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Abort() // as writers do: nothing once committed
		f.Write([]byte(text))
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		return f.SHA256()
	}
	d := r.Track().Deferred()
	sumA := write(d.Sub("sub"), "a.txt", "hello")
	write(d, "b.txt", "new")
	if _, err := os.Stat(filepath.Join(dir, "sub", "a.txt")); !os.IsNotExist(err) {
		t.Error("a deferred file is visible before Flush")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "old" {
		t.Errorf("a deferred file replaced the old one before Flush: %q", b)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _ := HashFile(filepath.Join(dir, "sub", "a.txt")); got != sumA {
		t.Errorf("after Flush: hash %s, want %s", got, sumA)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "new" {
		t.Errorf("after Flush: %q", b)
	}
	if got := d.Written(); !slices.Equal(got, []string{"b.txt", "sub/a.txt"}) {
		t.Errorf("Written %v", got)
	}
	if err := d.Flush(); err != nil {
		t.Errorf("a second Flush, with nothing queued: %v", err)
	}

	write(d, "b.txt", "discarded")
	d.Discard()
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "new" {
		t.Errorf("a discarded file replaced the old one: %q", b)
	}

	// Once a commit fails, the files after it are discarded.
	write(d, "c.txt", "c")
	f, _ := d.Create("x/d.txt")
	f.Write([]byte("d"))
	f.Commit()
	write(d, "e.txt", "e")
	if err := os.RemoveAll(filepath.Join(dir, "x")); err != nil { // d.txt's folder, and its temporary file, gone
		t.Fatal(err)
	}
	if err := d.Flush(); err == nil {
		t.Error("Flush of a file whose temporary file is gone succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "c.txt")); err != nil {
		t.Errorf("the file before the failed one: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "e.txt")); !os.IsNotExist(err) {
		t.Error("the file after the failed one was committed")
	}
	for _, pat := range []string{".tmp-*", "*/.tmp-*"} {
		if tmps, _ := filepath.Glob(filepath.Join(dir, pat)); len(tmps) != 0 {
			t.Errorf("left %v", tmps)
		}
	}
}

// A failed write names the file by its OS path, below the directory the
// Root was opened on, never by its temporary name or by a name relative to
// the root (QA: "openat 06-mt_llama/.tmp-README.md-…: read-only file
// system" named neither the run directory nor the file); errors.Is still
// finds the cause.
func TestWriteErrorsNameTheFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	os.Mkdir(dir, 0o755)
	r := openRoot(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "stage"), []byte("a file, not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "busy", "card.md", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		write func() error
		path  string
		cause error
	}{
		{"create below a file", func() error { _, err := r.Sub("stage").WriteFile("README.md", []byte("x")); return err },
			filepath.Join(dir, "stage", "README.md"), nil}, // os.Root: EEXIST
		{"commit onto a folder", func() error { _, err := r.WriteFile("busy/card.md", []byte("x")); return err },
			filepath.Join(dir, "busy", "card.md"), nil},
		{"mkdir below a file", func() error { return r.MkdirAll("stage/sub") }, filepath.Join(dir, "stage", "sub"), syscall.ENOTDIR},
		{"remove a missing file", func() error { return r.Remove("gone.txt") }, filepath.Join(dir, "gone.txt"), fs.ErrNotExist},
	} {
		err := c.write()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.path+":") || strings.Contains(msg, ".tmp-") {
			t.Errorf("%s: %q does not name %s (or names a temporary file)", c.name, msg, c.path)
		}
		if c.cause != nil && !errors.Is(err, c.cause) {
			t.Errorf("%s: %v is not %v", c.name, err, c.cause)
		}
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*", ".tmp-*")); len(tmps) != 0 {
		t.Errorf("failed writes left %v", tmps)
	}
}
