// ConvWinogradNhwc: 3x3 stride-1 convolution by Winograd F(4x4, 3x3).
//
//   ConvWinogradNhwc(X[n,h,w,ic], Wpacked, Bpacked[, residual]) -> Y[n,oh,ow,oc]
//   params: ConvParams (internal.h): 3x3 kernel, unit strides and dilations,
//   group 1, depthwise 0; ic <= kernels::kWinogradMaxIc.
//   Wpacked: PackWinograd ([36][ceil(oc/16)][ic][16], float32);
//   Bpacked: PackConvBias ([ceil(oc/16)*16]).
//
// Lowering: chosen per graph ConvNhwc by the cost model below, before the
// direct conv. fp32 only (bf16 targets keep the direct conv's bf16 packing).
#include <algorithm>

#include "kernels/packing.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::RoundUpToPanel;
using kernels::PanelCount;
constexpr std::string_view kOp = opname::ConvWinogradNhwc;

struct Config {
  kernels::ConvGeom g{};
  internal::OutputSlice slice;  // channels of a wider output tensor, if any
  kernels::Epilogue ep{};
  bool has_residual = false;
};

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() < 3) return OpError(kOp, "needs input, packed weights and packed bias");
  FCB_ASSIGN_OR_RETURN(internal::SliceConvParams p, DecodeParams<internal::SliceConvParams>(kOp, a));
  if (p.kernel != std::array<int64_t, 2>{3, 3} || p.strides != std::array<int64_t, 2>{1, 1} ||
      p.dilations != std::array<int64_t, 2>{1, 1})
    return OpError(kOp, "needs a 3x3 kernel with unit strides and dilations");
  if (p.group != 1 || p.depthwise != 0) return OpError(kOp, "group must be 1");
  Config cfg;
  FCB_ASSIGN_OR_RETURN(cfg.g, internal::ConvGeometry(kOp, p, in[0]));
  FCB_ASSIGN_OR_RETURN(cfg.slice, internal::DecodeOutputSlice(kOp, p, cfg.g.oc));
  internal::ApplyOutputSlice(cfg.slice, &cfg.g);
  cfg.ep = p.ep;
  const auto& g = cfg.g;
  if (g.ic > kernels::kWinogradMaxIc)
    return OpError(kOp, "input channels " + std::to_string(g.ic) + " exceed " +
                            std::to_string(kernels::kWinogradMaxIc));
  FCB_ASSIGN_OR_RETURN(cfg.has_residual,
                       internal::CheckConvOperands(kOp, in, g, kernels::PackedWinogradFloats(g.oc, g.ic),
                                                  RoundUpToPanel(g.oc), /*bf16_ok=*/false));
  return cfg;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  out->push_back({ir::DType::kF32, {cfg.g.n, cfg.g.oh, cfg.g.ow, cfg.g.out_pixel_stride}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  const int64_t panels = PanelCount(cfg.g.oc);
  const size_t n_inputs = c.inputs.size();
  // Any sizes its inference accepts: the geometry and tiles are worked out at each run.
  return MakeAdaptingKernel([cfg, panels, n_inputs](const RunContext& ctx, const void* const* in,
                                                    void* const* out) -> Status {
    const kernels::ConvGeom g = internal::ConvGeomAt(ctx, n_inputs, cfg.g);
    const int64_t tiles = g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4);
    const float* x = static_cast<const float*>(in[0]);
    const float* w = static_cast<const float*>(in[1]);
    const float* b = static_cast<const float*>(in[2]);
    const float* r = cfg.has_residual ? static_cast<const float*>(in[3]) : nullptr;
    float* y = static_cast<float*>(out[0]) + cfg.slice.offset;
    // Work items: `parts` column ranges x `tiles` tiles, column-range major,
    // so a thread's items are consecutive tiles of one or two column ranges.
    // Threads split the tiles when there are at least as many blocks of
    // tiles as threads; with fewer (a 14x14 map is one block of 16 tiles)
    // they split the output channels instead, in whole pairs of panels, so
    // each thread streams only its part of the weights and runs full-width
    // register tiles (a tile split would have every thread stream all of
    // them for a few tiles each).
    const int64_t threads = ctx.pool->num_threads();
    const int64_t blocks = (tiles + kernels::kWinogradBlockTiles - 1) / kernels::kWinogradBlockTiles;
    const int64_t parts = threads > 1 && blocks < threads ? std::clamp<int64_t>(panels / 2, 1, threads) : 1;
    const auto cut = [&](int64_t k) { return k >= parts ? panels : panels * k / parts / 2 * 2; };
    ctx.pool->ParallelForThreads(parts * tiles, 1, [&](int t, int64_t begin, int64_t end) {
      float* scratch = static_cast<float*>(ctx.ThreadScratch(t));
      while (begin < end) {
        const int64_t k = begin / tiles, stop = std::min(end, (k + 1) * tiles);
        ctx.k->f32.winograd(g, x, w, b, r, y, cfg.ep, begin - k * tiles, stop - k * tiles, cut(k), cut(k + 1),
                            scratch);
        begin = stop;
      }
    });
    return Status::Ok();
  }, /*specialize=*/false);
}

