// The NN family: ONNX Conv / pools / BatchNormalization (shape inference; the
// layout pass rewrites them into the NHWC forms below before lowering) and the
// internal NHWC, packed-weight forms that the runtime executes.
//
// Internal ops (created by passes/layout.cc and compile/lower.cc):
//   ConvNhwc(X[n,h,w,c], Wpacked, Bpacked[, residual]) -> Y[n,oh,ow,oc]
//       attrs: kernel_shape, strides, dilations, pads(t,l,b,r), group, out_channels,
//              depthwise (0/1: which packing), activation, activation_alpha/_beta
//   MaxPoolNhwc / AvgPoolNhwc(X[n,h,w,c]) -> Y[n,oh,ow,c]   (ONNX pool attrs, explicit pads)
//   GlobalAvgPoolNhwc(X[n,h,w,c]) -> Y[n,1,1,c]
//   GemmPacked(A[..., k], Bpacked[, bias[n]]) -> Y[..., n]   attrs: n, activation*
//   ConvExpandDwNhwc(X[n,h,w,c], W1packed, B1packed, W2packed, B2packed) -> Y[n,oh,ow,e]
//       a 1x1 conv (c -> e channels, PackConv/PackConvBias, activation in
//       expand_activation, expand_activation_alpha/_beta) feeding a depthwise
//       ConvNhwc (PackDepthwise/PackDepthwiseBias, its attrs as ConvNhwc with
//       group = out_channels = e): the inverted-residual block of MobileNetV2
//       and EfficientNet, whose e-channel intermediate (4.8 MB at 112x112x96)
//       is never written out: bands of it are made in a stack buffer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/packing.h"
#include "ops/conv_geom.h"
#include "ops/conv_ref.h"
#include "ops/op_util.h"
#include "ops/families.h"

namespace fcb::ops {
namespace {

using ir::DType;
using kernels::kPanel;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

Status ExpectF32(const TensorInfo& t, const char* what) {
  if (t.dtype != DType::kF32)
    return InvalidArgument(std::string(what) + " must be float32, got " + ir::DTypeName(t.dtype));
  return Status::Ok();
}

// Packed weights are fp32, or bf16 for targets compiled with precision "bf16".
Status ExpectWeights(const TensorInfo& t, const char* what) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16)
    return InvalidArgument(std::string(what) + " must be float32 or bfloat16, got " + ir::DTypeName(t.dtype));
  return Status::Ok();
}

// bf16 weights are widened to fp32 once, when the kernel is prepared at load;
// the file (and the page cache) holds half the bytes.
Result<std::vector<float>> WidenIfBf16(const CreateContext& c, size_t input) {
  if (c.inputs[input].dtype != DType::kBF16) return std::vector<float>{};
  const void* data = c.input_data ? (*c.input_data)[input] : nullptr;
  if (!data) return Unsupported("bfloat16 weights must be stored in the file");
  const int64_t n = c.inputs[input].numel();
  std::vector<float> out(static_cast<size_t>(n));
  const auto* src = static_cast<const uint16_t*>(data);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

Status ExpectRank(const TensorInfo& t, size_t rank, const char* what) {
  if (t.shape.size() != rank)
    return InvalidArgument(std::string(what) + " must have rank " + std::to_string(rank) +
                           ", got shape " + ir::ShapeToString(t.shape));
  for (int64_t d : t.shape)
    if (d < 1 || d > (int64_t{1} << 31))
      return InvalidArgument(std::string(what) + " has an invalid dimension in " +
                             ir::ShapeToString(t.shape));
  return Status::Ok();
}

Result<kernels::Epilogue> ReadEpilogue(const Attrs& a) {
  kernels::Epilogue ep;
  const int64_t act = a.GetInt("activation", 0);
  if (act < 0 || act > static_cast<int64_t>(kernels::Act::kSilu))
    return InvalidArgument("activation code " + std::to_string(act) + " is out of range");
  ep.act = static_cast<kernels::Act>(act);
  ep.a = a.GetFloat("activation_alpha", 0.f);
  ep.b = a.GetFloat("activation_beta", 0.f);
  return ep;
}

// ---------------------------------------------------------------- ONNX forms

Status InferConv(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  const TensorInfo& w = c.inputs[1];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "Conv input X"));
  FCB_RETURN_IF_ERROR(ExpectF32(w, "Conv weight W"));
  if (x.shape.size() != 4) return InferWindowRef(c, out);  // 1-D/3-D: reference NCHW kernel
  FCB_RETURN_IF_ERROR(ExpectRank(x, 4, "Conv input X"));
  FCB_RETURN_IF_ERROR(ExpectRank(w, 4, "Conv weight W"));
  const int64_t group = c.attrs.GetInt("group", 1);
  if (group < 1 || x.shape[1] % group != 0 || w.shape[0] % group != 0)
    return InvalidArgument("group " + std::to_string(group) + " must divide input channels " +
                           std::to_string(x.shape[1]) + " and output channels " +
                           std::to_string(w.shape[0]));
  if (w.shape[1] * group != x.shape[1])
    return InvalidArgument("weight shape " + ir::ShapeToString(w.shape) + " does not match input channels " +
                           std::to_string(x.shape[1]) + " with group " + std::to_string(group));
  if (c.inputs.size() > 2 && c.inputs[2].present()) {
    FCB_RETURN_IF_ERROR(ExpectF32(c.inputs[2], "Conv bias B"));
    if (c.inputs[2].shape != ir::Shape{w.shape[0]})
      return InvalidArgument("bias shape " + ir::ShapeToString(c.inputs[2].shape) + " must be [" +
                             std::to_string(w.shape[0]) + "]");
  }
  FCB_ASSIGN_OR_RETURN(Window2d win, ResolveWindow2d(c.attrs, x.shape[2], x.shape[3], w.shape[2], w.shape[3], false));
  if (win.kh != w.shape[2] || win.kw != w.shape[3])
    return InvalidArgument("kernel_shape does not match the weight's spatial size");
  out->push_back({DType::kF32, {x.shape[0], w.shape[0], win.oh, win.ow}});
  return Status::Ok();
}

