// GemmPacked: A times a constant matrix packed at compile time.
//
//   GemmPacked(A[..., k], Bpacked[, bias[n]]) -> Y[..., n]
//   params: columns (n) and the fused activation.
//   Bpacked: PackGemmB ([ceil(n/16)][k][16]), float32 or bfloat16.
//
// Lowering: a Gemm (transA = 0, 2-D A) or MatMul (A of rank >= 2) whose B is
// a constant 2-D float32 matrix: alpha is folded into B and a vector-shaped C
// (times beta) becomes the bias. Other Gemm/MatMul nodes keep their ONNX form.
#include <algorithm>

#include "kernels/packing.h"
#include "ops/internal/internal.h"
#include "ops/lowering.h"

namespace fcb::ops {
namespace {

using kernels::kPanel;
using kernels::RoundUpToPanel;
constexpr std::string_view kOp = opname::GemmPacked;

struct Params {
  int64_t columns = 1;
  kernels::Epilogue ep;
  template <typename V>
  void Fields(V& v) {
    v.Int(attr::kColumns, columns, 1, kMaxChannels);
    v.Epilogue(attr::kActivation, attr::kActivationAlpha, attr::kActivationBeta, ep);
  }
};

struct Config {
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false;
  kernels::Epilogue ep;
};

Result<Config> Resolve(const Attrs& a, const std::vector<TensorInfo>& in) {
  const TensorInfo& x = in[0];
  FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, x, "input"));
  if (x.shape.empty()) return OpError(kOp, "input must have rank >= 1");
  FCB_ASSIGN_OR_RETURN(Params p, DecodeParams<Params>(kOp, a));
  Config g;
  g.k = x.shape.back();
  FCB_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(x.shape));
  if (g.k < 1) return OpError(kOp, "reduction size must be >= 1");
  g.m = numel / g.k;
  g.n = p.columns;
  g.ep = p.ep;
  FCB_RETURN_IF_ERROR(internal::ExpectWeights(kOp, in[1], "packed weights"));
  FCB_RETURN_IF_ERROR(internal::ExpectPacked(kOp, in[1], "packed weights", RoundUpToPanel(g.n) * g.k));
  if (in.size() > 2 && in[2].present()) {
    FCB_RETURN_IF_ERROR(internal::ExpectF32(kOp, in[2], "bias"));
    if (in[2].shape != ir::Shape{g.n}) return OpError(kOp, "bias must have shape [" + std::to_string(g.n) + "]");
    g.has_bias = true;
  }
  FCB_RETURN_IF_ERROR(CheckedNumel({g.m, g.n}).status());
  return g;
}

Status Infer(const InferContext& c, std::vector<TensorInfo>* out) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  ir::Shape s = c.inputs[0].shape;
  s.back() = g.n;
  out->push_back({ir::DType::kF32, s});
  return Status::Ok();
}

