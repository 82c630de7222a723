// Activations and float math beyond unary.cc's table: PRelu (slope
// broadcast to X), Celu, Mish, ThresholdedRelu, Shrink, the inverse and
// hyperbolic trigonometric functions, IsNaN, IsInf. Plain loops in
// double-free float math; none of these sit on a hot path of the supported
// models, so they have no per-target kernel.
#include <cmath>

#include "ops/broadcast.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

Status InferFloatUnary(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (c.op == "IsNaN" || c.op == "IsInf") {
    outs->push_back(TensorInfo{DType::kBool, x.shape});
  } else {
    outs->push_back(x);
  }
  return Status::Ok();
}

template <typename T>
void MapFloat(const RunContext& ctx, std::string_view op, float alpha, float shrink_bias, bool neg_inf,
              bool pos_inf, const T* x, void* out, int64_t n) {
  T* y = static_cast<T*>(out);
  uint8_t* yb = static_cast<uint8_t*>(out);
  const T a = static_cast<T>(alpha);
  auto run = [&](auto f) {
    ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  };
  if (op == "Celu") {
    run([&](int64_t i) { const T v = x[i]; y[i] = std::max(T(0), v) + std::min(T(0), a * (std::exp(v / a) - T(1))); });
  } else if (op == "Mish") {
    run([&](int64_t i) {
      const T v = x[i];
      const T sp = v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
      y[i] = v * std::tanh(sp);
    });
  } else if (op == "ThresholdedRelu") {
    run([&](int64_t i) { y[i] = x[i] > a ? x[i] : T(0); });
  } else if (op == "Shrink") {
    const T lambd = static_cast<T>(alpha), bias = static_cast<T>(shrink_bias);
    run([&](int64_t i) { const T v = x[i]; y[i] = v < -lambd ? v + bias : v > lambd ? v - bias : T(0); });
  } else if (op == "Tan") {
    run([&](int64_t i) { y[i] = std::tan(x[i]); });
  } else if (op == "Asin") {
    run([&](int64_t i) { y[i] = std::asin(x[i]); });
  } else if (op == "Acos") {
    run([&](int64_t i) { y[i] = std::acos(x[i]); });
  } else if (op == "Atan") {
    run([&](int64_t i) { y[i] = std::atan(x[i]); });
  } else if (op == "Sinh") {
    run([&](int64_t i) { y[i] = std::sinh(x[i]); });
  } else if (op == "Cosh") {
    run([&](int64_t i) { y[i] = std::cosh(x[i]); });
  } else if (op == "Asinh") {
    run([&](int64_t i) { y[i] = std::asinh(x[i]); });
  } else if (op == "Acosh") {
    run([&](int64_t i) { y[i] = std::acosh(x[i]); });
  } else if (op == "Atanh") {
    run([&](int64_t i) { y[i] = std::atanh(x[i]); });
  } else if (op == "IsNaN") {
    run([&](int64_t i) { yb[i] = std::isnan(x[i]); });
  } else if (op == "IsInf") {
    run([&](int64_t i) {
      yb[i] = std::isinf(x[i]) && ((x[i] > 0 && pos_inf) || (x[i] < 0 && neg_inf));
    });
  }
}

Result<std::unique_ptr<Kernel>> CreateFloatUnary(const CreateContext& c) {
  const std::string op(c.op);
  // Shrink's lambd travels as alpha.
  const float alpha = op == "Shrink" ? c.attrs.GetFloat("lambd", 0.5f) : c.attrs.GetFloat("alpha", 1.0f);
  const float shrink_bias = c.attrs.GetFloat("bias", 0.0f);
  if (op == "Celu" && alpha == 0) return OpError(c.op, "alpha must not be 0");
  const bool neg_inf = c.attrs.GetInt("detect_negative", 1) != 0;
  const bool pos_inf = c.attrs.GetInt("detect_positive", 1) != 0;
  const int64_t n = c.inputs[0].numel();
  const DType t = c.inputs[0].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    if (t == DType::kF32)
      MapFloat(ctx, op, alpha, shrink_bias, neg_inf, pos_inf, static_cast<const float*>(in[0]), out[0], n);
    else
      MapFloat(ctx, op, alpha, shrink_bias, neg_inf, pos_inf, static_cast<const double*>(in[0]), out[0], n);
    return Status::Ok();
  });
}

// PRelu: slope broadcasts unidirectionally to X.
Status InferPRelu(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& s = Input(c, 1);
  if (!x.present() || !s.present()) return OpError(c.op, "X and slope are required");
  if (!IsFloat(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (s.dtype != x.dtype) return OpError(c.op, "slope must have X's dtype");
  ir::Shape out;
  FCB_RETURN_IF_ERROR(BroadcastShapes(c.op, x.shape, s.shape, &out));
  if (out != x.shape) return OpError(c.op, "slope " + ir::ShapeToString(s.shape) +
                                               " does not broadcast to X " + ir::ShapeToString(x.shape));
  outs->push_back(x);
  return Status::Ok();
}

template <typename T>
Result<std::unique_ptr<Kernel>> PReluKernel(const CreateContext& c) {
  BroadcastPlan plan;
  FCB_RETURN_IF_ERROR(
      BroadcastPlan::Make(c.op, {&c.inputs[0].shape, &c.inputs[1].shape}, c.outputs[0].shape, &plan));
  return MakeKernel([plan = std::move(plan)](const RunContext& ctx, const void* const* in,
                                             void* const* out) -> Status {
    const T* x = static_cast<const T*>(in[0]);
    const T* s = static_cast<const T*>(in[1]);
    T* y = static_cast<T*>(out[0]);
    ctx.pool->ParallelFor(plan.items(), GrainFor(plan.piece), [&](int64_t b, int64_t e) {
      plan.ForRuns(b, e, [&](const int64_t* off, int64_t yo, int64_t n) {
        const T* xp = x + off[0];
        const T* sp = s + off[1];
        const int64_t xs = plan.run_stride[0], ss = plan.run_stride[1];
        for (int64_t i = 0; i < n; ++i) {
          const T v = xp[i * xs];
          y[yo + i] = v < 0 ? v * sp[i * ss] : v;
        }
      });
    });
    return Status::Ok();
  });
}

Result<std::unique_ptr<Kernel>> CreatePRelu(const CreateContext& c) {
  if (c.inputs[0].dtype == DType::kF32) return PReluKernel<float>(c);
  return PReluKernel<double>(c);
}

}  // namespace

void RegisterActivationExtraOps(std::vector<OpDef>* ops) {
  for (const char* name : {"Celu", "Mish", "ThresholdedRelu", "IsNaN", "IsInf", "Shrink", "Tan", "Asin",
                           "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"})
    ops->push_back(Def<InferFloatUnary, CreateFloatUnary>(name, 1, 1, 1, 1, kTraitElementwise));
  ops->push_back(Def<InferPRelu, CreatePRelu>("PRelu", 2, 2));
}

}  // namespace fcb::ops
