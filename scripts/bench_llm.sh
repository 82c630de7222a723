#!/usr/bin/env bash
# fcb vs ONNX Runtime on a small language model at the memory-bandwidth
# roofline (issue 35): prefill tok/s of a 128-token prompt, decode tok/s over
# 64 new tokens, at 1 and 2 threads, on the same .onnx (form a: ONNX Runtime
# GenAI's int4 form, made by scripts/export_llm_models.py), each decode rate
# also as effective GB/s and as a fraction of the read bandwidth that
# bench/bandwidth measures in the same run. A benchmark, never run by CI.
#
#   scripts/bench_llm.sh [--shape smollm2-135m|qwen2.5-0.5b|tiny] [--threads "1 2"]
#       [--prompt 128] [--new 64] [--repeat 3] [--layers N] [--dir DIR]
#       [--fcb build/fcb] [--bandwidth build/bench/bandwidth] [--target T]
#       [--mode auto|generate|fallback] [--ort-spin both|on|off] [--compile-arg=ARG]...
#
# Bytes read per decode token (scripts/llm_bytes_per_token.py):
#   bytes/token = W + R + KV_row * (T + N/2)
#   W       every initializer read in full once (MatMulNBits weights + scales +
#           zero points, the LM head, norm weights);
#   R       one row of each table indexed by token or position (the embedding,
#           GroupQueryAttention's cos/sin caches);
#   KV_row  all layers' K and V bytes per position;
#   T + N/2 the mean positions a decode step reads (T-token prompt, N new tokens).
# Roofline: decode tok/s <= bandwidth / bytes per token; the table gives
# (bytes/token x tok/s) / bandwidth for a DRAM-sized buffer and for a buffer
# of the model's weight bytes (what a decode step rereads, caches included).
#
# fcb runs `fcb generate` when the build has it; otherwise a clearly marked
# fallback: `fcb profile` medians of a prefill method (T tokens) and a decode
# method at the mean decode step's past (T + N/2 - 1), the past an input set
# before the timed runs, the whole present written by each run (no state).
# Models and compiled files are cached in $FCB_LLM_DIR (default
# build/llm-bench). Needs: build/fcb and build/bench/bandwidth (cmake --build
# build --target fcb_cli fcb_onnx bandwidth), node with onnxruntime-node
# (tools/oracle, scripts/setup.sh; or NODE_PATH), Debian's /usr/bin/python3
# with numpy + onnx. scripts/bench_llm.py's header says more. On a shared
# machine trust the ratios (same run, same thread count) more than the
# absolute numbers.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec /usr/bin/python3 "$repo/scripts/bench_llm.py" "$@"
