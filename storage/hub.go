package storage

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/augmentdata/augment/internal/retryafter"
)

// The Hugging Face Hub, as huggingface_hub talks to it:
//
//   - GET {endpoint}/api/datasets/{repo}/revision/{revision} answers
//     {"sha": "<commit>", …}: how a branch or tag is pinned to a commit.
//   - {endpoint}/datasets/{repo}/resolve/{commit}/{path} serves a file: 200
//     with the bytes for a small file, or a redirect to a CDN for a large
//     (LFS) one, whose headers X-Linked-Size and X-Linked-Etag give the
//     file's size and SHA-256; a small file's ETag is its git blob id
//     (the SHA-1 of "blob <size>\x00" and the content). Range requests
//     are honoured. 429 and 5xx answers are passing (Retry-After may say
//     how long); the CDN's URLs are signed for a short while.
//   - HF_ENDPOINT replaces https://huggingface.co (a mirror); HF_TOKEN,
//     when set, is sent as a bearer token, to the Hub's host only (it is
//     dropped on a redirect to another host, such as the CDN).

const defaultHubEndpoint = "https://huggingface.co"

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

type hub struct {
	endpoint string
	host     string // the endpoint's host: answers from another one are the CDN's
	token    string
	follow   *http.Client // follows redirects (downloads)
	noFollow *http.Client // stops at the first answer (metadata)
	log      *slog.Logger

	mu      sync.Mutex
	commits map[string]string // "repo@revision" → commit, once per Opener
}

func newHub(o Options) *hub {
	ep := strings.TrimRight(o.Getenv("HF_ENDPOINT"), "/")
	if ep == "" {
		ep = defaultHubEndpoint
	}
	host := ""
	if u, err := url.Parse(ep); err == nil {
		host = u.Host
	}
	return &hub{
		endpoint: ep,
		host:     host,
		token:    o.Getenv("HF_TOKEN"),
		follow: &http.Client{Transport: o.Transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			// The token is for the Hub: not for the CDN host a file
			// redirects to (Go would keep it for a subdomain).
			if req.URL.Host != via[0].URL.Host {
				req.Header.Del("Authorization")
			}
			return nil
		}},
		noFollow: &http.Client{Transport: o.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		log:     o.Log,
		commits: map[string]string{},
	}
}

func (h *hub) request(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	// Sizes and ranges are of the stored bytes: no transparent gzip.
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("User-Agent", "augment")
	return req, nil
}

// hubTries is how many times one request is sent while the Hub (or its
// CDN) answers 408, 429 or 5xx, or does not answer at all.
const hubTries = 4

// retryPause is the pause before a request's second try; each further
// try waits three times longer, unless the answer says how long
// (Retry-After).
var retryPause = 500 * time.Millisecond

// maxRetryAfter is the longest Retry-After waited for: an answer asking
// for longer ends the tries at once.
const maxRetryAfter = time.Minute

// passingStatus reports an answer that may differ when asked again.
func passingStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// retryWait is the pause before try+1 after resp (nil: no answer): the
// Retry-After resp carries, else backoff(try). It reports false when the
// server asks for longer than maxRetryAfter. The Hub and the REST clients
// (rest.go) wait by it, each with its own backoff.
func retryWait(try int, resp *http.Response, backoff func(try int) time.Duration) (time.Duration, bool) {
	if resp != nil {
		if d, ok := retryafter.Parse(resp.Header, time.Now()); ok {
			return d, d <= maxRetryAfter
		}
	}
	return backoff(try), true
}

