// ConvTransposeNhwc: 2-D transposed convolution (any stride, dilation,
// padding, output_padding / output_shape and group) in NHWC, by packed GEMM
// plus a scatter-add (col2im).
//
//   ConvTransposeNhwc(X[n,ih,iw,ic], Wpacked, B[oc]) -> Y[n,oh,ow,oc]
//   params: ConvTransposeParams: kernel, strides, dilations, pads (top, left,
//   bottom, right; negative where output_shape / output_padding enlarge the
//   output), group, out_channels, activation.
//   oh = sh * (ih - 1) + (kh - 1) * dh + 1 - pad_top - pad_bottom (ow alike).
//
// Every input pixel contributes W[ic][oc][ky][kx] * x[ic] to output pixel
// (iy * sh - pad_top + ky * dh, ix * sw - pad_left + kx * dw). Per group and
// block of 16 output channels, one GEMM makes those contributions for a run
// of input pixels at once (the columns are (ky, kx, 16 channels)) into
// per-thread scratch, and the scatter adds them into the output. Work items
// are (image, group, channel block): each owns its output channels, so
// threads never add into the same element.
//
// Packed weights, per group g, the GEMM B operand [icg][obs * kh * kw * 16]
// with column ((ob * kh + ky) * kw + kx) * 16 + j = W[g*icg + i][ob*16 + j][ky][kx]
// (zero past ocg), packed by PackGemmB into panels of 16 columns; the panels
// of one channel block are consecutive. Target-neutral: every target reads
// the same bytes.
//
// Layout: an ONNX ConvTranspose with a 4-D float32 input and constant
// weights (and bias) becomes a graph ConvTransposeNhwc holding the ONNX
// weights; lowering packs them (fp32 at every precision).
#include <algorithm>

#include "kernels/packing.h"
#include "ops/conv_ref.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::PanelCount;
constexpr std::string_view kOp = opname::ConvTransposeNhwc;

// Floats of the per-thread buffer the GEMM writes contributions to (128 KiB,
// L2-resident while the scatter reads it back).
constexpr int64_t kColFloats = int64_t{32} << 10;

struct Params : internal::WindowParams {
  int64_t group = 1, out_channels = 1;
  kernels::Epilogue ep;
  template <typename V>
  void Fields(V& v) {
    WindowParams::Fields(v, -kMaxWindow);
    v.Int(attr::kGroup, group, 1, kMaxChannels);
    v.Int(attr::kOutChannels, out_channels, 1, kMaxChannels);
    v.Epilogue(attr::kActivation, attr::kActivationAlpha, attr::kActivationBeta, ep);
  }
};

struct Config {
  int64_t n, ih, iw, ic, oh, ow, oc, group, icg, ocg, blocks;  // blocks: ceil(ocg / 16)
  Params p;
  int64_t cols() const { return p.kernel[0] * p.kernel[1] * kPanel; }
  int64_t packed_floats() const { return group * blocks * cols() * icg; }
};

// The output extent of one spatial dim, or -1 when out of range.
int64_t Extent(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  const int64_t out = s * (in - 1) + (k - 1) * d + 1 - pb - pe;
  return out >= 1 && out <= (int64_t{1} << 31) ? out : -1;
}

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() != 3) return OpError(kOp, "needs input, packed weights and bias");
  FCB_RETURN_IF_ERROR(internal::ExpectNhwc(kOp, in[0], "input"));
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  Config c{};
  c.p = p;
  c.n = in[0].shape[0], c.ih = in[0].shape[1], c.iw = in[0].shape[2], c.ic = in[0].shape[3];
  c.oc = p.out_channels, c.group = p.group;
  if (c.ic % c.group != 0 || c.oc % c.group != 0)
    return OpError(kOp, "group " + std::to_string(c.group) + " must divide input channels " + std::to_string(c.ic) +
               " and output channels " + std::to_string(c.oc));
  c.icg = c.ic / c.group, c.ocg = c.oc / c.group;
  c.blocks = PanelCount(c.ocg);
  if (c.cols() > kColFloats) return OpError(kOp, "a " + std::to_string(p.kernel[0]) + "x" + std::to_string(p.kernel[1]) + " kernel exceeds the column buffer");
  c.oh = Extent(c.ih, p.kernel[0], p.strides[0], p.dilations[0], p.pads[0], p.pads[2]);
  c.ow = Extent(c.iw, p.kernel[1], p.strides[1], p.dilations[1], p.pads[1], p.pads[3]);
  if (c.oh < 0 || c.ow < 0) return OpError(kOp, "the pads leave no output (or too large a one)");
  FCB_RETURN_IF_ERROR(CheckedNumel({c.n, c.oh, c.ow, c.oc}).status());
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[1], "packed weights"));
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[2], "bias"));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[1], "packed weights", c.packed_floats()));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[2], "bias", c.oc));
  return c;
}

