// QConvNhwc: an int8 convolution or matrix product on weights packed at
// compile time (kernels/int8.h), with a dequantizing or requantizing
// epilogue. The FuseQuantized pass (passes/fuse_quantized.cc) makes it from
// QLinearConv, QLinearMatMul, ConvInteger/MatMulInteger (alone, or followed
// by Cast -> Mul -> [Add] -> [Relu/Clip] as dynamic quantization writes
// them) and DequantizeLinear -> Conv/MatMul/Gemm -> [Relu/Clip] ->
// [QuantizeLinear].
//
// Graph node (ONNX layout; op QConv for 2-D convolutions, whose layout rule
// makes the NHWC QConvNhwc; matrix products are QConvNhwc with matrix = 1):
//   inputs  0 x (uint8/int8)   1 x_scale   2 x_zero_point
//           3 W (constant, int8/uint8: conv [oc][icg][kh][kw], matrix [K][N])
//           4 w_scale (constant, 1 or N)   5 w_zero_point (constant, 1 or N)
//           6 bias (constant, [N]: float, or int32 in mode kQLinear)
//           7 y_scale   8 y_zero_point   9 multiplier (mode kMultiplier, 1 or N)
// Plan step: 0 x, 1 x_scale, 2 x_zero_point, 3 packed W (int8), 4 absent
//   (the column sums of W are computed at load), 5 shifted weight zero points
//   (int32; absent when all are zero), 6 w_scale (float),
//   7 float bias, 8 int32 bias, 9 y_scale, 10 y_zero_point, 11 multiplier;
//   every per-column array padded per group to whole 16-column panels.
// Modes (what the epilogue computes from the exact int32 sum s):
//   kInt32:      s                                   (ConvInteger, MatMulInteger)
//   kScaled:     float(s) * (x_scale * w_scale) + bias, act       (DQ -> Conv)
//   kMultiplier: float(s) * multiplier + bias, act  (-> Cast -> Mul -> Add)
//   kQdq:        kScaled, then QuantizeLinear(y_scale, y_zero_point)
//   kQLinear:    saturate(round(float(s + bias) * (x_scale * w_scale / y_scale)) + y_zp)
//                (QLinearConv / QLinearMatMul, ONNX Runtime's order of operations)
#include <algorithm>
#include <cstring>

#include "kernels/int8.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::RoundUpToPanel;
constexpr std::string_view kOp = opname::QConvNhwc;

using Params = internal::QConvParams;
enum Mode : int64_t {
  kInt32 = internal::kQInt32,
  kScaled = internal::kQScaled,
  kMultiplier = internal::kQMultiplier,
  kQdq = internal::kQQdq,
  kQLinear = internal::kQLinear,
};


constexpr auto IsQ = ir::IsInt8Type;


struct Config {
  kernels::ConvGeom g{};
  Params p;
  int64_t ocg = 0, ocp = 0, columns = 0;  // per-group columns, padded, all padded columns
  bool x_signed = false;
  ir::DType out = ir::DType::kF32;
  ir::Shape out_shape;
};

Status ExpectScalar(const std::vector<TensorInfo>& in, size_t i, const char* what, bool floats) {
  if (in.size() <= i || !in[i].present()) return OpError(kOp, std::string(what) + " is missing");
  if (in[i].numel() != 1) return OpError(kOp, std::string(what) + " must have one element");
  if (floats ? in[i].dtype != ir::DType::kF32 : !IsQ(in[i].dtype))
    return OpError(kOp, std::string(what) + " has type " + ir::DTypeName(in[i].dtype));
  return Status::Ok();
}

Status ExpectArray(const std::vector<TensorInfo>& in, size_t i, const char* what, ir::DType dt, int64_t n) {
  if (in.size() <= i || !in[i].present()) return OpError(kOp, std::string(what) + " is missing");
  if (in[i].dtype != dt || in[i].shape != ir::Shape{n})
    return OpError(kOp, std::string(what) + " must be " + ir::DTypeName(dt) + " [" + std::to_string(n) + "], got " +
               ir::DTypeName(in[i].dtype) + " " + ir::ShapeToString(in[i].shape));
  return Status::Ok();
}

