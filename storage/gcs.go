package storage

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// Google Cloud Storage through its JSON API (storage/v1): object metadata
// and media download with Range, multipart upload (metadata and bytes in
// one request) for small objects and resumable upload in chunks for large
// ones, list and delete. An object is read at the generation the run
// pinned (ifGenerationMatch), and every upload states the content's MD5,
// which the service checks.

// GCSConfig is the pipeline's storage.gcs block: where GCS is, never how to
// sign in.
type GCSConfig struct {
	// Endpoint is the URL of a GCS-compatible server (fake-gcs-server, an
	// emulator), e.g. http://127.0.0.1:4443. Default: STORAGE_EMULATOR_HOST
	// (as Google's own clients read it; requests then go unauthenticated),
	// else https://storage.googleapis.com.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
}

const gcsCreds = "GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login, or the metadata server"

// Validate returns what is wrong with the block, one message per problem,
// each starting with its YAML path.
func (c GCSConfig) Validate() []string {
	return endpointProblems("storage.gcs.endpoint", c.Endpoint, gcsCreds)
}

type gcsStore struct {
	rest
	ep string // the endpoint, without a trailing slash
}

// gcsScope is the OAuth scope of reading and writing objects.
const gcsScope = "https://www.googleapis.com/auth/devstorage.read_write"

// newGCS makes the client for gs:// locations. Credentials are Google's
// Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the
// file gcloud auth application-default login writes, the metadata server
// on Google Cloud); with none, requests go unauthenticated (public
// buckets). An emulator named by STORAGE_EMULATOR_HOST is spoken to
// without credentials, as Google's clients do.
func newGCS(cfg GCSConfig, getenv func(string) string, transport http.RoundTripper) (*gcsStore, error) {
	ep, anonymous := cfg.Endpoint, false
	if ep == "" {
		if h := getenv("STORAGE_EMULATOR_HOST"); h != "" {
			ep, anonymous = h, true
			if !strings.Contains(h, "://") {
				ep = "http://" + h
			}
		}
	}
	if ep == "" {
		ep = "https://storage.googleapis.com"
	}
	u, err := checkEndpoint(ep, gcsCreds)
	if err != nil {
		return nil, fmt.Errorf("GCS endpoint: %w", err)
	}
	hc := &http.Client{Transport: transport}
	if !anonymous {
		// The credentials are looked up once; a token is fetched (and
		// refreshed) when a request needs it.
		creds, err := google.FindDefaultCredentials(context.Background(), gcsScope)
		switch {
		case err == nil:
			hc = &http.Client{Transport: &oauth2.Transport{Source: creds.TokenSource, Base: transport}}
		case getenv("GOOGLE_APPLICATION_CREDENTIALS") != "":
			// A key file named but unreadable is a mistake to report,
			// not a reason to go on anonymous.
			return nil, fmt.Errorf("GOOGLE_APPLICATION_CREDENTIALS: %w", err)
		}
	}
	return &gcsStore{rest: rest{hc: hc}, ep: u.String()}, nil
}

// gcsObj is the JSON API's object resource, the fields read here.
type gcsObj struct {
	Name       string `json:"name"`
	Size       string `json:"size"`
	Generation string `json:"generation"`
	MD5Hash    string `json:"md5Hash"`
	Updated    string `json:"updated"`
}

func (g gcsObj) object() (blobObject, error) {
	size, err := strconv.ParseInt(g.Size, 10, 64)
	if err != nil {
		return blobObject{}, fmt.Errorf("object %s: size %q", g.Name, g.Size)
	}
	obj := blobObject{Key: g.Name, Size: size, ETag: g.Generation}
	obj.Modified, _ = time.Parse(time.RFC3339Nano, g.Updated)
	if b, err := base64.StdEncoding.DecodeString(g.MD5Hash); err == nil && len(b) == md5.Size {
		obj.MD5 = hex.EncodeToString(b)
	}
	return obj, nil
}

// objectURL is the JSON API URL of an object (the name escaped whole,
// slashes too).
func (s *gcsStore) objectURL(loc Location) string {
	return s.ep + "/storage/v1/b/" + url.PathEscape(loc.Bucket) + "/o/" + url.PathEscape(loc.Key)
}

