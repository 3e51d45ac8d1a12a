// Package fakehub is a loopback server that answers like the Hugging Face
// Hub for the requests augment makes, for tests: the revision API, resolve
// URLs that serve small files directly and redirect large (LFS) ones to a
// CDN path with X-Linked-Size/X-Linked-Etag, ETags, Range requests, 401
// without the token when one is required, and ways to misbehave: cut a
// download off, state no sizes (a mirror), state a wrong LFS size, answer
// any request with an error status. The CDN answers on a second port, so it
// is another host.
package fakehub

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Request is one request the server saw.
type Request struct {
	Method, Path string // Path as sent, escaped
	Range        string // the Range header
	Auth         bool   // an Authorization header was sent
}

// Server is the fake Hub. Its zero value is not usable: call New.
type Server struct {
	*httptest.Server
	// CDN serves the LFS files the resolve URLs redirect to, on a host of
	// its own (another port), as the real CDN is another host.
	CDN *httptest.Server
	// Token, when set, is required as "Bearer <Token>" by the API and the
	// resolve URLs (the CDN paths need none, as signed URLs).
	Token string

	mu       sync.Mutex
	branches map[string]map[string]string            // repo → branch → commit
	trees    map[string]map[string]map[string]string // repo → commit → path → blob key
	blobs    map[string][]byte                       // sha256 hex → content
	lfs      map[string]bool                         // blob keys served through the CDN
	log      []Request
	cut      map[string]cut // blob → how to cut its next full GETs
	fail     func(r *http.Request) (int, http.Header)
	noLength bool
	linked   int64
}

// Fail makes f be asked first about every request (the CDN's too): a
// non-zero status is answered instead, with header's fields and a short
// error text. nil stops it.
func (s *Server) Fail(f func(r *http.Request) (status int, header http.Header)) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

// NoLength makes the resolve URLs and the CDN answer, while on, as a
// mirror that states no size: no Content-Length (HEAD and GET), the body
// ended by closing the connection.
func (s *Server) NoLength(on bool) {
	s.mu.Lock()
	s.noLength = on
	s.mu.Unlock()
}

// LinkedSize makes every LFS file's X-Linked-Size state n instead of its
// size (0: its size).
func (s *Server) LinkedSize(n int64) {
	s.mu.Lock()
	s.linked = n
	s.mu.Unlock()
}

type cut struct {
	n     int64 // bytes served before the connection is dropped
	times int   // full GETs still to cut
}