bool Present(const std::vector<TensorInfo>& in, size_t i) { return in.size() > i && in[i].present(); }

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  if (in.size() < 4) return OpError(kOp, "needs at least 4 inputs");
  Config c;
  FCB_ASSIGN_OR_RETURN(c.p, DecodeParams<Params>(kOp, a));
  const TensorInfo& x = in[0];
  if (!IsQ(x.dtype)) return OpError(kOp, std::string("input must be uint8 or int8, got ") + ir::DTypeName(x.dtype));
  c.x_signed = x.dtype == ir::DType::kI8;
  FCB_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(x.shape));
  auto& g = c.g;
  if (c.p.matrix) {
    if (x.shape.empty() || x.shape.back() < 1) return OpError(kOp, "matrix input needs rank >= 1");
    g.n = 1, g.ih = 1, g.ic = x.shape.back(), g.iw = numel / g.ic;
    g.oh = 1, g.ow = g.iw, g.kh = g.kw = g.sh = g.sw = g.dh = g.dw = 1;
    g.groups = 1;
    g.oc = c.p.out_channels;
    c.out_shape = x.shape;
    c.out_shape.back() = g.oc;
  } else {
    if (x.shape.size() != 4) return OpError(kOp, "input must be NHWC of rank 4, got " + ir::ShapeToString(x.shape));
    g.n = x.shape[0], g.ih = x.shape[1], g.iw = x.shape[2], g.ic = x.shape[3];
    g.oc = c.p.out_channels;
    g.groups = c.p.group;
    if (g.ic % g.groups != 0 || g.oc % g.groups != 0) return OpError(kOp, "group must divide the channel counts");
    FCB_RETURN_IF_ERROR(internal::WindowOutput(kOp, g.ih, g.iw, c.p.kernel, c.p.strides, c.p.dilations, c.p.pads,
                                              false, &g.oh, &g.ow));
    g.kh = c.p.kernel[0], g.kw = c.p.kernel[1], g.sh = c.p.strides[0], g.sw = c.p.strides[1];
    g.dh = c.p.dilations[0], g.dw = c.p.dilations[1], g.pad_top = c.p.pads[0], g.pad_left = c.p.pads[1];
    c.out_shape = {g.n, g.oh, g.ow, g.oc};
  }
  g.in_pixel_stride = g.ic;
  g.out_pixel_stride = g.oc;
  FCB_RETURN_IF_ERROR(CheckedNumel(c.out_shape).status());
  c.ocg = g.oc / g.groups;
  c.ocp = RoundUpToPanel(c.ocg);
  if (c.p.depthwise > 1) return OpError(kOp, "depthwise must be 0 or 1 (the small-group packing is float32 only)");
  if (c.p.depthwise) {
    if (g.groups != g.ic || g.oc != g.ic) return OpError(kOp, "depthwise needs group == channels");
    c.columns = RoundUpToPanel(g.oc);
  } else {
    c.columns = g.groups * c.ocp;
  }
  const int64_t mode = c.p.mode;
  c.out = mode == kInt32 ? ir::DType::kI32 : (mode == kScaled || mode == kMultiplier) ? ir::DType::kF32
          : Present(in, 10) ? in[10].dtype : ir::DType::kU8;
  // Operands.
  if (Present(in, 2)) FCB_RETURN_IF_ERROR(ExpectScalar(in, 2, "x zero point", false));
  if (mode == kScaled || mode == kQdq || mode == kQLinear) FCB_RETURN_IF_ERROR(ExpectScalar(in, 1, "x scale", true));
  const int64_t wbytes = c.p.depthwise ? g.kh * g.kw * c.columns
                                       : kernels::PackedQConvBytes(g.oc, g.ic / g.groups, g.kh, g.kw, g.groups);
  FCB_RETURN_IF_ERROR(ExpectArray(in, 3, "packed weights", ir::DType::kI8, wbytes));
  if (Present(in, 4)) return OpError(kOp, "input 4 is reserved (column sums are computed at load)");
  if (Present(in, 5)) FCB_RETURN_IF_ERROR(ExpectArray(in, 5, "weight zero points", ir::DType::kI32, c.columns));
  if (mode == kScaled || mode == kQdq || mode == kQLinear)
    FCB_RETURN_IF_ERROR(ExpectArray(in, 6, "weight scales", ir::DType::kF32, c.columns));
  if (Present(in, 7)) FCB_RETURN_IF_ERROR(ExpectArray(in, 7, "float bias", ir::DType::kF32, c.columns));
  if (Present(in, 8)) FCB_RETURN_IF_ERROR(ExpectArray(in, 8, "int32 bias", ir::DType::kI32, c.columns));
  if (mode == kQdq || mode == kQLinear) {
    FCB_RETURN_IF_ERROR(ExpectScalar(in, 9, "y scale", true));
    FCB_RETURN_IF_ERROR(ExpectScalar(in, 10, "y zero point", false));
  }
  if (mode == kMultiplier) {
    if (!Present(in, 11) || in[11].dtype != ir::DType::kF32 || (in[11].numel() != 1 && in[11].numel() != g.oc))
      return OpError(kOp, "mode multiplier needs a float multiplier of 1 or " + std::to_string(g.oc) + " elements");
  }
  return c;
}

