# Sourced by the bench scripts: workdir DUMP_DIR PIPELINE makes a temporary
# folder holding links to the dump folder's dumps and a copy of the
# pipeline, removed when the script exits, and changes into it (runs write
# their output dir there, never into the dump folder).
workdir() {
	local dir
	dir=$(realpath "$1")
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	for f in "$dir"/*; do
		case $f in *.json | *.jsonl) ln -s "$f" "$work/" ;; esac
	done
	cp "$dir/$2" "$work/"
	cd "$work"
}