// New starts a fake Hub on loopback.
func New() *Server {
	s := &Server{branches: map[string]map[string]string{}, trees: map[string]map[string]map[string]string{},
		blobs: map[string][]byte{}, lfs: map[string]bool{}, cut: map[string]cut{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops both servers.
func (s *Server) Close() {
	s.Server.Close()
	s.CDN.Close()
}

// Commit adds a commit to repo ("owner/name") holding files (path →
// content) and moves branch to it. Paths ending in .parquet, .gz or .zst,
// and files over 1 KiB, are served as LFS files through a redirect. It
// returns the commit hash (derived from the content and the branch's
// previous commit).
func (s *Server) Commit(repo, branch string, files map[string][]byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha1.New()
	if s.branches[repo] != nil {
		fmt.Fprintf(h, "parent %s\n", s.branches[repo][branch])
	}
	tree := map[string]string{}
	for p, b := range files {
		sum := sha256.Sum256(b)
		key := hex.EncodeToString(sum[:])
		s.blobs[key] = b
		s.lfs[key] = len(b) > 1024 || strings.HasSuffix(p, ".parquet") || strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".zst")
		tree[p] = key
		fmt.Fprintf(h, "%s %s\n", p, key)
	}
	commit := hex.EncodeToString(h.Sum(nil))
	if s.branches[repo] == nil {
		s.branches[repo] = map[string]string{}
		s.trees[repo] = map[string]map[string]string{}
	}
	s.branches[repo][branch] = commit
	s.trees[repo][commit] = tree
	return commit
}

// CutNext makes the next full (non-Range) download of content stop after n
// bytes, with the connection dropped.
func (s *Server) CutNext(content []byte, n int64) { s.Cut(content, n, 1) }

// Cut makes the next times full (non-Range) downloads of content, a small
// file's or an LFS file's, stop after n bytes, with the connection
// dropped (with NoLength, a download that looks complete).
func (s *Server) Cut(content []byte, n int64, times int) {
	sum := sha256.Sum256(content)
	s.mu.Lock()
	s.cut[hex.EncodeToString(sum[:])] = cut{n: n, times: times}
	s.mu.Unlock()
}

// cutting reports how many bytes of key to serve to r before dropping the
// connection, counting the cut as used.
func (s *Server) cutting(r *http.Request, key string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cut[key]
	if !ok || r.Method != http.MethodGet || r.Header.Get("Range") != "" {
		return 0, false
	}
	if c.times--; c.times <= 0 {
		delete(s.cut, key)
	} else {
		s.cut[key] = c
	}
	return c.n, true
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	s.mu.Lock()
	s.log = append(s.log, Request{Method: r.Method, Path: path, Range: r.Header.Get("Range"), Auth: r.Header.Get("Authorization") != ""})
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		if code, h := fail(r); code != 0 {
			for k, v := range h {
				w.Header()[k] = v
			}
			http.Error(w, "injected", code)
			return
		}
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	switch {
	case len(parts) == 2 && parts[0] == "cdn":
		s.cdn(w, r, parts[1])
	case len(parts) >= 6 && parts[0] == "api" && parts[1] == "datasets" && parts[4] == "revision":
		if !s.authorized(w, r) {
			return
		}
		s.revision(w, parts[2]+"/"+parts[3], strings.Join(parts[5:], "/"))
	case len(parts) >= 6 && parts[0] == "datasets" && parts[3] == "resolve":
		if !s.authorized(w, r) {
			return
		}
		s.resolve(w, r, parts[1]+"/"+parts[2], parts[4], strings.Join(parts[5:], "/"))
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.Token == "" || r.Header.Get("Authorization") == "Bearer "+s.Token {
		return true
	}
	w.Header().Set("X-Error-Code", "RepoNotFound")
	http.Error(w, `{"error":"Invalid credentials in Authorization header"}`, http.StatusUnauthorized)
	return false
}

// commitOf resolves a branch or commit of repo; "" when unknown.
func (s *Server) commitOf(repo, rev string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.branches[repo][rev]; ok {
		return c
	}
	if _, ok := s.trees[repo][rev]; ok {
		return rev
	}
	return ""
}

func (s *Server) revision(w http.ResponseWriter, repo, rev string) {
	c := s.commitOf(repo, rev)
	if c == "" {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, `{"error":"Invalid rev id"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": repo, "sha": c, "private": false})
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request, repo, rev, file string) {
	c := s.commitOf(repo, rev)
	if c == "" {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id", http.StatusNotFound)
		return
	}
	s.mu.Lock()
	key, ok := s.trees[repo][c][file]
	body, lfs, linked := s.blobs[key], s.lfs[key], s.linked
	s.mu.Unlock()
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", c)
	if lfs {
		size := int64(len(body))
		if linked != 0 {
			size = linked
		}
		w.Header().Set("X-Linked-Size", strconv.FormatInt(size, 10))
		w.Header().Set("X-Linked-Etag", `"`+key+`"`)
		w.Header().Set("ETag", `"`+key+`"`)
		w.Header().Set("Location", s.CDN.URL+"/cdn/"+key)
		w.WriteHeader(http.StatusFound)
		return
	}
	// Small files: the git blob id as ETag, served here.
	gh := sha1.New()
	fmt.Fprintf(gh, "blob %d\x00", len(body))
	gh.Write(body)
	w.Header().Set("ETag", `"`+hex.EncodeToString(gh.Sum(nil))+`"`)
	s.serveBlob(w, r, key, body)
}

func (s *Server) cdn(w http.ResponseWriter, r *http.Request, key string) {
	s.mu.Lock()
	body, ok := s.blobs[key]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"`+key+`"`)
	s.serveBlob(w, r, key, body)
}

// serveBlob answers r with body, cut as Cut asked, without its length
// with NoLength.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, key string, body []byte) {
	n, cutting := s.cutting(r, key)
	s.mu.Lock()
	noLength := s.noLength
	s.mu.Unlock()
	if noLength && r.Header.Get("Range") == "" {
		// Identity transfer without a length: the body ends when the
		// connection closes.
		w.Header().Set("Transfer-Encoding", "identity")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			if cutting {
				body = body[:n]
			}
			w.Write(body)
		}
		return
	}
	if cutting {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body[:n])
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}
