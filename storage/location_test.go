package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Location
		err  string // substring of the error; "" for none
	}{
		{in: "data/x.jsonl", want: Location{Kind: Local, Path: "data/x.jsonl"}},
		{in: "/abs/x.json", want: Location{Kind: Local, Path: "/abs/x.json"}},
		{in: "weird:name.json", want: Location{Kind: Local, Path: "weird:name.json"}},
		{in: "s3://my-bucket/dumps/x.jsonl.gz", want: Location{Kind: S3, Bucket: "my-bucket", Key: "dumps/x.jsonl.gz"}},
		{in: "S3://my.bucket/k", want: Location{Kind: S3, Bucket: "my.bucket", Key: "k"}},
		{in: "s3://my-bucket", err: "naming one object"},
		{in: "s3://my-bucket/", err: "naming one object"},
		{in: "s3://my-bucket/prefix/", err: "naming one object"},
		{in: "s3://My_Bucket/k", err: "not an S3 bucket name"},
		{in: "s3://a..b/k", err: "not an S3 bucket name"},
		{in: "s3://bucket/a\x00b", err: "control character"},
		{in: "hf://datasets/Salesforce/xlam-function-calling-60k/xlam_function_calling_60k.json",
			want: Location{Kind: Hub, Repo: "Salesforce/xlam-function-calling-60k", File: "xlam_function_calling_60k.json", Revision: "main"}},
		{in: "hf://datasets/o/n/data/train.jsonl@v1.0",
			want: Location{Kind: Hub, Repo: "o/n", File: "data/train.jsonl", Revision: "v1.0"}},
		{in: "hf://datasets/o/n/default/train/0000.parquet@refs/convert/parquet",
			want: Location{Kind: Hub, Repo: "o/n", File: "default/train/0000.parquet", Revision: "refs/convert/parquet"}},
		{in: "hf://datasets/o/n@refs%2Fconvert%2Fparquet/default/train/0000.parquet",
			want: Location{Kind: Hub, Repo: "o/n", File: "default/train/0000.parquet", Revision: "refs/convert/parquet"}},
		{in: "hf://datasets/o/n@0123456789abcdef0123456789abcdef01234567/x.json",
			want: Location{Kind: Hub, Repo: "o/n", File: "x.json", Revision: "0123456789abcdef0123456789abcdef01234567"}},
		{in: "hf://datasets/o/n@v1/x.json@v2", err: "two revisions"},
		{in: "hf://datasets/o/n/x.json@", err: "empty revision"},
		{in: "hf://models/o/n/x.json", err: "only dataset repositories"},
		{in: "hf://datasets/o/n", err: "no file named"},
		{in: "hf://datasets/o/n/", err: "no file named"},
		{in: "hf://datasets/o/n/../x", err: "not a file path"},
		{in: "hf://datasets/o/n/a//b", err: "not a file path"},
		{in: "hf://datasets/o/n/x@a/../b", err: "not a revision"},
		{in: "hf://datasets/-o/n/x", err: "not a repository"},
		{in: "hf://datasets/o/n@a%zz/x", err: "revision"},
		{in: "gs://my_bucket.v2/dumps/x.jsonl", want: Location{Kind: GCS, Bucket: "my_bucket.v2", Key: "dumps/x.jsonl"}},
		{in: "gs://bucket", err: "naming one object"},
		{in: "gs://Bucket/x", err: "not a GCS bucket name"},
		{in: "gs://b/x", err: "not a GCS bucket name"},
		{in: "azblob://dumps-1/a/b.json", want: Location{Kind: Azure, Bucket: "dumps-1", Key: "a/b.json"}},
		{in: "azblob://dumps--1/a", err: "not an Azure container name"},
		{in: "azblob://dumps_1/a", err: "not an Azure container name"},
		{in: "azblob://dumps/", err: "naming one object"},
		{in: "gcs://bucket/x.json", err: "gcs:// URLs (write gs://bucket/key) are not supported"},
		{in: "az://c/x.json", err: "write azblob://container/key"},
		{in: "https://example.com/x.json", err: "not supported"},
		{in: "ftp://h/x", err: `scheme "ftp" is not supported`},
		{in: "", err: "empty path"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %+v, %v; want error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	if _, err := Parse("gcs://b/k"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("gcs:// error %v does not wrap ErrUnsupported", err)
	}
}

func TestLocationName(t *testing.T) {
	for in, want := range map[string]string{
		"data/x.jsonl":            "x.jsonl",
		"x.json":                  "x.json",
		"s3://b-1/a/b/c.jsonl.gz": "c.jsonl.gz",
		"gs://b-1/a/c.json":       "c.json",
		"azblob://c-1/d.parquet":  "d.parquet",
		"hf://datasets/o/n/d/t.parquet@refs/convert/parquet": "t.parquet",
	} {
		l, err := Parse(in)
		if err != nil || l.Name() != want {
			t.Errorf("Parse(%q).Name() = %q, %v; want %q", in, l.Name(), err, want)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts it writes back in a
// form that parses to the same location.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"x.json", "s3://bucket/k", "hf://datasets/o/n/p@r", "hf://datasets/o/n@r%2Fx/p",
		"hf://datasets/o/n/a/b.parquet@refs/convert/parquet", "gs://b/k", "s3://b/", "hf://datasets/o/n/a@b@c",
		"gs://b_1.x/k/l", "azblob://c-1/k", "azblob://$web/index.json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		if l.Kind != Local && l.Name() == "" {
			t.Fatalf("Parse(%q): empty name", s)
		}
		back, err := Parse(l.String())
		if err != nil || back != l {
			t.Fatalf("Parse(%q) = %+v; its String %q parses to %+v, %v", s, l, l.String(), back, err)
		}
		if l.Kind == Hub && (strings.Contains(l.File, "..") && strings.Contains("/"+l.File+"/", "/../")) {
			t.Fatalf("Parse(%q): file %q escapes the repository", s, l.File)
		}
	})
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
