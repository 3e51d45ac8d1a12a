#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 10s).
# Usage: testdata/fuzz.sh [duration]
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r pkg; do
	for f in $(grep -h '^func Fuzz' "$pkg"/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do
		echo "== $pkg $f ($t)"
		go test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$t"
	done
done
