// FoldBatchNorm: y = s * (x - mean) + bias with s = scale / sqrt(var + eps)
// is affine per channel, so a producer that is linear per output channel
// (Conv, Gemm, MatMul with constant weights) absorbs it: weights of output
// channel c are multiplied by s[c], the bias becomes s[c] * (b[c] - mean[c]) +
// bias[c]. Arithmetic is in double, rounded to float once.
#include <cmath>

#include "ops/names.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

bool IsF32(const ir::TensorData* t) { return t && t->dtype == ir::DType::kF32; }

struct BnParams {
  std::vector<double> s, shift;  // y = s * x + shift, per channel
};

// The BN as an affine map per channel, if its parameters are constant floats.
bool ReadBn(const ir::Graph& g, const ir::Node& bn, BnParams* p) {
  if (bn.inputs.size() != 5 || bn.outputs.size() != 1) return false;
  const ir::TensorData *scale = ConstInput(g, bn, 1), *bias = ConstInput(g, bn, 2),
                       *mean = ConstInput(g, bn, 3), *var = ConstInput(g, bn, 4);
  if (!IsF32(scale) || !IsF32(bias) || !IsF32(mean) || !IsF32(var)) return false;
  const int64_t c = scale->numel();
  if (bias->numel() != c || mean->numel() != c || var->numel() != c) return false;
  const double eps = bn.GetFloat("epsilon", 1e-5f);
  p->s.resize(c);
  p->shift.resize(c);
  for (int64_t i = 0; i < c; ++i) {
    p->s[i] = scale->GetDouble(i) / std::sqrt(var->GetDouble(i) + eps);
    p->shift[i] = bias->GetDouble(i) - mean->GetDouble(i) * p->s[i];
  }
  return true;
}

// new_bias[c] = s[c] * old_bias[c] + shift[c]  (old_bias null = zeros).
std::shared_ptr<ir::TensorData> FoldedBias(const BnParams& p, const std::vector<double>& old_bias) {
  const int64_t c = static_cast<int64_t>(p.s.size());
  auto t = ir::TensorData::Make(ir::DType::kF32, {c});
  for (int64_t i = 0; i < c; ++i)
    t->mutable_data<float>()[i] =
        static_cast<float>(p.s[i] * (old_bias.empty() ? 0.0 : old_bias[i]) + p.shift[i]);
  return t;
}

// Conv W [M, C/g, k...]: row m scaled by s[m].
bool FoldIntoConv(ir::Graph& g, ir::Node& conv, const BnParams& p) {
  const ir::TensorData* w = ConstInput(g, conv, 1);
  const int64_t m = static_cast<int64_t>(p.s.size());
  if (!IsF32(w) || w->shape.empty() || w->shape[0] != m) return false;
  const ir::TensorData* b = ConstInput(g, conv, 2);
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0 && (!IsF32(b) || b->numel() != m)) return false;
  auto nw = ir::TensorData::Make(ir::DType::kF32, w->shape);
  const int64_t per = w->numel() / m;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t k = 0; k < per; ++k)
      nw->mutable_data<float>()[r * per + k] =
          static_cast<float>(w->data<float>()[r * per + k] * p.s[r]);
  std::vector<double> ob;
  if (b)
    for (int64_t r = 0; r < m; ++r) ob.push_back(b->GetDouble(r));
  const std::string wname = g.values[conv.inputs[1]].name;
  conv.inputs[1] = g.AddConstant(wname + "_bn", nw);
  auto nb = FoldedBias(p, ob);
  conv.inputs.resize(3, -1);
  conv.inputs[2] = g.AddConstant(wname + "_bn_bias", nb);
  return true;
}

// Gemm Y = alpha * A' B' + beta * C with Y [M, N]: column n of B' scaled by
// s[n]; C must broadcast per column (scalar, [N] or [1, N]). A 2-D MatMul with
// constant B is Gemm with alpha = 1 and no C.
bool FoldIntoGemm(ir::Graph& g, ir::Node& mm, const BnParams& p) {
  const bool is_gemm = mm.op_type == "Gemm";
  const ir::TensorData* b = ConstInput(g, mm, 1);
  const int64_t n = static_cast<int64_t>(p.s.size());
  if (!IsF32(b) || b->shape.size() != 2) return false;
  if (!is_gemm && g.values[mm.inputs[0]].shape.size() != 2) return false;
  const bool trans_b = is_gemm && mm.GetInt("transB", 0) != 0;
  const int64_t rows = b->shape[0], cols = b->shape[1];
  if ((trans_b ? rows : cols) != n) return false;
  std::vector<double> oc;  // beta * C per column
  if (is_gemm && mm.inputs.size() > 2 && mm.inputs[2] >= 0) {
    const ir::TensorData* c = ConstInput(g, mm, 2);
    if (!IsF32(c)) return false;
    const double beta = mm.GetFloat("beta", 1.f);
    const bool per_col = c->numel() == n && (c->shape.size() == 1 || (c->shape.size() == 2 && c->shape[0] == 1));
    if (c->numel() != 1 && !per_col) return false;
    for (int64_t j = 0; j < n; ++j) oc.push_back(beta * c->GetDouble(c->numel() == 1 ? 0 : j));
  }
  auto nb = ir::TensorData::Make(ir::DType::kF32, b->shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k)
      nb->mutable_data<float>()[r * cols + k] =
          static_cast<float>(b->data<float>()[r * cols + k] * p.s[trans_b ? r : k]);
  const std::string bname = g.values[mm.inputs[1]].name;
  if (!is_gemm) {
    mm.op_type = "Gemm";
    mm.attrs.clear();
  }
  mm.inputs.resize(3, -1);
  mm.inputs[1] = g.AddConstant(bname + "_bn", nb);
  mm.inputs[2] = g.AddConstant(bname + "_bn_bias", FoldedBias(p, oc));
  mm.SetFloat("beta", 1.f);
  return true;
}

}  // namespace

Status FoldBatchNorm(ir::Graph& g) {
  std::vector<bool> erase(g.nodes.size(), false);
  const ir::UseIndex index(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& bn = g.nodes[i];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.empty()) continue;
    const int x = bn.inputs[0];
    const int p = index.Producer(x);
    if (p < 0 || index.SoleReader(x) < 0 || erase[p]) continue;
    ir::Node& prod = g.nodes[p];
    if (!prod.domain.empty() || prod.outputs.size() != 1 || prod.Has(ops::attr::kActivation)) continue;
    const ir::Value& xv = g.values[x];
    if (xv.dtype != ir::DType::kF32 || xv.shape.size() < 2) continue;
    BnParams params;
    if (!ReadBn(g, bn, &params) || static_cast<int64_t>(params.s.size()) != xv.shape[1]) continue;
    bool folded = false;
    if (prod.op_type == "Conv") folded = FoldIntoConv(g, prod, params);
    else if ((prod.op_type == "Gemm" || prod.op_type == "MatMul") && xv.shape.size() == 2)
      folded = FoldIntoGemm(g, prod, params);
    if (!folded) continue;
    prod.outputs[0] = bn.outputs[0];  // the producer writes BN's output value
    erase[i] = true;
  }
  EraseNodes(g, erase);
  return Status::Ok();
}

}  // namespace fcb::passes
