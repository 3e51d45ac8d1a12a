package llm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTeacherThroughput drives the teacher at a fixed number of
// requests in flight against fakellm answering after 50 ms, running in a
// child process so that this process's CPU time is the client's alone.
// Every request is distinct, so with the cache on each answer is also
// logged, and committed to the cache file about every second.
//
// It measures the steady state: in-flight workers keep the pipeline full,
// and the clock, CPU and allocation meters run from the completion of
// request in-flight to that of in-flight + b.N, with in-flight more
// requests sent after that so the window closes with the pipeline still
// full. The workers' ramp-up and the drain of the last round, which at
// 512 in flight and 10,000 requests took about 5 % off a whole-batch
// timing (measured with the same code both ways), fall outside the window.
//
// Metrics: req/s; of-ideal = req/s ÷ (in-flight ÷ 50 ms); client and
// server CPU milliseconds per request; latency percentiles of the HTTP
// attempts (whole run).
func BenchmarkTeacherThroughput(b *testing.B) {
	const latency = 50 * time.Millisecond
	for _, cache := range []bool{true, false} {
		for _, inflight := range []int{64, 256, 512} {
			benchThroughput(b, latency, inflight, cache)
		}
	}
}

func benchThroughput(b *testing.B, latency time.Duration, inflight int, cache bool) {
	b.Run(fmt.Sprintf("cache=%v/inflight=%d", cache, inflight), func(b *testing.B) {
		url, stop := startFakeProcess(b, latency)
		cfg := openaiConfig(url)
		cfg.Endpoints[0].MaxInFlight = inflight
		cfg.Timeout = Duration(30 * time.Second)
		o := Options{}
		if cache {
			o.CacheDir = b.TempDir()
		}
		teacher := newTeacher(b, cfg, o)
		s := teacher.Stage("bench")
		send := func(tag string, n int, done func()) {
			for _, err := range batch(n, inflight, func(i int) error {
				_, err := s.Complete(context.Background(), userReq("bench@1", "", fmt.Sprintf("%s request %d", tag, i)))
				done()
				return err
			}) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		send("warm-up", 2*inflight, func() {}) // open the connections
		b.ReportAllocs()
		b.StopTimer()
		b.ResetTimer()
		var (
			finished   atomic.Int64
			started    = make(chan struct{})
			cpu0, cpu1 time.Duration
			t0, t1     time.Time
		)
		lead, end := int64(inflight), int64(inflight+b.N)
		send(fmt.Sprint("n", b.N), b.N+2*inflight, func() {
			switch finished.Add(1) {
			case lead:
				cpu0, t0 = cpuTime(b), time.Now()
				b.StartTimer()
				close(started)
			case end:
				<-started
				b.StopTimer()
				t1, cpu1 = time.Now(), cpuTime(b)
			}
		})
		if err := teacher.Flush(); err != nil {
			b.Fatal(err)
		}
		serverCPU := stop()
		rate := float64(b.N) / t1.Sub(t0).Seconds()
		lat := s.Stats().Latency
		b.ReportMetric(rate, "req/s")
		b.ReportMetric(rate/(float64(inflight)/latency.Seconds()), "of-ideal")
		b.ReportMetric((cpu1-cpu0).Seconds()*1000/float64(b.N), "cpu-ms/req")
		b.ReportMetric(serverCPU.Seconds()*1000/float64(b.N+4*inflight), "server-cpu-ms/req")
		b.ReportMetric(lat.P50, "p50-ms")
		b.ReportMetric(lat.P99, "p99-ms")
		b.ReportMetric(float64(teacher.Endpoints()[0].Cuts), "limit-cuts")
	})
}

// BenchmarkCacheHit measures a request answered from the cache: canonical
// key, lookup, decode.
func BenchmarkCacheHit(b *testing.B) {
	fake, url := startFake(b, fakellm.Config{})
	teacher := newTeacher(b, openaiConfig(url), Options{CacheDir: b.TempDir()})
	s := teacher.Stage("bench")
	req := userReq("bench@1", "slot", "a typical prompt of a few hundred bytes: "+string(make([]byte, 300)))
	if _, err := s.Complete(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	teacher.Flush()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if resp, err := s.Complete(context.Background(), req); err != nil || !resp.Cached {
			b.Fatal(err)
		}
	}
	if fake.Counters().Chat != 1 {
		b.Fatal("cache missed")
	}
}

// BenchmarkLexicalEmbedding measures the offline embedding of a tool
// description.
func BenchmarkLexicalEmbedding(b *testing.B) {
	text := "get_current_weather: Get the current weather conditions (temperature, humidity, wind) for a city or coordinates"
	b.ReportAllocs()
	for b.Loop() {
		LexicalEmbedding(text, 512)
	}
}

// BenchmarkCachePut measures storing one answer (entry and slot): the
// log record's write(2) and the in-memory index, plus its share of the
// commits.
func BenchmarkCachePut(b *testing.B) {
	c, err := OpenCache(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	canon := []byte(`{"stage":"bench@1","template":"tmpl-1","model":"fake-model","messages":[{"role":"system","content":"answer"},{"role":"user","content":"` + strings.Repeat("a typical prompt ", 20) + `"}]}`)
	resp := Response{Content: strings.Repeat("a typical answer ", 20), FinishReason: "stop", Usage: Usage{PromptTokens: 90, CompletionTokens: 85}, Provider: ProviderOpenAI, Model: "fake-model"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := sha256.Sum256(fmt.Append(canon, i))
		if err := c.putChat("bench@1", key[:], canon, resp, "bench", fmt.Appendf(nil, "rec%d\x000", i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if err := c.Flush(); err != nil {
		b.Fatal(err)
	}
}
