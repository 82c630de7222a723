// Fast algorithms for the NN family, chosen per layer at compile time by
// compile/lower.cc (see its cost model). Internal op:
//   ConvWinogradNhwc(X[n,h,w,ic], Wpacked, Bpacked[, residual]) -> Y[n,oh,ow,oc]
//       3x3, stride 1, dilation 1, group 1, ic <= kernels::kWinogradMaxIc.
//       Wpacked: PackWinograd ([36][ceil(oc/16)][ic][16], float32);
//       Bpacked: PackConvBias ([ceil(oc/16)*16]).
//       attrs as ConvNhwc: kernel_shape, strides, dilations, pads, group,
//       out_channels, activation, activation_alpha/_beta.
// Shape inference also runs at load on untrusted files, so every attribute
// and shape is checked before a kernel (and its stack buffers) can see it.
#include <algorithm>
#include <string>

#include "kernels/packing.h"
#include "ops/conv_geom.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;
using kernels::kPanel;

constexpr const char* kOp = "ConvWinogradNhwc";

int64_t Panels(int64_t n) { return (n + kPanel - 1) / kPanel; }

struct WinoConfig {
  kernels::ConvGeom g{};
  kernels::Epilogue ep{};
  bool has_residual = false;
};

Status ExpectF32(const TensorInfo& t, const std::string& what) {
  if (t.dtype != DType::kF32)
    return OpError(kOp, what + " must be float32, got " + ir::DTypeName(t.dtype));
  return Status::Ok();
}

Result<WinoConfig> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() < 3) return OpError(kOp, "needs input, packed weights and packed bias");
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(ExpectF32(x, "input"));
  if (x.shape.size() != 4) return OpError(kOp, "input must have rank 4, got " + ir::ShapeToString(x.shape));
  for (int64_t d : x.shape)
    if (d < 1 || d > (int64_t{1} << 31))
      return OpError(kOp, "input has an invalid dimension in " + ir::ShapeToString(x.shape));
  WinoConfig cfg;
  auto& g = cfg.g;
  g.n = x.shape[0], g.ih = x.shape[1], g.iw = x.shape[2], g.ic = x.shape[3];
  g.oc = a.GetInt("out_channels", 0);
  g.groups = a.GetInt("group", 1);
  if (g.oc < 1 || g.oc > (int64_t{1} << 24)) return OpError(kOp, "out_channels out of range");
  if (g.groups != 1) return OpError(kOp, "group must be 1");
  if (g.ic > kernels::kWinogradMaxIc)
    return OpError(kOp, "input channels " + std::to_string(g.ic) + " exceed " +
                            std::to_string(kernels::kWinogradMaxIc));
  if (!a.Has("kernel_shape")) return OpError(kOp, "needs kernel_shape");
  FCB_ASSIGN_OR_RETURN(Window2d w, ResolveWindow2d(a, g.ih, g.iw, 1, 1, false));
  if (w.kh != 3 || w.kw != 3 || w.sh != 1 || w.sw != 1 || w.dh != 1 || w.dw != 1)
    return OpError(kOp, "needs a 3x3 kernel with unit strides and dilations");
  g.oh = w.oh, g.ow = w.ow, g.kh = 3, g.kw = 3, g.sh = g.sw = g.dh = g.dw = 1;
  g.pad_top = w.pad_t, g.pad_left = w.pad_l;
  g.in_pixel_stride = g.ic, g.out_pixel_stride = g.oc;
  const int64_t act = a.GetInt("activation", 0);
  if (act < 0 || act > static_cast<int64_t>(kernels::Act::kSilu))
    return OpError(kOp, "activation code " + std::to_string(act) + " is out of range");
  cfg.ep = {static_cast<kernels::Act>(act), a.GetFloat("activation_alpha", 0.f),
            a.GetFloat("activation_beta", 0.f)};
  FCB_RETURN_IF_ERROR(ExpectF32(in[1], "packed weights"));
  FCB_RETURN_IF_ERROR(ExpectF32(in[2], "packed bias"));
  const int64_t want_w = kernels::PackedWinogradFloats(g.oc, g.ic);
  if (in[1].shape != ir::Shape{want_w})
    return OpError(kOp, "packed weights have shape " + ir::ShapeToString(in[1].shape) +
                            ", expected [" + std::to_string(want_w) + "]");
  if (in[2].shape != ir::Shape{Panels(g.oc) * kPanel})
    return OpError(kOp, "packed bias has shape " + ir::ShapeToString(in[2].shape) + ", expected [" +
                            std::to_string(Panels(g.oc) * kPanel) + "]");
  FCB_RETURN_IF_ERROR(CheckedNumel({g.n, g.oh, g.ow, g.oc}).status());
  if (in.size() > 3 && in[3].present()) {
    FCB_RETURN_IF_ERROR(ExpectF32(in[3], "residual"));
    if (in[3].shape != ir::Shape{g.n, g.oh, g.ow, g.oc})
      return OpError(kOp, "residual shape " + ir::ShapeToString(in[3].shape) +
                              " does not match the output");
    cfg.has_residual = true;
  }
  return cfg;
}

Status InferWinograd(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(WinoConfig cfg, Resolve(c.attrs, c.inputs));
  out->push_back({DType::kF32, {cfg.g.n, cfg.g.oh, cfg.g.ow, cfg.g.oc}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateWinograd(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(WinoConfig cfg, Resolve(c.attrs, c.inputs));
  const int64_t tiles = cfg.g.n * ((cfg.g.oh + 3) / 4) * ((cfg.g.ow + 3) / 4);
  return MakeKernel([cfg, tiles](const RunContext& ctx, const void* const* in,
                                 void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const float* w = static_cast<const float*>(in[1]);
    const float* b = static_cast<const float*>(in[2]);
    const float* r = cfg.has_residual ? static_cast<const float*>(in[3]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    // A grain of 12 tiles is a whole register tile on every target (12, 6, 3, 1 rows).
    ctx.pool->ParallelFor(tiles, 12, [&](int64_t begin, int64_t end) {
      ctx.k->winograd(cfg.g, x, w, b, r, y, cfg.ep, begin, end);
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterNnFastOps(std::vector<OpDef>* ops) {
  OpDef d = Def<InferWinograd, CreateWinograd>(kOp, 3, 4);
  d.internal = true;
  ops->push_back(std::move(d));
}

}  // namespace fcb::ops
