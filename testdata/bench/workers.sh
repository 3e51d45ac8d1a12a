#!/usr/bin/env bash
# Workers: 3 local worker processes (+ merge) against 1 process, on an
# input 3× larger than a 1-process baseline, with the teacher as the
# bottleneck: augment fake-llm answers each request after LATENCY, and each
# process has max_in_flight IN_FLIGHT (a worker adds its own capacity, as a
# pod with its own endpoint quota would). Prints wall seconds per run.
# OFFLINE=1 uses the offline teacher instead: the chain is CPU-bound, and
# 3 workers on one machine share its cores.
#   testdata/bench/workers.sh            # needs bin/augment (make build) and ../shared/data
set -euo pipefail
cd "$(dirname "$0")/../.."
AUGMENT=$PWD/bin/augment
DUMP=$(realpath "${AUGMENT_SHARED_DATA:-../shared/data}/derived/toolace_format_glaive_toolcall_en_demo.json")
LATENCY=${LATENCY:-100ms}
IN_FLIGHT=${IN_FLIGHT:-8}
work=$(mktemp -d)
trap 'kill $fake 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/fake.json" <<'JSON'
{"model": "fake-teacher", "script": [{"regexp": "Its last turn is the assistant calling (.+):", "answer": "To answer, I will call $1 because it fits the request and I have what it needs."}]}
JSON
"$AUGMENT" fake-llm -addr 127.0.0.1:0 -config "$work/fake.json" -latency "$LATENCY" >"$work/fake.out" 2>&1 &
fake=$!
until grep -q 'listening on' "$work/fake.out" 2>/dev/null; do sleep 0.05; done
url=$(sed -n 's|.*listening on \(http://[^ ]*\) .*|\1|p' "$work/fake.out")

# Copies of the dump whose first turns differ, so that no copy's requests
# are answered by another's (from the cache or a request in flight).
for i in 0 1 2; do jq --arg c " (copy $i)" 'map(.conversations[0].value += $c)' "$DUMP" >"$work/copy$i.json"; done

# pipeline DIR COPIES: copies 0…COPIES-1 of the dump as sources s0, s1, …
pipeline() {
  mkdir -p "$1"
  {
    echo "output: {dir: out, shard_size: 25, jsonl: true}"
    echo "sources:"
    for ((i = 0; i < $2; i++)); do echo "  - {name: s$i, path: $work/copy$i.json, format: toolace}"; done
    if [[ -n "${OFFLINE:-}" ]]; then
      echo "teacher: {provider: offline}"
    else
      echo "teacher: {provider: openai, model: fake-teacher, endpoints: [{base_url: \"$url\", max_in_flight: $IN_FLIGHT}]}"
    fi
    echo "stages:"
    echo "  - reason: {style: meta_tool}"
    echo "  - verify: {checks: [roles, calls_resolved]}"
    echo "  - export: {dataset: bench, allow_offline: true}"
  } >"$1/pipeline.yaml"
}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

pipeline "$work/one-1x" 1
pipeline "$work/one-3x" 3
pipeline "$work/three-3x" 3
t0=$(now); (cd "$work/one-1x" && "$AUGMENT" run -quiet pipeline.yaml >/dev/null); t1=$(now)
(cd "$work/one-3x" && "$AUGMENT" run -quiet pipeline.yaml >/dev/null); t2=$(now)
(
  cd "$work/three-3x"
  for i in 0 1 2; do "$AUGMENT" run -quiet --worker "$i/3" pipeline.yaml >"w$i.txt" 2>&1 & done
  wait
  "$AUGMENT" merge -quiet pipeline.yaml >/dev/null
)
t3=$(now)
records=$(jq '.totals.out' "$work/one-1x/out/00-ingest/manifest.json")
if [[ -n "${OFFLINE:-}" ]]; then
  echo "offline teacher (CPU-bound), $(nproc) CPUs, $records records per copy of the dump"
else
  echo "teacher latency $LATENCY, max_in_flight $IN_FLIGHT per process, $records records per copy of the dump"
fi
echo "1 process,  1x input: $(secs "$t0" "$t1") s"
echo "1 process,  3x input: $(secs "$t1" "$t2") s"
echo "3 workers,  3x input: $(secs "$t2" "$t3") s (workers and merge)"
# The dataset card's last section is the teacher traffic, which depends on
# how the run got there (cache hits); the rest must be the same.
for d in one-3x three-3x; do sed -i '/^### Traffic and cost/,$d' "$work/$d/out/03-export/README.md"; done
if diff -r -x manifest.json -x report.html -x .augment -x cache -q "$work/one-3x/out" "$work/three-3x/out"; then
  echo "outputs of 1 process and 3 workers: identical (manifests, report.html, caches and the card's traffic aside)"
else
  echo "outputs differ" >&2
  exit 1
fi
