// FuseGelu: GELU as exporters write it before opset 20, x/2 * (1 + erf(x/√2)):
//
//   e = Erf(Div(x, √2) or Mul(x, 1/√2));  a = Add(e, 1)
//   y = Mul(Mul(x, a), 0.5)   (torch.onnx)
//     | Mul(Mul(x, 0.5), a)   | Mul(x, Mul(a, 0.5))   (operands in any order)
//
// becomes one Gelu(x) node (approximate "none"), which FuseActivations may
// then fold into the producing GEMM's epilogue (kernels::Act::kGelu), and
// which otherwise runs as one vectorized pass instead of five. Every
// intermediate must have no other use and not be a graph output; constants
// must be float scalars within 1e-6 of their value. The new node keeps the
// name of the node whose output it writes.
#include <cmath>

#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

bool Near(std::optional<float> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

// The operand of binary `n` other than `v` (-1 if `v` is not an operand).
int Other(const ir::Node& n, int v) {
  if (n.inputs.size() != 2) return -1;
  return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : -1;
}

}  // namespace

Status FuseGelu(ir::Graph& g) {
  const PatternMatcher m(g);
  std::vector<bool> erase(g.nodes.size(), false);
  std::vector<std::pair<size_t, ir::Node>> fused;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& erf = g.nodes[i];
    if (erf.op_type != "Erf" || !erf.domain.empty() || erf.inputs.size() != 1 || erf.outputs.size() != 1) continue;
    // x / √2
    const int d = erf.inputs[0];
    int x = -1;
    ir::Node* scale = m.Producer(d, "Div");
    if (scale && scale->inputs.size() == 2 && Near(m.ScalarConst(scale->inputs[1]), std::sqrt(2.0))) {
      x = scale->inputs[0];
    } else if ((scale = m.Producer(d, "Mul"))) {
      for (int k = 0; k < 2 && x < 0; ++k)
        if (scale->inputs.size() == 2 && Near(m.ScalarConst(scale->inputs[1 - k]), std::sqrt(0.5)))
          x = scale->inputs[k];
    }
    if (x < 0 || m.uses().IntermediateReaders(d) != 1 || g.values[x].dtype != ir::DType::kF32) continue;
    // 1 + erf
    ir::Node* add = m.OnlyConsumer(erf.outputs[0], "Add");
    if (!add || !Near(m.ScalarConst(Other(*add, erf.outputs[0])), 1.0)) continue;
    const int a = add->outputs[0];
    // x/2 * a, in one of three associations.
    std::vector<const ir::Node*> chain = {scale, &erf, add};
    const ir::Node* last = nullptr;
    if (ir::Node* p = m.OnlyConsumer(a, "Mul")) {
      const int o = Other(*p, a);
      if (o == x) {  // (x * a) * 0.5
        ir::Node* h = m.OnlyConsumer(p->outputs[0], "Mul");
        if (h && Near(m.ScalarConst(Other(*h, p->outputs[0])), 0.5)) chain.push_back(p), last = h;
      } else if (Near(m.ScalarConst(o), 0.5)) {  // x * (a * 0.5)
        ir::Node* h = m.OnlyConsumer(p->outputs[0], "Mul");
        if (h && Other(*h, p->outputs[0]) == x) chain.push_back(p), last = h;
      } else if (ir::Node* half = m.Producer(o, "Mul"); half && m.uses().IntermediateReaders(o) == 1) {  // (x * 0.5) * a
        const int hx = Other(*half, x);
        if (hx >= 0 && Near(m.ScalarConst(hx), 0.5)) chain.push_back(half), last = p;
      }
    }
    if (!last || g.values[last->outputs[0]].shape != g.values[x].shape) continue;
    chain.push_back(last);
    bool taken = false;
    for (const ir::Node* n : chain) taken = taken || erase[m.Index(n)];
    if (taken) continue;
    size_t pos = 0;
    for (const ir::Node* n : chain) {
      erase[m.Index(n)] = true;
      pos = std::max(pos, static_cast<size_t>(m.Index(n)));
    }
    ir::Node gelu;
    gelu.name = last->name;
    gelu.op_type = "Gelu";
    gelu.inputs = {x};
    gelu.outputs = {last->outputs[0]};
    fused.emplace_back(pos, std::move(gelu));
  }
  ReplaceNodes(g, erase, std::move(fused));
  return Status::Ok();
}

}  // namespace fcb::passes
