package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"syscall"

	openai "github.com/sashabaranov/go-openai"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/clip"
)

// openaiProvider runs jobs on the OpenAI Batch API: upload the input file
// (purpose "batch"), create the batch, poll it, download its output and
// error files. Batches and file contents go through go-openai; the upload
// is streamed from disk by hand, since go-openai builds the whole
// multipart body (up to 200 MB) in memory.
type openaiProvider struct {
	root   *atomicfs.Root // the batch directory
	base   string         // API root, ".../v1"
	key    string
	window string
	token  string // the batch directory's, in uploaded file names
	client *openai.Client
	http   *http.Client
}

// jobMetadataKey tags each batch with its job, so a resumed submit can
// recognise a batch it created before a kill.
const jobMetadataKey = "augment_job"

func (p *openaiProvider) submit(ctx context.Context, job *BatchJob, save func() error) error {
	if job.Remote == nil {
		job.Remote = &RemoteBatch{}
	}
	name := p.remoteName(job)
	uploaded := false
	if job.State == JobPrepared {
		// A kill between uploading and saving the file's ID: find it.
		id, err := p.findFile(ctx, name)
		if err != nil {
			return fmt.Errorf("batch job %s: list files: %w", job.ID, err)
		}
		if id == "" {
			if id, err = p.upload(ctx, job.InputFile(), name); err != nil {
				return fmt.Errorf("batch job %s: upload: %w", job.ID, err)
			}
			uploaded = true
		}
		job.Remote.InputFileID, job.State = id, JobUploaded
		if err := save(); err != nil {
			return err
		}
	}
	var b *openai.Batch
	if !uploaded {
		// A kill between creating the batch and saving its ID: find it.
		found, err := p.find(ctx, job)
		if err != nil {
			return fmt.Errorf("batch job %s: list batches: %w", job.ID, err)
		}
		b = found
	}
	if b == nil {
		created, err := p.client.CreateBatch(ctx, openai.CreateBatchRequest{
			InputFileID:      job.Remote.InputFileID,
			Endpoint:         openai.BatchEndpointChatCompletions,
			CompletionWindow: p.window,
			Metadata:         map[string]any{jobMetadataKey: job.ID},
		})
		if err != nil {
			return fmt.Errorf("batch job %s: create batch: %w", job.ID, err)
		}
		b = &created.Batch
	}
	p.record(job, b)
	job.State = JobSubmitted
	return save()
}

// remoteName is the uploaded name of a job's input file: unique to the
// batch directory and the job.
func (p *openaiProvider) remoteName(job *BatchJob) string {
	return "augment-" + p.token + "-" + job.InputFile()
}

// findFile returns the ID of an uploaded batch input file named name, ""
// if there is none.
func (p *openaiProvider) findFile(ctx context.Context, name string) (string, error) {
	l, err := p.client.ListFiles(ctx)
	if err != nil {
		return "", err
	}
	for _, f := range l.Files {
		if f.FileName == name && f.Purpose == string(openai.PurposeBatch) {
			return f.ID, nil
		}
	}
	return "", nil
}

// find looks for a batch of job's input file among the account's batches.
func (p *openaiProvider) find(ctx context.Context, job *BatchJob) (*openai.Batch, error) {
	var after *string
	limit := 100
	for page := 0; page < 100; page++ {
		l, err := p.client.ListBatch(ctx, after, &limit)
		if err != nil {
			return nil, err
		}
		for i := range l.Data {
			if l.Data[i].InputFileID == job.Remote.InputFileID {
				return &l.Data[i], nil
			}
		}
		if !l.HasMore || l.LastID == "" {
			return nil, nil
		}
		after = &l.LastID
	}
	return nil, nil
}

func (p *openaiProvider) record(job *BatchJob, b *openai.Batch) {
	r := job.Remote
	r.BatchID, r.Status = b.ID, b.Status
	if b.OutputFileID != nil {
		r.OutputFileID = *b.OutputFileID
	}
	if b.ErrorFileID != nil {
		r.ErrorFileID = *b.ErrorFileID
	}
	r.Total, r.Completed, r.FailedCount = b.RequestCounts.Total, b.RequestCounts.Completed, b.RequestCounts.Failed
	if b.Errors != nil && len(b.Errors.Data) > 0 {
		var msgs []string
		for _, e := range b.Errors.Data {
			msgs = append(msgs, strings.TrimSpace(e.Code+" "+e.Message))
		}
		job.Note = clip.Bytes(newRedactor(p.key).text(strings.Join(msgs, "; ")), 400)
	}
}

