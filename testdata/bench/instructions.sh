#!/usr/bin/env bash
# Instruction count of one whole run, steadier than timings on a shared
# host: runs an augment binary under valgrind's cachegrind on a pipeline in a
# dump folder (for example a harness dump, WORK/xlam with short.yaml or
# full.yaml, made by `go run ./testdata/bench -work WORK`) and prints the
# instructions executed. GC is off and one P runs, so the count leaves out GC
# work and scheduling; valgrind has no SHA-NI, so SHA-256 counts several
# times its native cost. Extra arguments go to `augment run`, e.g.
#   testdata/bench/instructions.sh bin/augment WORK/xlam full.yaml -set stages.0.keep=false
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BINARY DUMP_DIR PIPELINE [run flags…]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
bin=$(realpath "$1") dir=$(realpath "$2") yaml=$3
shift 3
. "$(dirname "$0")/workdir.sh"
workdir "$dir" "$yaml"
GOGC=off GOMEMLIMIT=3GiB GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
	"$bin" run -quiet "$@" "$yaml" 2>&1 >/dev/null | awk '/I *refs/ {print $NF}'
