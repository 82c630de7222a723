// ConvNhwc: direct NHWC convolution on weights packed at compile time.
//
//   ConvNhwc(X[n,h,w,c], Wpacked, Bpacked[, residual]) -> Y[n,oh,ow,oc]
//   params: ConvParams (internal.h) with the optional output slice
//   (SliceConvParams) and input_nchw (Params below); depthwise = 1 when group == c == oc and
//   the weights are PackDepthwise's, 2 when c == oc with 2 to 16 channels per
//   group (a divisor of 16) and the weights are PackGroupedSmall's, else 0 and
//   PackConv's (dense or grouped).
//
// Layout: an ONNX Conv on a 4-D float input with constant weights (and
// constant bias) becomes a graph ConvNhwc holding the ONNX weights.
// Lowering: the last resort for a graph ConvNhwc (ConvExpandDwNhwc and
// ConvWinogradNhwc are tried first); packs the weights for every target alike
// (fp32, or bf16 when the target's precision asks for it).
#include <algorithm>
#include <cmath>

#include "kernels/packing.h"
#include "ops/conv_geom.h"
#include "ops/int8_weights.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::RoundUpToPanel;
constexpr std::string_view kOp = opname::ConvNhwc;

// A ConvNhwc step's parameters: those of a conv that can write a channel
// slice, plus the optional input_nchw (1: the input is read as NCHW, set by
// ReadNchwInput; absent or 0: NHWC).
struct Params : internal::SliceConvParams {
  std::optional<int64_t> input_nchw;
  template <typename V>
  void Fields(V& v) {
    SliceConvParams::Fields(v);
    v.OptionalInt(attr::kInputNchw, input_nchw);
  }
};

struct Config {
  kernels::ConvGeom g{};
  internal::OutputSlice slice;  // channels of a wider output tensor, if any
  kernels::Epilogue ep{};
  bool depthwise = false;
  bool grouped_small = false;
  bool has_residual = false;
};

