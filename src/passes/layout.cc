#include "passes/layout.h"

#include <cstring>
#include <map>

#include "ops/lowering.h"
#include "passes/passes.h"
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

// The layout rules registered for each ONNX op (OpDef::layouts), in
// registry order.
const std::map<std::string, std::vector<const ops::OpDef::Layout*>, std::less<>>& LayoutRules() {
  static const auto kRules = [] {
    std::map<std::string, std::vector<const ops::OpDef::Layout*>, std::less<>> m;
    for (const ops::OpDef& d : ops::AllOps())
      for (const auto& l : d.layouts) m[std::string(l.from)].push_back(&l);
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
  void Emit(Node n) override { g_.nodes.push_back(std::move(n)); }
  Status Place(Node n) override { return Rewrite(std::move(n)); }
  int NewValue(const std::string& base, ir::DType dtype, Shape shape, bool nhwc) override {
    ir::Value v;
    v.name = g_.UniqueName(base);
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.has_shape = true;
    const int id = g_.AddValue(std::move(v));
    nhwc_.resize(g_.values.size(), false);
    nhwc_[id] = nhwc;
    return id;
  }
  int AddConstant(const std::string& name, ir::TensorPtr t) override { return g_.AddConstant(name, std::move(t)); }

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

  // Lays out one node: a layout rule registered for its op (OpDef::layouts)
  // when input 0 is a 4-D activation, else its traits say whether it follows
  // its inputs' layout, else it reads NCHW.
  Status Rewrite(Node n) {
    const bool x4 = !n.inputs.empty() && IsRank4Var(n.inputs[0]);
    const uint32_t traits = Traits(n.op_type);
    if (x4) {
      const bool f32 = g_.values[n.inputs[0]].dtype == ir::DType::kF32;
      const auto& rules = LayoutRules();
      if (auto it = rules.find(n.op_type); it != rules.end()) {
        for (const ops::OpDef::Layout* rule : it->second) {
          if (!f32 && !rule->any_dtype) continue;
          FCB_ASSIGN_OR_RETURN(bool done, rule->fn(*this, n));
          if (done) return Status::Ok();
        }
      }
    }
    if (((traits & ops::kTraitElementwise) || PerTensorElementwise(n, traits)) && x4 && IsNhwc(n.inputs[0])) {
      n.inputs[0] = Convert(n.inputs[0], true);  // no-op, already NHWC
      for (int o : n.outputs)
        if (o >= 0 && g_.values[o].shape.size() == 4) MarkNhwc(o);
      g_.nodes.push_back(std::move(n));
      return Status::Ok();
    }
    const bool concat = (traits & ops::kTraitConcat) != 0;
    if (((traits & ops::kTraitBroadcast) || concat) && AnyNhwc(n) && AllOperands4dOrConst(n, concat)) {
      for (int& in : n.inputs) {
        if (in < 0) continue;
        if (g_.values[in].is_constant()) {
          FCB_ASSIGN_OR_RETURN(in, PermuteConstant(in));
        } else {
          in = Convert(in, true);
        }
      }
      if (concat) {
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

  // An op with kTraitPerTensorElementwise whose operands after input 0 each
  // hold one element.
  bool PerTensorElementwise(const Node& n, uint32_t traits) const {
    if (!(traits & ops::kTraitPerTensorElementwise)) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] >= 0 && ir::NumElements(g_.values[n.inputs[i]].shape) != 1) return false;
    return true;
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

  Graph& g_;
  std::vector<Shape> logical_;  // every value's shape before the pass (plain NCHW inference)
  std::vector<bool> nhwc_;
  std::map<int, int> to_nhwc_, to_nchw_;
};

}  // namespace

Status AssignLayouts(ir::Graph& g) {
  return LayoutRewriter(g).Run();
}

}  // namespace fcb::passes