// hubBackoff is the Hub's pause after try try without Retry-After:
// retryPause, three times longer after each further try.
func hubBackoff(try int) time.Duration {
	d := retryPause
	for range try - 1 {
		d *= 3
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// send sends the request mk makes (a new one per try) with c, again after
// a pause while the answer is passing (passingStatus) or missing, up to
// hubTries times. It returns the last answer whatever its status, or the
// error of a last try that got none (an *UnavailableError), and how many
// tries were made.
func (h *hub) send(ctx context.Context, loc Location, c *http.Client, mk func() (*http.Request, error)) (*http.Response, int, error) {
	for try := 1; ; try++ {
		req, err := mk()
		if err != nil {
			return nil, try, err
		}
		resp, err := c.Do(req)
		if err == nil && !passingStatus(resp.StatusCode) {
			return resp, try, nil
		}
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, try, ctx.Err()
		}
		wait, ok := retryWait(try, resp, hubBackoff)
		if try == hubTries || !ok {
			if err != nil {
				return nil, try, &UnavailableError{Err: fmt.Errorf("%s: the Hub did not answer (%d tries; a rerun tries again): %w", loc, try, err)}
			}
			return resp, try, nil
		}
		what := []any{"file", loc.String(), "try", try, "pause", wait.String()}
		if err != nil {
			what = append(what, "error", err)
		} else {
			what = append(what, "status", resp.Status)
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		h.log.Warn("hub request failed; trying again", what...)
		if err := sleep(ctx, wait); err != nil {
			return nil, try, err
		}
	}
}

// answered is the error of an answer that is not what was asked, about
// what (none: ""): for a passing status (passingStatus) an
// *UnavailableError.
func (h *hub) answered(what string, resp *http.Response, tries int, detail string) error {
	who := "the Hub"
	if h.fromCDN(resp) {
		who = "the Hub's CDN"
	}
	msg := fmt.Sprintf("%s answered %s%s", who, resp.Status, detail)
	if what != "" {
		msg = what + ": " + msg
	}
	if !passingStatus(resp.StatusCode) {
		return errors.New(msg)
	}
	if d, ok := retryWait(tries, resp, hubBackoff); !ok {
		msg += fmt.Sprintf(" and asks to wait %s; run again later", d)
	} else {
		msg += fmt.Sprintf(" (%d tries; a rerun tries again)", tries)
	}
	return &UnavailableError{Err: errors.New(msg)}
}

// fromCDN reports an answer from another host than the Hub's: the CDN a
// file download is redirected to.
func (h *hub) fromCDN(resp *http.Response) bool {
	return resp.Request != nil && resp.Request.URL.Host != h.host
}

// refused turns a 401, 403 or 404 into an error that says what to do;
// other statuses give nil. The Hub's refusals are *AuthError and
// *NotFoundError; the CDN's are plain errors, as its URLs are signed for a
// short while (HF_TOKEN is never sent there) and the Hub, asked again,
// redirects to a new one.
func (h *hub) refused(loc Location, resp *http.Response) error {
	if h.fromCDN(resp) {
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the Hub's CDN answered %s to the signed download URL the Hub redirected to: the URL has most likely expired (HF_TOKEN is not sent to the CDN); a rerun asks the Hub for a new one", resp.Status)
		case http.StatusNotFound, http.StatusGone:
			return fmt.Errorf("the Hub's CDN answered %s for the file the Hub redirected to (the Hub lists it at this commit); a rerun asks the Hub again", resp.Status)
		}
		return nil
	}
	what := "hf://datasets/" + loc.Repo
	code := resp.Header.Get("X-Error-Code")
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if h.token == "" {
			return &AuthError{Loc: what, Detail: "the Hub answered 401: the dataset is private or gated, or does not exist; set HF_TOKEN to a token that may read it"}
		}
		return &AuthError{Loc: what, Detail: "the Hub answered 401 to HF_TOKEN: the token is invalid or may not read this dataset"}
	case http.StatusForbidden:
		if h.token == "" {
			return &AuthError{Loc: what, Detail: "the Hub answered 403: set HF_TOKEN to a token that may read this dataset (a gated dataset needs its conditions accepted on the Hub)"}
		}
		return &AuthError{Loc: what, Detail: "the Hub answered 403: HF_TOKEN may not read this dataset (a gated dataset needs its conditions accepted on the Hub)"}
	case http.StatusNotFound:
		switch code {
		case "RevisionNotFound":
			return &NotFoundError{Loc: what, Detail: fmt.Sprintf("revision %q not found", loc.Revision)}
		case "EntryNotFound":
			return &NotFoundError{Loc: loc.String(), Detail: "no such file in the dataset at that revision"}
		}
		return &NotFoundError{Loc: loc.String(), Detail: "not found on the Hub (dataset, revision or file)"}
	}
	return nil
}

