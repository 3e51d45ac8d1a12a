package stages

import (
	"fmt"
	"strconv"
	"testing"
)

// The deal of shards to workers covers every shard exactly once, gives
// each worker of a source a near-equal share and depends on the name only.
func TestShardOwnerDeal(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7} {
		for _, src := range []string{"toolace", "glaive", "a-b"} {
			const shards = 50
			per := make([]int, n)
			for i := range shards {
				name := fmt.Sprintf("%s-%05d", src, i)
				o := shardOwner(name, n)
				if o < 0 || o >= n || o != shardOwner(name, n) {
					t.Fatalf("n=%d %s: owner %d", n, name, o)
				}
				per[o]++
			}
			for w, c := range per {
				if c < shards/n || c > shards/n+1 {
					t.Errorf("n=%d source %s: worker %d has %d of %d shards", n, src, w, c, shards)
				}
			}
		}
	}
	if o := shardOwner("no index", 3); o < 0 || o >= 3 {
		t.Errorf("a name without a shard number: owner %d", o)
	}
}

func TestParseWorker(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"0/1", "0/1"}, {"6/7", "6/7"}, {"7/7", ""}, {"-1/3", ""}, {"1/0", ""}, {"1", ""}, {"a/b", ""},
		{"1/3/4", ""}, {" 1/3", ""}, {"", ""},
	} {
		w, err := ParseWorker(tc.in)
		got := ""
		if err == nil {
			got = w.String()
		}
		if got != tc.want {
			t.Errorf("ParseWorker(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzDetectWorker: whatever the flag and the engines' variables say, a
// worker found is in range and its flag form parses back to it.
func FuzzDetectWorker(f *testing.F) {
	f.Add("1/3", 0, "", "", "", "", "")
	f.Add("", 4, "3", "", "", "", "")
	f.Add("", 0, "", "5", "", "4", "7")
	f.Add("", 0, "", "2", "3", "", "")
	f.Fuzz(func(t *testing.T, flag string, workers int, jobIndex, taskID, taskCount, taskMin, taskMax string) {
		env := map[string]string{"JOB_COMPLETION_INDEX": jobIndex, "SLURM_ARRAY_TASK_ID": taskID,
			"SLURM_ARRAY_TASK_COUNT": taskCount, "SLURM_ARRAY_TASK_MIN": taskMin, "SLURM_ARRAY_TASK_MAX": taskMax}
		w, err := DetectWorker(flag, workers, func(k string) string { return env[k] })
		if err != nil || w == nil {
			return
		}
		if w.Count < 1 || w.Index < 0 || w.Index >= w.Count {
			t.Fatalf("worker %d of %d", w.Index, w.Count)
		}
		back, err := ParseWorker(strconv.Itoa(w.Index) + "/" + strconv.Itoa(w.Count))
		if err != nil || *back != *w {
			t.Fatalf("%v does not parse back: %v %v", w, back, err)
		}
	})
}

// FuzzParseWorkerLock: a lock file name reads back as the worker it was
// written for, and no name makes the reader fail but by saying so.
func FuzzParseWorkerLock(f *testing.F) {
	f.Add("lock-worker-1-of-4", 3, 8)
	f.Add("lock-worker--of-", 0, 1)
	f.Add("lock-worker-1-of-4-of-5", 12, 16)
	f.Fuzz(func(t *testing.T, name string, i, n int) {
		parseWorkerLock(name)
		if i < 0 || n < 0 {
			return
		}
		if gi, gn, ok := parseWorkerLock(workerLockName(i, n)); !ok || gi != i || gn != n {
			t.Fatalf("parseWorkerLock(workerLockName(%d, %d)) = %d, %d, %t", i, n, gi, gn, ok)
		}
	})
}