Status Infer(const InferContext& ctx, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config c, Resolve(ctx.attrs, ctx.inputs));
  out->push_back({c.out, c.out_shape});
  return Status::Ok();
}

class QConvKernel : public Kernel {
 public:
  // m_numel: elements of the multiplier (mode kMultiplier); colsum: the
  // packed weights' column sums (not depthwise).
  QConvKernel(Config c, std::vector<ir::DType> in, int64_t m_numel, std::vector<int32_t> colsum)
      : c_(std::move(c)),
        in_(std::move(in)),
        m_numel_(m_numel),
        colsum_(std::move(colsum)),
        zeros_(static_cast<size_t>(c_.columns), 0) {}

  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const auto& g = c_.g;
    const int64_t mode = c_.p.mode;
    const int32_t zx = in_.size() > 2 && in[2] ? IntAt(in_[2], in[2], 0) : 0;
    const float sx = (mode == kScaled || mode == kQdq || mode == kQLinear) ? *static_cast<const float*>(in[1]) : 1.f;
    const float sy = (mode == kQdq || mode == kQLinear) ? *static_cast<const float*>(in[9]) : 1.f;
    if ((mode == kQdq || mode == kQLinear) && !(sy > 0.f)) return OpError(kOp, "y scale must be positive");
    const int32_t zy = (mode == kQdq || mode == kQLinear) ? IntAt(in_[10], in[10], 0) : 0;
    const int32_t* colsum = colsum_.data();
    const auto* bzp = in_.size() > 5 && in[5] ? static_cast<const int32_t*>(in[5]) : nullptr;
    const auto* wscale = in_.size() > 6 && in[6] ? static_cast<const float*>(in[6]) : nullptr;
    const auto* bias_f = in_.size() > 7 && in[7] ? static_cast<const float*>(in[7]) : nullptr;
    const auto* bias_i = in_.size() > 8 && in[8] ? static_cast<const int32_t*>(in[8]) : nullptr;
    const float* m = mode == kMultiplier ? static_cast<const float*>(in[11]) : nullptr;
    const bool m_scalar = m && m_numel_ == 1;

