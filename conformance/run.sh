#!/usr/bin/env bash
# Runs the ONNX backend node tests through fcb on every target:
#   conformance/run.sh [BUILD_DIR] [fcb-conformance flags...]
# Generates the tests if needed (conformance/generate.sh), prints the
# per-operator table, the pass rate per target and every failure, writes
# BUILD_DIR/conformance.json, and fails below a 95% pass rate.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
shift || true
"$repo/conformance/generate.sh" "$repo/build/conformance-data"
exec "$build/conformance/fcb-conformance" "$repo/build/conformance-data/node" \
  --json "$build/conformance.json" --min-pass-rate 0.95 --failures "$@"
