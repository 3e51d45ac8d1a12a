package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/augmentdata/augment/storage/fakehub"
)

func init() { retryPause = time.Millisecond } // tests do not wait out the backoff

// logBuffer is a logger whose lines a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func hubOpenerLog(hub *fakehub.Server, log *logBuffer) *Opener {
	return New(Options{Log: slog.New(slog.NewTextHandler(log, nil)), Getenv: func(k string) string {
		if k == "HF_ENDPOINT" {
			return hub.URL
		}
		return ""
	}})
}

func fullGets(reqs []fakehub.Request) int {
	return count(reqs, func(r fakehub.Request) bool {
		return r.Method == "GET" && r.Range == "" && strings.HasPrefix(r.Path, "/datasets/")
	})
}

// A mirror that states no size cuts a small file at a line boundary: the
// download looks complete, but its bytes are not the git blob the Hub
// names as ETag, so it is refused (tried again in the run), never cached.
func TestHubDownloadWithoutLengthChecksGitBlob(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	hub.NoLength(true)
	rows := []byte(`{"a":1}` + "\n" + `{"a":2}` + "\n" + `{"a":3}` + "\n")
	hub.Commit("o/ds", "main", map[string][]byte{"small.jsonl": rows})
	cut := int64(len(`{"a":1}` + "\n" + `{"a":2}` + "\n"))
	const path = "hf://datasets/o/ds/small.jsonl"
	cache := cacheRoot(t)

	hub.Cut(rows, cut, 100)
	var log logBuffer
	o := hubOpenerLog(hub, &log)
	o.SetCache(cache)
	info, err := o.Stat(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != -1 {
		t.Fatalf("size %d; the fake should state none", info.Size)
	}
	_, err = o.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "git blob") || IsUnavailable(err) {
		t.Fatalf("every download cut short: %v; want a failed download naming the git blob id", err)
	}
	if n := fullGets(hub.Requests()); n != downloadAttempts {
		t.Errorf("%d downloads, want %d (tried again in the run)", n, downloadAttempts)
	}
	loc, _ := Parse(path)
	if _, err := cache.Stat(hubKey(loc, info)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a download that failed its check is in the cache: %v", err)
	}

	// Cut once: the second try gets the whole file.
	hub.Cut(rows, cut, 1)
	log = logBuffer{}
	got, _ := readAll(t, o, path)
	if got != string(rows) {
		t.Errorf("read %q, want all three rows", got)
	}
	if !strings.Contains(log.String(), `checked="git blob id"`) {
		t.Errorf("the log does not say what the download was checked against:\n%s", log.String())
	}
}