Status InferPool(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  // Other ranks and dtypes, Indices output and storage_order: reference NCHW kernel.
  if (x.dtype != DType::kF32 || x.shape.size() != 4 || c.num_outputs > 1 ||
      c.attrs.GetInt("storage_order", 0) != 0)
    return InferWindowRef(c, out);
  FCB_RETURN_IF_ERROR(ExpectRank(x, 4, "pool input"));
  if (!c.attrs.Has("kernel_shape")) return InvalidArgument("kernel_shape is required");
  if (c.attrs.GetInt("storage_order", 0) != 0) return Unsupported("storage_order=1 is not supported");
  FCB_ASSIGN_OR_RETURN(Window2d win, ResolveWindow2d(c.attrs, x.shape[2], x.shape[3], 1, 1, true));
  out->push_back({DType::kF32, {x.shape[0], x.shape[1], win.oh, win.ow}});
  if (c.num_outputs > 1) return Unsupported("MaxPool's Indices output is not supported");
  return Status::Ok();
}

Status InferGlobalPool(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "global pool input"));
  if (x.shape.size() < 3) return InvalidArgument("global pool input must have rank >= 3");
  FCB_RETURN_IF_ERROR(CheckedNumel(x.shape).status());
  ir::Shape s = x.shape;
  for (size_t i = 2; i < s.size(); ++i) s[i] = 1;
  out->push_back({DType::kF32, s});
  return Status::Ok();
}

// Global pooling over NCHW (any spatial rank): y[n][c] = reduce over spatial.
class GlobalPoolNchw : public Kernel {
 public:
  GlobalPoolNchw(int64_t nc, int64_t spatial, bool is_max) : nc_(nc), sp_(spatial), max_(is_max) {}
  Status Run(const RunContext&, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    for (int64_t i = 0; i < nc_; ++i) {
      const float* p = x + i * sp_;
      if (max_) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < sp_; ++j) m = std::max(m, p[j]);
        y[i] = m;
      } else {
        double s = 0;
        for (int64_t j = 0; j < sp_; ++j) s += p[j];
        y[i] = static_cast<float>(s / static_cast<double>(sp_));
      }
    }
    return Status::Ok();
  }

 private:
  int64_t nc_, sp_;
  bool max_;
};

Result<std::unique_ptr<Kernel>> CreateGlobalPool(const CreateContext& c) {
  const auto& s = c.inputs[0].shape;
  int64_t sp = 1;
  for (size_t i = 2; i < s.size(); ++i) sp *= s[i];
  return std::unique_ptr<Kernel>(new GlobalPoolNchw(s[0] * s[1], sp, c.op == "GlobalMaxPool"));
}

Result<std::unique_ptr<Kernel>> CreateNeedsLowering(const CreateContext& c) {
  // Nodes the layout pass leaves in ONNX form (see conv_ref.h), and constant folding.
  FCB_RETURN_IF_ERROR(RecheckOutputs(InferWindowRef, c));
  return CreateWindowRef(c);
}

