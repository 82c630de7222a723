#!/usr/bin/env python3
"""Small language-model decoders for the state tests (issue 35), with seeded
random weights:

  gqa_decoder_static.onnx  the form ONNX Runtime's GenAI model builder writes
      for a static KV buffer: per layer SimplifiedLayerNormalization (RMSNorm),
      MatMul q/k/v, com.microsoft GroupQueryAttention (do_rotary, KV heads <
      query heads) whose past_key_N/past_value_N [1, kv_heads, capacity, head]
      and present_key_N/present_value_N share one shape, MatMul o, a SiLU MLP;
      embeddings by Gather, a final norm and an LM head. Inputs: input_ids int64
      [1, sequence], seqlens_k int32 [1] (valid length after the call, minus
      one), the pasts; total_sequence_length is a constant (the capacity), so
      every call, prompt or decode, is a static-buffer step. Outputs logits
      [1, sequence, vocab] and the presents.

Usage: export_state_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD, LAYERS, MLP, CAPACITY = 96, 64, 4, 2, 16, 2, 128, 32


def gqa_decoder_static(path, seed=35):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, shape, scale):
        return const(name, (scale * rng.standard_normal(shape)).astype(np.float32))

    def rms(x, name):
        g = const(name + ".gamma", (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        nodes.append(helper.make_node("SimplifiedLayerNormalization", [x, g], [name], axis=-1, epsilon=1e-6,
                                      name=name))
        return name

    def matmul(x, w, name):
        nodes.append(helper.make_node("MatMul", [x, w], [name], name=name))
        return name

    rot_half = HEAD // 2
    inv = 1.0 / (10000.0 ** (np.arange(rot_half, dtype=np.float64) * 2 / HEAD))
    ang = np.arange(CAPACITY, dtype=np.float64)[:, None] * inv[None, :]
    cos = const("cos_cache", np.cos(ang).astype(np.float32))
    sin = const("sin_cache", np.sin(ang).astype(np.float32))
    total = const("total_sequence_length", np.array(CAPACITY, dtype=np.int32))
    emb = weight("embed", (VOCAB, HIDDEN), 1.0)
    nodes.append(helper.make_node("Gather", [emb, "input_ids"], ["h0"], name="embed_lookup"))
    x = "h0"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "sequence"]),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", VOCAB])]
    cache = [1, KV_HEADS, CAPACITY, HEAD]
    for l in range(LAYERS):
        p = f"layers.{l}."
        n = rms(x, p + "attn_norm")
        q = matmul(n, weight(p + "wq", (HIDDEN, HEADS * HEAD), HIDDEN ** -0.5), p + "q")
        k = matmul(n, weight(p + "wk", (HIDDEN, KV_HEADS * HEAD), HIDDEN ** -0.5), p + "k")
        v = matmul(n, weight(p + "wv", (HIDDEN, KV_HEADS * HEAD), HIDDEN ** -0.5), p + "v")
        pk, pv, ok, ov = f"past_key_{l}", f"past_value_{l}", f"present_key_{l}", f"present_value_{l}"
        inputs += [helper.make_tensor_value_info(pk, TensorProto.FLOAT, cache),
                   helper.make_tensor_value_info(pv, TensorProto.FLOAT, cache)]
        outputs += [helper.make_tensor_value_info(ok, TensorProto.FLOAT, cache),
                    helper.make_tensor_value_info(ov, TensorProto.FLOAT, cache)]
        nodes.append(helper.make_node("GroupQueryAttention", [q, k, v, pk, pv, "seqlens_k", total, cos, sin],
                                      [p + "attn", ok, ov], domain="com.microsoft", num_heads=HEADS,
                                      kv_num_heads=KV_HEADS, do_rotary=1, name=p + "gqa"))
        o = matmul(p + "attn", weight(p + "wo", (HEADS * HEAD, HIDDEN), (HEADS * HEAD) ** -0.5), p + "o")
        nodes.append(helper.make_node("Add", [x, o], [p + "res1"], name=p + "res1"))
        x = p + "res1"
        n = rms(x, p + "mlp_norm")
        g = matmul(n, weight(p + "wg", (HIDDEN, MLP), HIDDEN ** -0.5), p + "gate")
        u = matmul(n, weight(p + "wu", (HIDDEN, MLP), HIDDEN ** -0.5), p + "up")
        nodes.append(helper.make_node("Sigmoid", [g], [p + "gate_sig"], name=p + "gate_sig"))
        nodes.append(helper.make_node("Mul", [g, p + "gate_sig"], [p + "silu"], name=p + "silu"))
        nodes.append(helper.make_node("Mul", [p + "silu", u], [p + "act"], name=p + "act"))
        d = matmul(p + "act", weight(p + "wd", (MLP, HIDDEN), MLP ** -0.5), p + "down")
        nodes.append(helper.make_node("Add", [x, d], [p + "res2"], name=p + "res2"))
        x = p + "res2"
    n = rms(x, "final_norm")
    matmul(n, weight("lm_head", (HIDDEN, VOCAB), 2.0 * HIDDEN ** -0.5), "logits")
    graph = helper.make_graph(nodes, "gqa_decoder_static", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    # (no onnx.checker: SimplifiedLayerNormalization is ONNX Runtime's, unknown to the checker)
    onnx.save(model, path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    gqa_decoder_static(os.path.join(out, "gqa_decoder_static.onnx"))
    # A fixed prompt of 8 token ids for the tests.
    np.save(os.path.join(out, "gqa_decoder_static.prompt.npy"),
            np.random.default_rng(7).integers(0, VOCAB, size=(1, 8)).astype(np.int64))


if __name__ == "__main__":
    main()
