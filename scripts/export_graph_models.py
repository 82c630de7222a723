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

Weights are seeded; ONNX Runtime gives the reference (prepare_testdata.sh).

  --out DIR   write every model into DIR
  --list      print NAME:INPUT_SHAPE per model, one per line
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


MODELS = {"kws_cnn": (kws_cnn, "1,76,32,1")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for name, (_, shape) in MODELS.items():
            print(f"{name}:{shape}")
        return
    import numpy as np
    import onnx
    os.makedirs(a.out, exist_ok=True)
    for name, (build, _) in MODELS.items():
        path = os.path.join(a.out, name + ".onnx")
        onnx.save(build(np, onnx), path + ".tmp")
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
