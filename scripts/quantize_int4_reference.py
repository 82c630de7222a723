#!/usr/bin/python3
"""The oracle of precision "int4" (src/passes/quantize_int4.cc), written
independently in numpy: reads a float ONNX model and writes the same
quantization as an ONNX file that ONNX Runtime runs, so that fcb's int4
compile of the float model can be compared against ONNX Runtime on the
pre-quantized file (tests/int4_precision_test.cc).

  quantize_int4_reference.py IN.onnx OUT.onnx [--int4-head] [--accuracy-level 4|0]
  quantize_int4_reference.py --mlp OUT.onnx     a small float MLP with odd K
                                               (MatMul, Gemm transB + bias + alpha)
  quantize_int4_reference.py --tied OUT.onnx    a tied embedding and LM head

The rules, as the pass applies them:
  - MatMul(A, B) and Gemm(A, B, C) (transA 0) with B a float32 initializer of
    rank 2 holding >= 1024 finite values (for MatMul also B = Transpose(E) of
    such an initializer: a tied head), K <= 65536: com.microsoft
    MatMulNBits, block 32, no zero points (default 2^(bits-1)),
    accuracy_level 4 (--accuracy-level 0 for int4_activations "float"); Gemm's alpha multiplies B first (in double, rounded to
    float32), C becomes an Add after it (beta must be 1 here).
  - bits 4, or 8 for the LM head: a node whose output reaches a graph output
    through single-reader Reshape/Squeeze/Unsqueeze/Flatten/Identity/Add/Mul/
    Div/Tanh nodes (4 with --int4-head).
  - Gather axis 0 of a float32 initializer [V, H] (>= 1024 values) whose
    indices are a graph input (directly or through Cast/Reshape/Squeeze/
    Unsqueeze/Flatten/Identity): int8 values per row block of 32 (4 with
    --int4-head) with one float scale per block, written as an opset-21
    blocked DequantizeLinear (axis 1, block_size 32) of an int8 initializer
    feeding the Gather.
  - Per block of 32 values (the last one partial, its padding q = 0):
    e = the first value of largest magnitude, scale = float32(e / -2^(bits-1)),
    q = clip(rint(w / scale), -2^(bits-1), 2^(bits-1) - 1) with the division in
    float32 and numpy's rint rounding half to even; scale 0 and q 0 for an
    all-zero block. MatMulNBits stores q + 2^(bits-1) (4 bits: element 2i in
    the low nibble of byte i).
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCK = 32
MIN_ELEMENTS = 1024
MAX_K = 1 << 16
HEAD_THROUGH = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Add", "Mul", "Div", "Tanh"}
IDS_THROUGH = {"Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}


def quantize_blocks(w, bits):
    """w [k, n] float32 -> q int8 [n, blocks, BLOCK], scales float32 [n, blocks]."""
    k, n = w.shape
    blocks = -(-k // BLOCK)
    wp = np.zeros((blocks * BLOCK, n), np.float32)
    wp[:k] = w
    wb = np.ascontiguousarray(wp.T.reshape(n, blocks, BLOCK))
    first = np.argmax(np.abs(wb), axis=2)  # the first of the largest magnitude
    e = np.take_along_axis(wb, first[..., None], axis=2)[..., 0]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    scale = (e / np.float32(lo)).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1), scale).astype(np.float32)
    q = np.rint((wb / safe[..., None]).astype(np.float32))
    q = np.clip(q, lo, hi)
    q[scale == 0] = 0
    return q.astype(np.int8), scale


def nbits_operands(w, bits):
    """MatMulNBits' B uint8 [n, blocks, BLOCK * bits / 8] and scales [n * blocks]."""
    q, scale = quantize_blocks(w, bits)
    u = (q.astype(np.int32) + (1 << (bits - 1))).astype(np.uint8)
    if bits == 4:
        u = (u[..., 0::2] | (u[..., 1::2] << 4)).astype(np.uint8)
    return u, scale.reshape(-1)


