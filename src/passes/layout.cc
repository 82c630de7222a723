#include "passes/layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "ops/lowering.h"
#include "passes/passes.h"
#include "ops/names.h"
#include "ops/op.h"

namespace fcb::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Shape;

const int64_t kToNhwc[4] = {0, 2, 3, 1};  // physical dim i = logical dim kToNhwc[i]
const int64_t kToNchw[4] = {0, 3, 1, 2};

Shape Permute(const Shape& s, const int64_t* perm) {
  return {s[perm[0]], s[perm[1]], s[perm[2]], s[perm[3]]};
}

uint32_t Traits(const std::string& op) {
  const ops::OpDef* d = ops::FindOp(op);
  return d ? d->traits : ops::kTraitNone;
}

// The NHWC forms registered for each ONNX op (OpDef::layouts).
const std::map<std::string, ops::LayoutFn, std::less<>>& LayoutRules() {
  static const auto kRules = [] {
    std::map<std::string, ops::LayoutFn, std::less<>> m;
    for (const ops::OpDef& d : ops::AllOps())
      for (const auto& l : d.layouts) m[std::string(l.from)] = l.fn;
    return m;
  }();
  return kRules;
}

class LayoutRewriter final : public ops::LayoutContext {
 public:
  explicit LayoutRewriter(Graph& g) : g_(g), nhwc_(g.values.size(), false) {
    for (const auto& v : g.values) logical_.push_back(v.shape);
  }

  // ops::LayoutContext
  const Graph& graph() const override { return g_; }
  bool IsNhwc(int v) const override { return v >= 0 && v < static_cast<int>(nhwc_.size()) && nhwc_[v]; }
  int ToNhwc(int v) override { return Convert(v, true); }
  Shape LogicalShape(int v) const override {
    if (v < static_cast<int>(logical_.size())) return logical_[v];
    return IsNhwc(v) ? Permute(g_.values[v].shape, kToNchw) : g_.values[v].shape;
  }
  void EmitNhwc(Node n) override {
    MarkNhwc(n.outputs[0]);
    g_.nodes.push_back(std::move(n));
  }

