// The NN family: ONNX Conv / pools / BatchNormalization (shape inference and
// the reference kernels they run on when they stay in ONNX form). The layout
// pass turns 4-D float ones into the NHWC operators of ops/internal/
// (conv_nhwc.cc, pool_nhwc.cc), which is how models normally run them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/conv_geom.h"
#include "ops/conv_ref.h"
#include "ops/lowering.h"
#include "ops/op_util.h"
#include "ops/families.h"

namespace fcb::ops {
namespace {

using ir::DType;

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

// ---------------------------------------------------------------- ONNX forms

Status InferConv(const InferContext& c, std::vector<TensorInfo>* out) {
  const TensorInfo& x = c.inputs[0];
  const TensorInfo& w = c.inputs[1];
  FCB_RETURN_IF_ERROR(ExpectF32("", x, "Conv input X"));
  FCB_RETURN_IF_ERROR(ExpectF32("", w, "Conv weight W"));
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
    FCB_RETURN_IF_ERROR(ExpectF32("", c.inputs[2], "Conv bias B"));
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
  FCB_RETURN_IF_ERROR(ExpectF32("", x, "global pool input"));
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
  FCB_RETURN_IF_ERROR(ExpectF32("", x, "BatchNormalization input"));
  if (x.shape.size() < 2) return InvalidArgument("BatchNormalization input must have rank >= 2");
  FCB_RETURN_IF_ERROR(CheckedNumel(x.shape).status());
  for (int i = 1; i < 5; ++i) {
    FCB_RETURN_IF_ERROR(ExpectF32("", c.inputs[i], "BatchNormalization parameter"));
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

}  // namespace

namespace {
OpDef NnDef(const char* name, int min_in, int max_in, int max_out, InferFn infer, CreateFn create,
            uint32_t traits = kTraitNone) {
  OpDef d;
  d.name = name;
  d.min_inputs = min_in, d.max_inputs = max_in;
  d.max_outputs = max_out;
  d.infer = infer;
  d.create = create;
  d.traits = traits;
  return d;
}
// The layout rule of a 4-D float BatchNormalization that no conv absorbed
// (passes::FoldBatchNorm): with constant parameters it becomes Mul and Add by
// per-channel constants, which follow their input's layout; otherwise it
// stays (read in NCHW).
Result<bool> BatchNormAsMulAdd(LayoutContext& c, const ir::Node& n) {
  const ir::Graph& g = c.graph();
  for (int i = 1; i < 5; ++i)
    if (!c.Const(n, i)) return false;
  // The channel count from the parameters: the input may already be NHWC.
  const int64_t ch = c.Const(n, 1)->numel();
  const float eps = n.GetFloat("epsilon", 1e-5f);
  std::vector<float> scale(ch), shift(ch);
  for (int64_t i = 0; i < ch; ++i) {
    const double s = c.Const(n, 1)->GetDouble(i) / std::sqrt(c.Const(n, 4)->GetDouble(i) + eps);
    scale[i] = static_cast<float>(s);
    shift[i] = static_cast<float>(c.Const(n, 2)->GetDouble(i) - c.Const(n, 3)->GetDouble(i) * s);
  }
  const int sv = c.AddConstant(n.name + "_bn_scale", ir::TensorData::FromFloats({1, ch, 1, 1}, scale));
  const int bv = c.AddConstant(n.name + "_bn_shift", ir::TensorData::FromFloats({1, ch, 1, 1}, shift));
  // Logical NCHW: laying out the Mul assigns its layout.
  const int mv = c.NewValue(n.name + "_bn_scaled", DType::kF32, g.values[n.outputs[0]].shape, false);
  ir::Node mul;
  mul.name = n.name + "_mul";
  mul.op_type = "Mul";
  mul.inputs = {n.inputs[0], sv};
  mul.outputs = {mv};
  ir::Node add;
  add.name = n.name;
  add.op_type = "Add";
  add.inputs = {mv, bv};
  add.outputs = {n.outputs[0]};
  FCB_RETURN_IF_ERROR(c.Place(std::move(mul)));
  FCB_RETURN_IF_ERROR(c.Place(std::move(add)));
  return true;
}

}  // namespace

void RegisterNnOps(std::vector<OpDef>* ops) {
  // Conv's NHWC form and its reference kernel both apply a fused activation.
  ops->push_back(NnDef("Conv", 2, 3, 1, InferConv, CreateNeedsLowering, kTraitTakesActivation));
  ops->push_back(NnDef("MaxPool", 1, 1, 2, InferPool, CreateNeedsLowering));
  ops->push_back(NnDef("AveragePool", 1, 1, 1, InferPool, CreateNeedsLowering));
  ops->push_back(NnDef("GlobalAveragePool", 1, 1, 1, InferGlobalPool, CreateGlobalPool));
  ops->push_back(NnDef("GlobalMaxPool", 1, 1, 1, InferGlobalPool, CreateGlobalPool));
  OpDef bn = NnDef("BatchNormalization", 5, 5, 3, InferBatchNorm, CreateBatchNorm);
  bn.layouts = {{"BatchNormalization", BatchNormAsMulAdd}};
  ops->push_back(std::move(bn));
}

}  // namespace fcb::ops
