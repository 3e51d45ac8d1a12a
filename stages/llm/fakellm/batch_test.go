package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

func batchInput(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": fmt.Sprintf("q%d", i)}}})
		fmt.Fprintf(&b, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":%s}`+"\n", i, body)
	}
	return b.Bytes()
}

func upload(t *testing.T, url string, data []byte) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	fw.Write(data)
	mw.Close()
	resp, err := http.Post(url+"/v1/files", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var f struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&f)
	if resp.StatusCode != 200 || f.ID == "" {
		t.Fatalf("upload: status %d", resp.StatusCode)
	}
	return f.ID
}

type batchView struct {
	ID            string
	Status        string
	OutputFileID  *string       `json:"output_file_id"`
	ErrorFileID   *string       `json:"error_file_id"`
	RequestCounts requestCounts `json:"request_counts"`
}

func getJSON(t *testing.T, method, url string, body any, v any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

func content(t *testing.T, url, id string) string {
	t.Helper()
	resp, err := http.Get(url + "/v1/files/" + id + "/content")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A batch moves validating → in_progress → finalizing → its outcome, one
// state per poll, and its output answers as the chat endpoint would.
func TestBatchLifecycle(t *testing.T) {
	steps := 3
	tests := []struct {
		outcome                     string
		errorShare                  float64
		status                      string
		completed, failed, outLines int
	}{
		{OutcomeCompleted, 0, "completed", 6, 0, 6},
		{OutcomeCompleted, 0.5, "completed", 3, 3, 3},
		{OutcomeExpired, 0, "expired", 3, 3, 3},
		{OutcomeCancelled, 0, "cancelled", 0, 6, 0},
		{OutcomeFailed, 0, "failed", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s-%v", tt.outcome, tt.errorShare), func(t *testing.T) {
			s, hs := newServer(t, Config{Batch: BatchConfig{Steps: &steps, Outcomes: []string{tt.outcome}, ErrorShare: tt.errorShare}})
			id := upload(t, hs.URL, batchInput(6))
			var b batchView
			if code := getJSON(t, "POST", hs.URL+"/v1/batches", map[string]any{"input_file_id": id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}, &b); code != 200 || b.Status != "validating" {
				t.Fatalf("create: %d %+v", code, b)
			}
			var seen []string
			for range steps + 1 {
				getJSON(t, "GET", hs.URL+"/v1/batches/"+b.ID, nil, &b)
				seen = append(seen, b.Status)
			}
			want := []string{"validating", "in_progress", "finalizing", tt.status}
			if strings.Join(seen, " ") != strings.Join(want, " ") {
				t.Fatalf("states %v, want %v", seen, want)
			}
			if b.RequestCounts.Total != 6 || b.RequestCounts.Completed != tt.completed || b.RequestCounts.Failed != tt.failed {
				t.Fatalf("counts %+v", b.RequestCounts)
			}
			lines := 0
			if b.OutputFileID != nil {
				out := content(t, hs.URL, *b.OutputFileID)
				lines = strings.Count(out, "\n")
				if tt.outLines > 0 && !strings.Contains(out, `"status_code":200`) {
					t.Fatalf("output: %s", out)
				}
			}
			if lines != tt.outLines {
				t.Fatalf("%d output lines, want %d", lines, tt.outLines)
			}
			if tt.failed > 0 && (b.ErrorFileID == nil || strings.Count(content(t, hs.URL, *b.ErrorFileID), "\n") != tt.failed) {
				t.Fatalf("error file: %v", b.ErrorFileID)
			}
			if got := s.BatchCounters(); got.Batches != 1 || got.Requests != 6 || got.Answered != int64(tt.completed) {
				t.Fatalf("counters %+v", got)
			}
			// GET /fake/counters holds the batch totals too.
			var c Counters
			if getJSON(t, "GET", hs.URL+"/fake/counters", nil, &c); c.Batch != s.BatchCounters() {
				t.Fatalf("/fake/counters batch %+v, want %+v", c.Batch, s.BatchCounters())
			}
		})
	}
}

// GET /fake/log lists the recorded requests, and says how to record them
// when the fake does not.
func TestFakeLog(t *testing.T) {
	_, hs := newServer(t, Config{Record: true})
	getJSON(t, "POST", hs.URL+"/v1/chat/completions", map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": "hi"}}}, nil)
	var log []Seen
	if code := getJSON(t, "GET", hs.URL+"/fake/log", nil, &log); code != 200 || len(log) != 1 || log[0].Path != "/v1/chat/completions" {
		t.Fatalf("/fake/log: %d %+v", code, log)
	}
	_, off := newServer(t, Config{})
	if code := getJSON(t, "GET", off.URL+"/fake/log", nil, nil); code != 404 {
		t.Fatalf("/fake/log without -record: %d, want 404", code)
	}
}

// Batch answers are the chat endpoint's answers, byte for byte in the body.
func TestBatchAnswersMatchChat(t *testing.T) {
	s, hs := newServer(t, Config{Script: []Rule{{Regexp: `q(\d)`, Answer: "answer $1"}}})
	var out bytes.Buffer
	if err := s.RunBatch(bytes.NewReader(batchInput(3)), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		var o struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int          `json:"status_code"`
				Body       chatResponse `json:"body"`
			}
		}
		json.Unmarshal([]byte(l), &o)
		_, online, _ := chat(t, hs.URL, fmt.Sprintf("q%d", i), 0)
		if o.CustomID != fmt.Sprintf("c%d", i) || o.Response.StatusCode != 200 ||
			o.Response.Body.Choices[0].Message.Content != fmt.Sprintf("answer %d", i) ||
			online.Choices[0].Message.Content != o.Response.Body.Choices[0].Message.Content {
			t.Fatalf("line %d: %s", i, l)
		}
	}
}

func TestBatchListAndErrors(t *testing.T) {
	_, hs := newServer(t, Config{})
	id := upload(t, hs.URL, batchInput(1))
	var ids []string
	for range 3 {
		var b batchView
		getJSON(t, "POST", hs.URL+"/v1/batches", map[string]any{"input_file_id": id, "endpoint": "/v1/chat/completions"}, &b)
		ids = append(ids, b.ID)
	}
	var page struct {
		Data    []batchView
		HasMore bool   `json:"has_more"`
		LastID  string `json:"last_id"`
	}
	getJSON(t, "GET", hs.URL+"/v1/batches?limit=2", nil, &page)
	if len(page.Data) != 2 || !page.HasMore || page.Data[0].ID != ids[2] {
		t.Fatalf("first page %+v", page)
	}
	getJSON(t, "GET", hs.URL+"/v1/batches?limit=2&after="+page.LastID, nil, &page)
	if len(page.Data) != 1 || page.HasMore || page.Data[0].ID != ids[0] {
		t.Fatalf("second page %+v", page)
	}
	if code := getJSON(t, "POST", hs.URL+"/v1/batches", map[string]any{"input_file_id": "file-x", "endpoint": "/v1/chat/completions"}, nil); code != 400 {
		t.Fatalf("unknown input file: %d", code)
	}
	if code := getJSON(t, "GET", hs.URL+"/v1/batches/batch_x", nil, nil); code != 404 {
		t.Fatalf("unknown batch: %d", code)
	}
	if _, err := New(Config{Batch: BatchConfig{Outcomes: []string{"lost"}}}); err == nil {
		t.Fatal("unknown outcome accepted")
	}
}