Status Infer(const InferContext& ctx, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config c, Resolve(ctx.attrs, ctx.inputs));
  out->push_back({ir::DType::kF32, {c.n, c.oh, c.ow, c.oc}});
  return Status::Ok();
}

// One work item: image b, group g, channel block ob.
void RunBlock(const RunContext& ctx, const Config& c, const float* x, const float* w, const float* bias,
              float* y, int64_t b, int64_t g, int64_t ob, float* scratch) {
  const auto& p = c.p;
  const int64_t kh = p.kernel[0], kw = p.kernel[1], cols = c.cols();
  const int64_t oc0 = g * c.ocg + ob * kPanel, len = std::min(kPanel, c.ocg - ob * kPanel);
  float* gemm_scratch = scratch;
  float* colbuf = scratch + kernels::kGemmScratchFloats;
  float* yb = y + b * c.oh * c.ow * c.oc + oc0;
  for (int64_t px = 0; px < c.oh * c.ow; ++px)
    std::copy(bias + oc0, bias + oc0 + len, yb + px * c.oc);
  const float* wb = w + (g * c.blocks + ob) * cols * c.icg;  // this block's panels
  const int64_t rows = std::max<int64_t>(1, kColFloats / cols);
  const int64_t pixels = c.ih * c.iw;
  for (int64_t p0 = 0; p0 < pixels; p0 += rows) {
    const int64_t m = std::min(rows, pixels - p0);
    ctx.k->f32.gemm(m, cols, c.icg, x + (b * pixels + p0) * c.ic + g * c.icg, c.ic, wb, nullptr, colbuf, cols,
                    kernels::Epilogue{}, 0, m, gemm_scratch);
    for (int64_t r = 0; r < m; ++r) {
      const int64_t iy = (p0 + r) / c.iw, ix = (p0 + r) % c.iw;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t oy = iy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
        if (oy < 0 || oy >= c.oh) continue;
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t ox = ix * p.strides[1] - p.pads[1] + kx * p.dilations[1];
          if (ox < 0 || ox >= c.ow) continue;
          float* dst = yb + (oy * c.ow + ox) * c.oc;
          const float* src = colbuf + r * cols + (ky * kw + kx) * kPanel;
          for (int64_t j = 0; j < len; ++j) dst[j] += src[j];
        }
      }
    }
  }
  if (p.ep.act != kernels::Act::kNone)
    for (int64_t px = 0; px < c.oh * c.ow; ++px) ctx.k->f32.unary(p.ep, yb + px * c.oc, yb + px * c.oc, 0, len);
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& cc) {
  FCB_ASSIGN_OR_RETURN(Config c, Resolve(cc.attrs, cc.inputs));
  return MakeKernel([c](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const float* w = static_cast<const float*>(in[1]);
    const float* bias = static_cast<const float*>(in[2]);
    float* y = static_cast<float*>(out[0]);
    const int64_t units = c.n * c.group * c.blocks;
    ctx.pool->ParallelForThreads(units, 1, [&](int t, int64_t begin, int64_t end) {
      for (int64_t u = begin; u < end; ++u)
        RunBlock(ctx, c, x, w, bias, y, u / (c.group * c.blocks), (u / c.blocks) % c.group, u % c.blocks,
                 static_cast<float*>(ctx.ThreadScratch(t)));
    });
    return Status::Ok();
  });
}

Result<uint64_t> Scratch(const CreateContext&) {
  return (kernels::kGemmScratchFloats + kColFloats) * sizeof(float);
}

