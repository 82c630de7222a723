#!/usr/bin/env bash
# Installs fcb from BUILD_DIR into a temporary prefix, builds the consumer
# project against it with find_package(fcb), and runs it.
set -euo pipefail
build="$1"; src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/fcb"
test -f "$tmp/prefix/include/fcb/fcb.h"
test -f "$tmp/prefix/lib/cmake/fcb/fcbConfig.cmake"
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer" "$src/models/demo_cnn.onnx" "$tmp/demo.fcb"
"$tmp/prefix/bin/fcb" inspect "$tmp/demo.fcb" >/dev/null
echo "install test passed"
