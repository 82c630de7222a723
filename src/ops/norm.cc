// Normalizations over NCHW-style tensors (channel axis 1, any spatial rank):
// InstanceNormalization, GroupNormalization (opset 18: scale/bias per group;
// per-channel scale/bias are accepted too, as later opsets define them) and
// LRN. Statistics accumulate in double so long rows do not lose precision.
#include <algorithm>
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

Status InferNorm(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (x.dtype != DType::kF32) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (x.shape.size() < (c.op == "LRN" ? 2u : 3u)) return OpError(c.op, "input rank is too small");
  const int64_t ch = x.shape[1];
  if (c.op == "InstanceNormalization" || c.op == "GroupNormalization") {
    int64_t want = ch;
    if (c.op == "GroupNormalization") {
      const int64_t g = c.attrs.GetInt("num_groups", 0);
      if (g < 1 || ch % g != 0) return OpError(c.op, "num_groups must divide the channel count");
      want = Input(c, 1).numel() == g ? g : ch;
    }
    for (size_t i = 1; i < 3; ++i) {
      const TensorInfo& p = Input(c, i);
      if (!p.present() || p.dtype != DType::kF32 || p.shape != ir::Shape{want})
        return OpError(c.op, "scale and bias must be float32 of shape [" + std::to_string(want) + "]");
    }
  } else {
    if (c.attrs.GetInt("size", 0) < 1) return OpError(c.op, "size must be >= 1");
  }
  outs->push_back(x);
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateNorm(const CreateContext& c) {
  const ir::Shape s = c.inputs[0].shape;
  const int64_t n = s[0], ch = s[1];
  int64_t sp = 1;
  for (size_t i = 2; i < s.size(); ++i) sp *= s[i];
  const std::string op(c.op);
  if (op == "LRN") {
    const int64_t size = c.attrs.GetInt("size", 1);
    const double alpha = c.attrs.GetFloat("alpha", 1e-4f), beta = c.attrs.GetFloat("beta", 0.75f),
                 bias = c.attrs.GetFloat("bias", 1.0f);
    return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
      const float* x = static_cast<const float*>(in[0]);
      float* y = static_cast<float*>(out[0]);
      const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t cc = 0; cc < ch; ++cc)
          for (int64_t p = 0; p < sp; ++p) {
            double sq = 0;
            for (int64_t k = std::max<int64_t>(0, cc - lo); k <= std::min(ch - 1, cc + hi); ++k) {
              const double v = x[(b * ch + k) * sp + p];
              sq += v * v;
            }
            const int64_t o = (b * ch + cc) * sp + p;
            y[o] = static_cast<float>(x[o] / std::pow(bias + alpha / size * sq, beta));
          }
      return Status::Ok();
    });
  }
  // Instance norm = group norm with one channel per group.
  const int64_t groups = op == "GroupNormalization" ? c.attrs.GetInt("num_groups", 1) : ch;
  const bool per_group = op == "GroupNormalization" && c.inputs[1].numel() == groups && groups != ch;
  const double eps = c.attrs.GetFloat("epsilon", 1e-5f);
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const float* scale = static_cast<const float*>(in[1]);
    const float* bias = static_cast<const float*>(in[2]);
    float* y = static_cast<float*>(out[0]);
    const int64_t cpg = ch / groups, len = cpg * sp;
    // One (batch, group) row per work item, about 64 KiB of input per grain.
    ctx.pool->ParallelFor(n * groups, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(len, 1)),
                          [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / groups, g = row % groups;
        const int64_t base = (b * ch + g * cpg) * sp;
        const float* xr = x + base;
        const double mean = RowSum(xr, len, false, 0.0) / static_cast<double>(len);
        const double var = RowSum(xr, len, true, mean) / static_cast<double>(len);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t k = 0; k < cpg; ++k) {
          const int64_t cc = g * cpg + k;
          const double sc = per_group ? scale[g] : scale[cc], bi = per_group ? bias[g] : bias[cc];
          // y = (x - mean) * inv * sc + bi in float: mean = m + dm with m a
          // float, so x - m is exact for x near the mean (a large mean with a
          // small spread would cancel in x * a + (bi - mean * a)).
          const float m = static_cast<float>(mean), dm = static_cast<float>(mean - m);
          const float a = static_cast<float>(inv * sc), c0 = static_cast<float>(bi);
          const float* xc = xr + k * sp;
          float* yc = y + base + k * sp;
          for (int64_t i = 0; i < sp; ++i) yc[i] = ((xc[i] - m) - dm) * a + c0;
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterNormOps(std::vector<OpDef>* ops) {
  for (const char* name : {"InstanceNormalization", "GroupNormalization"})
    ops->push_back(Def<InferNorm, CreateNorm>(name, 3, 3));
  ops->push_back(Def<InferNorm, CreateNorm>("LRN", 1, 1));
}

}  // namespace fcb::ops