func (p *openaiProvider) poll(ctx context.Context, job *BatchJob, save func() error) (bool, error) {
	b, err := p.client.RetrieveBatch(ctx, job.Remote.BatchID)
	if apiStatus(err) == http.StatusNotFound {
		// Asking again gets the same answer: say what it means.
		return false, &BatchStateError{Problems: []string{fmt.Sprintf(
			"batch job %s was submitted as batch %s, which %s does not know (404: %v): it was submitted with another API key or project, or to another endpoint, or the provider no longer has it, and asking again gets the same answer. If it was submitted elsewhere, set that endpoint (teacher.endpoints, the first is polled) and key (teacher.api_key_env) and run again; if it is gone, move the batch directory %s out of the output directory and run again — answers already taken in stay in the request cache, the other requests go into new batches (batches still open at the provider are then paid for again: cancel them there first)",
			job.ID, job.Remote.BatchID, p.base, clip.Bytes(newRedactor(p.key).text(err.Error()), 200), p.root.Path("."))}}
	}
	if err != nil {
		return false, fmt.Errorf("batch job %s: retrieve batch %s: %w", job.ID, job.Remote.BatchID, err)
	}
	p.record(job, &b.Batch)
	switch b.Status {
	case "completed", "expired", "failed", "cancelled":
	default: // validating, in_progress, finalizing, cancelling
		return false, save()
	}
	// Ended: the output and error files hold whatever finished (an expired
	// batch's finished part too).
	red := newRedactor(p.key)
	for _, f := range []struct {
		id, name string
		redact   func(string) string
	}{{job.Remote.OutputFileID, job.OutputFile(), red.literal}, {job.Remote.ErrorFileID, job.ErrorFile(), red.text}} {
		if f.id == "" {
			continue
		}
		if err := p.download(ctx, f.id, f.name, f.redact); err != nil {
			return false, fmt.Errorf("batch job %s: download %s: %w", job.ID, f.id, err)
		}
	}
	job.State = JobDownloaded
	return true, save()
}

func (p *openaiProvider) hint([]BatchJob) string {
	return "run augment again (or `augment batch poll`) once the batches have finished"
}

// download streams a file's content to the file name of the batch
// directory, atomically, each line passed through redact: a server may
// quote a request's credentials in an error line, which must not reach
// the disk (answers get only the key itself removed, redactor.literal).
func (p *openaiProvider) download(ctx context.Context, id, name string, redact func(string) string) error {
	content, err := p.client.GetFileContent(ctx, id)
	if err != nil {
		return err
	}
	defer content.Close()
	f, err := p.root.Create(name)
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(content, 64<<10)
	for {
		line, rerr := br.ReadString('\n')
		if _, err := io.WriteString(f, redact(line)); err != nil {
			f.Abort()
			return err
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Abort()
			return rerr
		}
	}
	return f.Commit()
}

// upload sends the file local of the batch directory to POST /files with
// purpose "batch" under the name name, streaming it, and returns the file
// ID.
func (p *openaiProvider) upload(ctx context.Context, local, name string) (string, error) {
	f, err := p.root.Open(local)
	if err != nil {
		return "", err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("purpose", string(openai.PurposeBatch))
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", name); err == nil {
				if _, err = io.Copy(part, f); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/files", pr)
	if err != nil {
		pr.Close()
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		code, _, msg := errorCodeMessage(extractError(body))
		return "", &statusError{status: resp.StatusCode, msg: strings.TrimSpace(code + " " + msg)}
	}
	var file openai.File
	if err := json.Unmarshal(body, &file); err != nil || file.ID == "" {
		return "", fmt.Errorf("the file upload answer has no file id: %s", clip.Bytes(string(body), 200))
	}
	return file.ID, nil
}

// extractError returns the "error" member of an error body, or the body.
func extractError(body []byte) json.RawMessage {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		return e.Error
	}
	return body
}

// A statusError is a Files or Batches call the server answered with an
// error status (the upload, which go-openai does not make).
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.msg) }

// apiStatus returns the HTTP status of a failed Files or Batches call, 0
// when none arrived (or err is not one).
func apiStatus(err error) int {
	var se *statusError
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &se):
		return se.status
	case errors.As(err, &apiErr):
		return apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		return reqErr.HTTPStatusCode
	}
	return 0
}

// BatchPassing reports whether err, from advancing batch jobs, is a
// failure that may pass: the provider answered 429, 408 or 5xx, or the
// connection failed (refused, reset, timed out). `augment batch poll
// -wait` tries again after it.
func BatchPassing(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if status := apiStatus(err); status != 0 {
		return retryable(statusClass(status))
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}