// gcsError turns an error answer into a message a user can act on.
func gcsError(loc Location, resp *http.Response) error {
	msg := readError(resp)
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(msg), &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		detail := "no such object"
		if strings.Contains(strings.ToLower(msg), "bucket") {
			detail = "no such bucket"
		}
		return &NotFoundError{Loc: loc.String(), Detail: detail}
	case http.StatusPreconditionFailed:
		return errChanged(loc)
	case http.StatusUnauthorized, http.StatusForbidden:
		return &AuthError{Loc: loc.String(), Detail: fmt.Sprintf("%s (%s): set GOOGLE_APPLICATION_CREDENTIALS to a service account key file that may use it (or sign in with gcloud auth application-default login)", resp.Status, msg)}
	}
	err := fmt.Errorf("%s: GCS answered %s: %s", loc, resp.Status, answerDetail(resp, msg))
	if passingStatus(resp.StatusCode) { // after rest.do's retries: no config problem
		return &UnavailableError{Err: err}
	}
	return err
}

func (s *gcsStore) getJSON(ctx context.Context, loc Location, u string, v any) error {
	resp, err := s.do(ctx, func() (*http.Request, error) { return http.NewRequest("GET", u, nil) })
	if err != nil {
		return fmt.Errorf("%s: %w", loc, err)
	}
	if resp.StatusCode != http.StatusOK {
		return gcsError(loc, resp)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: GCS answer: %w", loc, err)
	}
	return nil
}

func (s *gcsStore) stat(ctx context.Context, loc Location) (blobObject, error) {
	var g gcsObj
	if err := s.getJSON(ctx, loc, s.objectURL(loc), &g); err != nil {
		return blobObject{}, err
	}
	return g.object()
}

// open reads the pinned generation only (ifGenerationMatch), from off on.
func (s *gcsStore) open(ctx context.Context, loc Location, obj blobObject, off int64) (io.ReadCloser, error) {
	u := s.objectURL(loc) + "?alt=media&ifGenerationMatch=" + url.QueryEscape(obj.ETag)
	resp, err := s.do(ctx, func() (*http.Request, error) {
		req, err := http.NewRequest("GET", u, nil)
		if err == nil && off > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		}
		return req, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	want := http.StatusOK
	if off > 0 {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		return nil, gcsError(loc, resp)
	}
	// A server that ignores the precondition is caught here.
	if g := resp.Header.Get("X-Goog-Generation"); g != "" && g != obj.ETag {
		resp.Body.Close()
		return nil, errChanged(loc)
	}
	return resp.Body, nil
}

// get reads the object's metadata, then its bytes bound to that
// generation (ifGenerationMatch); a generation replaced in between is
// read again, from its metadata.
func (s *gcsStore) get(ctx context.Context, loc Location) (io.ReadCloser, blobObject, error) {
	for try := 1; ; try++ {
		obj, err := s.stat(ctx, loc)
		if err != nil {
			return nil, blobObject{}, err
		}
		body, err := s.open(ctx, loc, obj, 0)
		if errors.Is(err, errObjectChanged) && try < blobReadTries {
			continue
		}
		return body, obj, err
	}
}

// put uploads in one multipart request up to mirrorPartSize, else by a
// resumable upload in chunks of mirrorPartSize (a multiple of the 256 KiB
// the service wants), the object appearing when the last chunk is in.
// Both state the content's MD5, which the service checks. A condition is
// ifGenerationMatch: 0 (no live object) or the generation.
func (s *gcsStore) put(ctx context.Context, loc Location, f io.ReaderAt, size int64, cond putCond) (blobObject, error) {
	if err := checkCond(loc, size, cond); err != nil {
		return blobObject{}, err
	}
	sum, err := localMD5(io.NewSectionReader(f, 0, size))
	if err != nil {
		return blobObject{}, err
	}
	raw, _ := hex.DecodeString(sum)
	meta, _ := json.Marshal(map[string]string{"name": loc.Key, "md5Hash": base64.StdEncoding.EncodeToString(raw), "contentType": "application/octet-stream"})
	upload := s.ep + "/upload/storage/v1/b/" + url.PathEscape(loc.Bucket) + "/o"
	var resp *http.Response
	if size <= mirrorPartSize {
		q := url.Values{"uploadType": {"multipart"}, "name": {loc.Key}}
		switch {
		case cond.absent:
			q.Set("ifGenerationMatch", "0")
		case cond.match != "":
			q.Set("ifGenerationMatch", cond.match)
		}
		resp, err = s.do(ctx, func() (*http.Request, error) {
			body, ctype, n := gcsMultipart(meta, io.NewSectionReader(f, 0, size), size)
			req, err := http.NewRequest("POST", upload+"?"+q.Encode(), body)
			if err == nil {
				req.Header.Set("Content-Type", ctype)
				req.ContentLength = n
			}
			return req, err
		})
	} else {
		resp, err = s.resumable(ctx, loc, upload, meta, f, size)
	}
	if err != nil {
		return blobObject{}, fmt.Errorf("%s: %w", loc, err)
	}
	if cond.set() && resp.StatusCode == http.StatusPreconditionFailed {
		resp.Body.Close()
		return blobObject{}, fmt.Errorf("%s: %w", loc, errConditionFailed)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return blobObject{}, gcsError(loc, resp)
	}
	defer resp.Body.Close()
	var g gcsObj
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		return blobObject{}, fmt.Errorf("%s: GCS answer: %w", loc, err)
	}
	obj, err := g.object()
	if err != nil || obj.Size != size || obj.MD5 != "" && obj.MD5 != sum {
		return blobObject{}, fmt.Errorf("%s: the stored object (size %s, MD5 %s) is not what was sent (%d bytes, MD5 %s)", loc, g.Size, obj.MD5, size, sum)
	}
	return obj, nil
}