def convert(model, int4_head=False, accuracy_level=4):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    outputs = {o.name for o in g.output}
    inputs = {i.name for i in g.input}
    producer, readers = {}, {}
    for n in g.node:
        for o in n.output:
            producer[o] = n
        for i in n.input:
            readers.setdefault(i, []).append(n)

    def reaches_output(v):
        for _ in range(16):
            if v in outputs:
                return True
            r = readers.get(v, [])
            if len(r) != 1 or r[0].op_type not in HEAD_THROUGH or r[0].domain not in ("", "ai.onnx"):
                return False
            v = r[0].output[0]
        return False

    def token_ids(v):
        for _ in range(16):
            if v in inputs:
                return True
            p = producer.get(v)
            if p is None or p.op_type not in IDS_THROUGH:
                return False
            v = p.input[0]
        return False

    def attr(n, name, default):
        for a in n.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    head_bits = 4 if int4_head else 8
    new_nodes, new_inits, drop = [], [], set()
    for n in g.node:
        if n.domain in ("", "ai.onnx") and n.op_type == "Gather" and len(n.input) == 2 and n.input[0] in inits:
            t = numpy_helper.to_array(inits[n.input[0]])
            if (t.dtype == np.float32 and t.ndim == 2 and attr(n, "axis", 0) in (0, -2) and token_ids(n.input[1])
                    and t.size >= MIN_ELEMENTS and t.shape[1] <= MAX_K and np.isfinite(t).all()):
                q, scale = quantize_blocks(t.T, head_bits)  # rows as columns: [V, blocks, BLOCK]
                v, h = t.shape
                qn, sn = n.input[0] + "_q", n.input[0] + "_scale"
                new_inits += [numpy_helper.from_array(q.reshape(v, -1)[:, :h].copy(), qn),
                              numpy_helper.from_array(scale, sn)]
                deq = n.input[0] + "_dequantized"
                new_nodes.append(helper.make_node("DequantizeLinear", [qn, sn], [deq], axis=1, block_size=BLOCK))
                new_nodes.append(helper.make_node("Gather", [deq, n.input[1]], list(n.output), name=n.name, axis=0))
                drop.add(n.input[0])
                continue
        tied = None  # MatMul(x, Transpose(E)): a tied head, B = E^T
        if n.domain in ("", "ai.onnx") and n.op_type == "MatMul" and n.input[1] not in inits:
            t = producer.get(n.input[1])
            if (t is not None and t.op_type == "Transpose" and t.input[0] in inits
                    and list(attr(t, "perm", [1, 0])) == [1, 0]):
                tied = numpy_helper.to_array(inits[t.input[0]])
        if n.domain in ("", "ai.onnx") and n.op_type in ("MatMul", "Gemm") and (n.input[1] in inits or tied is not None):
            b = tied.T if tied is not None else numpy_helper.to_array(inits[n.input[1]])
            gemm = n.op_type == "Gemm"
            ok = b.dtype == np.float32 and b.ndim == 2 and b.size >= MIN_ELEMENTS and np.isfinite(b).all()
            if ok and gemm:
                ok = attr(n, "transA", 0) == 0 and attr(n, "beta", 1.0) == 1.0
            if ok:
                w = b.T if gemm and attr(n, "transB", 0) else b
                alpha = attr(n, "alpha", 1.0) if gemm else 1.0
                if alpha != 1.0:
                    w = (np.float64(np.float32(alpha)) * w.astype(np.float64)).astype(np.float32)
                k, cols = w.shape
                ok = k <= MAX_K
            if ok:
                bits = head_bits if reaches_output(n.output[0]) else 4
                qb, scales = nbits_operands(np.ascontiguousarray(w), bits)
                bn, sn = n.input[1] + "_nbits", n.input[1] + "_nbits_scale"
                new_inits += [numpy_helper.from_array(qb, bn), numpy_helper.from_array(scales, sn)]
                has_c = gemm and len(n.input) > 2 and n.input[2]
                y = n.output[0] + "_unbiased" if has_c else n.output[0]
                new_nodes.append(helper.make_node("MatMulNBits", [n.input[0], bn, sn], [y], name=n.name,
                                                  domain="com.microsoft", K=k, N=cols, bits=bits,
                                                  block_size=BLOCK, accuracy_level=accuracy_level))
                if has_c:
                    new_nodes.append(helper.make_node("Add", [y, n.input[2]], [n.output[0]], name=n.name + "/bias"))
                if tied is None:
                    drop.add(n.input[1])
                continue
        new_nodes.append(n)
    still = {i for n in new_nodes for i in n.input}
    kept = [t for t in g.initializer if t.name not in drop or t.name in still]
    del g.node[:]
    g.node.extend(new_nodes)
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    opsets = {o.domain: o.version for o in model.opset_import}
    opsets[""] = max(opsets.get("", 21), 21)  # blocked DequantizeLinear
    opsets["com.microsoft"] = 1
    del model.opset_import[:]
    model.opset_import.extend(helper.make_opsetid(d, v) for d, v in opsets.items())
    return model


