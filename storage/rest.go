package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The GCS and Azure clients are small REST clients of our own over
// net/http (see the figures in the README's "Object storage" section):
// each speaks the handful of calls a blobStore needs. rest is what they
// share: retries and endpoint checks.

// The REST clients ask again as S3's client does, with S3's budget:
// minio-go sends a request up to 10 times, pausing from 0.2 s on, and a
// GET answered 500 took about 20 s to fail. A request answered 408, 429 or
// 5xx, or cut off before an answer, is sent up to restTries times, pausing
// as the answer's Retry-After says, else restBackoff: 0.2 s, doubling up
// to restPauseCap, 22 s in all. The pauses of one request add up to
// restBudget at most: a Retry-After that would go past it ends the tries
// at once (a lease renewed every 30 s is not held up for minutes).
const restTries = 10

// restBudget bounds the pauses of one request.
const restBudget = 30 * time.Second

// restPause is the pause before a request's second try.
const restPause = 200 * time.Millisecond

// restPauseCap is the longest pause between two tries without Retry-After.
const restPauseCap = 4 * time.Second

// restBackoff is the pause after try try (1-based) of a request whose
// answer states no Retry-After.
func restBackoff(try int) time.Duration {
	d := restPause
	for range try - 1 {
		if d *= 2; d >= restPauseCap {
			return restPauseCap
		}
	}
	return d
}

type rest struct {
	hc   *http.Client
	sign func(*http.Request) error // adds credentials; nil for none
	// pause waits between two tries; nil is sleep (tests record the
	// pauses instead of waiting them out).
	pause func(context.Context, time.Duration) error
}

// prepare makes the request mk makes, for ctx, signed. Its errors are
// not the store's: no request was sent.
func (c *rest) prepare(ctx context.Context, mk func() (*http.Request, error)) (*http.Request, error) {
	req, err := mk()
	if err != nil {
		return nil, err
	}
	req = req.WithContext(ctx)
	if c.sign != nil {
		if err := c.sign(req); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// wait pauses before the try after try try, whose answer was resp (nil:
// none), adding the pause to *waited, the request's pauses so far; it
// reports false, having waited nothing, when the tries are over
// (restTries, or a pause going past restBudget), and ctx's error when ctx
// ends first. resp's body is drained and closed unless the tries are over.
func (c *rest) wait(ctx context.Context, try int, resp *http.Response, waited *time.Duration) (bool, error) {
	d, ok := retryWait(try, resp, restBackoff)
	if !ok || try >= restTries || *waited+d > restBudget || ctx.Err() != nil {
		return false, nil
	}
	*waited += d
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	pause := c.pause
	if pause == nil {
		pause = sleep
	}
	return true, pause(ctx, d)
}

// do sends the request mk makes (a new one per try, with a fresh body),
// again while the answer is passing (passingStatus) or missing, as the
// retry policy above says. It returns the last answer whatever its
// status. Only for requests that may be sent twice: a resumable upload's
// chunk may not (gcsStore.resumable).
func (c *rest) do(ctx context.Context, mk func() (*http.Request, error)) (*http.Response, error) {
	var waited time.Duration
	for try := 1; ; try++ {
		req, err := c.prepare(ctx, mk)
		if err != nil {
			return nil, err
		}
		resp, err := c.hc.Do(req)
		if err == nil && !passingStatus(resp.StatusCode) {
			return resp, nil
		}
		if again, werr := c.wait(ctx, try, resp, &waited); werr != nil {
			return nil, werr
		} else if !again {
			return resp, err
		}
	}
}

// answerDetail is what an error answer's message msg says for a user:
// "no message" for an empty one, and for a passing status (which rest.do
// has retried) that it held through the retries, with the wait its last
// Retry-After asked for.
func answerDetail(resp *http.Response, msg string) string {
	if msg == "" {
		msg = "no message"
	}
	if !passingStatus(resp.StatusCode) {
		return msg
	}
	msg += fmt.Sprintf("; so after augment's retries (at most %d tries and %v of waiting per request)", restTries, restBudget)
	if ra := strings.TrimSpace(resp.Header.Get("Retry-After")); ra != "" {
		if _, err := strconv.Atoi(ra); err == nil {
			ra += " s"
		}
		msg += fmt.Sprintf(", the last answer asking to wait %s", ra)
	}
	return msg
}

// readError reads an error answer's body (at most 4 KiB) and closes it.
func readError(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return strings.TrimSpace(string(b))
}

// endpointProblems is the Validate of a storage block whose only setting
// is an endpoint (storage.gcs, storage.azure): what checkEndpoint finds,
// under the key's YAML path; an empty endpoint means the default.
func endpointProblems(key, endpoint, creds string) []string {
	if endpoint == "" {
		return nil
	}
	if _, err := checkEndpoint(endpoint, creds); err != nil {
		return []string{key + ": " + err.Error()}
	}
	return nil
}

// checkEndpoint checks an endpoint URL from the pipeline or the
// environment: http(s), a host, no user or password (credentials come from
// the environment only). A path is kept (Azurite's path-style endpoints
// name the account in it).
func checkEndpoint(s, creds string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: want http:// or https://", s)
	case u.User != nil:
		return nil, errors.New("the endpoint holds a user name or password; credentials come from the environment only (" + creds + ")")
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", s)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: want only scheme, host, port and path", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}
