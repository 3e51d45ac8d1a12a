package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/augmentdata/augment/atomicfs"
)

// newRunner loads path and prepares a run, or returns why not.
func newRunner(t *testing.T, path string) (*Runner, error) {
	t.Helper()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return NewRunner(p, Options{Version: "test"})
}

// A second run on an output dir another run holds fails at once, naming the
// holder; once the first closes, the lock is free again.
func TestRunLocksOutputDir(t *testing.T) {
	path := demoPipeline(t, demoStages)
	first, err := newRunner(t, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRunner(t, path)
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("a second run on a held output dir: %v, want a *BusyError", err)
	}
	if want := fmt.Sprintf("pid %d, started ", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the holder (%q…)", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := newRunner(t, path)
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	if _, err := again.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	again.Close()
}

// Workers and a plain run (or merge) on one output dir exclude each other,
// each naming the holder: workers share the run's lock, a run takes it
// alone. Two workers of one run share it.
func TestWorkersAndRunExclude(t *testing.T) {
	path := demoPipeline(t, demoStages)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	open := func(w *Worker) (*Runner, error) { return NewRunner(p, Options{Version: "test", Worker: w}) }
	w0, err := open(&Worker{Index: 0, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	w1, err := open(&Worker{Index: 1, Count: 2})
	if err != nil {
		t.Fatalf("a second worker beside the first: %v", err)
	}
	var busy *BusyError
	if _, err := open(nil); !errors.As(err, &busy) || !strings.Contains(err.Error(), "(worker 0/2, worker 1/2)") {
		t.Fatalf("a run beside two workers: %v, want a *BusyError naming both", err)
	}
	w0.Close()
	w1.Close()
	run, err := open(nil)
	if err != nil {
		t.Fatalf("a run after the workers ended: %v", err)
	}
	defer run.Close()
	if _, err := open(&Worker{Index: 0, Count: 2}); !errors.As(err, &busy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("a worker beside a run: %v, want a *BusyError naming the run", err)
	}
}

// A link planted in the output tree is never written through: a link in
// place of an output file is replaced by the file, a stage directory that is
// a link pointing outside stops the run, and the outside files are intact.
func TestRunNeverWritesThroughLinks(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.parquet")
	os.WriteFile(victim, []byte("not yours"), 0o644)

	// A shard file replaced by a link to a file outside.
	part := filepath.Join(out, "01-sample", "part-xlam-00000.parquet")
	os.Remove(part)
	if err := os.Symlink(victim, part); err != nil {
		t.Fatal(err)
	}
	runPipeline(t, path)
	if b, _ := os.ReadFile(victim); string(b) != "not yours" {
		t.Errorf("the run wrote through a link: the outside file holds %q", b)
	}
	if fi, err := os.Lstat(part); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced by the shard: %v, %v", fi, err)
	}

	// A stage directory replaced by a link to a directory outside.
	stage := filepath.Join(out, "02-export")
	os.RemoveAll(stage)
	if err := os.Symlink(outside, stage); err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if _, err := newRunner(t, path); !errors.As(err, &ce) || !strings.Contains(err.Error(), "holds a link 02-export") {
		t.Errorf("a run with a stage dir linked outside: %v", err)
	}
	// Deeper in the tree, the run stops at the link.
	os.Remove(stage)
	runPipeline(t, path)
	dataset := filepath.Join(stage, "augment_export")
	os.RemoveAll(dataset)
	if err := os.Symlink(outside, dataset); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), "export: {}", "export: {format: parquet}", 1)), 0o644)
	r, err := newRunner(t, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "escapes") {
		t.Errorf("a run wrote its export into a linked directory pointing outside: %v", err)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "victim.parquet" {
		t.Errorf("the outside directory was written: %v", ents)
	}
}

