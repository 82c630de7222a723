#!/usr/bin/python3
"""Writes test models built node by node with onnx.helper: graph structures
that exporters produce and the torchvision models do not have.

  kws_cnn  a keyword-spotting style CNN: an NHWC input 1x76x32x1 turned into
           NCHW by a Reshape (as converters write it when C = 1), pools right
           after it while C is still 1, alternating 1x3 and 3x1 convolutions
           with asymmetric pads, a SAME_UPPER stride-2 convolution, max-pools
           with strides (2,2) and (1,2), ceil-mode pools, a final
           Transpose + Reshape. Every window is resolved on the NCHW shape
           whatever layout its input has by then (the layout pass once read
           the NHWC dims of a pool's input and refused this model).

  lstm_features, lstm_input_forget, gru_features, rnn_features
           one recurrent node each, with the attributes PyTorch never
           writes: explicit activations with alpha/beta per direction,
           clip, peepholes, input_forget, sequence_lens, reverse,
           linear_before_reset 0; Y, Y_h (and Y_c) concatenated as the output.

  kws_cnn_external
           kws_cnn saved with every initializer of 64 bytes or more in
           kws_cnn_external.weights beside the model (external data).

  conv1d_codec
           1-D convolutions as audio models use them (torch export):
           stride 4, dilation, groups, depthwise, ConvTranspose1d with
           output_padding, GroupNorm, GELU.

  grouped_cnn
           2-D grouped convolutions with 2, 4, 8 and 16 channels per group
           (ResNeXt's bottleneck widths), strided, dilated and with a
           residual add, and one with 32 per group (torch export).

  resnet18_fp16
           torchvision resnet18 as `.half()` exports it: float16 weights,
           a Cast of the float32 input, float16 compute and output.

Control flow (tests/control_flow_models_test.cc), each run with its own
inputs (DIR/CASE.feeds/NAME.npy) against ONNX Runtime (DIR/CASE.ref):

  if_runtime   torch.jit.script'ed: Linear, then `if bool(c)` on a graph-input
               bool scalar choosing between two expressions that use the
               outer Linear's output and the input; cases if_runtime_true and
               if_runtime_false (c = True / False).
  loop_const   torch.jit.script'ed `for i in range(input.size(0))` over a
               static input: PyTorch exports a Loop whose trip count is a
               constant, its body reading the outer input by the iteration number.
  scan_sum     built with onnx.helper (PyTorch exports no Scan): a Scan-16 with
               a state and two scan inputs (one along axis 1, one reversed),
               two scan outputs (one along axis 1, one reversed), and an outer
               initializer used in the body.

Weights are seeded; ONNX Runtime gives the reference (prepare_testdata.sh).

  --out DIR   write every model into DIR (and the control-flow cases' feeds)
  --list      print NAME:INPUT_SHAPE per model, one per line
  --list-control-flow   print CASE:MODEL per control-flow case, one per line
"""
import argparse
import os

SEED = 20261202


