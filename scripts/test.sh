#!/usr/bin/env bash
# Runs the test suite: installs what it needs, builds fcb and its tests,
# prepares test data (exported models, inputs, ONNX Runtime references) and
# runs ctest. Extra arguments go to ctest (e.g. -R format).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/setup.sh"
"$repo/scripts/build.sh" "$repo/build"
"$repo/scripts/prepare_testdata.sh" "$repo/build/testdata"
cd "$repo/build"
ctest --output-on-failure "$@"
