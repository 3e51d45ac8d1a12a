package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/augmentdata/augment/stages/near"
)

// The Files and Batches endpoints of the OpenAI API, in memory: upload a
// JSONL of requests (POST /files, purpose "batch"), create a batch of it
// (POST /batches), poll it (GET /batches/{id}), download its output and
// error files (GET /files/{id}/content). A batch moves one state per poll
// — validating, in_progress, finalizing — and then ends as its outcome
// says, answering each request as the chat endpoint would (same script,
// same bytes). RunBatch is the same answering as an offline runner, the
// way `vllm run-batch` turns an input file into an output file.

// BatchConfig shapes the batches of the fake.
type BatchConfig struct {
	// Steps is how many polls a batch spends in validating, in_progress
	// and finalizing together before it ends (default 3; 0 ends at the
	// first poll).
	Steps *int `json:"steps"`
	// Outcomes: the i-th batch created ends this way: "completed"
	// (default once the list runs out), "failed" (validation failed: no
	// output), "expired" (the first half of its requests answered, the
	// rest in the error file as batch_expired) or "cancelled" (nothing
	// answered).
	Outcomes []string `json:"outcomes"`
	// ErrorShare is the share of a completed batch's requests answered
	// with an error line (status 500) in the error file instead; which
	// ones is drawn from the request's custom_id.
	ErrorShare float64 `json:"error_share"`
	// BadRequest is a substring: requests whose body contains it get a
	// 400 error line (a request the server refuses).
	BadRequest string `json:"bad_request"`
	// EchoAuth makes the ErrorShare error lines quote the Authorization
	// header the batch was created with, as some gateways quote request
	// headers in their errors.
	EchoAuth bool `json:"echo_auth"`
	// UploadStatus, when not 0, is the error status POST /files answers
	// (401: a key without the Files permission).
	UploadStatus int `json:"upload_status"`
	// PollFailures is how many GET /batches/{id} answer 503 (a passing
	// failure) before they are served again.
	PollFailures int `json:"poll_failures"`
}

// Batch outcomes.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeExpired   = "expired"
	OutcomeCancelled = "cancelled"
)

type fakeFile struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int    `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	data      []byte
}

type requestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

type batchErrors struct {
	Object string `json:"object"`
	Data   []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"data"`
}

type fakeBatch struct {
	ID               string         `json:"id"`
	Object           string         `json:"object"`
	Endpoint         string         `json:"endpoint"`
	InputFileID      string         `json:"input_file_id"`
	CompletionWindow string         `json:"completion_window"`
	Status           string         `json:"status"`
	OutputFileID     *string        `json:"output_file_id"`
	ErrorFileID      *string        `json:"error_file_id"`
	CreatedAt        int64          `json:"created_at"`
	RequestCounts    requestCounts  `json:"request_counts"`
	Metadata         map[string]any `json:"metadata"`
	Errors           *batchErrors   `json:"errors"`
	polls            int
	outcome          string
	auth             string // the creating request's Authorization header
}

// BatchCounters are the totals of the Files and Batches endpoints.
type BatchCounters struct {
	Uploads   int64 `json:"uploads"`   // files uploaded
	Batches   int64 `json:"batches"`   // batches created
	Requests  int64 `json:"requests"`  // requests in created batches
	Answered  int64 `json:"answered"`  // requests answered by ended batches (and RunBatch)
	Polls     int64 `json:"polls"`     // GET /batches/{id}
	Downloads int64 `json:"downloads"` // GET /files/{id}/content
}

// BatchCounters returns a snapshot of the batch totals.
func (s *Server) BatchCounters() BatchCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bc
}

// Batches returns the batches created so far, oldest first, as the API
// shows them (JSON).
func (s *Server) Batches() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []json.RawMessage
	for _, b := range s.batchList {
		j, _ := json.Marshal(b)
		out = append(out, j)
	}
	return out
}

// isBatchAPI reports whether path is one of the Files or Batches routes.
func isBatchAPI(path string) bool {
	return strings.Contains(path, "/files") || strings.Contains(path, "/batches")
}

