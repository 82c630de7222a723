#!/usr/bin/python3
"""Writes small models of ONNX Runtime's transformer operators (the ones its
exporters and transformer optimizer write into CPU models) for
tests/contrib_ops_test.cc, which compiles each with fcb for every target and
compares with ONNX Runtime's outputs:

  DIR/contrib_CASE.onnx           one node (or a chain), opset 18 + com.microsoft 1
  DIR/contrib_CASE.feeds/NAME.npy its inputs, seeded from the case name
  DIR/contrib_CASE.ref/NAME.npy   ONNX Runtime's outputs (scripts/prepare_testdata.sh
                                  runs tools/oracle/ort_run.js)

Cases cover the attribute variants and odd sizes (hidden 7, 64, 576; batch and
sequence > 1): SimplifiedLayerNormalization (axis, epsilon, inv_std_var),
SkipSimplifiedLayerNormalization and SkipLayerNormalization (bias, beta, the
optional mean / inv_std_var / sum outputs), MatMulNBits (nbits_cases), Gelu, BiasGelu, FastGelu (with and
without bias), QuickGelu (alpha), RotaryEmbedding (3-D and 4-D inputs,
interleaved or not, partial rotary dimension, position ids per token or one
offset), and one chain through all of them.

  --out DIR   where to write (default build/testdata)
  --list      print the case names, one per line
"""
import argparse
import os
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def rope_caches(positions, half, base=10000.0):
    inv_freq = 1.0 / base ** (np.arange(half, dtype=np.float64) / half)
    ang = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


class Case:
    """One model: graph inputs with their feeds, initializers, nodes, outputs."""

    def __init__(self, name):
        self.name = name
        self.rng = rng_for(name)
        self.inputs, self.feeds, self.inits, self.nodes, self.outputs = [], {}, [], [], []

    def feed(self, name, shape, dtype=np.float32, values=None):
        v = values if values is not None else self.rng.standard_normal(shape).astype(dtype)
        self.feeds[name] = v
        et = {np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32}.get(v.dtype, TensorProto.FLOAT)
        self.inputs.append(helper.make_tensor_value_info(name, et, list(v.shape)))
        return name

    def const(self, name, values):
        self.inits.append(numpy_helper.from_array(values, name))
        return name

    def weight(self, name, shape, scale=1.0, offset=0.0):
        return self.const(name, (offset + scale * self.rng.standard_normal(shape)).astype(np.float32))

    def node(self, op, inputs, outputs, domain="", **attrs):
        self.nodes.append(helper.make_node(op, inputs, outputs, name=f"{op}_{len(self.nodes)}", domain=domain, **attrs))

    def output(self, *names):
        for n in names:
            self.outputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, None))

    def save(self, out):
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(MS, 1)],
                              producer_name="fcb export_contrib_models.py")
        m.ir_version = 8
        onnx.save(m, os.path.join(out, f"contrib_{self.name}.onnx"))
        feeds = os.path.join(out, f"contrib_{self.name}.feeds")
        os.makedirs(feeds, exist_ok=True)
        for k, v in self.feeds.items():
            np.save(os.path.join(feeds, k + ".npy"), v)


def simplified_ln(name, shape, axis=-1, eps=1e-5, inv=False):
    c = Case(name)
    x = c.feed("x", shape)
    ax = axis % len(shape)
    s = c.weight("scale", shape[ax:], 0.5, 1.0)
    outs = ["y", "inv_std_var"] if inv else ["y"]
    c.node("SimplifiedLayerNormalization", [x, s], outs, axis=axis, epsilon=eps, stash_type=1)
    c.output(*outs)
    return c


