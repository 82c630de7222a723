#!/usr/bin/python3
"""Writes decoder-only language models with seeded random weights at the
shapes of real small LLMs, in the two forms users have (issue 35):

  form a: what ONNX Runtime's GenAI model builder writes for CPU int4:
          Gather embedding (float), per layer SimplifiedLayerNormalization /
          SkipSimplifiedLayerNormalization, q/k/v/o and MLP projections as
          com.microsoft MatMulNBits (4 bits, block 32, uint8 zero points),
          GroupQueryAttention with do_rotary (cos/sin caches), SiLU gated MLP,
          the LM head as MatMulNBits. Inputs input_ids [B, S] int64,
          attention_mask [B, T] int64, past_key_values.N.key/.value
          [B, kv_heads, P, head] float32 (P = 0 on the first call); outputs
          logits [B, S, vocab] and present.N.key/.value [B, kv_heads, P + S, head].
  form b: the plain exporter form of the same network with float weights:
          RMSNorm and rotary embedding written out as elementwise operators,
          attention as MatMul + Softmax with a causal mask, the grouped KV heads
          repeated, the past concatenated with the new keys. Same inputs and
          outputs as form a (position ids derived from the past length).

Shapes (--shape): smollm2-135m (hidden 576, 30 layers, 9 heads, 3 KV heads,
MLP 1536, vocab 49152), qwen2.5-0.5b (896, 24, 14, 2, 4864, 151936), and
tiny (64, 2, 4, 2, 128, 256) for quick checks. --layers N overrides the
layer count (smaller files with the same per-layer shapes).

  --shape NAME --form a|b --out FILE.onnx [--layers N] [--seed S] [--accuracy-level L]

Weights are external data next to FILE.onnx (FILE.onnx.data) when larger
than 2 GB would otherwise be needed; smaller models are written inline.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"

SHAPES = {
    # hidden, layers, heads, kv_heads, mlp, vocab, rope_theta
    "smollm2-135m": (576, 30, 9, 3, 1536, 49152, 100000.0),
    "qwen2.5-0.5b": (896, 24, 14, 2, 4864, 151936, 1000000.0),
    "tiny": (64, 2, 4, 2, 128, 256, 10000.0),
}
MAX_POSITIONS = 2048
BLOCK = 32
EPS = 1e-6


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, stem):
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, stem, values):
        n = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.array(values, order="C"), n))
        return n

    def node(self, op, ins, n_out=1, domain="", **attrs):
        outs = [self.name(op) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.name(op + "_node"), domain=domain, **attrs))
        return outs[0] if n_out == 1 else outs

    def weight(self, k, n):
        """A float weight [k, n] with the variance a trained model's has."""
        return (self.rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)

    def norm_weight(self, h):
        return (1.0 + 0.1 * self.rng.standard_normal(h)).astype(np.float32)


