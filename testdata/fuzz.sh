#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 10s).
# Targets are discovered with `go test -list '^Fuzz'` in every package, so a
# new target runs without being listed here. Every target runs even when an
# earlier one fails; the failures are listed at the end, each with the new
# failing input the fuzzer wrote (printed, so that a CI log is enough to make
# it a seed). Exit status: 0 all passed; 1 a target failed (a new input found
# by chance, a seed failing, or the engine failing twice without an input); 2
# the targets could not be found (listing or building failed, or none
# found), which does not depend on chance.
# Usage: testdata/fuzz.sh [duration]
set -uo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
failed=()
unlisted=0
n=0
# New failing inputs are the corpus files written after this stamp.
stamp=$(mktemp) || exit 2
trap 'rm -f "$stamp"' EXIT
pkgs=$(go list ./...) || exit 2
for pkg in $pkgs; do
	# The test binary lists its targets; packages without tests list none.
	if ! out=$(go test "$pkg" -run '^$' -list '^Fuzz' 2>&1); then
		echo "$out" >&2
		failed+=("$pkg (listing the targets failed)")
		unlisted=1
		continue
	fi
	targets=$(grep '^Fuzz' <<<"$out") || true
	for f in $targets; do
		n=$((n + 1))
		echo "== $pkg $f ($t)"
		# The engine can fail without an input to blame, e.g. "context
		# deadline exceeded" as -fuzztime ends: a race in Go's fuzzing
		# coordinator (golang/go#75804, fixed in Go 1.27), no defect of
		# the code under test. Such a run is repeated once; a failure
		# with an input is not.
		for try in 1 2; do
			if go test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$t"; then
				break
			fi
			inputs=$(find . -path '*/testdata/fuzz/*' -type f -newer "$stamp" -print)
			touch "$stamp"
			for in in $inputs; do
				echo "fuzz: new failing input $in:"
				cat "$in"
			done
			if [ -n "$inputs" ] || [ "$try" -eq 2 ]; then
				[ -z "$inputs" ] && echo "fuzz: $pkg $f failed twice without a failing input (the fuzzing engine's own error, above)"
				failed+=("$pkg $f")
				break
			fi
			echo "fuzz: $pkg $f failed without a failing input (the fuzzing engine's own error, above); once more"
		done
	done
done
if [ "$n" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 2
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz: ${#failed[@]} of $n targets failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	[ "$unlisted" -eq 1 ] && exit 2
	exit 1
fi
echo "fuzz: all $n targets passed"