  Status Run() {
    std::vector<Node> old = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& n : old) {
      const std::string where = n.Describe();
      FCB_RETURN_IF_ERROR(Rewrite(std::move(n)).Annotate(where));
    }
    // Every layout decision agrees with plain NCHW shape inference: a value
    // now NHWC holds its logical shape permuted, any other value keeps it.
    for (size_t v = 0; v < logical_.size(); ++v) {
      if (g_.values[v].shape.size() != 4 && !IsNhwc(static_cast<int>(v))) continue;
      const Shape want = IsNhwc(static_cast<int>(v)) ? Permute(logical_[v], kToNhwc) : logical_[v];
      if (g_.values[v].shape != want)
        return Internal("layout: value '" + g_.values[v].name + "' has shape " + ir::ShapeToString(g_.values[v].shape) +
                        ", but its NCHW shape " + ir::ShapeToString(logical_[v]) + " implies " +
                        ir::ShapeToString(want));
    }
    // Graph outputs return to NCHW under their original names.
    for (int& o : g_.outputs) {
      if (!IsNhwc(o)) continue;
      const int nchw = Convert(o, false);
      std::swap(g_.values[o].name, g_.values[nchw].name);
      o = nchw;
    }
    return Status::Ok();
  }

 private:
  bool IsRank4Var(int v) const {
    return v >= 0 && !g_.values[v].is_constant() && g_.values[v].shape.size() == 4;
  }

  // Returns a value holding `v` in the requested layout, adding a Transpose once.
  int Convert(int v, bool to_nhwc) {
    if (IsNhwc(v) == to_nhwc) return v;
    auto& cache = to_nhwc ? to_nhwc_ : to_nchw_;
    if (auto it = cache.find(v); it != cache.end()) return it->second;
    ir::Value nv;
    nv.name = g_.UniqueName(g_.values[v].name + (to_nhwc ? "_nhwc" : "_nchw"));
    nv.dtype = g_.values[v].dtype;
    nv.shape = Permute(g_.values[v].shape, to_nhwc ? kToNhwc : kToNchw);
    nv.has_shape = true;
    const int id = g_.AddValue(std::move(nv));
    nhwc_.resize(g_.values.size(), false);
    nhwc_[id] = to_nhwc;
    Node t;
    t.name = g_.values[id].name;
    t.op_type = "Transpose";
    t.inputs = {v};
    t.outputs = {id};
    t.SetInts("perm", to_nhwc ? std::vector<int64_t>(kToNhwc, kToNhwc + 4)
                              : std::vector<int64_t>(kToNchw, kToNchw + 4));
    g_.nodes.push_back(std::move(t));
    cache[v] = id;
    return id;
  }

  void MarkNhwc(int v) {
    nhwc_.resize(g_.values.size(), false);  // values added since (constants, temporaries) are NCHW
    g_.values[v].shape = Permute(g_.values[v].shape, kToNhwc);
    nhwc_[v] = true;
  }

  // A constant broadcast operand of an elementwise op, made 4-D and permuted.
  Result<int> PermuteConstant(int v) {
    const auto& src = *g_.values[v].constant;
    if (src.shape.size() > 4) return Unsupported("constant of rank > 4");
    Shape s4(4 - src.shape.size(), 1);
    s4.insert(s4.end(), src.shape.begin(), src.shape.end());
    if (src.shape.size() <= 1 && (src.shape.empty() || src.shape[0] == 1)) return v;  // scalar-like
    auto dst = ir::TensorData::Make(src.dtype, Permute(s4, kToNhwc));
    const size_t es = ir::DTypeSize(src.dtype);
    const Shape& p = dst->shape;
    int64_t i = 0;
    for (int64_t a = 0; a < p[0]; ++a)
      for (int64_t b = 0; b < p[1]; ++b)
        for (int64_t c = 0; c < p[2]; ++c)
          for (int64_t d = 0; d < p[3]; ++d, ++i) {
            // physical (a, b=h, c=w, d=ch) -> logical (a, d, b, c)
            const int64_t li = ((a * s4[1] + d) * s4[2] + b) * s4[3] + c;
            std::memcpy(dst->bytes.data() + i * es, src.bytes.data() + li * es, es);
          }
    return g_.AddConstant(g_.values[v].name + "_nhwc", dst);
  }

  Status Rewrite(Node n) {
    const std::string& op = n.op_type;
    const bool x4 = !n.inputs.empty() && IsRank4Var(n.inputs[0]);
    const uint32_t traits = Traits(op);
    if (op == "BatchNormalization" && x4) return RewriteBatchNorm(std::move(n));
    if (op == "ReduceMean" && x4 && IsNhwc(n.inputs[0]) && MeanOverHw(n)) return RewriteMeanOverHw(std::move(n));
    if (x4 && (g_.values[n.inputs[0]].dtype == ir::DType::kF32 || op == ops::opname::QConv)) {
      const auto& rules = LayoutRules();
      if (auto it = rules.find(op); it != rules.end()) {
        FCB_ASSIGN_OR_RETURN(bool done, it->second(*this, n));
        if (done) return Status::Ok();
      }
    }
    if (((traits & ops::kTraitElementwise) || PerTensorQuantization(n)) && x4 && IsNhwc(n.inputs[0])) {
      n.inputs[0] = Convert(n.inputs[0], true);  // no-op, already NHWC
      for (int o : n.outputs)
        if (o >= 0 && g_.values[o].shape.size() == 4) MarkNhwc(o);
      g_.nodes.push_back(std::move(n));
      return Status::Ok();
    }
    if (((traits & ops::kTraitBroadcast) || op == "Concat") && AnyNhwc(n) &&
        AllOperands4dOrConst(n, op == "Concat")) {
      for (int& in : n.inputs) {
        if (in < 0) continue;
        if (g_.values[in].is_constant()) {
          FCB_ASSIGN_OR_RETURN(in, PermuteConstant(in));
        } else {
          in = Convert(in, true);
        }
      }
      if (op == "Concat") {
        int64_t axis = n.GetInt("axis", 0);
        if (axis < 0) axis += 4;
        for (int i = 0; i < 4; ++i)
          if (kToNhwc[i] == axis) n.SetInt("axis", i);
      }
      MarkNhwc(n.outputs[0]);
      g_.nodes.push_back(std::move(n));
      return Status::Ok();
    }
    // Anything else sees ONNX layout.
    for (int& in : n.inputs)
      if (IsNhwc(in)) in = Convert(in, false);
    g_.nodes.push_back(std::move(n));
    return Status::Ok();
  }

  // QuantizeLinear / DequantizeLinear with one scale and zero point: an
  // elementwise op (per-axis forms depend on the layout).
  // DynamicQuantizeLinear too: its scale and zero point come from the
  // tensor's range, which no permutation changes.
  bool PerTensorQuantization(const Node& n) const {
    if (n.op_type == "DynamicQuantizeLinear") return true;
    if (n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] >= 0 && ir::NumElements(g_.values[n.inputs[i]].shape) != 1) return false;
    return n.inputs.size() >= 2;
  }

  bool AnyNhwc(const Node& n) const {
    for (int in : n.inputs)
      if (IsNhwc(in)) return true;
    return false;
  }
  bool AllOperands4dOrConst(const Node& n, bool concat) const {
    for (int in : n.inputs) {
      if (in < 0) continue;
      const auto& v = g_.values[in];
      if (v.is_constant() && !concat && v.shape.size() <= 4) continue;
      if (!IsRank4Var(in)) return false;
    }
    return g_.values[n.outputs[0]].shape.size() == 4;
  }

  // A float ReduceMean over exactly H and W (x.mean([2, 3]) in torch: MnasNet,
  // many detection heads). The importer has made its axes a constant input,
  // whatever the opset (import/canonicalize.cc).
  bool MeanOverHw(const Node& n) const {
    if (g_.values[n.inputs[0]].dtype != ir::DType::kF32 || n.outputs.size() != 1) return false;
    if (n.inputs.size() < 2 || n.inputs[1] < 0) return false;
    const ir::TensorData* a = g_.values[n.inputs[1]].constant.get();
    if (!a || a->dtype != ir::DType::kI64) return false;
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(a->GetInt(i));
    for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    return axes == std::vector<int64_t>{2, 3};
  }

  // ... on an NHWC input: GlobalAvgPoolNhwc, no transpose back to NCHW. Its
  // [n,1,1,c] output is the keepdims form (NHWC); without keepdims it is
  // reshaped to [n,c], which for H = W = 1 holds the same bytes in either
  // layout (a view, no step).
  Status RewriteMeanOverHw(Node n) {
    Node pool;
    pool.name = n.name;
    pool.op_type = std::string(ops::opname::GlobalAvgPoolNhwc);
    pool.domain = "fcb";
    pool.inputs = {n.inputs[0]};
    if (n.GetInt("keepdims", 1) != 0) {
      pool.outputs = {n.outputs[0]};
      MarkNhwc(n.outputs[0]);
      g_.nodes.push_back(std::move(pool));
      return Status::Ok();
    }
    const Shape& x = g_.values[n.inputs[0]].shape;  // NHWC
    ir::Value mid;
    mid.name = g_.UniqueName(n.name + "_pooled");
    mid.dtype = ir::DType::kF32;
    mid.shape = {x[0], 1, 1, x[3]};
    mid.has_shape = true;
    const int mv = g_.AddValue(std::move(mid));
    nhwc_.resize(g_.values.size(), false);
    nhwc_[mv] = true;
    pool.outputs = {mv};
    g_.nodes.push_back(std::move(pool));
    const int shape = g_.AddConstant(n.name + "_shape", ir::TensorData::FromInts({2}, {x[0], x[3]}));
    Node reshape;
    reshape.name = n.name + "_reshape";
    reshape.op_type = "Reshape";
    reshape.inputs = {mv, shape};
    reshape.outputs = {n.outputs[0]};
    g_.nodes.push_back(std::move(reshape));
    return Status::Ok();
  }

  // Standalone BatchNormalization (not folded into a conv) becomes Mul + Add
  // with per-channel constants, which are layout-agnostic.
  Status RewriteBatchNorm(Node n) {
    for (int i = 1; i < 5; ++i)
      if (n.inputs[i] < 0 || !g_.values[n.inputs[i]].is_constant()) {
        for (int& in : n.inputs)
          if (IsNhwc(in)) in = Convert(in, false);
        g_.nodes.push_back(std::move(n));
        return Status::Ok();
      }
    // The channel count from the parameters: the input may already be NHWC.
    const int64_t c = g_.values[n.inputs[1]].constant->numel();
    const float eps = n.GetFloat("epsilon", 1e-5f);
    auto get = [&](int i) { return g_.values[n.inputs[i]].constant; };
    std::vector<float> scale(c), shift(c);
    for (int64_t i = 0; i < c; ++i) {
      const double s = get(1)->GetDouble(i) / std::sqrt(get(4)->GetDouble(i) + eps);
      scale[i] = static_cast<float>(s);
      shift[i] = static_cast<float>(get(2)->GetDouble(i) - get(3)->GetDouble(i) * s);
    }
    const int sv = g_.AddConstant(n.name + "_bn_scale", ir::TensorData::FromFloats({1, c, 1, 1}, scale));
    const int bv = g_.AddConstant(n.name + "_bn_shift", ir::TensorData::FromFloats({1, c, 1, 1}, shift));
    ir::Value mid;
    mid.name = g_.UniqueName(n.name + "_bn_scaled");
    mid.dtype = ir::DType::kF32;
    mid.shape = g_.values[n.outputs[0]].shape;  // logical NCHW: Rewrite(mul) assigns the layout
    mid.has_shape = true;
    const int mv = g_.AddValue(std::move(mid));
    Node mul;
    mul.name = n.name + "_mul";
    mul.op_type = "Mul";
    mul.inputs = {n.inputs[0], sv};
    mul.outputs = {mv};
    Node add;
    add.name = n.name;
    add.op_type = "Add";
    add.inputs = {mv, bv};
    add.outputs = {n.outputs[0]};
    FCB_RETURN_IF_ERROR(Rewrite(std::move(mul)));
    return Rewrite(std::move(add));
  }

  Graph& g_;
  std::vector<Shape> logical_;  // every value's shape before the pass (plain NCHW inference)
  std::vector<bool> nhwc_;
  std::map<int, int> to_nhwc_, to_nchw_;
};

}  // namespace

Status AssignLayouts(ir::Graph& g) {
  FCB_RETURN_IF_ERROR(Conv1dAs2d(g).Annotate("1-D convolutions as 2-D"));
  return LayoutRewriter(g).Run();
}

}  // namespace fcb::passes
