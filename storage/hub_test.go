package storage

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/storage/fakehub"
)

// hubOpener returns an Opener talking to the fake Hub, with env as its
// environment (HF_ENDPOINT is set to the fake).
func hubOpener(t *testing.T, hub *fakehub.Server, env map[string]string) *Opener {
	t.Helper()
	return New(Options{Getenv: func(k string) string {
		if k == "HF_ENDPOINT" {
			return hub.URL + "/"
		}
		return env[k]
	}})
}

func cacheRoot(t *testing.T) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func readAll(t *testing.T, o *Opener, path string) (string, *Reader) {
	t.Helper()
	r, err := o.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sum(); err != nil {
		t.Fatal(err)
	}
	return string(b), r
}

func count(reqs []fakehub.Request, f func(fakehub.Request) bool) int {
	n := 0
	for _, r := range reqs {
		if f(r) {
			n++
		}
	}
	return n
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestHubPinsBranchOncePerOpener(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	c1 := hub.Commit("o/ds", "main", map[string][]byte{"a.jsonl": []byte(`{"x":1}` + "\n"), "b.jsonl": []byte(`{"x":2}` + "\n")})
	o := hubOpener(t, hub, nil)
	ctx := context.Background()
	ia, err := o.Stat(ctx, "hf://datasets/o/ds/a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if want := "hf://datasets/o/ds/a.jsonl@" + c1; ia.Pin != want {
		t.Errorf("pin %q, want %q", ia.Pin, want)
	}
	// The branch moves on: this Opener (this run) keeps reading c1.
	c2 := hub.Commit("o/ds", "main", map[string][]byte{"a.jsonl": []byte(`{"x":3}` + "\n"), "b.jsonl": []byte(`{"x":4}` + "\n")})
	got, r := readAll(t, o, "hf://datasets/o/ds/b.jsonl")
	if got != `{"x":2}`+"\n" || r.Pin != "hf://datasets/o/ds/b.jsonl@"+c1 {
		t.Errorf("read %q pinned %q; want the file at the first commit", got, r.Pin)
	}
	if n := count(hub.Requests(), func(r fakehub.Request) bool { return strings.HasPrefix(r.Path, "/api/") }); n != 1 {
		t.Errorf("%d revision requests, want 1", n)
	}
	// A new run sees the new commit; an explicit commit is not asked for.
	o2 := hubOpener(t, hub, nil)
	if got, _ := readAll(t, o2, "hf://datasets/o/ds/a.jsonl"); got != `{"x":3}`+"\n" {
		t.Errorf("new run read %q", got)
	}
	before := len(hub.Requests())
	if got, _ := readAll(t, o2, "hf://datasets/o/ds/a.jsonl@"+c1); got != `{"x":1}`+"\n" {
		t.Errorf("at commit %s read %q", c1, got)
	}
	if n := count(hub.Requests()[before:], func(r fakehub.Request) bool { return strings.HasPrefix(r.Path, "/api/") }); n != 0 {
		t.Errorf("a commit hash was resolved through the API")
	}
	_ = c2
}

func TestHubRevisionWithSlash(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	rows := writeParquet(t, []xlamRow{{ID: 1, Query: "q", Answers: "[]", Tools: "[]"}})
	hub.Commit("o/ds", "refs/convert/parquet", map[string][]byte{"default/train/0000.parquet": rows})
	o := hubOpener(t, hub, nil)
	o.SetCache(cacheRoot(t))
	for _, p := range []string{"hf://datasets/o/ds/default/train/0000.parquet@refs/convert/parquet",
		"hf://datasets/o/ds@refs%2Fconvert%2Fparquet/default/train/0000.parquet"} {
		got, _ := readAll(t, o, p)
		if want := `{"id":1,"query":"q","answers":"[]","tools":"[]"}` + "\n"; got != want {
			t.Errorf("%s: read %q, want %q", p, got, want)
		}
	}
	if !strings.Contains(hub.Requests()[0].Path, "/revision/refs%2Fconvert%2Fparquet") {
		t.Errorf("revision request %q does not escape the slashes", hub.Requests()[0].Path)
	}
}

func TestHubTokenAndErrors(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	hub.Token = "hf_secret"
	hub.Commit("o/private", "main", map[string][]byte{"x.jsonl": []byte("{}\n"), "big.jsonl.gz": gz(t, []byte("{}\n"))})
	ctx := context.Background()

	_, err := hubOpener(t, hub, nil).Stat(ctx, "hf://datasets/o/private/x.jsonl")
	var auth *AuthError
	if !errors.As(err, &auth) || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Errorf("without a token: %v; want an AuthError saying to set HF_TOKEN", err)
	}
	_, err = hubOpener(t, hub, map[string]string{"HF_TOKEN": "hf_wrong"}).Stat(ctx, "hf://datasets/o/private/x.jsonl")
	if !errors.As(err, &auth) || strings.Contains(err.Error(), "hf_wrong") {
		t.Errorf("with a wrong token: %v; want an AuthError that does not show the token", err)
	}
	o := hubOpener(t, hub, map[string]string{"HF_TOKEN": "hf_secret"})
	if got, _ := readAll(t, o, "hf://datasets/o/private/x.jsonl"); got != "{}\n" {
		t.Errorf("with the token: read %q", got)
	}
	var nf *NotFoundError
	if _, err := o.Stat(ctx, "hf://datasets/o/private/nope.jsonl"); !errors.As(err, &nf) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := o.Stat(ctx, "hf://datasets/o/private/x.jsonl@nobranch"); !errors.As(err, &nf) || !strings.Contains(err.Error(), `revision "nobranch" not found`) {
		t.Errorf("missing revision: %v", err)
	}
	o.SetCache(cacheRoot(t))
	if got, _ := readAll(t, o, "hf://datasets/o/private/big.jsonl.gz"); got != "{}\n" {
		t.Errorf("LFS file with the token: read %q", got)
	}
	cdn := 0
	for _, r := range hub.Requests() {
		if strings.Contains(r.Path, "secret") {
			t.Errorf("the token leaked into a URL: %s", r.Path)
		}
		if strings.HasPrefix(r.Path, "/cdn/") {
			cdn++
			if r.Auth {
				t.Errorf("the token was sent to the CDN host: %+v", r)
			}
		}
	}
	if cdn == 0 {
		t.Error("no CDN request made")
	}
}

