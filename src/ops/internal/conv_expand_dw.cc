// ConvExpandDwNhwc: a 1x1 convolution feeding a depthwise convolution, the
// inverted-residual block of MobileNetV2 and EfficientNet, in one step whose
// e-channel intermediate (4.8 MB at 112x112x96) is never written out: bands
// of it are made in per-thread scratch and consumed while in cache.
//
//   ConvExpandDwNhwc(X[n,h,w,c], W1packed, B1packed, W2packed, B2packed) -> Y[n,oh,ow,e]
//   params: the depthwise conv's ConvParams (group = out_channels = e,
//   depthwise = 1) and the 1x1 conv's activation (expand_activation*).
//   W1/B1: PackConv/PackConvBias of the 1x1 conv (c -> e channels);
//   W2/B2: PackDepthwise/PackDepthwiseBias.
//
// Lowering: claims a plain 1x1 graph ConvNhwc whose only reader is a
// depthwise ConvNhwc (fp32, optimization level >= 1), when the rows of the
// intermediate that one output row needs fit the band buffer.
#include <algorithm>
#include <cstring>

#include "kernels/packing.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::RoundUpToPanel;
constexpr std::string_view kOp = opname::ConvExpandDwNhwc;

// Floats of the band of intermediate rows each thread works in (384 KiB,
// about half an L2): the scratch holds the band, then the 1x1 conv's own.
constexpr int64_t kBandFloats = int64_t{96} << 10;

struct Params {
  internal::ConvParams dw;
  kernels::Epilogue expand_ep;
  template <typename V>
  void Fields(V& v) {
    dw.Fields(v);
    v.Epilogue(attr::kExpandActivation, attr::kExpandActivationAlpha, attr::kExpandActivationBeta, expand_ep);
  }
};

struct Config {
  kernels::ConvGeom expand{}, dw{};
  kernels::Epilogue expand_ep{}, dw_ep{};
  int64_t band_rows = 1;  // output rows per band
};

// Output rows per band when the intermediate's rows hold row_floats floats
// each and one output row needs `reach` of them (at least reach fit).
int64_t BandRows(int64_t row_floats, int64_t reach, int64_t sh) {
  return std::max<int64_t>(1, (kBandFloats / std::max<int64_t>(1, row_floats) - reach) / sh + 1);
}

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() != 5) return OpError(kOp, "needs input, two packed weights and two packed biases");
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(internal::ExpectNhwc(kOp, x, "input"));
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  const int64_t e = p.dw.out_channels;
  if (p.dw.depthwise != 1 || p.dw.group != e) return OpError(kOp, "needs a depthwise second conv (group == out_channels, depthwise 1)");
  Config cfg;
  // The depthwise half on the [n, h, w, e] intermediate.
  TensorInfo mid = x;
  mid.shape[3] = e;
  FCB_ASSIGN_OR_RETURN(cfg.dw, internal::ConvGeometry(kOp, p.dw, mid));
  cfg.dw_ep = p.dw.ep;
  const auto& d = cfg.dw;
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[3], "packed depthwise weights"));
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[4], "packed depthwise bias"));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[3], "packed depthwise weights", d.kh * d.kw * RoundUpToPanel(e)));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[4], "packed depthwise bias", RoundUpToPanel(e)));
  // The 1x1 half.
  auto& g = cfg.expand;
  g.n = x.shape[0], g.ih = g.oh = x.shape[1], g.iw = g.ow = x.shape[2], g.ic = x.shape[3];
  g.oc = e, g.groups = 1, g.kh = g.kw = 1, g.sh = g.sw = g.dh = g.dw = 1;
  g.pad_top = g.pad_left = 0;
  g.in_pixel_stride = g.ic, g.out_pixel_stride = e;
  cfg.expand_ep = p.expand_ep;
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[1], "packed 1x1 weights"));
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[2], "packed 1x1 bias"));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[1], "packed 1x1 weights", kernels::PackedConvFloats(e, g.ic, 1, 1, 1)));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[2], "packed 1x1 bias", RoundUpToPanel(e)));
  // Bands: as many output rows as the buffer holds the intermediate rows of.
  const int64_t row_floats = d.iw * e;
  const int64_t rows = kBandFloats / std::max<int64_t>(1, row_floats);
  const int64_t reach = (d.kh - 1) * d.dh + 1;  // intermediate rows of one output row
  if (rows < reach)
    return OpError(kOp, std::to_string(reach) + " rows of " + std::to_string(row_floats) +
                            " floats exceed the band buffer");
  cfg.band_rows = BandRows(row_floats, reach, d.sh);
  return cfg;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  const auto& g = cfg.dw;
  out->push_back({ir::DType::kF32, {g.n, g.oh, g.ow, g.oc}});
  return Status::Ok();
}