// A cached copy is checked again before it is reused: one whose bytes
// were altered is downloaded again, so what is read is the file the Hub
// names, for a small file (git blob id) and an LFS one (SHA-256) alike.
func TestHubCachedCopyCheckedAgain(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	small := []byte(`{"q":"hello"}` + "\n")
	large := bytes.Repeat([]byte(`{"q":"hello world"}`+"\n"), 100)
	hub.Commit("o/ds", "main", map[string][]byte{"small.jsonl": small, "large.jsonl": large})
	cache := cacheRoot(t)
	for name, want := range map[string][]byte{"small.jsonl": small, "large.jsonl": large} {
		path := "hf://datasets/o/ds/" + name
		o := hubOpenerLog(hub, &logBuffer{})
		o.SetCache(cache)
		readAll(t, o, path)
		info, err := o.Stat(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		loc, _ := Parse(path)
		file := cache.Name() + "/" + hubKey(loc, info)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		copy(b[2:], "QQ") // two bytes flipped, same size
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		before := fullGets(hub.Requests())
		var log logBuffer
		o2 := hubOpenerLog(hub, &log)
		o2.SetCache(cache)
		got, r := readAll(t, o2, path)
		if got != string(want) {
			t.Errorf("%s: read %q from an altered cached copy", name, got)
		}
		if sum, _ := r.Sum(); sum != sha256hex(want) {
			t.Errorf("%s: sum %s, want the file's %s", name, sum, sha256hex(want))
		}
		if n := fullGets(hub.Requests()) - before; n != 1 {
			t.Errorf("%s: %d downloads after the cached copy was altered, want 1", name, n)
		}
		if !strings.Contains(log.String(), "cached copy not reused") {
			t.Errorf("%s: the log does not say the cached copy was not reused:\n%s", name, log.String())
		}
		// Intact, the copy is reused without a download.
		before = fullGets(hub.Requests())
		readAll(t, o2, path)
		if n := fullGets(hub.Requests()) - before; n != 0 {
			t.Errorf("%s: %d downloads of an intact cached copy", name, n)
		}
	}
}

// 429 and 5xx from the Hub are sent again (Retry-After honoured) and, when
// they persist, are an UnavailableError (no config problem); a Retry-After
// beyond maxRetryAfter ends the tries at once.
func TestHubPassingErrorsRetried(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	hub.Commit("o/ds", "main", map[string][]byte{"x.jsonl": []byte("{}\n")})
	const path = "hf://datasets/o/ds/x.jsonl"
	var mu sync.Mutex
	fail := map[string]int{} // method+path prefix → answers still to fail
	status, retryAfter := 0, "0"
	hub.Fail(func(r *http.Request) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range fail {
			m, p, _ := strings.Cut(k, " ")
			if n != 0 && r.Method == m && strings.HasPrefix(r.URL.Path, p) {
				fail[k] = n - 1
				return status, http.Header{"Retry-After": {retryAfter}}
			}
		}
		return 0, nil
	})
	set := func(s int, ra string, f map[string]int) {
		mu.Lock()
		status, retryAfter, fail = s, ra, f
		mu.Unlock()
	}
	apiReqs := func(reqs []fakehub.Request) int {
		return count(reqs, func(r fakehub.Request) bool { return strings.HasPrefix(r.Path, "/api/") })
	}
	for _, c := range []struct {
		name   string
		status int
		where  string
	}{{"revision 429", 429, "GET /api/"}, {"HEAD 503", 503, "HEAD /datasets/"}, {"download 500", 500, "GET /datasets/"}} {
		set(c.status, "0", map[string]int{c.where: 1})
		o := hubOpener(t, hub, nil)
		o.SetCache(cacheRoot(t))
		if got, _ := readAll(t, o, path); got != "{}\n" {
			t.Errorf("%s once: read %q", c.name, got)
		}
	}

	set(429, "0", map[string]int{"GET /api/": -1})
	before := apiReqs(hub.Requests())
	_, err := hubOpener(t, hub, nil).Stat(context.Background(), path)
	if !IsUnavailable(err) || !strings.Contains(err.Error(), "429") || errors.As(err, new(*AuthError)) {
		t.Errorf("429 every time: %v; want an UnavailableError", err)
	}
	if n := apiReqs(hub.Requests()) - before; n != hubTries {
		t.Errorf("429 every time: %d requests, want %d", n, hubTries)
	}

	set(503, "3600", map[string]int{"GET /api/": -1})
	before = apiReqs(hub.Requests())
	_, err = hubOpener(t, hub, nil).Stat(context.Background(), path)
	if !IsUnavailable(err) || !strings.Contains(err.Error(), "run again later") {
		t.Errorf("Retry-After: 3600: %v; want an UnavailableError saying to run again later", err)
	}
	if n := apiReqs(hub.Requests()) - before; n != 1 {
		t.Errorf("Retry-After: 3600: %d requests, want 1 (not waited for)", n)
	}
}

// The CDN's refusals are not the Hub's: a 403 is an expired signed URL (no
// token is sent there), a 404 a file the Hub lists; both are tried again
// and say so. A stated size the server does not send is told with both
// sizes.
func TestHubCDNErrors(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	blob := gz(t, bytes.Repeat([]byte(`{"q":"a"}`+"\n"), 50))
	hub.Commit("o/ds", "main", map[string][]byte{"x.jsonl.gz": blob})
	const path = "hf://datasets/o/ds/x.jsonl.gz"
	for _, code := range []int{403, 404} {
		hub.Fail(func(r *http.Request) (int, http.Header) {
			if strings.HasPrefix(r.URL.Path, "/cdn/") {
				return code, nil
			}
			return 0, nil
		})
		o := hubOpener(t, hub, nil)
		o.SetCache(cacheRoot(t))
		_, err := o.Open(context.Background(), path)
		if err == nil || errors.As(err, new(*AuthError)) || errors.As(err, new(*NotFoundError)) ||
			strings.Contains(err.Error(), "HF_TOKEN may not") || strings.Contains(err.Error(), "not found on the Hub") ||
			!strings.Contains(err.Error(), "CDN") || !strings.Contains(err.Error(), "after 4 attempts") {
			t.Errorf("CDN %d: %v", code, err)
		}
		if code == 403 && !strings.Contains(err.Error(), "expired") {
			t.Errorf("CDN 403: %v; want it to name an expired signed URL", err)
		}
	}
	hub.Fail(nil)
	hub.LinkedSize(5000)
	o := hubOpener(t, hub, nil)
	o.SetCache(cacheRoot(t))
	_, err := o.Open(context.Background(), path)
	if want := "the server sends " + strconv.Itoa(len(blob)) + " bytes, the Hub states 5000"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("stated size 5000: %v; want %q", err, want)
	}
}

