// RemoveIdentities: nodes that pass their input through unchanged.
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

bool IsPassThrough(const ir::Graph& g, const ir::Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return false;
  if (n.op_type == "Identity" || n.op_type == "Dropout") return true;
  if (n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
      n.op_type == "Unsqueeze") {
    const ir::Value& in = g.values[n.inputs[0]];
    const ir::Value& out = g.values[n.outputs[0]];
    return in.has_shape && out.has_shape && in.shape == out.shape && in.dtype == out.dtype;
  }
  return false;
}

}  // namespace

Status RemoveIdentities(ir::Graph& g) {
  std::vector<bool> erase(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!IsPassThrough(g, n)) continue;
    const int x = n.inputs[0], y = n.outputs[0];
    if (!IsGraphOutput(g, y)) {
      ReplaceInputUses(g, y, x);
      erase[i] = true;
      continue;
    }
    // y is a graph output and must keep its name: let x's producer write y,
    // unless x is itself part of the graph's interface or a constant.
    if (IsGraphInput(g, x) || IsGraphOutput(g, x) || g.values[x].is_constant()) continue;
    const int p = ir::UseIndex(g).Producer(x);
    if (p < 0 || erase[p]) continue;
    for (int& o : g.nodes[p].outputs)
      if (o == x) o = y;
    ReplaceInputUses(g, x, y);  // includes n itself, which goes away
    erase[i] = true;
  }
  EraseNodes(g, erase);
  return Status::Ok();
}

}  // namespace fcb::passes