def quantize_4bit(w):
    """w [k, n] float -> MatMulNBits operands (asymmetric, block 32):
    B [n, blocks, 16] uint8, scales [n * blocks], zero points packed [n, ceil(blocks / 2)]."""
    k, n = w.shape
    blocks = -(-k // BLOCK)
    wp = np.zeros((blocks * BLOCK, n), np.float32)
    wp[:k] = w
    wb = wp.T.reshape(n, blocks, BLOCK)
    lo = np.minimum(wb.min(axis=2), 0.0)
    hi = np.maximum(wb.max(axis=2), 0.0)
    scale = np.maximum((hi - lo) / 15.0, 1e-8)
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(wb / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zpp = zp if blocks % 2 == 0 else np.concatenate([zp, np.zeros((n, 1), np.uint8)], axis=1)
    zpp = (zpp[:, 0::2] | (zpp[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale.astype(np.float32).reshape(-1), zpp.reshape(-1)


def rope_caches(head, theta):
    half = head // 2
    inv = 1.0 / theta ** (np.arange(half, dtype=np.float64) / half)
    ang = np.arange(MAX_POSITIONS, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def form_a(b, cfg, layers, accuracy_level=4):
    h, _, heads, kv, mlp, vocab, theta = cfg
    head = h // heads

    def linear(x, k, n):
        qb, sc, zp = quantize_4bit(b.weight(k, n))
        return b.node("MatMulNBits", [x, b.const("B", qb), b.const("scales", sc), b.const("zp", zp)],
                      domain=MS, K=k, N=n, bits=4, block_size=BLOCK, accuracy_level=accuracy_level)

    emb = b.const("embed", (0.5 * b.rng.standard_normal((vocab, h))).astype(np.float32))
    x = b.node("Gather", [emb, "input_ids"])
    # seqlens_k = sum(mask) - 1, total_sequence_length = mask's length (int32)
    m32 = b.node("Cast", ["attention_mask"], to=TensorProto.INT32)
    s = b.node("ReduceSum", [m32, b.const("axes", np.array([1], np.int64))], keepdims=0)
    seqlens = b.node("Sub", [s, b.const("one", np.array(1, np.int32))])
    shp = b.node("Shape", ["attention_mask"])
    tot64 = b.node("Gather", [shp, b.const("idx", np.array(1, np.int64))], axis=0)
    total = b.node("Cast", [tot64], to=TensorProto.INT32)
    cos, sin = rope_caches(head, theta)
    cos_c, sin_c = b.const("cos_cache", cos), b.const("sin_cache", sin)
    resid = None
    outs = []
    normed = b.node("SimplifiedLayerNormalization", [x, b.const("ln", b.norm_weight(h))], axis=-1, epsilon=EPS)
    resid = x
    for layer in range(layers):
        q = linear(normed, h, heads * head)
        k = linear(normed, h, kv * head)
        v = linear(normed, h, kv * head)
        past_k, past_v = f"past_key_values.{layer}.key", f"past_key_values.{layer}.value"
        attn, pk, pv = b.node("GroupQueryAttention", [q, k, v, past_k, past_v, seqlens, total, cos_c, sin_c], n_out=3,
                              domain=MS, num_heads=heads, kv_num_heads=kv, do_rotary=1, rotary_interleaved=0,
                              local_window_size=-1)
        outs += [(pk, f"present.{layer}.key"), (pv, f"present.{layer}.value")]
        o = linear(attn, heads * head, h)
        normed2, _, _, resid = b.node("SkipSimplifiedLayerNormalization", [o, resid, b.const("ln", b.norm_weight(h))],
                                      n_out=4, domain=MS, epsilon=EPS)
        gate = linear(normed2, h, mlp)
        up = linear(normed2, h, mlp)
        act = b.node("Mul", [b.node("Mul", [gate, b.node("Sigmoid", [gate])]), up])
        down = linear(act, mlp, h)
        normed, _, _, resid = b.node("SkipSimplifiedLayerNormalization", [down, resid, b.const("ln", b.norm_weight(h))],
                                     n_out=4, domain=MS, epsilon=EPS)
    logits = linear(normed, h, vocab)
    return logits, outs


def form_b(b, cfg, layers):
    h, _, heads, kv, mlp, vocab, theta = cfg
    head = h // heads
    half = head // 2
    i64 = lambda v: b.const("c", np.array(v, np.int64))  # noqa: E731
    f32 = lambda v: b.const("c", np.array(v, np.float32))  # noqa: E731

    def linear(x, k, n):
        return b.node("MatMul", [x, b.const("W", b.weight(k, n))])

    def rmsnorm(x):
        var = b.node("ReduceMean", [b.node("Mul", [x, x]), i64([-1])], keepdims=1)
        inv = b.node("Div", [f32(1.0), b.node("Sqrt", [b.node("Add", [var, f32(EPS)])])])
        return b.node("Mul", [b.node("Mul", [x, inv]), b.const("ln", b.norm_weight(h))])

    emb = b.const("embed", (0.5 * b.rng.standard_normal((vocab, h))).astype(np.float32))
    x = b.node("Gather", [emb, "input_ids"])
    # positions past .. past + S - 1: past = Shape(past_key_values.0.key)[2]
    ids_shape = b.node("Shape", ["input_ids"])
    seq = b.node("Gather", [ids_shape, i64(1)], axis=0)
    past = b.node("Gather", [b.node("Shape", ["past_key_values.0.key"]), i64(2)], axis=0)
    total = b.node("Add", [past, seq])
    pos = b.node("Range", [past, total, i64(1)])
    cos, sin = rope_caches(head, theta)
    cos_t = b.node("Gather", [b.const("cos", cos), pos])  # [S, half]
    sin_t = b.node("Gather", [b.const("sin", sin), pos])
    cos_f = b.node("Concat", [cos_t, cos_t], axis=-1)  # [S, head]
    sin_f = b.node("Concat", [sin_t, sin_t], axis=-1)
    # causal mask [S, T]: key j visible to query i when j <= past + i
    qpos = b.node("Unsqueeze", [pos, i64([1])])
    kpos = b.node("Unsqueeze", [b.node("Range", [i64(0), total, i64(1)]), i64([0])])
    mask = b.node("Where", [b.node("Greater", [kpos, qpos]), f32(-1e9), f32(0.0)])
    bsz = b.node("Gather", [ids_shape, i64(0)], axis=0)

    def heads_view(t, n):
        # [B, S, n*head] -> [B, n, S, head]
        r = b.node("Reshape", [t, b.node("Concat", [b.node("Unsqueeze", [bsz, i64([0])]),
                                                     b.node("Unsqueeze", [seq, i64([0])]), i64([n, head])], axis=0)])
        return b.node("Transpose", [r], perm=[0, 2, 1, 3])

    def rope(t):
        x1 = b.node("Slice", [t, i64([0]), i64([half]), i64([-1])])
        x2 = b.node("Slice", [t, i64([half]), i64([head]), i64([-1])])
        rot = b.node("Concat", [b.node("Neg", [x2]), x1], axis=-1)
        return b.node("Add", [b.node("Mul", [t, cos_f]), b.node("Mul", [rot, sin_f])])

    outs = []
    for layer in range(layers):
        n1 = rmsnorm(x)
        q = rope(heads_view(linear(n1, h, heads * head), heads))
        k = rope(heads_view(linear(n1, h, kv * head), kv))
        v = heads_view(linear(n1, h, kv * head), kv)
        pk = b.node("Concat", [f"past_key_values.{layer}.key", k], axis=2)
        pv = b.node("Concat", [f"past_key_values.{layer}.value", v], axis=2)
        outs += [(pk, f"present.{layer}.key"), (pv, f"present.{layer}.value")]
        rep = heads // kv
        if rep > 1:  # [B, kv, T, head] -> [B, kv, rep, T, head] -> [B, heads, T, head]
            def repeat(t):
                e = b.node("Unsqueeze", [t, i64([2])])
                tiled = b.node("Expand", [e, b.node("Concat", [b.node("Unsqueeze", [bsz, i64([0])]), i64([kv, rep]),
                                                               b.node("Unsqueeze", [total, i64([0])]), i64([head])],
                                                              axis=0)])
                return b.node("Reshape", [tiled, b.node("Concat", [b.node("Unsqueeze", [bsz, i64([0])]),
                                                                   i64([heads]), b.node("Unsqueeze", [total, i64([0])]),
                                                                   i64([head])], axis=0)])
            kr, vr = repeat(pk), repeat(pv)
        else:
            kr, vr = pk, pv
        scores = b.node("Mul", [b.node("MatMul", [q, b.node("Transpose", [kr], perm=[0, 1, 3, 2])]),
                                f32(1.0 / np.sqrt(head))])
        probs = b.node("Softmax", [b.node("Add", [scores, mask])], axis=-1)
        ctx = b.node("Transpose", [b.node("MatMul", [probs, vr])], perm=[0, 2, 1, 3])
        ctx = b.node("Reshape", [ctx, b.node("Concat", [b.node("Unsqueeze", [bsz, i64([0])]),
                                                         b.node("Unsqueeze", [seq, i64([0])]), i64([heads * head])],
                                                        axis=0)])
        x = b.node("Add", [x, linear(ctx, heads * head, h)])
        n2 = rmsnorm(x)
        gate = linear(n2, h, mlp)
        up = linear(n2, h, mlp)
        act = b.node("Mul", [b.node("Mul", [gate, b.node("Sigmoid", [gate])]), up])
        x = b.node("Add", [x, linear(act, mlp, h)])
    logits = linear(rmsnorm(x), h, vocab)
    return logits, outs


def build(shape, form, layers, seed, accuracy_level=4):
    cfg = SHAPES[shape]
    h, n_layers, heads, kv, _, vocab, _ = cfg
    layers = layers or n_layers
    head = h // heads
    b = Builder(seed)
    logits, outs = form_a(b, cfg, layers, accuracy_level) if form == "a" else form_b(b, cfg, layers)
    # Rename the graph outputs to the exporters' names.
    rename = {logits: "logits", **{src: dst for src, dst in outs}}
    for n in b.nodes:
        n.output[:] = [rename.get(o, o) for o in n.output]
        n.input[:] = [rename.get(i, i) for i in n.input]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab])]
    for layer in range(layers):
        for kv_name in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{kv_name}", TensorProto.FLOAT,
                                                        ["batch", kv, "past", head]))
            outputs.append(helper.make_tensor_value_info(f"present.{layer}.{kv_name}", TensorProto.FLOAT,
                                                         ["batch", kv, "total", head]))
    graph = helper.make_graph(b.nodes, f"{shape}_form_{form}", inputs, outputs, b.inits)
    opsets = [helper.make_opsetid("", 18)] + ([helper.make_opsetid(MS, 1)] if form == "a" else [])
    return helper.make_model(graph, opset_imports=opsets, producer_name="fcb export_llm_models.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--form", choices=["a", "b"], required=True)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--accuracy-level", type=int, default=4,
                    help="MatMulNBits accuracy_level of form a (GenAI writes 4 for CPU: int8 activations)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = build(args.shape, args.form, args.layers, args.seed, args.accuracy_level)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    size = sum(i.ByteSize() for i in model.graph.initializer)
    if size > (1 << 31) - (64 << 20):
        data = os.path.basename(args.out) + ".data"
        onnx.save_model(model, args.out, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=1024)
    else:
        onnx.save_model(model, args.out)
    print(f"{args.out}: {args.shape} form {args.form}, {size / 1e6:.1f} MB of weights")


if __name__ == "__main__":
    main()
