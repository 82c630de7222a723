#!/usr/bin/python3
"""Exports torchvision architectures to ONNX with seeded random weights.

Nothing can be downloaded from a model hub here, so the weights are random,
but chosen so the networks behave like trained ones where it matters for a
compiler test: every BatchNorm has non-trivial statistics and affine
parameters (so BN folding is really exercised) and activations stay O(1)
through the whole depth (so a relative error means something).

Run with Debian's interpreter: /usr/bin/python3 scripts/export_models.py --out DIR
"""
import argparse
import io
import os
import sys
import warnings

DEFAULT_MODELS = ["resnet18", "squeezenet1_1", "mobilenet_v2", "efficientnet_b0", "resnet18_dynamic"]
# matmulN: one N x N x N MatMul against a constant weight (x @ W), for timing
# a large GEMM end to end against ONNX Runtime (bench_vs_ort.sh --models).
KNOWN_MODELS = DEFAULT_MODELS + ["resnet50", "matmul512", "matmul1024"]
SEED = 20240601


def build_matmul(n, torch, gen):
    class MatMul(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(n, n, generator=gen) / n ** 0.5)

        def forward(self, x):
            return x @ self.w

    return MatMul().eval(), torch.randn(n, n, generator=gen)


def build(name):
    import torchvision.models as tvm
    arch = name[: -len("_dynamic")] if name.endswith("_dynamic") else name
    return getattr(tvm, arch)(weights=None)


def randomize(model, torch, gen):
    """Gives biases and every BatchNorm realistic, non-trivial parameters.

    gamma/beta are drawn at random so folding them into the convolution is not
    a no-op. Then the running statistics come from one training-mode pass over
    a random batch (cumulative average, momentum=None) made *after* that, so
    each BN normalizes what really reaches it through the final upstream
    parameters, and activations neither explode nor vanish with depth.
    """
    # torchvision zero-initializes conv/linear biases; random ones make a bias
    # that is dropped or misapplied visible (and stop the exporter from
    # de-duplicating all-zero biases into Identity nodes).
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) - 0.5) * 0.2)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for bn in bns:
            n = bn.num_features
            bn.weight.copy_(torch.rand(n, generator=gen) + 0.5)           # [0.5, 1.5)
            bn.bias.copy_((torch.rand(n, generator=gen) - 0.5) * 0.5)     # [-0.25, 0.25)
            bn.reset_running_stats()
            bn.momentum = None
        model.train()
        model(torch.randn(4, 3, 224, 224, generator=gen))
        model.eval()
        for bn in bns:
            # Keep the variance strictly positive whatever the batch saw.
            bn.running_var.clamp_(min=1e-3)


def export(name, out_dir, dynamic, torch, verbose):
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    if name.startswith("matmul"):
        model, x = build_matmul(int(name[len("matmul"):]), torch, gen)
        dynamic = False
    else:
        model = build(name)
        randomize(model, torch, gen)
        dynamic = dynamic or name.endswith("_dynamic")
        x = torch.randn(1, 3, 224, 224, generator=gen)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model, x, buf,
            opset_version=13,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}} if dynamic else None,
            do_constant_folding=True,
            # PRESERVE (with the model in eval mode) keeps BatchNormalization
            # nodes; EVAL would fold them into the convolutions at export time
            # and fcb's own BN folding would never run.
            training=torch.onnx.TrainingMode.PRESERVE,
            verbose=False,
        )
    data = buf.getvalue()
    path = os.path.join(out_dir, name + ".onnx")
    # Write through a temporary file so a reader never sees a half-written model.
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    if verbose:
        print(f"{path}: {len(data)} bytes{' (dynamic batch)' if dynamic else ''}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/testdata", help="output folder")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated list; known: " + ",".join(KNOWN_MODELS))
    ap.add_argument("--with-resnet50", action="store_true", help="also export resnet50")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="export every model with a symbolic batch dimension")
    ap.add_argument("--list", action="store_true",
                    help="print the names of the models that would be exported, then exit")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    models = [m for m in args.models.split(",") if m]
    if args.with_resnet50 and "resnet50" not in models:
        models.append("resnet50")
    unknown = [m for m in models if m not in KNOWN_MODELS]
    if unknown:
        print(f"error: unknown model(s) {','.join(unknown)}; known: {','.join(KNOWN_MODELS)}",
              file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(models))
        return 0

    if not args.verbose:
        warnings.filterwarnings("ignore")
    import torch
    # One thread: the calibration pass then sums in a fixed order, so the
    # exported bytes do not depend on the machine's core count.
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for m in models:
        export(m, args.out, args.dynamic_batch, torch, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
