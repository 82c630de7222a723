#!/usr/bin/python3
"""Writes quantized ONNX models with seeded random weights, for
tests/quant_models_test.cc (nothing can be downloaded here).

  qdq_resnet     a resnet-style CNN (stem + 3 basic blocks, one downsample,
                 global pool, Linear), statically quantized with PyTorch's FX
                 tooling (fbgemm: int8 weights per output channel, uint8
                 activations, reduce_range) and exported by torch.onnx at
                 opset 13: QuantizeLinear/DequantizeLinear around Conv, Add,
                 ReduceMean and Gemm.
  qdq_mobilenet  a mobilenet-style CNN (inverted residual blocks with
                 depthwise convolutions, ReLU6), same tooling.
  qop_resnet     qdq_resnet rewritten into the QOperator form: every
                 DQ -> Conv [-> Relu] -> Q group becomes one QLinearConv (what
                 ONNX Runtime's quantizer writes in QOperator mode); the rest
                 stays QDQ, and the output is the final uint8 tensor (no last
                 DequantizeLinear), so it is compared exactly.
  dyn_encoder    a 2-layer transformer encoder (d_model 64, 4 heads, seq 16,
                 decomposed LayerNorm, Softmax, GELU via Erf) dynamically
                 quantized the way ONNX Runtime's quantize_dynamic writes it:
                 DynamicQuantizeLinear -> MatMulInteger (int8 or uint8 weight
                 initializer + zero point) -> Cast -> Mul(x_scale * w_scale)
                 -> Add(bias), for the QKV, output and MLP projections.
  dyn_segnet     a small encoder-decoder segmentation CNN with every
                 convolution as DynamicQuantizeLinear -> ConvInteger -> Cast
                 -> Mul -> Add; outputs the logits and their ArgMax (int64).
  fusion_mix     one of each form fcb's FuseQuantized pass turns into an int8
                 kernel, with the operand types and parameters the models
                 above leave out, each its own output: ConvInteger and
                 MatMulInteger with uint8 weights and nonzero (per-column)
                 zero points (int32 outputs), QLinearConv with int8
                 activations, groups and stride 2, a depthwise QLinearConv,
                 QLinearMatMul with per-column scales, QDQ Conv with a float
                 bias and ReLU6 (requantized), QDQ Gemm with transB (float),
                 DequantizeLinear -> Mul -> Clip -> Add -> QuantizeLinear
                 (a table lookup).

  /usr/bin/python3 scripts/export_quant_models.py --out DIR
  /usr/bin/python3 scripts/export_quant_models.py --list   # name:input-shape per line
"""
import argparse
import io
import os
import sys
import warnings

import numpy as np

SEED = 20240607
MODELS = {
    "qdq_resnet": (1, 3, 64, 64),
    "qdq_mobilenet": (1, 3, 64, 64),
    "qop_resnet": (1, 3, 64, 64),
    "dyn_encoder": (1, 16, 64),
    "dyn_segnet": (1, 3, 64, 64),
    "fusion_mix": (1, 8, 10, 10),
}


# ------------------------------------------------------------------ torch (QDQ)

def torch_models(torch):
    nn = torch.nn

    def cbr(cin, cout, k, s=1, groups=1, act="relu"):
        layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        if act == "relu":
            layers.append(nn.ReLU())
        elif act == "relu6":
            layers.append(nn.ReLU6())
        return nn.Sequential(*layers)

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.a = cbr(cin, cout, 3, stride)
            self.b = cbr(cout, cout, 3, act=None)
            self.down = cbr(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else None
            self.relu = nn.ReLU()

        def forward(self, x):
            skip = self.down(x) if self.down is not None else x
            return self.relu(self.b(self.a(x)) + skip)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = cbr(3, 16, 3, 2)
            self.blocks = nn.Sequential(Basic(16, 16, 1), Basic(16, 32, 2), Basic(32, 64, 2))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))

    class InvRes(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            mid = cin * expand
            self.body = nn.Sequential(cbr(cin, mid, 1, act="relu6"), cbr(mid, mid, 3, stride, mid, act="relu6"),
                                      cbr(mid, cout, 1, act=None))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MobileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = cbr(3, 16, 3, 2, act="relu6")
            self.blocks = nn.Sequential(InvRes(16, 16, 1, 1), InvRes(16, 24, 2, 4), InvRes(24, 24, 1, 4),
                                        InvRes(24, 32, 2, 4), InvRes(32, 32, 1, 4))
            self.head = cbr(32, 128, 1, act="relu6")
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.head(self.blocks(self.stem(x)))), 1))

    return {"qdq_resnet": ResNet, "qdq_mobilenet": MobileNet}


