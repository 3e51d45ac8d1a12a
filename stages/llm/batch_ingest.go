package llm

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/clip"
	"github.com/augmentdata/augment/jsonout"
)

// maxBatchLine bounds one line of a batch output file; a longer line is
// damage, counted as malformed.
const maxBatchLine = 64 << 20

// batchOutLine is one line of a batch output or error file: the OpenAI
// format, which vLLM's run-batch writes too.
type batchOutLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error json.RawMessage `json:"error"`
}

// A batchResult is a parsed output line: an answer, or a failure class
// and message.
type batchResult struct {
	key     [32]byte
	resp    Response
	class   string // "" for an answer
	message string
}

// parseBatchOutput reads one output line. model is reported for answers
// that name none. An error means the line cannot be attributed to a
// request (not JSON, no valid custom_id).
func parseBatchOutput(line []byte, model string) (batchResult, error) {
	var l batchOutLine
	if err := json.Unmarshal(line, &l); err != nil {
		return batchResult{}, fmt.Errorf("not a batch output line: %w", err)
	}
	var r batchResult
	if len(l.CustomID) != 64 {
		return r, fmt.Errorf("custom_id %q is not one of augment's (64 hex digits)", clip.Bytes(l.CustomID, 80))
	}
	if _, err := hex.Decode(r.key[:], []byte(l.CustomID)); err != nil {
		return r, fmt.Errorf("custom_id %q is not hex", clip.Bytes(l.CustomID, 80))
	}
	status := 0
	if l.Response != nil {
		status = l.Response.StatusCode
	}
	hasErr := len(l.Error) > 0 && string(l.Error) != "null"
	if status == http.StatusOK && !hasErr {
		resp, err := decodeChat(l.Response.Body, model)
		if err != nil {
			r.class, r.message = classInvalid, err.Error()
			if be, ok := errors.AsType[*bodyError](err); ok {
				r.class = be.class
			}
			return r, nil
		}
		r.resp = resp
		return r, nil
	}
	var code, kind, msg string
	if hasErr {
		code, kind, msg = errorCodeMessage(l.Error)
	} else if l.Response != nil {
		var body struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(l.Response.Body, &body) == nil && len(body.Error) > 0 {
			code, kind, msg = errorCodeMessage(body.Error)
		}
	}
	r.class = batchFailureClass(status, code)
	r.message = msg
	if kind != "" && kind != code && msg != "" {
		r.message = kind + ": " + msg // the server's class, as vLLM's NotFoundError
	}
	if r.message == "" {
		r.message = fmt.Sprintf("status %d", status)
	}
	return r, nil
}

// errorCodeMessage reads an error object: {code, message, type} (code a
// string or a number), the same wrapped in {"error": …} (vLLM's
// ErrorResponse, which run-batch writes as a line's error), or a bare
// string. kind is the object's type ("NotFoundError",
// "invalid_request_error"), "" if none.
func errorCodeMessage(raw json.RawMessage) (code, kind, msg string) {
	type errorInfo struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Error   json.RawMessage `json:"error"`
	}
	var e errorInfo
	if json.Unmarshal(raw, &e) == nil {
		if len(e.Code) == 0 && e.Message == "" && e.Type == "" && len(e.Error) > 0 {
			var inner errorInfo
			if json.Unmarshal(e.Error, &inner) == nil {
				e = inner
			} else if json.Unmarshal(e.Error, &e.Message) != nil {
				e.Message = string(e.Error)
			}
		}
		if json.Unmarshal(e.Code, &code) != nil && string(e.Code) != "null" {
			code = string(bytes.Trim(e.Code, `"`))
		}
		return code, clip.Bytes(e.Type, 80), clip.Bytes(e.Message, 400)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "", "", clip.Bytes(s, 400)
	}
	return "", "", clip.Bytes(string(raw), 400)
}

// Failure classes only batches have; "llm_error_" + class is the reject
// reason once a request has no attempts left.
const (
	classExpired     = "expired"      // the batch's window ended before this request ran
	classMissing     = "missing"      // no line for the request in the output
	classBatchFailed = "batch_failed" // the whole batch failed (the provider's validation refused it)
	classCancelled   = "cancelled"    // the batch was cancelled (by the user, at the provider) before the request ran
	classBatchError  = "batch_error"  // an error line without a status or a known code
)

