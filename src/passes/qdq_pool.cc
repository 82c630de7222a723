// ExactQdqGlobalAveragePool: DequantizeLinear -> GlobalAveragePool ->
// QuantizeLinear evaluated in integers (see passes.h for why and when).
#include <cmath>
#include <limits>

#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

constexpr int64_t kOnnxFloat = 1, kOnnxInt32 = 6;  // TensorProto element types (Cast "to")

constexpr auto IsQuantType = ir::IsInt8Type;

// A constant one-element float32 scale that is finite and positive.
bool ScalarScale(const ir::TensorData* t, float* s) {
  if (!t || t->dtype != ir::DType::kF32 || t->numel() != 1) return false;
  *s = t->data<float>()[0];
  return std::isfinite(*s) && *s > 0;
}

// A one-element constant zero point of type `want` (absent: 0, only when
// `allow_absent`), as int32.
bool ScalarZeroPoint(const ir::Graph& g, const ir::Node& n, size_t k, bool allow_absent, int32_t* zp) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) {
    *zp = 0;
    return allow_absent;
  }
  const ir::TensorData* t = ConstInput(g, n, k);
  if (!t || t->numel() != 1 || !IsQuantType(t->dtype)) return false;
  *zp = static_cast<int32_t>(t->GetInt(0));
  return true;
}

ir::Node MakeNode(const std::string& name, const char* op, std::vector<int> in, int out) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = {out};
  return n;
}

}  // namespace