Status InferBatchNorm(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "BatchNormalization input"));
  if (x.shape.size() < 2) return InvalidArgument("BatchNormalization input must have rank >= 2");
  FCB_RETURN_IF_ERROR(CheckedNumel(x.shape).status());
  for (int i = 1; i < 5; ++i) {
    FCB_RETURN_IF_ERROR(ExpectF32(c.inputs[i], "BatchNormalization parameter"));
    if (c.inputs[i].shape != ir::Shape{x.shape[1]})
      return InvalidArgument("BatchNormalization parameter " + std::to_string(i) + " has shape " +
                             ir::ShapeToString(c.inputs[i].shape) + ", expected [" +
                             std::to_string(x.shape[1]) + "]");
  }
  if (c.attrs.GetInt("training_mode", 0) != 0) return Unsupported("training_mode=1 is not supported");
  if (c.num_outputs > 1) return Unsupported("BatchNormalization's training outputs are not supported");
  out->push_back(x);
  return Status::Ok();
}

// Inference BatchNormalization over NCHW-like layout (channel axis 1).
class BatchNormKernel : public Kernel {
 public:
  BatchNormKernel(int64_t n, int64_t c, int64_t sp, float eps) : n_(n), c_(c), sp_(sp), eps_(eps) {}
  Status Run(const RunContext&, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    const float* scale = static_cast<const float*>(in[1]);
    const float* bias = static_cast<const float*>(in[2]);
    const float* mean = static_cast<const float*>(in[3]);
    const float* var = static_cast<const float*>(in[4]);
    float* y = static_cast<float*>(out[0]);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float s = scale[ch] / std::sqrt(var[ch] + eps_);
        const float b = bias[ch] - mean[ch] * s;
        const int64_t base = (n * c_ + ch) * sp_;
        for (int64_t i = 0; i < sp_; ++i) y[base + i] = x[base + i] * s + b;
      }
    return Status::Ok();
  }

 private:
  int64_t n_, c_, sp_;
  float eps_;
};

Result<std::unique_ptr<Kernel>> CreateBatchNorm(const CreateContext& c) {
  const auto& s = c.inputs[0].shape;
  int64_t sp = 1;
  for (size_t i = 2; i < s.size(); ++i) sp *= s[i];
  return std::unique_ptr<Kernel>(new BatchNormKernel(s[0], s[1], sp, c.attrs.GetFloat("epsilon", 1e-5f)));
}

// ---------------------------------------------------------------- NHWC forms

// The window fields shared by kernels::ConvGeom and kernels::PoolGeom.
template <typename Geom>
void CopyWindow(const Window2d& w, Geom* g) {
  g->oh = w.oh;
  g->ow = w.ow;
  g->kh = w.kh;
  g->kw = w.kw;
  g->sh = w.sh;
  g->sw = w.sw;
  g->dh = w.dh;
  g->dw = w.dw;
  g->pad_top = w.pad_t;
  g->pad_left = w.pad_l;
}

struct ConvConfig {
  kernels::ConvGeom g{};
  kernels::Epilogue ep{};
  bool depthwise = false;
  bool has_residual = false;
};