def skip_ln(name, shape, simplified, beta=True, bias=True, outputs=("y",), eps=1e-5):
    c = Case(name)
    h = shape[-1]
    ins = [c.feed("input", shape), c.feed("skip", shape), c.weight("gamma", [h], 0.5, 1.0)]
    if simplified:
        if bias:
            ins.append(c.weight("bias", [h], 0.1))
        op = "SkipSimplifiedLayerNormalization"
    else:
        ins.append(c.weight("beta", [h], 0.1) if beta else "")
        if bias:
            ins.append(c.weight("bias", [h], 0.1))
        while ins and ins[-1] == "":
            ins.pop()
        op = "SkipLayerNormalization"
    # outputs: names for (output, mean, inv_std_var, input_skip_bias_sum); "" = not asked for.
    c.node(op, ins, list(outputs), domain=MS, epsilon=eps)
    c.output(*[o for o in outputs if o])
    return c


def activation(name, op, shape, bias=False, **attrs):
    c = Case(name)
    ins = [c.feed("x", shape, values=(2.5 * c.rng.standard_normal(shape)).astype(np.float32))]
    if bias:
        ins.append(c.weight("bias", [shape[-1]], 0.5))
    c.node(op, ins, ["y"], domain=MS, **attrs)
    c.output("y")
    return c