// Without a cache the file is streamed: reading it to its end checks it
// against the git blob id too (a mirror that states no size ends a cut
// download as if it were whole).
func TestHubStreamChecksGitBlob(t *testing.T) {
	hub := fakehub.New()
	defer hub.Close()
	hub.NoLength(true)
	rows := []byte(`{"a":1}` + "\n" + `{"a":2}` + "\n")
	hub.Commit("o/ds", "main", map[string][]byte{"s.jsonl": rows})
	hub.CutNext(rows, 8)
	o := hubOpener(t, hub, nil)
	r, err := o.Open(context.Background(), "hf://datasets/o/ds/s.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err == nil || !strings.Contains(err.Error(), "git blob") {
		t.Errorf("a download cut short read as %q, %v; want an error naming the git blob", b, err)
	}
}

// contentCheck against what the Hub states: git's own blob id of "hello\n"
// (git hash-object), its plain SHA-1, the LFS SHA-256, the size; with the
// size known up front or not.
func TestContentCheck(t *testing.T) {
	const (
		blobID = "ce013625030ba8dba906f756967f9e9ca394464a"
		plain  = "f572d396fae9206628714fb2ce00f72e94f2258f"
		sum    = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	)
	for _, c := range []struct {
		info    Info
		content string
		bad     string // in the error; "" for none
	}{
		{Info{Size: -1, gitBlob: blobID}, "hello\n", ""},
		{Info{Size: 6, gitBlob: blobID}, "hello\n", ""},
		{Info{Size: -1, gitBlob: plain}, "hello\n", ""},
		{Info{Size: -1, gitBlob: blobID}, "hell", "not the git blob"},
		{Info{Size: -1, gitBlob: blobID}, "hellO\n", "not the git blob"},
		{Info{Size: 6, gitBlob: blobID}, "hell", "has 4 bytes, the Hub states 6"},
		{Info{Size: 6, sha256: sum}, "hello\n", ""},
		{Info{Size: 6, sha256: sum}, "hellO\n", "SHA-256"},
		{Info{Size: -1}, "anything", ""},
	} {
		for _, size := range []int64{int64(len(c.content)), -1} {
			ck := newContentCheck("the download", c.info, size)
			io.WriteString(ck, c.content[:len(c.content)/2])
			io.WriteString(ck, c.content[len(c.content)/2:])
			err := ck.result()
			if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)) {
				t.Errorf("%+v, %q (size %d): %v; want %q", c.info, c.content, size, err, c.bad)
			}
		}
	}
}

// GCS's and Azure's answers 429 and 5xx, which rest.do has retried, are
// UnavailableErrors; refusals, missing objects and other 4xx are not.
func TestRESTErrorKinds(t *testing.T) {
	loc := Location{Kind: GCS, Bucket: "b", Key: "k"}
	az := &azureStore{account: "acct"}
	for _, c := range []struct {
		status      int
		unavailable bool
	}{{500, true}, {503, true}, {429, true}, {403, false}, {404, false}, {400, false}} {
		resp := func() *http.Response {
			return &http.Response{StatusCode: c.status, Status: http.StatusText(c.status), Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}
		}
		if got := IsUnavailable(gcsError(loc, resp())); got != c.unavailable {
			t.Errorf("gcsError(%d): unavailable %v, want %v", c.status, got, c.unavailable)
		}
		if got := IsUnavailable(az.azureError(loc, resp())); got != c.unavailable {
			t.Errorf("azureError(%d): unavailable %v, want %v", c.status, got, c.unavailable)
		}
	}
}