// gcsMultipart is a multipart/related body: the metadata, then the bytes.
func gcsMultipart(meta []byte, data io.Reader, size int64) (io.Reader, string, int64) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	pw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/json; charset=UTF-8"}})
	pw.Write(meta)
	mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/octet-stream"}})
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	n := int64(head.Len()) + size + int64(len(tail))
	return io.MultiReader(&head, data, strings.NewReader(tail)), "multipart/related; boundary=" + mw.Boundary(), n
}

// resumable starts a resumable upload session and sends the file in
// chunks; it returns the answer that completes the upload (or the error
// answer that ends it). A chunk is sent once: when its answer is lost or
// passing (a connection cut after the server got the bytes, a 503), the
// upload's status is asked (an empty PUT with Content-Range: bytes
// */SIZE) and the upload goes on from the offset the service says it
// persisted (the Range of its 308), or ends with its 200 or 201 if the
// upload is complete, as Google documents for resumable uploads. Resending
// a chunk blind would store its bytes twice wherever the first send got
// through. Tries and pauses follow rest.do's policy (rest.wait), counted
// from the last chunk that moved the upload on.
func (s *gcsStore) resumable(ctx context.Context, loc Location, upload string, meta []byte, f io.ReaderAt, size int64) (*http.Response, error) {
	resp, err := s.do(ctx, func() (*http.Request, error) {
		req, err := http.NewRequest("POST", upload+"?uploadType=resumable&name="+url.QueryEscape(loc.Key), bytes.NewReader(meta))
		if err == nil {
			req.Header.Set("Content-Type", "application/json; charset=UTF-8")
			req.Header.Set("X-Upload-Content-Type", "application/octet-stream")
			req.Header.Set("X-Upload-Content-Length", strconv.FormatInt(size, 10))
		}
		return req, err
	})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return nil, gcsError(loc, resp)
	}
	resp.Body.Close()
	session := resp.Header.Get("Location")
	if session == "" {
		return nil, fmt.Errorf("GCS started no upload session (no Location header)")
	}
	off, try, waited := int64(0), 0, time.Duration(0)
	for {
		n := min(mirrorPartSize, size-off)
		req, err := s.prepare(ctx, func() (*http.Request, error) {
			var body io.Reader
			if n > 0 {
				body = io.NewSectionReader(f, off, n)
			}
			req, err := http.NewRequest("PUT", session, body)
			if err == nil {
				req.ContentLength = n
				req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size))
				if n == 0 { // all persisted, not yet complete: completes it
					req.Header.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
				}
			}
			return req, err
		})
		if err != nil {
			return nil, err
		}
		resp, err := s.hc.Do(req) // once: see above
		if err == nil && !passingStatus(resp.StatusCode) {
			if resp.StatusCode != http.StatusPermanentRedirect { // done, or refused
				return resp, nil
			}
			// 308: the next chunk starts where the service says.
			next, err := gcsPersisted(resp, size)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			if next > off {
				off, try, waited = next, 0, 0
				continue
			}
			// No progress: as an interrupted chunk.
		}
		try++
		if again, werr := s.wait(ctx, try, resp, &waited); werr != nil {
			return nil, werr
		} else if !again {
			if err == nil && resp.StatusCode == http.StatusPermanentRedirect {
				return nil, fmt.Errorf("GCS persisted nothing of the chunk at offset %d in %d tries", off, try)
			}
			return resp, err
		}
		// Where does the upload stand?
		st, err := s.do(ctx, func() (*http.Request, error) {
			req, err := http.NewRequest("PUT", session, nil)
			if err == nil {
				req.Header.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			}
			return req, err
		})
		if err != nil {
			return nil, err
		}
		if st.StatusCode != http.StatusPermanentRedirect {
			return st, nil // complete (200, 201), or the error that ends it
		}
		next, err := gcsPersisted(st, size)
		st.Body.Close()
		if err != nil {
			return nil, err
		}
		if next > off {
			try, waited = 0, 0 // the chunk got through, or part of it
		}
		off = next
	}
}

