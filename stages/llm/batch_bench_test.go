package llm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBatchPrepare writes b.N distinct requests (a Tool-DC-sized
// prompt of about 1.3 KB each) into batch files the way a batch-mode
// stage pass does: through StageClient.Complete on 16 goroutines, then
// BatchFinish seals and records the jobs (files provider, nothing sent).
// It reports the peak heap in use while preparing and the peak RSS of the
// process, to show memory stays flat however many requests there are:
//
//	go test ./stages/llm/ -run '^$' -bench BatchPrepare -benchtime 1000000x
func BenchmarkBatchPrepare(b *testing.B) {
	dir := b.TempDir()
	cfg := Config{Provider: ProviderOpenAI, Model: "m", Mode: ModeBatch, Batch: BatchConfig{Provider: BatchFiles}}
	teacher, err := NewTeacher(cfg, Options{CacheDir: filepath.Join(dir, "cache"), BatchRoot: testBatchRoot(b, dir)})
	if err != nil {
		b.Fatal(err)
	}
	defer teacher.Close()
	s := teacher.Stage("tool_dc")
	system := strings.Repeat("You pick functions for a user's request from the list below. ", 12)
	tool := `{"name": "get_weather_%d", "description": "Current weather for a city, with temperature and wind.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}}}`

	stop := make(chan struct{})
	var peak atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var work sync.WaitGroup
	for range 16 {
		work.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				req := Request{Stage: "tool_dc@1", Template: "t", Slot: "r" + strconv.FormatInt(i, 10),
					Messages: []Message{
						{Role: "system", Content: system},
						{Role: "user", Content: fmt.Sprintf("Book a table for %d people tonight.\n\nFunctions:\n"+tool, i%7+1, i)},
					}}
				if _, err := s.Complete(context.Background(), req); !IsPending(err) {
					b.Error(err)
					return
				}
			}
		})
	}
	work.Wait()
	if err := teacher.BatchFinish(context.Background(), "tool_dc"); !IsWaiting(err) {
		b.Fatal(err)
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	var bytesOut int64
	for _, j := range teacher.BatchJobs() {
		bytesOut += j.Bytes
	}
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(bytesOut)/float64(b.N), "file-bytes/req")
	if rss := peakRSS(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
	}
	runtime.KeepAlive(teacher)
}

// peakRSS reads the process's peak resident set (VmHWM) on Linux; 0
// elsewhere.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