def kws_cnn(np, onnx):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(SEED)
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    channels = [1]

    def conv(x, out, oc, k, **attrs):
        c = channels[-1]
        w = (rng.standard_normal((oc, c, *k)) / np.sqrt(c * k[0] * k[1])).astype(np.float32)
        b = (rng.standard_normal(oc) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, const(out + "_w", w), const(out + "_b", b)], [out],
                                      kernel_shape=list(k), **attrs))
        channels.append(oc)
        return out

    def act(x, out, op="Relu", **attrs):
        nodes.append(helper.make_node(op, [x], [out], **attrs))
        return out

    def pool(x, out, op, k, s, **attrs):
        nodes.append(helper.make_node(op, [x], [out], kernel_shape=list(k), strides=list(s), **attrs))
        return out

    x = "input"
    nodes.append(helper.make_node("Reshape", [x, const("to_nchw", np.array([1, 1, 76, 32], np.int64))], ["nchw"]))
    x = pool("nchw", "pool0", "MaxPool", (2, 1), (2, 1))            # 1x1x38x32, C = 1
    x = pool(x, "pool1", "MaxPool", (2, 2), (2, 2))                  # 1x1x19x16, still C = 1
    x = act(conv(x, "conv1", 16, (1, 3), pads=[0, 1, 0, 1]), "relu1")
    x = act(conv(x, "conv2", 16, (3, 1), pads=[2, 0, 0, 0]), "relu2", "LeakyRelu", alpha=0.2)  # 1x16x19x16
    x = pool(x, "pool2", "MaxPool", (2, 2), (2, 2))                  # 1x16x9x8
    x = act(conv(x, "conv3", 24, (1, 3), auto_pad="SAME_UPPER", strides=[2, 2]), "relu3")  # 1x24x5x4
    x = pool(x, "pool3", "MaxPool", (1, 2), (1, 2), ceil_mode=1)     # 1x24x5x2
    x = act(conv(x, "conv4", 32, (3, 1), pads=[0, 0, 1, 0]), "relu4")  # 1x32x4x2
    x = act(conv(x, "conv5", 32, (1, 3), pads=[0, 2, 0, 0]), "relu5")  # 1x32x4x2
    x = pool(x, "pool4", "AveragePool", (2, 2), (2, 2), ceil_mode=1)  # 1x32x2x1
    nodes.append(helper.make_node("Transpose", [x], ["nhwc"], perm=[0, 2, 3, 1]))
    nodes.append(helper.make_node("Reshape", ["nhwc", const("flat", np.array([1, -1], np.int64))], ["output"]))
    graph = helper.make_graph(nodes, "kws_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 76, 32, 1])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def recurrent(np, onnx, op, seq, batch, inp, hidden, attrs, lens=None, layout=0, peepholes=False, state=True):
    """One RNN/GRU/LSTM node with every other input a seeded constant; the
    output is Y and Y_h (and Y_c) flattened and concatenated, so one tensor
    checks them all."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(SEED + hash(op) % 1000 + seq * 7 + hidden)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    inits, ins = [], ["input"]

    def const(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    scale = 1.0 / np.sqrt(hidden)
    ins.append(const("W", (rng.standard_normal((dirs, gates * hidden, inp)) * scale).astype(np.float32)))
    ins.append(const("R", (rng.standard_normal((dirs, gates * hidden, hidden)) * scale).astype(np.float32)))
    ins.append(const("B", (rng.standard_normal((dirs, 2 * gates * hidden)) * 0.2).astype(np.float32)))
    ins.append(const("lens", np.array(lens, np.int32)) if lens else "")
    st = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    ins.append(const("h0", (rng.standard_normal(st) * 0.5).astype(np.float32)) if state else "")
    if op == "LSTM":
        ins.append(const("c0", (rng.standard_normal(st) * 0.5).astype(np.float32)) if state else "")
        ins.append(const("P", (rng.standard_normal((dirs, 3 * hidden)) * 0.3).astype(np.float32)) if peepholes else "")
    while ins[-1] == "":
        ins.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    nodes = [helper.make_node(op, ins, outs, hidden_size=hidden, layout=layout, **attrs)]
    flat = const("flat", np.array([1, -1], np.int64))
    for o in outs:
        nodes.append(helper.make_node("Reshape", [o, flat], [o + "_flat"]))
    nodes.append(helper.make_node("Concat", [o + "_flat" for o in outs], ["output"], axis=1))
    xs = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    total = seq * dirs * batch * hidden + (len(outs) - 1) * dirs * batch * hidden
    graph = helper.make_graph(nodes, op.lower() + "_features",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(xs))],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, total])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def lstm_features(np, onnx):
    # Bidirectional, peepholes, clip, explicit activations with alpha/beta for
    # each direction, per-row sequence lengths (one row runs no step).
    return recurrent(np, onnx, "LSTM", 5, 3, 6, 8, dict(
        direction="bidirectional", clip=2.5,
        activations=["HardSigmoid", "LeakyRelu", "Tanh", "Sigmoid", "ScaledTanh", "Softsign"],
        activation_alpha=[0.25, 0.1, 0.8], activation_beta=[0.45, 1.2]), lens=[5, 0, 4], peepholes=True)


def lstm_input_forget(np, onnx):
    # input_forget couples the gates; no initial state. (layout 1 is checked by
    # the ONNX node tests *_batchwise: ONNX Runtime refuses it.)
    return recurrent(np, onnx, "LSTM", 4, 2, 5, 6, dict(input_forget=1), state=False)


def gru_features(np, onnx):
    # Reverse, reset applied before the linear map (the ONNX
    # default; PyTorch exports linear_before_reset=1), sequence lengths, clip.
    return recurrent(np, onnx, "GRU", 6, 2, 4, 7, dict(
        direction="reverse", clip=3.0, activations=["Sigmoid", "Elu"], activation_alpha=[0.7]),
        lens=[3, 6])


def rnn_features(np, onnx):
    # Bidirectional with different functions per direction.
    return recurrent(np, onnx, "RNN", 4, 2, 3, 5, dict(
        direction="bidirectional", activations=["Affine", "ThresholdedRelu"], activation_alpha=[0.6, 0.1],
        activation_beta=[0.2]), lens=[4, 1])


def if_runtime(np, onnx):
    import io
    import torch

    torch.manual_seed(SEED)

    class IfModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, input, c):
            h = self.lin(input)
            if bool(c):
                y = torch.relu(h) * 2.0 + input
            else:
                y = torch.tanh(h) - input
            return y

    f = io.BytesIO()
    torch.onnx.export(torch.jit.script(IfModel()), (torch.randn(2, 3), torch.tensor(True)), f,
                      input_names=["input", "c"], output_names=["output"], opset_version=13)
    model = onnx.load_from_string(f.getvalue())
    assert any(n.op_type == "If" for n in model.graph.node), "PyTorch no longer exports an If here"
    return model


def loop_const(np, onnx):
    import io
    import torch

    class LoopModel(torch.nn.Module):
        def forward(self, input):
            acc = torch.zeros_like(input[0])
            for i in range(input.size(0)):
                acc = acc * 0.5 + torch.sin(input[i] + float(i))
            return acc

    f = io.BytesIO()
    torch.onnx.export(torch.jit.script(LoopModel()), (torch.randn(4, 3),), f,
                      input_names=["input"], output_names=["output"], opset_version=13)
    model = onnx.load_from_string(f.getvalue())
    assert any(n.op_type == "Loop" for n in model.graph.node), "PyTorch no longer exports a Loop here"
    return model


def scan_sum(np, onnx):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(SEED)
    w = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "w")
    s0 = numpy_helper.from_array(np.zeros(4, np.float32), "s0")
    f = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    body = helper.make_graph(
        [helper.make_node("Mul", ["s", "w"], ["sw"]),
         helper.make_node("Add", ["sw", "a_t"], ["s1"]),
         helper.make_node("Tanh", ["s1"], ["s_next"]),
         helper.make_node("Mul", ["s_next", "b_t"], ["y1"]),
         helper.make_node("Sub", ["s_next", "b_t"], ["y2"])],
        "body", [f("s", [4]), f("a_t", [4]), f("b_t", [4])], [f("s_next", [4]), f("y1", [4]), f("y2", [4])])
    # input [5, 4] scanned along 0; its transpose [4, 5] scanned along 1, reversed.
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["input"], ["input_t"], perm=[1, 0]),
         helper.make_node("Scan", ["s0", "input", "input_t"], ["state", "ys", "zs"], body=body,
                          num_scan_inputs=2, scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                          scan_output_axes=[1, 0], scan_output_directions=[0, 1])],
        "scan_sum", [f("input", [5, 4])], [f("state", [4]), f("ys", [4, 5]), f("zs", [5, 4])], [w, s0])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def resnet18_fp16(np, onnx):
    # What exporting `resnet18().half()` behind an `x.half()` writes: float16
    # initializers, a Cast of the float32 input to float16, float16 compute
    # and a float16 output. PyTorch 1.13 cannot trace a float16 convolution
    # on the CPU, so the float32 export is rewritten into that form.
    import io
    import torch
    import torchvision
    from onnx import TensorProto, helper, numpy_helper

    torch.manual_seed(SEED)
    net = torchvision.models.resnet18(weights=None).eval()
    f = io.BytesIO()
    torch.onnx.export(net, torch.randn(1, 3, 224, 224), f, input_names=["input"], output_names=["output"],
                      opset_version=14)
    model = onnx.load_from_string(f.getvalue())
    g = model.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for n in g.node:
        n.input[:] = ["input_fp16" if i == "input" else i for i in n.input]
    g.node.insert(0, helper.make_node("Cast", ["input"], ["input_fp16"], name="input_to_fp16",
                                      to=TensorProto.FLOAT16))
    g.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.checker.check_model(model)
    return model


def conv1d_codec(np, onnx):
    # 1-D convolutions of every kind an audio codec uses, exported by torch:
    # stride-4 downsampling, dilation, groups, depthwise, ConvTranspose1d
    # with output_padding, GroupNorm and GELU between them.
    import io
    import torch
    nn = torch.nn
    torch.manual_seed(SEED)
    net = nn.Sequential(
        nn.Conv1d(2, 16, 7, padding=3), nn.GELU(),
        nn.Conv1d(16, 32, 8, stride=4, padding=2), nn.GroupNorm(4, 32), nn.GELU(),
        nn.Conv1d(32, 32, 3, padding=2, dilation=2, groups=4), nn.ReLU(),
        nn.Conv1d(32, 32, 5, padding=2, groups=32),
        nn.ConvTranspose1d(32, 16, 8, stride=4, padding=2, output_padding=1), nn.GroupNorm(4, 16), nn.GELU(),
        nn.ConvTranspose1d(16, 8, 3, stride=2, padding=1, groups=2), nn.Tanh(),
        nn.Conv1d(8, 2, 1)).eval()
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(net, torch.randn(1, 2, 4000), f, input_names=["input"], output_names=["output"],
                          opset_version=14)
    return onnx.load_from_string(f.getvalue())


def grouped_cnn(np, onnx):
    # Grouped 3x3 convolutions of every width the small-group kernel takes
    # (2, 4, 8, 16 channels per group) and one it leaves to the dense kernel
    # (32), with stride, dilation and a residual add.
    import io
    import torch
    nn = torch.nn
    torch.manual_seed(SEED)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 64, 3, padding=1)
            self.g4 = nn.Conv2d(64, 64, 3, stride=2, padding=1, groups=16)
            self.g8 = nn.Conv2d(64, 64, 3, padding=2, dilation=2, groups=8)
            self.g16 = nn.Conv2d(64, 64, 3, padding=1, groups=4)
            self.g2 = nn.Conv2d(64, 64, (3, 5), padding=(1, 2), groups=32)
            self.g32 = nn.Conv2d(64, 64, 3, padding=1, groups=2)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            x = torch.relu(self.g4(x))
            x = torch.relu(self.g8(x)) + x
            x = torch.relu(self.g16(x))
            x = self.g2(x) + x
            return self.g32(x)

    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(Net().eval(), torch.randn(1, 3, 30, 27), f, input_names=["input"],
                          output_names=["output"], opset_version=14)
    return onnx.load_from_string(f.getvalue())


def kws_cnn_external(np, onnx):
    # kws_cnn with its weights in a data file beside the model (saved by main()).
    return kws_cnn(np, onnx)


def to_external_data(np, onnx, model, out_dir, location):
    # Moves every float initializer into `location` (in out_dir), at offsets
    # aligned to 64 bytes, as large exports write them. Integer tensors (shapes
    # and axes) stay inline: ONNX Runtime's shape inference reads those.
    from onnx import TensorProto, numpy_helper
    blob = bytearray()
    for t in model.graph.initializer:
        if t.data_type != TensorProto.FLOAT:
            continue
        raw = numpy_helper.to_array(t).tobytes()
        blob += bytes(-len(blob) % 64)
        offset = len(blob)
        blob += raw
        for field in ("float_data", "raw_data"):
            t.ClearField(field)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            e = t.external_data.add()
            e.key, e.value = k, v
    with open(os.path.join(out_dir, location + ".tmp"), "wb") as f:
        f.write(blob)
    os.replace(os.path.join(out_dir, location + ".tmp"), os.path.join(out_dir, location))


# Models saved with their initializers as external data: NAME -> data file.
EXTERNAL_DATA = {"kws_cnn_external": "kws_cnn_external.weights"}


# Control-flow cases: CASE -> (model, builder, {input: array maker}).
CONTROL_FLOW_MODELS = {"if_runtime": if_runtime, "loop_const": loop_const, "scan_sum": scan_sum}
CONTROL_FLOW_CASES = {
    "if_runtime_true": ("if_runtime", lambda np, rng: {"input": rng.standard_normal((2, 3)), "c": np.array(True)}),
    "if_runtime_false": ("if_runtime", lambda np, rng: {"input": rng.standard_normal((2, 3)), "c": np.array(False)}),
    "loop_const": ("loop_const", lambda np, rng: {"input": rng.standard_normal((4, 3))}),
    "scan_sum": ("scan_sum", lambda np, rng: {"input": rng.standard_normal((5, 4))}),
}


MODELS = {
    "kws_cnn": (kws_cnn, "1,76,32,1"),
    "kws_cnn_external": (kws_cnn_external, "1,76,32,1"),
    "resnet18_fp16": (resnet18_fp16, "1,3,224,224"),
    "conv1d_codec": (conv1d_codec, "1,2,4000"),
    "grouped_cnn": (grouped_cnn, "1,3,30,27"),
    "lstm_features": (lstm_features, "5,3,6"),
    "lstm_input_forget": (lstm_input_forget, "4,2,5"),
    "gru_features": (gru_features, "6,2,4"),
    "rnn_features": (rnn_features, "4,2,3"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--list-control-flow", action="store_true")
    a = ap.parse_args()
    if a.list:
        for name, (_, shape) in MODELS.items():
            print(f"{name}:{shape}")
        return
    if a.list_control_flow:
        for case, (model, _) in CONTROL_FLOW_CASES.items():
            print(f"{case}:{model}")
        return
    import numpy as np
    import onnx
    os.makedirs(a.out, exist_ok=True)
    for name, (build, _) in MODELS.items():
        path = os.path.join(a.out, name + ".onnx")
        model = build(np, onnx)
        if name in EXTERNAL_DATA:
            to_external_data(np, onnx, model, a.out, EXTERNAL_DATA[name])
        onnx.save(model, path + ".tmp")
        os.replace(path + ".tmp", path)
    for name, build in CONTROL_FLOW_MODELS.items():
        path = os.path.join(a.out, name + ".onnx")
        onnx.save(build(np, onnx), path + ".tmp")
        os.replace(path + ".tmp", path)
    import zlib
    for case, (_, feeds) in CONTROL_FLOW_CASES.items():
        d = os.path.join(a.out, case + ".feeds")
        os.makedirs(d, exist_ok=True)
        for name, arr in feeds(np, np.random.default_rng(zlib.crc32(case.encode()))).items():
            arr = arr if arr.dtype == np.bool_ else arr.astype(np.float32)
            np.save(os.path.join(d, name + ".npy"), arr)


if __name__ == "__main__":
    main()