    // Per-run column terms, in thread 0's scratch after the kernels' part
    // (read by every thread once written).
    auto* col_add = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(ctx.ThreadScratch(0)) + kernels::kQScratchBytes);
    auto* mult = reinterpret_cast<float*>(col_add + c_.columns);
    const int32_t za = zx + (c_.x_signed ? 128 : 0);
    const int32_t K = static_cast<int32_t>(g.kh * g.kw * (g.ic / g.groups));
    bool any_bzp = false;
    for (int64_t i = 0; i < c_.columns; ++i) {
      // Real channel of padded column i (or -1 in the padding).
      const int64_t gi = c_.p.depthwise ? 0 : i / c_.ocp, j = c_.p.depthwise ? i : i % c_.ocp;
      const int64_t o = j < (c_.p.depthwise ? g.oc : c_.ocg) ? gi * c_.ocg + j : -1;
      // In 32-bit wrapping arithmetic, as the kernels accumulate: the same
      // bits as int32 for every valid file (zero points of 8 bits, where
      // nothing wraps), and defined for any bytes a file holds.
      uint32_t add = bias_i ? static_cast<uint32_t>(bias_i[i]) : 0u;
      const int32_t zb = bzp ? bzp[i] : 0;
      if (!c_.p.depthwise)
        add += static_cast<uint32_t>(K) * static_cast<uint32_t>(za) * static_cast<uint32_t>(zb) -
               static_cast<uint32_t>(za) * static_cast<uint32_t>(colsum[i]);
      any_bzp |= !c_.p.depthwise && zb != 0;
      col_add[i] = static_cast<int32_t>(add);
      float mv = 0.f;
      if (o >= 0) {
        if (mode == kScaled || mode == kQdq) mv = sx * wscale[i];
        else if (mode == kQLinear) mv = (sx * wscale[i]) / sy;
        else if (mode == kMultiplier) mv = m[m_scalar ? 0 : o];
      }
      mult[i] = mv;
    }
    kernels::QConvArgs a;
    a.x_zp = zx;
    a.x_signed = c_.x_signed;
    a.w = static_cast<const int8_t*>(in[3]);
    a.ep.out = mode == kInt32 ? kernels::QOut::kInt32 : (mode == kScaled || mode == kMultiplier) ? kernels::QOut::kFloat
               : c_.out == ir::DType::kU8 ? kernels::QOut::kUint8 : kernels::QOut::kInt8;
    a.ep.col_add = col_add;
    a.ep.b_zp = any_bzp ? bzp : nullptr;
    a.ep.mult = mult;
    a.ep.bias = bias_f;
    a.ep.act = c_.p.ep;
    a.ep.q_scale = mode == kQdq ? sy : 1.f;
    a.ep.q_zp = zy;
    a.y = out[0];
    const kernels::QKernelTable& t = ctx.k->i8;
    const auto* x = static_cast<const uint8_t*>(in[0]);
    const int64_t pixels = g.n * g.oh * g.ow;
    const int64_t macs = std::max<int64_t>(1, g.kh * g.kw * (g.ic / g.groups) * g.oc);
    const int64_t grain = std::max<int64_t>(1, 262144 / macs);
    if (c_.p.depthwise) {
      ctx.pool->ParallelForThreads(pixels, grain, [&](int th, int64_t b, int64_t e) {
        t.depthwise(g, a, bzp ? bzp : zeros_.data(), x, b, e, static_cast<int32_t*>(ctx.ThreadScratch(th)));
      });
    } else {
      ctx.pool->ParallelForThreads(pixels, grain, [&](int th, int64_t b, int64_t e) {
        kernels::QConv(t, g, a, x, b, e, ctx.ThreadScratch(th));
      });
    }
    return Status::Ok();
  }


 private:
  Config c_;
  std::vector<ir::DType> in_;
  int64_t m_numel_;
  std::vector<int32_t> colsum_;  // per padded column
  std::vector<int32_t> zeros_;   // weight zero points when the plan has none
};

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  std::vector<ir::DType> dt;
  for (const auto& t : c.inputs) dt.push_back(t.dtype);
  const int64_t m_numel = c.inputs.size() > 11 && c.inputs[11].present() ? c.inputs[11].numel() : 1;
  std::vector<int32_t> colsum;
  if (!cfg.p.depthwise) {
    // The column sums are a function of the stored weights: computed here
    // once instead of stored (4 bytes per output channel).
    const void* w = c.input_data ? (*c.input_data)[3] : nullptr;
    if (!w) return Unsupported(std::string(kOp) + ": the packed weights must be stored in the file");
    const auto& g = cfg.g;
    colsum = kernels::QPackedColumnSums(static_cast<const int8_t*>(w), g.kh * g.kw * (g.ic / g.groups), cfg.ocg,
                                        g.groups);
  }
  return std::unique_ptr<Kernel>(new QConvKernel(std::move(cfg), std::move(dt), m_numel, std::move(colsum)));
}

Result<uint64_t> Scratch(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config cfg, Resolve(c.attrs, c.inputs));
  return static_cast<uint64_t>(kernels::kQScratchBytes + 2 * cfg.columns * 4 + 64);
}

// ---- compile time

