// FuseLayerNorm: the layer normalization exporters write at opsets before 17,
//
//   m = ReduceMean(x, last axis)      d = Sub(x, m)
//   v = ReduceMean(Pow(d, 2) or Mul(d, d), last axis)
//   y = Div(d, Sqrt(Add(v, eps)))    [y = Mul(y, gamma)] [y = Add(y, beta)]
//
// (torch.onnx writes Pow; hand-built graphs often Mul), becomes one
// LayerNormalization(x, gamma or ones, beta, axis = -1, epsilon = eps): one
// pass over each row instead of seven over the whole tensor. Matched only
// when every intermediate value has no other use and is not a graph output,
// both means are over the last axis only with keepdims, eps is a constant
// scalar, and gamma/beta are float32 constants that vary along the last axis
// only. The new node keeps the name of the node whose output it writes.
#include <algorithm>

#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

// ReduceMean over the last axis only, keepdims, of a float32 value.
bool LastAxisMean(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.empty() || n.outputs.size() != 1 || n.GetInt("keepdims", 1) != 1) return false;
  const ir::Value& x = g.values[n.inputs[0]];
  if (x.dtype != ir::DType::kF32 || x.shape.empty()) return false;
  std::vector<int64_t> axes = n.GetInts("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {  // opset 18: axes as a constant input
    const ir::TensorData* t = ConstInput(g, n, 1);
    if (!t) return false;
    axes = t->ToInts();
  }
  const int64_t r = static_cast<int64_t>(x.shape.size());
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == r - 1);
}

// A float32 constant of numel d varying along the last axis only ([d] or
// [1, ..., 1, d]); its values as a [d] tensor.
ir::TensorPtr PerLastAxis(const ir::Graph& g, int v, int64_t d) {
  if (v < 0 || !g.values[v].is_constant()) return nullptr;
  const ir::TensorData& t = *g.values[v].constant;
  if (t.dtype != ir::DType::kF32 || t.numel() != d || t.shape.empty() || t.shape.back() != d) return nullptr;
  return ir::TensorData::FromFloats({d}, std::vector<float>(t.data<float>(), t.data<float>() + d));
}

}  // namespace

Status FuseLayerNorm(ir::Graph& g) {
  PatternMatcher m(g);
  std::vector<bool> erase(g.nodes.size(), false);
  std::vector<std::pair<size_t, ir::Node>> fused;  // (position of the last matched node, new node)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& div = g.nodes[i];
    if (div.op_type != "Div" || div.inputs.size() != 2 || div.outputs.size() != 1 || erase[i]) continue;
    const int d = div.inputs[0], s = div.inputs[1];
    ir::Node* sub = m.Producer(d, "Sub");
    ir::Node* sqrt = m.Producer(s, "Sqrt");
    if (!sub || !sqrt || m.uses().IntermediateReaders(s) != 1 || sub->inputs.size() != 2) continue;
    ir::Node* add_eps = m.Producer(sqrt->inputs[0], "Add");
    if (!add_eps || m.uses().IntermediateReaders(sqrt->inputs[0]) != 1 || add_eps->inputs.size() != 2) continue;
    int v = add_eps->inputs[0];
    std::optional<float> eps = m.ScalarConst(add_eps->inputs[1]);
    if (!eps) {
      v = add_eps->inputs[1];
      eps = m.ScalarConst(add_eps->inputs[0]);
    }
    if (!eps || !(*eps >= 0)) continue;
    ir::Node* var = m.Producer(v, "ReduceMean");
    if (!var || m.uses().IntermediateReaders(v) != 1 || !LastAxisMean(g, *var)) continue;
    const int sq = var->inputs[0];
    ir::Node* square = m.Producer(sq, "Mul");
    if (square && !(square->inputs.size() == 2 && square->inputs[0] == d && square->inputs[1] == d)) square = nullptr;
    if (!square) {
      square = m.Producer(sq, "Pow");
      if (square && !(square->inputs.size() == 2 && square->inputs[0] == d && m.ScalarConst(square->inputs[1]) == 2.0f))
        square = nullptr;
    }
    // d feeds the square (once as Pow's base, twice as both Mul operands) and the Div.
    const int d_uses = square && square->op_type == "Mul" ? 3 : 2;
    if (!square || m.uses().IntermediateReaders(sq) != 1 || m.uses().IntermediateReaders(d) != d_uses) continue;
    const int x = sub->inputs[0], mean = sub->inputs[1];
    ir::Node* mean_node = m.Producer(mean, "ReduceMean");
    if (!mean_node || m.uses().IntermediateReaders(mean) != 1 || mean_node->inputs[0] != x || !LastAxisMean(g, *mean_node)) continue;
    const ir::Value& xv = g.values[x];
    const int64_t D = xv.shape.back();
    if (D <= 0 || g.values[div.outputs[0]].shape != xv.shape) continue;
    std::vector<const ir::Node*> chain = {mean_node, sub, square, var, add_eps, sqrt, &div};
    int out = div.outputs[0];
    ir::TensorPtr gamma, beta;
    // Optional affine tail: the one consumer of the output, times gamma, then plus beta.
    auto tail = [&](std::string_view op, ir::TensorPtr* param) {
      const ir::Node* c = m.OnlyConsumer(out, op);
      if (!c || c->inputs.size() != 2 || c->outputs.size() != 1) return;
      const int other = c->inputs[0] == out ? c->inputs[1] : c->inputs[0];
      ir::TensorPtr t = PerLastAxis(g, other, D);
      if (!t || g.values[c->outputs[0]].shape != xv.shape) return;
      *param = std::move(t);
      chain.push_back(c);
      out = c->outputs[0];
    };
    tail("Mul", &gamma);
    tail("Add", &beta);
    size_t last = 0;
    for (const ir::Node* n : chain) {
      erase[m.Index(n)] = true;
      last = std::max(last, static_cast<size_t>(m.Index(n)));
    }
    const std::string base = g.nodes[last].name;
    if (!gamma) {
      std::vector<float> ones(static_cast<size_t>(D), 1.0f);
      gamma = ir::TensorData::FromFloats({D}, ones);
    }
    ir::Node ln;
    ln.name = base;
    ln.op_type = "LayerNormalization";
    ln.inputs = {x, g.AddConstant(base + "/scale", gamma)};
    if (beta) ln.inputs.push_back(g.AddConstant(base + "/bias", beta));
    ln.outputs = {out};
    ln.SetInt("axis", -1);
    ln.SetFloat("epsilon", *eps);
    fused.emplace_back(last, std::move(ln));
  }
  ReplaceNodes(g, erase, std::move(fused));
  return Status::Ok();
}

}  // namespace fcb::passes
