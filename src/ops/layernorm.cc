// LayerNormalization (opset 17): each row X[i, axis:] is normalized to zero
// mean and unit variance, then scaled and shifted. Scale and B may be the
// full normalized shape or a trailing part of it (e.g. [D] for a normalized
// [S, D]), which indexes as j % size. Optional outputs Mean and InvStdDev
// (shape X[:axis] + ones) are written when the node asks for them.
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

struct LnParams {
  int64_t axis = 0, rows = 0, cols = 0;
  int64_t scale_n = 0, bias_n = 0;  // 0 = absent (bias)
  float eps = 1e-5f;
};

// Whether `p` (leading ones stripped) is a suffix of `norm` (leading ones stripped).
bool IsTrailingPart(const ir::Shape& p, const ir::Shape& norm) {
  size_t a = 0, b = 0;
  while (a < p.size() && p[a] == 1) ++a;
  while (b < norm.size() && norm[b] == 1) ++b;
  if (p.size() - a > norm.size() - b) return false;
  return std::equal(p.begin() + a, p.end(), norm.end() - (p.size() - a));
}

Status ParseLn(const InferContext& c, LnParams* p) {
  const TensorInfo &x = Input(c, 0), &s = Input(c, 1), &b = Input(c, 2);
  if (!x.present() || !s.present()) return OpError(c.op, "needs X and Scale");
  if (x.dtype != DType::kF32 || s.dtype != DType::kF32 || (b.present() && b.dtype != DType::kF32))
    return OpUnsupported(c.op, "only float32 is supported");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (r == 0) return OpError(c.op, "X must have rank >= 1");
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), r, &p->axis));
  p->eps = c.attrs.GetFloat("epsilon", 1e-5f);
  if (!(p->eps >= 0)) return OpError(c.op, "epsilon must be >= 0");
  const ir::Shape norm(x.shape.begin() + p->axis, x.shape.end());
  p->rows = SafeProduct(x.shape, 0, static_cast<size_t>(p->axis));
  p->cols = SafeProduct(norm, 0, norm.size());
  if (!IsTrailingPart(s.shape, norm) || (s.numel() == 0 && p->cols != 0))
    return OpError(c.op, "Scale " + ir::ShapeToString(s.shape) + " does not match the normalized shape " +
                             ir::ShapeToString(norm));
  p->scale_n = s.numel();
  if (b.present()) {
    if (!IsTrailingPart(b.shape, norm) || (b.numel() == 0 && p->cols != 0))
      return OpError(c.op, "B " + ir::ShapeToString(b.shape) + " does not match the normalized shape " +
                               ir::ShapeToString(norm));
    p->bias_n = b.numel();
  }
  return Status::Ok();
}

Status InferLayerNorm(const InferContext& c, std::vector<TensorInfo>* outs) {
  LnParams p;
  FCB_RETURN_IF_ERROR(ParseLn(c, &p));
  const TensorInfo& x = Input(c, 0);
  outs->push_back(x);
  ir::Shape stat(x.shape.begin(), x.shape.begin() + p.axis);
  stat.resize(x.shape.size(), 1);
  for (int i = 1; i < c.num_outputs; ++i) outs->push_back(TensorInfo{DType::kF32, stat});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateLayerNorm(const CreateContext& c) {
  LnParams p;
  FCB_RETURN_IF_ERROR(ParseLn(AsInfer(c), &p));
  const int n_out = static_cast<int>(c.outputs.size());
  return MakeAdaptingKernel([made = p, n_out](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    LnParams p = made;
    if (ctx.shapes) RowsFromAxis(ctx.shapes[0], p.axis, &p.rows, &p.cols);  // the same rank: the same axis
    const float* x = static_cast<const float*>(in[0]);
    const float* scale = static_cast<const float*>(in[1]);
    const float* bias = p.bias_n ? static_cast<const float*>(in[2]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    float* mean_out = n_out > 1 ? static_cast<float*>(out[1]) : nullptr;
    float* inv_out = n_out > 2 ? static_cast<float*>(out[2]) : nullptr;
    const int64_t D = p.cols;
    // Scale and B over the whole normalized row (what exporters write): the
    // target's kernel. A shorter trailing Scale or B: the scalar loop below.
    if (p.scale_n == D && (!bias || p.bias_n == D)) {
      ctx.pool->ParallelFor(p.rows, GrainFor(D), [&](int64_t b, int64_t e) {
        ctx.k->f32.layernorm(x, scale, bias, y, D, p.eps, mean_out, inv_out, b, e);
      });
      return Status::Ok();
    }
    ctx.pool->ParallelFor(p.rows, GrainFor(D), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* xr = x + r * D;
        float* yr = y + r * D;
        // Two passes with double accuracy: stable for rows with a large mean.
        const double mean = D ? RowSum(xr, D, false, 0.0) / static_cast<double>(D) : 0.0;
        const double var = D ? RowSum(xr, D, true, mean) / static_cast<double>(D) : 0.0;
        const float inv = static_cast<float>(1.0 / std::sqrt(var + p.eps));
        const float m = static_cast<float>(mean);
        for (int64_t j = 0; j < D; ++j)
          yr[j] = (xr[j] - m) * inv * scale[j % p.scale_n] + (bias ? bias[j % p.bias_n] : 0.0f);
        if (mean_out) mean_out[r] = m;
        if (inv_out) inv_out[r] = inv;
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterLayerNormOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferLayerNorm, CreateLayerNorm>("LayerNormalization", 2, 3, 1, 3));
}

}  // namespace fcb::ops