// The geometry of a conv over x read as NCHW (input_nchw = 1,
// ReadNchwInput below): that of its NHWC form, for the convs the plane path
// takes; an error naming why otherwise.
Result<kernels::ConvGeom> NchwGeometry(const internal::ConvParams& p, TensorInfo x) {
  if (x.shape.size() == 4) x.shape = {x.shape[0], x.shape[2], x.shape[3], x.shape[1]};
  FCB_ASSIGN_OR_RETURN(kernels::ConvGeom g, internal::ConvGeometry(kOp, p, x));
  g.in_nchw = true;
  if (p.depthwise != 0 || !kernels::PlanarConvApplies(g))
    return InvalidArgument(std::string(kOp) + ": an NCHW input ('input_nchw') needs an ungrouped conv over 1 to 4 "
                           "input channels whose window fits the plane path, got " + std::to_string(g.ic) +
                           " channels in " + std::to_string(g.groups) + " groups, kernel " + std::to_string(g.kh) +
                           "x" + std::to_string(g.kw));
  return g;
}

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() < 3) return InvalidArgument(std::string(kOp) + ": needs input, packed weights and packed bias");
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  Config cfg;
  const int64_t nchw = p.input_nchw.value_or(0);
  if (nchw != 0 && nchw != 1)
    return InvalidArgument(std::string(kOp) + ": attribute 'input_nchw' must be 0 or 1, got " + std::to_string(nchw));
  FCB_ASSIGN_OR_RETURN(cfg.g, nchw ? NchwGeometry(p, in[0]) : internal::ConvGeometry(kOp, p, in[0]));
  FCB_ASSIGN_OR_RETURN(cfg.slice, internal::DecodeOutputSlice(kOp, p, cfg.g.oc));
  internal::ApplyOutputSlice(cfg.slice, &cfg.g);
  cfg.ep = p.ep;
  cfg.depthwise = p.depthwise == 1;
  cfg.grouped_small = p.depthwise == 2;
  const auto& g = cfg.g;
  int64_t want_w, want_b;
  if (cfg.grouped_small) {
    if (g.ic != g.oc || !kernels::GroupedSmallFits(g.oc, g.groups))
      return InvalidArgument(std::string(kOp) + ": small-group packing needs as many input as output channels and "
                             "2 to 16 channels per group dividing 16, got " + std::to_string(g.ic) + " -> " +
                             std::to_string(g.oc) + " channels in " + std::to_string(g.groups) + " groups");
    want_w = kernels::PackedGroupedSmallFloats(g.oc, g.oc / g.groups, g.kh, g.kw);
    want_b = RoundUpToPanel(g.oc);
  } else if (cfg.depthwise) {
    if (g.groups != g.ic || g.oc != g.ic)
      return InvalidArgument(std::string(kOp) + ": depthwise packing needs group == channels");
    want_w = g.kh * g.kw * RoundUpToPanel(g.ic);
    want_b = RoundUpToPanel(g.ic);
  } else {
    want_w = kernels::PackedConvFloats(g.oc, g.ic / g.groups, g.kh, g.kw, g.groups);
    want_b = g.groups * RoundUpToPanel(g.oc / g.groups);
  }
  if (in[1].dtype == ir::DType::kI8) {
    // Weight-only int8 (precision int8, depthwise): per-channel scales in input 4.
    if (!cfg.depthwise) return InvalidArgument(std::string(kOp) + ": int8 weights need the depthwise packing");
    FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[1], "packed weights", want_w));
    if (in.size() < 5 || in[4].dtype != ir::DType::kF32 || in[4].shape != ir::Shape{want_b})
      return InvalidArgument(std::string(kOp) + ": int8 weights need float32 scales [" + std::to_string(want_b) +
                             "] as input 4");
    FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[2], "packed bias"));
    FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[2], "packed bias", want_b));
    FCB_ASSIGN_OR_RETURN(cfg.has_residual, internal::CheckResidual(kOp, in, 3, {g.n, g.oh, g.ow, g.oc}));
    return cfg;
  }
  if (in.size() > 4 && in[4].present()) return InvalidArgument(std::string(kOp) + ": input 4 is only for int8 weights");
  FCB_ASSIGN_OR_RETURN(cfg.has_residual, internal::CheckConvOperands(kOp, in, g, want_w, want_b, /*bf16_ok=*/true));
  return cfg;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  out->push_back({ir::DType::kF32, {cfg.g.n, cfg.g.oh, cfg.g.ow, cfg.g.out_pixel_stride}});
  return Status::Ok();
}

// Work is split over output pixels; aim for chunks worth ~64K MACs.
int64_t PixelGrain(const kernels::ConvGeom& g) {
  const int64_t macs = std::max<int64_t>(1, g.kh * g.kw * (g.ic / g.groups) * g.oc);
  return std::max<int64_t>(1, 65536 / macs);
}

