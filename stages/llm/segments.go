package llm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Cache segments: when several processes share a run (augment run
// --worker I/N), each writes its answers to its own segment of the cache
// directory, segments/<name>/ (bbolt allows one writer per file), and
// looks up, after its own, every other segment and the directory's main
// cache file that no running process holds. A rerun with another number
// of workers, or as one process, so finds every answer already paid for.
//
// The segments of the same worker count (the other workers of the same
// run, "-of-N") are not looked at: they are held by running workers (or
// are about to be), and the shards, hence the requests, of each worker are
// disjoint from theirs.

// segmentsDir holds the cache segments inside the cache directory.
const segmentsDir = "segments"

// peekWait is how long opening another segment waits for its lock: a
// segment in use by a running process is skipped, not waited for.
const peekWait = 20 * time.Millisecond

// openCache opens the cache o names, nil when caching is off: the
// segment o.CacheSegment (the main cache file when ""), with the other
// segments to look up.
func (o Options) openCache() (*Cache, error) {
	if o.CacheDir == "" && o.CacheRoot == nil {
		return nil, nil
	}
	root := o.CacheRoot
	if root == nil {
		if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
			return nil, err
		}
		r, err := os.OpenRoot(o.CacheDir)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		root = r
	}
	var c *Cache
	var err error
	if o.CacheSegment == "" {
		c, err = OpenCacheIn(root, o.CacheDir)
	} else {
		rel := segmentsDir + "/" + o.CacheSegment
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return nil, err
		}
		var seg *os.Root
		if seg, err = root.OpenRoot(rel); err != nil {
			return nil, err
		}
		defer seg.Close()
		c, err = OpenCacheIn(seg, filepath.Join(o.CacheDir, segmentsDir, o.CacheSegment))
	}
	if err != nil {
		return nil, err
	}
	c.others = o.peekSegments(root, c.Path())
	return c, nil
}

// peekSegments opens read-only the cache files of root besides own: the
// main file and the segments, but not the segments of this worker count.
func (o Options) peekSegments(root *os.Root, own string) []*Cache {
	sibling := ""
	if i := strings.LastIndex(o.CacheSegment, "-of-"); i >= 0 {
		sibling = o.CacheSegment[i:]
	}
	dirs := []string{"."}
	if ents, err := fs.ReadDir(root.FS(), segmentsDir); err == nil {
		for _, e := range ents {
			if e.IsDir() && (sibling == "" || !strings.HasSuffix(e.Name(), sibling)) {
				dirs = append(dirs, segmentsDir+"/"+e.Name())
			}
		}
	}
	var others []*Cache
	for _, d := range slices.Sorted(slices.Values(dirs)) {
		path, err := filepath.Abs(filepath.Join(o.CacheDir, filepath.FromSlash(d)))
		if err != nil || filepath.Join(path, CacheFile) == own {
			continue
		}
		if _, err := root.Stat(d + "/" + CacheFile); err != nil {
			continue
		}
		sub, err := root.OpenRoot(d)
		if err != nil {
			continue
		}
		c, err := openCacheWait(path, sub, true, peekWait)
		sub.Close()
		if err != nil {
			if o.Log != nil && !errors.Is(err, fs.ErrNotExist) {
				o.Log.Debug("request cache segment not looked up", "path", path, "err", err)
			}
			continue
		}
		others = append(others, c)
	}
	return others
}

// A CacheSegment is one cache file of a cache directory: its main file
// ("main") or a worker's segment ("worker-0-of-3").
type CacheSegment struct {
	Name string
	Dir  string // the directory holding its CacheFile
}

// CacheSegments lists the cache files of the cache directory dir that
// exist: the main file first, then the segments in name order.
func CacheSegments(dir string) ([]CacheSegment, error) {
	var out []CacheSegment
	if _, err := os.Stat(filepath.Join(dir, CacheFile)); err == nil {
		out = append(out, CacheSegment{Name: "main", Dir: dir})
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(dir, segmentsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents { // ReadDir sorts by name
		seg := filepath.Join(dir, segmentsDir, e.Name())
		if _, err := os.Stat(filepath.Join(seg, CacheFile)); e.IsDir() && err == nil {
			out = append(out, CacheSegment{Name: e.Name(), Dir: seg})
		}
	}
	return out, nil
}
