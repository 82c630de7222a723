// The normalizations ONNX Runtime's exporters and transformer optimizer
// write, as its CPU kernels define them:
//
//   SimplifiedLayerNormalization (RMSNorm; ONNX Runtime registers it in the
//   default ONNX domain, version 1): inputs X, scale; attributes axis (-1),
//   epsilon (1e-5), stash_type (1; only float32 statistics exist for float32
//   inputs, so other values are refused). Each row X[i, axis:] becomes
//   x / sqrt(mean(x^2) + epsilon) * scale. Outputs Y and, optionally,
//   inv_std_var = 1 / sqrt(mean(x^2) + epsilon), shaped X[:axis] + ones.
//
//   com.microsoft SkipLayerNormalization: inputs input [..., H], skip (input's
//   shape or a trailing part of it, repeated), gamma [H], beta [H] (optional),
//   bias [H] (optional); attribute epsilon. s = input + skip (+ bias); the
//   output is LayerNormalization of s over the last axis, * gamma (+ beta).
//   Optional outputs: mean and inv_std_var of s (shape input[:-1] + [1]) and
//   s itself (output 3, input_skip_bias_sum).
//
//   com.microsoft SkipSimplifiedLayerNormalization: inputs input, skip, gamma,
//   bias (optional, input 3: this op has no beta); the RMSNorm of s. Outputs
//   as SkipLayerNormalization; output 1 (mean) is 0, as ONNX Runtime writes it.
//
// Numerics. ONNX Runtime sums x and x^2 in one pass (in double for
// SimplifiedLayerNormalization, in float for the Skip forms) and takes the
// variance as mean(x^2) - mean^2. fcb sums in double and, for the
// mean-centred forms, takes the variance as the mean of (x - mean)^2 (the
// target's layernorm kernel): the same value up to float rounding for rows
// whose mean is small against their spread, and more accurate otherwise.
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

constexpr char kSimplified[] = "SimplifiedLayerNormalization";
constexpr char kSkip[] = "com.microsoft.SkipLayerNormalization";
constexpr char kSkipSimplified[] = "com.microsoft.SkipSimplifiedLayerNormalization";

// Shape `s` without its leading ones.
ir::Shape StripOnes(const ir::Shape& s) {
  size_t a = 0;
  while (a < s.size() && s[a] == 1) ++a;
  return ir::Shape(s.begin() + a, s.end());
}

// Whether `p` (leading ones stripped) is a suffix of `full` (leading ones stripped).
bool IsTrailingPart(const ir::Shape& p, const ir::Shape& full) {
  const ir::Shape a = StripOnes(p), b = StripOnes(full);
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.end() - a.size());
}

float Epsilon(const InferContext& c, Status* st) {
  const float eps = c.attrs.GetFloat("epsilon", 1e-5f);
  if (!(eps >= 0) || !std::isfinite(eps)) *st = OpError(c.op, "epsilon must be a finite value >= 0");
  return eps;
}

// ---- SimplifiedLayerNormalization ----

struct RmsPlan {
  int64_t axis = 0, rows = 0, cols = 0;
  float eps = 1e-5f;
};

Status ResolveRms(const InferContext& c, RmsPlan* p) {
  const TensorInfo &x = Input(c, 0), &s = Input(c, 1);
  if (!x.present() || !s.present()) return OpError(c.op, "needs X and scale");
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, x, "X"));
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, s, "scale"));
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (r == 0) return OpError(c.op, "X must have rank >= 1");
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), r, &p->axis));
  const int64_t stash = c.attrs.GetInt("stash_type", 1);
  if (stash != 1)
    return OpUnsupported(c.op, "stash_type " + std::to_string(stash) +
                                   " is not supported (only 1: float32 statistics)");
  Status st;
  p->eps = Epsilon(c, &st);
  FCB_RETURN_IF_ERROR(st);
  const ir::Shape norm(x.shape.begin() + p->axis, x.shape.end());
  p->rows = SafeProduct(x.shape, 0, static_cast<size_t>(p->axis));
  p->cols = SafeProduct(norm, 0, norm.size());
  if (StripOnes(s.shape) != StripOnes(norm))
    return OpError(c.op, "scale " + ir::ShapeToString(s.shape) + " must have the normalized shape " +
                             ir::ShapeToString(norm));
  return Status::Ok();
}

