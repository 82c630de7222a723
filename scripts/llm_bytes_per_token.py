#!/usr/bin/python3
"""Bytes a decoder-only language model (.onnx, e.g. scripts/export_llm_models.py's)
reads from memory per decode token: the numerator of the bandwidth roofline
that scripts/bench_llm.sh divides a measured read bandwidth by.

  llm_bytes_per_token.py MODEL.onnx [--prompt T] [--new N] [--json]

Formula (one decode step = one token, batch 1):

  bytes/token = W + R + KV_row * L

  W       every initializer a node reads, in full, once (each counted once even
          if several nodes read it): MatMulNBits weights + scales + zero points
          (+ bias), the LM head, norm weights, MatMul weights of a float model,
          small constants. Exceptions, which a step reads one row of:
  R       tables indexed by token or position: the data of a Gather on an
          initializer of rank >= 2 (the embedding; form b's cos/sin tables) and
          GroupQueryAttention's cos_cache / sin_cache: one row each.
  KV_row  the KV cache's bytes per position: the sum over past_key_values.*
          inputs [B, kv_heads, past, head] of kv_heads * head * element size.
  L       the positions attention reads in a step: past + 1. Over a generation
          of N tokens after a T-token prompt the decode steps read T+1 .. T+N-1
          positions, L = T + N / 2 on average (default T 128, N 64: L = 160).

The bytes are those of the .onnx file's tensors as stored (an engine that
repacks weights reads about the same: MatMulNBits' packed 4-bit weights and
float scales), so one number serves fcb and ONNX Runtime alike. Activations,
the cache rows written and the logits (vocab * 4 bytes) are left out: small
next to the weights.
"""
import argparse
import json
import sys

import numpy as np
import onnx


def itemsize(onnx_dtype):
    if hasattr(onnx.helper, "tensor_dtype_to_np_dtype"):
        return onnx.helper.tensor_dtype_to_np_dtype(onnx_dtype).itemsize
    return np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_dtype]).itemsize


def tensor_bytes(t):
    return int(np.prod(t.dims, dtype=np.int64)) * itemsize(t.data_type)


def row_bytes(t):
    return int(np.prod(t.dims[1:], dtype=np.int64)) * itemsize(t.data_type)


def walk(graph):
    """Every node of the graph and its subgraphs."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from walk(g)


def count(model, prompt, new):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    row_tables = set()  # initializers read one row per step
    for n in walk(g):
        if n.op_type == "Gather" and n.input[0] in inits and len(inits[n.input[0]].dims) >= 2:
            row_tables.add(n.input[0])
        if n.op_type == "GroupQueryAttention":
            for i in (7, 8):
                if len(n.input) > i and n.input[i] in inits:
                    row_tables.add(n.input[i])
    parts = {"matmul_nbits": 0, "lm_head": 0, "matmul_float": 0, "norms": 0, "other": 0}
    lm_head_inputs = set()
    for n in walk(g):
        if "logits" in n.output:
            lm_head_inputs = {i for i in n.input if i in inits}
    seen = set()
    for n in walk(g):
        for i in n.input:
            if i not in inits or i in seen or i in row_tables:
                continue
            seen.add(i)
            b = tensor_bytes(inits[i])
            if i in lm_head_inputs:
                parts["lm_head"] += b
            elif n.op_type == "MatMulNBits":
                parts["matmul_nbits"] += b
            elif n.op_type in ("MatMul", "Gemm"):
                parts["matmul_float"] += b
            elif "LayerNormalization" in n.op_type or n.op_type in ("Mul",) and len(inits[i].dims) == 1 \
                    and inits[i].dims[0] > 1:
                parts["norms"] += b
            else:
                parts["other"] += b
    rows = sum(row_bytes(inits[t]) for t in row_tables)
    kv_row = 0
    for vi in g.input:
        if vi.name.startswith("past_key_values.") or vi.name.startswith("past_"):
            dims = vi.type.tensor_type.shape.dim
            if len(dims) != 4 or not dims[1].HasField("dim_value") or not dims[3].HasField("dim_value"):
                sys.exit(f"llm_bytes_per_token: {vi.name}: needs a shape [batch, kv_heads, past, head] "
                         "with numeric kv_heads and head")
            size = itemsize(vi.type.tensor_type.elem_type)
            kv_row += dims[1].dim_value * dims[3].dim_value * size
    length = prompt + new / 2.0
    weights = sum(parts.values())
    total = weights + rows + kv_row * length
    return {"weights_bytes": weights, **{f"{k}_bytes": v for k, v in parts.items()},
            "table_rows_bytes": rows, "row_tables": sorted(row_tables), "kv_bytes_per_position": kv_row,
            "mean_positions": length, "kv_bytes": kv_row * length, "bytes_per_token": total}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = count(onnx.load(a.model), a.prompt, a.new)
    if a.json:
        print(json.dumps(r))
        return
    mb = lambda v: f"{v / 1e6:.2f} MB"  # noqa: E731
    print(f"{a.model}: {mb(r['bytes_per_token'])} read per decode token "
          f"(prompt {a.prompt}, {a.new} new tokens: mean {r['mean_positions']:g} positions)")
    print(f"  weights {mb(r['weights_bytes'])}: MatMulNBits {mb(r['matmul_nbits_bytes'])}, LM head "
          f"{mb(r['lm_head_bytes'])}, float MatMul {mb(r['matmul_float_bytes'])}, norms {mb(r['norms_bytes'])}, "
          f"other {mb(r['other_bytes'])}")
    print(f"  table rows {r['table_rows_bytes']} bytes ({', '.join(r['row_tables'])}); KV cache "
          f"{r['kv_bytes_per_position']} bytes/position x {r['mean_positions']:g} = {mb(r['kv_bytes'])}")


if __name__ == "__main__":
    main()