class ExpandDwKernel : public Kernel {
 public:
  explicit ExpandDwKernel(Config cfg) : cfg_(cfg) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const Operands o{static_cast<const float*>(in[0]), static_cast<const float*>(in[1]),
                     static_cast<const float*>(in[2]), static_cast<const float*>(in[3]),
                     static_cast<const float*>(in[4]), static_cast<float*>(out[0])};
    const auto& d = cfg_.dw;
    const int threads = ctx.pool->num_threads();
    const int64_t units = (d.oc + kChannelUnit - 1) / kChannelUnit;
    if (threads > 1 && d.n * d.oh <= 8 * threads && units >= 2 * threads) {
      // Few rows (14x14 and 7x7 maps): split the channels instead. Each
      // thread makes its slice of the intermediate for every row from its
      // slice of the 1x1 weights, so no thread computes the rows another
      // also needs (a row split recomputes kh - 1 rows per boundary, a
      // third of 7 rows) or streams weights it does not use.
      ctx.pool->ParallelForThreads(units, 1, [&](int t, int64_t u0, int64_t u1) {
        const int64_t c0 = u0 * kChannelUnit;
        Bands(ctx, t, o, 0, d.n * d.oh, c0, std::min(d.oc, u1 * kChannelUnit) - c0);
      });
      return Status::Ok();
    }
    // Rows split evenly over the threads (a grain of whole bands would leave
    // 7x7 and 14x14 maps on one thread); each chunk runs its own bands.
    ctx.pool->ParallelForThreads(d.n * d.oh, 1, [&](int t, int64_t begin, int64_t end) {
      Bands(ctx, t, o, begin, end, 0, d.oc);
    });
    return Status::Ok();
  }

 private:
  // Channel slices of the channel split: whole 16-column panels of the packed
  // 1x1 weights, two at a time (an AVX-512 column tile).
  static constexpr int64_t kChannelUnit = 2 * kPanel;

  struct Operands {
    const float *x, *w1, *b1, *w2, *b2;
    float* y;
  };

  // Output rows [begin, end) (over the batch) of channels [c0, c0 + ne), in
  // bands, on thread t's scratch.
  void Bands(const RunContext& ctx, int t, const Operands& o, int64_t begin, int64_t end, int64_t c0,
             int64_t ne) const {
    const auto& d = cfg_.dw;
    float* buf = static_cast<float*>(ctx.ThreadScratch(t));
    float* conv_scratch = buf + kBandFloats;
    // The 1x1 conv makes channels [c0, c0 + ne) of the intermediate: panels
    // from c0 / 16 on of its packed weights ([panel][ic][16]) and bias.
    kernels::ConvGeom ge0 = cfg_.expand;
    ge0.oc = ne, ge0.out_pixel_stride = ne;
    const float* w1 = o.w1 + (c0 / kPanel) * ge0.ic * kPanel;
    // The depthwise conv reads the slice (ne channels per pixel) and writes
    // its channels of the output; its packed weights keep the full tensor's
    // tap stride.
    kernels::ConvGeom gd0 = d;
    gd0.ic = gd0.oc = gd0.groups = ne;
    gd0.in_pixel_stride = ne;
    gd0.dw_tap_stride = RoundUpToPanel(d.oc);
    const int64_t row_floats = d.iw * ne;
    const int64_t reach = (d.kh - 1) * d.dh + 1;
    const int64_t band_rows = ne == d.oc ? cfg_.band_rows : BandRows(row_floats, reach, d.sh);
    // Intermediate rows [have_lo, have_hi) of image have_b are in buf, from
    // row 0: consecutive bands share (kh - 1) * dh + 1 - sh rows, which move
    // to the top instead of being computed again.
    int64_t have_b = -1, have_lo = 0, have_hi = 0;
    for (int64_t r = begin; r < end;) {
      const int64_t b = r / d.oh, oy0 = r % d.oh;
      const int64_t oy1 = std::min({d.oh, oy0 + band_rows, oy0 + (end - r)});
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
        kernels::ConvGeom ge = ge0;
        ge.n = 1, ge.ih = ge.oh = ye - from;
        ctx.k->f32.conv(ge, o.x + (b * d.ih + from) * d.iw * ge.ic, w1, o.b1 + c0, nullptr,
                        buf + (from - ys) * row_floats, cfg_.expand_ep, 0, (ye - from) * d.iw, conv_scratch);
      }
      have_b = b, have_lo = ys, have_hi = ye;
      // The depthwise conv over the band: buffer row 0 is intermediate row ys.
      kernels::ConvGeom gd = gd0;
      gd.n = 1, gd.ih = ye - ys, gd.oh = oy1 - oy0;
      gd.pad_top = d.pad_top + ys - oy0 * d.sh;
      ctx.k->f32.depthwise(gd, buf, o.w2 + c0, o.b2 + c0, nullptr, o.y + (b * d.oh + oy0) * d.ow * d.oc + c0,
                           cfg_.dw_ep, 0, gd.oh * d.ow);
      r += oy1 - oy0;
    }
  }

  Config cfg_;
};

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  return std::unique_ptr<Kernel>(new ExpandDwKernel(cfg));
}

