#!/usr/bin/python3
"""Builds models/demo_cnn.onnx: a small CNN that touches every common CNN pattern.

Conv+BN+ReLU, a residual block, MaxPool, a depthwise conv with ReLU6 (Clip),
a 1x1 conv, HardSwish, global average pooling, Flatten, Linear (Gemm) and
Softmax; seeded random weights, opset 13, input `input` of shape
batch x 3 x 64 x 64 with a symbolic batch, so `fcb compile --input-shape
input=1x3x64x64` has something to fix.

Run with Debian's interpreter: /usr/bin/python3 scripts/make_demo_model.py [OUT.onnx]
"""
import io
import os
import sys
import warnings

SEED = 1234


def make_module(torch):
    nn = torch.nn

    def conv_bn(cin, cout, k, stride=1, groups=1):
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                nn.BatchNorm2d(cout)]

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(c, c, 3), nn.ReLU(), *conv_bn(c, c, 3))
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + x)

    class DemoCnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                *conv_bn(3, 16, 3, stride=2), nn.ReLU(),          # 32x32
                Residual(16),
                nn.MaxPool2d(2),                                 # 16x16
                *conv_bn(16, 16, 3, groups=16), nn.ReLU6(),     # depthwise
                nn.Conv2d(16, 32, 1),                            # pointwise, with bias
                nn.Hardswish(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
            )
            self.classifier = nn.Linear(32, 10)
            self.softmax = nn.Softmax(dim=1)

        def forward(self, x):
            return self.softmax(self.classifier(self.features(x)))

    return DemoCnn()


def randomize(model, torch, gen):
    """Non-trivial BN parameters and statistics, so folding BN matters.

    As in export_models.py, the running statistics come from a training-mode
    pass over a random batch, so every BN really normalizes its input and the
    logits are O(1): the softmax is then far from uniform and a wrong kernel
    anywhere shows in the output.
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                m.bias.copy_((torch.rand(n, generator=gen) - 0.5) * 0.5)
                m.reset_running_stats()
                m.momentum = None
            elif isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) - 0.5) * 0.2)
        # Larger weights in the last layers: default init (and averaging 256
        # positions) would shrink the logits towards zero.
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        pointwise = convs[-1]
        pointwise.weight.copy_(torch.randn(pointwise.weight.shape, generator=gen) / 4.0)
        fc = model.classifier
        fc.weight.copy_(torch.randn(fc.weight.shape, generator=gen) * 1.5)
        model.train()
        model(torch.randn(8, 3, 64, 64, generator=gen))
        model.eval()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "models", "demo_cnn.onnx")
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    model = make_module(torch)
    randomize(model, torch, gen)
    model.eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model, torch.randn(1, 3, 64, 64, generator=gen), buf,
            opset_version=13,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            do_constant_folding=True,
            # Keep BatchNormalization nodes for fcb to fold (see export_models.py).
            training=torch.onnx.TrainingMode.PRESERVE,
        )
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
