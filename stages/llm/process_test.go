package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// Child-process roles of the test binary, chosen by environment variable.
const (
	envKillChild  = "AUGMENT_LLM_TEST_WRITER_DIR" // run a cache writer in this dir until killed
	envFakeServer = "AUGMENT_LLM_TEST_FAKE"       // serve fakellm with this config (JSON) until stdin closes
)

func killReq(i int) Request {
	return userReq("kill@1", fmt.Sprint("rec", i), fmt.Sprintf("question %d", i))
}

// TestCacheSurvivesKill runs a teacher writing answers to the cache in a
// child process that commits at random moments, kills it with SIGKILL
// mid-run, and checks that the cache file is intact, that it holds every
// answer whose Complete had returned in the child, and that finishing the
// run re-sends none of them.
func TestCacheSurvivesKill(t *testing.T) {
	if dir := os.Getenv(envKillChild); dir != "" {
		cacheWriterChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCacheSurvivesKill$")
	cmd.Env = append(os.Environ(), envKillChild+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answered := map[int]bool{}
	sc := bufio.NewScanner(out)
	read := func(until int) {
		for len(answered) < until && sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "answered "); ok {
				i, err := strconv.Atoi(n)
				if err != nil {
					t.Fatalf("child said %q", sc.Text())
				}
				answered[i] = true
			}
		}
	}
	read(300)
	// Kill while the child keeps sending, writing and committing.
	time.Sleep(15 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	read(math.MaxInt) // what the child reported before it died
	cmd.Wait()
	if len(answered) < 300 {
		t.Fatalf("child reported only %d answers before it died", len(answered))
	}

	c, err := OpenCache(dir)
	if err != nil {
		t.Fatalf("reopening after kill -9: %v", err)
	}
	if err := c.Check(); err != nil {
		t.Fatalf("cache corrupt after kill -9: %v", err)
	}
	st, err := c.Stats()
	c.Close()
	if err != nil || len(st.Chat) != 1 || st.Chat[0].Entries < int64(len(answered)) {
		t.Fatalf("after kill: %+v %v; want ≥ %d entries", st, err, len(answered))
	}
	if logs, err := listLogs(cachePathOf(t, st.Path)); err != nil || len(logs) != 0 {
		t.Fatalf("logs left after replay and close: %v %v", logs, err)
	}

	// Every answer the child got is served from the cache.
	fake, url := startFake(t, fakellm.Config{})
	s := newTeacher(t, openaiConfig(url), Options{CacheDir: dir}).Stage("kill")
	last := 0
	for i := range answered {
		resp, err := s.Complete(context.Background(), killReq(i))
		if err != nil || !resp.Cached {
			t.Fatalf("answer %d, returned in the child before the kill, is not cached: %+v %v", i, resp, err)
		}
		last = max(last, i)
	}
	if n := fake.Counters().Chat; n != 0 {
		t.Fatalf("%d answered requests were sent again", n)
	}
	// Finishing the run sends only what the child had not been answered.
	total := last + 100
	for _, err := range batch(total, 16, func(i int) error {
		_, err := s.Complete(context.Background(), killReq(i))
		return err
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if sent := int(fake.Counters().Chat); sent > total-len(answered) {
		t.Fatalf("resume sent %d requests for %d records, %d of which were answered before the kill", sent, total, len(answered))
	}
	t.Logf("killed after %d answers (%d entries on disk); resume sent %d of %d", len(answered), st.Chat[0].Entries, fake.Counters().Chat, total)
}

// cacheWriterChild answers requests through a teacher with a cache in dir,
// printing each answered request as soon as Complete returns, and commits
// the cache every few milliseconds meanwhile, until killed.
func cacheWriterChild(dir string) {
	srv, err := fakellm.New(fakellm.Config{Latency: fakellm.Duration(time.Millisecond)})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(ln, srv)
	teacher, err := NewTeacher(openaiConfig("http://"+ln.Addr().String()+"/v1"), Options{CacheDir: dir})
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			time.Sleep(3 * time.Millisecond)
			if err := teacher.Flush(); err != nil {
				panic(err)
			}
		}
	}()
	s := teacher.Stage("kill")
	deadline := time.Now().Add(time.Minute) // in case the parent never kills us
	for from := 0; time.Now().Before(deadline); from += 50 {
		for _, err := range batch(50, 16, func(i int) error {
			_, err := s.Complete(context.Background(), killReq(from+i))
			if err == nil {
				fmt.Printf("answered %d\n", from+i)
			}
			return err
		}) {
			if err != nil {
				panic(err)
			}
		}
	}
	os.Exit(1)
}

// TestFakeServerProcess is not a test: with envFakeServer set it serves
// fakellm for the benchmarks from a separate process, so the client's CPU
// can be measured alone.
func TestFakeServerProcess(t *testing.T) {
	js := os.Getenv(envFakeServer)
	if js == "" {
		t.Skip("helper process for benchmarks")
	}
	cfg, err := fakellm.ParseConfig([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fakellm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go (&http.Server{Handler: srv}).Serve(ln)
	fmt.Printf("addr %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin
	os.Exit(0)
}

// startFakeProcess runs fakellm with the given latency in a child process
// and returns its base URL and a stop function reporting the child's CPU
// time.
func startFakeProcess(tb testing.TB, latency time.Duration) (string, func() time.Duration) {
	return startFakeProcessConfig(tb, fakellm.Config{Latency: fakellm.Duration(latency)})
}

// startFakeProcessConfig is startFakeProcess with a whole fake config.
func startFakeProcessConfig(tb testing.TB, cfg fakellm.Config) (string, func() time.Duration) {
	tb.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFakeServerProcess$")
	// The fake shares the two cores with the client under test; a lazier
	// garbage collector keeps its share small.
	cmd.Env = append(os.Environ(), envFakeServer+"="+string(js), "GOGC=400")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	addr := ""
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		cmd.Process.Kill()
		tb.Fatal("fake server process did not start")
	}
	go io.Copy(io.Discard, out)
	stopped := false
	stop := func() time.Duration {
		if stopped {
			return 0
		}
		stopped = true
		stdin.Close()
		cmd.Wait()
		u := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	tb.Cleanup(func() { stop() })
	return "http://" + addr + "/v1", stop
}