Result<ConvConfig> ResolveConvNhwc(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() < 3) return InvalidArgument("ConvNhwc needs input, packed weights and packed bias");
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "ConvNhwc input"));
  FCB_RETURN_IF_ERROR(ExpectRank(x, 4, "ConvNhwc input"));
  ConvConfig cfg;
  auto& g = cfg.g;
  g.n = x.shape[0];
  g.ih = x.shape[1];
  g.iw = x.shape[2];
  g.ic = x.shape[3];
  g.oc = a.GetInt("out_channels", 0);
  g.groups = a.GetInt("group", 1);
  if (g.oc < 1 || g.oc > (int64_t{1} << 24)) return InvalidArgument("out_channels out of range");
  if (g.groups < 1 || g.ic % g.groups != 0 || g.oc % g.groups != 0)
    return InvalidArgument("group must divide input and output channels");
  FCB_ASSIGN_OR_RETURN(Window2d w, ResolveWindow2d(a, g.ih, g.iw, 1, 1, false));
  if (!a.Has("kernel_shape")) return InvalidArgument("ConvNhwc needs kernel_shape");
  CopyWindow(w, &g);
  g.in_pixel_stride = g.ic;
  g.out_pixel_stride = g.oc;
  cfg.depthwise = a.GetInt("depthwise", 0) != 0;
  FCB_ASSIGN_OR_RETURN(cfg.ep, ReadEpilogue(a));
  const int64_t icg = g.ic / g.groups;
  int64_t want_w, want_b;
  if (cfg.depthwise) {
    if (g.groups != g.ic || g.oc != g.ic) return InvalidArgument("depthwise packing needs group == channels");
    want_w = g.kh * g.kw * RoundUp(g.ic, kPanel);
    want_b = RoundUp(g.ic, kPanel);
  } else {
    want_w = kernels::PackedConvFloats(g.oc, icg, g.kh, g.kw, g.groups);
    want_b = g.groups * RoundUp(g.oc / g.groups, kPanel);
  }
  FCB_RETURN_IF_ERROR(ExpectWeights(in[1], "ConvNhwc packed weights"));
  FCB_RETURN_IF_ERROR(ExpectF32(in[2], "ConvNhwc packed bias"));
  if (in[1].shape != ir::Shape{want_w})
    return InvalidArgument("packed weights have shape " + ir::ShapeToString(in[1].shape) + ", expected " +
                           std::to_string(want_w));
  if (in[2].shape != ir::Shape{want_b})
    return InvalidArgument("packed bias has shape " + ir::ShapeToString(in[2].shape) + ", expected " +
                           std::to_string(want_b));
  FCB_RETURN_IF_ERROR(CheckedNumel({g.n, g.oh, g.ow, g.oc}).status());
  if (in.size() > 3 && in[3].present()) {
    FCB_RETURN_IF_ERROR(ExpectF32(in[3], "ConvNhwc residual"));
    if (in[3].shape != ir::Shape{g.n, g.oh, g.ow, g.oc})
      return InvalidArgument("residual shape " + ir::ShapeToString(in[3].shape) + " does not match the output");
    cfg.has_residual = true;
  }
  return cfg;
}

Status InferConvNhwc(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(ConvConfig cfg, ResolveConvNhwc(c.attrs, c.inputs));
  out->push_back({DType::kF32, {cfg.g.n, cfg.g.oh, cfg.g.ow, cfg.g.oc}});
  return Status::Ok();
}

// Work is split over output pixels; aim for chunks worth ~64K MACs.
int64_t PixelGrain(const kernels::ConvGeom& g) {
  const int64_t macs = std::max<int64_t>(1, g.kh * g.kw * (g.ic / g.groups) * g.oc);
  return std::max<int64_t>(1, 65536 / macs);
}

class ConvNhwcKernel : public Kernel {
 public:
  ConvNhwcKernel(ConvConfig cfg, std::vector<float> widened) : cfg_(cfg), widened_(std::move(widened)) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    const float* w = widened_.empty() ? static_cast<const float*>(in[1]) : widened_.data();
    const float* b = static_cast<const float*>(in[2]);
    const float* r = cfg_.has_residual ? static_cast<const float*>(in[3]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const auto fn = cfg_.depthwise ? ctx.k->depthwise : ctx.k->conv;
    const int64_t pixels = cfg_.g.n * cfg_.g.oh * cfg_.g.ow;
    if (SplitChannels(ctx.pool->num_threads())) {
      RunChannelSplit(ctx, x, w, b, r, y);
      return Status::Ok();
    }
    ctx.pool->ParallelFor(pixels, PixelGrain(cfg_.g), [&](int64_t begin, int64_t end) {
      fn(cfg_.g, x, w, b, r, y, cfg_.ep, begin, end);
    });
    return Status::Ok();
  }

 private:
  // Split pixels, every thread streams all the weights; split output
  // channels, every thread reads all the input. The second reads less when
  // the input is smaller than the weights, which is the case of the last
  // stages of CNNs (7x7 pixels x 512 channels against 9 MiB of 3x3 weights),
  // where a pixel split leaves two threads no faster than one. Only clear
  // cases switch (weights >= 4x the input): measured on ResNet-18 at 2
  // threads, a 28x28x128 3x3 conv (weights 1.5x the input) ran 10% slower
  // split by channels, while the 7x7x512 ones ran 15% faster.
  bool SplitChannels(int threads) const {
    const auto& g = cfg_.g;
    if (threads < 2 || cfg_.depthwise || g.groups != 1) return false;
    const int64_t pixels = g.n * g.oh * g.ow;
    return 4 * pixels <= g.kh * g.kw * g.oc && g.oc >= 2 * kChannelUnit * threads;
  }

