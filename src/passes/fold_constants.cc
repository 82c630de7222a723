// FoldConstants: the import-time folding rule, applied again after passes.
#include <algorithm>

#include "ops/op.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

constexpr int64_t kMaxFoldElements = int64_t{16} << 20;  // as in import

// Evaluates `n` if every input is constant; true if it was folded.
Result<bool> TryFold(ir::Graph& g, const ir::Node& n) {
  bool any_input = false;
  std::vector<const ir::TensorData*> consts;
  for (int i : n.inputs) {
    if (i < 0) {
      consts.push_back(nullptr);
      continue;
    }
    if (!g.values[i].is_constant()) return false;
    any_input = true;
    consts.push_back(g.values[i].constant.get());
  }
  if (!any_input) return false;
  for (int o : n.outputs)
    if (ir::NumElements(g.values[o].shape) > kMaxFoldElements) return false;
  auto out = ops::Evaluate(n.op_type, ops::AttrsFromNode(n), consts,
                           static_cast<int>(n.outputs.size()));
  if (!out.ok()) {
    // Kept as a node when the generic kernels cannot evaluate it.
    if (out.status().code() == StatusCode::kUnsupported) return false;
    return out.TakeStatus().Annotate(n.Describe() + ": constant folding");
  }
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    ir::Value& v = g.values[n.outputs[k]];
    v.dtype = out.value()[k]->dtype;
    v.shape = out.value()[k]->shape;
    v.has_shape = true;
    v.constant = std::move(out.value()[k]);
  }
  return true;
}

}  // namespace

Status FoldConstants(ir::Graph& g, bool keep_weight_dequantize) {
  std::vector<bool> folded(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!g.nodes[i].domain.empty()) continue;  // internal ops are lowering's business
    if (keep_weight_dequantize && ir::IsWeightDequantize(g, g.nodes[i])) continue;
    FCB_ASSIGN_OR_RETURN(folded[i], TryFold(g, g.nodes[i]));
  }
  EraseNodes(g, folded);
  return Status::Ok();
}

}  // namespace fcb::passes