// serveBatchAPI routes /files… and /batches… requests.
func (s *Server) serveBatchAPI(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	var rest string
	var files bool
	if i := strings.Index(path, "/files"); i >= 0 {
		files, rest = true, strings.Trim(path[i+len("/files"):], "/")
	} else {
		i := strings.Index(path, "/batches")
		rest = strings.Trim(path[i+len("/batches"):], "/")
	}
	parts := strings.Split(rest, "/")
	switch {
	case files && r.Method == http.MethodPost && rest == "":
		s.uploadFile(w, r)
	case files && r.Method == http.MethodGet && rest == "":
		s.mu.Lock()
		list := make([]*fakeFile, 0, len(s.files))
		for i := 1; i <= s.fileSeq; i++ {
			if f := s.files[fmt.Sprintf("file-%06d", i)]; f != nil {
				list = append(list, f)
			}
		}
		b, _ := json.Marshal(map[string]any{"object": "list", "data": list})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case files && r.Method == http.MethodGet && len(parts) == 1 && rest != "":
		s.withFile(w, parts[0], func(f *fakeFile) { writeJSON(w, http.StatusOK, f) })
	case files && r.Method == http.MethodGet && len(parts) == 2 && parts[1] == "content":
		s.withFile(w, parts[0], func(f *fakeFile) {
			s.mu.Lock()
			s.bc.Downloads++
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(f.data)
		})
	case !files && r.Method == http.MethodPost && rest == "":
		s.createBatch(w, r)
	case !files && r.Method == http.MethodGet && rest == "":
		s.listBatches(w, r)
	case !files && r.Method == http.MethodGet && len(parts) == 1:
		s.pollBatch(w, parts[0])
	case !files && r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "cancel":
		s.mu.Lock()
		b := s.batches[parts[0]]
		if b != nil && !ended(b.Status) {
			b.Status, b.outcome = "cancelling", OutcomeCancelled
		}
		s.mu.Unlock()
		if b == nil {
			writeError(w, http.StatusNotFound, "invalid_request_error", "no such batch: "+parts[0])
			return
		}
		s.pollBatch(w, parts[0])
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+path)
	}
}

func (s *Server) withFile(w http.ResponseWriter, id string, fn func(*fakeFile)) {
	s.mu.Lock()
	f := s.files[id]
	s.mu.Unlock()
	if f == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no such file: "+id)
		return
	}
	fn(f)
}

func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	if st := s.cfg.Batch.UploadStatus; st != 0 {
		writeError(w, st, "invalid_request_error", "the fake was told to refuse uploads")
		return
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "want a multipart form: "+err.Error())
		return
	}
	purpose := r.FormValue("purpose")
	fh, hdr, err := r.FormFile("file")
	if err != nil || purpose == "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "want the fields purpose and file")
		return
	}
	defer fh.Close()
	data, err := io.ReadAll(fh)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	f := s.addFile(hdr.Filename, purpose, data)
	s.mu.Lock()
	s.bc.Uploads++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, f)
}