// commit pins loc's revision to a commit, asking the Hub once per revision.
func (h *hub) commit(ctx context.Context, loc Location) (string, error) {
	if commitHash.MatchString(loc.Revision) {
		return loc.Revision, nil
	}
	key := loc.Repo + "@" + loc.Revision
	h.mu.Lock()
	c, ok := h.commits[key]
	h.mu.Unlock()
	if ok {
		return c, nil
	}
	u := h.endpoint + "/api/datasets/" + loc.Repo + "/revision/" + url.PathEscape(loc.Revision)
	resp, tries, err := h.send(ctx, loc, h.follow, func() (*http.Request, error) { return h.request(ctx, http.MethodGet, u) })
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := h.refused(loc, resp); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", h.answered("hf://datasets/"+loc.Repo, resp, tries, fmt.Sprintf(" for revision %q", loc.Revision))
	}
	var body struct {
		SHA string `json:"sha"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&body); err != nil || !commitHash.MatchString(body.SHA) {
		return "", fmt.Errorf("hf://datasets/%s: the Hub's answer for revision %q names no commit", loc.Repo, loc.Revision)
	}
	h.mu.Lock()
	if c, ok := h.commits[key]; ok { // another caller won: keep one commit per run
		body.SHA = c
	}
	h.commits[key] = body.SHA
	h.mu.Unlock()
	if body.SHA != loc.Revision {
		h.log.Info("hub revision pinned", "dataset", loc.Repo, "revision", loc.Revision, "commit", body.SHA)
	}
	return body.SHA, nil
}

// resolveURL is the URL of loc's file at commit.
func (h *hub) resolveURL(loc Location, commit string) string {
	segs := strings.Split(loc.File, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return h.endpoint + "/datasets/" + loc.Repo + "/resolve/" + commit + "/" + strings.Join(segs, "/")
}

// stat asks the Hub for the file's size and hashes at the pinned commit.
func (h *hub) stat(ctx context.Context, loc Location) (Info, error) {
	commit, err := h.commit(ctx, loc)
	if err != nil {
		return Info{}, err
	}
	u := h.resolveURL(loc, commit)
	var resp *http.Response
	var tries int
	for hops := 0; ; hops++ {
		if resp, tries, err = h.send(ctx, loc, h.noFollow, func() (*http.Request, error) { return h.request(ctx, http.MethodHead, u) }); err != nil {
			return Info{}, err
		}
		resp.Body.Close()
		// A relative redirect stays on the Hub (a renamed dataset); an
		// absolute one goes to the CDN and carries the metadata already.
		where := resp.Header.Get("Location")
		if resp.StatusCode/100 != 3 || !strings.HasPrefix(where, "/") || strings.HasPrefix(where, "//") || hops == 5 {
			break
		}
		u = h.endpoint + where
	}
	if err := h.refused(loc, resp); err != nil {
		return Info{}, err
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode/100 != 3 {
		return Info{}, h.answered(loc.String(), resp, tries, "")
	}
	if c := resp.Header.Get("X-Repo-Commit"); c != "" && c != commit {
		return Info{}, fmt.Errorf("%s: the Hub served commit %s, not the pinned %s", loc, c, commit)
	}
	info := Info{Name: loc.Name(), Size: -1, hubURL: u}
	size := resp.Header.Get("X-Linked-Size")
	if size == "" {
		size = resp.Header.Get("Content-Length")
	}
	if n, err := strconv.ParseInt(size, 10, 64); err == nil && n >= 0 {
		info.Size = n
	}
	if e := normalizeETag(resp.Header.Get("X-Linked-Etag")); sha256Hex.MatchString(e) {
		info.sha256 = e
	} else if e == "" {
		// A file kept in git itself (not LFS): its ETag is the git blob id.
		if e := normalizeETag(resp.Header.Get("ETag")); gitBlobID.MatchString(e) {
			info.gitBlob = e
		}
	}
	pinned := loc
	pinned.Revision = commit
	info.Pin = pinned.String()
	return info, nil
}

var gitBlobID = regexp.MustCompile(`^[0-9a-f]{40}$`)

func normalizeETag(e string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(e), "W/"), `"`)
}

