// Package storage opens the dumps a pipeline ingests, wherever they are: a
// local file, an object in S3 or an S3-compatible store (s3://), Google
// Cloud Storage (gs://) or Azure Blob Storage (azblob://), or a file of a
// dataset repository on the Hugging Face Hub (hf://datasets/…). Whatever
// the place, a dump may be gzip- or zstd-compressed or a Parquet file; Open
// hands ingest the rows as JSON (an array or JSON Lines), so the format
// readers in stages/formats never see where or how the rows were stored.
// A Mirror keeps an output directory's copy in object storage (output.dir:
// s3://…, gs://…, azblob://…).
//
// Credentials come from the environment only: the standard AWS chain for
// S3 (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, the shared
// credentials file and profile, web identity tokens, container and instance
// roles), Google's Application Default Credentials for GCS
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's user credentials, the metadata
// server), AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT with
// AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN for Azure, and HF_TOKEN for
// the Hub. They are never read from pipeline.yaml,
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
	GCS               // gs://bucket/key
	Azure             // azblob://container/key (the account from the environment)
)

// IsBlob reports whether k is object storage (S3, GCS or Azure).
func (k Kind) IsBlob() bool { return k == S3 || k == GCS || k == Azure }

// A Location is a parsed source path.
type Location struct {
	Kind Kind
	// Path is the file of a Local location, as given.
	Path string
	// Bucket and Key name an object: an S3 or GCS bucket or an Azure
	// container, and the key (object or blob name) in it.
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
	"gcs":   "gcs:// URLs (write gs://bucket/key)",
	"az":    "az:// URLs (write azblob://container/key)",
	"abfs":  "Azure Data Lake Storage URLs (write azblob://container/key)",
	"abfss": "Azure Data Lake Storage URLs (write azblob://container/key)",
	"http":  "plain HTTP URLs",
	"https": "plain HTTP URLs",
	"file":  "file:// URLs",
}

var (
	// S3 bucket names: 3 to 63 lowercase letters, digits, dots and hyphens,
	// starting and ending with a letter or digit.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// GCS bucket names: S3's, with underscores too (names with dots may be
	// up to 222 characters).
	gcsBucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)
	// Azure container names: 3 to 63 lowercase letters, digits and single
	// hyphens, starting with a letter or digit ("$root" and "$web" too).
	containerName = regexp.MustCompile(`^([a-z0-9](-?[a-z0-9])+|\$root|\$web)$`)
	// Hub owners and repository names.
	hubName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	scheme  = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)
)

// IsRemote reports whether s names something that is not a local file (it
// has a URL scheme). Such a path is never resolved against a directory.
func IsRemote(s string) bool { return scheme.MatchString(s) }

// Parse reads a source path. Anything without a "scheme://" prefix is a
// local path. s3://, gs://, azblob:// and hf://datasets/ URLs are checked
// for shape; other schemes give an error wrapping ErrUnsupported.
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
	case "gs":
		return parseBlob(s, rest, GCS)
	case "azblob":
		return parseBlob(s, rest, Azure)
	case "hf":
		return parseHub(s, rest)
	default:
		if what, ok := unsupported[sch]; ok {
			return Location{}, fmt.Errorf("%s: %s are %w; use a local path, s3:// (also for S3-compatible stores), gs://, azblob:// or hf://datasets/", s, what, ErrUnsupported)
		}
		return Location{}, fmt.Errorf("%s: scheme %q is %w; use a local path, s3://bucket/key, gs://bucket/key, azblob://container/key or hf://datasets/OWNER/NAME/PATH", s, sch, ErrUnsupported)
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

// parseBlob reads gs://bucket/key and azblob://container/key.
func parseBlob(s, rest string, k Kind) (Location, error) {
	bucket, key, _ := strings.Cut(rest, "/")
	scheme, what, re := "gs", "a GCS bucket name (3-222 lowercase letters, digits, '.', '_' and '-')", gcsBucketName
	if k == Azure {
		scheme, what, re = "azblob", "an Azure container name (3-63 lowercase letters, digits and single '-')", containerName
	}
	switch {
	case !re.MatchString(bucket) || strings.Contains(bucket, "..") || k == Azure && (len(bucket) < 3 || len(bucket) > 63):
		return Location{}, fmt.Errorf("%s: %q is not %s", s, bucket, what)
	case key == "" || strings.HasSuffix(key, "/"):
		return Location{}, fmt.Errorf("%s: want %s://%s/key naming one object, not a %s or prefix", s, scheme, map[Kind]string{GCS: "bucket", Azure: "container"}[k], map[Kind]string{GCS: "bucket", Azure: "container"}[k])
	case !validText(key) || len(key) > 1024:
		return Location{}, fmt.Errorf("%s: the key holds a control character or invalid UTF-8, or is over 1024 bytes", s)
	}
	return Location{Kind: k, Bucket: bucket, Key: key}, nil
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
	case S3, GCS, Azure:
		return path.Base(l.Key)
	case Hub:
		return path.Base(l.File)
	}
	return l.Path[strings.LastIndexAny(l.Path, `/\`)+1:]
}

// String writes the location back as a path or URL; Parse(l.String()) gives l.
func (l Location) String() string {
	switch l.Kind {
	case S3, GCS, Azure:
		return l.Kind.Scheme() + "://" + l.Bucket + "/" + l.Key
	case Hub:
		return "hf://datasets/" + l.Repo + "/" + l.File + "@" + l.Revision
	}
	return l.Path
}

// Scheme is the URL scheme of object storage kinds ("s3", "gs", "azblob").
func (k Kind) Scheme() string {
	return map[Kind]string{S3: "s3", GCS: "gs", Azure: "azblob", Hub: "hf"}[k]
}