class GemmPackedKernel : public Kernel {
 public:
  GemmPackedKernel(Config g, std::vector<float> widened) : g_(g), widened_(std::move(widened)) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    const float* a = static_cast<const float*>(in[0]);
    const float* b = widened_.empty() ? static_cast<const float*>(in[1]) : widened_.data();
    const float* bias = g_.has_bias ? static_cast<const float*>(in[2]) : nullptr;
    float* y = static_cast<float*>(out[0]);
    // At other shapes (adapts): the rows are every dim of A but the last.
    const int64_t m = ctx.shapes ? SafeProduct(ctx.shapes[0], 0, ctx.shapes[0].size() - 1) : g_.m;
    const int64_t threads = ctx.pool->num_threads();
    if (threads > 1 && m < g_.n && g_.n >= 2 * kColumnUnit * threads) {
      RunColumnSplit(ctx, m, a, b, bias, y);
      return Status::Ok();
    }
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g_.n * g_.k));
    // Several row chunks per thread when each still holds 256 rows or more
    // (as ConvNhwc's pixel split: a slowed thread hands over its later rows).
    const int per_thread = ctx.pool->ChunksPerThreadFor(m, 256);
    ctx.pool->ParallelForThreads(
        m, grain,
        [&](int t, int64_t b0, int64_t e0) {
          ctx.k->f32.gemm(m, g_.n, g_.k, a, g_.k, b, bias, y, g_.n, g_.ep, b0, e0,
                          static_cast<float*>(ctx.ThreadScratch(t)));
        },
        per_thread);
    return Status::Ok();
  }
  // The packed weights, bias and epilogue serve any row count.
  bool adapts() const override { return true; }

 private:
  // With fewer rows than columns (a classifier runs one row), splitting rows
  // makes every thread read all of B, or leaves one row to one thread. Split
  // the columns in whole panels instead: packed B is [panel][k][16], so
  // panels [p0, p1) are a GEMM of their own starting at panel p0, written
  // with the full tensor's row stride.
  void RunColumnSplit(const RunContext& ctx, int64_t m, const float* a, const float* b, const float* bias,
                      float* y) const {
    const int64_t units = (g_.n + kColumnUnit - 1) / kColumnUnit;
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, m * g_.k * kColumnUnit));
    ctx.pool->ParallelForThreads(units, grain, [&](int t, int64_t begin, int64_t end) {
      const int64_t c0 = begin * kColumnUnit;
      const int64_t n = std::min(g_.n, end * kColumnUnit) - c0;
      ctx.k->f32.gemm(m, n, g_.k, a, g_.k, b + (c0 / kPanel) * g_.k * kPanel, bias ? bias + c0 : nullptr,
                      y + c0, g_.n, g_.ep, 0, m, static_cast<float*>(ctx.ThreadScratch(t)));
    });
  }

  static constexpr int64_t kColumnUnit = 2 * kPanel;  // a whole AVX2 column tile

  Config g_;
  std::vector<float> widened_;  // fp32 copy of bf16 weights, else empty
};

Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  FCB_ASSIGN_OR_RETURN(Config g, Resolve(c.attrs, c.inputs));
  FCB_ASSIGN_OR_RETURN(std::vector<float> widened, internal::WidenIfBf16(kOp, c, 1));
  return std::unique_ptr<Kernel>(new GemmPackedKernel(g, std::move(widened)));
}

Result<uint64_t> Scratch(const CreateContext&) { return kernels::kGemmScratchFloats * sizeof(float); }

// Whether a graph Gemm/MatMul lowers to GemmPacked (then it may carry a fused
// activation; FuseActivations asks before fusing one).
bool Applies(const ir::Graph& g, const ir::Node& n) {
  auto konst = [&](size_t i) -> const ir::TensorData* {
    return i < n.inputs.size() && n.inputs[i] >= 0 ? g.values[n.inputs[i]].constant.get() : nullptr;
  };
  const ir::TensorData* b = konst(1);
  if (!b || b->dtype != ir::DType::kF32 || b->shape.size() != 2 || n.inputs[0] < 0) return false;
  const ir::Value& a = g.values[n.inputs[0]];
  if (a.dtype != ir::DType::kF32 || a.shape.size() < 2) return false;
  if (n.op_type != "Gemm") return true;
  if (n.GetInt("transA", 0) != 0 || a.shape.size() != 2) return false;
  if (n.inputs.size() < 3 || n.inputs[2] < 0) return true;
  const ir::TensorData* cc = konst(2);
  if (!cc || cc->dtype != ir::DType::kF32) return false;
  const int64_t nn = n.GetInt("transB", 0) != 0 ? b->shape[0] : b->shape[1];
  const int64_t cn = cc->numel();
  return (cc->shape.size() == 1 && (cn == nn || cn == 1)) ||
         (cc->shape.size() == 2 && cc->shape[0] == 1 && (cc->shape[1] == nn || cc->shape[1] == 1)) ||
         cc->shape.empty();
}

