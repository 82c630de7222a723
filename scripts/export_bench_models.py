#!/usr/bin/python3
"""Exports the wider benchmark set (scripts/bench_vs_ort.sh --set wide) to ONNX
with seeded random weights: models of shapes the five CNNs of the test set do
not have (attention, grouped and transposed convolution, 1-D convolution,
bilinear and nearest Resize, GroupNorm, GELU, densely connected blocks).

  swin_t, efficientnet_v2_s, resnext50_32x4d, densenet121, googlenet,
  mnasnet1_0                 torchvision classifiers, 1x3x224x224
  deeplabv3_mobilenet_v3_large, lraspp_mobilenet_v3_large
                             torchvision segmentation, 1x3x520x520 (output 'out')
  bert_encoder               torch.nn.TransformerEncoder: 12 layers, d_model
                             768, 12 heads, feed-forward 3072, GELU, batch
                             first, input 1x128x768
  audio_codec                Conv1d encoder (stride-4 downsampling, GroupNorm,
                             GELU) and ConvTranspose1d decoder, 1 s of 44.1 kHz
                             stereo: input 1x2x44100
  unet_decoder               a small U-Net: strided Conv2d down, ConvTranspose2d
                             up, skip merges through nearest Resize, 1x3x512x512

torchvision models are built with weights=None (weights_backbone=None,
aux_logits=False where they have them): nothing can be downloaded here.
BatchNorm statistics are randomized as in export_models.py. Opset 14.

Run with Debian's interpreter:
  /usr/bin/python3 scripts/export_bench_models.py --out DIR [--models a,b] [--list]
"""
import argparse
import io
import os
import sys
import warnings

SEED = 20261202
MODELS = ["swin_t", "efficientnet_v2_s", "resnext50_32x4d", "densenet121", "googlenet", "mnasnet1_0",
          "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "bert_encoder", "audio_codec",
          "unet_decoder"]


def audio_codec(torch):
    nn = torch.nn

    def down(cin, cout):
        return nn.Sequential(nn.Conv1d(cin, cout, 8, stride=4, padding=2), nn.GroupNorm(8, cout), nn.GELU(),
                             nn.Conv1d(cout, cout, 3, padding=1), nn.GELU())

    def up(cin, cout):
        return nn.Sequential(nn.ConvTranspose1d(cin, cout, 8, stride=4, padding=2), nn.GroupNorm(8, cout),
                             nn.GELU(), nn.Conv1d(cout, cout, 3, padding=1), nn.GELU())

    class Codec(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv1d(2, 32, 7, padding=3)
            self.enc = nn.Sequential(down(32, 64), down(64, 128), down(128, 256))
            self.dec = nn.Sequential(up(256, 128), up(128, 64), up(64, 32))
            self.out = nn.Conv1d(32, 2, 7, padding=3)

        def forward(self, x):
            return self.out(self.dec(self.enc(self.inp(x))))

    return Codec(), torch.randn(1, 2, 44100)


def unet_decoder(torch):
    nn = torch.nn
    F = nn.functional

    def block(cin, cout, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3, self.e4 = block(3, 16, 2), block(16, 32, 2), block(32, 64, 2), block(64, 128, 2)
            self.u3 = nn.ConvTranspose2d(128, 64, 2, stride=2)
            self.u2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
            self.u1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.d3, self.d2, self.d1 = block(128, 64), block(64, 32), block(32, 16)
            self.skip = nn.Conv2d(128, 16, 1)
            self.head = nn.Conv2d(32, 1, 1)

        def forward(self, x):
            s1 = self.e1(x)    # 256
            s2 = self.e2(s1)   # 128
            s3 = self.e3(s2)   # 64
            b = self.e4(s3)    # 32
            y = self.d3(torch.cat([self.u3(b), s3], 1))
            y = self.d2(torch.cat([self.u2(y), s2], 1))
            y = self.d1(torch.cat([self.u1(y), s1], 1))
            # A coarse skip merged by nearest upsampling, then back to full size.
            coarse = F.interpolate(self.skip(b), scale_factor=8, mode="nearest")
            y = self.head(torch.cat([y, coarse], 1))
            return F.interpolate(y, scale_factor=2, mode="nearest")

    return UNet(), torch.randn(1, 3, 512, 512)


def build(name, torch, gen):
    import torchvision.models as tvm
    if name == "bert_encoder":
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
        enc = torch.nn.TransformerEncoder(layer, 12)
        # The encoder deep-copies one layer 12 times, and the exporter would
        # store 12 equal layers once: give every layer its own weights.
        with torch.no_grad():
            for m in enc.modules():
                if isinstance(m, torch.nn.Linear):
                    m.reset_parameters()  # from the seeded global generator
                    m.bias.uniform_(-0.05, 0.05, generator=gen)
                elif isinstance(m, torch.nn.MultiheadAttention):
                    m._reset_parameters()
                elif isinstance(m, torch.nn.LayerNorm):
                    m.weight.uniform_(0.5, 1.5, generator=gen)
                    m.bias.uniform_(-0.2, 0.2, generator=gen)
        return enc, torch.randn(1, 128, 768, generator=gen)
    if name == "audio_codec":
        return audio_codec(torch)
    if name == "unet_decoder":
        return unet_decoder(torch)
    if name.startswith(("deeplabv3", "lraspp")):
        seg = getattr(tvm.segmentation, name)(weights=None, weights_backbone=None)

        class Out(torch.nn.Module):  # the dict output's 'out'
            def __init__(self):
                super().__init__()
                self.seg = seg

            def forward(self, x):
                return self.seg(x)["out"]

        return Out(), torch.randn(1, 3, 520, 520, generator=gen)
    kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    return getattr(tvm, name)(weights=None, **kwargs), torch.randn(1, 3, 224, 224, generator=gen)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/testdata")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--list", action="store_true", help="print NAME:INPUT_SHAPE per model and exit")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        sys.exit(f"error: unknown model(s) {','.join(unknown)}; known: {','.join(MODELS)}")
    if a.list:
        print("\n".join(models))
        return
    warnings.filterwarnings("ignore")
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from export_models import randomize
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for name in models:
        path = os.path.join(a.out, name + ".onnx")
        if os.path.exists(path):
            continue
        torch.manual_seed(SEED)
        gen = torch.Generator().manual_seed(SEED + 1)
        model, x = build(name, torch, gen)
        model.eval()
        if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()) and x.dim() == 4:
            randomize(model, torch, gen)
        buf = io.BytesIO()
        # With gradients on: PyTorch 1.13 otherwise runs TransformerEncoder's
        # fused fast path, an operator with no ONNX form.
        with torch.enable_grad():
            torch.onnx.export(model, x, buf, opset_version=14, input_names=["input"], output_names=["output"],
                              do_constant_folding=True)
        with open(path + ".tmp", "wb") as f:
            f.write(buf.getvalue())
        os.replace(path + ".tmp", path)
        print(f"{path}: {len(buf.getvalue())} bytes", flush=True)


if __name__ == "__main__":
    main()