// hubChecks names what a download of the file is checked against; "" when
// the Hub states nothing.
func (i Info) hubChecks() string {
	var c []string
	if i.Size >= 0 {
		c = append(c, "size")
	}
	if i.sha256 != "" {
		c = append(c, "LFS SHA-256")
	}
	if i.gitBlob != "" {
		c = append(c, "git blob id")
	}
	return strings.Join(c, ", ")
}

// A contentCheck hashes a file's bytes as they are written to it, to
// compare them at the end with what the Hub states: the size, the LFS
// SHA-256, the git blob id (the SHA-1 of "blob <size>\x00" and the
// content; the plain SHA-1 of the content is taken as well, both naming
// the same bytes).
type contentCheck struct {
	what        string // "the download", "the cached copy"
	info        Info
	n           int64
	sum         hash.Hash // when the Hub states an LFS SHA-256
	blob, plain hash.Hash // when it states a git blob id and the size is known up front
	held        []byte    // a git blob id stated, the size not: the content, up to maxGitFile
	over        bool      // held would outgrow maxGitFile: the blob id is not checked
}

// maxGitFile bounds the content held to check a git blob id when the size
// is not known up front (the Hub keeps larger files in LFS).
const maxGitFile = 16 << 20

// newContentCheck checks size bytes (-1: not known before the end) of
// what.
func newContentCheck(what string, info Info, size int64) *contentCheck {
	c := &contentCheck{what: what, info: info}
	if info.sha256 != "" {
		c.sum = sha256.New()
	}
	if info.gitBlob != "" && size >= 0 {
		c.blob, c.plain = sha1.New(), sha1.New()
		fmt.Fprintf(c.blob, "blob %d\x00", size)
	}
	return c
}

func (c *contentCheck) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	for _, h := range []hash.Hash{c.sum, c.blob, c.plain} {
		if h != nil {
			h.Write(p)
		}
	}
	if c.info.gitBlob != "" && c.blob == nil && !c.over {
		if c.over = len(c.held)+len(p) > maxGitFile; c.over {
			c.held = nil
		} else {
			c.held = append(c.held, p...)
		}
	}
	return len(p), nil
}

// result says how the bytes written differ from what the Hub states, or
// nil.
func (c *contentCheck) result() error {
	if c.info.Size >= 0 && c.n != c.info.Size {
		return fmt.Errorf("%s has %d bytes, the Hub states %d", c.what, c.n, c.info.Size)
	}
	if c.sum != nil {
		if got := hex.EncodeToString(c.sum.Sum(nil)); got != c.info.sha256 {
			return fmt.Errorf("%s (%d bytes) has SHA-256 %s, the Hub states %s", c.what, c.n, got, c.info.sha256)
		}
	}
	if c.info.gitBlob == "" || c.over {
		return nil
	}
	if c.blob == nil {
		c.blob, c.plain = sha1.New(), sha1.New()
		fmt.Fprintf(c.blob, "blob %d\x00", len(c.held))
		c.blob.Write(c.held)
		c.plain.Write(c.held)
	}
	if hex.EncodeToString(c.blob.Sum(nil)) != c.info.gitBlob && hex.EncodeToString(c.plain.Sum(nil)) != c.info.gitBlob {
		return fmt.Errorf("%s (%d bytes) is not the git blob %s the Hub states (its ETag): cut short or altered", c.what, c.n, c.info.gitBlob)
	}
	return nil
}

