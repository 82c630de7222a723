#include "passes/fuse_residual.h"

#include "ops/op.h"
#include "ops/params.h"
#include "passes/graph_util.h"

namespace fcb::passes {
namespace {

// A node of an op that takes a residual (input 3), without one and without
// an activation yet.
bool IsPlainConv(const ir::Node& n) {
  const ops::OpDef* def = ops::FindOp(n.op_type);
  return def && (def->traits & ops::kTraitTakesResidual) && (n.inputs.size() < 4 || n.inputs[3] < 0) &&
         ops::NodeEpilogue(n).act == kernels::Act::kNone && n.outputs.size() == 1;
}

}  // namespace

Status FuseResidualAdd(ir::Graph& g) {
  const ir::UseIndex index(g);

  std::vector<bool> erase(g.nodes.size(), false);
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    ir::Node& add = g.nodes[ai];
    if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const int a = add.inputs[0], b = add.inputs[1];
    if (a < 0 || b < 0 || a == b) continue;
    const ir::Value &va = g.values[a], &vb = g.values[b];
    if (va.is_constant() || vb.is_constant() || va.dtype != ir::DType::kF32 || vb.dtype != va.dtype ||
        va.shape.size() != 4 || va.shape != vb.shape || g.values[add.outputs[0]].shape != va.shape)
      continue;
    // Prefer the later producer: the other operand is then computed before it,
    // so it can become that conv's residual input where the conv stands.
    int conv_i = -1, residual = -1;
    for (int k = 0; k < 2; ++k) {
      const int y = add.inputs[k], r = add.inputs[1 - k];
      const int p = index.Producer(y);
      if (p < 0 || erase[p] || !IsPlainConv(g.nodes[p]) || index.SoleReader(y) < 0) continue;
      if (index.Producer(r) >= p) continue;  // r is not ready when the conv runs
      if (conv_i < 0 || p > conv_i) conv_i = p, residual = r;
    }
    if (conv_i < 0) continue;
    ir::Node& conv = g.nodes[conv_i];
    int out = add.outputs[0];
    erase[ai] = true;
    // A Relu that alone reads the sum becomes the conv's activation.
    const int ri = index.SoleReader(out);
    if (ri >= 0 && g.nodes[ri].op_type == "Relu" && g.nodes[ri].outputs.size() == 1) {
      ops::SetNodeEpilogue(&conv, kernels::Epilogue{kernels::Act::kRelu, 0.f, 0.f});
      erase[ri] = true;
      out = g.nodes[ri].outputs[0];
    }
    conv.inputs.resize(4, -1);
    conv.inputs[3] = residual;
    conv.outputs[0] = out;
  }
  EraseNodes(g, erase);
  return Status::Ok();
}

}  // namespace fcb::passes
