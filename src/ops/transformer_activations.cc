// The GELU forms of ONNX Runtime's com.microsoft domain, as its CPU kernels
// define them (float32):
//
//   Gelu(X)           y = x/2 * (1 + erf(x / sqrt(2)))        (the target's kGelu kernel)
//   BiasGelu(A, B)    y = Gelu(a + b), B a vector of A's last dimension
//   FastGelu(X[, B])  y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), x
//                     plus the optional bias vector B first: the tanh
//                     approximation, which ONNX Runtime computes as written
//                     (not as the erf form)
//   QuickGelu(X)      y = x * sigmoid(alpha * x), attribute alpha (1.702)
//
// ONNX's own Gelu (opset 20, unary.cc) is a different operator of another
// domain; this file's are registered as "com.microsoft.<Op>".
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;
using kernels::Act;
using kernels::Epilogue;

constexpr char kGelu[] = "com.microsoft.Gelu";
constexpr char kBiasGelu[] = "com.microsoft.BiasGelu";
constexpr char kFastGelu[] = "com.microsoft.FastGelu";
constexpr char kQuickGelu[] = "com.microsoft.QuickGelu";

enum class Form { kGelu, kBiasGelu, kFastGelu, kQuickGelu };

struct ActPlan {
  Form form = Form::kGelu;
  int64_t n = 0, bias_n = 0;  // bias_n: 0 when there is no bias
  float alpha = 1.702f;
};

Status Resolve(const InferContext& c, ActPlan* p) {
  p->form = c.op == kBiasGelu ? Form::kBiasGelu
            : c.op == kFastGelu ? Form::kFastGelu
            : c.op == kQuickGelu ? Form::kQuickGelu
                                 : Form::kGelu;
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, x, "input"));
  p->n = x.numel();
  const TensorInfo& b = Input(c, 1);
  if (b.present()) {
    FCB_RETURN_IF_ERROR(SupportedF32(c.op, b, "bias"));
    if (x.shape.empty() || b.shape.size() != 1 || b.shape[0] != x.shape.back())
      return OpError(c.op, "bias " + ir::ShapeToString(b.shape) + " must be a vector of the input's last dimension (input " +
                               ir::ShapeToString(x.shape) + ")");
    p->bias_n = b.shape[0];
    if (p->bias_n == 0 && p->n != 0) return OpError(c.op, "bias is empty");
  } else if (p->form == Form::kBiasGelu) {
    return OpError(c.op, "needs the bias input B");
  }
  if (p->form == Form::kQuickGelu) {
    p->alpha = c.attrs.GetFloat("alpha", 1.702f);
    if (!std::isfinite(p->alpha)) return OpError(c.op, "alpha must be finite");
  }
  return Status::Ok();
}

Status InferAct(const InferContext& c, std::vector<TensorInfo>* outs) {
  ActPlan p;
  FCB_RETURN_IF_ERROR(Resolve(c, &p));
  outs->push_back(Input(c, 0));
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateAct(const CreateContext& c) {
  ActPlan p;
  FCB_RETURN_IF_ERROR(Resolve(AsInfer(c), &p));
  return MakeKernel([p](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const float* bias = p.bias_n ? static_cast<const float*>(in[1]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    ctx.pool->ParallelFor(p.n, 16384, [&](int64_t b, int64_t e) {
      // x (+ bias) into y first, for the forms with a bias.
      const float* src = x;
      if (bias) {
        for (int64_t i = b; i < e; ++i) y[i] = x[i] + bias[i % p.bias_n];
        src = y;
      }
      switch (p.form) {
        case Form::kGelu:
        case Form::kBiasGelu: ctx.k->f32.unary(Epilogue{Act::kGelu, 0, 0}, src, y, b, e); break;
        case Form::kFastGelu:
          for (int64_t i = b; i < e; ++i) {
            const float v = src[i];
            y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
          }
          break;
        case Form::kQuickGelu:
          for (int64_t i = b; i < e; ++i) {
            const float v = src[i];
            y[i] = v / (1.0f + std::exp(-p.alpha * v));
          }
          break;
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterTransformerActivationOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferAct, CreateAct>(kGelu, 1, 1, 1, 1, kTraitElementwise));
  ops->push_back(Def<InferAct, CreateAct>(kBiasGelu, 2, 2));
  ops->push_back(Def<InferAct, CreateAct>(kFastGelu, 1, 2));
  ops->push_back(Def<InferAct, CreateAct>(kQuickGelu, 1, 1, 1, 1, kTraitElementwise));
}

}  // namespace fcb::ops
