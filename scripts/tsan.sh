#!/usr/bin/env bash
# Builds fcb with ThreadSanitizer (-DFCB_TSAN=ON) into BUILD_DIR (default
# build-tsan) and runs the concurrency test: several methods of one program on
# several threads at once, each against outputs computed alone. Any data race
# report fails the run (halt_on_error), as does any wrong output.
#
#   scripts/tsan.sh [BUILD_DIR]
#
# Needs the test data (scripts/prepare_testdata.sh; FCB_TESTDATA_DIR, default
# build/testdata). Exit status 0 when the test passes with no race reported.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/build-tsan}"
jobs="${FCB_JOBS:-2}"
export FCB_TESTDATA_DIR="${FCB_TESTDATA_DIR:-$repo/build/testdata}"

cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFCB_TSAN=ON >/dev/null
cmake --build "$dir" -j"$jobs" --target concurrency_test fcb_cli >/dev/null
# Highway probes the CPU once, lazily; its one-time init is benign but runs
# under the first kernels' threads, so the program is loaded (and the probe
# done) before threads start — see tests/concurrency_test.cc.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$dir/tests/concurrency_test"
echo "tsan: concurrency_test passed with no data race reported"
