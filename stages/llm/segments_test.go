package llm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// Workers of a run write their own cache segments at once; a rerun with
// another number of workers, and a run as one process, send nothing again.
func TestCacheSegmentsRerunOtherCount(t *testing.T) {
	fake, url := startFake(t, fakellm.Config{})
	dir := t.TempDir()
	const records = 60
	// run asks for the records i with i%n == w, as worker w of n ("" alone).
	run := func(segment string, w, n int) {
		teacher, err := NewTeacher(openaiConfig(url), Options{CacheDir: dir, CacheSegment: segment})
		if err != nil {
			t.Fatal(err)
		}
		defer teacher.Close()
		s := teacher.Stage("reason")
		errs := batch(records, 8, func(i int) error {
			if i%n != w {
				return nil
			}
			out, err := s.Complete(context.Background(), userReq("reason@1", fmt.Sprint("r", i), fmt.Sprint("question ", i)))
			if err == nil && out.Content != fmt.Sprint("question ", i) {
				err = fmt.Errorf("answer %q", out.Content)
			}
			return err
		})
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two workers at once: each holds its own segment.
	done := make(chan struct{})
	for w := range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			run(fmt.Sprintf("worker-%d-of-2", w), w, 2)
		}()
	}
	<-done
	<-done
	if got := fake.Counters().Chat; got != records {
		t.Fatalf("two workers sent %d, want %d", got, records)
	}
	for w := range 2 {
		if _, err := os.Stat(filepath.Join(dir, segmentsDir, fmt.Sprintf("worker-%d-of-2", w), CacheFile)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		segment string
		n       int
	}{{"worker-0-of-3", 3}, {"worker-1-of-3", 3}, {"worker-2-of-3", 3}, {"", 1}} {
		w := 0
		if tc.segment != "" {
			fmt.Sscanf(tc.segment, "worker-%d", &w)
		}
		run(tc.segment, w, tc.n)
		if got := fake.Counters().Chat; got != records {
			t.Fatalf("%q: sent %d more requests, want 0", tc.segment, got-records)
		}
	}
	// A new request goes to the writer's own segment.
	teacher, err := NewTeacher(openaiConfig(url), Options{CacheDir: dir, CacheSegment: "worker-0-of-3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := teacher.Stage("reason").Complete(context.Background(), userReq("reason@1", "new", "a new question")); err != nil {
		t.Fatal(err)
	}
	teacher.Close()
	c, err := OpenCacheReadOnly(filepath.Join(dir, segmentsDir, "worker-0-of-3"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st, err := c.Stats(); err != nil || len(st.Chat) != 1 || st.Chat[0].Entries != 1 {
		t.Fatalf("segment stats %+v %v", st, err)
	}
}
