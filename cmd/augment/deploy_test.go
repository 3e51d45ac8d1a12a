package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/augmentdata/augment/stages"
)

// TestDeployKubernetes checks the shipped manifests against augment: the
// ConfigMap's pipeline.yaml loads, the worker Job is Indexed with
// completions = parallelism = --workers, and both Jobs run the image with
// the ConfigMap, the Secret and the shared volume.
func TestDeployKubernetes(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy", "kubernetes")
	read := func(name string) map[string]any {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return m
	}
	get := func(m any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				m = m.(map[string]any)[k]
			case int:
				m = m.([]any)[k]
			}
		}
		return m
	}
	cm := read("pipeline-configmap.yaml")
	p := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(p, []byte(get(cm, "data", "pipeline.yaml").(string)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := stages.Load(p); err != nil {
		t.Fatalf("the ConfigMap's pipeline.yaml: %v", err)
	}
	if pvc := read("volume.yaml"); !slices.Contains(get(pvc, "spec", "accessModes").([]any), any("ReadWriteMany")) {
		t.Errorf("volume.yaml is not ReadWriteMany")
	}
	workers := read("workers-job.yaml")
	spec := get(workers, "spec")
	if get(spec, "completionMode") != "Indexed" || get(spec, "completions") != get(spec, "parallelism") {
		t.Errorf("workers-job.yaml: want an Indexed Job with completions = parallelism, got %v", spec)
	}
	for name, want := range map[string][]any{
		"workers-job.yaml": {"run", "-quiet", "--workers", strconv.Itoa(get(spec, "completions").(int)), "/config/pipeline.yaml"},
		"merge-job.yaml":   {"merge", "-quiet", "/config/pipeline.yaml"},
	} {
		job := read(name)
		c := get(job, "spec", "template", "spec", "containers", 0)
		if args := get(c, "args").([]any); !slices.Equal(args, want) {
			t.Errorf("%s: args %v, want %v", name, args, want)
		}
		if get(c, "envFrom", 0, "secretRef", "name") != "augment-teacher" {
			t.Errorf("%s: secrets do not come from the augment-teacher Secret", name)
		}
		vols := get(job, "spec", "template", "spec", "volumes").([]any)
		if get(vols[0], "configMap", "name") != "augment-pipeline" || get(vols[1], "persistentVolumeClaim", "claimName") != "augment-data" {
			t.Errorf("%s: volumes %v", name, vols)
		}
	}
}

// TestDeploySlurm submits deploy/slurm/augment.sbatch as a user would,
// through a stand-in sbatch that runs the array's tasks and the dependent
// merge here with Slurm's variables, and wants the bytes of one process.
func TestDeploySlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs many processes")
	}
	one := newWorkerRun(t, "one")
	one.must(one.cmd(nil, one.args("run")...))
	w := newWorkerRun(t, "slurm")
	// The pipeline's -set values go into the file: the script runs plain commands.
	p := filepath.Join(w.dir, "pipeline.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("  shard_size: 4\n"), []byte("  shard_size: 1\n"), 1)
	b = bytes.Replace(b, []byte("dir: ../../out/demo"), []byte("dir: out"), 1)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	fake, _ := filepath.Abs(filepath.Join("testdata", "fake-sbatch"))
	if err := os.Symlink(fake, filepath.Join(bin, "sbatch")); err != nil {
		t.Fatal(err)
	}
	slurm := t.TempDir()
	script, _ := filepath.Abs(filepath.Join("..", "..", "deploy", "slurm", "augment.sbatch"))
	cmd := exec.Command("bash", script, "pipeline.yaml", "3")
	cmd.Dir = w.dir
	// SLURM_JOB_ID: submitted from inside an salloc allocation, the script
	// still submits the array and the merge (it ran as one process).
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "AUGMENT="+w.bin, "FAKE_SLURM_DIR="+slurm, "SLURM_JOB_ID=4242")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "merge: job 101 after it") {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rc, err := os.ReadFile(filepath.Join(slurm, "101_0.rc"))
		if err == nil {
			if strings.TrimSpace(string(rc)) != "0" {
				logs, _ := filepath.Glob(filepath.Join(slurm, "*.log"))
				for _, l := range logs {
					b, _ := os.ReadFile(l)
					t.Logf("%s:\n%s", filepath.Base(l), b)
				}
				t.Fatalf("merge job: exit %s", rc)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the merge job did not end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	sameOutputs(t, filepath.Join(one.dir, "out"), filepath.Join(w.dir, "out"))
}
