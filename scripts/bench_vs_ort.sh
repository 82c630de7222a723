#!/usr/bin/env bash
# fcb vs ONNX Runtime (npm onnxruntime-node), side by side in one run:
# per-model latency ratio and geometric mean at each thread count (runs
# interleaved, best of several rounds), cold start of resnet18 (process start
# to first output, against node + ORT session creation + first run) and peak
# RSS of both processes.
#
#   scripts/bench_vs_ort.sh [--fcb build/fcb] [--data build/testdata]
#       [--set default|wide|all] [--models resnet18,resnet50,...] [--wide-data build/benchdata]
#       [--threads 1,2] [--rounds 5] [--iterations 10] [--target auto|x86-64-v4|...]
#       [--cold-model resnet18] [--json OUT.json]
#
# --set default (the five CNNs: resnet18, resnet50, mobilenet_v2, squeezenet1_1,
# efficientnet_b0), wide (the eleven models of scripts/export_bench_models.py:
# attention, grouped/transposed/1-D convolution, Resize, GroupNorm; exported
# into --wide-data on first use) or all; --models overrides with test-data models.
# A model fcb cannot compile is listed as such and the others still run.
# Needs: a built fcb (scripts/build.sh), test models (scripts/prepare_testdata.sh
# build/testdata --with-resnet50), node + onnxruntime-node in tools/oracle
# (scripts/setup.sh) and Debian's /usr/bin/python3 with python3-onnx.
# The machine should be quiet; on a shared machine trust the ratios, not the
# absolute times.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec /usr/bin/python3 "$repo/scripts/bench_vs_ort.py" "$@"