def rope(name, shape, heads, head, positions, interleaved=0, rot_dim=0, offset=None, pass_heads=True):
    """shape: input shape (3-D [b, s, heads*head] or 4-D [b, heads, s, head])."""
    c = Case(name)
    b, s = shape[0], shape[2] if len(shape) == 4 else shape[1]
    x = c.feed("x", shape)
    if offset is None:
        ids = np.stack([c.rng.choice(positions, size=s, replace=False) for _ in range(b)]).astype(np.int64)
    else:
        ids = np.array([offset], dtype=np.int64)
    p = c.feed("position_ids", ids.shape, values=ids)
    cos, sin = rope_caches(positions, (rot_dim or head) // 2)
    attrs = {"interleaved": interleaved}
    if rot_dim:
        attrs["rotary_embedding_dim"] = rot_dim
    if pass_heads or rot_dim:
        attrs["num_heads"] = heads
    c.node("RotaryEmbedding", [x, p, c.const("cos_cache", cos), c.const("sin_cache", sin)], ["y"], domain=MS, **attrs)
    c.output("y")
    return c


def chain(name):
    """hidden 64, 4 heads of 16: RMSNorm -> RoPE -> FastGelu -> SkipLayerNorm
    (skip = the input) -> QuickGelu -> BiasGelu -> Gelu ->
    SkipSimplifiedLayerNorm (skip = the first norm's output), whose sum is an
    output too."""
    c = Case(name)
    b, s, h = 2, 5, 64
    x = c.feed("x", [b, s, h])
    ids = c.feed("position_ids", [b, s], values=np.tile(np.arange(2, 2 + s, dtype=np.int64), (b, 1)))
    cos, sin = rope_caches(16, 8)
    c.node("SimplifiedLayerNormalization", [x, c.weight("g0", [h], 0.2, 1.0)], ["n0"], epsilon=1e-6)
    c.node("RotaryEmbedding", ["n0", ids, c.const("cos", cos), c.const("sin", sin)], ["r0"], domain=MS, num_heads=4)
    c.node("FastGelu", ["r0", c.weight("fb", [h], 0.2)], ["f0"], domain=MS)
    c.node("SkipLayerNormalization", ["f0", x, c.weight("g1", [h], 0.2, 1.0), c.weight("b1", [h], 0.1)], ["l1"],
           domain=MS, epsilon=1e-5)
    c.node("QuickGelu", ["l1"], ["q0"], domain=MS, alpha=1.5)
    c.node("BiasGelu", ["q0", c.weight("bb", [h], 0.3)], ["bg"], domain=MS)
    c.node("Gelu", ["bg"], ["g"], domain=MS)
    c.node("SkipSimplifiedLayerNormalization", ["g", "n0", c.weight("g2", [h], 0.2, 1.0)], ["y", "", "", "sum"],
           domain=MS, epsilon=1e-6)
    c.output("y", "sum")
    return c


def gqa(name, b, s, heads, kv_heads, head=64, past=0, seqlens=None, total=None, total_const=False, rotary=False,
        interleaved=0, rot_half=None, window=None, softcap=None, packed=False, scale=None):
    """GroupQueryAttention: past = rows of past_key/past_value (0: none);
    seqlens = seqlens_k + 1 per batch (default: past + s, or s for a first
    prompt); total = total_sequence_length (default max(seqlens)), a constant
    initializer when total_const (it then fixes the present length
    max(total, past): the static-buffer form when total <= past)."""
    c = Case(name)
    lens = seqlens or [past + s if past else s] * b
    tot = total or max(lens)
    if packed:
        ins = [c.feed("query", [b, s, (heads + 2 * kv_heads) * head]), "", ""]
    else:
        ins = [c.feed("query", [b, s, heads * head]), c.feed("key", [b, s, kv_heads * head]),
               c.feed("value", [b, s, kv_heads * head])]
    if past:
        ins += [c.feed("past_key", [b, kv_heads, past, head]), c.feed("past_value", [b, kv_heads, past, head])]
    else:
        ins += ["", ""]
    ins.append(c.feed("seqlens_k", [b], values=np.array(lens, dtype=np.int32) - 1))
    tv = np.array([tot], dtype=np.int32)
    ins.append(c.const("total_sequence_length", tv.reshape([])) if total_const else
               c.feed("total_sequence_length", [1], values=tv))
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads}
    if rotary:
        cos, sin = rope_caches(max(64, past + s), rot_half or head // 2)
        ins += [c.const("cos_cache", cos), c.const("sin_cache", sin)]
        attrs.update(do_rotary=1, rotary_interleaved=interleaved)
    if window is not None:
        attrs["local_window_size"] = window
    if softcap is not None:
        attrs["softcap"] = softcap
    if scale is not None:
        attrs["scale"] = scale
    while ins and ins[-1] == "":
        ins.pop()
    c.node("GroupQueryAttention", ins, ["output", "present_key", "present_value"], domain=MS, **attrs)
    c.output("output", "present_key", "present_value")
    return c


def mha(name, b, s, heads, head, kv_len=None, vhead=None, past=0, bias=False, mask=None, attn_bias=None,
        causal=False, bnsh=False, mask_value=None, scale=None, output_only=False):
    """MultiHeadAttention with separate query, key, value ([B, S, N*H] or,
    with bnsh, key/value [B, N, L, H]); mask: "lengths" ([B] int32) or "keys"
    ([B, T] of 1/0); attn_bias: the leading dims of [B|1, N|1, S, T]."""
    c = Case(name)
    L = kv_len or s
    hv = vhead or head
    T = past + L
    ins = [c.feed("query", [b, s, heads * head])]
    if bnsh:
        ins += [c.feed("key", [b, heads, L, head]), c.feed("value", [b, heads, L, hv])]
    else:
        ins += [c.feed("key", [b, L, heads * head]), c.feed("value", [b, L, heads * hv])]
    ins.append(c.weight("bias", [heads * (2 * head + hv)], 0.5) if bias else "")
    if mask == "lengths":
        ins.append(c.feed("key_padding_mask", [b], values=np.array([T - (i % 3) for i in range(b)], dtype=np.int32)))
    elif mask == "keys":
        m = (c.rng.random((b, T)) > 0.3).astype(np.int32)
        m[:, 0] = 1
        ins.append(c.feed("key_padding_mask", [b, T], values=m))
    else:
        ins.append("")
    ins.append(c.feed("attention_bias", list(attn_bias) + [s, T]) if attn_bias else "")
    if past:
        ins += [c.feed("past_key", [b, heads, past, head]), c.feed("past_value", [b, heads, past, hv])]
    while ins and ins[-1] == "":
        ins.pop()
    attrs = {"num_heads": heads}
    if causal:
        attrs["unidirectional"] = 1
    if mask_value is not None:
        attrs["mask_filter_value"] = mask_value
    if scale is not None:
        attrs["scale"] = scale
    outs = ["output"] if bnsh or output_only else ["output", "present_key", "present_value"]
    c.node("MultiHeadAttention", ins, outs, domain=MS, **attrs)
    c.output(*outs)
    return c


def attention_cases():
    """GroupQueryAttention and MultiHeadAttention: prefill and decode steps,
    static buffer and growing cache, rotary both interleavings, local window,
    softcap, packed QKV; MHA with and without bias, masks, attention bias, past."""
    return [
        gqa("gqa_prefill_h6kv2", 1, 7, 6, 2),
        gqa("gqa_prefill_rot_h9kv3", 2, 5, 9, 3, rotary=True),
        gqa("gqa_prefill_packed_h6kv3", 2, 4, 6, 3, packed=True, rotary=True, interleaved=1),
        gqa("gqa_prefill_window_softcap", 1, 12, 6, 2, rotary=True, window=4, softcap=1.5),
        gqa("gqa_decode_static_h14kv2", 2, 1, 14, 2, past=16, seqlens=[10, 6], total_const=True, rotary=True,
            interleaved=1),
        gqa("gqa_decode_static_window", 1, 1, 9, 3, past=32, seqlens=[21], total_const=True, rotary=True,
            window=8, softcap=2.0),
        gqa("gqa_decode_grow_h6kv1", 2, 1, 6, 1, past=8, seqlens=[9, 6], rotary=True),
        gqa("gqa_decode_grow_partial_rot", 1, 1, 9, 3, past=5, rotary=True, interleaved=1, rot_half=16, scale=0.2),
        mha("mha_plain", 2, 5, 4, 16),
        mha("mha_bias_lengths", 3, 5, 4, 16, bias=True, mask="lengths"),
        mha("mha_bias_keys_output_only", 2, 6, 4, 16, bias=True, mask="keys", output_only=True),
        mha("mha_past_causal_keys", 2, 3, 2, 32, past=4, bias=True, mask="keys", causal=True),
        mha("mha_cross_attn_bias", 2, 3, 4, 16, kv_len=6, vhead=8, attn_bias=(2, 1), mask_value=-1000.0),
        mha("mha_bnsh_kv", 1, 4, 3, 16, kv_len=7, attn_bias=(1, 3), scale=0.3),
    ]


def pack_nibbles(q):
    """uint8 values < 16 along the last axis (even length) -> bytes, element 2i in the low nibble."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def matmul_nbits(name, m_shape, k, n, bits, block, zp=None, bias=False, accuracy_level=0, g_idx=False):
    """com.microsoft MatMulNBits with seeded random quantized weights: A m_shape + [k]
    (a feed), B [n, blocks, block * bits / 8] with random values, scales [n * blocks],
    zero points (zp: None, "uint8" packed like B, or "float"), bias [n]."""
    c = Case(name)
    blocks = -(-k // block)
    levels = 1 << bits
    a = c.feed("a", list(m_shape) + [k])
    q = c.rng.integers(0, levels, size=(n, blocks * block)).astype(np.uint8)
    q[:, k:] = 0  # the last block's padding
    q = q.reshape(n, blocks, block)
    b = pack_nibbles(q) if bits == 4 else q
    scales = (0.02 + 0.06 * c.rng.random(n * blocks)).astype(np.float32)
    ins = [a, c.const("B", b), c.const("scales", scales)]
    if zp == "uint8":
        z = c.rng.integers(0, levels, size=(n, blocks)).astype(np.uint8)
        if bits == 4:
            if blocks % 2:
                z = np.concatenate([z, np.zeros((n, 1), np.uint8)], axis=1)
            z = pack_nibbles(z)
        ins.append(c.const("zero_points", z.reshape(-1)))
    elif zp == "float":
        ins.append(c.const("zero_points", (levels / 2 + 2.0 * c.rng.standard_normal(n * blocks)).astype(np.float32)))
    else:
        ins.append("")
    ins.append(c.const("g_idx", (np.arange(k) // block).astype(np.int32)) if g_idx else "")
    ins.append(c.weight("bias", [n], 0.5) if bias else "")
    while ins[-1] == "":
        ins.pop()
    c.node("MatMulNBits", ins, ["y"], domain=MS, K=k, N=n, bits=bits, block_size=block,
           accuracy_level=accuracy_level)
    c.output("y")
    return c


def nbits_cases():
    """MatMulNBits: bits 4 and 8, blocks 16-256, with and without zero points, K
    not a multiple of the block, one row (decode) and several (prefill), bias."""
    return [
        matmul_nbits("nbits4_b32_m1", [1, 1], 256, 96, 4, 32),
        matmul_nbits("nbits4_b16_zp_m1", [1], 200, 40, 4, 16, zp="uint8"),
        matmul_nbits("nbits4_b64_zp_bias", [1, 7], 320, 72, 4, 64, zp="uint8", bias=True),
        matmul_nbits("nbits4_b128_k300", [2, 3], 300, 33, 4, 128, zp="uint8"),
        matmul_nbits("nbits4_b256_m1_bias", [1, 1], 896, 136, 4, 256, bias=True),
        matmul_nbits("nbits4_b32_k_odd", [5], 97, 17, 4, 32, zp="uint8", bias=True),
        matmul_nbits("nbits4_b32_floatzp", [1, 3], 160, 48, 4, 32, zp="float"),
        matmul_nbits("nbits4_b32_gidx", [1, 1], 128, 32, 4, 32, g_idx=True),
        matmul_nbits("nbits8_b32_m1", [1, 1], 256, 80, 8, 32),
        matmul_nbits("nbits8_b16_zp_m4", [4], 176, 50, 8, 16, zp="uint8", bias=True),
        matmul_nbits("nbits8_b64_k100", [1, 2], 100, 24, 8, 64, zp="uint8"),
        matmul_nbits("nbits8_b128_m9", [9], 384, 64, 8, 128, bias=True),
        matmul_nbits("nbits8_b256_zp_m1", [1, 1], 600, 40, 8, 256, zp="uint8"),
    ] + nbits_acc4_cases()


def nbits_acc4_cases():
    """MatMulNBits with accuracy_level 4 (ONNX Runtime GenAI's CPU int4 models): ONNX
    Runtime quantizes A to int8 per block and computes integer dot products where its
    CPU has such a kernel (4-bit, every block size here), else in float (8-bit)."""
    return [
        matmul_nbits("nbits4_acc4_b32_m1", [1, 1], 256, 96, 4, 32, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b16_zp_m1", [1], 200, 40, 4, 16, zp="uint8", accuracy_level=4),
        matmul_nbits("nbits4_acc4_b64_zp_bias", [1, 7], 320, 72, 4, 64, zp="uint8", bias=True, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b128_k300", [2, 3], 300, 33, 4, 128, zp="uint8", accuracy_level=4),
        matmul_nbits("nbits4_acc4_b256_m1_bias", [1, 1], 896, 136, 4, 256, bias=True, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b32_k_odd", [5], 97, 17, 4, 32, zp="uint8", bias=True, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b16_m6", [2, 3], 208, 70, 4, 16, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b256_zp_m5", [5], 640, 50, 4, 256, zp="uint8", accuracy_level=4),
        matmul_nbits("nbits8_acc4_b32_m1", [1, 1], 256, 80, 8, 32, accuracy_level=4),
        matmul_nbits("nbits8_acc4_b16_zp_m4", [4], 176, 50, 8, 16, zp="uint8", bias=True, accuracy_level=4),
        matmul_nbits("nbits8_acc4_b64_k100", [1, 2], 100, 24, 8, 64, zp="uint8", accuracy_level=4),
        matmul_nbits("nbits8_acc4_b128_m9", [9], 384, 64, 8, 128, bias=True, accuracy_level=4),
        matmul_nbits("nbits8_acc4_b256_zp_m1", [1, 1], 600, 40, 8, 256, zp="uint8", accuracy_level=4),
        # Many rows (prefill): row tiles and chunks with remainders, k not a
        # multiple of the block, n not a multiple of 16.
        matmul_nbits("nbits4_acc4_b32_zp_bias_m130", [130], 300, 50, 4, 32, zp="uint8", bias=True, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b128_m37", [37], 600, 100, 4, 128, accuracy_level=4),
        matmul_nbits("nbits4_acc4_b16_zp_m37", [1, 37], 200, 33, 4, 16, zp="uint8", accuracy_level=4),
        matmul_nbits("nbits4_acc4_b256_bias_m130", [2, 65], 520, 24, 4, 256, bias=True, accuracy_level=4),
        matmul_nbits("nbits8_acc4_b64_zp_m130", [130], 260, 40, 8, 64, zp="uint8", bias=True, accuracy_level=4),
        matmul_nbits("nbits8_acc4_b32_m37", [37], 100, 17, 8, 32, accuracy_level=4),
        # ONNX Runtime's float paths at level 4: g_idx, float zero points.
        matmul_nbits("nbits4_acc4_gidx_float", [1, 1], 128, 32, 4, 32, g_idx=True, accuracy_level=4),
        matmul_nbits("nbits4_acc4_floatzp", [1, 3], 160, 48, 4, 32, zp="float", accuracy_level=4),
    ]


def dq_matmul(name, m_shape, k, n, dtype, per_column, layout, zp=True, axis=None, gather=False):
    """MatMul(A, dequantized constant weight) as weight-only quantization writes
    it (fcb turns it into 8-bit MatMulNBits, passes/weight_only_matmul.cc):
    layout "kn": DequantizeLinear(Wq [k, n]); "t_before":
    DequantizeLinear(Transpose(Wq [n, k])), a tied embedding read as LM head;
    "t_after": Transpose(DequantizeLinear(Wq [n, k])). per_column: scale and
    zero point along n (axis picked to match the layout), else per tensor;
    axis overrides it (per-row scales along k, which the rule must leave).
    gather: a Gather of the same table (Wq [n, k]) -> DequantizeLinear as a
    second output (the token embedding)."""
    c = Case(name)
    a = c.feed("a", list(m_shape) + [k])
    lo, hi = (-128, 128) if dtype == np.int8 else (0, 256)
    wq = c.rng.integers(lo, hi, size=(k, n) if layout == "kn" else (n, k)).astype(dtype)
    w = c.const("wq", wq)
    dq_in = w
    if layout == "t_before":
        c.node("Transpose", [w], ["wq_t"], perm=[1, 0])
        dq_in = "wq_t"
    # Axis of the DequantizeLinear input that runs along n.
    n_axis = 1 if layout in ("kn", "t_before") else 0
    if axis is None:
        axis = n_axis
    length = ([n, k] if layout == "t_after" else [k, n])[axis]
    count = length if per_column else 1
    shape = [count] if per_column else []
    scale = (0.002 + 0.01 * c.rng.random(count)).astype(np.float32).reshape(shape)
    ins = [dq_in, c.const("scale", scale)]
    if zp:
        ins.append(c.const("zero_point", c.rng.integers(lo // 4, hi // 4, size=count).astype(dtype).reshape(shape)))
    attrs = {"axis": axis} if per_column else {}
    c.node("DequantizeLinear", ins, ["w"], **attrs)
    b = "w"
    if layout == "t_after":
        c.node("Transpose", ["w"], ["w_t"], perm=[1, 0])
        b = "w_t"
    c.node("MatMul", [a, b], ["y"])
    c.output("y")
    if gather:
        ids = c.feed("ids", [3], values=np.array([0, n - 1, n // 2], dtype=np.int64))
        c.node("Gather", [w, ids], ["rows"])
        c.node("DequantizeLinear", ["rows"] + ins[1:], ["emb"])
        c.output("emb")
    return c


def weight_only_cases():
    """dq_matmul: int8 and uint8, per tensor and per column, each layout, one
    and two rows (where fcb takes the rule for any weight size) and more (where
    a weight this small folds to float instead), K and N not multiples of 16;
    per-row scales along K stay DequantizeLinear + MatMul."""
    return [
        dq_matmul("dqmm_i8_tensor_tbefore_m1", [1, 1], 200, 153, np.int8, False, "t_before", gather=True),
        dq_matmul("dqmm_i8_column_kn_m2", [2], 195, 170, np.int8, True, "kn"),
        dq_matmul("dqmm_u8_tensor_kn_m6", [2, 3], 198, 157, np.uint8, False, "kn"),
        dq_matmul("dqmm_u8_column_tafter_m1", [1], 201, 133, np.uint8, True, "t_after"),
        dq_matmul("dqmm_i8_column_tbefore_m2", [1, 2], 199, 151, np.int8, True, "t_before"),
        dq_matmul("dqmm_u8_tensor_tafter_m1", [1, 1], 197, 163, np.uint8, False, "t_after"),
        dq_matmul("dqmm_i8_nozp_tafter_m1", [1, 1], 177, 203, np.int8, False, "t_after", zp=False),
        dq_matmul("dqmm_u8_column_tbefore_m1", [1, 1], 1030, 259, np.uint8, True, "t_before"),
        dq_matmul("dqmm_i8_rows_kn_m1", [1], 195, 121, np.int8, True, "kn", axis=0),
    ]


def cases():
    return attention_cases() + nbits_cases() + weight_only_cases() + [
        simplified_ln("sln_h7", [2, 3, 7], inv=True),
        simplified_ln("sln_h576", [1, 5, 576], eps=1e-6),
        simplified_ln("sln_axis1", [2, 4, 8], axis=1),
        skip_ln("sskip_h64", [2, 3, 64], True, outputs=("y", "", "", "sum"), eps=1e-6),
        skip_ln("sskip_h576_nobias", [1, 4, 576], True, bias=False),
        skip_ln("sskip_h7_stats", [2, 3, 7], True, outputs=("y", "mean", "inv_std_var", "sum")),
        skip_ln("skip_h7_all", [2, 3, 7], False, outputs=("y", "mean", "inv_std_var", "sum")),
        skip_ln("skip_h64_nobeta", [3, 5, 64], False, beta=False, bias=False),
        skip_ln("skip_h576_bias", [2, 2, 576], False, beta=True, bias=True, outputs=("y", "", "", "sum"), eps=1e-12),
        activation("gelu", "Gelu", [2, 3, 7]),
        activation("biasgelu_h64", "BiasGelu", [3, 5, 64], bias=True),
        activation("fastgelu_h576", "FastGelu", [2, 3, 576], bias=True),
        activation("fastgelu_nobias", "FastGelu", [7, 9]),
        activation("quickgelu", "QuickGelu", [2, 3, 64]),
        activation("quickgelu_alpha1", "QuickGelu", [5, 7], alpha=1.0),
        rope("rope3d", [2, 5, 64], 4, 16, 16),
        rope("rope3d_interleaved", [2, 5, 64], 4, 16, 16, interleaved=1, pass_heads=False),
        rope("rope4d_offset", [2, 3, 5, 16], 3, 16, 12, offset=3),
        rope("rope4d_interleaved", [1, 2, 4, 32], 2, 32, 8, interleaved=1),
        rope("rope3d_partial", [1, 4, 96], 3, 32, 8, rot_dim=16),
        rope("rope4d_partial_interleaved", [2, 2, 3, 32], 2, 32, 6, interleaved=1, rot_dim=8, offset=1),
        chain("chain"),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build/testdata")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    all_cases = cases()
    if a.list:
        print("\n".join("contrib_" + c.name for c in all_cases))
        return
    os.makedirs(a.out, exist_ok=True)
    for c in all_cases:
        c.save(a.out)


if __name__ == "__main__":
    main()
