package stages

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/internal/flock"
	"github.com/augmentdata/augment/report"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/storage"
)

// The output directory belongs to augment: a run writes only there, only
// through one confined root (atomicfs.Root), refuses a directory that holds
// files it did not write, and holds an exclusive lock on it while it runs.
const (
	stateDir   = ".augment"            // augment's own bookkeeping in the output directory
	markerFile = ".augment/output-dir" // says augment made (or adopted) the directory
	lockFile   = report.LockFile       // locked by the run that holds the directory
)

const markerText = "This directory is an augment output directory (see README, \"Output and how to query it\").\n" +
	"augment writes here only through its own names and deletes only files its manifests name.\n"

// HoldsRun reports whether dir is an output directory augment made or
// adopted (its marker file is there), for reading commands that find
// nothing of what they read in it.
func HoldsRun(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(markerFile)))
	return err == nil && fi.Mode().IsRegular()
}

// A BusyError says another run holds the output directory's lock.
type BusyError struct {
	Dir    string
	Holder string // "pid 1234, started 2025-01-02T03:04:05Z", or "" when unknown
}

func (e *BusyError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "holder unknown"
	}
	return fmt.Sprintf("output dir %s is in use by another augment run (%s); wait for it to finish or set another output.dir", e.Dir, holder)
}

// outputDir is the run's output directory, absolute.
// For an output on object storage it is the local working copy.
func (p *Pipeline) outputDir() (string, error) {
	if loc, remote, err := storage.OutputLocation(p.Output.Dir); err != nil {
		return "", err
	} else if remote {
		return workDir(p, loc)
	}
	return filepath.Abs(p.Resolve(p.Output.Dir))
}

// pathProblems reports, without writing anything, what is wrong with the
// paths p names: a source that is missing, a directory or unreadable; an
// output directory that cannot be created or written; one that holds the
// pipeline file or a source, or files augment did not write. Each problem
// has the file:line of its key.
func pathProblems(p *Pipeline, src *storage.Opener) []string {
	var probs []string
	for i, s := range p.Sources {
		if storage.IsRemote(s.Path) {
			if msg := remoteSourceProblem(p, src, i, s); msg != "" {
				probs = append(probs, msg)
			}
			continue
		}
		key := fmt.Sprintf("sources[%d].path", i)
		path := p.Resolve(s.Path)
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			probs = append(probs, p.problem(key, "source %q: %s does not exist", s.Name, path))
			continue
		case err != nil:
			probs = append(probs, p.problem(key, "source %q: %v", s.Name, err))
			continue
		case fi.IsDir():
			probs = append(probs, p.problem(key, "source %q: %s is a directory; path names one dump file (a JSON array or JSON Lines)", s.Name, path))
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			probs = append(probs, p.problem(key, "source %q: cannot be read: %v", s.Name, err))
			continue
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(f, head)
		f.Close()
		if err := storage.CheckName(path, head[:n]); err != nil {
			probs = append(probs, p.problem(key, "source %q: %v", s.Name, err))
		}
	}

	dir, err := p.outputDir()
	if err != nil {
		return append(probs, p.problem("output.dir", "output.dir: %v", err))
	}
	if msg := remoteOutputProblem(p, src); msg != "" {
		probs = append(probs, msg)
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return append(probs, p.problem("output.dir", "output.dir %s is not a directory", dir))
	case err == nil:
		if msg := NotWritable(dir); msg != "" {
			probs = append(probs, p.problem("output.dir", "output.dir %s %s", dir, msg))
		}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		parent := existingParent(dir)
		if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
			probs = append(probs, p.problem("output.dir", "output.dir %s cannot be created: %s is not a directory", dir, parent))
		} else if msg := NotWritable(parent); msg != "" {
			probs = append(probs, p.problem("output.dir", "output.dir %s cannot be created: %s %s", dir, parent, msg))
		}
	default:
		probs = append(probs, p.problem("output.dir", "output.dir: %v", err))
	}

	if within(dir, p.Path()) {
		probs = append(probs, p.problem("output.dir", "output.dir %s holds the pipeline file %s; give the outputs a directory of their own (e.g. output.dir: out)", dir, p.Path()))
	}
	for i, s := range p.Sources {
		if path := p.Resolve(s.Path); !storage.IsRemote(path) && within(dir, path) {
			probs = append(probs, p.problem(fmt.Sprintf("sources[%d].path", i), "source %q (%s) is inside output.dir %s; inputs and outputs must not mix", s.Name, path, dir))
		}
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if e.Type()&fs.ModeSymlink != 0 {
				target, _ := os.Readlink(filepath.Join(dir, e.Name()))
				probs = append(probs, p.problem("output.dir", "output.dir %s holds a link %s (to %s); augment never writes through links: remove it",
					dir, e.Name(), target))
			}
		}
	}
	if _, foreign, err := inspectOutput(dir); err == nil && len(foreign) > 0 {
		probs = append(probs, p.problem("output.dir", "output.dir %s holds files augment did not write (%s); set output.dir to a new or empty directory",
			dir, strings.Join(foreign, ", ")))
	}
	return probs
}