// batchOnly reports whether class is one of the failure classes only
// batches have.
func batchOnly(class string) bool {
	switch class {
	case classExpired, classMissing, classBatchFailed, classCancelled, classBatchError:
		return true
	}
	return false
}

// batchFailureClass names the class of a failed batch line, from its
// status code when it has one, else from the error code.
func batchFailureClass(status int, code string) string {
	if class := statusClass(status); class != "" {
		return class
	}
	if n, err := strconv.Atoi(code); err == nil && status == 0 {
		if class := statusClass(n); class != "" {
			return class // a status given as the error's code (vLLM's ErrorInfo)
		}
	}
	switch code {
	case "batch_expired":
		return classExpired
	case "batch_cancelled":
		return classCancelled
	case "rate_limit_exceeded", "rate_limit_error":
		return classRateLimited
	case "server_error", "internal_error":
		return classServer
	case "invalid_request", "invalid_request_error", "bad_request":
		return classBadRequest
	}
	return classBatchError
}

// batchRetryable reports whether a request that failed with class may be
// answered by another batch of the stage's epoch: not one the server
// refused (a 400 is final for the epoch, as online for the run).
func batchRetryable(class string) bool {
	return class != classBadRequest
}

// batchFatal reports whether an error line of class stops the run, as the
// same answer does online: the server does not serve teacher.model (404;
// vLLM's answer when it serves another name) or refused the credentials
// (401, 403). Such a line is no failure of its request: nothing is
// rejected for it, and the next run asks the request again.
func batchFatal(class string) bool {
	return class == classNotFound || class == classAuth
}

// batchHeld reports whether a request that failed with class waits for
// the user rather than going into the stage's next round: the provider
// refused its whole batch (sent again unchanged, it would be refused
// again), or the batch was cancelled (someone meant it to stop). Its
// record is rejected for the rest of the stage's epoch; a rerun asks it
// again, in a new epoch.
func batchHeld(class string) bool {
	return class == classBatchFailed || class == classCancelled
}

// A batchFailure is what the failed files say about one request: the
// class of its last failure and in how many batches of the stage's epoch
// epoch it failed.
type batchFailure struct {
	class, message string
	epoch, n       int
}

// failedLine is one line of a job's failed file.
type failedLine struct {
	CustomID string `json:"custom_id"`
	Class    string `json:"class"`
	Message  string `json:"message,omitempty"`
}

// metaPos locates a request's line in a job's metadata sidecar.
type metaPos struct {
	off  int64
	n    int
	done bool
}

// readMetaIndex indexes the sidecar name of root by custom_id; keys lists
// them in file order.
func readMetaIndex(root *atomicfs.Root, name string) (map[[32]byte]*metaPos, [][32]byte, error) {
	path := root.Path(name)
	f, err := root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	idx := map[[32]byte]*metaPos{}
	var keys [][32]byte
	br := bufio.NewReaderSize(f, 256<<10)
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			// A long canonical request: read the rest of the line.
			var more []byte
			more, err = br.ReadSlice('\n')
			line = append(bytes.Clone(line), more...)
		}
		if len(line) > 0 {
			var m struct {
				CustomID string `json:"custom_id"`
			}
			var key [32]byte
			if json.Unmarshal(line, &m) != nil || len(m.CustomID) != 64 {
				return nil, nil, fmt.Errorf("%s: line at byte %d is not a batch metadata line", path, off)
			}
			if _, err := hex.Decode(key[:], []byte(m.CustomID)); err != nil {
				return nil, nil, fmt.Errorf("%s: line at byte %d: custom_id is not hex", path, off)
			}
			if idx[key] == nil {
				idx[key] = &metaPos{off: off, n: len(line)}
				keys = append(keys, key)
			}
			off += int64(len(line))
		}
		if err == io.EOF {
			return idx, keys, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// scanBatchFile calls fn for every line of the file name of root; a
// missing file has no lines. Lines longer than maxBatchLine go to fn as nil.
func scanBatchFile(root *atomicfs.Root, name string, fn func(line []byte) error) error {
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256<<10), maxBatchLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fn(nil)
	}
	return sc.Err()
}

