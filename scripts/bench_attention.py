#!/usr/bin/python3
"""Decode-step attention, fcb against ONNX Runtime (npm onnxruntime-node) on
the same one-node model: com.microsoft GroupQueryAttention with SmolLM2-135M's
attention shape (9 query heads, 3 KV heads, head size 64, rotary), one new
token against a static KV buffer of total length L (past_key/past_value
[1, 3, L, 64], seqlens_k = L - 1, total_sequence_length = L, both constants).

  scripts/bench_attention.py [--fcb build/fcb] [--lengths 128,512,1024]
      [--threads 1,2] [--iterations 200] [--rounds 3] [--target auto]

Prints, per length and thread count, the best median of the rounds in
microseconds for fcb (`fcb bench`) and ONNX Runtime (tools/oracle/ort_bench.js),
runs interleaved. A benchmark, never a test: the numbers depend on the
machine and its load.
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADS, KV_HEADS, HEAD = 9, 3, 64


def model(path, length):
    rng = np.random.default_rng(length)
    half = HEAD // 2
    inv = 1.0 / 10000.0 ** (np.arange(half) / half)
    ang = np.arange(length)[:, None] * inv[None, :]
    inits = [
        numpy_helper.from_array(np.array([length - 1], dtype=np.int32), "seqlens_k"),
        numpy_helper.from_array(np.array(length, dtype=np.int32), "total_sequence_length"),
        numpy_helper.from_array(np.cos(ang).astype(np.float32), "cos_cache"),
        numpy_helper.from_array(np.sin(ang).astype(np.float32), "sin_cache"),
    ]
    f = TensorProto.FLOAT
    ins = [helper.make_tensor_value_info("query", f, [1, 1, HEADS * HEAD]),
           helper.make_tensor_value_info("key", f, [1, 1, KV_HEADS * HEAD]),
           helper.make_tensor_value_info("value", f, [1, 1, KV_HEADS * HEAD]),
           helper.make_tensor_value_info("past_key", f, [1, KV_HEADS, length, HEAD]),
           helper.make_tensor_value_info("past_value", f, [1, KV_HEADS, length, HEAD])]
    node = helper.make_node("GroupQueryAttention",
                            ["query", "key", "value", "past_key", "past_value", "seqlens_k",
                             "total_sequence_length", "cos_cache", "sin_cache"],
                            ["output", "present_key", "present_value"], domain="com.microsoft",
                            num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=1)
    outs = [helper.make_tensor_value_info(n, f, None) for n in ("output", "present_key", "present_value")]
    g = helper.make_graph([node], "gqa_decode", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    del rng


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fcb", default=os.path.join(REPO, "build", "fcb"))
    ap.add_argument("--lengths", default="128,512,1024")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", default="auto")
    a = ap.parse_args()
    oracle = os.path.join(REPO, "tools", "oracle")
    env = dict(os.environ, NODE_PATH=os.path.join(oracle, "node_modules"))
    print(f"{'L':>6} {'threads':>7} {'fcb us':>9} {'ORT us':>9} {'ORT/fcb':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for length in (int(x) for x in a.lengths.split(",")):
            onnx_path = os.path.join(tmp, f"gqa_{length}.onnx")
            fcb_path = os.path.join(tmp, f"gqa_{length}.fcb")
            model(onnx_path, length)
            subprocess.run([a.fcb, "compile", onnx_path, "-o", fcb_path], check=True, capture_output=True)
            force = [] if a.target == "auto" else ["--target", a.target]
            for threads in (int(x) for x in a.threads.split(",")):
                best_f = best_o = float("inf")
                for _ in range(a.rounds):
                    f = run_json([a.fcb, "bench", fcb_path, "--threads", str(threads), "--iterations",
                                  str(a.iterations), "--json"] + force)
                    o = run_json(["node", os.path.join(oracle, "ort_bench.js"), onnx_path, "--threads", str(threads),
                                  "--iterations", str(a.iterations)], env)
                    best_f = min(best_f, f["median_ms"])
                    best_o = min(best_o, o["median_ms"])
                print(f"{length:>6} {threads:>7} {best_f * 1e3:>9.1f} {best_o * 1e3:>9.1f} {best_o / best_f:>8.2f}")


if __name__ == "__main__":
    main()