  // Ungrouped packed weights are [panel][ky][kx][ic][16], so panels [p0, p1)
  // are a conv of (p1 - p0) * 16 output channels whose weights start at panel
  // p0; bias, output and residual shift by the first channel while the pixel
  // strides stay those of the full tensors.
  void RunChannelSplit(const RunContext& ctx, const float* x, const float* w, const float* b,
                       const float* r, float* y) const {
    const auto& g = cfg_.g;
    const int64_t units = (g.oc + kChannelUnit - 1) / kChannelUnit;
    const int64_t unit_macs = g.n * g.oh * g.ow * g.kh * g.kw * g.ic * kChannelUnit;
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, unit_macs));
    const int64_t panel_floats = g.kh * g.kw * g.ic * kPanel;
    ctx.pool->ParallelFor(units, grain, [&](int64_t begin, int64_t end) {
      const int64_t c0 = begin * kChannelUnit;
      kernels::ConvGeom sub = g;
      sub.oc = std::min(g.oc, end * kChannelUnit) - c0;
      sub.residual_pixel_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
      ctx.k->conv(sub, x, w + (c0 / kPanel) * panel_floats, b + c0, r ? r + c0 : nullptr, y + c0,
                  cfg_.ep, 0, g.n * g.oh * g.ow);
    });
  }

  // Channels per work item of the channel split: two panels, a whole AVX2
  // tile (AVX-512's 3-panel tiles take the rest as 2-panel tiles).
  static constexpr int64_t kChannelUnit = 2 * kPanel;

  ConvConfig cfg_;
  std::vector<float> widened_;  // fp32 copy of bf16 weights, else empty
};

Result<std::unique_ptr<Kernel>> CreateConvNhwc(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(ConvConfig cfg, ResolveConvNhwc(c.attrs, c.inputs));
  FCB_ASSIGN_OR_RETURN(std::vector<float> widened, WidenIfBf16(c, 1));
  return std::unique_ptr<Kernel>(new ConvNhwcKernel(cfg, std::move(widened)));
}

Result<kernels::PoolGeom> ResolvePoolNhwc(const Attrs& a, const TensorInfo& x) {
  FCB_RETURN_IF_ERROR(ExpectF32(x, "pool input"));
  FCB_RETURN_IF_ERROR(ExpectRank(x, 4, "pool input"));
  if (!a.Has("kernel_shape")) return InvalidArgument("kernel_shape is required");
  FCB_ASSIGN_OR_RETURN(Window2d w, ResolveWindow2d(a, x.shape[1], x.shape[2], 1, 1, true));
  kernels::PoolGeom g{};
  g.n = x.shape[0];
  g.ih = x.shape[1];
  g.iw = x.shape[2];
  g.c = x.shape[3];
  CopyWindow(w, &g);
  g.pad_bottom = w.pad_b;
  g.pad_right = w.pad_r;
  g.count_include_pad = a.GetInt("count_include_pad", 0) != 0;
  FCB_RETURN_IF_ERROR(CheckedNumel({g.n, g.oh, g.ow, g.c}).status());
  return g;
}

Status InferPoolNhwc(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(kernels::PoolGeom g, ResolvePoolNhwc(c.attrs, c.inputs[0]));
  out->push_back({DType::kF32, {g.n, g.oh, g.ow, g.c}});
  return Status::Ok();
}

class PoolNhwcKernel : public Kernel {
 public:
  PoolNhwcKernel(kernels::PoolGeom g, bool is_max) : g_(g), max_(is_max) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    const auto fn = max_ ? ctx.k->maxpool : ctx.k->avgpool;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g_.kh * g_.kw * g_.c));
    ctx.pool->ParallelFor(g_.n * g_.oh * g_.ow, grain,
                          [&](int64_t b, int64_t e) { fn(g_, x, y, b, e); });
    return Status::Ok();
  }

 private:
  kernels::PoolGeom g_;
  bool max_;
};

Result<std::unique_ptr<Kernel>> CreatePoolNhwc(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(kernels::PoolGeom g, ResolvePoolNhwc(c.attrs, c.inputs[0]));
  return std::unique_ptr<Kernel>(new PoolNhwcKernel(g, c.op == "MaxPoolNhwc"));
}

Status InferGlobalAvgNhwc(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "GlobalAvgPoolNhwc input"));
  FCB_RETURN_IF_ERROR(ExpectRank(x, 4, "GlobalAvgPoolNhwc input"));
  FCB_RETURN_IF_ERROR(CheckedNumel(x.shape).status());
  out->push_back({DType::kF32, {x.shape[0], 1, 1, x.shape[3]}});
  return Status::Ok();
}

class GlobalAvgNhwcKernel : public Kernel {
 public:
  GlobalAvgNhwcKernel(int64_t n, int64_t hw, int64_t c) : n_(n), hw_(hw), c_(c) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    ctx.pool->ParallelFor(n_, 1, [&](int64_t b, int64_t e) { ctx.k->global_avgpool(n_, hw_, c_, x, y, b, e); });
    return Status::Ok();
  }

 private:
  int64_t n_, hw_, c_;
};