// ingest brings a downloaded job's answers into the cache, records the
// requests it did not answer in its failed file, and marks it done. It is
// idempotent: a run killed half-way ingests the job again.
func (t *Teacher) ingest(job *BatchJob) error {
	b := t.batch
	idx, keys, err := readMetaIndex(b.store.root, job.MetaFile())
	if err != nil {
		return fmt.Errorf("batch job %s: %w", job.ID, err)
	}
	meta, err := b.store.root.Open(job.MetaFile())
	if err != nil {
		return fmt.Errorf("batch job %s: %w", job.ID, err)
	}
	defer meta.Close()
	sc := t.Stage(job.Stage)
	job.Answered, job.Failed, job.Missing, job.Malformed, job.Cost = 0, 0, 0, 0, 0
	failed := map[[32]byte]failedLine{}
	var buf []byte
	store := func(r batchResult) error {
		pos := idx[r.key]
		if pos == nil || pos.done {
			job.Malformed++ // not a request of this job, or a repeat
			return nil
		}
		pos.done = true
		if r.class != "" {
			job.Failed++
			failed[r.key] = failedLine{CustomID: hex.EncodeToString(r.key[:]), Class: r.class, Message: t.redact.text(r.message)}
			return nil
		}
		buf = slices.Grow(buf[:0], pos.n)[:pos.n]
		if _, err := meta.ReadAt(buf, pos.off); err != nil {
			return err
		}
		var m batchMeta
		if err := json.Unmarshal(buf, &m); err != nil {
			return fmt.Errorf("%s: %w", job.MetaFile(), err)
		}
		req := Request{Slot: m.Slot, Attempt: m.Attempt}
		r.resp.Content, r.resp.Reasoning = t.redact.literal(r.resp.Content), t.redact.literal(r.resp.Reasoning)
		if err := t.cache.putChat(m.Stage, r.key[:], m.Canon, r.resp, stageName(m.Stage), slotKey(req)); err != nil {
			return t.stop(&FatalError{Reason: "llm_cache_write", Err: err,
				Msg: "cannot write the request cache (disk full?); batch answers stay on disk and are read again by the next run"})
		}
		job.Answered++
		job.Cost += t.prices.cost(int64(r.resp.Usage.PromptTokens), int64(r.resp.Usage.CompletionTokens))
		sc.account(r.resp)
		return nil
	}
	for _, name := range []string{job.OutputFile(), job.ErrorFile()} {
		err := scanBatchFile(b.store.root, name, func(line []byte) error {
			r, err := parseBatchOutput(line, t.cfg.Model)
			if line == nil || err != nil {
				job.Malformed++
				return nil
			}
			return store(r)
		})
		if err != nil {
			return fmt.Errorf("batch job %s: %s: %w", job.ID, name, err)
		}
	}
	// Requests without a line: the batch expired or failed before them, or
	// the output was cut short.
	missing := classMissing
	if job.Remote != nil {
		switch job.Remote.Status {
		case "expired":
			missing = classExpired
		case "failed":
			missing = classBatchFailed
		case "cancelled", "cancelling":
			missing = classCancelled
		}
	}
	var out bytes.Buffer
	var fatal []failedLine // error lines that stop the run
	for _, k := range keys {
		pos := idx[k]
		fl, ok := failed[k]
		if !pos.done {
			job.Missing++
			fl, ok = failedLine{CustomID: hex.EncodeToString(k[:]), Class: missing, Message: job.Note}, true
		}
		if !ok {
			continue
		}
		line, _ := jsonout.Marshal(fl)
		out.Write(append(line, '\n'))
		if batchFatal(fl.Class) {
			fatal = append(fatal, fl)
		}
		b.addFailure(k, fl, job.Epoch)
	}
	if _, err := b.store.root.WriteFile(job.FailedFile(), out.Bytes()); err != nil {
		return fmt.Errorf("batch job %s: %w", job.ID, err)
	}
	if err := t.cache.Flush(); err != nil {
		return fmt.Errorf("batch job %s: %w", job.ID, err)
	}
	job.State = JobDone
	if err := b.store.setJob(*job); err != nil {
		return err
	}
	t.log.Info("batch job done", "job", job.ID, "stage", job.Stage, "answered", job.Answered,
		"failed", job.Failed, "missing", job.Missing, "malformed", job.Malformed)
	if job.Malformed > 0 {
		t.log.Warn("batch output lines matched no request of the job (not a batch line, a custom_id it did not send, or one repeated: the first line counts); see `augment batch status`",
			"job", job.ID, "stage", job.Stage, "lines", job.Malformed)
	}
	if msg := heldMessage(job); msg != "" {
		t.log.Warn(msg)
	}
	if len(fatal) > 0 {
		return t.stop(t.batchFatalError(job, fatal))
	}
	return nil
}