// Files augment did not write are never deleted: not in a stage directory
// whose shards change, not in the directory of a stage the pipeline no
// longer has (kept, with its own files removed), and not when a manifest
// names files outside its stage directory.
func TestRunDeletesOnlyItsOwnFiles(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	dir := filepath.Dir(path)
	out := filepath.Join(dir, "out")
	foreign := []string{
		"01-sample/part-mine-00000.parquet", // looks like a shard, is not listed
		"01-sample/notes.txt",
		"02-export/augment_export/extra.jsonl",
	}
	for _, f := range foreign {
		if err := os.WriteFile(filepath.Join(out, f), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(dir, "victim.txt")
	os.WriteFile(victim, []byte("mine"), 0o644)
	// A manifest is a file anybody can edit: one naming files outside its
	// stage directory as superseded must not get them deleted.
	m := readManifest(t, out, "01-sample")
	m.Superseded = []string{"01-sample/../../victim.txt", "00-ingest/manifest.json", "../victim.txt"}
	b, _ := json.Marshal(m)
	os.WriteFile(filepath.Join(out, "01-sample", "manifest.json"), b, 0o644)

	// Other shards, and no export stage any more.
	y, _ := os.ReadFile(path)
	s := strings.Replace(string(y), "shard_size: 3", "shard_size: 100", 1)
	s = s[:strings.Index(s, "  - export: {}")]
	os.WriteFile(path, []byte(s), 0o644)
	runPipeline(t, path)

	for _, f := range foreign {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || string(b) != "mine" {
			t.Errorf("%s was deleted or changed: %v", f, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("a file outside the output dir named by a manifest was deleted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "00-ingest", "manifest.json")); err != nil {
		t.Errorf("another stage's manifest named by a manifest was deleted: %v", err)
	}
	// The stale export dir keeps only the foreign file.
	var left []string
	filepath.WalkDir(filepath.Join(out, "02-export"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(left) != 1 || left[0] != "02-export/augment_export/extra.jsonl" {
		t.Errorf("the stale export dir holds %v, want only the foreign file", left)
	}
	// The earlier shards of 01-sample are gone; what is left is listed or foreign.
	m = readManifest(t, out, "01-sample")
	if len(m.Superseded) != 0 {
		t.Errorf("a finished stage still lists superseded files: %v", m.Superseded)
	}
	listed := map[string]bool{"manifest.json": true, "notes.txt": true, "part-mine-00000.parquet": true}
	for _, f := range m.Files { // the sample stage's plan.bin
		listed[filepath.Base(f)] = true
	}
	for _, sh := range m.Shards {
		for _, o := range sh.Outputs {
			listed[filepath.Base(o.Path)] = true
		}
	}
	ents, _ := os.ReadDir(filepath.Join(out, "01-sample"))
	for _, e := range ents {
		if !listed[e.Name()] {
			t.Errorf("01-sample: %s is left from the earlier run", e.Name())
		}
	}
}

// A stage dir removed from the pipeline goes entirely when it holds only
// augment's files, the export's dataset_info.json and train_lora.yaml
// included (Files).
func TestStaleExportDirRemoved(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	if m := readManifest(t, out, "02-export"); strings.Join(m.Files, " ") != "02-export/dataset_info.json 02-export/train_lora.yaml" {
		t.Errorf("export manifest files %v, want its dataset_info.json and train_lora.yaml", m.Files)
	}
	y, _ := os.ReadFile(path)
	s := string(y)
	os.WriteFile(path, []byte(s[:strings.Index(s, "  - export: {}")]), 0o644)
	runPipeline(t, path)
	if _, err := os.Stat(filepath.Join(out, "02-export")); !os.IsNotExist(err) {
		ents, _ := os.ReadDir(filepath.Join(out, "02-export"))
		t.Errorf("the stale export dir is still there: %v %v", err, ents)
	}
}

// The output dir refuses what is not augment's, before writing anything.
func TestOutputDirProblems(t *testing.T) {
	path := demoPipeline(t, demoStages)
	dir := filepath.Dir(path)
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "thesis.tex"), []byte("mine"), 0o644)
	_, err := newRunner(t, path)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "holds files augment did not write (thesis.tex)") {
		t.Fatalf("an output dir with a foreign file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, stateDir)); !os.IsNotExist(err) {
		t.Errorf("the refused dir was written: %v", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		os.MkdirAll(ro, 0o555)
		b, _ := os.ReadFile(path)
		os.WriteFile(path, []byte(strings.Replace(string(b), "dir: out", "dir: ro/out", 1)), 0o644)
		if _, err := newRunner(t, path); !errors.As(err, &ce) || !strings.Contains(err.Error(), "is not writable") {
			t.Errorf("an unwritable output dir: %v", err)
		}
	}
}

// Check reports the path problems a run would stop on.
func TestCheckReportsPathProblems(t *testing.T) {
	path := demoPipeline(t, demoStages)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), "/xlam.json", "/missing.json", 1)), 0o644)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if err := Check(context.Background(), p, Options{}, new(strings.Builder)); !errors.As(err, &ce) || !strings.Contains(err.Error(), "missing.json does not exist") {
		t.Errorf("check with a missing source: %v", err)
	}
	if _, err := atomicfs.OpenRoot(filepath.Join(filepath.Dir(path), "out")); err == nil {
		t.Error("check created the output dir")
	}
	// A name that promises compression the bytes do not hold is found
	// before the run too (it stopped the run midway, exit 1).
	plain, err := os.ReadFile("../testdata/demo/dumps/xlam.json")
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(filepath.Dir(path), "xlam.json.gz")
	os.WriteFile(gz, plain, 0o644)
	os.WriteFile(path, []byte(regexp.MustCompile(`path: \S*/xlam\.json`).ReplaceAllString(string(b), "path: "+gz)), 0o644)
	if p, err = Load(path); err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), p, Options{}, new(strings.Builder)); !errors.As(err, &ce) || !strings.Contains(err.Error(), `xlam.json.gz: the name says .gz but the content is not (it starts with "[\n {")`) {
		t.Errorf("check with a .gz source that is not gzip: %v", err)
	}
}

// Every output, the export's included, is readable by all (0644 less the
// umask), like a file any tool creates: an export read by a trainer under
// another account must not fail on permissions.
func TestOutputsAre0644(t *testing.T) {
	path := demoPipeline(t, demoStages)
	runPipeline(t, path)
	probe := filepath.Join(t.TempDir(), "probe")
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, _ := os.Stat(probe)
	want := fi.Mode().Perm() // 0644 less this process's umask
	out := filepath.Join(filepath.Dir(path), "out")
	n := 0
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != want {
			rel, _ := filepath.Rel(out, p)
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if n < 10 {
		t.Errorf("only %d files checked", n)
	}
}

// A run removes the temporary files a killed run left beside config.yaml
// and report.html (a stage sweeps its own directory).
func TestRunSweepsRunDirTemps(t *testing.T) {
	path := demoPipeline(t, "  - export: {}\n")
	runPipeline(t, path)
	out := filepath.Join(filepath.Dir(path), "out")
	stale := []string{".tmp-config.yaml-774efcc5473c33de", ".tmp-report.html-0123456789abcdef"}
	for _, n := range stale {
		if err := os.WriteFile(filepath.Join(out, n), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runPipeline(t, path)
	for _, n := range stale {
		if _, err := os.Stat(filepath.Join(out, n)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", n, err)
		}
	}
}
