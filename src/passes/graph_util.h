// Small graph-editing helpers shared by the passes (internal to passes/).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "kernels/kernels.h"

namespace fcb::passes {

// The activation node `n` computes, as a fused epilogue (Relu, Clip with
// constant bounds, Sigmoid, Tanh, HardSwish, HardSigmoid, LeakyRelu); kNone
// for anything else (fuse_activations.cc).
kernels::Epilogue ActivationEpilogue(const ir::Graph& g, const ir::Node& n);

inline bool IsGraphOutput(const ir::Graph& g, int id) {
  return std::find(g.outputs.begin(), g.outputs.end(), id) != g.outputs.end();
}
inline bool IsGraphInput(const ir::Graph& g, int id) {
  return std::find(g.inputs.begin(), g.inputs.end(), id) != g.inputs.end();
}

// Every node input reading `from` reads `to` instead (graph outputs untouched).
inline void ReplaceInputUses(ir::Graph& g, int from, int to) {
  for (auto& n : g.nodes)
    for (int& i : n.inputs)
      if (i == from) i = to;
}

// Removes the nodes flagged in `erase` (same length as g.nodes), keeping order.
inline void EraseNodes(ir::Graph& g, const std::vector<bool>& erase) {
  size_t w = 0;
  for (size_t r = 0; r < g.nodes.size(); ++r)
    if (!erase[r]) {
      if (w != r) g.nodes[w] = std::move(g.nodes[r]);
      ++w;
    }
  g.nodes.resize(w);
}

// Removes the nodes flagged in `erase` and puts each new node of `at` (position
// in g.nodes before the edit, node) in place of the node at that position,
// which must be one of the erased ones: a fused pattern replaced by one node
// where its last node was keeps the order topological.
inline void ReplaceNodes(ir::Graph& g, const std::vector<bool>& erase, std::vector<std::pair<size_t, ir::Node>> at) {
  std::sort(at.begin(), at.end(), [](const auto& p, const auto& q) { return p.first < q.first; });
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  size_t f = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (f < at.size() && at[f].first == i) nodes.push_back(std::move(at[f++].second));
    else if (!erase[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
}

// A new value named after `base` (made unique) with a static dtype and shape.
inline int NewValue(ir::Graph& g, const std::string& base, ir::DType dt, ir::Shape shape) {
  ir::Value v;
  v.name = g.UniqueName(base);
  v.dtype = dt;
  v.shape = std::move(shape);
  v.has_shape = true;
  return g.AddValue(std::move(v));
}

// The constant tensor of input `k` of `n`, or null (absent or not constant).
inline const ir::TensorData* ConstInput(const ir::Graph& g, const ir::Node& n, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return nullptr;
  return g.values[n.inputs[k]].constant.get();
}

// Pattern matching over ONNX-domain nodes, on the graph's use/producer index
// (ir::UseIndex): built once; values added afterwards (constants) are not
// indexed, and erasing nodes is left to the caller (EraseNodes).
class PatternMatcher {
 public:
  explicit PatternMatcher(const ir::Graph& g) : g_(g), index_(g) {}
  // The node producing `v` if it is an `op` node (ONNX domain), else null.
  ir::Node* Producer(int v, std::string_view op) const { return IfOp(index_.Producer(v), op); }
  // The one node reading `v` (v used once, by a node), if it is an `op` node.
  ir::Node* OnlyConsumer(int v, std::string_view op) const { return IfOp(index_.SoleReader(v), op); }
  int Index(const ir::Node* n) const { return static_cast<int>(n - g_.nodes.data()); }
  const ir::UseIndex& uses() const { return index_; }
  // The value of a one-element float constant, if `v` is one.
  std::optional<float> ScalarConst(int v) const {
    if (v < 0 || !g_.values[v].is_constant()) return std::nullopt;
    const ir::TensorData& t = *g_.values[v].constant;
    if (t.numel() != 1 || (t.dtype != ir::DType::kF32 && t.dtype != ir::DType::kF64)) return std::nullopt;
    return static_cast<float>(t.GetDouble(0));
  }

 private:
  ir::Node* IfOp(int node, std::string_view op) const {
    if (node < 0) return nullptr;
    ir::Node& n = const_cast<ir::Graph&>(g_).nodes[node];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  }
  const ir::Graph& g_;
  ir::UseIndex index_;
};

}  // namespace fcb::passes