Result<uint64_t> Scratch(const CreateContext&) { return kernels::kWinogradScratchFloats * sizeof(float); }

// Cost model: 36 multiplies per 4x4 output tile instead of 144, but 4x the
// weight bytes, which every block of up to kWinogradBlockTiles tiles streams
// once; it pays where a feature map has enough tiles to share them. Measured
// on ResNet-18/50, GoogLeNet and DenseNet-121 layers (x86-64-v4, AMD EPYC
// Zen 5, 1 and 2 threads): from 32 tiles on, and from 16 tiles (a 14x14 map)
// with at least 64 output channels (ResNet-50's 14x14x256: 1.08 -> 0.78 ms;
// DenseNet's 14x14 128 -> 32 convs gained nothing at 1 thread and lost a
// fifth at 2); always with >= 16 input and output channels. Target-neutral,
// so every fp32 target shares the packed bytes.
constexpr int64_t kMinTiles = 32, kMinTilesWide = 16, kWideOc = 64;

// Whether the convolution can run as Winograd at all (its shape aside from the output's size).
bool WinogradFits(const LowerContext& c, const internal::ConvParams& p, const ir::TensorData& w) {
  if (c.target().optimization_level == 0 || c.target().bf16_weights()) return false;
  const int64_t oc = w.shape[0], icg = w.shape[1];
  if (w.shape[2] != 3 || w.shape[3] != 3 || p.group != 1) return false;
  if (icg < 16 || icg > kernels::kWinogradMaxIc || oc < 16) return false;
  return p.strides == std::array<int64_t, 2>{1, 1} && p.dilations == std::array<int64_t, 2>{1, 1};
}

// The fewest 4x4 output tiles (N * ceil(H/4) * ceil(W/4) of the NHWC output) at which Winograd pays.
int64_t MinTiles(const ir::TensorData& w) { return w.shape[0] >= kWideOc ? kMinTilesWide : kMinTiles; }

bool PaysAt(const ir::Shape& y, const ir::TensorData& w) {
  return y.size() == 4 && y[0] * ((y[1] + 3) / 4) * ((y[2] + 3) / 4) >= MinTiles(w);
}

Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  auto o = internal::ConstConvOperands(c, n);
  if (!o.ok()) return false;  // the direct conv's rule reports it
  const ir::TensorData *w = o.value().w, *b = o.value().b;
  const internal::ConvParams& p = o.value().p;
  if (!WinogradFits(c, p, *w) || !PaysAt(c.value(n.outputs[0]).shape, *w)) return false;
  const int64_t oc = w->shape[0], ic = w->shape[1];
  const int32_t pw = c.Floats(n.name + ".w", kernels::PackWinograd(w->data<float>(), oc, ic));
  const int32_t pb = c.Floats(n.name + ".b", kernels::PackConvBias(b ? b->data<float>() : nullptr, oc, 1));
  internal::EmitConvStep(c, kOp, n, pw, pb, EncodeParams(p));
  // A range whose low end has too few tiles for Winograd to pay: the direct
  // convolution too, each run taking the one its output's tiles call for
  // (both packings are stored).
  const ir::Shape* low = c.LowShape(n.outputs[0]);
  if (low && !PaysAt(*low, *w)) c.AlsoLowerByTheNextRules({1, 4, MinTiles(*w)}, {2, 4, MinTiles(*w)});
  return true;
}

// OpDef::window_shape: the window over NHWC input 0, the residual input 3.
bool Window(const Attrs& a, const std::vector<TensorInfo>& in, WindowShape* w) {
  auto cfg = Resolve(a, in);
  auto p = DecodeParams<internal::SliceConvParams>(kOp, a);
  if (!cfg.ok() || !p.ok()) return false;
  p.value().ToWindowShape(w);
  w->residual = cfg.value().has_residual ? 3 : -1;
  return true;
}

uint64_t Flops(const CreateContext& c) {
  auto cfg = Resolve(c.attrs, c.inputs);
  return cfg.ok() ? internal::ConvFlops(cfg.value().g) : 0;
}

}  // namespace

OpDef DefineConvWinogradNhwc() {
  OpDef d = internal::LoweredOp(kOp, 3, 4, Infer, Create, Scratch);
  d.flops = Flops;
  d.lowerings = {{opname::ConvNhwc, 20, Lower}};
  d.write_channel_slice = internal::WriteChannelSlice<internal::SliceConvParams>;
  d.traits = kTraitFixedScratch;
  d.window_shape = Window;
  return d;
}

}  // namespace fcb::ops