// A large file goes through the CDN redirect into the cache; a download
// cut off in the middle resumes with a Range request, and the result is
// verified against the SHA-256 the Hub states.
func TestHubDownloadResumes(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	var lines []string
	for i := range 3000 {
		lines = append(lines, `{"id":`+strings.Repeat("1", i%7+1)+`,"q":"line"}`)
	}
	plain := []byte(strings.Join(lines, "\n") + "\n")
	blob := gz(t, plain)
	hub.Commit("o/big", "main", map[string][]byte{"data/train.jsonl.gz": blob})
	hub.CutNext(blob, int64(len(blob)/3))
	cache := cacheRoot(t)
	o := hubOpener(t, hub, nil)
	o.SetCache(cache)
	got, r := readAll(t, o, "hf://datasets/o/big/data/train.jsonl.gz")
	if got != string(plain) {
		t.Fatalf("read %d bytes, want %d", len(got), len(plain))
	}
	if r.Size != int64(len(blob)) {
		t.Errorf("size %d, want the stored %d", r.Size, len(blob))
	}
	ranged := count(hub.Requests(), func(r fakehub.Request) bool { return strings.HasPrefix(r.Path, "/cdn/") && r.Range != "" })
	if ranged != 1 {
		t.Errorf("%d ranged CDN requests, want 1 (the resume): %+v", ranged, hub.Requests())
	}
	for _, r := range hub.Requests() {
		if r.Range != "" && r.Range != "bytes="+strconv.Itoa(len(blob)/3)+"-" {
			t.Errorf("resumed with %q, want from byte %d", r.Range, len(blob)/3)
		}
	}
	// A second run finds the file in the cache: no download.
	before := len(hub.Requests())
	o2 := hubOpener(t, hub, nil)
	o2.SetCache(cache)
	if got2, _ := readAll(t, o2, "hf://datasets/o/big/data/train.jsonl.gz"); got2 != got {
		t.Error("the cached copy reads differently")
	}
	if n := count(hub.Requests()[before:], func(r fakehub.Request) bool { return r.Method == "GET" && strings.HasPrefix(r.Path, "/cdn/") }); n != 0 {
		t.Errorf("%d downloads for a cached file", n)
	}
}

