#!/usr/bin/env bash
# Configures and builds fcb: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Default BUILD_DIR is build/ (Release). Quiet unless something fails.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/build}"
shift || true
jobs="${FCB_JOBS:-$(nproc)}"
# shellcheck source=scripts/ccache.sh
. "$repo/scripts/ccache.sh"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=Release "${fcb_ccache_args[@]}" "$@" >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: cmake configure failed" >&2
  exit 1
fi
if ! cmake --build "$dir" -j"$jobs" >"$log" 2>&1; then
  grep -E "error|Error" "$log" | head -50 >&2 || cat "$log" >&2
  echo "error: build failed (full log: rerun 'cmake --build $dir')" >&2
  exit 1
fi
