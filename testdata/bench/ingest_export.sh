#!/usr/bin/env bash
# ingest→export throughput and peak RSS on a generated ~200k-record dump.
set -euo pipefail
cd "$(dirname "$0")/../.."
go run ./testdata/bench -augment bin/augment -shared "${AUGMENT_SHARED_DATA:-../shared/data}" "$@"
