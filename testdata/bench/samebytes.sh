#!/usr/bin/env bash
# Same bytes: runs the demo pipeline and every recipe's header command (the
# offline teacher, on the bundled demo dumps) with two builds of augment and
# compares everything they wrote. Manifests are compared without their
# times (started, finished, seconds); the lock, report.html (times) and
# config.yaml (it names the output dir) are left out. Parquet files hold the
# build's version string: build both with the same one, e.g.
#   go build -ldflags "-X main.version=same" -o /tmp/old ./cmd/augment   (at the old commit)
#   go build -ldflags "-X main.version=same" -o /tmp/new ./cmd/augment
#   testdata/bench/samebytes.sh /tmp/old /tmp/new
# Exit 0 when every compared file is identical; else the differing files
# are listed and it exits 1.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run BINARY OUTROOT: the demo, then each recipe's header command, each
# into its own dir below OUTROOT.
run() {
	"$1" run -quiet -set "output.dir=$2/demo" testdata/demo/pipeline.yaml >/dev/null
	for recipe in testdata/recipes/*.yaml; do
		# The header's command: "#   augment run …" and its continued lines.
		cmd=$(sed -n '/^#   augment run/,/[^\\]$/p' "$recipe" | sed -e 's/^#//' -e 's/\\$//' | tr '\n' ' ')
		read -ra args <<<"${cmd#*augment run}"
		last=${args[${#args[@]}-1]}
		unset 'args[${#args[@]}-1]'
		"$1" run -quiet "${args[@]}" -set "output.dir=$2/$(basename "$recipe" .yaml)" "$last" >/dev/null
	done
}
run "$old" "$work/old"
run "$new" "$work/new"

for side in old new; do
	find "$work/$side" -name manifest.json -exec sed -E -i '/"(started|finished|seconds)":/d' {} +
done
if diff -r -q -x lock -x report.html -x config.yaml "$work/old" "$work/new"; then
	echo "same bytes: the demo and $(ls testdata/recipes/*.yaml | wc -l) recipes, $(find "$work/new" -type f | wc -l) files"
else
	exit 1
fi