// ONNX-layout graph QConv -> NHWC graph QConvNhwc.
Result<bool> FromQConv(LayoutContext& c, const ir::Node& n) {
  const ir::Graph& g = c.graph();
  const ir::Shape xs = c.LogicalShape(n.inputs[0]);  // NCHW, whatever the input's layout now
  const ir::TensorData* w = g.values[n.inputs[3]].constant.get();
  if (!w || w->shape.size() != 4 || xs.size() != 4) return false;
  FCB_ASSIGN_OR_RETURN(Window2d win, ResolveWindow2d(AttrsFromNode(n), xs[2], xs[3], w->shape[2], w->shape[3], false));
  Params p;
  p.Set(win);
  p.group = n.GetInt("group", 1);
  p.out_channels = w->shape[0];
  p.mode = n.GetInt(std::string(attr::kQuantMode), 0);
  p.ep = NodeEpilogue(n);
  std::vector<int> rest(n.inputs.begin() + 1, n.inputs.end());
  ir::Node r = internal::NhwcNode(c, n, kOp, rest);
  SetNodeParams(&r, p);
  c.EmitNhwc(std::move(r));
  return true;
}

const ir::TensorData* ConstIn(const LowerContext& c, const ir::Node& n, size_t i) { return c.Const(n, i); }

int32_t ConstInt(const ir::TensorData* t, int64_t i) {
  if (!t) return 0;
  return static_cast<int32_t>(t->GetInt(t->numel() == 1 ? 0 : i));
}

// Graph QConvNhwc (NHWC conv or matrix) -> step with packed weights.
Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, AttrsFromNode(n)));
  const ir::TensorData* w = ConstIn(c, n, 3);
  if (!w || !IsQ(w->dtype)) return Unsupported("QConvNhwc weights must be an int8/uint8 constant");
  const ir::TensorData* ws = ConstIn(c, n, 4);
  const ir::TensorData* wz = ConstIn(c, n, 5);
  const ir::TensorData* bias = ConstIn(c, n, 6);
  if (n.inputs.size() > 5 && n.inputs[5] >= 0 && !wz) return Unsupported("weight zero point must be constant");
  if (n.inputs.size() > 6 && n.inputs[6] >= 0 && !bias) return Unsupported("bias must be constant");
  const bool wu = w->dtype == ir::DType::kU8;
  int64_t oc, icg, kh = 1, kw = 1;
  const int64_t ic = c.value(n.inputs[0]).shape.back();
  if (p.matrix) {
    if (w->shape.size() != 2) return Unsupported("matrix weights must be 2-D");
    icg = w->shape[0], oc = w->shape[1];
    p.group = 1;
  } else {
    if (w->shape.size() != 4) return Unsupported("conv weights must be 4-D");
    oc = w->shape[0], icg = w->shape[1], kh = w->shape[2], kw = w->shape[3];
  }
  p.out_channels = oc;
  const int64_t groups = p.group, ocg = oc / groups, ocp = RoundUpToPanel(ocg);
  const bool dw = !p.matrix && groups > 1 && groups == ic && oc == ic && icg == 1;
  p.depthwise = dw ? 1 : 0;
  const int64_t cols = dw ? RoundUpToPanel(oc) : groups * ocp;
  auto col_of = [&](int64_t o) { return dw ? o : (o / ocg) * ocp + o % ocg; };
  std::vector<int8_t> packed;
  std::vector<int32_t> zps(static_cast<size_t>(cols), 0);
  if (dw) {
    packed = kernels::PackQDepthwise(w->bytes.data(), wu, oc, kh, kw);
  } else if (p.matrix) {
    packed = kernels::PackQGemmB(w->bytes.data(), wu, icg, oc, oc, 1);
  } else {
    packed = kernels::PackQConv(w->bytes.data(), wu, oc, icg, kh, kw, groups);
  }
  std::vector<float> scales(static_cast<size_t>(cols), 0.f), bias_f;
  std::vector<int32_t> bias_i;
  if (bias) {
    if (bias->dtype == ir::DType::kF32) bias_f.assign(static_cast<size_t>(cols), 0.f);
    else if (bias->dtype == ir::DType::kI32) bias_i.assign(static_cast<size_t>(cols), 0);
    else return Unsupported("bias must be float32 or int32");
    if (bias->numel() != oc && bias->numel() != 1) return Unsupported("bias must have one value per output channel");
  }
  for (int64_t o = 0; o < oc; ++o) {
    const int64_t i = col_of(o);
    zps[i] = ConstInt(wz, o) - (wu ? 128 : 0);
    if (ws) scales[i] = ws->data<float>()[ws->numel() == 1 ? 0 : o];
    if (!bias_f.empty()) bias_f[i] = bias->data<float>()[bias->numel() == 1 ? 0 : o];
    if (!bias_i.empty()) bias_i[i] = bias->data<int32_t>()[bias->numel() == 1 ? 0 : o];
  }
  const std::string& nm = n.name;
  auto in = [&](size_t i) { return i < n.inputs.size() ? c.Value(n.inputs[i]) : -1; };
  const int32_t pw = c.Weights(nm + ".qw", ir::DType::kI8, packed.data(), static_cast<int64_t>(packed.size()));
  const bool any_zp = std::any_of(zps.begin(), zps.end(), [](int32_t z) { return z != 0; });
  const int32_t pz = any_zp ? c.Weights(nm + ".qzp", ir::DType::kI32, zps.data(), cols) : -1;
  const int32_t pscale = ws ? c.Weights(nm + ".qscale", ir::DType::kF32, scales.data(), cols) : -1;
  const int32_t pbf = bias_f.empty() ? -1 : c.Weights(nm + ".qbias", ir::DType::kF32, bias_f.data(), cols);
  const int32_t pbi = bias_i.empty() ? -1 : c.Weights(nm + ".qbias", ir::DType::kI32, bias_i.data(), cols);
  c.Emit(kOp, nm, {in(0), in(1), in(2), pw, -1, pz, pscale, pbf, pbi, in(7), in(8), in(9)}, {c.Value(n.outputs[0])},
         EncodeParams(p));
  return true;
}

}  // namespace