Result<uint64_t> Scratch(const CreateContext&) {
  return (kBandFloats + kernels::kGemmScratchFloats) * sizeof(float);
}

// A plain 1x1 graph ConvNhwc on a 4-D fp32 input.
bool IsPlainPointwise(const LowerContext& c, const ir::Node& n, const internal::ConvParams& p) {
  const ir::TensorData* w = internal::ConstConvWeights(c, n);
  if (!w || p.group != 1 || w->shape[2] != 1 || w->shape[3] != 1) return false;
  if (p.strides != std::array<int64_t, 2>{1, 1} || p.pads != std::array<int64_t, 4>{0, 0, 0, 0}) return false;
  const ir::Value& x = c.value(n.inputs[0]);
  return x.shape.size() == 4 && x.dtype == ir::DType::kF32;
}

// A depthwise graph ConvNhwc reading `input` whose band fits the buffer.
bool IsFusableDepthwise(const LowerContext& c, const ir::Node& n, const internal::ConvParams& p, int input) {
  const ir::TensorData* w = internal::ConstConvWeights(c, n);
  if (!w || n.inputs[0] != input) return false;
  const ir::Shape& x = c.value(input).shape;
  if (x.size() != 4) return false;
  const int64_t ch = x[3];
  if (!(p.group > 1 && p.group == ch && w->shape[0] == ch && w->shape[1] == 1)) return false;
  // (kh - 1) * dh + 1 rows of the intermediate must fit the band buffer with
  // room for a few output rows.
  const int64_t reach = (w->shape[2] - 1) * p.dilations[0] + 1;
  return (reach + 2) * x[2] * ch <= kBandFloats;
}

Result<bool> Lower(LowerContext& c, int ai) {
  if (c.target().optimization_level == 0 || c.target().bf16_weights()) return false;
  const ir::Node& a = c.node(ai);
  if (a.outputs.size() != 1) return false;
  auto pa = DecodeParams<internal::ConvParams>(kOp, AttrsFromNode(a));
  if (!pa.ok() || !IsPlainPointwise(c, a, pa.value())) return false;
  const int bi = c.SoleReader(a.outputs[0]);
  if (bi < 0) return false;
  const ir::Node& b = c.node(bi);
  auto pb = DecodeParams<internal::ConvParams>(kOp, AttrsFromNode(b));
  if (!pb.ok() || !IsFusableDepthwise(c, b, pb.value(), a.outputs[0])) return false;
  const ir::TensorData* w1 = c.Const(a, 1);
  const ir::TensorData* b1 = c.Const(a, 2);
  const ir::TensorData* w2 = c.Const(b, 1);
  const ir::TensorData* b2 = c.Const(b, 2);
  const int64_t ch = w1->shape[1], e = w1->shape[0], kh = w2->shape[2], kw = w2->shape[3];
  Params p;
  p.dw = pb.value();
  p.dw.depthwise = 1;
  p.expand_ep = pa.value().ep;
  std::vector<int32_t> in = {
      c.Value(a.inputs[0]),
      c.Floats(a.name + ".w", kernels::PackConv(w1->data<float>(), e, ch, 1, 1, 1)),
      c.Floats(a.name + ".b", kernels::PackConvBias(b1 ? b1->data<float>() : nullptr, e, 1)),
      c.Floats(b.name + ".w", kernels::PackDepthwise(w2->data<float>(), e, kh, kw)),
      c.Floats(b.name + ".b", kernels::PackDepthwiseBias(b2 ? b2->data<float>() : nullptr, e))};
  c.Emit(kOp, a.name + "+" + b.name, std::move(in), {c.Value(b.outputs[0])}, EncodeParams(p));
  c.Claim(bi);
  return true;
}

// Both convolutions' arithmetic: the 1x1 over every input pixel, then the
// depthwise over the output.
uint64_t Flops(const CreateContext& c) {
  auto cfg = Resolve(c.attrs, c.inputs);
  if (!cfg.ok()) return 0;
  kernels::ConvGeom e = cfg.value().expand;
  e.n = cfg.value().dw.n;
  return internal::ConvFlops(e) + internal::ConvFlops(cfg.value().dw);
}

}  // namespace

OpDef DefineConvExpandDwNhwc() {
  OpDef d = internal::LoweredOp(kOp, 5, 5, Infer, Create, Scratch);
  d.flops = Flops;
  d.lowerings = {{opname::ConvNhwc, 30, Lower}};
  return d;
}

}  // namespace fcb::ops
