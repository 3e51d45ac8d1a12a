package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/augmentdata/augment/internal/retryafter"
)

// callMeta travels in an attempt's context to wireTransport, which records
// what go-openai does not expose (status, Retry-After), sends the body
// augment built (see chatBody) and keeps a copy of the answer's body for
// decodeChat.
type callMeta struct {
	body       []byte        // request body to send instead of go-openai's; nil: as is
	answer     *bytes.Buffer // receives the response body when not nil
	status     int
	retryAfter time.Duration
	tokens     int // completion tokens of the answer, set by the attempt
}

type metaKey struct{}

// wireTransport wraps the HTTP transport of one endpoint.
type wireTransport struct{ base *http.Transport }

func (t wireTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	m, _ := r.Context().Value(metaKey{}).(*callMeta)
	if m != nil && m.body != nil {
		r = withBody(r, m.body)
	}
	resp, err := t.base.RoundTrip(r)
	if m != nil {
		now := time.Now()
		if resp != nil {
			m.status = resp.StatusCode
			if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
				m.retryAfter, _ = retryafter.Parse(resp.Header, now)
			}
			if m.answer != nil && resp.StatusCode/100 == 2 {
				m.answer.Reset()
				resp.Body = teeBody{Reader: io.TeeReader(resp.Body, m.answer), Closer: resp.Body}
			}
		}
	}
	return resp, err
}

type teeBody struct {
	io.Reader
	io.Closer
}

// withBody returns a shallow copy of r (as Request.WithContext makes) that
// sends body.
func withBody(r *http.Request, body []byte) *http.Request {
	if r.Body != nil {
		r.Body.Close()
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r2
}

// newOpenAIClient returns a go-openai client for ep whose connection pool
// keeps enough idle connections for ep's whole in-flight cap, so steady
// load never pays for new connections.
func newOpenAIClient(ep Endpoint, apiKey string) (*openai.Client, *http.Transport) {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        0, // no global limit; per host below
		MaxIdleConnsPerHost: ep.MaxInFlight + 8,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// Answers are a few kilobytes: not worth the client CPU of gzip.
		DisableCompression: true,
	}
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = strings.TrimRight(ep.BaseURL, "/")
	cfg.HTTPClient = &http.Client{Transport: wireTransport{base: tr}}
	return openai.NewClientWithConfig(cfg), tr
}

type retryPolicy struct {
	timeout time.Duration // per attempt
	retries int           // repeats after the first attempt
	base    time.Duration // backoff of the first retry
	maxWait time.Duration // cap of backoff and Retry-After
}

// halt lets a run stop retry loops at once: done is closed and err
// returns the reason once the run has hit a fatal condition.
type halt struct {
	done chan struct{}
	err  func() error
}

// attemptFunc performs one HTTP attempt with client within actx.
type attemptFunc func(actx context.Context, meta *callMeta, client *openai.Client) error

// classCanceled marks an attempt abandoned because the caller's context
// ended; it says nothing about the endpoint.
const classCanceled = "canceled"

// run performs attempts of do until one succeeds, the error is not
// retryable, the retries are used up, ctx ends or the run halts. It returns
// the number of attempts and, on failure, the class of the last one; the
// error of a failed attempt has its credentials redacted (it quotes what
// the server sent).
//
// After a successful attempt, keep (if not nil) stores its result while
// the endpoint slot is still held, so requests sent but not yet stored
// never outnumber the endpoints' in-flight caps: that is all a killed
// process can have paid for in vain. An error from keep ends run with
// that error and class "".
func (p *pool) run(ctx context.Context, rp retryPolicy, st *stageStats, h halt, do attemptFunc, keep func() error) (attempts int, class string, err error) {
	var avoid *endpoint
	var last error // the last failed attempt's error, redacted
	for attempt := 0; ; attempt++ {
		if err := h.err(); err != nil {
			return attempt, "", err
		}
		var retryAfter time.Duration
		t, aerr := p.acquire(ctx, avoid, h.done)
		switch {
		case errors.Is(aerr, errHalted):
			return attempt, "", h.err()
		case errors.Is(aerr, errUnavailable):
			class, err = classUnavailable, aerr
			if last != nil { // what took the endpoints out, not only that they are
				err = fmt.Errorf("%w; the last failure: %v", aerr, last)
			}
		case aerr != nil:
			return attempt, "", aerr
		default:
			meta := &callMeta{}
			actx, cancel := context.WithTimeout(context.WithValue(ctx, metaKey{}, meta), rp.timeout)
			st.sent.Add(1)
			st.inFlight.Add(1)
			start := time.Now()
			err = do(actx, meta, t.ep.client)
			elapsed := time.Since(start)
			st.inFlight.Add(-1)
			switch {
			case err == nil:
				if keep != nil {
					err = keep()
				}
				cancel()
				p.release(t, outcome{latency: elapsed, tokens: meta.tokens})
				st.lat.record(elapsed)
				return attempt + 1, "", err
			case ctx.Err() != nil:
				cancel()
				p.release(t, outcome{class: classCanceled})
				return attempt + 1, "", ctx.Err()
			}
			class = classify(err, meta.status, actx)
			err = p.cfg.redact.err(err)
			last = err
			cancel()
			if class == classRateLimited || class == classServer {
				retryAfter = min(meta.retryAfter, rp.maxWait)
			}
			p.release(t, outcome{class: class, retryAfter: retryAfter})
			avoid = t.ep
		}
		st.addError(class)
		if !retryable(class) || attempt >= rp.retries {
			return attempt + 1, class, err
		}
		st.retries.Add(1)
		wait := backoff(rp, attempt)
		if retryAfter > 0 {
			// Honour the server: at least what it asked (up to maxWait), plus
			// a little spread so the waiting requests do not return at once.
			wait = retryAfter + time.Duration(rand.Int64N(int64(retryAfter/10)+1))
		}
		tm := time.NewTimer(wait)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return attempt + 1, "", ctx.Err()
		case <-h.done:
			tm.Stop()
			return attempt + 1, "", h.err()
		}
	}
}

// backoff is exponential with equal jitter: half of the step is fixed, half
// random, so retries spread out but never come back immediately.
func backoff(rp retryPolicy, attempt int) time.Duration {
	d := rp.base << min(attempt, 20)
	if d <= 0 || d > rp.maxWait {
		d = rp.maxWait
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// chatAttempt sends body (built by chatBody for the model) and stores the
// decoded answer in out.
func chatAttempt(model string, body []byte, out *Response) attemptFunc {
	return func(actx context.Context, meta *callMeta, client *openai.Client) error {
		var answer bytes.Buffer
		meta.body, meta.answer = body, &answer
		// go-openai sends the request and classifies errors; the body it
		// would encode is replaced by ours in wireTransport.
		if _, err := client.CreateChatCompletion(actx, openai.ChatCompletionRequest{Model: model}); err != nil {
			if meta.status/100 == 2 && bytes.HasPrefix(bytes.TrimLeft(answer.Bytes(), " \t\r\n"), []byte("data:")) {
				// go-openai's decoder stumbled on an event stream.
				return errStreamed
			}
			return err
		}
		r, err := decodeChat(answer.Bytes(), model)
		if err != nil {
			return err
		}
		meta.tokens = r.Usage.CompletionTokens
		*out = r
		return nil
	}
}
