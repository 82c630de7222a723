// The NHWC pools: MaxPoolNhwc, AvgPoolNhwc, GlobalAvgPoolNhwc.
//
//   MaxPoolNhwc / AvgPoolNhwc(X[n,h,w,c]) -> Y[n,oh,ow,c]
//       params: PoolParams (explicit pads, ceil_mode, count_include_pad)
//   GlobalAvgPoolNhwc(X[n,h,w,c]) -> Y[n,1,1,c]
//
// Layout: ONNX MaxPool (one output, storage_order 0), AveragePool and
// GlobalAveragePool on a 4-D float32 input, and a ReduceMean over H and W of
// an NHWC input. They need no lowering rule: the
// graph node is the step.
#include <algorithm>

#include "ops/conv_geom.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

struct PoolParams : internal::WindowParams {
  int64_t ceil_mode = 0, count_include_pad = 0;
  template <typename V>
  void Fields(V& v) {
    WindowParams::Fields(v);
    v.Int(attr::kCeilMode, ceil_mode, 0, 1);
    v.Int(attr::kCountIncludePad, count_include_pad, 0, 1);
  }
};

Result<kernels::PoolGeom> Resolve(std::string_view op, const Attrs& a, const TensorInfo& x) {
  FCB_RETURN_IF_ERROR(internal::ExpectNhwc(op, x, "input"));
  FCB_ASSIGN_OR_RETURN(PoolParams p, DecodeParams<PoolParams>(op, a));
  kernels::PoolGeom g{};
  g.n = x.shape[0], g.ih = x.shape[1], g.iw = x.shape[2], g.c = x.shape[3];
  FCB_RETURN_IF_ERROR(internal::WindowOutput(op, g.ih, g.iw, p.kernel, p.strides, p.dilations, p.pads,
                                            p.ceil_mode != 0, &g.oh, &g.ow));
  g.kh = p.kernel[0], g.kw = p.kernel[1];
  g.sh = p.strides[0], g.sw = p.strides[1];
  g.dh = p.dilations[0], g.dw = p.dilations[1];
  g.pad_top = p.pads[0], g.pad_left = p.pads[1];
  g.pad_bottom = p.pads[2], g.pad_right = p.pads[3];
  g.count_include_pad = p.count_include_pad != 0;
  FCB_RETURN_IF_ERROR(CheckedNumel({g.n, g.oh, g.ow, g.c}).status());
  return g;
}

Status InferPool(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(kernels::PoolGeom g, Resolve(c.op, c.attrs, c.inputs[0]));
  out->push_back({ir::DType::kF32, {g.n, g.oh, g.ow, g.c}});
  return Status::Ok();
}

class PoolKernel : public Kernel {
 public:
  PoolKernel(kernels::PoolGeom g, bool is_max) : g_(g), max_(is_max) {}
  // Any sizes its inference accepts: the batch and sizes are read at each run.
  bool adapts() const override { return true; }
  bool worth_specializing() const override { return false; }
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    kernels::PoolGeom g = g_;
    if (ctx.shapes) {
      g.n = ctx.shapes[0][0], g.ih = ctx.shapes[0][1], g.iw = ctx.shapes[0][2];
      g.oh = ctx.shapes[1][1], g.ow = ctx.shapes[1][2];
    }
    const auto fn = max_ ? ctx.k->f32.maxpool : ctx.k->f32.avgpool;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.kh * g.kw * g.c));
    ctx.pool->ParallelFor(g.n * g.oh * g.ow, grain, [&](int64_t b, int64_t e) { fn(g, x, y, b, e); });
    return Status::Ok();
  }

 private:
  kernels::PoolGeom g_;
  bool max_;
};

Result<std::unique_ptr<Kernel>> CreatePool(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(kernels::PoolGeom g, Resolve(c.op, c.attrs, c.inputs[0]));
  return std::unique_ptr<Kernel>(new PoolKernel(g, c.op == opname::MaxPoolNhwc));
}

// OpDef::window_shape of MaxPoolNhwc and AvgPoolNhwc.
template <const std::string_view& kName>
bool PoolWindow(const Attrs& a, const std::vector<TensorInfo>& in, WindowShape* w) {
  auto p = DecodeParams<PoolParams>(kName, a);
  if (in.empty() || !p.ok() || !Resolve(kName, a, in[0]).ok()) return false;
  p.value().ToWindowShape(w);
  w->ceil_mode = p.value().ceil_mode != 0;
  return true;
}

// ONNX MaxPool / AveragePool -> the NHWC form with explicit pads.
Result<bool> FromPool(LayoutContext& c, const ir::Node& n) {
  if (n.op_type == "MaxPool" && (n.outputs.size() != 1 || n.GetInt("storage_order", 0) != 0)) return false;
  const ir::Shape xs = c.LogicalShape(n.inputs[0]);  // NCHW, whatever the input's layout now
  FCB_ASSIGN_OR_RETURN(Window2d w, ResolveWindow2d(AttrsFromNode(n), xs[2], xs[3], 1, 1, true));
  PoolParams p;
  p.Set(w);
  p.ceil_mode = n.GetInt("ceil_mode", 0) != 0;
  p.count_include_pad = n.GetInt("count_include_pad", 0) != 0;
  ir::Node r = internal::NhwcNode(c, n, n.op_type == "MaxPool" ? opname::MaxPoolNhwc : opname::AvgPoolNhwc);
  SetNodeParams(&r, p);
  c.EmitNhwc(std::move(r));
  return true;
}

