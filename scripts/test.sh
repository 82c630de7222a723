#!/usr/bin/env bash
# Runs the test suite: installs what it needs, builds fcb and its tests,
# prepares test data (exported models, inputs, ONNX Runtime references; the
# ONNX node tests) and runs ctest, one test per core (FCB_TEST_JOBS=N for
# another count). Extra arguments go to ctest (e.g. -R format).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh" "$repo/build"
"$repo/scripts/prepare_testdata.sh" "$repo/build/testdata"
# The ONNX node tests, for conformance_replay_subset (skipped without them).
"$repo/conformance/generate.sh" "$repo/build/conformance-data"
cd "$repo/build"
ctest --output-on-failure -j"${FCB_TEST_JOBS:-$(nproc)}" "$@"