Result<std::unique_ptr<Kernel>> CreateGlobalAvgNhwc(const CreateContext& c) {
  const auto& s = c.inputs[0].shape;
  return std::unique_ptr<Kernel>(new GlobalAvgNhwcKernel(s[0], s[1] * s[2], s[3]));
}

struct GemmConfig {
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false;
  kernels::Epilogue ep;
};

Result<GemmConfig> ResolveGemmPacked(const Attrs& a, const std::vector<TensorInfo>& in) {
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "GemmPacked input"));
  if (x.shape.empty()) return InvalidArgument("GemmPacked input must have rank >= 1");
  GemmConfig g;
  g.k = x.shape.back();
  FCB_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(x.shape));
  if (g.k < 1) return InvalidArgument("GemmPacked reduction size must be >= 1");
  g.m = numel / g.k;
  g.n = a.GetInt("n", 0);
  if (g.n < 1 || g.n > (int64_t{1} << 24)) return InvalidArgument("GemmPacked n out of range");
  FCB_RETURN_IF_ERROR(ExpectWeights(in[1], "GemmPacked weights"));
  const int64_t want = RoundUp(g.n, kPanel) * g.k;
  if (in[1].shape != ir::Shape{want})
    return InvalidArgument("packed weights have shape " + ir::ShapeToString(in[1].shape) + ", expected " +
                           std::to_string(want));
  if (in.size() > 2 && in[2].present()) {
    FCB_RETURN_IF_ERROR(ExpectF32(in[2], "GemmPacked bias"));
    if (in[2].shape != ir::Shape{g.n}) return InvalidArgument("GemmPacked bias must have shape [n]");
    g.has_bias = true;
  }
  FCB_ASSIGN_OR_RETURN(g.ep, ReadEpilogue(a));
  FCB_RETURN_IF_ERROR(CheckedNumel({g.m, g.n}).status());
  return g;
}

Status InferGemmPacked(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(GemmConfig g, ResolveGemmPacked(c.attrs, c.inputs));
  ir::Shape s = c.inputs[0].shape;
  s.back() = g.n;
  out->push_back({DType::kF32, s});
  return Status::Ok();
}

class GemmPackedKernel : public Kernel {
 public:
  GemmPackedKernel(GemmConfig g, std::vector<float> widened) : g_(g), widened_(std::move(widened)) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* a = static_cast<const float*>(in[0]);
    const float* b = widened_.empty() ? static_cast<const float*>(in[1]) : widened_.data();
    const float* bias = g_.has_bias ? static_cast<const float*>(in[2]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    const int64_t threads = ctx.pool->num_threads();
    if (threads > 1 && g_.m < g_.n && g_.n >= 2 * kColumnUnit * threads) {
      RunColumnSplit(ctx, a, b, bias, y);
      return Status::Ok();
    }
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g_.n * g_.k));
    ctx.pool->ParallelFor(g_.m, grain, [&](int64_t b0, int64_t e0) {
      ctx.k->gemm(g_.m, g_.n, g_.k, a, g_.k, b, bias, y, g_.n, g_.ep, b0, e0);
    });
    return Status::Ok();
  }

 private:
  // With fewer rows than columns (a classifier runs one row), splitting rows
  // makes every thread read all of B, or leaves one row to one thread. Split
  // the columns in whole panels instead: packed B is [panel][k][16], so
  // panels [p0, p1) are a GEMM of their own starting at panel p0, written
  // with the full tensor's row stride.
  void RunColumnSplit(const RunContext& ctx, const float* a, const float* b, const float* bias,
                      float* y) const {
    const int64_t units = (g_.n + kColumnUnit - 1) / kColumnUnit;
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g_.m * g_.k * kColumnUnit));
    ctx.pool->ParallelFor(units, grain, [&](int64_t begin, int64_t end) {
      const int64_t c0 = begin * kColumnUnit;
      const int64_t n = std::min(g_.n, end * kColumnUnit) - c0;
      ctx.k->gemm(g_.m, n, g_.k, a, g_.k, b + (c0 / kPanel) * g_.k * kPanel, bias ? bias + c0 : nullptr,
                  y + c0, g_.n, g_.ep, 0, g_.m);
    });
  }

  static constexpr int64_t kColumnUnit = 2 * kPanel;  // a whole AVX2 column tile

  GemmConfig g_;
  std::vector<float> widened_;  // fp32 copy of bf16 weights, else empty
};