def export_torch_qdq(name, out_path):
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + len(name))
    model = torch_models(torch)[name]().eval()
    with torch.no_grad():  # non-trivial BatchNorm parameters and statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(0.5 + torch.rand(c, generator=gen))
                m.bias.copy_((torch.rand(c, generator=gen) - 0.5) * 0.4)
                m.running_mean.copy_((torch.rand(c, generator=gen) - 0.5) * 0.2)
                m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
    shape = MODELS[name]
    example = torch.randn(*shape, generator=gen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(model, get_default_qconfig_mapping("fbgemm"), (example,))
        with torch.no_grad():
            for _ in range(8):  # calibration on seeded random data
                prepared(torch.randn(*shape, generator=gen))
        quantized = convert_fx(prepared)
        buf = io.BytesIO()
        torch.onnx.export(quantized, example, buf, opset_version=13, input_names=["input"],
                          output_names=["output"])
    with open(out_path, "wb") as f:
        f.write(buf.getvalue())


# ------------------------------------------------------------------ QDQ -> QOperator

def to_qoperator(src_path, out_path):
    """Rewrites every DQ(x) , DQ(w), DQ(bias) -> Conv [-> Relu] -> Q group of a
    QDQ model into one QLinearConv, and drops the final DequantizeLinear so the
    model outputs the quantized tensor."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(src_path)
    g = m.graph
    const = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    np_of = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64}
    for n in g.node:  # fold the constant subgraphs torch leaves (Identity, Cast, ConstantOfShape)
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        if n.op_type == "Constant":
            const[n.output[0]] = numpy_helper.to_array(a["value"])
        elif n.op_type in ("Identity", "Cast", "ConstantOfShape") and all(i in const for i in n.input):
            v = const[n.input[0]]
            if n.op_type == "Cast":
                v = v.astype(np_of[a["to"]])
            elif n.op_type == "ConstantOfShape":
                v = np.zeros(v, np.float32) if "value" not in a else np.full(v, numpy_helper.to_array(a["value"])[0])
            const[n.output[0]] = v
    producer = {o: n for n in g.node for o in n.output}
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def through_cast(name):  # Q -> Cast(same type) -> DQ: the Q's output
        n = producer.get(name)
        return n.input[0] if n is not None and n.op_type == "Cast" else name

    new_inits, removed, replaced = [], set(), {}
    counter = 0
    for conv in [n for n in g.node if n.op_type == "Conv"]:
        dqs = [producer.get(i) for i in conv.input]
        if len(dqs) != 3 or any(d is None or d.op_type != "DequantizeLinear" for d in dqs):
            continue
        dx, dw, db = dqs
        if not (dw.input[0] in const and db.input[0] in const):
            continue
        tail, relu = conv, None
        nxt = consumers.get(conv.output[0], [])
        if len(nxt) == 1 and nxt[0].op_type == "Relu":
            relu = nxt[0]
            tail = relu
            nxt = consumers.get(relu.output[0], [])
        if len(nxt) != 1 or nxt[0].op_type != "QuantizeLinear":
            continue
        q = nxt[0]
        yzp = const[q.input[2]]
        if relu is not None and int(yzp) != 0:  # a fused Relu is exact only when zero is the type's floor
            continue
        counter += 1
        p = f"qop{counter}_"

        def init(nm, arr):
            new_inits.append(numpy_helper.from_array(np.asarray(arr), p + nm))
            return p + nm

        x_q = through_cast(dx.input[0])
        inputs = [x_q, init("x_scale", const[dx.input[1]]), init("x_zp", const[dx.input[2]]),
                  init("w", const[dw.input[0]]), init("w_scale", const[dw.input[1]]), init("w_zp", const[dw.input[2]]),
                  init("y_scale", const[q.input[1]]), init("y_zp", yzp), init("bias", const[db.input[0]])]
        attrs = {x.name: helper.get_attribute_value(x) for x in conv.attribute}
        replaced[id(conv)] = helper.make_node("QLinearConv", inputs, [q.output[0]], name=p + "QLinearConv", **attrs)
        removed.update(id(n) for n in ([relu] if relu else []) + [q])
    nodes = []
    for n in g.node:
        if id(n) in replaced:
            nodes.append(replaced[id(n)])
        elif id(n) not in removed:
            nodes.append(n)
    # The output: the uint8 tensor under the last DequantizeLinear.
    last = [n for n in nodes if g.output[0].name in n.output][0]
    assert last.op_type == "DequantizeLinear", last.op_type
    nodes.remove(last)
    q_out = through_cast(last.input[0])
    for n in nodes:
        for i, o in enumerate(n.output):
            if o == q_out:
                n.output[i] = "output"
        for i, x in enumerate(n.input):
            if x == q_out:
                n.input[i] = "output"
    # Drop everything no longer needed (the old DQ nodes, folded constants).
    need = {"output"}
    keep = []
    for n in reversed(nodes):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(n.input)
    keep.reverse()
    inits = [t for t in list(g.initializer) + new_inits if t.name in need]
    out_type = onnx.helper.make_tensor_value_info("output", onnx.TensorProto.UINT8, [1, 10])
    graph = helper.make_graph(keep, "qop_resnet", list(g.input), [out_type], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="fcb-export-quant")
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
    return counter


# ------------------------------------------------------------------ dynamic quantization (onnx.helper)

class Builder:
    """A tiny graph builder: numbered tensor names, initializers from numpy."""

    def __init__(self, rng):
        from onnx import helper, numpy_helper
        self.h, self.nh, self.rng = helper, numpy_helper, rng
        self.nodes, self.inits, self.n = [], [], 0
        self.dq_cache = {}

    def name(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def const(self, hint, arr):
        nm = self.name(hint)
        self.inits.append(self.nh.from_array(np.asarray(arr), nm))
        return nm

    def op(self, op, inputs, n_out=1, hint=None, **attrs):
        outs = [self.name(hint or op) for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op, inputs, outs, name=self.name(op + "_node"), **attrs))
        return outs if n_out > 1 else outs[0]

    def dyn_quant(self, x):
        # One DynamicQuantizeLinear per activation, shared by its consumers
        # (as quantize_dynamic does).
        if x not in self.dq_cache:
            self.dq_cache[x] = self.op("DynamicQuantizeLinear", [x], 3, hint=x + "_q")
        return self.dq_cache[x]

    @staticmethod
    def quant_weight(w, signed, axis=None):
        """w -> (q, scale, zero_point): symmetric int8 or asymmetric uint8,
        per tensor, or per slice along `axis`."""
        red = None if axis is None else tuple(i for i in range(w.ndim) if i != axis)
        lo = np.minimum(w.min(axis=red), 0).astype(np.float32)
        hi = np.maximum(w.max(axis=red), 0).astype(np.float32)
        if signed:
            scale = (np.maximum(-lo, hi) / 127).astype(np.float32)
            zp = np.zeros_like(scale, np.int8)
            bshape = [1] * w.ndim
            if axis is not None:
                bshape[axis] = -1
            q = np.clip(np.rint(w / scale.reshape(bshape)), -127, 127).astype(np.int8)
        else:
            scale = ((hi - lo) / 255).astype(np.float32)
            zpf = np.clip(np.rint(-lo / scale), 0, 255)
            zp = zpf.astype(np.uint8)
            bshape = [1] * w.ndim
            if axis is not None:
                bshape[axis] = -1
            q = np.clip(np.rint(w / scale.reshape(bshape)) + zpf.reshape(bshape), 0, 255).astype(np.uint8)
        return q, scale, zp

    def scale_bias(self, acc, x_scale, w_scale, bias, bshape):
        """Cast(acc) * (x_scale * w_scale) + bias, the tail quantize_dynamic writes."""
        f = self.op("Cast", [acc], to=1, hint="acc_f")
        ws = self.const("w_scale", w_scale.reshape(bshape) if w_scale.ndim else w_scale)
        s = self.op("Mul", [x_scale, ws], hint="scale")
        y = self.op("Mul", [f, s], hint="scaled")
        return self.op("Add", [y, self.const("bias", bias.reshape(bshape).astype(np.float32))], hint="biased")

    def linear(self, x, cin, cout, signed=True, per_channel=False):
        w = (self.rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        q, scale, zp = self.quant_weight(w, signed, axis=1 if per_channel else None)
        xq, xs, xz = self.dyn_quant(x)
        acc = self.op("MatMulInteger", [xq, self.const("W", q), xz, self.const("W_zp", zp)], hint="acc")
        return self.scale_bias(acc, xs, scale, b, [cout] if per_channel else [cout])

    def conv(self, x, cin, cout, k, stride=1, signed=False, per_channel=False):
        w = (self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        q, scale, zp = self.quant_weight(w, signed, axis=0 if per_channel else None)
        xq, xs, xz = self.dyn_quant(x)
        acc = self.op("ConvInteger", [xq, self.const("W", q), xz, self.const("W_zp", zp)], hint="acc",
                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        return self.scale_bias(acc, xs, scale, b, [1, cout, 1, 1] if per_channel else [cout, 1, 1])

    def layer_norm(self, x, d):
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        c = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Mul", [c, c])], axes=[-1], keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.const("eps", np.float32(1e-5))])])
        n = self.op("Div", [c, std])
        gamma = (1 + 0.1 * self.rng.standard_normal(d)).astype(np.float32)
        beta = (0.1 * self.rng.standard_normal(d)).astype(np.float32)
        return self.op("Add", [self.op("Mul", [n, self.const("gamma", gamma)]), self.const("beta", beta)])

    def model(self, name, inputs, outputs, opset=13):
        import onnx
        graph = self.h.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = self.h.make_model(graph, opset_imports=[self.h.make_opsetid("", opset)],
                              producer_name="fcb-export-quant")
        onnx.checker.check_model(m)
        return m


def build_encoder(out_path, layers=2, d=64, heads=4, seq=16, ff=256):
    import onnx
    from onnx import TensorProto, helper
    b = Builder(np.random.default_rng(SEED + 1))
    dh = d // heads
    x = "input"
    for layer in range(layers):
        # int8 symmetric weights for the attention (per tensor in layer 0, per
        # output column in layer 1), uint8 asymmetric ones for the MLP.
        pc = layer == 1
        q, k, v = (b.linear(x, d, d, signed=True, per_channel=pc) for _ in range(3))
        split = b.const("heads_shape", np.array([1, seq, heads, dh], np.int64))
        qh = b.op("Transpose", [b.op("Reshape", [q, split])], perm=[0, 2, 1, 3])
        kh = b.op("Transpose", [b.op("Reshape", [k, split])], perm=[0, 2, 3, 1])
        vh = b.op("Transpose", [b.op("Reshape", [v, split])], perm=[0, 2, 1, 3])
        scores = b.op("Mul", [b.op("MatMul", [qh, kh]), b.const("inv_sqrt_dh", np.float32(1 / np.sqrt(dh)))])
        attn = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), vh])
        merged = b.op("Reshape", [b.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                                  b.const("merge_shape", np.array([1, seq, d], np.int64))])
        x = b.layer_norm(b.op("Add", [x, b.linear(merged, d, d, signed=True, per_channel=pc)]), d)
        h = b.linear(x, d, ff, signed=False)
        gelu = b.op("Mul", [b.op("Mul", [h, b.const("half", np.float32(0.5))]),
                            b.op("Add", [b.op("Erf", [b.op("Div", [h, b.const("sqrt2", np.float32(np.sqrt(2)))])]),
                                         b.const("one", np.float32(1))])])
        x = b.layer_norm(b.op("Add", [x, b.linear(gelu, ff, d, signed=False)]), d)
    b.nodes.append(helper.make_node("Identity", [x], ["output"], name="output_identity"))
    m = b.model("dyn_encoder", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, seq, d])],
                [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, seq, d])])
    onnx.save(m, out_path)


def build_segnet(out_path, classes=5):
    import onnx
    from onnx import TensorProto, helper
    b = Builder(np.random.default_rng(SEED + 2))
    relu = lambda t: b.op("Relu", [t])
    x = "input"
    # uint8 asymmetric and int8 symmetric weights, per tensor (ONNX Runtime's
    # ConvInteger refuses per-channel weight zero points).
    e1 = relu(b.conv(x, 3, 16, 3, 2))                                   # 32x32
    e2 = relu(b.conv(e1, 16, 32, 3, 2, signed=True))  # 16x16
    e3 = relu(b.conv(e2, 32, 32, 3, 1, signed=True))
    scales = b.const("up2", np.array([1, 1, 2, 2], np.float32))
    up = b.op("Resize", [e3, "", scales], mode="nearest")               # 32x32
    cat = b.op("Concat", [up, e1], axis=1)
    d1 = relu(b.conv(cat, 48, 16, 3, 1))
    logits = b.conv(d1, 16, classes, 1, 1, signed=True)
    b.nodes.append(helper.make_node("Resize", [logits, "", scales], ["output"], name="final_resize",
                                    mode="linear"))
    b.nodes.append(helper.make_node("ArgMax", ["output"], ["labels"], name="labels_argmax", axis=1, keepdims=0))
    m = b.model("dyn_segnet", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
                [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, classes, 64, 64]),
                 helper.make_tensor_value_info("labels", TensorProto.INT64, [1, 64, 64])])
    onnx.save(m, out_path)


def build_fusion_mix(out_path):
    import onnx
    from onnx import TensorProto, helper
    b = Builder(np.random.default_rng(SEED + 3))
    rng = b.rng
    c, hw = 8, 10
    f32 = lambda a: np.asarray(a, np.float32)
    xu = b.op("QuantizeLinear", ["input", b.const("xs", f32(0.03)), b.const("xz", np.uint8(120))], hint="xu8")
    xs = b.op("QuantizeLinear", ["input", b.const("xs", f32(0.025)), b.const("xz", np.int8(-3))], hint="xs8")
    outs = []

    def out(name, value, elem, shape):
        b.nodes.append(helper.make_node("Identity", [value], [name], name=name + "_identity"))
        outs.append(helper.make_tensor_value_info(name, elem, shape))

    # ConvInteger: uint8 x and weights, nonzero weight zero point (row sums), int32 out.
    w = rng.integers(0, 256, (12, c, 3, 3)).astype(np.uint8)
    acc = b.op("ConvInteger", [xu, b.const("W", w), b.const("xz", np.uint8(120)), b.const("wz", np.uint8(131))],
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    out("conv_integer", acc, TensorProto.INT32, [1, 12, hw, hw])
    # MatMulInteger: rank-3 uint8 x, uint8 weights with per-column zero points.
    xm = b.op("Reshape", [xu, b.const("shape", np.array([1, c, hw * hw], np.int64))])
    wm = rng.integers(0, 256, (hw * hw, 24)).astype(np.uint8)
    acc = b.op("MatMulInteger", [xm, b.const("W", wm), b.const("xz", np.uint8(120)),
                                 b.const("wz", rng.integers(100, 156, 24).astype(np.uint8))])
    out("matmul_integer", acc, TensorProto.INT32, [1, c, 24])
    # QLinearConv, int8 activations in and out, groups 2, stride 2, per-channel weights, int32 bias.
    wq = rng.integers(-127, 128, (16, c // 2, 3, 3)).astype(np.int8)
    y = b.op("QLinearConv", [xs, b.const("xs", f32(0.025)), b.const("xz", np.int8(-3)), b.const("W", wq),
                             b.const("ws", f32(rng.uniform(0.002, 0.01, 16))), b.const("wz", np.zeros(16, np.int8)),
                             b.const("ys", f32(0.05)), b.const("yz", np.int8(7)),
                             b.const("B", rng.integers(-500, 500, 16).astype(np.int32))],
             kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], group=2)
    out("qlinear_conv_s8", y, TensorProto.INT8, [1, 16, 5, 5])
    # Depthwise QLinearConv (uint8).
    wd = rng.integers(-127, 128, (c, 1, 3, 3)).astype(np.int8)
    y = b.op("QLinearConv", [xu, b.const("xs", f32(0.03)), b.const("xz", np.uint8(120)), b.const("W", wd),
                             b.const("ws", f32(rng.uniform(0.005, 0.02, c))), b.const("wz", np.zeros(c, np.int8)),
                             b.const("ys", f32(0.04)), b.const("yz", np.uint8(128))],
             kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=c)
    out("qlinear_depthwise", y, TensorProto.UINT8, [1, c, hw, hw])
    # QLinearMatMul, per-column weight scales.
    wq = rng.integers(-127, 128, (hw * hw, 16)).astype(np.int8)
    y = b.op("QLinearMatMul", [xm, b.const("xs", f32(0.03)), b.const("xz", np.uint8(120)), b.const("W", wq),
                               b.const("ws", f32(rng.uniform(0.001, 0.003, 16))), b.const("wz", np.zeros(16, np.int8)),
                               b.const("ys", f32(0.2)), b.const("yz", np.uint8(100))])
    out("qlinear_matmul", y, TensorProto.UINT8, [1, c, 16])
    # QDQ Conv, float bias, ReLU6, requantized, then dequantized (float out).
    dx = b.op("DequantizeLinear", [xu, b.const("xs", f32(0.03)), b.const("xz", np.uint8(120))])
    wq = rng.integers(-127, 128, (12, c, 3, 3)).astype(np.int8)
    dw = b.op("DequantizeLinear", [b.const("W", wq), b.const("ws", f32(rng.uniform(0.002, 0.01, 12))),
                                   b.const("wz", np.zeros(12, np.int8))], axis=0)
    y = b.op("Conv", [dx, dw, b.const("B", f32(rng.standard_normal(12) * 0.1))], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1])
    y = b.op("Clip", [y, b.const("lo", f32(0)), b.const("hi", f32(6))])
    yq = b.op("QuantizeLinear", [y, b.const("ys", f32(0.03)), b.const("yz", np.uint8(0))])
    out("qdq_conv", b.op("DequantizeLinear", [yq, b.const("ys", f32(0.03)), b.const("yz", np.uint8(0))]),
        TensorProto.FLOAT, [1, 12, hw, hw])
    # QDQ Gemm with transB, per-row weight scales, float output.
    x2 = b.op("Reshape", [xu, b.const("shape", np.array([c, hw * hw], np.int64))])
    dx2 = b.op("DequantizeLinear", [x2, b.const("xs", f32(0.03)), b.const("xz", np.uint8(120))])
    wg = rng.integers(-127, 128, (12, hw * hw)).astype(np.int8)
    dwg = b.op("DequantizeLinear", [b.const("W", wg), b.const("ws", f32(rng.uniform(0.001, 0.004, 12))),
                                    b.const("wz", np.zeros(12, np.int8))], axis=0)
    y = b.op("Gemm", [dx2, dwg, b.const("C", f32(rng.standard_normal(12) * 0.1))], transB=1)
    out("qdq_gemm", y, TensorProto.FLOAT, [c, 12])
    # DequantizeLinear -> scalar float functions -> QuantizeLinear (int8 in, uint8 out): a table lookup.
    dv = b.op("DequantizeLinear", [xs, b.const("xs", f32(0.025)), b.const("xz", np.int8(-3))])
    v = b.op("Clip", [b.op("Mul", [dv, b.const("k", f32(0.5))]), b.const("lo", f32(-1)), b.const("hi", f32(2))])
    v = b.op("Add", [v, b.const("k", f32(0.25))])
    out("qdq_lookup", b.op("QuantizeLinear", [v, b.const("ys", f32(0.01)), b.const("yz", np.uint8(90))]),
        TensorProto.UINT8, [1, c, hw, hw])
    m = b.model("fusion_mix", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, c, hw, hw])], outs)
    onnx.save(m, out_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder to write <model>.onnx into")
    ap.add_argument("--list", action="store_true", help="print name:input-shape per model and exit")
    args = ap.parse_args()
    if args.list:
        for name, shape in MODELS.items():
            print(f"{name}:{','.join(str(d) for d in shape)}")
        return
    if not args.out:
        ap.error("--out is required")
    os.makedirs(args.out, exist_ok=True)

    def path(name):
        return os.path.join(args.out, name + ".onnx")

    def write(name, fn):  # via a temporary file, so a failed export leaves no half model
        tmp = path(name) + ".tmp"
        fn(tmp)
        os.replace(tmp, path(name))
        print(f"wrote {path(name)}", file=sys.stderr)

    write("qdq_resnet", lambda p: export_torch_qdq("qdq_resnet", p))
    write("qdq_mobilenet", lambda p: export_torch_qdq("qdq_mobilenet", p))
    write("qop_resnet", lambda p: to_qoperator(path("qdq_resnet"), p))
    write("dyn_encoder", build_encoder)
    write("dyn_segnet", build_segnet)
    write("fusion_mix", build_fusion_mix)


if __name__ == "__main__":
    main()