Status InferGlobalAvg(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  FCB_RETURN_IF_ERROR(internal::ExpectNhwc(c.op, x, "input"));
  out->push_back({ir::DType::kF32, {x.shape[0], 1, 1, x.shape[3]}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateGlobalAvg(const CreateContext& c) {
  const auto& s = c.inputs[0].shape;
  const ir::Shape made = s;
  // Any sizes its inference accepts: the batch and the pixels are read at each run.
  return MakeAdaptingKernel([made](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const std::span<const int64_t> s = ctx.ShapeOf(0, made);
    const int64_t n = s[0], hw = s[1] * s[2], ch = s[3];
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    ctx.pool->ParallelFor(n, 1, [&](int64_t b, int64_t e) { ctx.k->f32.global_avgpool(n, hw, ch, x, y, b, e); });
    return Status::Ok();
  }, /*specialize=*/false);
}

bool GlobalAvgWindow(const Attrs&, const std::vector<TensorInfo>& in, WindowShape* w) {
  if (in.empty() || !internal::ExpectNhwc(opname::GlobalAvgPoolNhwc, in[0], "input").ok()) return false;
  w->global = true;
  return true;
}

Result<bool> FromGlobalAvg(LayoutContext& c, const ir::Node& n) {
  c.EmitNhwc(internal::NhwcNode(c, n, opname::GlobalAvgPoolNhwc));
  return true;
}

// Whether float ReduceMean `n` averages exactly H and W (x.mean([2, 3]) in
// torch: MnasNet, many detection heads). The importer has made its axes a
// constant input, whatever the opset (import/canonicalize.cc).
bool MeanOverHw(const LayoutContext& c, const ir::Node& n) {
  if (n.outputs.size() != 1) return false;
  const ir::TensorData* a = c.Const(n, 1);
  if (!a || a->dtype != ir::DType::kI64) return false;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(a->GetInt(i));
  for (int64_t& x : axes) x = x < 0 ? x + 4 : x;
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3};
}

// ... on an input already NHWC: GlobalAvgPoolNhwc, no transpose back to
// NCHW. Its [n,1,1,c] output is the keepdims form (NHWC); without keepdims it
// is reshaped to [n,c], which for H = W = 1 holds the same bytes in either
// layout (a view, no step).
Result<bool> FromMeanOverHw(LayoutContext& c, const ir::Node& n) {
  if (!c.IsNhwc(n.inputs[0]) || !MeanOverHw(c, n)) return false;
  ir::Node pool;
  pool.name = n.name;
  pool.op_type = std::string(opname::GlobalAvgPoolNhwc);
  pool.domain = "fcb";
  pool.inputs = {n.inputs[0]};
  if (n.GetInt("keepdims", 1) != 0) {
    pool.outputs = {n.outputs[0]};
    c.EmitNhwc(std::move(pool));
    return true;
  }
  const ir::Shape& x = c.value(n.inputs[0]).shape;  // NHWC
  const int mv = c.NewValue(n.name + "_pooled", ir::DType::kF32, {x[0], 1, 1, x[3]}, true);
  pool.outputs = {mv};
  c.Emit(std::move(pool));
  const int shape = c.AddConstant(n.name + "_shape", ir::TensorData::FromInts({2}, {0, x[3]}));  // 0: the batch, as it is
  ir::Node reshape;
  reshape.name = n.name + "_reshape";
  reshape.op_type = "Reshape";
  reshape.inputs = {mv, shape};
  reshape.outputs = {n.outputs[0]};
  c.Emit(std::move(reshape));
  return true;
}

}  // namespace

OpDef DefineMaxPoolNhwc() {
  OpDef d = internal::LoweredOp(opname::MaxPoolNhwc, 1, 1, InferPool, CreatePool);
  d.layouts = {{"MaxPool", FromPool}};
  d.window_shape = PoolWindow<opname::MaxPoolNhwc>;
  return d;
}

OpDef DefineAvgPoolNhwc() {
  OpDef d = internal::LoweredOp(opname::AvgPoolNhwc, 1, 1, InferPool, CreatePool);
  d.layouts = {{"AveragePool", FromPool}};
  d.window_shape = PoolWindow<opname::AvgPoolNhwc>;
  return d;
}

OpDef DefineGlobalAvgPoolNhwc() {
  OpDef d = internal::LoweredOp(opname::GlobalAvgPoolNhwc, 1, 1, InferGlobalAvg, CreateGlobalAvg);
  d.layouts = {{"GlobalAveragePool", FromGlobalAvg}, {"ReduceMean", FromMeanOverHw}};
  d.window_shape = GlobalAvgWindow;
  return d;
}

}  // namespace fcb::ops