Status InferRms(const InferContext& c, std::vector<TensorInfo>* outs) {
  RmsPlan p;
  FCB_RETURN_IF_ERROR(ResolveRms(c, &p));
  const TensorInfo& x = Input(c, 0);
  outs->push_back(x);
  if (c.num_outputs > 1) {
    ir::Shape stat(x.shape.begin(), x.shape.begin() + p.axis);
    stat.resize(x.shape.size(), 1);
    outs->push_back(TensorInfo{DType::kF32, stat});
  }
  return Status::Ok();
}

// One RMSNorm row: y = x / sqrt(mean(x^2) + eps) * scale; returns the inverse.
float RmsRow(const float* x, const float* scale, float* y, int64_t n, float eps) {
  const double ms = n ? RowSum(x, n, true, 0.0) / static_cast<double>(n) : 0.0;
  const double inv = 1.0 / std::sqrt(ms + static_cast<double>(eps));
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(x[j] * inv * scale[j]);
  return static_cast<float>(inv);
}

Result<std::unique_ptr<Kernel>> CreateRms(const CreateContext& c) {
  RmsPlan p;
  FCB_RETURN_IF_ERROR(ResolveRms(AsInfer(c), &p));
  const bool want_inv = c.outputs.size() > 1;
  return MakeAdaptingKernel([made = p, want_inv](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    RmsPlan p = made;
    if (ctx.shapes) RowsFromAxis(ctx.shapes[0], p.axis, &p.rows, &p.cols);  // the same rank: the same axis
    const float* x = static_cast<const float*>(in[0]);
    const float* scale = static_cast<const float*>(in[1]);
    float* y = static_cast<float*>(out[0]);
    float* inv = want_inv ? static_cast<float*>(out[1]) : nullptr;
    ctx.pool->ParallelFor(p.rows, GrainFor(p.cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float v = RmsRow(x + r * p.cols, scale, y + r * p.cols, p.cols, p.eps);
        if (inv) inv[r] = v;
      }
    });
    return Status::Ok();
  });
}

// ---- SkipLayerNormalization, SkipSimplifiedLayerNormalization ----

struct SkipPlan {
  bool simplified = false;
  int64_t rows = 0, hidden = 0, skip_n = 0;
  int beta = -1, bias = -1;  // input indices; -1 absent
  float eps = 1e-5f;
};

Status ResolveSkip(const InferContext& c, SkipPlan* p) {
  p->simplified = c.op == kSkipSimplified;
  const TensorInfo &x = Input(c, 0), &skip = Input(c, 1), &gamma = Input(c, 2);
  if (!x.present() || !skip.present() || !gamma.present()) return OpError(c.op, "needs input, skip and gamma");
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, x, "input"));
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, skip, "skip"));
  FCB_RETURN_IF_ERROR(SupportedF32(c.op, gamma, "gamma"));
  if (x.shape.empty()) return OpError(c.op, "input must have rank >= 1");
  p->hidden = x.shape.back();
  if (p->hidden <= 0) return OpError(c.op, "input's last dimension must be > 0");
  p->rows = SafeProduct(x.shape, 0, x.shape.size() - 1);
  if (!IsTrailingPart(skip.shape, x.shape) || skip.shape.empty() || skip.shape.back() != p->hidden)
    return OpError(c.op, "skip " + ir::ShapeToString(skip.shape) + " must be input's shape " +
                             ir::ShapeToString(x.shape) + " or a trailing part of it");
  p->skip_n = skip.numel();
  const ir::Shape vec{p->hidden};
  if (StripOnes(gamma.shape) != StripOnes(vec))
    return OpError(c.op, "gamma " + ir::ShapeToString(gamma.shape) + " must have input's last dimension [" +
                             std::to_string(p->hidden) + "]");
  // Optional vectors: SkipLayerNormalization's beta (3) and bias (4);
  // SkipSimplifiedLayerNormalization's bias (3).
  const std::vector<std::pair<int, const char*>> optional =
      p->simplified ? std::vector<std::pair<int, const char*>>{{3, "bias"}}
                    : std::vector<std::pair<int, const char*>>{{3, "beta"}, {4, "bias"}};
  for (auto [i, what] : optional) {
    const TensorInfo& t = Input(c, i);
    if (!t.present()) continue;
    FCB_RETURN_IF_ERROR(SupportedF32(c.op, t, what));
    if (StripOnes(t.shape) != StripOnes(vec))
      return OpError(c.op, std::string(what) + " " + ir::ShapeToString(t.shape) +
                               " must have input's last dimension [" + std::to_string(p->hidden) + "]");
    (std::string_view(what) == "beta" ? p->beta : p->bias) = i;
  }
  if (p->simplified && c.inputs.size() > 4) return OpError(c.op, "takes at most 4 inputs");
  Status st;
  p->eps = Epsilon(c, &st);
  return st;
}