// The ONNX-layout graph form: made by FuseQuantized, turned into QConvNhwc by
// the layout pass (FromQConv); it never reaches a plan.
Status GraphOnly(const InferContext&, std::vector<TensorInfo>*) {
  return Internal(std::string(opname::QConv) + " is a graph node that the layout pass replaces");
}
Result<std::unique_ptr<Kernel>> GraphOnlyCreate(const CreateContext&) {
  return Internal(std::string(opname::QConv) + " is a graph node that the layout pass replaces");
}

OpDef DefineQConv() {
  OpDef d = internal::LoweredOp(opname::QConv, 6, 10, GraphOnly, GraphOnlyCreate);
  d.traits = kTraitTakesActivation;
  return d;
}

namespace {
uint64_t Flops(const CreateContext& c) {
  auto cfg = Resolve(c.attrs, c.inputs);
  return cfg.ok() ? internal::ConvFlops(cfg.value().g) : 0;
}
}  // namespace

ir::Node MakeQConvNode(const ir::Node& from, QConvMode mode, std::vector<int> inputs, int output,
                       const kernels::Epilogue& ep) {
  ir::Node r;
  r.name = from.name;
  r.domain = "fcb";
  r.op_type = std::string(opname::QConv);
  r.inputs = std::move(inputs);
  r.outputs = {output};
  for (const char* a : {"auto_pad", "pads", "strides", "dilations", "group", "kernel_shape"})
    if (auto it = from.attrs.find(a); it != from.attrs.end()) r.attrs[a] = it->second;
  r.SetInt(attr::kQuantMode, mode);
  SetNodeEpilogue(&r, ep);
  return r;
}

ir::Node MakeQMatMulNode(const ir::Node& from, QConvMode mode, std::vector<int> inputs, int output,
                         int64_t columns, const kernels::Epilogue& ep) {
  ir::Node r;
  r.name = from.name;
  r.domain = "fcb";
  r.op_type = std::string(kOp);
  r.inputs = std::move(inputs);
  r.outputs = {output};
  internal::QConvParams p;
  p.matrix = 1;
  p.mode = mode;
  p.out_channels = columns;
  p.ep = ep;
  SetNodeParams(&r, p);
  return r;
}

OpDef DefineQConvNhwc() {
  OpDef d = internal::LoweredOp(kOp, 4, 12, Infer, Create, Scratch);
  d.flops = Flops;
  d.traits = kTraitTakesActivation;
  d.lowerings = {{kOp, 10, Lower}};
  d.layouts = {{opname::QConv, FromQConv, /*any_dtype=*/true}};
  return d;
}

}  // namespace fcb::ops
