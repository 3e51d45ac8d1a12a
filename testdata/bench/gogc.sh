#!/usr/bin/env bash
# GOGC A/B: runs one augment binary on a pipeline in a dump folder (for
# example a harness dump, WORK/xlam with short.yaml or full.yaml, made by
# `go run ./testdata/bench -work WORK`), alternating GOGC=A and GOGC=B,
# and prints each setting's user+sys CPU seconds and peak RSS (MiB) per
# round, then their medians. Extra arguments go to `augment run`, e.g.
#   testdata/bench/gogc.sh bin/augment WORK/xlam short.yaml 5 100 200 -set stages.0.keep=false
set -euo pipefail
[ $# -ge 6 ] || { echo "usage: $0 BINARY DUMP_DIR PIPELINE ROUNDS GOGC_A GOGC_B [run flags…]" >&2; exit 2; }
bin=$(realpath "$1") dir=$(realpath "$2") yaml=$3 rounds=$4 a=$5 b=$6
shift 6
. "$(dirname "$0")/workdir.sh"
workdir "$dir" "$yaml"
for _ in $(seq "$rounds"); do
	for g in "$a" "$b"; do
		rm -rf out
		GOGC=$g /usr/bin/time -f "$g %U %S %M" -a -o times "$bin" run -quiet "$@" "$yaml" >/dev/null
	done
done
awk '{cpu[$1] = cpu[$1] " " $2 + $3; rss[$1] = rss[$1] " " int($4 / 1024)} END {for (g in cpu) print "GOGC=" g, "cpu s:" cpu[g], " peak RSS MiB:" rss[g]}' times
for g in "$a" "$b"; do
	awk -v g="$g" '$1 == g {print $2 + $3}' times | sort -n | awk -v g="$g" '{c[NR] = $1} END {m = int((NR + 1) / 2); printf "GOGC=%s median cpu %.2f s\n", g, c[m]}'
done