Status ExactQdqGlobalAveragePool(ir::Graph& g) {
  // Matches are collected first (node indices stay valid), then the graph is rebuilt.
  struct Match {
    size_t pool, quant;
    std::vector<ir::Node> chain;  // replaces the pool node; the quantize node goes away
  };
  std::vector<Match> matches;
  const ir::UseIndex index(g);
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    const ir::Node& q = g.nodes[qi];
    if (!q.domain.empty() || q.op_type != "QuantizeLinear" || q.inputs.empty() || q.inputs[0] < 0) continue;
    const int pooled = q.inputs[0];
    const int pi = index.Producer(pooled);
    if (pi < 0 || index.SoleReader(pooled) < 0) continue;
    const ir::Node& pool = g.nodes[pi];
    if (!pool.domain.empty() || pool.op_type != "GlobalAveragePool" || pool.inputs[0] < 0) continue;
    const int di = index.Producer(pool.inputs[0]);
    if (di < 0) continue;
    const ir::Node& dq = g.nodes[di];
    if (!dq.domain.empty() || dq.op_type != "DequantizeLinear") continue;
    const int x = dq.inputs[0];
    // Copies: adding values below reallocates g.values.
    const ir::DType x_dtype = g.values[x].dtype;
    const ir::Shape x_shape = g.values[x].shape;
    if (!IsQuantType(x_dtype) || !g.values[x].has_shape || x_shape.size() < 3) continue;
    if (g.values[pool.inputs[0]].dtype != ir::DType::kF32) continue;
    float sx, sy;
    int32_t zx, zy;
    if (!ScalarScale(ConstInput(g, dq, 1), &sx) || !ScalarZeroPoint(g, dq, 2, true, &zx)) continue;
    if (!ScalarScale(ConstInput(g, q, 1), &sy) || !ScalarZeroPoint(g, q, 2, true, &zy)) continue;
    // The zero point's type is the output's; an absent one means uint8.
    if (q.inputs.size() > 2 && q.inputs[2] >= 0 && g.values[q.inputs[2]].dtype != g.values[q.outputs[0]].dtype)
      continue;
    int64_t n = 1;
    for (size_t d = 2; d < x_shape.size(); ++d) n *= x_shape[d];
    // The int32 sum cannot overflow (|x - zx| <= 255 per element).
    if (n <= 0 || n >= std::numeric_limits<int32_t>::max() / 256) continue;
    // ONNX Runtime's multiplier for QLinearGlobalAveragePool, in float32.
    const float m = sx / (sy * static_cast<float>(n));
    if (!std::isfinite(m) || m == 0) continue;

    const std::string base = pool.name.empty() ? g.values[pooled].name : pool.name;
    const std::string x_name = g.values[x].name;
    ir::Shape sum_shape = x_shape;
    for (size_t d = 2; d < sum_shape.size(); ++d) sum_shape[d] = 1;
    Match mt{static_cast<size_t>(pi), qi, {}};
    // Cast(x, int32)
    const int xi = NewValue(g, x_name + "_i32", ir::DType::kI32, x_shape);
    ir::Node cast = MakeNode(base + "/exact_cast_i32", "Cast", {x}, xi);
    cast.SetInt("to", kOnnxInt32);
    mt.chain.push_back(std::move(cast));
    // ReduceSum over the spatial axes, keepdims
    std::vector<int64_t> axes;
    for (size_t d = 2; d < x_shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    const int axes_v = g.AddConstant(g.UniqueName(base + "/exact_axes"),
                                     ir::TensorData::FromInts({static_cast<int64_t>(axes.size())}, axes));
    int acc = NewValue(g, base + "/exact_sum", ir::DType::kI32, sum_shape);
    mt.chain.push_back(MakeNode(base + "/exact_sum", "ReduceSum", {xi, axes_v}, acc));
    // - zx * n
    if (zx != 0) {
      auto bias = ir::TensorData::Make(ir::DType::kI32, {});
      bias->mutable_data<int32_t>()[0] = -zx * static_cast<int32_t>(n);
      const int bias_v = g.AddConstant(g.UniqueName(base + "/exact_bias"), bias);
      const int shifted = NewValue(g, base + "/exact_acc", ir::DType::kI32, sum_shape);
      mt.chain.push_back(MakeNode(base + "/exact_acc", "Add", {acc, bias_v}, shifted));
      acc = shifted;
    }
    // float(acc) * m
    const int accf = NewValue(g, base + "/exact_acc_f32", ir::DType::kF32, sum_shape);
    ir::Node castf = MakeNode(base + "/exact_cast_f32", "Cast", {acc}, accf);
    castf.SetInt("to", kOnnxFloat);
    mt.chain.push_back(std::move(castf));
    const int m_v = g.AddConstant(g.UniqueName(base + "/exact_multiplier"), ir::TensorData::FromFloats({}, {m}));
    const int scaled = NewValue(g, base + "/exact_scaled", ir::DType::kF32, sum_shape);
    mt.chain.push_back(MakeNode(base + "/exact_scaled", "Mul", {accf, m_v}, scaled));
    // QuantizeLinear(scaled, 1, zy): round half to even, add zy, saturate.
    const int one = g.AddConstant(g.UniqueName(base + "/exact_unit_scale"), ir::TensorData::FromFloats({}, {1.f}));
    std::vector<int> qin = {scaled, one};
    if (q.inputs.size() > 2 && q.inputs[2] >= 0) qin.push_back(q.inputs[2]);
    ir::Node requant = MakeNode(q.name.empty() ? base + "/exact_quantize" : q.name, "QuantizeLinear", qin,
                                q.outputs[0]);
    mt.chain.push_back(std::move(requant));
    matches.push_back(std::move(mt));
  }
  if (matches.empty()) return Status::Ok();
  std::vector<ir::Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::vector<int> role(old.size(), 0);  // 1: pool node, replaced by its chain; -1: quantize node, dropped
  std::vector<size_t> which(old.size(), 0);
  for (size_t k = 0; k < matches.size(); ++k) {
    role[matches[k].pool] = 1;
    which[matches[k].pool] = k;
    role[matches[k].quant] = -1;
  }
  for (size_t i = 0; i < old.size(); ++i) {
    if (role[i] == -1) continue;
    if (role[i] == 1) {
      for (ir::Node& n : matches[which[i]].chain) g.nodes.push_back(std::move(n));
      continue;
    }
    g.nodes.push_back(std::move(old[i]));
  }
  // The DequantizeLinear may now be dead; EliminateDeadNodes removes it.
  return Status::Ok();
}

}  // namespace fcb::passes