Result<std::unique_ptr<Kernel>> CreateGemmPacked(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(GemmConfig g, ResolveGemmPacked(c.attrs, c.inputs));
  FCB_ASSIGN_OR_RETURN(std::vector<float> widened, WidenIfBf16(c, 1));
  return std::unique_ptr<Kernel>(new GemmPackedKernel(g, std::move(widened)));
}

// ---- ConvExpandDwNhwc ---------------------------------------------------

struct ExpandDwConfig {
  ConvConfig expand, dw;
  int64_t band_rows = 1;  // output rows per band
};

Result<ExpandDwConfig> ResolveExpandDw(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() != 5) return InvalidArgument("ConvExpandDwNhwc needs input, two packed weights and two packed biases");
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "ConvExpandDwNhwc input"));
  FCB_RETURN_IF_ERROR(ExpectRank(x, 4, "ConvExpandDwNhwc input"));
  for (int64_t d : x.shape)
    if (d < 1 || d > (int64_t{1} << 31)) return InvalidArgument("ConvExpandDwNhwc input has an invalid dimension");
  ExpandDwConfig cfg;
  const int64_t e = a.GetInt("out_channels", 0);
  if (e < 1 || e > (int64_t{1} << 24)) return InvalidArgument("out_channels out of range");
  // The depthwise half: ConvNhwc's own checks on an [n, h, w, e] input.
  TensorInfo mid = x;
  mid.shape[3] = e;
  FCB_ASSIGN_OR_RETURN(cfg.dw, ResolveConvNhwc(a, {mid, in[3], in[4]}));
  if (!cfg.dw.depthwise) return InvalidArgument("ConvExpandDwNhwc needs depthwise=1");
  // The 1x1 half.
  auto& g = cfg.expand.g;
  g.n = x.shape[0], g.ih = g.oh = x.shape[1], g.iw = g.ow = x.shape[2], g.ic = x.shape[3];
  g.oc = e, g.groups = 1, g.kh = g.kw = 1, g.sh = g.sw = g.dh = g.dw = 1;
  g.pad_top = g.pad_left = 0;
  g.in_pixel_stride = g.ic, g.out_pixel_stride = e;
  const int64_t act = a.GetInt("expand_activation", 0);
  if (act < 0 || act > static_cast<int64_t>(kernels::Act::kSilu))
    return InvalidArgument("expand_activation code " + std::to_string(act) + " is out of range");
  cfg.expand.ep = {static_cast<kernels::Act>(act), a.GetFloat("expand_activation_alpha", 0.f),
                   a.GetFloat("expand_activation_beta", 0.f)};
  FCB_RETURN_IF_ERROR(ExpectF32(in[1], "ConvExpandDwNhwc packed 1x1 weights"));
  FCB_RETURN_IF_ERROR(ExpectF32(in[2], "ConvExpandDwNhwc packed 1x1 bias"));
  if (in[1].shape != ir::Shape{kernels::PackedConvFloats(e, g.ic, 1, 1, 1)})
    return InvalidArgument("packed 1x1 weights have shape " + ir::ShapeToString(in[1].shape));
  if (in[2].shape != ir::Shape{RoundUp(e, kPanel)})
    return InvalidArgument("packed 1x1 bias has shape " + ir::ShapeToString(in[2].shape));
  // Bands: as many output rows as the buffer holds the intermediate rows of.
  const auto& d = cfg.dw.g;
  const int64_t row_floats = d.iw * e;
  const int64_t rows = kExpandDwBandFloats / std::max<int64_t>(1, row_floats);
  const int64_t reach = (d.kh - 1) * d.dh + 1;  // intermediate rows of one output row
  if (rows < reach)
    return InvalidArgument("ConvExpandDwNhwc: " + std::to_string(reach) + " rows of " +
                           std::to_string(row_floats) + " floats exceed the band buffer");
  cfg.band_rows = std::max<int64_t>(1, (rows - reach) / d.sh + 1);
  return cfg;
}

Status InferExpandDw(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(ExpandDwConfig cfg, ResolveExpandDw(c.attrs, c.inputs));
  const auto& g = cfg.dw.g;
  out->push_back({DType::kF32, {g.n, g.oh, g.ow, g.oc}});
  return Status::Ok();
}

