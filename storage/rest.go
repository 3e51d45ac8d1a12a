package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The GCS and Azure clients are small REST clients of our own over
// net/http (see the figures in the README's "Object storage" section):
// each speaks the handful of calls a blobStore needs. rest is what they
// share: retries and endpoint checks.

// restTries is how many times a request answered 429 or 5xx, or cut off
// before an answer, is sent.
const restTries = 4

type rest struct {
	hc   *http.Client
	sign func(*http.Request) error // adds credentials; nil for none
}

// do sends the request mk makes (a new one per try, with a fresh body),
// retrying throttling, server errors and broken connections with a
// growing pause. It returns the last answer whatever its status.
func (c *rest) do(ctx context.Context, mk func() (*http.Request, error)) (*http.Response, error) {
	pause := 200 * time.Millisecond
	for try := 1; ; try++ {
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
		resp, err := c.hc.Do(req)
		retry := err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		if !retry || try == restTries || ctx.Err() != nil {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause *= 3
	}
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