def mlp():
    """x [3, 100] -> MatMul [100, 96] -> Relu -> Gemm(transB, alpha 0.5, C [80]) -> Relu
    -> MatMul [80, 40] (the head, 8 bits) -> y; K = 100 and 96 leave partial blocks."""
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((100, 96)) / 10).astype(np.float32)
    w1[:, 5] = 0.0                      # an all-zero column: all-zero blocks
    w1[64:, 7] = 0.0                    # a zero tail block in one column
    w2 = (rng.standard_normal((80, 96)) / 10).astype(np.float32)  # [N, K], transB
    c2 = rng.standard_normal(80).astype(np.float32)
    w3 = (rng.standard_normal((80, 40)) / 9).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
             helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("Gemm", ["r1", "w2", "c2"], ["h2"], name="fc2", transB=1, alpha=0.5),
             helper.make_node("Relu", ["h2"], ["r2"]),
             helper.make_node("MatMul", ["r2", "w3"], ["y"], name="head")]
    graph = helper.make_graph(
        nodes, "mlp_odd_k", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 100])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 40])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(c2, "c2"),
         numpy_helper.from_array(w3, "w3")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="fcb int4 oracle")


def tied():
    """ids [1, 5] -> Gather(E [300, 64]) -> MatMul [64, 64] -> MatMul(., Transpose(E)) -> logits [1, 5, 300]:
    a tied embedding and head (the head 8-bit along H, like the table's rows)."""
    rng = np.random.default_rng(11)
    e = (0.5 * rng.standard_normal((300, 64))).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    nodes = [helper.make_node("Gather", ["E", "ids"], ["x"], name="embed"),
             helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
             helper.make_node("Transpose", ["E"], ["ET"], name="tie", perm=[1, 0]),
             helper.make_node("MatMul", ["h", "ET"], ["logits"], name="lm_head")]
    graph = helper.make_graph(
        nodes, "tied_head", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 5])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5, 300])],
        [numpy_helper.from_array(e, "E"), numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="fcb int4 oracle")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="IN.onnx OUT.onnx, or OUT.onnx with --mlp")
    ap.add_argument("--int4-head", action="store_true")
    ap.add_argument("--accuracy-level", type=int, choices=[0, 4], default=4,
                    help="MatMulNBits accuracy_level: 4 (int8 activations, fcb's default int4_activations) "
                         "or 0 (float: int4_activations \"float\")")
    ap.add_argument("--mlp", action="store_true", help="write the float MLP with odd K to OUT instead")
    ap.add_argument("--tied", action="store_true", help="write a float model with a tied embedding and head to OUT")
    a = ap.parse_args()
    if a.mlp or a.tied:
        onnx.save(mlp() if a.mlp else tied(), a.files[-1])
        return
    if len(a.files) != 2:
        ap.error("give IN.onnx OUT.onnx")
    onnx.save(convert(onnx.load(a.files[0]), a.int4_head, a.accuracy_level), a.files[1])


if __name__ == "__main__":
    main()