class ConvNhwcKernel : public Kernel {
 public:
  ConvNhwcKernel(Config cfg, std::vector<float> widened, size_t n_inputs)
      : cfg_(cfg), widened_(std::move(widened)), n_inputs_(n_inputs) {}
  // Any sizes its inference accepts: the geometry is worked out at each run.
  bool adapts() const override { return true; }
  bool worth_specializing() const override { return false; }
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const kernels::ConvGeom g = internal::ConvGeomAt(ctx, n_inputs_, cfg_.g);
    const float* x = static_cast<const float*>(in[0]);
    const float* w = widened_.empty() ? static_cast<const float*>(in[1]) : widened_.data();
    const float* b = static_cast<const float*>(in[2]);
    const float* r = cfg_.has_residual ? static_cast<const float*>(in[3]) : nullptr;
    float* y = static_cast<float*>(out[0]) + cfg_.slice.offset;
    const int64_t pixels = g.n * g.oh * g.ow;
    if (cfg_.depthwise) {
      ctx.pool->ParallelFor(pixels, PixelGrain(g), [&](int64_t begin, int64_t end) {
        ctx.k->f32.depthwise(g, x, w, b, r, y, cfg_.ep, begin, end);
      });
      return Status::Ok();
    }
    if (cfg_.grouped_small) {
      ctx.pool->ParallelFor(pixels, PixelGrain(g), [&](int64_t begin, int64_t end) {
        ctx.k->f32.grouped_small(g, x, w, b, r, y, cfg_.ep, begin, end);
      });
      return Status::Ok();
    }
    if (SplitChannels(g, ctx.pool->num_threads())) {
      RunChannelSplit(ctx, g, x, w, b, r, y);
      return Status::Ok();
    }
    // Large maps in several chunks per thread (ThreadPool::RunChunks), so a
    // thread the host slows down hands its later rows to the other: a chunk
    // of 256 pixels or more is several row blocks already, and streams the
    // weights no more often than one chunk would. Small maps keep one chunk
    // per thread (each chunk streams all the weights).
    const int per_thread = ctx.pool->ChunksPerThreadFor(pixels, 256);
    ctx.pool->ParallelForThreads(
        pixels, PixelGrain(g),
        [&](int t, int64_t begin, int64_t end) {
          ctx.k->f32.conv(g, x, w, b, r, y, cfg_.ep, begin, end, static_cast<float*>(ctx.ThreadScratch(t)));
        },
        per_thread);
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
  static bool SplitChannels(const kernels::ConvGeom& g, int threads) {
    if (threads < 2 || g.groups != 1) return false;
    const int64_t pixels = g.n * g.oh * g.ow;
    return 4 * pixels <= g.kh * g.kw * g.oc && g.oc >= 2 * kChannelUnit * threads;
  }

  // Ungrouped packed weights are [panel][ky][kx][ic][16], so panels [p0, p1)
  // are a conv of (p1 - p0) * 16 output channels whose weights start at panel
  // p0; bias, output and residual shift by the first channel while the pixel
  // strides stay those of the full tensors.
  void RunChannelSplit(const RunContext& ctx, const kernels::ConvGeom& g, const float* x, const float* w,
                       const float* b, const float* r, float* y) const {
    const int64_t units = (g.oc + kChannelUnit - 1) / kChannelUnit;
    const int64_t unit_macs = g.n * g.oh * g.ow * g.kh * g.kw * g.ic * kChannelUnit;
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, unit_macs));
    const int64_t panel_floats = g.kh * g.kw * g.ic * kPanel;
    ctx.pool->ParallelForThreads(units, grain, [&](int t, int64_t begin, int64_t end) {
      const int64_t c0 = begin * kChannelUnit;
      kernels::ConvGeom sub = g;
      sub.oc = std::min(g.oc, end * kChannelUnit) - c0;
      sub.residual_pixel_stride = g.residual_pixel_stride ? g.residual_pixel_stride : g.out_pixel_stride;
      ctx.k->f32.conv(sub, x, w + (c0 / kPanel) * panel_floats, b + c0, r ? r + c0 : nullptr, y + c0,
                      cfg_.ep, 0, g.n * g.oh * g.ow, static_cast<float*>(ctx.ThreadScratch(t)));
    });
  }

  // Channels per work item of the channel split: two panels, a whole AVX2
  // tile (AVX-512's 3-panel tiles take the rest as 2-panel tiles).
  static constexpr int64_t kChannelUnit = 2 * kPanel;

  Config cfg_;
  std::vector<float> widened_;  // fp32 copy of bf16 weights, else empty
  size_t n_inputs_;             // the step's (RunContext::shapes: its output's shape follows them)
};