Status InferSkip(const InferContext& c, std::vector<TensorInfo>* outs) {
  SkipPlan p;
  FCB_RETURN_IF_ERROR(ResolveSkip(c, &p));
  const TensorInfo& x = Input(c, 0);
  ir::Shape stat = x.shape;
  stat.back() = 1;
  outs->push_back(x);
  if (c.num_outputs > 1) outs->push_back(TensorInfo{DType::kF32, stat});
  if (c.num_outputs > 2) outs->push_back(TensorInfo{DType::kF32, stat});
  if (c.num_outputs > 3) outs->push_back(x);
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateSkip(const CreateContext& c) {
  SkipPlan p;
  FCB_RETURN_IF_ERROR(ResolveSkip(AsInfer(c), &p));
  const int n_out = static_cast<int>(c.outputs.size());
  return MakeKernel([p, n_out](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const float* x = static_cast<const float*>(in[0]);
    const float* skip = static_cast<const float*>(in[1]);
    const float* gamma = static_cast<const float*>(in[2]);
    const float* beta = p.beta >= 0 ? static_cast<const float*>(in[p.beta]) : nullptr;
    const float* bias = p.bias >= 0 ? static_cast<const float*>(in[p.bias]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    float* mean = n_out > 1 ? static_cast<float*>(out[1]) : nullptr;
    float* inv = n_out > 2 ? static_cast<float*>(out[2]) : nullptr;
    float* sum = n_out > 3 ? static_cast<float*>(out[3]) : nullptr;
    const int64_t H = p.hidden;
    ctx.pool->ParallelFor(p.rows, GrainFor(H), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* xr = x + r * H;
        const float* sr = skip + (r * H) % p.skip_n;
        // s goes to the sum output when there is one, else into y (normalized in place).
        float* s = sum ? sum + r * H : y + r * H;
        for (int64_t j = 0; j < H; ++j) s[j] = xr[j] + sr[j] + (bias ? bias[j] : 0.0f);
        if (p.simplified) {
          const float iv = RmsRow(s, gamma, y + r * H, H, p.eps);
          if (mean) mean[r] = 0.0f;  // RMSNorm centres nothing; ONNX Runtime writes 0 too
          if (inv) inv[r] = iv;
        } else {
          // The target's LayerNormalization kernel (elementwise in its last
          // pass, so s may be y).
          ctx.k->f32.layernorm(s, gamma, beta, y + r * H, H, p.eps, mean ? mean + r : nullptr,
                               inv ? inv + r : nullptr, 0, 1);
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterTransformerNormOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferRms, CreateRms>(kSimplified, 2, 2, 1, 2));
  ops->push_back(Def<InferSkip, CreateSkip>(kSkip, 3, 5, 1, 4));
  ops->push_back(Def<InferSkip, CreateSkip>(kSkipSimplified, 3, 4, 1, 4));
}

}  // namespace fcb::ops