class ExpandDwKernel : public Kernel {
 public:
  explicit ExpandDwKernel(ExpandDwConfig cfg) : cfg_(cfg) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    const float* w1 = static_cast<const float*>(in[1]);
    const float* b1 = static_cast<const float*>(in[2]);
    const float* w2 = static_cast<const float*>(in[3]);
    const float* b2 = static_cast<const float*>(in[4]);
    float* y = static_cast<float*>(out[0]);
    const auto& d = cfg_.dw.g;
    // Rows split evenly over the threads (a grain of whole bands would leave
    // 7x7 and 14x14 maps on one thread); each chunk runs its own bands.
    ctx.pool->ParallelFor(d.n * d.oh, 1, [&](int64_t begin, int64_t end) {
      alignas(64) float buf[kExpandDwBandFloats];
      const int64_t row_floats = d.iw * d.ic;
      // Intermediate rows [have_lo, have_hi) of image have_b are in buf, from
      // row 0: consecutive bands share (kh - 1) * dh + 1 - sh rows, which
      // move to the top instead of being computed again.
      int64_t have_b = -1, have_lo = 0, have_hi = 0;
      for (int64_t r = begin; r < end;) {
        const int64_t b = r / d.oh, oy0 = r % d.oh;
        const int64_t oy1 = std::min({d.oh, oy0 + cfg_.band_rows, oy0 + (end - r)});
        // Intermediate rows [ys, ye) feed output rows [oy0, oy1).
        const int64_t ys = std::max<int64_t>(0, oy0 * d.sh - d.pad_top);
        const int64_t ye = std::max(ys, std::min(d.ih, (oy1 - 1) * d.sh - d.pad_top + (d.kh - 1) * d.dh + 1));
        int64_t from = ys;  // first row still to compute
        if (have_b == b && ys >= have_lo && ys < have_hi) {
          const int64_t keep = std::min(have_hi, ye) - ys;
          std::memmove(buf, buf + (ys - have_lo) * row_floats, keep * row_floats * sizeof(float));
          from = ys + keep;
        }
        if (ye > from) {
          kernels::ConvGeom ge = cfg_.expand.g;
          ge.n = 1, ge.ih = ge.oh = ye - from;
          ctx.k->conv(ge, x + (b * d.ih + from) * d.iw * ge.ic, w1, b1, nullptr,
                      buf + (from - ys) * row_floats, cfg_.expand.ep, 0, (ye - from) * d.iw);
        }
        have_b = b, have_lo = ys, have_hi = ye;
        // The depthwise conv over the band: buffer row 0 is intermediate row ys.
        kernels::ConvGeom gd = d;
        gd.n = 1, gd.ih = ye - ys, gd.oh = oy1 - oy0;
        gd.pad_top = d.pad_top + ys - oy0 * d.sh;
        ctx.k->depthwise(gd, buf, w2, b2, nullptr, y + (b * d.oh + oy0) * d.ow * d.oc,
                         cfg_.dw.ep, 0, gd.oh * d.ow);
        r += oy1 - oy0;
      }
    });
    return Status::Ok();
  }

 private:
  ExpandDwConfig cfg_;
};

Result<std::unique_ptr<Kernel>> CreateExpandDw(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(ExpandDwConfig cfg, ResolveExpandDw(c.attrs, c.inputs));
  return std::unique_ptr<Kernel>(new ExpandDwKernel(cfg));
}

}  // namespace

void RegisterNnOps(std::vector<OpDef>* ops) {
  ops->push_back({"Conv", false, 2, 3, 1, 1, InferConv, CreateNeedsLowering});
  ops->push_back({"MaxPool", false, 1, 1, 1, 2, InferPool, CreateNeedsLowering});
  ops->push_back({"AveragePool", false, 1, 1, 1, 1, InferPool, CreateNeedsLowering});
  ops->push_back({"GlobalAveragePool", false, 1, 1, 1, 1, InferGlobalPool, CreateGlobalPool});
  ops->push_back({"GlobalMaxPool", false, 1, 1, 1, 1, InferGlobalPool, CreateGlobalPool});
  ops->push_back({"BatchNormalization", false, 5, 5, 1, 3, InferBatchNorm, CreateBatchNorm});
  ops->push_back({"ConvNhwc", true, 3, 4, 1, 1, InferConvNhwc, CreateConvNhwc});
  ops->push_back({"MaxPoolNhwc", true, 1, 1, 1, 1, InferPoolNhwc, CreatePoolNhwc});
  ops->push_back({"AvgPoolNhwc", true, 1, 1, 1, 1, InferPoolNhwc, CreatePoolNhwc});
  ops->push_back({"GlobalAvgPoolNhwc", true, 1, 1, 1, 1, InferGlobalAvgNhwc, CreateGlobalAvgNhwc});
  ops->push_back({"GemmPacked", true, 2, 3, 1, 1, InferGemmPacked, CreateGemmPacked});
  ops->push_back({"ConvExpandDwNhwc", true, 5, 5, 1, 1, InferExpandDw, CreateExpandDw});
}

}  // namespace fcb::ops
