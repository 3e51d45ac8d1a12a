package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// An AnswerError means one request got no usable answer: the teacher kept
// failing for it after retries, or every answer failed the stage's parser or
// was truncated. It carries a reject reason, so the runner rejects the
// record and goes on; it never stops the run (fatal conditions are a
// *FatalError instead).
type AnswerError struct {
	Reason   string // stable snake_case code, e.g. "llm_truncated", "llm_error_timeout"
	Stage    string // request's stage, "name@version"
	Slot     string // request's slot, if any
	Attempts int    // asks (Ask) or HTTP attempts (transport failures) made
	Err      error  // the last underlying error
}

func (e *AnswerError) Error() string {
	var b strings.Builder
	b.WriteString(e.Reason)
	if e.Stage != "" {
		b.WriteString(" (stage ")
		b.WriteString(e.Stage)
		if e.Slot != "" {
			b.WriteString(", slot ")
			b.WriteString(e.Slot)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " after %d attempt(s)", e.Attempts)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// RejectReason returns the reason code; the runner writes it to the rejects
// file.
func (e *AnswerError) RejectReason() string { return e.Reason }

func (e *AnswerError) Unwrap() error { return e.Err }

// A FatalError stops the run: the budget is spent, the error rate crossed
// its threshold, the server refuses our credentials or model, or a stage
// needs a real teacher under provider offline. Every answer received so far
// is in the cache, so a rerun resumes where this one stopped.
type FatalError struct {
	// Reason is a stable snake_case code: "llm_budget_reached",
	// "llm_error_rate", "llm_auth", "llm_model_not_found",
	// "llm_offline_unsupported", or "llm_transient_rejects" (the runner: the
	// run is done but for records rejected for failures that may pass).
	Reason string
	Msg    string // what happened and what to do, for people
	Err    error  // underlying error, if any
}

func (e *FatalError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *FatalError) Unwrap() error { return e.Err }

// IsFatal reports whether err must stop the run rather than reject one
// record.
func IsFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}

// Error classes of failed HTTP attempts; "llm_error_" + class is the reject
// reason of a request that failed with it after its retries.
const (
	classTimeout     = "timeout"          // attempt deadline passed (server hung or slow)
	classConnection  = "connection"       // refused, reset, closed mid-answer
	classRateLimited = "rate_limited"     // 429
	classServer      = "server"           // 5xx
	classTimeout408  = "request_timeout"  // 408
	classInvalid     = "invalid_response" // 2xx whose body is not a usable completion
	classBadRequest  = "bad_request"      // other 4xx: this request is wrong, retrying will not help
	classAuth        = "auth"             // 401, 403: fatal
	classNotFound    = "not_found"        // 404: wrong model or base_url, fatal
	classUnavailable = "unavailable"      // every endpoint's breaker is open
)

// retryable reports whether an attempt that failed with class may succeed
// when repeated.
func retryable(class string) bool {
	switch class {
	case classTimeout, classConnection, classRateLimited, classServer, classTimeout408, classInvalid, classUnavailable:
		return true
	}
	return false
}

// Transient reports whether a reject reason names a teacher or embedder
// failure that may pass: "llm_error_<class>" or "llm_embed_error_<class>"
// for a retryable class (timeout, connection, 429, 5xx, an unreadable
// answer, every endpoint out of rotation), or a batch's own failure (the
// batch expired, failed or was cancelled, a request missing from its
// output, an error line of no known kind). Such a reject is never a final
// outcome: the runner makes its shard again on the next run, when the
// answers already received come from the cache and only the failed
// requests are sent again. Other reasons (a 400, an answer that fails the
// stage's checks) give the same result every time.
func Transient(reason string) bool {
	class, ok := strings.CutPrefix(reason, "llm_error_")
	if !ok {
		class, ok = strings.CutPrefix(reason, "llm_embed_error_")
	}
	return ok && (retryable(class) || batchOnly(class))
}

// breakerFailure reports whether class says the endpoint itself is unwell
// (as opposed to rate limiting us or rejecting this request).
func breakerFailure(class string) bool {
	switch class {
	case classTimeout, classConnection, classServer, classInvalid:
		return true
	}
	return false
}

// classify names the class of a failed attempt. status is the HTTP status
// seen by the transport (0 if none arrived); attemptCtx is the attempt's own
// context, whose deadline is the per-attempt timeout.
func classify(err error, status int, attemptCtx context.Context) string {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		status = reqErr.HTTPStatusCode
	}
	if class := statusClass(status); class != "" {
		return class
	}
	if be, ok := errors.AsType[*bodyError](err); ok {
		return be.class
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(attemptCtx.Err(), context.DeadlineExceeded) {
		return classTimeout
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return classTimeout
	}
	if status >= 200 && status < 300 {
		// The server answered but the body did not decode (or broke off).
		return classInvalid
	}
	// Anything else that failed before a status arrived: refused, reset,
	// EOF on a dropped connection, TLS failures.
	return classConnection
}

// statusClass is the failure class an HTTP error status says, for online
// attempts and batch lines alike, or "" for a status below 400.
func statusClass(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return classRateLimited
	case status == http.StatusRequestTimeout:
		return classTimeout408
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return classAuth
	case status == http.StatusNotFound:
		return classNotFound
	case status >= 500:
		return classServer
	case status >= 400:
		return classBadRequest
	}
	return ""
}