// A part left by a killed run is continued by the next one.
func TestHubResumesPartFromEarlierRun(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	var plain []byte
	for i := range 5000 {
		plain = fmt.Appendf(plain, `{"a":"%x"}`+"\n", sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
	}
	blob := gz(t, plain)
	hub.Commit("o/big", "main", map[string][]byte{"x.jsonl.gz": blob})
	cache := cacheRoot(t)
	o := hubOpener(t, hub, nil)
	info, err := o.Stat(context.Background(), "hf://datasets/o/big/x.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := Parse("hf://datasets/o/big/x.jsonl.gz")
	// What a killed download leaves: the first 1000 bytes in the part.
	cache.MkdirAll("hub", 0o755)
	key := hubKey(loc, info)
	if err := os.WriteFile(cache.Name()+"/"+key+".part", blob[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	o.SetCache(cache)
	got, _ := readAll(t, o, "hf://datasets/o/big/x.jsonl.gz")
	if got != string(plain) {
		t.Errorf("read %d bytes", len(got))
	}
	if n := count(hub.Requests(), func(r fakehub.Request) bool { return strings.HasPrefix(r.Path, "/cdn/") && r.Range == "bytes=1000-" }); n != 1 {
		t.Errorf("no resume from byte 1000: %+v", hub.Requests())
	}
}

// A part whose bytes do not match what the Hub states is discarded and
// downloaded anew in the same run.
func TestHubDownloadVerifiesSHA256(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	blob := bytes.Repeat([]byte(`{"a":"b"}`+"\n"), 500)
	hub.Commit("o/big", "main", map[string][]byte{"x.jsonl": blob})
	cache := cacheRoot(t)
	var log logBuffer
	o := hubOpenerLog(hub, &log)
	o.SetCache(cache)
	info, err := o.Stat(context.Background(), "hf://datasets/o/big/x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := Parse("hf://datasets/o/big/x.jsonl")
	cache.MkdirAll("hub", 0o755)
	bad := bytes.Clone(blob[:100])
	bad[5] = 'X' // damaged bytes before the resume point
	os.WriteFile(cache.Name()+"/"+hubKey(loc, info)+".part", bad, 0o644)
	if got, _ := readAll(t, o, "hf://datasets/o/big/x.jsonl"); got != string(blob) {
		t.Errorf("after a damaged part: read %d bytes", len(got))
	}
	if !strings.Contains(log.String(), "SHA-256") || !strings.Contains(log.String(), "discarded") {
		t.Errorf("the log does not tell the damaged part:\n%s", log.String())
	}
	if n := count(hub.Requests(), func(r fakehub.Request) bool { return strings.HasPrefix(r.Path, "/cdn/") && r.Range == "" }); n != 1 {
		t.Errorf("%d full downloads after the damaged part, want 1", n)
	}
}

// Without a cache (augment check) the file is streamed, nothing written.
func TestHubStreamsWithoutCache(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	blob := bytes.Repeat([]byte(`{"a":"b"}`+"\n"), 500)
	hub.Commit("o/big", "main", map[string][]byte{"x.jsonl": blob, "small.json": []byte(`[{"a":1}]`)})
	o := hubOpener(t, hub, nil)
	for p, want := range map[string]string{"x.jsonl": string(blob), "small.json": `[{"a":1}]`} {
		got, r := readAll(t, o, "hf://datasets/o/big/"+p)
		if got != want {
			t.Errorf("%s: read %q", p, got)
		}
		if sum, _ := r.Sum(); len(sum) != 64 {
			t.Errorf("%s: sum %q", p, sum)
		}
	}
}

func TestHubHeaderParsers(t *testing.T) {
	for cr, want := range map[string]int64{"bytes 100-199/200": 100, "bytes 0-0/1": 0, "bytes */200": -1, "items 1-2/3": -1, "": -1, "bytes -5-6/7": -1, "bytes +5-6/7": -1} {
		got, ok := rangeStart(cr)
		if want < 0 {
			if ok {
				t.Errorf("rangeStart(%q) = %d, true; want not ok", cr, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("rangeStart(%q) = %d, %v; want %d", cr, got, ok, want)
		}
	}
	for in, want := range map[string]string{`"abc"`: "abc", `W/"abc"`: "abc", ` "abc" `: "abc", "abc": "abc"} {
		if got := normalizeETag(in); got != want {
			t.Errorf("normalizeETag(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzRangeStart: any Content-Range parses or is refused, without panic;
// an accepted one names a non-negative first byte, which is n, and the same
// header written with n in canonical form parses to n again.
func FuzzRangeStart(f *testing.F) {
	f.Add("bytes 100-199/200")
	f.Add("bytes */200")
	f.Add("bytes 007-9/10")
	f.Fuzz(func(t *testing.T, cr string) {
		n, ok := rangeStart(cr)
		if !ok {
			return
		}
		_, rest, _ := strings.Cut(strings.TrimPrefix(cr, "bytes "), "-")
		again, ok2 := rangeStart("bytes " + strconv.FormatInt(n, 10) + "-" + rest)
		if n < 0 || !ok2 || again != n {
			t.Fatalf("rangeStart(%q) = %d; canonical form gives %d, %v", cr, n, again, ok2)
		}
	})
}
