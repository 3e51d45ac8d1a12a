package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
)

// The Hugging Face Hub, as huggingface_hub talks to it:
//
//   - GET {endpoint}/api/datasets/{repo}/revision/{revision} answers
//     {"sha": "<commit>", …}: how a branch or tag is pinned to a commit.
//   - {endpoint}/datasets/{repo}/resolve/{commit}/{path} serves a file: 200
//     with the bytes for a small file, or a redirect to a CDN for a large
//     (LFS) one, whose headers X-Linked-Size and X-Linked-Etag give the
//     file's size and SHA-256. Range requests are honoured.
//   - HF_ENDPOINT replaces https://huggingface.co (a mirror); HF_TOKEN,
//     when set, is sent as a bearer token, to the Hub's host only (it is
//     dropped on a redirect to another host, such as the CDN).

const defaultHubEndpoint = "https://huggingface.co"

var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

type hub struct {
	endpoint string
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
	return &hub{
		endpoint: ep,
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

// refused turns a 401, 403 or 404 from the Hub into an error that says what
// to do; other statuses give nil.
func (h *hub) refused(loc Location, resp *http.Response) error {
	what := "hf://datasets/" + loc.Repo
	code := resp.Header.Get("X-Error-Code")
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if h.token == "" {
			return &AuthError{Loc: what, Detail: "the Hub answered 401: the dataset is private or gated, or does not exist; set HF_TOKEN to a token that may read it"}
		}
		return &AuthError{Loc: what, Detail: "the Hub answered 401 to HF_TOKEN: the token is invalid or may not read this dataset"}
	case http.StatusForbidden:
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
	req, err := h.request(ctx, http.MethodGet, h.endpoint+"/api/datasets/"+loc.Repo+"/revision/"+url.PathEscape(loc.Revision))
	if err != nil {
		return "", err
	}
	resp, err := h.follow.Do(req)
	if err != nil {
		return "", fmt.Errorf("hf://datasets/%s: asking the Hub for revision %q: %w", loc.Repo, loc.Revision, err)
	}
	defer resp.Body.Close()
	if err := h.refused(loc, resp); err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("hf://datasets/%s: the Hub answered %s for revision %q", loc.Repo, resp.Status, loc.Revision)
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
	for hops := 0; ; hops++ {
		req, err := h.request(ctx, http.MethodHead, u)
		if err != nil {
			return Info{}, err
		}
		if resp, err = h.noFollow.Do(req); err != nil {
			return Info{}, fmt.Errorf("%s: %w", loc, err)
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
		return Info{}, fmt.Errorf("%s: the Hub answered %s", loc, resp.Status)
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
	}
	pinned := loc
	pinned.Revision = commit
	info.Pin = pinned.String()
	return info, nil
}

func normalizeETag(e string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(e), "W/"), `"`)
}

// stream GETs the file, following the redirect to the CDN.
func (h *hub) stream(ctx context.Context, loc Location, info Info) (io.ReadCloser, error) {
	req, err := h.request(ctx, http.MethodGet, info.hubURL)
	if err != nil {
		return nil, err
	}
	resp, err := h.follow.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	if err := h.refused(loc, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: the Hub answered %s", loc, resp.Status)
	}
	return resp.Body, nil
}

// downloadAttempts bounds the tries of one download in one run; each try
// resumes where the one before stopped.
const downloadAttempts = 4

// download makes the file local in the cache root and opens it. The file
// is kept under a name derived from the dataset, commit and path (a
// commit's files never change), so a later run reuses it. Bytes arrive in
// "hub/<key>.part", which an interrupted download leaves behind and the
// next attempt (in this run or a later one) continues with a Range
// request; a complete part is checked against the size and the LFS SHA-256
// the Hub states, then renamed into place.
func (h *hub) download(ctx context.Context, cache *os.Root, loc Location, info Info) (*os.File, error) {
	key := hubKey(loc, info)
	if f, err := cache.Open(key); err == nil {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && (info.Size < 0 || fi.Size() == info.Size) {
			return f, nil
		}
		f.Close()
		if err := cache.Remove(key); err != nil {
			return nil, err
		}
	}
	if err := cache.MkdirAll("hub", 0o755); err != nil {
		return nil, err
	}
	part := key + ".part"
	start := time.Now()
	h.log.Info("hub download", "file", info.Pin, "bytes", info.Size)
	var last error
	for attempt := 1; attempt <= downloadAttempts; attempt++ {
		done, err := h.fetchPart(ctx, cache, part, loc, info)
		if err == nil {
			if done {
				break
			}
			continue
		}
		var auth *AuthError
		var nf *NotFoundError
		if errors.As(err, &auth) || errors.As(err, &nf) || ctx.Err() != nil {
			return nil, err
		}
		last = err
		h.log.Warn("hub download interrupted; resuming", "file", loc.String(), "attempt", attempt, "error", err)
		if attempt == downloadAttempts {
			return nil, fmt.Errorf("%s: download failed after %d attempts (the part is kept; run again to resume): %w", loc, attempt, last)
		}
	}
	if err := h.verify(cache, part, info); err != nil {
		cache.Remove(part)
		return nil, fmt.Errorf("%s: %w (the download was discarded; run again to fetch it anew)", loc, err)
	}
	if err := cache.Rename(part, key); err != nil {
		return nil, err
	}
	h.log.Info("hub download done", "file", info.Pin, "seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	if d, err := cache.Open("hub"); err == nil {
		d.Sync()
		d.Close()
	}
	return cache.Open(key)
}

// hubKey is the cache name of a pinned Hub file.
func hubKey(loc Location, info Info) string {
	sum := sha256.Sum256([]byte(loc.Repo + "\x00" + info.Pin))
	return "hub/" + hex.EncodeToString(sum[:20])
}

// fetchPart continues the part file from its current size. It reports
// whether the part now holds the whole file.
func (h *hub) fetchPart(ctx context.Context, cache *os.Root, part string, loc Location, info Info) (bool, error) {
	f, err := cache.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	have := fi.Size()
	if info.Size >= 0 && have > info.Size {
		have = 0
	}
	if info.Size >= 0 && have == info.Size {
		return true, nil
	}
	req, err := h.request(ctx, http.MethodGet, info.hubURL)
	if err != nil {
		return false, err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		h.log.Info("hub download resumed", "file", loc.String(), "from_byte", have)
	}
	resp, err := h.follow.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if err := h.refused(loc, resp); err != nil {
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return false, fmt.Errorf("asked for bytes from %d, got %q", have, resp.Header.Get("Content-Range"))
		}
	case http.StatusOK: // the whole file: start over
		have = 0
	case http.StatusRequestedRangeNotSatisfiable:
		// The part is longer than the file: start over.
		return false, f.Truncate(0)
	default:
		return false, fmt.Errorf("the Hub answered %s", resp.Status)
	}
	if err := f.Truncate(have); err != nil {
		return false, err
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return false, err
	}
	n, err := io.Copy(f, resp.Body)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if err != nil {
		return false, err
	}
	if info.Size >= 0 && have+n != info.Size {
		return false, fmt.Errorf("got %d of %d bytes", have+n, info.Size)
	}
	return true, nil
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

// verify checks a complete part against what the Hub stated.
func (h *hub) verify(cache *os.Root, part string, info Info) error {
	f, err := cache.Open(part)
	if err != nil {
		return err
	}
	defer f.Close()
	hs := sha256.New()
	n, err := io.Copy(hs, f)
	if err != nil {
		return err
	}
	if info.Size >= 0 && n != info.Size {
		return fmt.Errorf("downloaded %d bytes, the Hub states %d", n, info.Size)
	}
	if got := hex.EncodeToString(hs.Sum(nil)); info.sha256 != "" && got != info.sha256 {
		return fmt.Errorf("downloaded content has SHA-256 %s, the Hub states %s", got, info.sha256)
	}
	return nil
}
