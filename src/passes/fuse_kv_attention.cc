// FuseKvCacheAttention (passes.h): a growing KV cache kept in place, and the
// attention that reads it as one step (docs/design.md section 14, form b).
//
// 1. Concat(past, new, axis 2) where `past` is a graph input named in
//    `past_inputs` (a state whose buffer holds `capacity` rows) becomes
//    KvAppend(past, new) {row_capacity}: the new rows written at the valid
//    length, in place (ops/internal/kv_append.cc).
// 2. Scaled dot-product attention as plain exporters write it:
//      scores = MatMul(Q, Transpose(K', perm 0 1 3 2)) [* c | / c]
//      probs  = Softmax(scores [+ mask], axis -1)
//      Y      = MatMul(probs, V')
//    where K' and V' are K and V [B, kv, T, D] or their grouped-head repeat
//    Unsqueeze(axis 2) -> Expand [B, kv, rep, T, D] -> Reshape [B, kv*rep,
//    T, D] (recognised by shapes), becomes AttentionFused(Q, K, V[, mask])
//    {scale, row_capacity} writing Y. Every intermediate must have no other
//    use. With `dense` false only attentions whose K and V are KvAppend
//    outputs are fused (they must be: the buffer is strided); with `dense`
//    true any match is.
// What the fused nodes leave unread is removed by EliminateDeadNodes.
#include <set>

#include "ops/names.h"
#include "ops/params.h"
#include "passes/graph_util.h"
#include "passes/passes.h"

