// EliminateDeadNodes: drops unused nodes, then compacts the value table.
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {

Status EliminateDeadNodes(ir::Graph& g) {
  // Reverse order: a node's consumers are decided before the node itself, so
  // whole dead chains go in one sweep.
  std::vector<int> uses = g.UseCounts();  // decremented as readers go
  std::vector<bool> erase(g.nodes.size(), false);
  for (size_t r = g.nodes.size(); r-- > 0;) {
    const ir::Node& n = g.nodes[r];
    bool used = false;
    for (int o : n.outputs) used = used || (o >= 0 && uses[o] > 0);
    if (used) continue;
    erase[r] = true;
    for (int i : n.inputs)
      if (i >= 0) uses[i]--;
  }
  EraseNodes(g, erase);

  // Keep values that a node, graph input or graph output refers to.
  std::vector<bool> keep(g.values.size(), false);
  for (int i : g.inputs) keep[i] = true;
  for (int o : g.outputs) keep[o] = true;
  for (const auto& n : g.nodes) {
    for (int i : n.inputs)
      if (i >= 0) keep[i] = true;
    for (int o : n.outputs)
      if (o >= 0) keep[o] = true;
  }
  std::vector<int> remap(g.values.size(), -1);
  std::vector<ir::Value> values;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!keep[v]) continue;
    remap[v] = static_cast<int>(values.size());
    values.push_back(std::move(g.values[v]));
  }
  g.values = std::move(values);
  auto fix = [&remap](int& id) {
    if (id >= 0) id = remap[id];
  };
  for (int& i : g.inputs) fix(i);
  for (int& o : g.outputs) fix(o);
  for (auto& n : g.nodes) {
    for (int& i : n.inputs) fix(i);
    for (int& o : n.outputs) fix(o);
  }
  return Status::Ok();
}

}  // namespace fcb::passes
