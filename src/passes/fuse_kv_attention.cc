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
//    use (a Shape reading one is not counted: it reads no data).
//    The batched-matrix form (Hugging Face's Whisper, BART, ...) is the same
//    attention: Q, K and V reshaped from [B, H, ., .] to [B*H, ., .], K
//    transposed by perm 0 2 1, the scores reshaped to [B, H, S, T] for the
//    mask and back, and the [B*H, S, Dv] result reshaped to [B, H, S, Dv]
//    (then Y is that Reshape's output). Reshapes that only merge or split
//    the leading (batch, head) dims, keeping the last two, are seen through
//    anywhere along the pattern: a row-major tensor's bytes are the same. With `dense` false only attentions whose K and V are KvAppend
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

// Whether a Reshape from `a` to `b` only merges or splits the leading dims
// (rank 3 or 4, the last two dims kept): [B, H, X, Y] <-> [B*H, X, Y].
bool IsHeadView(const ir::Shape& a, const ir::Shape& b) {
  if (a.size() < 3 || a.size() > 4 || b.size() < 3 || b.size() > 4) return false;
  if (a[a.size() - 1] != b[b.size() - 1] || a[a.size() - 2] != b[b.size() - 2]) return false;
  int64_t pa = 1, pb = 1;
  for (size_t i = 0; i + 2 < a.size(); ++i) pa *= a[i];
  for (size_t i = 0; i + 2 < b.size(); ++i) pb *= b[i];
  return pa == pb && pa > 0;
}

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
  // 2. The attentions. Nodes nothing reads (an exporter's attention-map
  // outputs the spec dropped, with the Identity copying them out) would count
  // as uses: removed first.
  FCB_RETURN_IF_ERROR(EliminateDeadNodes(g));
  PatternMatcher m(g);
  const auto& u = m.uses();
  // Readers that are Shape nodes read no data; exporters compute the view
  // reshapes' targets from them (they die with the pattern).
  std::vector<int> shape_readers(g.values.size(), 0);
  for (const Node& n : g.nodes)
    if (n.op_type == "Shape" && n.domain.empty() && !n.inputs.empty() && n.inputs[0] >= 0) ++shape_readers[n.inputs[0]];
  auto sole = [&](int v) { return v >= 0 && u.IntermediateReaders(v) - shape_readers[v] == 1; };
  // `v` seen through view Reshapes (IsHeadView); every value passed on the
  // way (not `v` itself, which the caller checks) must have no other use.
  auto through = [&](int v) {
    for (int cur = v;;) {
      Node* r = m.Producer(cur, "Reshape");
      if (!r || r->inputs.empty() || !IsHeadView(g.values[r->inputs[0]].shape, g.values[cur].shape) ||
          (cur != v && !sole(cur)))
        return cur;
      cur = r->inputs[0];
    }
  };
  std::vector<std::pair<size_t, Node>> at;
  std::vector<bool> erase(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mm2 = g.nodes[i];
    if (mm2.op_type != "MatMul" || !mm2.domain.empty() || mm2.inputs.size() != 2 || mm2.outputs.size() != 1) continue;
    if (!sole(mm2.inputs[0])) continue;
    const int probs = through(mm2.inputs[0]);
    Node* sm = m.Producer(probs, "Softmax");
    if (!sm || !sole(probs)) continue;
    const int64_t axis = sm->GetInt("axis", -1);
    const int64_t prank = static_cast<int64_t>(g.values[probs].shape.size());
    if ((axis != -1 && axis != prank - 1) || prank < 3 || prank > 4) continue;
    int x = sm->inputs[0], mask = -1, mask_rank = 4;
    if (!sole(x)) continue;
    x = through(x);
    if (Node* add = m.Producer(x, "Add")) {
      // The operand that is the scaled MatMul is the scores; the other the mask.
      if (!sole(x)) continue;
      int s = -1;
      for (int k = 0; k < 2 && s < 0; ++k) {
        const int a = through(add->inputs[k]);
        if (m.Producer(a, "Mul") || m.Producer(a, "Div") || m.Producer(a, "MatMul")) s = k;
      }
      if (s < 0) continue;
      mask = add->inputs[1 - s];
      mask_rank = static_cast<int>(g.values[x].shape.size());
      x = add->inputs[s];
      if (!sole(x) || !IsF32(g, mask)) continue;
      x = through(x);
    }
    float scale = 1.f;
    if (Node* mul = m.Producer(x, "Mul")) {
      if (!sole(x)) continue;
      std::optional<float> c = m.ScalarConst(mul->inputs[1]);
      int k = 0;
      if (!c) c = m.ScalarConst(mul->inputs[0]), k = 1;
      if (!c || !sole(mul->inputs[k])) continue;
      scale = *c;
      x = through(mul->inputs[k]);
    } else if (Node* div = m.Producer(x, "Div")) {
      if (!sole(x)) continue;
      std::optional<float> c = m.ScalarConst(div->inputs[1]);
      if (!c || *c == 0.f || !sole(div->inputs[0])) continue;
      scale = 1.f / *c;
      x = through(div->inputs[0]);
    }
    Node* mm1 = m.Producer(x, "MatMul");
    if (!mm1 || mm1->inputs.size() != 2 || !sole(x)) continue;
    // K transposed: [B, H, D, T] by perm 0 1 3 2, or [B*H, D, T] by perm 0 2 1.
    if (!sole(mm1->inputs[1])) continue;
    const int kt = through(mm1->inputs[1]);
    Node* tr = m.Producer(kt, "Transpose");
    if (!tr || !sole(kt)) continue;
    const std::vector<int64_t> perm = tr->GetInts("perm");
    if (perm != std::vector<int64_t>{0, 1, 3, 2} && perm != std::vector<int64_t>{0, 2, 1}) continue;
    if (perm.size() == 3 && !sole(tr->inputs[0])) continue;
    int64_t krep = 1, vrep = 1;
    const int k = StripRepeat(g, m, perm.size() == 3 ? through(tr->inputs[0]) : tr->inputs[0], &krep);
    if (mm2.inputs[1] != through(mm2.inputs[1]) && !sole(mm2.inputs[1])) continue;
    const int v = StripRepeat(g, m, through(mm2.inputs[1]), &vrep);
    if (mm1->inputs[0] != through(mm1->inputs[0]) && !sole(mm1->inputs[0])) continue;
    const int q = through(mm1->inputs[0]);
    const ir::Shape &qs = g.values[q].shape, &ks = g.values[k].shape, &vs = g.values[v].shape;
    if (!IsF32(g, q) || !IsF32(g, k) || !IsF32(g, v) || qs.size() != 4 || ks.size() != 4 || vs.size() != 4 ||
        krep != vrep || ks[1] * krep != qs[1] || vs[1] != ks[1] || vs[2] != ks[2] || ks[3] != qs[3] ||
        ks[0] != qs[0] || vs[0] != qs[0])
      continue;
    // Y: MatMul's output when it is [B, H, S, Dv]; a [B*H, S, Dv] result is
    // Y through the one Reshape to [B, H, S, Dv] that reads it.
    const ir::Shape y4{qs[0], qs[1], qs[2], vs[3]};
    size_t y_node = i;
    std::vector<int> y_outputs = mm2.outputs;
    if (g.values[mm2.outputs[0]].shape != y4) {
      const int r = u.SoleReader(mm2.outputs[0]);
      if (r < 0 || !IsHeadView(g.values[mm2.outputs[0]].shape, y4)) continue;
      const Node& rn = g.nodes[r];
      if (rn.op_type != "Reshape" || !rn.domain.empty() || rn.outputs.size() != 1 || g.values[rn.outputs[0]].shape != y4)
        continue;
      y_node = static_cast<size_t>(r);
      y_outputs = rn.outputs;
    }
    // A mask added to [B*H, S, T] scores broadcasts over B*H as one dim:
    // the same as over [B, H] only when its leading dim is 1 or B is 1.
    if (mask >= 0 && mask_rank == 3) {
      const ir::Shape& ms = g.values[mask].shape;
      if (ms.size() == 3 && ms[0] != 1 && qs[0] != 1) continue;
    }
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
    f.outputs = y_outputs;
    f.SetFloat(ops::attr::kScale, scale);
    f.SetInt(ops::attr::kRowCapacity, kstate ? capacity : 0);
    erase[i] = true;
    erase[y_node] = true;
    at.emplace_back(i, std::move(f));
    if (fused) ++*fused;
  }
  if (!at.empty()) ReplaceNodes(g, erase, std::move(at));
  if (*appends || *fused) FCB_RETURN_IF_ERROR(EliminateDeadNodes(g));
  return g.Validate().Annotate("after fusing KV cache attention");
}

}  // namespace fcb::passes
