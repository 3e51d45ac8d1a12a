#!/usr/bin/env bash
# Binary A/B: runs two augment binaries on a pipeline in a dump folder (for
# example a harness dump, WORK/xlam with short.yaml, made by
# `go run ./testdata/bench -work WORK`), alternating A and B for ROUNDS
# rounds, and prints each run's wall and user+sys CPU seconds and peak RSS
# (MiB), then each binary's medians. Extra arguments go to `augment run`:
#   testdata/bench/abtime.sh OLD_BINARY bin/augment WORK/xlam short.yaml 5 -set stages.0.keep=false
# ABTIME_B_FLAGS adds run flags to B's runs only, to time one binary
# against itself with a setting changed:
#   ABTIME_B_FLAGS='-set ingest.keep=false' testdata/bench/abtime.sh bin/augment bin/augment WORK/glaive short.yaml 7 -set stages.0.keep=false
# Timings on a shared host swing; compare medians of alternated runs only.
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: $0 BINARY_A BINARY_B DUMP_DIR PIPELINE ROUNDS [run flags…]" >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2") dir=$(realpath "$3") yaml=$4 rounds=$5
shift 5
. "$(dirname "$0")/workdir.sh"
workdir "$dir" "$yaml"
for _ in $(seq "$rounds"); do
	for side in A B; do
		bin=$a
		extra=()
		if [ "$side" = B ]; then
			bin=$b
			read -ra extra <<<"${ABTIME_B_FLAGS:-}"
		fi
		rm -rf out
		/usr/bin/time -f "$side %e %U %S %M" -a -o times "$bin" run -quiet "$@" "${extra[@]}" "$yaml" >/dev/null
	done
done
awk '{printf "%s wall %.2f s  cpu %.2f s  peak RSS %d MiB\n", $1, $2, $3 + $4, $5 / 1024}' times
for side in A B; do
	awk -v s="$side" '$1 == s {print $2, $3 + $4, $5 / 1024}' times | awk -v s="$side" '
		{w[NR] = $1; c[NR] = $2; r[NR] = $3}
		function med(x,   n, i, j, t) { n = NR; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }; return x[int((n + 1) / 2)] }
		END {printf "%s median: wall %.2f s, cpu %.2f s, peak RSS %d MiB\n", s, med(w), med(c), med(r)}'
done