// Weight-only int8 depthwise weights [ky][kx][Cp] and their scales [Cp],
// widened to float once at load.
Result<std::vector<float>> WidenInt8(const CreateContext& c) {
  const void* w = c.input_data ? (*c.input_data)[1] : nullptr;
  const void* s = c.input_data ? (*c.input_data)[4] : nullptr;
  if (!w || !s) return Unsupported(std::string(kOp) + ": int8 weights and their scales must be stored in the file");
  const int64_t n = c.inputs[1].numel(), cp = c.inputs[4].numel();
  std::vector<float> out(static_cast<size_t>(n));
  const auto* q = static_cast<const int8_t*>(w);
  const auto* sc = static_cast<const float*>(s);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * sc[i % cp];
  return out;
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  if (c.inputs[1].dtype == ir::DType::kI8) {
    FCB_ASSIGN_OR_RETURN(std::vector<float> widened, WidenInt8(c));
    return std::unique_ptr<Kernel>(new ConvNhwcKernel(cfg, std::move(widened), c.inputs.size()));
  }
  FCB_ASSIGN_OR_RETURN(std::vector<float> widened, internal::WidenIfBf16(kOp, c, 1));
  return std::unique_ptr<Kernel>(new ConvNhwcKernel(cfg, std::move(widened), c.inputs.size()));
}

Result<uint64_t> Scratch(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  return cfg.depthwise || cfg.grouped_small ? 0 : kernels::kGemmScratchFloats * sizeof(float);
}

// ONNX Conv -> graph ConvNhwc (ONNX weights, explicit pads).
Result<bool> FromConv(LayoutContext& c, const ir::Node& n) {
  const ir::Graph& g = c.graph();
  auto is_const = [&](size_t i) { return i < n.inputs.size() && n.inputs[i] >= 0 && g.values[n.inputs[i]].is_constant(); };
  if (!is_const(1) || (n.inputs.size() > 2 && n.inputs[2] >= 0 && !is_const(2))) return false;
  const ir::Shape xs = c.LogicalShape(n.inputs[0]);  // NCHW, whatever the input's layout now
  const ir::Shape& ws = g.values[n.inputs[1]].shape;
  if (ws.size() != 4) return false;
  FCB_ASSIGN_OR_RETURN(Window2d w, ResolveWindow2d(AttrsFromNode(n), xs[2], xs[3], ws[2], ws[3], false));
  internal::ConvParams p;
  p.Set(w);
  p.group = n.GetInt("group", 1);
  p.out_channels = ws[0];
  p.ep = NodeEpilogue(n);
  ir::Node r = internal::NhwcNode(c, n, kOp, {n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : -1});
  SetNodeParams(&r, p);
  c.EmitNhwc(std::move(r));
  return true;
}

// Graph ConvNhwc -> ConvNhwc step with packed weights.
Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  FCB_ASSIGN_OR_RETURN(internal::ConvOperands o, internal::ConstConvOperands(c, n));
  const ir::TensorData *w = o.w, *b = o.b;
  internal::ConvParams& p = o.p;
  const int64_t oc = w->shape[0], icg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
  const int64_t ic = c.value(n.inputs[0]).shape[3];
  const bool depthwise = p.group > 1 && p.group == ic && oc == ic && icg == 1;
  const float* bias = b ? b->data<float>() : nullptr;
  int32_t pw, pb;
  if (depthwise && c.target().int8()) {
    // Precision int8 keeps depthwise convolutions in float (QuantizeInt8
    // leaves them), but stores their weights as int8, symmetric per channel,
    // widened at load: a quarter of the bytes, the float kernel's speed.
    const std::vector<float> f = kernels::PackDepthwise(w->data<float>(), oc, kh, kw);
    const int64_t cp = static_cast<int64_t>(f.size()) / (kh * kw);
    std::vector<float> scale(static_cast<size_t>(cp));
    std::vector<int8_t> q(f.size());
    for (int64_t ch = 0; ch < cp; ++ch)
      scale[ch] = QuantizeChannelInt8(
          kh * kw, [&](int64_t t) { return f[t * cp + ch]; }, [&](int64_t t, int8_t x) { q[t * cp + ch] = x; });
    pw = c.Weights(n.name + ".w8", ir::DType::kI8, q.data(), static_cast<int64_t>(q.size()));
    pb = c.Floats(n.name + ".b", kernels::PackDepthwiseBias(bias, oc));
    const int32_t ps = c.Weights(n.name + ".w8scale", ir::DType::kF32, scale.data(), cp);
    p.depthwise = 1;
    c.Emit(kOp, n.name, {c.Value(n.inputs[0]), pw, pb, n.inputs.size() > 3 ? c.Value(n.inputs[3]) : -1, ps},
           {c.Value(n.outputs[0])}, EncodeParams(p));
    return true;
  }
  // Few channels per group (ResNeXt's 4 to 16): the depthwise-style kernel
  // that vectorizes across groups (KernelTable::grouped_small).
  const bool grouped_small = !depthwise && ic == oc && kernels::GroupedSmallFits(oc, p.group);
  if (depthwise) {
    pw = c.PackedWeights(n.name + ".w", kernels::PackDepthwise(w->data<float>(), oc, kh, kw));
    pb = c.Floats(n.name + ".b", kernels::PackDepthwiseBias(bias, oc));
  } else if (grouped_small) {
    pw = c.PackedWeights(n.name + ".w", kernels::PackGroupedSmall(w->data<float>(), oc, icg, kh, kw));
    pb = c.Floats(n.name + ".b", kernels::PackDepthwiseBias(bias, oc));
  } else {
    pw = c.PackedWeights(n.name + ".w", kernels::PackConv(w->data<float>(), oc, icg, kh, kw, p.group));
    pb = c.Floats(n.name + ".b", kernels::PackConvBias(bias, oc, p.group));
  }
  p.depthwise = depthwise ? 1 : grouped_small ? 2 : 0;
  internal::EmitConvStep(c, kOp, n, pw, pb, EncodeParams(p));
  return true;
}