func (s *Server) addFile(name, purpose string, data []byte) *fakeFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fileSeq++
	f := &fakeFile{ID: fmt.Sprintf("file-%06d", s.fileSeq), Object: "file", Bytes: len(data),
		CreatedAt: time.Now().Unix(), Filename: name, Purpose: purpose, data: data}
	if s.files == nil {
		s.files = map[string]*fakeFile{}
	}
	s.files[f.ID] = f
	return f
}

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InputFileID      string         `json:"input_file_id"`
		Endpoint         string         `json:"endpoint"`
		CompletionWindow string         `json:"completion_window"`
		Metadata         map[string]any `json:"metadata"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "body: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.files[req.InputFileID]
	switch {
	case in == nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "no such input file: "+req.InputFileID)
		return
	case in.Purpose != "batch":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input file purpose is "+in.Purpose+", want batch")
		return
	case req.Endpoint != "/v1/chat/completions":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "endpoint must be /v1/chat/completions")
		return
	}
	s.batchSeq++
	outcome := OutcomeCompleted
	if i := s.batchSeq - 1; i < len(s.cfg.Batch.Outcomes) && s.cfg.Batch.Outcomes[i] != "" {
		outcome = s.cfg.Batch.Outcomes[i]
	}
	b := &fakeBatch{ID: fmt.Sprintf("batch_%06d", s.batchSeq), Object: "batch", Endpoint: req.Endpoint,
		InputFileID: req.InputFileID, CompletionWindow: req.CompletionWindow, Status: "validating",
		CreatedAt: time.Now().Unix(), Metadata: req.Metadata, outcome: outcome, auth: r.Header.Get("Authorization")}
	b.RequestCounts.Total = bytes.Count(in.data, []byte("\n"))
	if s.batches == nil {
		s.batches = map[string]*fakeBatch{}
	}
	s.batches[b.ID] = b
	s.batchList = append(s.batchList, b)
	s.bc.Batches++
	s.bc.Requests += int64(b.RequestCounts.Total)
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = 20
	}
	after := r.URL.Query().Get("after")
	s.mu.Lock()
	var page []*fakeBatch
	skipping := after != ""
	for i := len(s.batchList) - 1; i >= 0; i-- { // newest first
		b := s.batchList[i]
		if skipping {
			skipping = b.ID != after
			continue
		}
		page = append(page, b)
	}
	more := len(page) > limit
	if more {
		page = page[:limit]
	}
	resp := map[string]any{"object": "list", "data": page, "has_more": more}
	if len(page) > 0 {
		resp["first_id"], resp["last_id"] = page[0].ID, page[len(page)-1].ID
	}
	b, _ := json.Marshal(resp)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func ended(status string) bool {
	switch status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

// pollBatch shows a batch, moving it one state on.
func (s *Server) pollBatch(w http.ResponseWriter, id string) {
	s.mu.Lock()
	b := s.batches[id]
	if b == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "invalid_request_error", "no such batch: "+id)
		return
	}
	if s.pollFailed < s.cfg.Batch.PollFailures {
		s.pollFailed++
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "server_error", "the fake is overloaded, retry later")
		return
	}
	s.bc.Polls++
	steps := 3
	if s.cfg.Batch.Steps != nil {
		steps = *s.cfg.Batch.Steps
	}
	finish := false
	if !ended(b.Status) {
		b.polls++
		switch {
		case b.Status == "cancelling" || b.polls > steps:
			finish = true
		case b.polls > 2*steps/3:
			b.Status = "finalizing"
		case b.polls > steps/3:
			b.Status = "in_progress"
		}
	}
	var in []byte
	if finish {
		in = s.files[b.InputFileID].data
	}
	s.mu.Unlock()
	if finish {
		s.finishBatch(b, in)
	}
	s.mu.Lock()
	out, _ := json.Marshal(b)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// finishBatch ends b as its outcome says, writing its output and error
// files.
func (s *Server) finishBatch(b *fakeBatch, in []byte) {
	var out, errs bytes.Buffer
	counts := requestCounts{Total: b.RequestCounts.Total}
	status := b.outcome
	switch b.outcome {
	case OutcomeFailed:
		s.mu.Lock()
		b.Status = "failed"
		b.Errors = &batchErrors{Object: "list"}
		b.Errors.Data = append(b.Errors.Data, struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}{"invalid_request", "the fake was told to fail this batch"})
		s.mu.Unlock()
		return
	case OutcomeCancelled:
		status = "cancelled"
	}
	n := 0
	s.eachBatchLine(in, func(customID string, body []byte, lineErr string) {
		n++
		switch {
		case lineErr != "":
			counts.Failed++
			writeBatchError(&errs, customID, http.StatusBadRequest, "invalid_request_error", lineErr)
		case b.outcome == OutcomeCancelled:
			counts.Failed++
			writeBatchError(&errs, customID, 0, "batch_cancelled", "the batch was cancelled before this request ran")
		case b.outcome == OutcomeExpired && n > counts.Total/2:
			counts.Failed++
			writeBatchError(&errs, customID, 0, "batch_expired", "this request could not be executed before the completion window expired")
		default:
			code, line := s.answerBatchLine(customID, body, b.auth)
			if code != http.StatusOK {
				counts.Failed++
				errs.Write(line)
			} else {
				counts.Completed++
				out.Write(line)
			}
		}
	})
	var outID, errID *string
	if out.Len() > 0 {
		id := s.addFile(b.ID+"_output.jsonl", "batch_output", out.Bytes()).ID
		outID = &id
	}
	if errs.Len() > 0 {
		id := s.addFile(b.ID+"_error.jsonl", "batch_output", errs.Bytes()).ID
		errID = &id
	}
	s.mu.Lock()
	b.Status, b.OutputFileID, b.ErrorFileID, b.RequestCounts = status, outID, errID, counts
	s.bc.Answered += int64(counts.Completed)
	s.mu.Unlock()
}

// eachBatchLine reads an input file; lineErr says why a line is unusable.
func (s *Server) eachBatchLine(in []byte, fn func(customID string, body []byte, lineErr string)) {
	sc := bufio.NewScanner(bytes.NewReader(in))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l struct {
			CustomID string          `json:"custom_id"`
			Method   string          `json:"method"`
			URL      string          `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		switch err := json.Unmarshal(sc.Bytes(), &l); {
		case err != nil:
			fn(l.CustomID, nil, "line is not JSON: "+err.Error())
		case l.Method != http.MethodPost || l.URL != "/v1/chat/completions":
			fn(l.CustomID, nil, "method must be POST and url /v1/chat/completions")
		default:
			fn(l.CustomID, l.Body, "")
		}
	}
}

