// Softmax and LogSoftmax with opset-13 semantics (one axis, default -1).
// The input is viewed as [outer, n, inner] around the axis. float32 Softmax
// over the last axis (inner == 1) runs the target's softmax kernel; the other
// cases are strided loops that handle `inner` in blocks of kBlock columns with
// stack-resident running max / sum, so Run never allocates.
#include <cmath>
#include <limits>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr int64_t kBlock = 64;

Status InferSoftmax(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  int64_t axis;
  FCB_RETURN_IF_ERROR(AxisInput(c, IsFloat, -1, &axis));
  outs->push_back(x);
  return Status::Ok();
}

template <typename T>
void SoftmaxLoops(const RunContext& ctx, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                  bool log) {
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  ctx.pool->ParallelFor(outer * blocks, GrainFor(n * std::min(inner, kBlock)),
                        [&](int64_t b, int64_t e) {
    T m[kBlock];
    double s[kBlock];
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / blocks, i0 = (it % blocks) * kBlock;
      const int64_t w = std::min(kBlock, inner - i0);
      const T* xo = x + o * n * inner + i0;
      T* yo = y + o * n * inner + i0;
      for (int64_t i = 0; i < w; ++i) {
        m[i] = -std::numeric_limits<T>::infinity();
        s[i] = 0;
      }
      for (int64_t a = 0; a < n; ++a)
        for (int64_t i = 0; i < w; ++i) m[i] = std::max(m[i], xo[a * inner + i]);
      for (int64_t a = 0; a < n; ++a)
        for (int64_t i = 0; i < w; ++i) {
          const T v = std::exp(xo[a * inner + i] - m[i]);
          s[i] += v;
          if (!log) yo[a * inner + i] = v;
        }
      for (int64_t i = 0; i < w; ++i) {
        if (log) s[i] = std::log(s[i]);
        else s[i] = 1.0 / s[i];
      }
      for (int64_t a = 0; a < n; ++a)
        for (int64_t i = 0; i < w; ++i) {
          T& v = yo[a * inner + i];
          if (log) v = static_cast<T>(xo[a * inner + i] - m[i] - s[i]);
          else v = static_cast<T>(v * s[i]);
        }
    }
  });
}

Result<std::unique_ptr<Kernel>> CreateSoftmax(const CreateContext& c) {
  const ir::Shape& s = c.inputs[0].shape;
  int64_t axis;
  FCB_RETURN_IF_ERROR(
      NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), static_cast<int64_t>(s.size()), &axis));
  const size_t a = static_cast<size_t>(axis);
  const int64_t made_outer = SafeProduct(s, 0, a), made_inner = SafeProduct(s, a + 1, s.size()), made_n = s[a];
  const bool log = c.op == "LogSoftmax";
  const DType t = c.inputs[0].dtype;
  return MakeAdaptingKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    int64_t outer = made_outer, inner = made_inner, n = made_n;
    if (ctx.shapes) {  // the same rank: the same axis
      const std::span<const int64_t> x = ctx.shapes[0];
      outer = SafeProduct(x, 0, a), inner = SafeProduct(x, a + 1, x.size()), n = x[a];
    }
    if (n == 0 || outer == 0 || inner == 0) return Status::Ok();
    if (t == DType::kF64) {
      SoftmaxLoops(ctx, static_cast<const double*>(in[0]), static_cast<double*>(out[0]), outer, n,
                   inner, log);
      return Status::Ok();
    }
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    if (inner == 1 && !log) {
      ctx.pool->ParallelFor(outer, GrainFor(n),
                            [&](int64_t b, int64_t e) { ctx.k->f32.softmax(x, y, n, b, e); });
    } else {
      SoftmaxLoops(ctx, x, y, outer, n, inner, log);
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterSoftmaxOps(std::vector<OpDef>* ops) {
  for (const char* name : {"Softmax", "LogSoftmax"}) ops->push_back(Def<InferSoftmax, CreateSoftmax>(name, 1, 1));
}

}  // namespace fcb::ops
