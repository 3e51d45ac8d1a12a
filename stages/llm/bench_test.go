package llm

import (
	"context"
	"fmt"
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
// written.
// Metrics: req/s; of-ideal = req/s ÷ (in-flight ÷ 50 ms); client and
// server CPU milliseconds per request.
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
		send := func(tag string, n int) {
			for _, err := range batch(n, inflight, func(i int) error {
				_, err := s.Complete(context.Background(), userReq("bench@1", "", fmt.Sprintf("%s request %d", tag, i)))
				return err
			}) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		send("warm-up", 2*inflight) // open the connections
		b.ReportAllocs()
		cpu0, start := cpuTime(b), time.Now()
		b.ResetTimer()
		send(fmt.Sprint("n", b.N), b.N)
		b.StopTimer()
		elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
		if err := teacher.Flush(); err != nil {
			b.Fatal(err)
		}
		serverCPU := stop()
		rate := float64(b.N) / elapsed.Seconds()
		b.ReportMetric(rate, "req/s")
		b.ReportMetric(rate/(float64(inflight)/latency.Seconds()), "of-ideal")
		b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/req")
		b.ReportMetric(serverCPU.Seconds()*1000/float64(b.N+2*inflight), "server-cpu-ms/req")
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