// checkedBody is a streamed download that fails at its end when its bytes
// are not what the Hub states.
type checkedBody struct {
	io.ReadCloser
	loc Location
	c   *contentCheck
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.Write(p[:n])
	if err == io.EOF {
		if cerr := b.c.result(); cerr != nil {
			err = fmt.Errorf("%s: %w", b.loc, cerr)
		}
	}
	return n, err
}

// stream GETs the file, following the redirect to the CDN; reading it to
// the end checks it against what the Hub states.
func (h *hub) stream(ctx context.Context, loc Location, info Info) (io.ReadCloser, error) {
	resp, tries, err := h.send(ctx, loc, h.follow, func() (*http.Request, error) { return h.request(ctx, http.MethodGet, info.hubURL) })
	if err != nil {
		return nil, err
	}
	if err := h.refused(loc, resp); err != nil {
		resp.Body.Close()
		if h.fromCDN(resp) {
			err = fmt.Errorf("%s: %w", loc, err)
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, h.answered(loc.String(), resp, tries, "")
	}
	return &checkedBody{ReadCloser: resp.Body, loc: loc, c: newContentCheck("the download", info, info.Size)}, nil
}

// downloadAttempts bounds the tries of one download in one run; each try
// resumes where the one before stopped, or starts over after a download
// that did not check out.
const downloadAttempts = 4

// download makes the file local in the cache root and opens it. The file
// is kept under a name derived from the dataset, commit and path (a
// commit's files never change), so a later run reuses it, once it has
// checked it again against the hash the Hub states (with none stated, the
// copy is not trusted: it is downloaded again). Bytes arrive in
// "hub/<key>.part", which an interrupted download leaves behind and the
// next attempt (in this run or a later one) continues with a Range
// request; a complete part is checked against the size and hashes the Hub
// states (contentCheck), then renamed into place. A part that does not
// check out is discarded and downloaded again, up to downloadAttempts
// tries in all.
func (h *hub) download(ctx context.Context, cache *os.Root, loc Location, info Info) (*os.File, error) {
	key := hubKey(loc, info)
	if f, err := cache.Open(key); err == nil {
		why := h.cachedProblem(f, info)
		if why == nil {
			return f, nil
		}
		f.Close()
		h.log.Warn("hub cached copy not reused; downloading it again", "file", info.Pin, "reason", why)
		if err := cache.Remove(key); err != nil {
			return nil, err
		}
	}
	if err := cache.MkdirAll("hub", 0o755); err != nil {
		return nil, err
	}
	part := key + ".part"
	start := time.Now()
	checks := info.hubChecks()
	if checks == "" {
		checks = "nothing: the Hub states neither size nor hash (unverified)"
		h.log.Warn("the Hub states neither the size nor a hash of the file: its download cannot be checked", "file", info.Pin)
	}
	h.log.Info("hub download", "file", info.Pin, "bytes", info.Size)
	for attempt := 1; ; attempt++ {
		err := h.fetchPart(ctx, cache, part, loc, info)
		if err == nil {
			if err = h.verify(cache, part, info); err == nil {
				break
			}
			cache.Remove(part) // not the file: start over
			err = fmt.Errorf("%w; the download was discarded", err)
		}
		var auth *AuthError
		var nf *NotFoundError
		var down *UnavailableError
		if errors.As(err, &auth) || errors.As(err, &nf) || errors.As(err, &down) || ctx.Err() != nil {
			return nil, err
		}
		if attempt == downloadAttempts {
			kept := "run again to download it anew"
			if fi, serr := cache.Stat(part); serr == nil && fi.Size() > 0 {
				kept = "the part is kept; run again to resume"
			}
			return nil, fmt.Errorf("%s: download failed after %d attempts (%s): %w", loc, attempt, kept, err)
		}
		wait, _ := retryWait(attempt, nil, hubBackoff)
		h.log.Warn("hub download failed; trying again", "file", loc.String(), "attempt", attempt, "pause", wait.String(), "error", err)
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
	if err := cache.Rename(part, key); err != nil {
		return nil, err
	}
	h.log.Info("hub download done", "file", info.Pin, "checked", checks, "seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	if d, err := cache.Open("hub"); err == nil {
		d.Sync()
		d.Close()
	}
	return cache.Open(key)
}

// cachedProblem says why the cached copy f is not the file info describes
// (nil: it is, and f is at its start): its bytes must match the hash the
// Hub states.
func (h *hub) cachedProblem(f *os.File, info Info) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if info.sha256 == "" && info.gitBlob == "" {
		return errors.New("the Hub states no hash to check it against")
	}
	c := newContentCheck("the cached copy", info, fi.Size())
	if _, err := io.Copy(c, f); err != nil {
		return err
	}
	if err := c.result(); err != nil {
		return err
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// hubKey is the cache name of a pinned Hub file.
func hubKey(loc Location, info Info) string {
	sum := sha256.Sum256([]byte(loc.Repo + "\x00" + info.Pin))
	return "hub/" + hex.EncodeToString(sum[:20])
}

// fetchPart continues the part file from its current size to the end of
// the file as the server sends it; nil means the part holds what the
// server says is the whole file.
func (h *hub) fetchPart(ctx context.Context, cache *os.Root, part string, loc Location, info Info) error {
	f, err := cache.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	have := fi.Size()
	if info.Size >= 0 && have > info.Size {
		have = 0
	}
	if info.Size >= 0 && have == info.Size {
		return nil
	}
	if have > 0 {
		h.log.Info("hub download resumed", "file", loc.String(), "from_byte", have)
	}
	resp, tries, err := h.send(ctx, loc, h.follow, func() (*http.Request, error) {
		req, err := h.request(ctx, http.MethodGet, info.hubURL)
		if err == nil && have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		}
		return req, err
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := h.refused(loc, resp); err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return fmt.Errorf("asked for bytes from %d, got %q", have, resp.Header.Get("Content-Range"))
		}
	case http.StatusOK: // the whole file: start over
		have = 0
		if info.Size >= 0 && resp.ContentLength >= 0 && resp.ContentLength != info.Size {
			return fmt.Errorf("the server sends %d bytes, the Hub states %d", resp.ContentLength, info.Size)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// The file ends before the part does: start over.
		if err := f.Truncate(0); err != nil {
			return err
		}
		if info.Size >= 0 {
			return fmt.Errorf("the server has no bytes from byte %d on (%s), while the Hub states %d", have, resp.Status, info.Size)
		}
		return fmt.Errorf("the server has no bytes from byte %d on (%s)", have, resp.Status)
	default:
		if passingStatus(resp.StatusCode) { // download returns it as is
			return h.answered(loc.String(), resp, tries, "")
		}
		return h.answered("", resp, tries, "")
	}
	if err := f.Truncate(have); err != nil {
		return err
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return err
	}
	n, err := io.Copy(f, resp.Body)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if info.Size >= 0 && have+n != info.Size {
		return fmt.Errorf("the download ended after %d bytes, the Hub states %d", have+n, info.Size)
	}
	return nil
}

// rangeStart reads the first byte of "bytes 100-199/200".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok || first == "" || strings.Trim(first, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

// verify checks a complete part against what the Hub states.
func (h *hub) verify(cache *os.Root, part string, info Info) error {
	f, err := cache.Open(part)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	c := newContentCheck("the download", info, fi.Size())
	if _, err := io.Copy(c, f); err != nil {
		return err
	}
	return c.result()
}
