package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// batchFake is a fake whose answers name the question, and a base URL.
func batchFake(t *testing.T, bc fakellm.BatchConfig) (*fakellm.Server, string) {
	t.Helper()
	return startFake(t, fakellm.Config{Record: true, Batch: bc,
		Script: []fakellm.Rule{{Regexp: `question (\d+)`, Answer: "answer to $1"}}})
}

// batchRig is a run directory and the teacher config of a batch-mode run.
type batchRig struct {
	cfg      Config
	o        Options
	batchDir string // o.BatchRoot's OS path, for the test's own reads
}

func newBatchRig(t *testing.T, url, provider string) *batchRig {
	dir := t.TempDir()
	cfg := openaiConfig(url)
	cfg.Mode, cfg.Batch.Provider = ModeBatch, provider
	return &batchRig{cfg: cfg, o: Options{CacheDir: filepath.Join(dir, "cache"), BatchRoot: testBatchRoot(t, dir)},
		batchDir: filepath.Join(dir, "batch")}
}

// testBatchRoot opens dir as a confined root, as a run opens its output
// directory, and returns the Root of its batch folder.
func testBatchRoot(t testing.TB, dir string) *atomicfs.Root {
	t.Helper()
	root, err := atomicfs.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root.Sub("batch")
}

func questions(n int) []Request {
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = userReq("s@1", fmt.Sprintf("r%d", i), fmt.Sprintf("question %d", i))
	}
	return reqs
}

// passResult is what one stage pass of a run saw.
type passResult struct {
	resps []Response
	errs  []error
	wait  error // from BatchStart (then nothing was asked) or BatchFinish
	stats Stats
	held  []string // Teacher.BatchHeld of the stage after the pass
}

// pass is one run of a stage in a new process: the runner's batch
// protocol around one Complete per request.
func (r *batchRig) pass(t *testing.T, reqs []Request) passResult {
	t.Helper()
	teacher, err := NewTeacher(r.cfg, r.o)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	ctx := context.Background()
	var res passResult
	if res.wait = teacher.BatchStart(ctx, "s"); res.wait != nil {
		if !IsWaiting(res.wait) {
			t.Fatalf("BatchStart: %v", res.wait)
		}
		return res
	}
	s := teacher.Stage("s")
	res.resps, res.errs = make([]Response, len(reqs)), make([]error, len(reqs))
	for i, req := range reqs {
		res.resps[i], res.errs[i] = s.Complete(ctx, req)
	}
	res.wait = teacher.BatchFinish(ctx, "s")
	if res.wait != nil && !IsWaiting(res.wait) {
		t.Fatalf("BatchFinish: %v", res.wait)
	}
	res.stats = s.Stats()
	res.held = teacher.BatchHeld("s")
	return res
}

// untilDone runs passes until one asks nothing new, at most n.
func (r *batchRig) untilDone(t *testing.T, reqs []Request, n int) (passResult, int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		res := r.pass(t, reqs)
		if res.wait == nil {
			return res, i
		}
	}
	t.Fatalf("not done after %d passes", n)
	return passResult{}, 0
}

