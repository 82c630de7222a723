#!/usr/bin/env bash
# Builds fcb with ThreadSanitizer (-DFCB_TSAN=ON) into BUILD_DIR (default
# build-tsan) and runs the thread pool's unit test (chunks claimed and handed
# over between threads) and the concurrency test: several methods of one
# program on several threads at once, each against outputs computed alone. Any data race
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

log="$dir/tsan-build.log"
mkdir -p "$dir"
if ! { cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFCB_TSAN=ON &&
       cmake --build "$dir" -j"$jobs" --target thread_pool_test concurrency_test fcb_cli; } >"$log" 2>&1; then
  grep -E "error" "$log" | head -30 >&2 || true
  echo "error: the ThreadSanitizer build failed (log: $log)" >&2
  exit 1
fi
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$dir/tests/thread_pool_test"
"$dir/tests/concurrency_test"
echo "tsan: thread_pool_test and concurrency_test passed with no data race reported"
