#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 10s).
# Targets are discovered with `go test -list '^Fuzz'` in every package, so a
# new target runs without being listed here. Every target runs even when an
# earlier one fails; the failures are listed at the end and the exit status
# is non-zero when there was any.
# Usage: testdata/fuzz.sh [duration]
set -uo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
failed=()
n=0
pkgs=$(go list ./...) || exit 2
for pkg in $pkgs; do
	# The test binary lists its targets; packages without tests list none.
	if ! out=$(go test "$pkg" -run '^$' -list '^Fuzz' 2>&1); then
		echo "$out" >&2
		failed+=("$pkg (listing the targets failed)")
		continue
	fi
	targets=$(grep '^Fuzz' <<<"$out") || true
	for f in $targets; do
		n=$((n + 1))
		echo "== $pkg $f ($t)"
		if ! go test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$t"; then
			failed+=("$pkg $f")
		fi
	done
done
if [ "$n" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz: ${#failed[@]} of $n targets failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz: all $n targets passed"
