// Small graph-editing helpers shared by the passes (internal to passes/).
#pragma once

#include <algorithm>
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

// The constant tensor of input `k` of `n`, or null (absent or not constant).
inline const ir::TensorData* ConstInput(const ir::Graph& g, const ir::Node& n, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return nullptr;
  return g.values[n.inputs[k]].constant.get();
}

}  // namespace fcb::passes