// envProblems reports API key variables the pipeline names that are not set.
func envProblems(p *Pipeline, getenv func(string) string) []string {
	var probs []string
	for _, b := range []struct{ block, provider, env string }{
		{"teacher", p.Teacher.Provider, p.Teacher.APIKeyEnv},
		{"embedder", p.Embedder.Provider, p.Embedder.APIKeyEnv},
	} {
		if b.provider != llm.ProviderOffline && b.env != "" && getenv(b.env) == "" {
			probs = append(probs, p.problem(b.block+".api_key_env", "%s.api_key_env names %s, which is not set (or empty) in the environment", b.block, b.env))
		}
	}
	return probs
}

// existingParent returns the nearest ancestor of dir that exists.
func existingParent(dir string) string {
	for {
		parent := filepath.Dir(dir)
		if _, err := os.Lstat(parent); err == nil || parent == dir {
			return parent
		}
		dir = parent
	}
}

// realPath resolves the links of path, or of its nearest existing ancestor
// when it does not exist yet.
func realPath(path string) string {
	rest := ""
	for {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(path)
		if parent == path {
			return filepath.Join(path, rest)
		}
		rest = filepath.Join(filepath.Base(path), rest)
		path = parent
	}
}

// within reports whether path is dir or lies below it, links resolved.
func within(dir, path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(realPath(dir), realPath(abs))
	return err == nil && filepath.IsLocal(rel)
}

// inspectOutput says whether augment may use dir as its output directory.
// It may when dir does not exist, is empty, carries augment's marker, or
// was written by an augment from before the marker (only its config.yaml,
// cache and stage directories with a manifest: "legacy", adopted). Else
// foreign names some of the entries augment did not write.
func inspectOutput(dir string) (legacy bool, foreign []string, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(markerFile))); err == nil && fi.Mode().IsRegular() {
		return false, nil, nil
	}
	stages := 0
	var ours []string // augment's names, but no proof alone: config.yaml is a common name
	for _, e := range ents {
		name := e.Name()
		switch {
		case name == stateDir && e.IsDir():
		case name == "cache" && e.IsDir(), name == "config.yaml" && e.Type().IsRegular(), name == report.HTMLFile && e.Type().IsRegular():
			ours = append(ours, name)
		case stageDirName.MatchString(name) && e.IsDir() && isRegular(filepath.Join(dir, name, manifestFile)):
			stages++
		default:
			foreign = append(foreign, name)
		}
	}
	if stages == 0 {
		foreign = append(ours, foreign...)
	}
	if len(foreign) > 5 {
		foreign = append(foreign[:5], "…")
	}
	return stages > 0 && len(foreign) == 0, foreign, nil
}

func isRegular(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular()
}

// openOutput creates the output directory (which pathProblems found
// fine), opens it as the run's confined root, takes its lock and marks it
// as augment's. Problems with the directory are a *ConfigError, a
// directory held by another run a *BusyError.
func (r *Runner) openOutput() error {
	bad := func(format string, args ...any) error {
		return &ConfigError{Problems: []string{r.p.problem("output.dir", format, args...)}}
	}
	legacy, _, err := inspectOutput(r.dir)
	if err != nil {
		return bad("output.dir %s: %v", r.dir, err)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return bad("output.dir %s cannot be created: %v", r.dir, err)
	}
	root, err := atomicfs.OpenRoot(r.dir)
	if err != nil {
		return bad("output.dir %s cannot be opened: %v", r.dir, err)
	}
	if err := root.MkdirAll(stateDir); err != nil {
		root.Close()
		return bad("output.dir %s is not writable: %v", r.dir, err)
	}
	lockFn := lockOutput
	if r.o.Worker != nil { // workers.go: a worker's own lock
		lockFn = r.lockWorker
	}
	lock, err := lockFn(root)
	if err != nil {
		root.Close()
		var busy *BusyError
		if errors.As(err, &busy) {
			return err
		}
		return bad("output.dir %s: cannot take its lock: %v", r.dir, err)
	}
	r.root, r.lock = root, lock
	if fi, err := root.Lstat(markerFile); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	if legacy {
		r.o.Log.Info("adopting an output dir written by an earlier augment", "dir", r.dir)
	}
	if _, err := root.WriteFile(markerFile, []byte(markerText)); err != nil {
		return bad("output.dir %s is not writable: %v", r.dir, err)
	}
	return nil
}

// cacheDir is the request cache's directory in the output directory.
const cacheDir = "cache"

// batchDir is teacher.mode batch's directory in the output directory.
const batchDir = "batch"

// openCacheDir creates the request cache's directory and opens it through
// the output root (a link there pointing out is refused).
func (r *Runner) openCacheDir() (*os.Root, error) {
	if err := r.root.MkdirAll(cacheDir); err != nil {
		return nil, fmt.Errorf("llm cache: %w", err)
	}
	return r.root.OpenRoot(cacheDir)
}

// lockOutput takes the exclusive lock of the output directory, released
// by Close or by the kernel when the process ends (also after kill -9), and
// records the holder in the lock file for a second run's message. Workers
// hold it shared (lockWorker); the message then names them.
func lockOutput(root *atomicfs.Root) (io.Closer, error) {
	f, err := root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	held, err := flock.Exclusive(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if held {
		holder := runningWorkers(root)
		if holder == "" {
			b, _ := io.ReadAll(io.LimitReader(f, 200))
			holder = strings.TrimSpace(string(b))
		}
		f.Close()
		return nil, &BusyError{Dir: root.Path("."), Holder: holder}
	}
	holder := fmt.Sprintf("pid %d, started %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(holder), 0)
	}
	return f, nil
}