namespace fcb::passes {
namespace {

using ir::Graph;
using ir::Node;

// The value `v` (K' or V') without its grouped-head repeat, with the repeat
// factor; v itself (rep 1) when it is not one.
int StripRepeat(const Graph& g, const PatternMatcher& m, int v, int64_t* rep) {
  *rep = 1;
  Node* reshape = m.Producer(v, "Reshape");
  if (!reshape) return v;
  Node* expand = m.Producer(reshape->inputs[0], "Expand");
  if (!expand || m.uses().IntermediateReaders(reshape->inputs[0]) != 1) return v;
  Node* unsq = m.Producer(expand->inputs[0], "Unsqueeze");
  if (!unsq || m.uses().IntermediateReaders(expand->inputs[0]) != 1) return v;
  const int k = unsq->inputs[0];
  const ir::Shape &ks = g.values[k].shape, &us = g.values[expand->inputs[0]].shape,
                  &es = g.values[reshape->inputs[0]].shape, &rs = g.values[v].shape;
  if (ks.size() != 4 || us != ir::Shape{ks[0], ks[1], 1, ks[2], ks[3]} || es.size() != 5 || es[0] != ks[0] ||
      es[1] != ks[1] || es[3] != ks[2] || es[4] != ks[3] || rs != ir::Shape{ks[0], ks[1] * es[2], ks[2], ks[3]})
    return v;
  *rep = es[2];
  return k;
}

bool IsF32(const Graph& g, int v) { return v >= 0 && g.values[v].dtype == ir::DType::kF32; }

}  // namespace

Status FuseKvCacheAttention(Graph& g, int64_t capacity, const std::set<std::string>& past_inputs, bool dense,
                            int* appends, int* fused) {
  int appends_local = 0, fused_local = 0;
  if (!appends) appends = &appends_local;
  if (!fused) fused = &fused_local;
  *appends = *fused = 0;
  // 1. The appends.
  for (Node& n : g.nodes) {
    if (n.op_type != "Concat" || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    const int past = n.inputs[0];
    if (past < 0 || !IsGraphInput(g, past) || !past_inputs.count(g.values[past].name)) continue;
    const int64_t rank = static_cast<int64_t>(g.values[n.outputs[0]].shape.size());
    const int64_t axis = n.GetInt("axis", 0);
    if (rank != 4 || (axis != 2 && axis != -2) || !IsF32(g, past)) continue;
    n.op_type = std::string(ops::opname::KvAppend);
    n.attrs.clear();
    n.SetInt(ops::attr::kRowCapacity, capacity);
    if (appends) ++*appends;
  }
  // 2. The attentions.
  PatternMatcher m(g);
  const auto& u = m.uses();
  auto sole = [&](int v) { return u.IntermediateReaders(v) == 1; };
  std::vector<std::pair<size_t, Node>> at;
  std::vector<bool> erase(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mm2 = g.nodes[i];
    if (mm2.op_type != "MatMul" || !mm2.domain.empty() || mm2.inputs.size() != 2) continue;
    const int probs = mm2.inputs[0];
    Node* sm = m.Producer(probs, "Softmax");
    if (!sm || !sole(probs)) continue;
    const int64_t axis = sm->GetInt("axis", -1);
    if ((axis != -1 && axis != 3) || g.values[probs].shape.size() != 4) continue;
    int x = sm->inputs[0], mask = -1;
    if (!sole(x)) continue;
    if (Node* add = m.Producer(x, "Add")) {
      // The operand that is the scaled MatMul is the scores; the other the mask.
      int s = -1;
      for (int k = 0; k < 2 && s < 0; ++k) {
        const int a = add->inputs[k];
        if (m.Producer(a, "Mul") || m.Producer(a, "Div") || m.Producer(a, "MatMul")) s = k;
      }
      if (s < 0) continue;
      mask = add->inputs[1 - s];
      x = add->inputs[s];
      if (!sole(x) || !IsF32(g, mask)) continue;
    }
    float scale = 1.f;
    if (Node* mul = m.Producer(x, "Mul")) {
      std::optional<float> c = m.ScalarConst(mul->inputs[1]);
      int k = 0;
      if (!c) c = m.ScalarConst(mul->inputs[0]), k = 1;
      if (!c || !sole(mul->inputs[k])) continue;
      scale = *c;
      x = mul->inputs[k];
    } else if (Node* div = m.Producer(x, "Div")) {
      std::optional<float> c = m.ScalarConst(div->inputs[1]);
      if (!c || *c == 0.f || !sole(div->inputs[0])) continue;
      scale = 1.f / *c;
      x = div->inputs[0];
    }
    Node* mm1 = m.Producer(x, "MatMul");
    if (!mm1 || mm1->inputs.size() != 2) continue;
    Node* tr = m.Producer(mm1->inputs[1], "Transpose");
    if (!tr || !sole(mm1->inputs[1]) || tr->GetInts("perm") != std::vector<int64_t>{0, 1, 3, 2}) continue;
    int64_t krep = 1, vrep = 1;
    const int k = StripRepeat(g, m, tr->inputs[0], &krep);
    const int v = StripRepeat(g, m, mm2.inputs[1], &vrep);
    const int q = mm1->inputs[0];
    const ir::Shape &qs = g.values[q].shape, &ks = g.values[k].shape, &vs = g.values[v].shape;
    if (!IsF32(g, q) || !IsF32(g, k) || !IsF32(g, v) || qs.size() != 4 || ks.size() != 4 || vs.size() != 4 ||
        krep != vrep || ks[1] * krep != qs[1] || vs[1] != ks[1] || vs[2] != ks[2] || ks[3] != qs[3] ||
        ks[0] != qs[0] || vs[0] != qs[0])
      continue;
    const Node* kp = u.Producer(k) >= 0 ? &g.nodes[u.Producer(k)] : nullptr;
    const Node* vp = u.Producer(v) >= 0 ? &g.nodes[u.Producer(v)] : nullptr;
    const bool kstate = kp && kp->op_type == ops::opname::KvAppend;
    const bool vstate = vp && vp->op_type == ops::opname::KvAppend;
    if (kstate != vstate || (!kstate && !dense)) continue;
    // A cache kept in place is fused only by the pass that made its appends.
    const auto rows = [](const Node* p) { return p->GetInt(ops::attr::kRowCapacity, 0); };
    if (kstate && (rows(kp) != capacity || rows(vp) != capacity)) continue;
    if (mask >= 0) {
      const ir::Shape& ms = g.values[mask].shape;
      if (ms.empty() || ms.size() > 4 || ms.back() != ks[2]) continue;
    }
    Node f;
    f.name = mm2.name.empty() ? g.UniqueName("attention_fused") : mm2.name + "/attention_fused";
    f.op_type = std::string(ops::opname::AttentionFused);
    f.inputs = {q, k, v};
    if (mask >= 0) f.inputs.push_back(mask);
    f.outputs = mm2.outputs;
    f.SetFloat(ops::attr::kScale, scale);
    f.SetInt(ops::attr::kRowCapacity, kstate ? capacity : 0);
    erase[i] = true;
    at.emplace_back(i, std::move(f));
    if (fused) ++*fused;
  }
  if (!at.empty()) ReplaceNodes(g, erase, std::move(at));
  if (*appends || *fused) FCB_RETURN_IF_ERROR(EliminateDeadNodes(g));
  return g.Validate().Annotate("after fusing KV cache attention");
}

}  // namespace fcb::passes
