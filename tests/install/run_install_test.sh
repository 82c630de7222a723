#!/usr/bin/env bash
# Installs fcb from BUILD_DIR into a temporary prefix, builds the consumer
# project against it with find_package(fcb), and runs it; builds the C
# example (examples/c/) with `pkg-config --cflags --libs fcb` against it and
# checks its output against the installed CLI's.
set -euo pipefail
build="$1"; src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/fcb"
test -f "$tmp/prefix/include/fcb/fcb.h"
test -f "$tmp/prefix/lib/cmake/fcb/fcbConfig.cmake"
test -f "$tmp/prefix/lib/libfcb_onnx.so"
test -f "$tmp/prefix/include/fcb/fcb_c.h"
test -f "$tmp/prefix/lib/pkgconfig/fcb.pc"
# Running a program must not load the importer's libraries (cold start).
if ldd "$tmp/prefix/bin/fcb" | grep -E "libonnx|libprotobuf"; then
  echo "the installed fcb links libonnx/libprotobuf directly" >&2; exit 1
fi
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer" "$src/models/demo_cnn.onnx" "$tmp/demo.fcb"
"$tmp/prefix/bin/fcb" inspect "$tmp/demo.fcb" >/dev/null
# The installed CLI finds the installed importer plugin beside libfcb.so.
"$tmp/prefix/bin/fcb" compile "$src/models/demo_cnn.onnx" -o "$tmp/cli.fcb" --input-shape input=1x3x64x64 >/dev/null
"$tmp/prefix/bin/fcb" run "$tmp/cli.fcb" --output-dir "$tmp/out" >/dev/null 2>&1
test -f "$tmp/out/"*.npy
# A C program built with pkg-config alone (the .pc file is relocatable: the
# temporary prefix is not the configured one).
flags="$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs fcb)"
case "$flags" in *"$tmp/prefix"*) ;; *) echo "pkg-config flags do not name the install: $flags" >&2; exit 1 ;; esac
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/examples/c/run_model.c" $flags -o "$tmp/c_example"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$src/tests/c_example_vs_cli.sh" "$tmp/c_example" "$tmp/prefix/bin/fcb" \
  "$src/models/demo_cnn.onnx" >/dev/null
# Without the plugin, compiling fails with an error that names it; running
# compiled programs still works.
rm "$tmp/prefix/lib/libfcb_onnx.so"
if "$tmp/prefix/bin/fcb" compile "$src/models/demo_cnn.onnx" -o "$tmp/x.fcb" \
    --input-shape input=1x3x64x64 2>"$tmp/err"; then
  echo "compile succeeded without the importer plugin" >&2; exit 1
fi
grep -q "error: .*ONNX importer plugin '.*libfcb_onnx.so' could not be loaded" "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
test ! -e "$tmp/x.fcb"
"$tmp/prefix/bin/fcb" run "$tmp/cli.fcb" --output-dir "$tmp/out2" >/dev/null 2>&1
echo "install test passed"