Result<bool> Lower(LowerContext& c, int ni) {
  const ir::Node& n = c.node(ni);
  if (!Applies(c.graph(), n)) return false;
  const ir::TensorData* b = c.Const(n, 1);
  const bool gemm = n.op_type == "Gemm";
  const bool trans_b = gemm && n.GetInt("transB", 0) != 0;
  const int64_t k = trans_b ? b->shape[1] : b->shape[0];
  const int64_t nn = trans_b ? b->shape[0] : b->shape[1];
  std::vector<float> bias;
  if (const ir::TensorData* cc = gemm ? c.Const(n, 2) : nullptr) {
    const int64_t cn = cc->numel();
    const float beta = n.GetFloat("beta", 1.f);
    bias.resize(nn);
    for (int64_t j = 0; j < nn; ++j) bias[j] = beta * cc->data<float>()[cn == 1 ? 0 : j];
  }
  // A MatMul over A of rank > 2 in a graph with ranges keeps its bias Add
  // (FuseMatMulBias's Reshapes would fix the row count): the Add of a row
  // bias that alone reads it is claimed here instead, its bias added in the
  // epilogue, whatever the rows at each run.
  int out = n.outputs[0];
  if (!gemm && c.graph().dynamic() && NodeEpilogue(n).act == kernels::Act::kNone) {
    const int add_i = c.SoleReader(n.outputs[0]);
    const ir::Node* add = add_i >= 0 ? &c.node(add_i) : nullptr;
    if (add && add->domain.empty() && add->op_type == "Add" && add->inputs.size() == 2 && add->outputs.size() == 1 &&
        NodeEpilogue(*add).act == kernels::Act::kNone) {
      const int other = add->inputs[0] == n.outputs[0] ? add->inputs[1] : add->inputs[0];
      const ir::TensorData* row = other >= 0 ? c.value(other).constant.get() : nullptr;
      bool is_row = row && row->dtype == ir::DType::kF32 && !row->shape.empty() && row->shape.back() == nn &&
                    c.value(add->outputs[0]).shape == c.value(n.outputs[0]).shape;
      for (size_t d = 0; is_row && d + 1 < row->shape.size(); ++d) is_row = row->shape[d] == 1;
      if (is_row) {
        bias.assign(row->data<float>(), row->data<float>() + nn);
        out = add->outputs[0];
        c.Claim(add_i);
      }
    }
  }
  const float alpha = gemm ? n.GetFloat("alpha", 1.f) : 1.f;
  std::vector<float> src(b->data<float>(), b->data<float>() + b->numel());
  if (alpha != 1.f)
    for (float& x : src) x *= alpha;
  const int64_t ldb = trans_b ? 1 : nn, ldcol = trans_b ? k : 1;
  Params p;
  p.columns = nn;
  p.ep = NodeEpilogue(n);
  const int32_t pw = c.PackedWeights(n.name + ".w", kernels::PackGemmB(src.data(), k, nn, ldb, ldcol));
  const int32_t pb = bias.empty() ? -1 : c.Floats(n.name + ".b", bias);
  c.Emit(kOp, n.name, {c.Value(n.inputs[0]), pw, pb}, {c.Value(out)}, EncodeParams(p));
  return true;
}

uint64_t Flops(const CreateContext& c) {
  auto cfg = Resolve(c.attrs, c.inputs);
  if (!cfg.ok()) return 0;
  const double f = 2.0 * static_cast<double>(cfg.value().m) * static_cast<double>(cfg.value().n) *
                   static_cast<double>(cfg.value().k);
  return f > 0 && f < 1.8e19 ? static_cast<uint64_t>(f) : 0;
}

}  // namespace

OpDef DefineGemmPacked() {
  OpDef d = internal::LoweredOp(kOp, 2, 3, Infer, Create, Scratch);
  d.flops = Flops;
  d.traits = kTraitTakesActivation | kTraitFixedScratch;
  d.lowerings = {{"Gemm", 10, Lower, Applies}, {"MatMul", 10, Lower, Applies}};
  return d;
}

}  // namespace fcb::ops
