// Package storage opens the dumps a pipeline ingests, wherever they are: a
// local file, an object in S3 or an S3-compatible store (s3://), or a file of
// a dataset repository on the Hugging Face Hub (hf://datasets/…). Whatever
// the place, a dump may be gzip- or zstd-compressed or a Parquet file; Open
// hands ingest the rows as JSON (an array or JSON Lines), so the format
// readers in stages/formats never see where or how the rows were stored.
// A Mirror keeps an output directory's copy in S3 (output.dir: s3://…).
//
// Credentials come from the environment only: the standard AWS chain for
// S3 (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, the shared
// credentials file and profile, web identity tokens, container and instance
// roles) and HF_TOKEN for the Hub. They are never read from pipeline.yaml,
// never logged and never written anywhere.
package storage

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// A Kind is where a Location is stored.
type Kind int

const (
	Local Kind = iota // a file on this machine
	S3                // s3://bucket/key
	Hub               // hf://datasets/OWNER/NAME/PATH[@REVISION]
)

// A Location is a parsed source path.
type Location struct {
	Kind Kind
	// Path is the file of a Local location, as given.
	Path string
	// Bucket and Key name an S3 object.
	Bucket, Key string
	// Repo ("OWNER/NAME"), File (the path inside the repository) and
	// Revision (a branch, tag or commit; "main" when not given) name a file
	// of a Hub dataset repository.
	Repo, File, Revision string
}

// ErrUnsupported is wrapped by the error Parse returns for a URL scheme
// augment does not read.
var ErrUnsupported = errors.New("not supported")

// unsupported are schemes people are likely to write, with what to do instead.
var unsupported = map[string]string{
	"gs":     "Google Cloud Storage",
	"gcs":    "Google Cloud Storage",
	"azblob": "Azure Blob Storage",
	"az":     "Azure Blob Storage",
	"abfs":   "Azure Data Lake Storage",
	"abfss":  "Azure Data Lake Storage",
	"http":   "plain HTTP URLs",
	"https":  "plain HTTP URLs",
	"file":   "file:// URLs",
}

var (
	// S3 bucket names: 3 to 63 lowercase letters, digits, dots and hyphens,
	// starting and ending with a letter or digit.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// Hub owners and repository names.
	hubName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	scheme  = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)
)

// IsRemote reports whether s names something that is not a local file (it
// has a URL scheme). Such a path is never resolved against a directory.
func IsRemote(s string) bool { return scheme.MatchString(s) }

// Parse reads a source path. Anything without a "scheme://" prefix is a
// local path. s3:// and hf://datasets/ URLs are checked for shape; other
// schemes give an error wrapping ErrUnsupported.
//
// Hub URLs take the revision after the file, hf://datasets/o/n/data/x.jsonl@v1.0
// (everything after the last '@', so a revision may hold slashes:
// …/0000.parquet@refs/convert/parquet), or after the repository name as
// huggingface_hub writes it, hf://datasets/o/n@v1.0/data/x.jsonl (there a
// slash in the revision is written %2F).
func Parse(s string) (Location, error) {
	m := scheme.FindStringSubmatch(s)
	if m == nil {
		if s == "" {
			return Location{}, errors.New("empty path")
		}
		return Location{Kind: Local, Path: s}, nil
	}
	rest := s[len(m[0]):]
	switch sch := strings.ToLower(m[1]); sch {
	case "s3":
		return parseS3(s, rest)
	case "hf":
		return parseHub(s, rest)
	default:
		if what, ok := unsupported[sch]; ok {
			return Location{}, fmt.Errorf("%s: %s are %w; use a local path, s3:// (also for S3-compatible stores) or hf://datasets/", s, what, ErrUnsupported)
		}
		return Location{}, fmt.Errorf("%s: scheme %q is %w; use a local path, s3://bucket/key or hf://datasets/OWNER/NAME/PATH", s, sch, ErrUnsupported)
	}
}

func parseS3(s, rest string) (Location, error) {
	bucket, key, _ := strings.Cut(rest, "/")
	switch {
	case !bucketName.MatchString(bucket) || strings.Contains(bucket, ".."):
		return Location{}, fmt.Errorf("%s: %q is not an S3 bucket name (3-63 lowercase letters, digits, '.' and '-')", s, bucket)
	case key == "" || strings.HasSuffix(key, "/"):
		return Location{}, fmt.Errorf("%s: want s3://bucket/key naming one object, not a bucket or prefix", s)
	case !validText(key):
		return Location{}, fmt.Errorf("%s: the key holds a control character or invalid UTF-8", s)
	}
	return Location{Kind: S3, Bucket: bucket, Key: key}, nil
}

func parseHub(s, rest string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("%s: %s (want hf://datasets/OWNER/NAME/PATH[@REVISION])", s, fmt.Sprintf(format, args...))
	}
	kind, rest, _ := strings.Cut(rest, "/")
	if kind != "datasets" {
		return bad("only dataset repositories are read, not %q", kind)
	}
	owner, rest, _ := strings.Cut(rest, "/")
	name, file, _ := strings.Cut(rest, "/")
	rev := ""
	if n, r, ok := strings.Cut(name, "@"); ok {
		dec, err := url.PathUnescape(r)
		if err != nil {
			return bad("revision %q: %v", r, err)
		}
		name, rev = n, dec
	}
	if i := strings.LastIndexByte(file, '@'); i >= 0 {
		if rev != "" {
			return bad("two revisions given")
		}
		file, rev = file[:i], file[i+1:]
		if rev == "" {
			return bad("empty revision after '@'")
		}
	}
	if rev == "" {
		rev = "main"
	}
	switch {
	case !hubName.MatchString(owner) || !hubName.MatchString(name):
		return bad("%q is not a repository OWNER/NAME", owner+"/"+name)
	case file == "":
		return bad("no file named in the repository")
	case !validText(rev) || strings.ContainsAny(rev, " @\\") || rev != strings.Trim(rev, "/") || strings.Contains(rev, ".."):
		return bad("%q is not a revision", rev)
	}
	for _, seg := range strings.Split(file, "/") {
		if seg == "" || seg == "." || seg == ".." || !validText(seg) || strings.ContainsRune(seg, '\\') {
			return bad("%q is not a file path inside the repository", file)
		}
	}
	return Location{Kind: Hub, Repo: owner + "/" + name, File: file, Revision: rev}, nil
}

// validText reports whether s is valid UTF-8 without control characters.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}

// Name is the file name of the location: the last element of its path,
// key or file.
func (l Location) Name() string {
	switch l.Kind {
	case S3:
		return path.Base(l.Key)
	case Hub:
		return path.Base(l.File)
	}
	return l.Path[strings.LastIndexAny(l.Path, `/\`)+1:]
}

// String writes the location back as a path or URL; Parse(l.String()) gives l.
func (l Location) String() string {
	switch l.Kind {
	case S3:
		return "s3://" + l.Bucket + "/" + l.Key
	case Hub:
		return "hf://datasets/" + l.Repo + "/" + l.File + "@" + l.Revision
	}
	return l.Path
}
