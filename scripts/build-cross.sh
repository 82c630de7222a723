#!/usr/bin/env bash
# Cross-builds the fcb runtime for another CPU family:
#   scripts/build-cross.sh aarch64 DIR [extra cmake args...]
# produces DIR/fcb (the CLI: run, bench, inspect, targets), DIR/libfcb.so and,
# unless -DFCB_BUILD_TESTS=OFF is given, the kernel and operator unit tests.
# The runtime needs no ONNX importer (compile on x86-64, run here); it runs
# under user-mode emulation on this machine:
#   qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu cortex-a76 DIR/fcb run model.fcb
# and `ctest --test-dir DIR` runs the unit tests under qemu (-cpu max; set
# -DFCB_QEMU_CPU=MODEL for another). scripts/setup.sh installs the cross
# compiler and qemu-user. FCB_BUILD_TARGETS="t1 t2" builds only those CMake
# targets (CI: what scripts/check-arm.sh runs).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
arch="${1:-}"
dir="${2:-}"
if [ "$arch" != "aarch64" ] || [ -z "$dir" ]; then
  echo "usage: scripts/build-cross.sh aarch64 DIR [cmake args...]   (aarch64 is the one cross target)" >&2
  exit 2
fi
shift 2
"$repo/scripts/setup.sh"
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: $tool not found (scripts/setup.sh installs g++-aarch64-linux-gnu and qemu-user)" >&2
    exit 1
  fi
done
jobs="${FCB_JOBS:-$(nproc)}"
# shellcheck source=scripts/ccache.sh
. "$repo/scripts/ccache.sh"
cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$repo/cmake/aarch64-linux-gnu.cmake" -DFCB_RUNTIME_ONLY=ON "${fcb_ccache_args[@]}" "$@" >/dev/null
targets=()
for t in ${FCB_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j"$jobs" "${targets[@]}"
echo "built $dir/fcb for aarch64 ($(file -b "$dir/fcb" 2>/dev/null | cut -d, -f1-2))"