// gcsPersisted reads how many bytes of a resumable upload of size bytes
// the service holds from the Range header of its 308 answer ("bytes=0-N":
// N+1; none: 0).
func gcsPersisted(resp *http.Response, size int64) (int64, error) {
	r := resp.Header.Get("Range")
	if r == "" {
		return 0, nil
	}
	end, ok := strings.CutPrefix(r, "bytes=0-")
	n, err := strconv.ParseInt(end, 10, 64)
	if !ok || err != nil || n < 0 || n >= size {
		return 0, fmt.Errorf("GCS answered a resumable upload of %d bytes with Range %q", size, r)
	}
	return n + 1, nil
}

func (s *gcsStore) list(ctx context.Context, bucket, prefix string, max int) iter.Seq2[blobObject, error] {
	return func(yield func(blobObject, error) bool) {
		loc := Location{Kind: GCS, Bucket: bucket, Key: prefix}
		token := ""
		for {
			q := url.Values{"prefix": {prefix}}
			if max > 0 {
				q.Set("maxResults", strconv.Itoa(max))
			}
			if token != "" {
				q.Set("pageToken", token)
			}
			var page struct {
				Items         []gcsObj `json:"items"`
				NextPageToken string   `json:"nextPageToken"`
			}
			if err := s.getJSON(ctx, loc, s.ep+"/storage/v1/b/"+url.PathEscape(bucket)+"/o?"+q.Encode(), &page); err != nil {
				yield(blobObject{}, err)
				return
			}
			for _, g := range page.Items {
				obj, err := g.object()
				if !yield(obj, err) || err != nil {
					return
				}
			}
			if token = page.NextPageToken; token == "" {
				return
			}
		}
	}
}

func (s *gcsStore) remove(ctx context.Context, loc Location) error {
	resp, err := s.do(ctx, func() (*http.Request, error) { return http.NewRequest("DELETE", s.objectURL(loc), nil) })
	if err != nil {
		return fmt.Errorf("%s: %w", loc, err)
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return gcsError(loc, resp)
	}
	resp.Body.Close()
	return nil
}

// same compares with the MD5 GCS keeps of every object uploaded whole.
func (s *gcsStore) same(local io.ReadSeeker, obj blobObject) (bool, error) {
	return sameMD5(local, obj.MD5)
}
