// FuseMatMulBias: MatMul(A, B) + c, as exporters write a Linear layer on an
// input of rank >= 2, becomes a Gemm with the bias as C, so the bias is added
// in the GEMM's epilogue (one pass over the output fewer):
//
//   y = MatMul(A [..., K], B [K, N] constant);  z = Add(y, c)   (c constant,
//       [N], [1, N], [1, 1, N], ...: a row broadcast over the last axis)
// becomes, for A of rank 2,
//   z = Gemm(A, B, c)
// and for A of rank > 2 (with Reshapes, which lowering turns into views)
//   A2 = Reshape(A, [M, K]);  z2 = Gemm(A2, B, c);  z = Reshape(z2, shape of z)
// When z's only reader is an activation FuseActivations can fold (Relu,
// Gelu, Sigmoid, ...), the activation moves before the final Reshape so that
// it follows the Gemm directly: z2 -> act -> Reshape. y must have no other
// reader and not be a graph output; everything is float32. The Gemm keeps
// the MatMul's name; the new nodes derive theirs from it.
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

// The bias vector `c` as a [N] constant when it broadcasts as a row of N
// over the last axis (every other dim 1); null otherwise.
ir::TensorPtr RowBias(const ir::TensorData* c, int64_t n) {
  if (!c || c->dtype != ir::DType::kF32 || c->shape.empty() || c->shape.back() != n) return nullptr;
  for (size_t d = 0; d + 1 < c->shape.size(); ++d)
    if (c->shape[d] != 1) return nullptr;
  auto row = std::make_shared<ir::TensorData>(*c);
  row->shape = {n};
  return row;
}

}  // namespace

Status FuseMatMulBias(ir::Graph& g) {
  const ir::UseIndex index(g);

  std::vector<bool> erase(g.nodes.size(), false);
  std::vector<std::pair<size_t, ir::Node>> replace;
  std::vector<std::vector<ir::Node>> before(g.nodes.size());  // nodes to put before node i
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& mm = g.nodes[i];
    if (!mm.domain.empty() || mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1 || erase[i])
      continue;
    const int a = mm.inputs[0], y = mm.outputs[0];
    // The Reshapes around the Gemm would fix sizes a range leaves open.
    if (g.dynamic() && a >= 0 && g.values[a].shape.size() > 2) continue;
    const ir::TensorData* b = ConstInput(g, mm, 1);
    if (a < 0 || g.values[a].is_constant() || g.values[a].dtype != ir::DType::kF32 || g.values[a].shape.size() < 2 ||
        !b || b->dtype != ir::DType::kF32 || b->shape.size() != 2)
      continue;
    const int add_i = index.SoleReader(y);
    if (add_i < 0 || erase[add_i] || IsGraphOutput(g, y)) continue;
    const ir::Node& add = g.nodes[add_i];
    if (!add.domain.empty() || add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const int c = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
    const int64_t n = b->shape[1], k = b->shape[0];
    ir::TensorPtr bias = c >= 0 ? RowBias(g.values[c].constant.get(), n) : nullptr;
    const int z = add.outputs[0];
    if (!bias || g.values[z].shape != g.values[y].shape) continue;

    const ir::Shape ys = g.values[y].shape;  // a copy: NewValue below may move the values
    const int64_t m = ir::NumElements(ys) / n;
    const bool rank2 = ys.size() == 2;
    ir::Node gemm;
    gemm.name = mm.name;
    gemm.op_type = "Gemm";
    gemm.inputs = {a, mm.inputs[1], g.AddConstant(g.UniqueName(mm.name + "/bias"), bias)};
    if (rank2) {
      gemm.outputs = {z};
      erase[i] = true;
      replace.emplace_back(add_i, std::move(gemm));
      erase[add_i] = true;
      continue;
    }
    auto shape_const = [&](const ir::Shape& s) {
      return g.AddConstant(g.UniqueName(mm.name + "/shape"),
                           ir::TensorData::FromInts({static_cast<int64_t>(s.size())}, s));
    };
    const int a2 = NewValue(g, g.values[a].name + "/rows", ir::DType::kF32, {m, k});
    ir::Node flat;
    flat.name = g.UniqueName(mm.name + "/rows");
    flat.op_type = "Reshape";
    flat.inputs = {a, shape_const({m, k})};
    flat.outputs = {a2};
    const int z2 = NewValue(g, g.values[z].name + "/rows", ir::DType::kF32, {m, n});
    gemm.inputs[0] = a2;
    gemm.outputs = {z2};
    // An activation reading only z moves between the Gemm and the Reshape.
    const int act_i = index.SoleReader(z);
    const bool act = act_i >= 0 && !erase[act_i] && !IsGraphOutput(g, z) &&
                     ActivationEpilogue(g, g.nodes[act_i]).act != kernels::Act::kNone &&
                     g.nodes[act_i].inputs[0] == z && g.values[g.nodes[act_i].outputs[0]].shape == ys;
    ir::Node back;
    back.name = g.UniqueName(mm.name + "/unrows");
    back.op_type = "Reshape";
    if (act) {
      ir::Node moved = g.nodes[act_i];
      const int za = NewValue(g, g.values[moved.outputs[0]].name + "/rows", ir::DType::kF32, {m, n});
      back.inputs = {za, shape_const(ys)};
      back.outputs = {moved.outputs[0]};
      moved.inputs[0] = z2;
      moved.outputs[0] = za;
      // Gemm and the activation where the MatMul was; the Reshape where the activation was.
      before[i].push_back(std::move(flat));
      before[i].push_back(std::move(gemm));
      replace.emplace_back(i, std::move(moved));
      replace.emplace_back(act_i, std::move(back));
      erase[i] = erase[add_i] = erase[act_i] = true;
    } else {
      back.inputs = {z2, shape_const(ys)};
      back.outputs = {z};
      before[i].push_back(std::move(flat));
      replace.emplace_back(i, std::move(gemm));
      replace.emplace_back(add_i, std::move(back));
      erase[i] = erase[add_i] = true;
    }
  }
  if (replace.empty()) return Status::Ok();
  // Rebuild in order: the extra nodes go right before their anchor's replacement.
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size() + 8);
  std::sort(replace.begin(), replace.end(), [](const auto& p, const auto& q) { return p.first < q.first; });
  size_t r = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (auto& extra : before[i]) nodes.push_back(std::move(extra));
    if (r < replace.size() && replace[r].first == i) nodes.push_back(std::move(replace[r++].second));
    else if (!erase[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
  return g.Validate();
}

}  // namespace fcb::passes
