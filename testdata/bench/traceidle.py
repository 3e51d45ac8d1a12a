#!/usr/bin/env python3
"""Where the cores of a run sit idle, from a Go execution trace.

    augment run -trace run.trace pipeline.yaml
    go tool trace -d=parsed run.trace | python3 testdata/bench/traceidle.py [-p 2] [-bucket 200]

For each time bucket it prints how many goroutines were ready to use a core
(running or runnable, at most -p): the run's own parallelism, which does not
depend on how busy the rest of the machine is (a shared machine stretches wall
time, not the program's structure). The last line sums the core-seconds no
goroutine was ready for: what overlapping the run's phases can still win. A
bucket well under -p is a barrier or a single-threaded tail; `go tool trace`
shows which goroutines ran there.
"""
import argparse
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("-p", type=int, default=2, help="cores (GOMAXPROCS)")
ap.add_argument("-bucket", type=float, default=200, help="bucket width in ms")
args = ap.parse_args()

transition = re.compile(r"^M=\S+ P=\S+ G=\S+ StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)")
ready = set()
t0 = last = None
buckets = {}
total = 0.0
width = args.bucket * 1e6
for line in sys.stdin:
    m = transition.match(line)
    if not m:
        continue
    t, g, new = int(m.group(1)), m.group(2), m.group(4)
    if t0 is None:
        t0 = last = t
    if t > last:
        busy = min(args.p, len(ready))
        s = last
        while s < t:
            k = int((s - t0) // width)
            e = min(t, t0 + (k + 1) * width)
            buckets[k] = buckets.get(k, 0) + busy * (e - s)
            s = e
        total += busy * (t - last)
        last = t
    if new in ("Running", "Runnable"):
        ready.add(g)
    else:
        ready.discard(g)
if t0 is None:
    sys.exit("no goroutine transitions: is this `go tool trace -d=parsed` output?")
for k in sorted(buckets):
    n = buckets[k] / width
    print("%8.0f ms %4.2f %s" % (k * args.bucket, n, "#" * int(n * 20)))
wall = (last - t0) / 1e9
print("wall %.3f s, ready %.3f core-s, %.2f of %d cores on average, idle %.3f core-s"
      % (wall, total / 1e9, total / 1e9 / wall, args.p, args.p * wall - total / 1e9))
