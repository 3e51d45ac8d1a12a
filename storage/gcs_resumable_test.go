package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// objectBytes is n bytes in which no stretch repeats another: a chunk
// stored twice, or a stream resumed at the wrong offset, shows.
func objectBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// gcsSessions stands between the GCS client and fake-gcs-server during a
// resumable upload: it loses the answer to the chunk drop picks (the
// server got and stored its bytes), and answers the upload's status
// queries (an empty PUT, Content-Range: bytes */SIZE) as GCS documents,
// from what the server acknowledged: 308 with the persisted Range, or the
// completing answer again. fake-gcs-server 1.56.1 cannot answer them
// itself: it takes a status query for the last chunk and completes the
// object with what it holds (fsouza/fake-gcs-server issues 1362, 2354).
type gcsSessions struct {
	base    http.RoundTripper
	drop    func(start, end, size int64) bool
	mu      sync.Mutex
	held    map[string]int64  // bytes the server acknowledged, by upload_id
	done    map[string][]byte // the completing answer's body, by upload_id
	dropped int
	queries int
}

func (g *gcsSessions) RoundTrip(req *http.Request) (*http.Response, error) {
	id := req.URL.Query().Get("upload_id")
	cr := req.Header.Get("Content-Range")
	if req.Method != "PUT" || id == "" || cr == "" {
		return g.base.RoundTrip(req)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if strings.HasPrefix(cr, "bytes */") && req.ContentLength == 0 {
		g.queries++
		if body, ok := g.done[id]; ok {
			return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(bytes.NewReader(body)), Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
		}
		h := http.Header{}
		if n := g.held[id]; n > 0 {
			h.Set("Range", fmt.Sprintf("bytes=0-%d", n-1))
		}
		return &http.Response{StatusCode: 308, Status: "308 Permanent Redirect", Header: h, Body: io.NopCloser(strings.NewReader("")),
			Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
	}
	var start, end, size int64
	if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &start, &end, &size); err != nil {
		return nil, fmt.Errorf("test transport: Content-Range %q: %v", cr, err)
	}
	resp, err := g.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch resp.StatusCode {
	case 308:
		g.held[id] = end + 1
	case 200, 201:
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		g.done[id] = body
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	if g.drop(start, end, size) {
		g.dropped++
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, nil
}

// A resumable upload whose chunk reached the server but whose answer was
// lost asks where the upload stands and goes on from there: the object is
// the file, byte for byte (QA: the chunk was sent again and stored twice).
// Losing the first chunk's answer, and the last's (the upload completed).
func testGCSResumableAnswerLost(t *testing.T, c cloud) {
	data := objectBytes(mirrorPartSize + 256<<10 + 5) // two chunks
	for _, tc := range []struct {
		name string
		drop func(start, end, size int64) bool
	}{
		{"first chunk", func(start, _, _ int64) bool { return start == 0 }},
		{"last chunk", func(_, end, size int64) bool { return end == size-1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			once := false
			g := &gcsSessions{base: http.DefaultTransport, held: map[string]int64{}, done: map[string][]byte{},
				drop: func(start, end, size int64) bool {
					if !once && tc.drop(start, end, size) {
						once = true
						return true
					}
					return false
				}}
			o := c.opener(g)
			s, err := o.store(GCS)
			if err != nil {
				t.Fatal(err)
			}
			restOf(t, s).pause = func(context.Context, time.Duration) error { return nil }
			loc := mustParse(t, c.url("resumable/"+url.PathEscape(tc.name)))
			obj, err := s.put(context.Background(), loc, bytes.NewReader(data), int64(len(data)), anyVersion)
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			if g.dropped != 1 || g.queries != 1 {
				t.Errorf("%d answers lost, %d status queries; want 1 and 1", g.dropped, g.queries)
			}
			body, got, err := s.get(context.Background(), loc)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(body)
			body.Close()
			if err != nil || !bytes.Equal(b, data) || got.Size != int64(len(data)) || got.ETag != obj.ETag {
				t.Fatalf("stored %d bytes (%v), equal %v, generation %s; want the file's %d bytes at %s", len(b), err, bytes.Equal(b, data), got.ETag, len(data), obj.ETag)
			}
		})
	}
}

func TestGCSPersisted(t *testing.T) {
	for _, c := range []struct {
		rng  string
		want int64
		ok   bool
	}{
		{"", 0, true}, {"bytes=0-0", 1, true}, {"bytes=0-999", 1000, true},
		{"bytes=0-1000", 0, false}, // beyond the upload's 1000 bytes
		{"bytes=1-5", 0, false}, {"bytes=0-", 0, false}, {"bytes=0--1", 0, false}, {"0-5", 0, false}, {"bytes=0-x", 0, false},
	} {
		resp := &http.Response{Header: http.Header{}}
		if c.rng != "" {
			resp.Header.Set("Range", c.rng)
		}
		got, err := gcsPersisted(resp, 1000)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("Range %q: %d, %v; want %d, ok %v", c.rng, got, err, c.want, c.ok)
		}
	}
}

// FuzzGCSPersisted: any Range gives an offset within the upload, or an
// error; a well-formed one gives its end plus one.
func FuzzGCSPersisted(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=0-99", "bytes=0-100", "bytes=0-", "bytes=1-5", "bytes=0-9223372036854775807"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, rng string, size int64) {
		if size <= 0 {
			return
		}
		resp := &http.Response{Header: http.Header{"Range": {rng}}}
		got, err := gcsPersisted(resp, size)
		if err == nil && (got < 0 || got > size) || err != nil && got != 0 {
			t.Fatalf("gcsPersisted(%q, %d) = %d, %v", rng, size, got, err)
		}
		if end, perr := strconv.ParseInt(strings.TrimPrefix(rng, "bytes=0-"), 10, 64); strings.HasPrefix(rng, "bytes=0-") && perr == nil && end >= 0 && end < size && strconv.FormatInt(end, 10) == strings.TrimPrefix(rng, "bytes=0-") {
			if err != nil || got != end+1 {
				t.Fatalf("gcsPersisted(%q, %d) = %d, %v; want %d", rng, size, got, err, end+1)
			}
		}
	})
}