uint64_t Flops(const CreateContext& c) {
  auto cfg = Resolve(c.attrs, c.inputs);
  return cfg.ok() ? internal::ConvFlops(cfg.value().g) : 0;
}

// OpDef::window_shape: the window over input 0 (NHWC, or NCHW where
// input_nchw), the residual input 3. An NCHW read's plane path must hold at
// every output width (PlanarConvApplies: its segment may not depend on it).
bool Window(const Attrs& a, const std::vector<TensorInfo>& in, WindowShape* w) {
  auto cfg = Resolve(a, in);
  auto p = DecodeParams<Params>(kOp, a);
  if (!cfg.ok() || !p.ok()) return false;
  if (cfg.value().g.in_nchw) {
    kernels::ConvGeom wide = cfg.value().g;
    wide.ow = int64_t{1} << 30;
    if (!kernels::PlanarConvApplies(wide)) return false;
    w->h_axis = 2, w->w_axis = 3;
  }
  p.value().ToWindowShape(w);
  w->residual = cfg.value().has_residual ? 3 : -1;
  return true;
}

// OpDef::read_nchw_input: a conv the plane path takes (the RGB stems) reads
// its input as NCHW of shape `nchw` (input_nchw = 1).
bool ReadNchwInput(format::StepDesc* s, const ir::Shape& nchw) {
  if (nchw.size() != 4 || s->inputs.empty()) return false;
  auto p = DecodeParams<Params>(kOp, Attrs(s->attrs));
  if (!p.ok() || p.value().input_nchw || !NchwGeometry(p.value(), TensorInfo{ir::DType::kF32, nchw}).ok())
    return false;
  p.value().input_nchw = 1;
  s->attrs = EncodeParams(p.value());
  return true;
}

}  // namespace

OpDef DefineConvNhwc() {
  OpDef d = internal::LoweredOp(kOp, 3, 5, Infer, Create, Scratch);
  d.flops = Flops;
  d.traits = kTraitTakesActivation | kTraitTakesResidual | kTraitFixedScratch;
  d.lowerings = {{kOp, 10, Lower}};
  d.layouts = {{"Conv", FromConv}};
  d.write_channel_slice = internal::WriteChannelSlice<Params>;
  d.read_nchw_input = ReadNchwInput;
  d.window_shape = Window;
  return d;
}

}  // namespace fcb::ops
