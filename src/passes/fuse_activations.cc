// FuseActivations: an elementwise activation applied to the output of a
// GEMM-like producer runs in that producer's epilogue, while the result is
// still in registers, instead of as a second pass over memory.
#include <limits>

#include "kernels/kernels.h"
#include "ops/op.h"
#include "ops/params.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {

kernels::Epilogue ActivationEpilogue(const ir::Graph& g, const ir::Node& n) {
  kernels::Epilogue a;
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1) return a;
  const std::string& op = n.op_type;
  if (op == "Relu") {
    a.act = kernels::Act::kRelu;
  } else if (op == "Sigmoid") {
    a.act = kernels::Act::kSigmoid;
  } else if (op == "Tanh") {
    a.act = kernels::Act::kTanh;
  } else if (op == "HardSwish") {
    a.act = kernels::Act::kHardSwish;
  } else if (op == "HardSigmoid") {
    a.act = kernels::Act::kHardSigmoid;
    a.a = n.GetFloat("alpha", 0.2f);
    a.b = n.GetFloat("beta", 0.5f);
  } else if (op == "LeakyRelu") {
    a.act = kernels::Act::kLeakyRelu;
    a.a = n.GetFloat("alpha", 0.01f);
  } else if (op == "Gelu" && n.GetString("approximate", "none") == "none") {
    a.act = kernels::Act::kGelu;
  } else if (op == "Clip") {
    // Absent bounds are infinite; non-constant bounds cannot be fused.
    const float inf = std::numeric_limits<float>::infinity();
    a.a = -inf;
    a.b = inf;
    for (size_t k = 1; k < n.inputs.size() && k <= 2; ++k) {
      if (n.inputs[k] < 0) continue;
      const ir::TensorData* t = ConstInput(g, n, k);
      if (!t || t->dtype != ir::DType::kF32 || t->numel() != 1) return kernels::Epilogue{};
      (k == 1 ? a.a : a.b) = t->data<float>()[0];
    }
    a.act = kernels::Act::kClip;
  }
  return a;
}

namespace {

// Whether node p runs with an epilogue in every form it may take: its op
// says so (kTraitTakesActivation), or a lowering rule for its op that always
// applies to p makes an op that does (Gemm/MatMul with constant B become
// GemmPacked; the variable-operand kernels have no epilogue).
bool CanTakeEpilogue(const ir::Graph& g, const ir::Node& p) {
  if (!p.domain.empty() || p.outputs.size() != 1) return false;
  if (ops::NodeEpilogue(p).act != kernels::Act::kNone) return false;
  const ops::OpDef* def = ops::FindOp(p.op_type);
  if (def && (def->traits & ops::kTraitTakesActivation)) return true;
  for (const ops::OpDef& d : ops::AllOps())
    for (const auto& l : d.lowerings)
      if (l.from == p.op_type && l.carries_activation && l.carries_activation(g, p) &&
          (d.traits & ops::kTraitTakesActivation))
        return true;
  return false;
}

void SetEpilogue(ir::Node& prod, const kernels::Epilogue& a, int output) {
  ops::SetNodeEpilogue(&prod, a);
  prod.outputs[0] = output;
}

// SiLU as exported: Mul(x, Sigmoid(x)) with x used by exactly those two nodes.
void FuseSilu(ir::Graph& g, const ir::UseIndex& index,
              std::vector<bool>& erase) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& mul = g.nodes[i];
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || mul.outputs.size() != 1)
      continue;
    for (int which = 0; which < 2; ++which) {
      const int sig_out = mul.inputs[which], x = mul.inputs[1 - which];
      if (sig_out < 0 || x < 0 || index.Producer(sig_out) < 0 || index.Producer(x) < 0) continue;
      const int ps = index.Producer(sig_out), px = index.Producer(x);
      const ir::Node& sig = g.nodes[ps];
      if (erase[ps] || erase[px] || sig.op_type != "Sigmoid" || !sig.domain.empty() ||
          sig.inputs.size() != 1 || sig.inputs[0] != x)
        continue;
      if (index.IntermediateReaders(sig_out) != 1 || index.IntermediateReaders(x) != 2 || g.values[x].dtype != ir::DType::kF32) continue;
      if (!CanTakeEpilogue(g, g.nodes[px])) continue;
      SetEpilogue(g.nodes[px], kernels::Epilogue{kernels::Act::kSilu, 0.f, 0.f}, mul.outputs[0]);
      erase[ps] = erase[i] = true;
      break;
    }
  }
}

}  // namespace

Status FuseActivations(ir::Graph& g) {
  std::vector<bool> erase(g.nodes.size(), false);
  const ir::UseIndex index(g);
  FuseSilu(g, index, erase);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (erase[i]) continue;
    const ir::Node& act_node = g.nodes[i];
    const kernels::Epilogue a = ActivationEpilogue(g, act_node);
    if (a.act == kernels::Act::kNone) continue;
    const int x = act_node.inputs[0];
    const int p = index.Producer(x);
    if (p < 0 || erase[p] || index.SoleReader(x) < 0 || g.values[x].dtype != ir::DType::kF32) continue;
    ir::Node& prod = g.nodes[p];
    if (!CanTakeEpilogue(g, prod)) continue;
    SetEpilogue(prod, a, act_node.outputs[0]);
    erase[i] = true;
  }
  EraseNodes(g, erase);
  return Status::Ok();
}

}  // namespace fcb::passes
