#!/usr/bin/env bash
# The deterministic chain (ingest → decision_tokens → export, and the fuller
# chain with meta_tool and negatives) on generated 100 MB dumps of each raw
# format, side by side with testdata/bench/convert.py; see main.go.
set -euo pipefail
cd "$(dirname "$0")/../.."
go run ./testdata/bench -augment bin/augment -shared "${AUGMENT_SHARED_DATA:-../shared/data}" "$@"