func (r *batchRig) jobs(t *testing.T) []BatchJob {
	t.Helper()
	jobs, err := ReadBatchJobs(r.batchDir)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// onlineAnswers asks reqs online.
func onlineAnswers(t *testing.T, url string, reqs []Request) []Response {
	s := newTeacher(t, openaiConfig(url), Options{}).Stage("s")
	out := make([]Response, len(reqs))
	for i, req := range reqs {
		var err error
		if out[i], err = s.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The OpenAI Batch API round trip: the first run submits one batch of the
// distinct requests and stops waiting; runs while the batch is open ask
// nothing; the run after it ends gets every answer from the cache, the
// same answers (and request bodies) as the online mode.
func TestBatchRoundTripOpenAI(t *testing.T) {
	steps := 2
	fake, url := batchFake(t, fakellm.BatchConfig{Steps: &steps})
	rig := newBatchRig(t, url, BatchOpenAI)
	reqs := append(questions(5), questions(1)...) // a repeat is written once

	first := rig.pass(t, reqs)
	var w *WaitError
	if !errors.As(first.wait, &w) || w.Submitted != 1 || w.Requests != 5 || len(w.Jobs) != 1 {
		t.Fatalf("first pass: %v", first.wait)
	}
	for i, err := range first.errs {
		if !IsPending(err) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// The repeat shares the first copy's line: a cache hit (an identical
	// request in flight, as online), not a second request in batch.
	if first.stats.Requests != 6 || first.stats.Pending != 5 || first.stats.CacheHits != 1 || first.stats.Failed != 0 ||
		first.stats.Batch == nil || first.stats.Batch.Rounds != 1 {
		t.Fatalf("stats: %+v %+v", first.stats, first.stats.Batch)
	}
	if c := fake.BatchCounters(); c.Uploads != 1 || c.Batches != 1 || c.Requests != 5 || fake.Counters().Chat != 0 {
		t.Fatalf("fake saw %+v, %d chat requests", c, fake.Counters().Chat)
	}
	// validating → in_progress → finalizing: each run polls once and waits.
	for range 2 {
		if res := rig.pass(t, reqs); !IsWaiting(res.wait) || res.resps != nil {
			t.Fatalf("open batch: %+v", res)
		}
	}
	last := rig.pass(t, reqs)
	if last.wait != nil {
		t.Fatalf("last pass: %v", last.wait)
	}
	online := onlineAnswers(t, url, reqs)
	for i, r := range last.resps {
		if last.errs[i] != nil || !r.Cached || r.Content != fmt.Sprintf("answer to %d", i%5) {
			t.Fatalf("answer %d: %+v %v", i, r, last.errs[i])
		}
		o := online[i]
		if r.Content != o.Content || r.Provider != o.Provider || r.Model != o.Model || r.FinishReason != o.FinishReason {
			t.Fatalf("answer %d differs from online: %+v vs %+v", i, r, o)
		}
	}
	if c := fake.BatchCounters(); c.Batches != 1 || c.Answered != 5 {
		t.Fatalf("fake: %+v", c)
	}
	// The batch lines carry the bytes the online mode sends.
	in, err := os.ReadFile(filepath.Join(rig.batchDir, rig.jobs(t)[0].InputFile()))
	if err != nil {
		t.Fatal(err)
	}
	for _, seen := range fake.Log() {
		if !bytes.Contains(in, append(append([]byte(`"body":`), seen.Body...), '}', '\n')) {
			t.Fatalf("online body not in the batch file: %s", seen.Body)
		}
	}
	jobs := rig.jobs(t)
	if len(jobs) != 1 || jobs[0].State != JobDone || jobs[0].Answered != 5 || jobs[0].Remote.Status != "completed" {
		t.Fatalf("jobs: %+v", jobs)
	}
}

// rewriteJob changes a recorded job, as a kill at that point leaves it.
func rewriteJob(t *testing.T, root *atomicfs.Root, edit func(j *BatchJob)) {
	t.Helper()
	st, err := readBatchState(root)
	if err != nil {
		t.Fatal(err)
	}
	edit(st.Jobs[0])
	b, _ := json.Marshal(st)
	if _, err := root.WriteFile(BatchStateFile, b); err != nil {
		t.Fatal(err)
	}
}

// A run killed at any point of a job's life resumes it: never a second
// upload or batch for the same job, every answer in the end.
// Copies of one request asked at once in batch mode (sharing the leader's
// lookup, or finding its line in the batch files) are one line and one
// request in batch; the others are cache hits, as online.
func TestBatchConcurrentCopiesOneRequest(t *testing.T) {
	_, url := batchFake(t, fakellm.BatchConfig{})
	rig := newBatchRig(t, url, BatchOpenAI)
	teacher, err := NewTeacher(rig.cfg, rig.o)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	ctx := context.Background()
	if err := teacher.BatchStart(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	s := teacher.Stage("s")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Complete(ctx, userReq("s@1", fmt.Sprintf("r%d", i), "question 1"))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !IsPending(err) {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	var w *WaitError
	if err := teacher.BatchFinish(ctx, "s"); !errors.As(err, &w) || w.Requests != 1 {
		t.Fatalf("BatchFinish: %v", err)
	}
	if st := s.Stats(); st.Requests != n || st.Pending != 1 || st.CacheHits != n-1 {
		t.Fatalf("stats: requests %d, in batch %d, cache hits %d; want %d, 1, %d", st.Requests, st.Pending, st.CacheHits, n, n-1)
	}
}

func TestBatchResumeAtEveryState(t *testing.T) {
	zero := 0
	reqs := questions(4)
	tests := []struct {
		name string
		// kill rewrites the state after the first pass (job submitted)
		// or, with done, after the job is done.
		kill      func(t *testing.T, rig *batchRig)
		afterDone bool
		downloads int64
	}{
		{"after upload, before its ID was saved", func(t *testing.T, rig *batchRig) {
			rewriteJob(t, rig.o.BatchRoot, func(j *BatchJob) { j.State, j.Remote = JobPrepared, nil })
		}, false, 1},
		{"after creating the batch, before its ID was saved", func(t *testing.T, rig *batchRig) {
			rewriteJob(t, rig.o.BatchRoot, func(j *BatchJob) { j.State, j.Remote.BatchID, j.Remote.Status = JobUploaded, "", "" })
		}, false, 1},
		{"after download, before it was recorded", func(t *testing.T, rig *batchRig) {
			rewriteJob(t, rig.o.BatchRoot, func(j *BatchJob) { j.State = JobSubmitted })
			os.RemoveAll(rig.o.CacheDir)
		}, true, 2},
		{"while ingesting", func(t *testing.T, rig *batchRig) {
			rewriteJob(t, rig.o.BatchRoot, func(j *BatchJob) { j.State = JobDownloaded })
			os.RemoveAll(rig.o.CacheDir)
		}, true, 1},
		{"in the stage pass", func(t *testing.T, rig *batchRig) {
			// A pass killed before BatchFinish leaves a spool only.
			teacher, err := NewTeacher(rig.cfg, rig.o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := teacher.Stage("s").Complete(context.Background(), userReq("s@1", "x", "question 99")); !IsPending(err) {
				t.Fatal(err)
			}
			teacher.Close()
			if _, err := os.Stat(filepath.Join(rig.batchDir, spoolDir)); err != nil {
				t.Fatal("no spool written")
			}
		}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, url := batchFake(t, fakellm.BatchConfig{Steps: &zero})
			rig := newBatchRig(t, url, BatchOpenAI)
			if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
				t.Fatal(res.wait)
			}
			if tt.afterDone {
				if res := rig.pass(t, reqs); res.wait != nil {
					t.Fatal(res.wait)
				}
			}
			tt.kill(t, rig)
			res, _ := rig.untilDone(t, reqs, 3)
			for i, r := range res.resps {
				if res.errs[i] != nil || r.Content != fmt.Sprintf("answer to %d", i) {
					t.Fatalf("answer %d: %+v %v", i, r, res.errs[i])
				}
			}
			if c := fake.BatchCounters(); c.Uploads != 1 || c.Batches != 1 || c.Downloads != tt.downloads {
				t.Fatalf("fake: %+v", c)
			}
			if _, err := os.Stat(filepath.Join(rig.batchDir, spoolDir)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("spool left: %v", err)
			}
			if jobs := rig.jobs(t); len(jobs) != 1 || jobs[0].State != JobDone || jobs[0].Answered != 4 {
				t.Fatalf("jobs: %+v", jobs)
			}
		})
	}
}

// Expired and partly failed batches resubmit only what is missing, in a
// new round (failed and cancelled ones: TestBatchFailedOrCancelledHeld); a request that keeps failing is rejected after
// max_attempts batches, one the server refuses at once.
func TestBatchFailuresAndRounds(t *testing.T) {
	zero := 0
	tests := []struct {
		name     string
		bc       fakellm.BatchConfig
		attempts int
		rounds   int
		reasons  map[string]int // reject reasons and counts
		batches  int64
	}{
		{"expired then completed", fakellm.BatchConfig{Outcomes: []string{"expired"}}, 3, 2, nil, 2},
		{"partial server errors, bounded", fakellm.BatchConfig{ErrorShare: 0.5}, 2, 2, map[string]int{"llm_error_server": -1}, 2},
		{"refused requests are rejected at once", fakellm.BatchConfig{BadRequest: "question 3"}, 3, 1, map[string]int{"llm_error_bad_request": 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.bc.Steps = &zero
			fake, url := batchFake(t, tt.bc)
			rig := newBatchRig(t, url, BatchOpenAI)
			rig.cfg.Batch.MaxAttempts = tt.attempts
			reqs := questions(8)
			res, _ := rig.untilDone(t, reqs, 2*tt.rounds+2)
			reasons := map[string]int{}
			for i, err := range res.errs {
				var ae *AnswerError
				switch {
				case err == nil:
					if res.resps[i].Content != fmt.Sprintf("answer to %d", i) {
						t.Fatalf("answer %d: %+v", i, res.resps[i])
					}
				case errors.As(err, &ae):
					reasons[ae.Reason]++
				default:
					t.Fatalf("request %d: %v", i, err)
				}
			}
			for r, n := range tt.reasons {
				if n < 0 && reasons[r] == 0 || n > 0 && reasons[r] != n {
					t.Fatalf("rejects %v, want %v", reasons, tt.reasons)
				}
			}
			if tt.reasons == nil && len(reasons) > 0 {
				t.Fatalf("rejects %v", reasons)
			}
			sum := rig.jobs(t)
			rounds := 0
			for _, j := range sum {
				rounds = max(rounds, j.Round)
			}
			if rounds != tt.rounds || fake.BatchCounters().Batches != tt.batches {
				t.Fatalf("rounds %d (want %d), batches %d (want %d): %+v", rounds, tt.rounds, fake.BatchCounters().Batches, tt.batches, sum)
			}
			// The second round held only what the first did not answer.
			if len(sum) > 1 && sum[1].Requests != sum[0].Failed+sum[0].Missing {
				t.Fatalf("round 2 has %d requests, round 1 left %d+%d", sum[1].Requests, sum[0].Failed, sum[0].Missing)
			}
		})
	}
}

// A batch's downloaded error file never holds the API key, even when the
// server quotes the Authorization header in its error lines; answers are
// kept as they came.
func TestBatchErrorFileRedacted(t *testing.T) {
	const key = "sk-secret-batch-0123456789"
	t.Setenv("AUGMENT_BATCH_TEST_KEY", key)
	zero := 0
	_, url := batchFake(t, fakellm.BatchConfig{Steps: &zero, ErrorShare: 0.5, EchoAuth: true})
	rig := newBatchRig(t, url, BatchOpenAI)
	rig.cfg.APIKeyEnv = "AUGMENT_BATCH_TEST_KEY"
	rig.cfg.Batch.MaxAttempts = 1
	rig.untilDone(t, questions(8), 4)
	files, err := filepath.Glob(filepath.Join(rig.batchDir, "*.errors.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no error file (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(key)) || !bytes.Contains(b, []byte("Authorization: Bearer [redacted]")) {
			t.Errorf("%s:\n%s", f, b)
		}
	}
}

// A stage that keeps asking new questions after each answer stops at
// max_rounds with a clear fatal error.
func TestBatchMaxRounds(t *testing.T) {
	zero := 0
	_, url := batchFake(t, fakellm.BatchConfig{Steps: &zero})
	rig := newBatchRig(t, url, BatchOpenAI)
	rig.cfg.Batch.MaxRounds = 2
	for round := 1; round <= 2; round++ {
		reqs := questions(round) // each round asks one more
		if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
			t.Fatalf("round %d: %v", round, res.wait)
		}
	}
	teacher, err := NewTeacher(rig.cfg, rig.o)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	if err := teacher.BatchStart(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	s := teacher.Stage("s")
	for _, req := range questions(2) {
		if _, err := s.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Complete(context.Background(), questions(3)[2])
	var fe *FatalError
	if !errors.As(err, &fe) || fe.Reason != "llm_batch_rounds" || !strings.Contains(err.Error(), "max_rounds") {
		t.Fatalf("third round: %v", err)
	}
}

// Request sets larger than a file's limits are split; every file keeps
// within them.
func TestBatchSplitsFiles(t *testing.T) {
	_, url := batchFake(t, fakellm.BatchConfig{})
	rig := newBatchRig(t, url, BatchFiles)
	rig.cfg.Batch.MaxRequests = 3
	rig.cfg.Batch.MaxBytes = 1 << 10
	reqs := questions(20)
	for i := range reqs {
		reqs[i].Messages[0].Content = strings.Repeat("x", 150)
	}
	if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
		t.Fatal(res.wait)
	}
	jobs := rig.jobs(t)
	total := 0
	for _, j := range jobs {
		b, err := os.ReadFile(filepath.Join(rig.batchDir, j.InputFile()))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Count(b, []byte("\n"))
		if lines != j.Requests || lines > 3 || int64(len(b)) > 1<<10 || int64(len(b)) != j.Bytes {
			t.Fatalf("job %s: %d lines, %d bytes, recorded %+v", j.ID, lines, len(b), j)
		}
		total += lines
	}
	if total != 20 || len(jobs) < 7 {
		t.Fatalf("%d requests in %d files", total, len(jobs))
	}
}

// Files mode: augment writes the OpenAI batch files, a runner (here the
// fake's RunBatch, as vllm run-batch would) writes the outputs beside
// them, and the next run takes the answers in.
func TestBatchFilesRoundTrip(t *testing.T) {
	fake, url := batchFake(t, fakellm.BatchConfig{})
	rig := newBatchRig(t, url, BatchFiles)
	rig.cfg.Endpoints = nil // no server needed
	reqs := questions(6)
	first := rig.pass(t, reqs)
	var w *WaitError
	if !errors.As(first.wait, &w) || !strings.Contains(w.Hint, "vllm run-batch -i ") || w.Requests != 6 {
		t.Fatalf("first pass: %v", first.wait)
	}
	if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
		t.Fatal("no output yet, but the run went on")
	}
	for _, j := range rig.jobs(t) {
		in, err := os.Open(filepath.Join(rig.batchDir, j.InputFile()))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := fake.RunBatch(in, &out); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if _, err := rig.o.BatchRoot.WriteFile(j.OutputFile(), out.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	last := rig.pass(t, reqs)
	if last.wait != nil {
		t.Fatal(last.wait)
	}
	online := onlineAnswers(t, url, reqs)
	for i, r := range last.resps {
		if last.errs[i] != nil || r.Content != online[i].Content || r.Model != online[i].Model || r.Provider != online[i].Provider {
			t.Fatalf("answer %d: %+v vs online %+v (%v)", i, r, online[i], last.errs[i])
		}
	}
}

// The budget covers submitted batches: a job whose estimate would pass it
// is not submitted and stays prepared; a larger budget submits it.
func TestBatchBudget(t *testing.T) {
	zero := 0
	fake, url := batchFake(t, fakellm.BatchConfig{Steps: &zero})
	rig := newBatchRig(t, url, BatchOpenAI)
	rig.cfg.PriceInputPerMTok, rig.cfg.PriceOutputPerMTok, rig.cfg.MaxTokens = 1, 1, 1000
	rig.cfg.Budget = 0.001 // 4 requests × 1000 output tokens × $1/M × 0.5 = 0.002
	teacher, err := NewTeacher(rig.cfg, rig.o)
	if err != nil {
		t.Fatal(err)
	}
	s := teacher.Stage("s")
	for _, req := range questions(4) {
		s.Complete(context.Background(), req)
	}
	err = teacher.BatchFinish(context.Background(), "s")
	teacher.Close()
	var fe *FatalError
	if !errors.As(err, &fe) || fe.Reason != "llm_budget_reached" || fake.BatchCounters().Uploads != 0 {
		t.Fatalf("got %v, %+v", err, fake.BatchCounters())
	}
	if jobs := rig.jobs(t); len(jobs) != 1 || jobs[0].State != JobPrepared || jobs[0].EstCost < 0.002 {
		t.Fatalf("jobs %+v", jobs)
	}
	rig.cfg.Budget = 1
	res, _ := rig.untilDone(t, questions(4), 3)
	if res.stats.Batch == nil || res.stats.Batch.Answered != 4 || res.stats.Cost <= 0 || res.stats.Cost != res.stats.Batch.Cost {
		t.Fatalf("stats %+v %+v", res.stats, res.stats.Batch)
	}
	if jobs := rig.jobs(t); jobs[0].Cost <= 0 {
		t.Fatalf("no batch cost recorded: %+v", jobs[0])
	}
}

func TestParseBatchOutput(t *testing.T) {
	id := strings.Repeat("ab", 32)
	tests := []struct {
		name, line string
		class      string
		content    string
		bad        bool
	}{
		{"answer", `{"id":"x","custom_id":"` + id + `","response":{"status_code":200,"request_id":"r","body":{"model":"m","choices":[{"message":{"content":"hi","reasoning_content":"t"},"finish_reason":"stop"}]}},"error":null}`, "", "hi", false},
		{"error object (expired)", `{"custom_id":"` + id + `","response":null,"error":{"code":"batch_expired","message":"window ended"}}`, classExpired, "", false},
		{"status 500", `{"custom_id":"` + id + `","response":{"status_code":500,"body":{"error":{"message":"boom"}}},"error":null}`, classServer, "", false},
		{"status 400", `{"custom_id":"` + id + `","response":{"status_code":400,"body":{"error":{"message":"bad"}}}}`, classBadRequest, "", false},
		{"vLLM error with number code", `{"custom_id":"` + id + `","response":{"status_code":400,"body":null},"error":{"code":400,"message":"bad"}}`, classBadRequest, "", false},
		// vLLM's run-batch writes an ErrorResponse, {"error": ErrorInfo}.
		{"vLLM ErrorResponse 404", `{"id":"vllm-1","custom_id":"` + id + `","response":{"status_code":404,"request_id":"r","body":null},"error":{"error":{"message":"The model ` + "`m`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}}`, classNotFound, "", false},
		{"vLLM ErrorResponse 400", `{"custom_id":"` + id + `","response":{"status_code":400,"body":null},"error":{"error":{"message":"'max_tokens' is too large: 512.","type":"BadRequestError","param":null,"code":400}}}`, classBadRequest, "", false},
		{"vLLM ErrorResponse without a status", `{"custom_id":"` + id + `","response":null,"error":{"error":{"message":"EngineCore encountered an issue.","type":"InternalServerError","param":null,"code":500}}}`, classServer, "", false},
		{"vLLM plain string error", `{"custom_id":"` + id + `","response":{"status_code":400,"body":null},"error":"This model's maximum context length is 4096 tokens."}`, classBadRequest, "", false},
		{"unknown error code", `{"custom_id":"` + id + `","error":"something"}`, classBatchError, "", false},
		{"200 that is no completion", `{"custom_id":"` + id + `","response":{"status_code":200,"body":{"choices":[]}}}`, classInvalid, "", false},
		{"foreign custom_id", `{"custom_id":"request-1","response":{"status_code":200,"body":{}}}`, "", "", true},
		{"not hex", `{"custom_id":"` + strings.Repeat("zz", 32) + `"}`, "", "", true},
		{"not json", `{"custom_id":`, "", "", true},
	}
	for _, tt := range tests {
		r, err := parseBatchOutput([]byte(tt.line), "m")
		if (err != nil) != tt.bad {
			t.Errorf("%s: error %v", tt.name, err)
			continue
		}
		if tt.bad {
			continue
		}
		if r.class != tt.class || r.resp.Content != tt.content || (tt.class != "" && r.message == "") {
			t.Errorf("%s: got %+v", tt.name, r)
		}
		if want := wantBatchMessages[tt.name]; want != "" && r.message != want {
			t.Errorf("%s: message %q, want %q", tt.name, r.message, want)
		}
	}
}

// wantBatchMessages: what TestParseBatchOutput's failures say, the
// server's message after its type.
var wantBatchMessages = map[string]string{
	"error object (expired)":              "window ended",
	"status 500":                          "boom",
	"vLLM error with number code":         "bad",
	"vLLM ErrorResponse 404":              "NotFoundError: The model `m` does not exist.",
	"vLLM ErrorResponse 400":              "BadRequestError: 'max_tokens' is too large: 512.",
	"vLLM ErrorResponse without a status": "InternalServerError: EngineCore encountered an issue.",
	"vLLM plain string error":             "This model's maximum context length is 4096 tokens.",
	"unknown error code":                  "something",
}

func FuzzParseBatchOutput(f *testing.F) {
	id := strings.Repeat("01", 32)
	f.Add(`{"custom_id":"` + id + `","response":{"status_code":200,"body":{"choices":[{"message":{"content":"x"}}]}}}`)
	f.Add(`{"custom_id":"` + id + `","error":{"code":"batch_expired","message":"m"}}`)
	f.Add(`{"custom_id":"` + id + `","response":{"status_code":429}}`)
	f.Add(`{"custom_id":"` + id + `","response":{"status_code":404,"body":null},"error":{"error":{"message":"The model does not exist.","type":"NotFoundError","param":"model","code":404}}}`)
	f.Add(`{"custom_id":"` + id + `","response":null,"error":{"error":{"message":"m","type":"BadRequestError","code":"400"}}}`)
	f.Add(`{"custom_id":"` + id + `","response":{"status_code":400,"body":null},"error":{"error":"nested string"}}`)
	f.Fuzz(func(t *testing.T, line string) {
		r, err := parseBatchOutput([]byte(line), "m")
		if err != nil {
			return
		}
		if r.class == "" && (r.resp.Provider != ProviderOpenAI || r.resp.Model == "") {
			t.Fatalf("an answer without provider or model: %+v", r)
		}
		if r.class != "" && r.message == "" {
			t.Fatalf("a failure without a message: %+v", r)
		}
	})
}

// The batch directory is reached only through the output's confined root:
// a link planted in its place that points out of the output directory
// stops batch mode before anything is written there.
func TestBatchDirLinkOutRefused(t *testing.T) {
	_, url := batchFake(t, fakellm.BatchConfig{})
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "batch")); err != nil {
		t.Skip("no symlinks:", err)
	}
	cfg := openaiConfig(url)
	cfg.Mode, cfg.Batch.Provider = ModeBatch, BatchFiles
	teacher, err := NewTeacher(cfg, Options{CacheDir: filepath.Join(dir, "cache"), BatchRoot: testBatchRoot(t, dir)})
	if err == nil {
		teacher.Close()
		t.Fatal("batch mode opened through a link pointing out of the output directory")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the output directory: %v", ents)
	}
}

// TestIsPendingNil: the runner asks IsPending of every record's outcome,
// nil nearly always, which must not allocate.
func TestIsPendingNil(t *testing.T) {
	if IsPending(nil) || IsPending(errors.New("other")) {
		t.Fatal("IsPending true for an error that is not pending")
	}
	if !IsPending(fmt.Errorf("record 7: %w", &PendingError{Stage: "s@1"})) {
		t.Fatal("IsPending false for a wrapped *PendingError")
	}
	if n := testing.AllocsPerRun(100, func() { IsPending(nil) }); n != 0 {
		t.Fatalf("IsPending(nil) allocates %v times", n)
	}
}

// runFilesJobs answers every open files-mode job's input with the fake, as
// a runner started by the user would, and writes the output beside it.
func (r *batchRig) runFilesJobs(t *testing.T, fake *fakellm.Server) {
	t.Helper()
	for _, j := range r.jobs(t) {
		if !j.Open() || j.Provider != BatchFiles {
			continue
		}
		in, err := os.Open(filepath.Join(r.batchDir, j.InputFile()))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = fake.RunBatch(in, &out)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.o.BatchRoot.WriteFile(j.OutputFile(), out.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
}

// A job stays with the provider it was made for when
// teacher.batch.provider changes while it is open: a files job waits for
// its output (no batch is created for it), an OpenAI batch is polled (the
// hint does not ask for a runner, which would pay a second time); new
// requests go to the provider configured now. Without the endpoint an
// open OpenAI batch is polled at, the teacher is refused before anything
// runs.
func TestBatchProviderChangeKeepsOpenJobs(t *testing.T) {
	t.Run("files to openai", func(t *testing.T) {
		fake, url := batchFake(t, fakellm.BatchConfig{})
		rig := newBatchRig(t, url, BatchFiles)
		reqs := questions(4)
		if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
			t.Fatalf("first pass: %v", res.wait)
		}
		rig.cfg.Batch.Provider = BatchOpenAI
		res := rig.pass(t, reqs)
		var w *WaitError
		if !errors.As(res.wait, &w) || !strings.Contains(w.Hint, "s-0001 stay with teacher.batch.provider files") || !strings.Contains(w.Hint, "vllm run-batch -i ") {
			t.Fatalf("pass after the change: %v", res.wait)
		}
		if c := fake.BatchCounters(); c.Uploads != 0 || c.Batches != 0 {
			t.Fatalf("the files job went to the Batch API: %+v", c)
		}
		rig.runFilesJobs(t, fake)
		if res := rig.pass(t, reqs); res.wait != nil {
			t.Fatalf("after the runner: %v", res.wait)
		} else if res.errs[3] != nil || res.resps[3].Content != "answer to 3" {
			t.Fatalf("answer: %+v %v", res.resps[3], res.errs[3])
		}
		// A new request goes to the Batch API.
		if res := rig.pass(t, questions(5)); !IsWaiting(res.wait) {
			t.Fatalf("new request: %v", res.wait)
		}
		jobs := rig.jobs(t)
		if len(jobs) != 2 || jobs[1].Provider != BatchOpenAI || jobs[1].Requests != 1 || fake.BatchCounters().Batches != 1 {
			t.Fatalf("jobs %+v, fake %+v", jobs, fake.BatchCounters())
		}
	})
	t.Run("openai to files", func(t *testing.T) {
		steps := 1
		fake, url := batchFake(t, fakellm.BatchConfig{Steps: &steps})
		rig := newBatchRig(t, url, BatchOpenAI)
		reqs := questions(4)
		if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
			t.Fatalf("first pass: %v", res.wait)
		}
		rig.cfg.Batch.Provider = BatchFiles
		res := rig.pass(t, reqs) // polls: the batch is in progress
		var w *WaitError
		if !errors.As(res.wait, &w) || strings.Contains(w.Hint, "run-batch") || !strings.Contains(w.Hint, "s-0001 stay with teacher.batch.provider openai") {
			t.Fatalf("pass after the change: %v", res.wait)
		}
		if res := rig.pass(t, reqs); res.wait != nil {
			t.Fatalf("the batch ended: %v", res.wait)
		} else if res.errs[2] != nil || res.resps[2].Content != "answer to 2" {
			t.Fatalf("answer: %+v %v", res.resps[2], res.errs[2])
		}
		if c := fake.BatchCounters(); c.Batches != 1 || c.Polls != 2 {
			t.Fatalf("fake: %+v", c)
		}

		// An OpenAI batch open, and no endpoint to poll it at.
		if res := rig.pass(t, questions(5)); !IsWaiting(res.wait) { // a files job
			t.Fatalf("new request: %v", res.wait)
		}
		st, err := readBatchState(rig.o.BatchRoot)
		if err != nil || len(st.Jobs) != 2 || st.Jobs[1].Provider != BatchFiles {
			t.Fatalf("state: %+v %v", st, err)
		}
		st.Jobs[1].Provider, st.Jobs[1].Remote = BatchOpenAI, &RemoteBatch{BatchID: "batch_x"} // as if submitted there
		b, _ := json.Marshal(st)
		if _, err := rig.o.BatchRoot.WriteFile(BatchStateFile, b); err != nil {
			t.Fatal(err)
		}
		rig.cfg.Batch.Provider, rig.cfg.Endpoints = BatchFiles, nil
		_, err = NewTeacher(rig.cfg, rig.o)
		var bce *BatchStateError
		if !errors.As(err, &bce) || !strings.Contains(err.Error(), "batch job s-0002 is open on the OpenAI Batch API") {
			t.Fatalf("NewTeacher: %v", err)
		}
	})
}

// rejects counts a pass's rejects by reason.
func (p passResult) rejects(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i, err := range p.errs {
		var ae *AnswerError
		switch {
		case err == nil:
		case errors.As(err, &ae):
			out[ae.Reason]++
		default:
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return out
}

// A request whose batches keep failing with a passing failure (5xx) is
// rejected after max_attempts batches, which ends the stage's pass (the
// run's exit 3). A rerun asks it again, with max_attempts batches again,
// as an online rerun does; a request that keeps failing ends each time.
// The pass that rejects it from the recorded failures sends nothing and
// counts no request.
func TestBatchRerunAsksFailedRequestsAgain(t *testing.T) {
	zero := 0
	fake, url := batchFake(t, fakellm.BatchConfig{Steps: &zero, ErrorShare: 0.5})
	rig := newBatchRig(t, url, BatchOpenAI)
	rig.cfg.Batch.MaxAttempts = 2
	reqs := questions(8)

	// Round 1 asks all, round 2 what failed; the pass after it rejects.
	res, passes := rig.untilDone(t, reqs, 6)
	failing := res.rejects(t)["llm_error_server"]
	if passes != 3 || failing == 0 || fake.BatchCounters().Batches != 2 {
		t.Fatalf("passes %d, rejects %v, batches %d", passes, res.rejects(t), fake.BatchCounters().Batches)
	}
	if sent := res.stats.Requests - res.stats.CacheHits; sent != 0 || res.stats.Failed != int64(failing) {
		t.Fatalf("the rejecting pass counts %d request(s) not from the cache (stats %+v)", sent, res.stats)
	}

	// A rerun asks the rejected requests again, in a new epoch, and ends
	// after max_attempts more batches.
	res = rig.pass(t, reqs)
	var w *WaitError
	if !errors.As(res.wait, &w) || w.Requests != failing || w.Submitted != 1 {
		t.Fatalf("rerun: %v", res.wait)
	}
	res, passes = rig.untilDone(t, reqs, 6)
	if passes != 2 || res.rejects(t)["llm_error_server"] != failing || fake.BatchCounters().Batches != 4 {
		t.Fatalf("passes %d, rejects %v, batches %d", passes, res.rejects(t), fake.BatchCounters().Batches)
	}
	jobs := rig.jobs(t)
	if last := jobs[len(jobs)-1]; last.Epoch != 2 || last.Round != 2 {
		t.Fatalf("last job: %+v", last)
	}

	// Once the failure passes, a rerun gets every answer.
	_, healthy := batchFake(t, fakellm.BatchConfig{Steps: &zero})
	rig.cfg.Endpoints[0].BaseURL = healthy
	if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
		t.Fatalf("rerun with a healthy server: %v", res.wait)
	}
	res, _ = rig.untilDone(t, reqs, 2)
	for i, err := range res.errs {
		if err != nil || res.resps[i].Content != fmt.Sprintf("answer to %d", i) {
			t.Fatalf("answer %d: %+v %v", i, res.resps[i], err)
		}
	}
}

// A state that says an OpenAI job was uploaded or submitted but holds no
// remote ID for it (edited by hand) is refused when the teacher is made,
// not dereferenced when the job is polled.
func TestBatchStateWithoutRemoteRefused(t *testing.T) {
	for _, state := range []string{JobUploaded, JobSubmitted} {
		t.Run(state, func(t *testing.T) {
			zero := 0
			_, url := batchFake(t, fakellm.BatchConfig{Steps: &zero})
			rig := newBatchRig(t, url, BatchOpenAI)
			if res := rig.pass(t, questions(2)); !IsWaiting(res.wait) {
				t.Fatalf("first pass: %v", res.wait)
			}
			rewriteJob(t, rig.o.BatchRoot, func(j *BatchJob) { j.State, j.Remote = state, nil })
			_, err := NewTeacher(rig.cfg, rig.o)
			var bse *BatchStateError
			if !errors.As(err, &bse) || !strings.Contains(err.Error(), "batch job s-0001 is "+state+" on the OpenAI Batch API but") {
				t.Fatalf("NewTeacher: %v", err)
			}
		})
	}
}

// An online teacher is refused while the batch directory holds open jobs
// of a batch run: it would ask their requests again, and the provider
// bills the open batch as well. The refusal names the jobs and both ways
// out; once the jobs are done (their answers in the cache), the online
// teacher is made and answers from the cache without sending anything.
func TestOnlineRefusedWhileBatchesOpen(t *testing.T) {
	steps := 1
	fake, url := batchFake(t, fakellm.BatchConfig{Steps: &steps})
	rig := newBatchRig(t, url, BatchOpenAI)
	reqs := questions(3)
	if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
		t.Fatalf("first pass: %v", res.wait)
	}
	online := rig.cfg
	online.Mode = ModeOnline
	_, err := NewTeacher(online, rig.o)
	var bse *BatchStateError
	if !errors.As(err, &bse) {
		t.Fatalf("online teacher with an open batch: %v", err)
	}
	for _, want := range []string{"s-0001 (openai, submitted, batch batch_", "pay for them twice", "augment batch poll -wait -set teacher.mode=batch", "move the batch directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
	if fake.Counters().Chat != 0 {
		t.Fatalf("%d chat requests sent", fake.Counters().Chat)
	}
	rig.untilDone(t, reqs, 3)
	teacher, err := NewTeacher(online, rig.o)
	if err != nil {
		t.Fatalf("online teacher once the batches are done: %v", err)
	}
	defer teacher.Close()
	for i, req := range reqs {
		r, err := teacher.Stage("s").Complete(context.Background(), req)
		if err != nil || !r.Cached || r.Content != fmt.Sprintf("answer to %d", i) {
			t.Fatalf("answer %d: %+v %v", i, r, err)
		}
	}
	if fake.Counters().Chat != 0 {
		t.Fatalf("%d chat requests sent for answers in the cache", fake.Counters().Chat)
	}
}

// A batch the provider failed (its validation refused the file) or that
// was cancelled is not resubmitted by itself: sent again unchanged, a
// refused file is refused again, and a cancel means someone wanted it to
// stop. The pass after it rejects its unanswered requests (a passing
// reason: the run exits 3), and says why, with the provider's own reason;
// a rerun asks them again in a new epoch.
func TestBatchFailedOrCancelledHeld(t *testing.T) {
	for _, tt := range []struct {
		outcome, reason, says string
	}{
		{fakellm.OutcomeFailed, "llm_error_batch_failed", "failed at the provider: invalid_request the fake was told to fail this batch"},
		{fakellm.OutcomeCancelled, "llm_error_cancelled", "was cancelled at the provider"},
	} {
		t.Run(tt.outcome, func(t *testing.T) {
			zero := 0
			fake, url := batchFake(t, fakellm.BatchConfig{Steps: &zero, Outcomes: []string{tt.outcome}})
			rig := newBatchRig(t, url, BatchOpenAI)
			reqs := questions(4)
			if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
				t.Fatalf("first pass: %v", res.wait)
			}
			res := rig.pass(t, reqs)
			if res.wait != nil || res.rejects(t)[tt.reason] != 4 || fake.BatchCounters().Batches != 1 {
				t.Fatalf("after the %s batch: wait %v, rejects %v, batches %d", tt.outcome, res.wait, res.rejects(t), fake.BatchCounters().Batches)
			}
			if len(res.held) != 1 || !strings.Contains(res.held[0], "batch job s-0001 (stage s) "+tt.says) || !strings.Contains(res.held[0], "run again to ask them in new batches") {
				t.Fatalf("held: %q", res.held)
			}
			if !Transient(tt.reason) {
				t.Fatalf("%s is not a passing reason: a rerun would not ask again", tt.reason)
			}
			// The rerun asks them again, in a new epoch.
			res = rig.pass(t, reqs)
			var w *WaitError
			if !errors.As(res.wait, &w) || w.Requests != 4 || w.Submitted != 1 || len(res.held) != 0 {
				t.Fatalf("rerun: %v, held %q", res.wait, res.held)
			}
			res, _ = rig.untilDone(t, reqs, 2)
			for i, err := range res.errs {
				if err != nil || res.resps[i].Content != fmt.Sprintf("answer to %d", i) {
					t.Fatalf("answer %d: %+v %v", i, res.resps[i], err)
				}
			}
			if jobs := rig.jobs(t); len(jobs) != 2 || jobs[1].Epoch != 2 {
				t.Fatalf("jobs %+v", jobs)
			}
		})
	}
}

// teacher.batch.max_requests and max_bytes may not pass the OpenAI Batch
// API's limits with provider openai (the API would fail every such file at
// validation); a files runner has no such limits.
func TestBatchConfigOpenAILimits(t *testing.T) {
	for _, tt := range []struct {
		provider string
		reqs     int
		bytes    int64
		want     []string
	}{
		{BatchOpenAI, 50_000, 200_000_000, nil},
		{BatchOpenAI, 100_000, 200_000_000, []string{"teacher.batch.max_requests: 100000 is over the OpenAI Batch API's limit of 50000 requests per file (provider openai)"}},
		{BatchOpenAI, 10, 900_000_000, []string{"teacher.batch.max_bytes: 900000000 is over the OpenAI Batch API's limit of 200000000 bytes per file (provider openai)"}},
		{BatchFiles, 100_000, 900_000_000, nil},
	} {
		c := openaiConfig("http://127.0.0.1:1/v1")
		c.Mode, c.Batch.Provider, c.Batch.MaxRequests, c.Batch.MaxBytes = ModeBatch, tt.provider, tt.reqs, tt.bytes
		c.Defaults()
		var got []string
		for _, err := range c.Validate() {
			got = append(got, err.Error())
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s %d requests %d bytes: %q, want %q", tt.provider, tt.reqs, tt.bytes, got, tt.want)
		}
	}
}

// The Files API refusing the key (401, a restricted key without the Files
// permission) stops the run as credentials refused online do (llm_auth,
// the CLI's exit 3), not as a failure a rerun would resume from.
func TestBatchUploadAuthFatal(t *testing.T) {
	_, url := batchFake(t, fakellm.BatchConfig{UploadStatus: http.StatusUnauthorized})
	rig := newBatchRig(t, url, BatchOpenAI)
	teacher, err := NewTeacher(rig.cfg, rig.o)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	if _, err := teacher.Stage("s").Complete(context.Background(), questions(1)[0]); !IsPending(err) {
		t.Fatal(err)
	}
	err = teacher.BatchFinish(context.Background(), "s")
	var fe *FatalError
	if !errors.As(err, &fe) || fe.Reason != "llm_auth" || !strings.Contains(err.Error(), "refused the credentials (HTTP 401)") {
		t.Fatalf("BatchFinish: %v", err)
	}
}

// A batch the provider does not know (404: another key or project, another
// endpoint, a provider reset) is a state problem (the CLI's exit 2) that
// says what happened and the ways out, not a failure to run again.
func TestBatchUnknownRemoteBatch(t *testing.T) {
	steps := 5
	_, url := batchFake(t, fakellm.BatchConfig{Steps: &steps})
	rig := newBatchRig(t, url, BatchOpenAI)
	if res := rig.pass(t, questions(2)); !IsWaiting(res.wait) {
		t.Fatalf("first pass: %v", res.wait)
	}
	_, other := batchFake(t, fakellm.BatchConfig{Steps: &steps}) // knows no batch
	rig.cfg.Endpoints[0].BaseURL = other
	teacher, err := NewTeacher(rig.cfg, rig.o)
	if err != nil {
		t.Fatal(err)
	}
	defer teacher.Close()
	err = teacher.BatchStart(context.Background(), "s")
	var bse *BatchStateError
	if !errors.As(err, &bse) {
		t.Fatalf("BatchStart: %v", err)
	}
	for _, want := range []string{"batch job s-0001 was submitted as batch batch_000001, which " + other + " does not know (404", "set that endpoint", "move the batch directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("lacks %q: %v", want, err)
		}
	}
}

// BatchPassing tells the failures `batch poll -wait` rides out from the
// others.
func TestBatchPassing(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&statusError{status: 503}, true},
		{&statusError{status: 429}, true},
		{fmt.Errorf("batch job x: %w", &openai.APIError{HTTPStatusCode: 502}), true},
		{&statusError{status: 401}, false},
		{&statusError{status: 400}, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{errors.New("batch state: disk full"), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := BatchPassing(tt.err); got != tt.want {
			t.Errorf("BatchPassing(%v) = %v", tt.err, got)
		}
	}
}

// An error line that online would stop the run (404: the runner serves
// another model name, as `vllm run-batch --model /path` without
// --served-model-name does; 401/403: credentials refused) stops the run
// that reads it with the online reason, and rejects nothing: the answers
// of the job are kept, and the next run asks those requests again in new
// batches, which a fixed runner answers.
func TestBatchFatalErrorLinesStop(t *testing.T) {
	tests := []struct {
		name, provider, line, reason string
		says                         []string
	}{
		{"vLLM 404 model not served", BatchFiles,
			`{"id":"vllm-1","custom_id":"%s","response":{"status_code":404,"request_id":"r","body":null},"error":{"error":{"message":"The model ` + "`fake-model`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}}`,
			"llm_model_not_found", []string{`the batch runner answered 404 for model "`, "--served-model-name ", "NotFoundError: The model `fake-model` does not exist.", "nothing is rejected"}},
		{"401 error line", BatchFiles,
			`{"custom_id":"%s","response":{"status_code":401,"body":{"error":{"message":"invalid key","type":"auth_error"}}},"error":null}`,
			"llm_auth", []string{"refused the credentials", "teacher.api_key_env", "invalid key"}},
		{"403 error line", BatchFiles,
			`{"custom_id":"%s","response":{"status_code":403,"body":null},"error":{"error":{"message":"forbidden","type":"PermissionError","code":403}}}`,
			"llm_auth", []string{"refused the credentials", "PermissionError: forbidden"}},
		{"404 at the Batch API", BatchOpenAI,
			`{"custom_id":"%s","response":{"status_code":404,"body":{"error":{"message":"no such model","type":"invalid_request_error","code":"model_not_found"}}},"error":null}`,
			"llm_model_not_found", []string{`the teacher answered 404 for model "`, "teacher.model"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, url := batchFake(t, fakellm.BatchConfig{})
			rig := newBatchRig(t, url, BatchFiles)
			reqs := questions(6)
			if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
				t.Fatalf("first pass: %v", res.wait)
			}
			if tt.provider == BatchOpenAI {
				rewriteJob(t, rig.o.BatchRoot, func(j *BatchJob) { j.Provider = BatchOpenAI; j.State = JobDownloaded })
			}
			// The runner answers every other request with the error line.
			job := rig.jobs(t)[0]
			in, err := os.Open(filepath.Join(rig.batchDir, job.InputFile()))
			if err != nil {
				t.Fatal(err)
			}
			var answers bytes.Buffer
			err = fake.RunBatch(in, &answers)
			in.Close()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			for i, line := range bytes.SplitAfter(answers.Bytes(), []byte("\n")) {
				if i%2 == 1 && len(line) > 0 {
					var l struct {
						CustomID string `json:"custom_id"`
					}
					if err := json.Unmarshal(line, &l); err != nil {
						t.Fatal(err)
					}
					line = fmt.Appendf(nil, tt.line+"\n", l.CustomID)
				}
				out.Write(line)
			}
			if _, err := rig.o.BatchRoot.WriteFile(job.OutputFile(), out.Bytes()); err != nil {
				t.Fatal(err)
			}

			teacher, err := NewTeacher(rig.cfg, rig.o)
			if err != nil {
				t.Fatal(err)
			}
			err = teacher.BatchStart(context.Background(), "s")
			teacher.Close()
			fe, ok := errors.AsType[*FatalError](err)
			if !ok || fe.Reason != tt.reason {
				t.Fatalf("BatchStart: %v, want a stop with %s", err, tt.reason)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("stop message %q does not say %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), "3 request(s) of batch job s-0001") {
				t.Fatalf("stop message %q does not count the requests", err)
			}

			// Nothing rejected: the next run asks the 3 again, and a
			// fixed runner answers them.
			res := rig.pass(t, reqs)
			var w *WaitError
			if !errors.As(res.wait, &w) || w.Requests != 3 {
				t.Fatalf("run after the stop: %v", res.wait)
			}
			for i, err := range res.errs {
				if (i%2 == 1) != IsPending(err) || i%2 == 0 && err != nil {
					t.Fatalf("run after the stop: request %d: %v", i, err)
				}
			}
			rig.runFilesJobs(t, fake)
			res = rig.pass(t, reqs)
			if res.wait != nil {
				t.Fatalf("after the fixed runner: %v", res.wait)
			}
			for i, err := range res.errs {
				if err != nil || res.resps[i].Content != fmt.Sprintf("answer to %d", i) {
					t.Fatalf("answer %d: %+v %v", i, res.resps[i], err)
				}
			}
		})
	}
}

// A request the server refuses (a 400 error line) is rejected for the rest
// of its stage's epoch without being asked again, as online for the rest of
// the run; a later run that makes the stage's records again (their output
// deleted, settings changed) asks it again, as online, and only it: the
// answered requests come from the cache.
func TestBatchBadRequestFinalPerEpoch(t *testing.T) {
	fake, url := batchFake(t, fakellm.BatchConfig{BadRequest: "question 3"})
	rig := newBatchRig(t, url, BatchFiles)
	reqs := questions(6)
	if res := rig.pass(t, reqs); !IsWaiting(res.wait) {
		t.Fatalf("first pass: %v", res.wait)
	}
	rig.runFilesJobs(t, fake)
	res := rig.pass(t, reqs)
	if res.wait != nil || res.rejects(t)["llm_error_bad_request"] != 1 || res.errs[3] == nil {
		t.Fatalf("after the runner: wait %v, rejects %v", res.wait, res.rejects(t))
	}
	if msg := res.errs[3].Error(); !strings.Contains(msg, "the fake refuses requests containing") {
		t.Fatalf("reject does not quote the server: %s", msg)
	}
	// The stage's pass completed; a later run makes it again.
	res = rig.pass(t, reqs)
	var w *WaitError
	if !errors.As(res.wait, &w) || w.Requests != 1 {
		t.Fatalf("a later run of the stage: wait %v, rejects %v; want the refused request asked again", res.wait, res.rejects(t))
	}
	rig.runFilesJobs(t, fake)
	res = rig.pass(t, reqs)
	if res.wait != nil || res.rejects(t)["llm_error_bad_request"] != 1 {
		t.Fatalf("after the runner again: wait %v, rejects %v", res.wait, res.rejects(t))
	}
	if jobs := rig.jobs(t); len(jobs) != 2 || jobs[1].Epoch != 2 || jobs[1].Requests != 1 {
		t.Fatalf("jobs %+v", jobs)
	}
}

// shellQuote leaves plain words as they are and quotes the rest so that a
// POSIX shell reads each back as the same one word.
func TestShellQuote(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"out/batch/s-0001.input.jsonl", "out/batch/s-0001.input.jsonl"},
		{"Qwen/Qwen3-8B", "Qwen/Qwen3-8B"},
		{"my out/batch/x", "'my out/batch/x'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
		{"$HOME/x", "'$HOME/x'"},
		{"~/x", "'~/x'"},
		{"a;b&&c`d`", "'a;b&&c`d`'"},
	} {
		got := shellQuote(tt.in)
		if got != tt.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
		sh, err := exec.LookPath("sh")
		if err != nil {
			continue
		}
		out, err := exec.Command(sh, "-c", "printf '%s|' "+got).Output()
		if err != nil || string(out) != tt.in+"|" {
			t.Errorf("sh reads %s as %q (%v), want %q", got, out, err, tt.in)
		}
	}
}
