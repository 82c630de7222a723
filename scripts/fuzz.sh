#!/usr/bin/env bash
# Runs every fuzz target (fuzz/) for a while, with AddressSanitizer and
# UndefinedBehaviorSanitizer, from seed corpora made from the test data.
#
#   scripts/fuzz.sh [SECONDS]          each target for SECONDS (default 60)
#   scripts/fuzz.sh --runs N           each target for N executions
#   scripts/fuzz.sh --runs load=N,npy=M,...   per target (targets not named: SECONDS)
#   options: --targets load,onnx,npy,spec   --jobs J (targets run at once, default 1)
#
# Environment: FCB_BUILD (a normal build with test data, default build/),
# FCB_FUZZ_BUILD (the clang fuzzing build, default build-fuzz/; configured and
# built here when missing or stale).
# Findings (crashes, leaks, timeouts) are written to $FCB_FUZZ_BUILD/findings/<target>/;
# minimize one with `fuzz_<target> -minimize_crash=1 FILE` and keep it under
# fuzz/regressions/<target>/, which ctest replays (fuzz_replay_<target>).
# Prints executions per target and in all; exits 1 when anything was found.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
seconds=60 runs="" targets="load,onnx,npy,spec" jobs=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) seconds="$1"; shift ;;
  esac
done
build="${FCB_BUILD:-$repo/build}"
fbuild="${FCB_FUZZ_BUILD:-$repo/build-fuzz}"
command -v clang++-14 >/dev/null || { echo "error: clang++-14 is missing (scripts/setup.sh installs clang-14)" >&2; exit 1; }
if [[ ! -f "$fbuild/CMakeCache.txt" ]]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$fbuild" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFCB_FUZZ=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DFCB_TESTDATA_DIR="$build/testdata" >/dev/null
fi
IFS=, read -r -a names <<< "$targets"
cmake --build "$fbuild" -j"$(nproc)" --target $(printf 'fuzz_%s ' "${names[@]}") >/dev/null
[[ -d "$fbuild/seeds/load" ]] || fuzz/make_corpus.sh "$build" "$fbuild/seeds" >/dev/null

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one() {
  local t=$1
  local work="$fbuild/corpus/$t" found="$fbuild/findings/$t/" log="$fbuild/fuzz_$t.log"
  mkdir -p "$work" "$found"
  local args=(-timeout=25 -rss_limit_mb=2560 -malloc_limit_mb=1024 -print_final_stats=1
              -artifact_prefix="$found" "$work" "$fbuild/seeds/$t")
  [[ $t == spec ]] && args=(-dict="$repo/fuzz/spec.dict" "${args[@]}")
  local n=""
  if [[ "$runs" == *=* ]]; then
    n=$(tr ',' '\n' <<< "$runs" | sed -n "s/^$t=//p")
  else
    n="$runs"
  fi
  if [[ -n "$n" ]]; then args=(-runs="$n" "${args[@]}"); else args=(-max_total_time="$seconds" "${args[@]}"); fi
  "$fbuild/fuzz/fuzz_$t" "${args[@]}" >"$log" 2>&1 || true
}
pids=()
for t in "${names[@]}"; do
  run_one "$t" 2>/dev/null &
  pids+=($!)
  if (( ${#pids[@]} >= jobs )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait

total=0 bad=0
printf '%-6s %12s %8s %10s %8s %9s\n' target executions seconds "exec/s" corpus findings
for t in "${names[@]}"; do
  log="$fbuild/fuzz_$t.log"
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | grep -oE "[0-9]+$" || echo 0)
  secs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE 'in [0-9]+' | grep -oE '[0-9]+' || echo "?")
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | tail -1 | grep -oE "[0-9]+$" || echo 0)
  corpus=$(ls "$fbuild/corpus/$t" | wc -l)
  found=$(ls "$fbuild/findings/$t" | wc -l)
  printf '%-6s %12s %8s %10s %8s %9s\n' "$t" "${execs:-0}" "$secs" "${rate:-0}" "$corpus" "$found"
  total=$((total + ${execs:-0}))
  if (( found > 0 )) || grep -qE '^==[0-9]+==ERROR|runtime error|SUMMARY: (Address|Leak|UndefinedBehavior)|ALARM: working on the last' "$log"; then
    bad=1
    echo "  finding(s) in $fbuild/findings/$t/; log $log:"
    grep -E 'ERROR|runtime error|SUMMARY|ALARM|Test unit written' "$log" | head -8 | sed 's/^/    /'
  fi
done
echo "total executions: $total"
exit $bad
