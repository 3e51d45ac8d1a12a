package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/manifests"
	"github.com/augmentdata/augment/storage"
)

// Sources may be local files or remote (s3://, gs://, azblob://,
// hf://datasets/); package
// storage opens them all and hands ingest decoded rows, so this file only
// wires it to the runner.

// sourcesCacheDir holds Hub downloads and spooled remote Parquet files, in
// the request cache's directory of the output directory.
const sourcesCacheDir = cacheDir + "/sources"

// statTimeout bounds the look-ups made while checking a pipeline's paths.
const statTimeout = 2 * time.Minute

func parseErr(p string) error {
	_, err := storage.Parse(p)
	return err
}

// defaultSourceName is a source's name when pipeline.yaml gives none: the
// file name without its extensions (a compression suffix too), so
// "data/train.jsonl.gz" and "hf://datasets/o/n/train.jsonl@v1" are "train".
func defaultSourceName(p string) string {
	base := path.Base(strings.ReplaceAll(p, `\`, "/"))
	if loc, err := storage.Parse(p); err == nil {
		base = loc.Name()
	}
	for _, ext := range []string{".gz", ".zst"} {
		base = strings.TrimSuffix(base, ext)
	}
	return strings.TrimSuffix(base, path.Ext(base))
}

// newOpener returns the run's source opener: object storage endpoints from
// the pipeline, the Hub's token and endpoint and the stores' credentials
// from the environment.
func newOpener(p *Pipeline, o Options) *storage.Opener {
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return storage.New(storage.Options{Getenv: getenv, S3: p.Storage.S3, GCS: p.Storage.GCS, Azure: p.Storage.Azure, Log: o.Log})
}

// remoteSourceProblem checks that a remote source exists and may be read,
// asking the store (for the Hub, this pins the revision for the run). A
// store that does not answer, or answers 429 or 5xx, after its retries is
// not the config's problem: the run meets it again when it reads the
// source, and fails there (exit 1).
func remoteSourceProblem(p *Pipeline, op *storage.Opener, i int, s Source) string {
	key := fmt.Sprintf("sources[%d].path", i)
	ctx, cancel := context.WithTimeout(context.Background(), statTimeout)
	defer cancel()
	_, err := op.Stat(ctx, s.Path)
	var nf *storage.NotFoundError
	var auth *storage.AuthError
	switch {
	case err == nil, storage.IsUnavailable(err):
		return ""
	case errors.As(err, &nf):
		return p.problem(key, "source %q: %s does not exist (%s)", s.Name, s.Path, nf.Detail)
	case errors.As(err, &auth):
		return p.problem(key, "source %q: %s cannot be read: %s", s.Name, s.Path, auth.Detail)
	}
	return p.problem(key, "source %q: %v", s.Name, err)
}

// openSourcesCache gives the opener its cache directory when a source is
// remote (local-only runs leave the output directory as it was).
func (r *Runner) openSourcesCache() error {
	remote := false
	for _, s := range r.p.Sources {
		remote = remote || storage.IsRemote(s.Path)
	}
	if !remote {
		return nil
	}
	if err := r.root.MkdirAll(sourcesCacheDir); err != nil {
		return fmt.Errorf("sources cache: %w", err)
	}
	root, err := r.root.OpenRoot(sourcesCacheDir)
	if err != nil {
		return fmt.Errorf("sources cache: %w", err)
	}
	r.srcCache = root
	r.src.SetCache(root)
	return nil
}

// sourceSum returns the SHA-256 of a source's stored bytes, for deciding
// whether its earlier shards are still current, or "" when it is cheaper to
// hash the dump while ingesting it. Local files are hashed. For a remote
// source, in order: the hash the store states (Hub LFS files: no download;
// the download is checked against it, so it is the hash of what ingest
// reads); for another Hub file whose git blob id the Hub states, the hash
// of the checked bytes, downloaded into the cache (ingest then reads the
// cached copy); the recorded hash when the source is pinned exactly as in
// the earlier run (same Hub commit, same S3 or Azure ETag, same GCS
// generation); a Hub file's hash after downloading it; for an object in
// object storage that changed, "" (it is read once, by ingest).
func (r *Runner) sourceSum(ctx context.Context, p string, prev []manifests.Shard) (string, error) {
	loc, err := storage.Parse(p)
	if err != nil {
		return "", err
	}
	if loc.Kind == storage.Local {
		return atomicfs.HashFile(p)
	}
	info, err := r.src.Stat(ctx, p)
	if err != nil {
		return "", err
	}
	if sum := info.StatedSHA256(); sum != "" {
		return sum, nil
	}
	if len(prev) > 0 && len(prev[0].Inputs) == 1 && !(loc.Kind == storage.Hub && info.StatesHash()) {
		if in := prev[0].Inputs[0]; in.Source == info.Pin && in.SHA256 != "" {
			return in.SHA256, nil
		}
	}
	if loc.Kind.IsBlob() {
		return "", nil
	}
	rd, err := r.src.Open(ctx, p)
	if err != nil {
		return "", err
	}
	defer rd.Close()
	return rd.Sum()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// workDir is the local working copy of an output on object storage:
// output.work_dir, or a folder per bucket and prefix in the user's cache
// directory.
func workDir(p *Pipeline, loc storage.Location) (string, error) {
	if p.Output.WorkDir != "" {
		return filepath.Abs(p.Resolve(p.Output.WorkDir))
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("output.work_dir is not set and there is no user cache directory: %w", err)
	}
	sum := sha256.Sum256([]byte(loc.Key))
	name := loc.Bucket // S3's work dirs keep the name they had before gs:// and azblob://
	if loc.Kind != storage.S3 {
		name = loc.Kind.Scheme() + "-" + loc.Bucket
	}
	return filepath.Join(base, "augment", "work", name+"-"+hex.EncodeToString(sum[:6])), nil
}

// remoteOutputProblem checks that an output on object storage can be
// listed and holds only augment's objects: a missing bucket, refused
// credentials or a foreign prefix are config problems. Any other failure
// of the store (a 500, a network error) is not the config's: the run
// meets it again when it mirrors the prefix, and fails there (exit 1).
func remoteOutputProblem(p *Pipeline, op *storage.Opener) string {
	loc, remote, err := storage.OutputLocation(p.Output.Dir)
	if err != nil || !remote {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), statTimeout)
	defer cancel()
	err = op.CheckOutput(ctx, loc)
	if errors.As(err, new(*storage.NotFoundError)) || errors.As(err, new(*storage.AuthError)) || errors.As(err, new(*storage.ForeignPrefixError)) {
		return p.problem("output.dir", "output.dir: %v", err)
	}
	return ""
}

// openMirror makes an output on object storage follow the local working
// copy: what the prefix holds and the copy lacks is fetched first (a run
// resumed on another machine), then every file the run commits is
// uploaded.
func (r *Runner) openMirror() error {
	loc, remote, err := storage.OutputLocation(r.p.Output.Dir)
	if err != nil || !remote {
		return err
	}
	local, err := r.root.OpenRoot(".")
	if err != nil {
		return err
	}
	m, err := r.src.NewMirror(loc, local)
	if err != nil {
		local.Close()
		return err
	}
	if err := r.lockPrefix(m); err != nil { // workers_remote.go
		m.Discard()
		local.Close()
		if errors.As(err, new(*BusyError)) {
			return err
		}
		return fmt.Errorf("output.dir %s: %w", r.p.Output.Dir, err)
	}
	r.mirror, r.mirrorRoot = m, local
	// The marker first: a prefix with other objects and no marker is
	// refused as not augment's.
	if err := m.Upload(markerFile); err != nil {
		return fmt.Errorf("output.dir %s: %w", r.p.Output.Dir, err)
	}
	if err := m.Pull(context.Background()); err != nil {
		return fmt.Errorf("output.dir %s: %w", r.p.Output.Dir, err)
	}
	r.root = r.root.Observe(m)
	return nil
}

// closeMirror uploads what is left and releases the mirror.
func (r *Runner) closeMirror() error {
	if r.mirror == nil {
		return nil
	}
	err := r.mirror.Close()
	r.mirror = nil
	if err != nil {
		err = fmt.Errorf("output.dir %s: %w (the local copy %s is complete; running again uploads the rest)", r.p.Output.Dir, err, r.dir)
	}
	return errors.Join(err, r.mirrorRoot.Close())
}