// answerBatchLine answers one request as the chat endpoint would and
// returns its output line; auth is the batch's Authorization header
// (BatchConfig.EchoAuth).
func (s *Server) answerBatchLine(customID string, body []byte, auth string) (int, []byte) {
	h := fnv.New64a()
	h.Write(body)
	bodyHash := h.Sum64()
	if bad := s.cfg.Batch.BadRequest; bad != "" && bytes.Contains(body, []byte(bad)) {
		var b bytes.Buffer
		writeBatchError(&b, customID, http.StatusBadRequest, "invalid_request_error", "the fake refuses requests containing "+strconv.Quote(bad))
		return http.StatusBadRequest, b.Bytes()
	}
	if share := s.cfg.Batch.ErrorShare; share > 0 {
		c := fnv.New64a()
		io.WriteString(c, customID)
		if float64(near.Mix(c.Sum64())>>11)/(1<<53) < share { // FNV of short, similar strings differs little in its high bits
			var b bytes.Buffer
			msg := "the fake failed this request"
			if s.cfg.Batch.EchoAuth {
				msg += " (headers: Authorization: " + auth + ")"
			}
			writeBatchError(&b, customID, http.StatusInternalServerError, "server_error", msg)
			return http.StatusInternalServerError, b.Bytes()
		}
	}
	resp, err := s.answerChat(body, bodyHash, false)
	if err != nil {
		var b bytes.Buffer
		writeBatchError(&b, customID, http.StatusBadRequest, "invalid_request_error", err.Error())
		return http.StatusBadRequest, b.Bytes()
	}
	line, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("batch_req_%016x", bodyHash), "custom_id": customID,
		"response": map[string]any{"status_code": http.StatusOK, "request_id": fmt.Sprintf("req_%016x", bodyHash), "body": resp},
		"error":    nil,
	})
	return http.StatusOK, append(line, '\n')
}

// writeBatchError writes an error line: with a response of that status
// when status is not 0, else with the error object alone.
func writeBatchError(w *bytes.Buffer, customID string, status int, code, msg string) {
	l := map[string]any{"id": "batch_req_err_" + customID, "custom_id": customID, "response": nil,
		"error": map[string]any{"code": code, "message": msg}}
	if status != 0 {
		l["response"] = map[string]any{"status_code": status, "request_id": "",
			"body": map[string]any{"error": map[string]any{"message": msg, "type": code, "code": nil}}}
		l["error"] = nil
	}
	b, _ := json.Marshal(l)
	w.Write(append(b, '\n'))
}

// RunBatch answers an OpenAI batch input file the way an offline runner
// (`vllm run-batch`) does: one output line per request, failures included,
// in input order.
func (s *Server) RunBatch(in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	var answered int64
	s.eachBatchLine(data, func(customID string, body []byte, lineErr string) {
		if lineErr != "" {
			writeBatchError(&buf, customID, http.StatusBadRequest, "invalid_request_error", lineErr)
			return
		}
		code, line := s.answerBatchLine(customID, body, "")
		if code == http.StatusOK {
			answered++
		}
		buf.Write(line)
	})
	s.mu.Lock()
	s.bc.Answered += answered
	s.mu.Unlock()
	_, err = out.Write(buf.Bytes())
	return err
}