// batchFatalError is the stop of a run whose job holds error lines that
// stop it (batchFatal): the online run's reason and message, with what
// differs in batch mode. The job's answers are kept; the requests of those
// lines are not rejected and go into new batches in the next run.
func (t *Teacher) batchFatalError(job *BatchJob, lines []failedLine) *FatalError {
	again := fmt.Sprintf("%d request(s) of batch job %s (stage %s) got this answer; nothing is rejected for them: fix the cause and run again, which asks them in new batches",
		len(lines), job.ID, job.Stage)
	err := errors.New(lines[0].Message)
	for _, l := range lines {
		if l.Class == classAuth {
			return &FatalError{Reason: "llm_auth", Err: err,
				Msg: "the teacher refused the credentials (HTTP 401/403); check the key in the environment variable named by teacher.api_key_env; " + again}
		}
	}
	msg := fmt.Sprintf("the teacher answered 404 for model %q; check teacher.model and the endpoints' base_url (usually ending in /v1)", t.cfg.Model)
	if job.Provider == BatchFiles {
		msg = fmt.Sprintf("the batch runner answered 404 for model %q: it serves another model name (vllm run-batch --model /path/to/weights serves the path); check teacher.model, or start the runner with --served-model-name %s",
			t.cfg.Model, shellQuote(t.cfg.Model))
	}
	return &FatalError{Reason: "llm_model_not_found", Err: err, Msg: msg + "; " + again}
}

// heldMessage says, for a job that ended failed or cancelled at the
// provider, what happened and what comes next; "" for any other job.
func heldMessage(job *BatchJob) string {
	if job.Remote == nil {
		return ""
	}
	left := job.Requests - job.Answered
	switch job.Remote.Status {
	case "failed":
		why := strings.TrimRight(job.Note, ". ")
		if why == "" {
			why = "no reason given"
		}
		return fmt.Sprintf("batch job %s (stage %s) failed at the provider: %s; its %d request(s) are not sent again unchanged: their records are rejected (llm_error_%s, exit 3); fix the cause (e.g. teacher.batch.max_requests or max_bytes within the provider's limits) and run again to ask them in new batches",
			job.ID, job.Stage, why, left, classBatchFailed)
	case "cancelled", "cancelling":
		return fmt.Sprintf("batch job %s (stage %s) was cancelled at the provider: its %d answer(s) are kept; its %d other request(s) are not resubmitted automatically: their records are rejected (llm_error_%s, exit 3); run again to ask them in new batches",
			job.ID, job.Stage, job.Answered, left, classCancelled)
	}
	return ""
}

// loadFailures reads the failed files of every done job.
func (b *batchRun) loadFailures() error {
	for _, j := range b.store.jobs(func(j *BatchJob) bool { return j.State == JobDone }) {
		err := scanBatchFile(b.store.root, j.FailedFile(), func(line []byte) error {
			var fl failedLine
			var key [32]byte
			if line == nil || json.Unmarshal(line, &fl) != nil || len(fl.CustomID) != 64 {
				return fmt.Errorf("unreadable line")
			}
			if _, err := hex.Decode(key[:], []byte(fl.CustomID)); err != nil {
				return err
			}
			b.addFailure(key, fl, j.Epoch)
			return nil
		})
		if err != nil {
			return fmt.Errorf("batch job %s: %s: %w", j.ID, j.FailedFile(), err)
		}
	}
	return nil
}

// addFailure records a failure of a request in a job of the stage's
// epoch epoch; failures count per epoch (jobs come in epoch order).
func (b *batchRun) addFailure(key [32]byte, fl failedLine, epoch int) {
	if batchFatal(fl.Class) {
		return // stopped the run that read it; asked again (batchFatal)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.failures[key]
	if f.epoch != epoch {
		f.epoch, f.n = epoch, 0
	}
	f.class, f.message = fl.Class, fl.Message
	f.n++
	b.failures[key] = f
}

// failure returns what failed batches say about a request, if anything.
func (b *batchRun) failure(key []byte) (batchFailure, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.failures[[32]byte(key)]
	return f, ok
}