// ONNX ConvTranspose -> graph ConvTransposeNhwc (ONNX weights, explicit pads).
Result<bool> FromConvTranspose(LayoutContext& c, const ir::Node& n) {
  const ir::Graph& g = c.graph();
  auto konst = [&](size_t i) -> const ir::TensorData* {
    return i < n.inputs.size() && n.inputs[i] >= 0 ? g.values[n.inputs[i]].constant.get() : nullptr;
  };
  const ir::TensorData* w = konst(1);
  if (!w || w->dtype != ir::DType::kF32 || w->shape.size() != 4) return false;
  const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
  if (has_bias && (!konst(2) || konst(2)->dtype != ir::DType::kF32)) return false;
  const ir::Shape xs = c.LogicalShape(n.inputs[0]);  // NCHW, whatever the input's layout now
  auto geom = ResolveConvTranspose2d(AttrsFromNode(n), xs, w->shape);
  if (!geom.ok()) return false;  // the reference kernel reports it
  const ConvTranspose2d& t = geom.value();
  Params p;
  p.kernel = {t.kh, t.kw}, p.strides = {t.sh, t.sw}, p.dilations = {t.dh, t.dw};
  p.pads = {t.pad_t, t.pad_l, t.pad_b, t.pad_r};
  p.group = n.GetInt("group", 1);
  p.out_channels = w->shape[1] * p.group;
  p.ep = NodeEpilogue(n);
  if (p.group < 1 || xs[1] != w->shape[0] || xs[1] % p.group != 0) return false;
  if (p.kernel[0] * p.kernel[1] * kPanel > kColFloats) return false;
  if (Extent(xs[2], t.kh, t.sh, t.dh, t.pad_t, t.pad_b) != t.oh ||
      Extent(xs[3], t.kw, t.sw, t.dw, t.pad_l, t.pad_r) != t.ow)
    return false;  // not expressible with explicit pads: keep the reference
  ir::Node r = internal::NhwcNode(c, n, kOp, {n.inputs[1], has_bias ? n.inputs[2] : -1});
  SetNodeParams(&r, p);
  c.EmitNhwc(std::move(r));
  return true;
}

// Graph ConvTransposeNhwc -> the step, with packed weights and a dense bias.
Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, AttrsFromNode(n)));
  const ir::TensorData* w = c.Const(n, 1);
  const ir::TensorData* b = c.Const(n, 2);
  if (!w) return Unsupported("ConvTranspose weights must be a constant");
  const int64_t ic = w->shape[0], ocg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
  const int64_t groups = p.group;
  const std::vector<float> packed = internal::PackConvTranspose(w->data<float>(), ic, ocg, kh, kw, groups);
  std::vector<float> bias(static_cast<size_t>(groups * ocg), 0.f);
  if (b) std::copy(b->data<float>(), b->data<float>() + b->numel(), bias.begin());
  c.Emit(kOp, n.name, {c.Value(n.inputs[0]), c.Floats(n.name + ".w", packed), c.Floats(n.name + ".b", bias)},
         {c.Value(n.outputs[0])}, EncodeParams(p));
  return true;
}

}  // namespace

std::vector<float> internal::PackConvTranspose(const float* w, int64_t ic, int64_t ocg, int64_t kh, int64_t kw,
                                              int64_t groups) {
  const int64_t icg = ic / groups, blocks = PanelCount(ocg);
  const int64_t cols = blocks * kh * kw * kPanel;
  std::vector<float> packed;
  packed.reserve(static_cast<size_t>(groups * cols * icg));
  std::vector<float> bg(static_cast<size_t>(icg * cols));
  for (int64_t g = 0; g < groups; ++g) {
    std::fill(bg.begin(), bg.end(), 0.f);
    for (int64_t i = 0; i < icg; ++i)
      for (int64_t o = 0; o < ocg; ++o)
        for (int64_t ky = 0; ky < kh; ++ky)
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int64_t col = (((o / kPanel) * kh + ky) * kw + kx) * kPanel + o % kPanel;
            bg[i * cols + col] = w[(((g * icg + i) * ocg + o) * kh + ky) * kw + kx];
          }
    const std::vector<float> pg = kernels::PackGemmB(bg.data(), icg, cols, cols, 1);
    packed.insert(packed.end(), pg.begin(), pg.end());
  }
  return packed;
}

OpDef DefineConvTransposeNhwc() {
  OpDef d = internal::LoweredOp(kOp, 3, 3, Infer, Create, Scratch);
  d.lowerings = {{kOp, 10, Lower}};
  d.layouts = {{"ConvTranspose", FromConvTranspose}};
  return d;
}

}  // namespace fcb::ops
