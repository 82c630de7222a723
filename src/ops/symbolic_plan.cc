#include "ops/symbolic_plan.h"

#include <algorithm>

#include "ops/names.h"
#include "ops/op_util.h"

namespace fcb::ops {

namespace {

using ir::DimExpr;
using ir::SymShape;
using Values = std::vector<DimExpr>;

// Small integer tensors are followed element by element up to this many.
constexpr int64_t kMaxValueElements = 64;
// An expression larger than this (nodes, DimExpr::size) is left unknown:
// what real models compute from shapes stays far below, and it bounds the
// work each step costs whatever a plan holds.
constexpr int64_t kMaxExprNodes = 512;
constexpr size_t kMaxRequirements = 64;

bool IsIntType(ir::DType t) { return t == ir::DType::kI64 || t == ir::DType::kI32; }

class Walker {
 public:
  Walker(const format::ContextDesc& c, const CheckedPlan& bound, SymbolicPlan* out) : c_(c), b_(bound), p_(*out) {}

  void Run() {
    for (const auto& s : c_.symbols) (void)p_.symbols.Add(s.name, s.lo, s.hi);
    const size_t nt = c_.tensors.size();
    p_.shapes.assign(nt, std::nullopt);
    p_.values.assign(nt, std::nullopt);
    if (b_.infos.size() != nt || b_.small_constants.size() != nt || p_.symbols.size() != c_.symbols.size()) return;
    // Every tensor as at the bound; the method's inputs and what the steps
    // reached compute are worked out below.
    for (size_t t = 0; t < nt; ++t) {
      p_.shapes[t] = ir::ToSymShape(b_.infos[t].shape);
      SetValueFromData(static_cast<int32_t>(t), b_.small_constants[t].get());
    }
    size_t at = 0;
    for (size_t i = 0; i < c_.inputs.size(); ++i) {
      const int32_t t = c_.inputs[i];
      SymShape& s = *p_.shapes[t];
      for (size_t d = 0; d < s.size(); ++d, ++at) {
        const int32_t sym = at < c_.input_symbols.size() ? c_.input_symbols[at] : -1;
        if (sym >= 0 && static_cast<size_t>(sym) < p_.symbols.size()) s[d] = p_.symbols.Expr(sym);
      }
      p_.values[t].reset();  // a run's data
    }
    for (size_t k = 0; k < b_.reach_steps.size(); ++k) {
      const size_t si = static_cast<size_t>(b_.reach_steps[k]);
      const format::StepDesc& s = c_.steps[si];
      for (int32_t t : s.outputs) {
        p_.shapes[t].reset();
        p_.values[t].reset();
      }
      p_.reached += s.outputs.size();
      const int32_t at_param = k < b_.reach_param_at.size() ? b_.reach_param_at[k] : -1;
      Step(s, b_.steps[si], k < b_.reach_fast.size() ? static_cast<FastShape>(b_.reach_fast[k]) : FastShape::kNone,
           at_param >= 0 ? &b_.reach_params[at_param] : nullptr);
      for (int32_t t : s.outputs) {
        auto& shape = p_.shapes[t];
        if (!shape) continue;
        // Simplified by the ranges; a dim whose expression could not be built
        // (overflow, size limits), or of another rank than the plan's, is unknown.
        bool ok = shape->size() == b_.infos[t].shape.size();
        for (DimExpr& d : *shape) {
          d = Simplified(d);
          ok = ok && d.valid() && d.size() <= kMaxExprNodes;
        }
        if (!ok) {
          shape.reset();
          p_.values[t].reset();
          continue;
        }
        ++p_.known;
        auto& v = p_.values[t];
        if (v) {
          for (DimExpr& e : *v) {
            e = Simplified(e);
            if (!e.valid() || e.size() > kMaxExprNodes) v.reset();
            if (!v) break;
          }
        }
      }
    }
  }

 private:
  // Simplified by the ranges until it no longer changes (a simplified
  // operand can settle the min or max around it), at most a few times.
  DimExpr Simplified(DimExpr e) const {
    for (int i = 0; i < 4; ++i) {
      DimExpr next = e.Simplify(p_.symbols);
      if (next == e) break;
      e = std::move(next);
    }
    return e;
  }

  const SymShape* Shape(int32_t t) const { return t >= 0 && p_.shapes[t] ? &*p_.shapes[t] : nullptr; }
  const Values* Value(int32_t t) const { return t >= 0 && p_.values[t] ? &*p_.values[t] : nullptr; }

  void SetValueFromData(int32_t t, const ir::TensorData* d) {
    if (!d || !IsIntType(d->dtype) || d->numel() > kMaxValueElements) return;
    Values v;
    for (int64_t i = 0; i < d->numel(); ++i) v.push_back(DimExpr(d->GetInt(i)));
    p_.values[t] = std::move(v);
  }

  // The range of e over the symbols' ranges, where it can be bounded.
  std::optional<ir::DimRange> Range(const DimExpr& e) const {
    auto r = e.Bounds(p_.symbols);
    return r.ok() ? std::optional<ir::DimRange>(r.value()) : std::nullopt;
  }
  bool CanBeOne(const DimExpr& e) const {
    auto r = Range(e);
    return !r || r->Contains(1);
  }
  bool AtLeastOne(const DimExpr& e) const {
    auto r = Range(e);
    return r && r->lo >= 1;
  }
  // (At most kMaxRequirements are kept: they name a refusal early, and the
  // resolution refuses what breaks any other.)
  void Require(const DimExpr& a, const DimExpr& b) {
    if (a == b || p_.requires_equal.size() >= kMaxRequirements) return;
    for (const auto& [x, y] : p_.requires_equal)
      if ((x == a && y == b) || (x == b && y == a)) return;
    p_.requires_equal.emplace_back(a, b);
  }

  // One dim of two broadcast operands (the run refuses sizes at which they
  // neither agree nor one is 1, so what holds at every accepted run).
  std::optional<DimExpr> BroadcastDim(const DimExpr& a, const DimExpr& b) {
    if (a == b) return a;
    if (a.AsConstant() == 1) return b;
    if (b.AsConstant() == 1) return a;
    const bool a1 = CanBeOne(a), b1 = CanBeOne(b);
    if (!a1 && !b1) {  // never 1: equal at every accepted run
      Require(a, b);
      return a.IsConstant() ? a : b.IsConstant() ? b : a;
    }
    if (!b1) return b;  // a is 1 or b
    if (!a1) return a;
    if (AtLeastOne(a) && AtLeastOne(b)) return ir::Max(a, b);
    return std::nullopt;
  }
  std::optional<SymShape> Broadcast(const SymShape& x, const SymShape& y) {
    const size_t r = std::max(x.size(), y.size());
    SymShape o(r);
    for (size_t i = 0; i < r; ++i) {
      const DimExpr a = i < r - x.size() ? DimExpr(1) : x[i - (r - x.size())];
      const DimExpr b = i < r - y.size() ? DimExpr(1) : y[i - (r - y.size())];
      auto d = BroadcastDim(a, b);
      if (!d) return std::nullopt;
      o[i] = *d;
    }
    return o;
  }

  // The broadcast of step s's present operands (input 0 known).
  std::optional<SymShape> BroadcastOperands(const format::StepDesc& s) {
    std::optional<SymShape> o = *Shape(s.inputs[0]);
    for (size_t i = 1; i < s.inputs.size() && o; ++i) {
      if (s.inputs[i] < 0) continue;
      const SymShape* y = Shape(s.inputs[i]);
      o = y ? Broadcast(*o, *y) : std::nullopt;
    }
    return o;
  }

  // Elementwise integer arithmetic over known values (same count, or one of one element).
  template <typename F>
  std::optional<Values> ValueOp(const Values& a, const Values& b, F f) {
    if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
    Values o(std::max(a.size(), b.size()));
    for (size_t i = 0; i < o.size(); ++i) o[i] = f(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
    return o;
  }

  // Slice's start or end `e` along a dim of extent `d` (step 1), clamped as
  // ONNX does, where its sign is known over the ranges.
  std::optional<DimExpr> SliceBound(const DimExpr& e, const DimExpr& d) {
    auto r = Range(e);
    if (!r) return std::nullopt;
    if (r->lo >= 0) return ir::Min(e, d);
    if (r->hi < 0) return ir::Max(e + d, DimExpr(0));
    return std::nullopt;
  }

  void Step(const format::StepDesc& s, const CheckedStep& b, FastShape fast, const int64_t* params) {
    if (s.outputs.empty()) return;
    // The ops shaped by values (Slice, Expand, ConstantOfShape, Range) and
    // Split have their own rules below, by op.
    switch (fast) {
      case FastShape::kSlice:
      case FastShape::kExpand:
      case FastShape::kConstantOfShape:
      case FastShape::kRange:
      case FastShape::kSplit:
        fast = FastShape::kNone;
        params = nullptr;
        break;
      default:
        break;
    }
    const int32_t out = s.outputs[0];
    auto in = [&](size_t i) -> const SymShape* { return i < s.inputs.size() ? Shape(s.inputs[i]) : nullptr; };
    auto value = [&](size_t i) -> const Values* { return i < s.inputs.size() ? Value(s.inputs[i]) : nullptr; };
    const SymShape* x = in(0);
    const std::string& op = s.op;
    std::optional<SymShape> o;
    std::optional<Values> v;
    // Shape and Size: from the input's shape alone.
    if ((op == "Shape" || op == "Size") && x) {
      if (op == "Size") {
        o = SymShape{};
        v = Values{ir::SymNumElements(*x)};
      } else {
        int64_t start, end;
        ShapeOpSpan(b.attrs, static_cast<int64_t>(x->size()), &start, &end);
        v = end > start ? Values(x->begin() + start, x->begin() + end) : Values{};
        o = SymShape{DimExpr(static_cast<int64_t>(v->size()))};
      }
      Set(out, std::move(o), std::move(v));
      return;
    }
    // Operands with the bound's shapes (constants) and, where the bound knew
    // their values, the same constant values: the bound's outputs.
    if (Unchanged(s, b)) {
      for (size_t i = 0; i < s.outputs.size() && i < b.outputs.size(); ++i) {
        p_.shapes[s.outputs[i]] = ir::ToSymShape(b.outputs[i].shape);
        SetValueFromData(s.outputs[i], b_.small_constants[s.outputs[i]].get());
      }
      return;
    }
    // An fcb NHWC kernel (convolution, pool) over a batch of the bound's
    // pictures: the bound's output per picture.
    if (op.size() > 4 && op.compare(op.size() - 4, 4, "Nhwc") == 0 && x && x->size() == 4 &&
        s.outputs.size() == 1 && b.inputs[0].shape.size() == 4 && b.outputs[0].shape.size() == 4 &&
        b.outputs[0].shape[0] == b.inputs[0].shape[0]) {
      bool per_picture = true;
      for (size_t d = 1; d < 4; ++d) per_picture = per_picture && (*x)[d].AsConstant() == b.inputs[0].shape[d];
      // The other operands: constant (packed weights), or per picture too (a residual).
      for (size_t i = 1; i < s.inputs.size() && per_picture; ++i) {
        if (s.inputs[i] < 0 || Constant(s, b, i)) continue;
        const SymShape* y = in(i);
        per_picture = y && y->size() == 4 && i < b.inputs.size() && b.inputs[i].shape.size() == 4 && (*y)[0] == (*x)[0];
        for (size_t d = 1; d < 4 && per_picture; ++d) per_picture = (*y)[d].AsConstant() == b.inputs[i].shape[d];
      }
      if (per_picture) {
        SymShape o = ir::ToSymShape(b.outputs[0].shape);
        o[0] = (*x)[0];
        Set(out, std::move(o), std::nullopt);
        return;
      }
    }
    if (op == "Split" && x) {
      // Each output: the input but along the axis, its part: the sizes in
      // input 1 or the attribute where their elements are known constants,
      // else equal parts of a dim that is a constant multiple of them.
      int64_t axis = b.attrs.GetInt("axis", 0);
      const int64_t r = static_cast<int64_t>(x->size());
      if (axis < 0) axis += r;
      if (axis < 0 || axis >= r) return;
      std::vector<DimExpr> parts;
      if (s.inputs.size() > 1 && s.inputs[1] >= 0) {
        const Values* sv = value(1);
        if (!sv) return;
        parts = *sv;
      } else if (b.attrs.Has("split")) {
        for (int64_t v : b.attrs.GetInts("split")) parts.push_back(DimExpr(v));
      } else {
        const DimExpr& d = (*x)[static_cast<size_t>(axis)];
        const int64_t n = static_cast<int64_t>(s.outputs.size());
        for (int64_t i = 0; i < n; ++i) parts.push_back(ir::FloorDiv(d, DimExpr(n)));
        if (ir::Mod(d, DimExpr(n)).Simplify(p_.symbols).AsConstant() != 0) return;
      }
      if (parts.size() != s.outputs.size()) return;
      DimExpr total(0);
      for (size_t i = 0; i < parts.size(); ++i) {
        SymShape o = *x;
        o[static_cast<size_t>(axis)] = parts[i];
        total += parts[i];
        p_.shapes[s.outputs[i]] = std::move(o);
      }
      Require(total, (*x)[static_cast<size_t>(axis)]);
      return;
    }
    if (!x && fast != FastShape::kNone) return;
    switch (fast) {
      case FastShape::kSameAsInput0:
        o = *x;
        if (const Values* xv = value(0); xv && IsIntType(b.outputs[0].dtype) && (op == "Cast" || op == "Identity"))
          v = *xv;
        break;
      case FastShape::kBroadcast: {
        o = BroadcastOperands(s);
        const Values *av = value(0), *bv = value(1);
        if (o && av && bv && s.inputs.size() == 2 && IsIntType(b.outputs[0].dtype)) {
          if (op == "Add") v = ValueOp(*av, *bv, [](const DimExpr& p, const DimExpr& q) { return p + q; });
          else if (op == "Sub") v = ValueOp(*av, *bv, [](const DimExpr& p, const DimExpr& q) { return p - q; });
          else if (op == "Mul") v = ValueOp(*av, *bv, [](const DimExpr& p, const DimExpr& q) { return p * q; });
          else if (op == "Max") v = ValueOp(*av, *bv, [](const DimExpr& p, const DimExpr& q) { return ir::Max(p, q); });
          else if (op == "Min") v = ValueOp(*av, *bv, [](const DimExpr& p, const DimExpr& q) { return ir::Min(p, q); });
          else if (op == "Div") {
            // Integer Div truncates toward zero: a floor division where the
            // dividend is never negative and the divisor a positive constant.
            bool floors = true;
            for (const DimExpr& q : *bv) floors = floors && q.AsConstant().value_or(0) > 0;
            for (const DimExpr& p : *av) {
              auto r = Range(p);
              floors = floors && r && r->lo >= 0;
            }
            if (floors) v = ValueOp(*av, *bv, [](const DimExpr& p, const DimExpr& q) { return ir::FloorDiv(p, q); });
          }
        }
        break;
      }
      case FastShape::kTranspose:
        if (params && x->size() == b.inputs[0].shape.size()) {
          o = SymShape(x->size());
          for (size_t d = 0; d < x->size(); ++d) (*o)[d] = (*x)[static_cast<size_t>(params[d])];
        }
        break;
      case FastShape::kLayerNorm:
        o = *x;
        break;
      case FastShape::kGemmPacked:
        if (!x->empty() && !b.outputs[0].shape.empty()) {
          o = *x;
          o->back() = DimExpr(b.outputs[0].shape.back());
        }
        break;
      case FastShape::kMatMul: {
        const SymShape* y = in(1);
        if (!y || x->empty() || y->empty()) break;
        const DimExpr kx = x->back(), ky = y->size() == 1 ? (*y)[0] : (*y)[y->size() - 2];
        if (kx != ky) Require(kx, ky);
        const SymShape xb(x->begin(), x->end() - std::min<size_t>(2, x->size()));
        const SymShape yb(y->begin(), y->end() - std::min<size_t>(2, y->size()));
        o = Broadcast(xb, yb);
        if (!o) break;
        if (x->size() != 1) o->push_back((*x)[x->size() - 2]);
        if (y->size() != 1) o->push_back(y->back());
        break;
      }
      case FastShape::kUnsqueeze: {
        if (!params) break;
        const size_t n = static_cast<size_t>(params[0]), r = x->size() + n;
        o = SymShape(r);
        size_t next_in = 0, next_axis = 0;
        for (size_t i = 0; i < r && o; ++i) {
          if (next_axis < n && params[1 + next_axis] == static_cast<int64_t>(i)) {
            (*o)[i] = DimExpr(1);
            ++next_axis;
          } else if (next_in < x->size()) {
            (*o)[i] = (*x)[next_in++];
          } else {
            o.reset();
          }
        }
        if (const Values* xv = value(0)) v = *xv;
        break;
      }
      case FastShape::kConcat: {
        if (!params) break;
        const size_t axis = static_cast<size_t>(params[0]);
        if (axis >= x->size()) break;
        o = *x;
        (*o)[axis] = DimExpr(0);
        Values joined;
        bool values_known = x->size() == 1;
        for (size_t i = 0; i < s.inputs.size() && o; ++i) {
          const SymShape* y = in(i);
          if (!y || y->size() != x->size()) {
            o.reset();
            break;
          }
          for (size_t d = 0; d < x->size(); ++d)
            if (d != axis) Require((*x)[d], (*y)[d]);
          (*o)[axis] += (*y)[axis];
          const Values* yv = value(i);
          if (values_known && yv) joined.insert(joined.end(), yv->begin(), yv->end());
          else values_known = false;
        }
        if (o && values_known) v = std::move(joined);
        break;
      }
      case FastShape::kGather: {
        if (!params) break;
        const size_t axis = static_cast<size_t>(params[0]);
        const SymShape* idx = in(1);
        if (!idx || axis >= x->size()) break;
        o = SymShape(x->begin(), x->begin() + static_cast<std::ptrdiff_t>(axis));
        o->insert(o->end(), idx->begin(), idx->end());
        o->insert(o->end(), x->begin() + static_cast<std::ptrdiff_t>(axis) + 1, x->end());
        // A value's elements picked by constant indices (1-D data).
        const Values *xv = value(0), *iv = value(1);
        if (xv && iv && x->size() == 1) {
          Values picked;
          for (const DimExpr& e : *iv) {
            auto i = e.AsConstant();
            if (!i) return Set(out, std::move(o), std::nullopt);
            const int64_t n = static_cast<int64_t>(xv->size());
            const int64_t j = *i < 0 ? *i + n : *i;
            if (j < 0 || j >= n) return Set(out, std::move(o), std::nullopt);
            picked.push_back((*xv)[static_cast<size_t>(j)]);
          }
          v = std::move(picked);
        }
        break;
      }
      case FastShape::kReshape: {
        const Values* target = value(1);
        if (!target || b.attrs.GetInt("allowzero", 0) != 0) break;
        o = SymShape(target->size());
        DimExpr known(1);
        int infer = -1;
        for (size_t i = 0; i < target->size(); ++i) {
          const DimExpr& e = (*target)[i];
          if (e.AsConstant() == 0) {
            if (i >= x->size()) return;
            (*o)[i] = (*x)[i];
          } else if (e.AsConstant() == -1) {
            infer = static_cast<int>(i);
            continue;
          } else {
            (*o)[i] = e;
          }
          known *= (*o)[i];
        }
        if (infer >= 0) (*o)[static_cast<size_t>(infer)] = ir::FloorDiv(ir::SymNumElements(*x), known);
        if (const Values* xv = value(0)) v = *xv;
        break;
      }
      default:  // kNone (the kinds shaped by values were mapped to it above)
        break;
    }
    if (fast == FastShape::kNone && x && (b.def->traits & kTraitElementwise) && s.outputs.size() == 1) {
      o = *x;  // every output shaped like input 0
    } else if (fast == FastShape::kNone && x && (b.def->traits & kTraitBroadcast) && s.outputs.size() == 1) {
      o = BroadcastOperands(s);
    } else if (fast == FastShape::kNone) {
      if ((op == "Squeeze" || op == "Flatten" || op == "Identity") && x) {
        // Dims of the bound that stay 1 are the squeezed ones: the output
        // keeps the input's other dims in order (Squeeze), or folds them
        // (Flatten at the bound's axis).
        const ir::Shape& bo = b.outputs[0].shape;
        if (op == "Identity") {
          o = *x;
        } else if (op == "Flatten") {
          int64_t axis = b.attrs.GetInt("axis", 1);
          const int64_t r = static_cast<int64_t>(x->size());
          if (axis < 0) axis += r;
          if (axis < 0 || axis > r) return;
          DimExpr lead(1), rest(1);
          for (int64_t d = 0; d < r; ++d) (d < axis ? lead : rest) *= (*x)[static_cast<size_t>(d)];
          o = SymShape{lead, rest};
        } else {
          // The axes: an input whose elements are known constants, or the attribute.
          std::vector<int64_t> axes;
          bool present = false;
          if (s.inputs.size() > 1 && s.inputs[1] >= 0) {
            const Values* av = value(1);
            if (!av) return;
            for (const DimExpr& e : *av) {
              auto a = e.AsConstant();
              if (!a) return;
              axes.push_back(*a);
            }
            present = true;
          } else if (b.attrs.Has("axes")) {
            axes = b.attrs.GetInts("axes");
            present = true;
          }
          const int64_t r = static_cast<int64_t>(x->size());
          o = SymShape{};
          for (int64_t d = 0; d < r; ++d) {
            bool squeezed = false;
            if (present) {
              for (int64_t a : axes) squeezed = squeezed || a == d || (a < 0 && a + r == d);
            } else {
              squeezed = (*x)[static_cast<size_t>(d)].AsConstant() == 1;
            }
            if (!squeezed) o->push_back((*x)[static_cast<size_t>(d)]);
          }
          if (o->size() != bo.size()) return;
        }
        if (const Values* xv = value(0)) v = *xv;
      } else if (op == "Range") {
        const Values *start = value(0), *limit = value(1), *delta = value(2);
        if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1) return;
        const auto step = (*delta)[0].AsConstant();
        if (!step || *step <= 0) return;
        const DimExpr n = Simplified(ir::CeilDiv((*limit)[0] - (*start)[0], DimExpr(*step)));
        auto r = Range(n);
        o = SymShape{r && r->lo >= 0 ? n : ir::Max(n, DimExpr(0))};
      } else if (op == "ConstantOfShape" || op == "Expand") {
        const Values* target = value(op == "Expand" ? 1 : 0);
        if (!target) return;
        const SymShape t(target->begin(), target->end());
        o = op == "Expand" ? (x ? Broadcast(*x, t) : std::nullopt) : std::optional<SymShape>(t);
      } else if (op == "Slice" && x) {
        const Values *starts = value(1), *ends = value(2);
        const Values* axes = s.inputs.size() > 3 ? value(3) : nullptr;
        const Values* steps = s.inputs.size() > 4 ? value(4) : nullptr;
        if (!starts || !ends || starts->size() != ends->size() || (s.inputs.size() > 3 && s.inputs[3] >= 0 && !axes) ||
            (s.inputs.size() > 4 && s.inputs[4] >= 0 && !steps))
          return;
        o = *x;
        const int64_t r = static_cast<int64_t>(x->size());
        for (size_t i = 0; i < starts->size(); ++i) {
          int64_t axis = static_cast<int64_t>(i);
          if (axes) {
            auto a = (*axes)[i].AsConstant();
            if (!a) return;
            axis = *a < 0 ? *a + r : *a;
          }
          if (steps && (*steps)[i].AsConstant() != 1) return;
          if (axis < 0 || axis >= r) return;
          const DimExpr& d = (*x)[static_cast<size_t>(axis)];
          auto lo = SliceBound((*starts)[i], d), hi = SliceBound((*ends)[i], d);
          if (!lo || !hi) return;
          (*o)[static_cast<size_t>(axis)] = ir::Max(*hi - *lo, DimExpr(0));
        }
        // A 1-D value sliced by constant bounds.
        const Values* xv = value(0);
        if (xv && r == 1) {
          auto n = (*o)[0].Simplify(p_.symbols).AsConstant();
          auto first = SliceBound((*starts)[0], (*x)[0]);
          std::optional<int64_t> f = first ? first->Simplify(p_.symbols).AsConstant() : std::nullopt;
          if (n && f && *f >= 0 && *f + *n <= static_cast<int64_t>(xv->size()))
            v = Values(xv->begin() + *f, xv->begin() + *f + *n);
        }
      }
    }
    // Values only of small integer outputs whose element count is fixed.
    if (v && o) {
      auto n = ir::SymNumElements(*o).Simplify(p_.symbols).AsConstant();
      if (!IsIntType(b.outputs[0].dtype) || !n || *n != static_cast<int64_t>(v->size()) || *n > kMaxValueElements)
        v.reset();
    } else {
      v.reset();
    }
    Set(out, std::move(o), std::move(v));
  }

  // Input i of step s has the shape it had at the bound (all constant) and,
  // where the bound knew its value, the same value.
  bool Constant(const format::StepDesc& s, const CheckedStep& b, size_t i) const {
    const int32_t t = s.inputs[i];
    const SymShape* x = Shape(t);
    if (!x || i >= b.inputs.size() || x->size() != b.inputs[i].shape.size()) return false;
    for (size_t d = 0; d < x->size(); ++d)
      if ((*x)[d].AsConstant() != b.inputs[i].shape[d]) return false;
    const ir::TensorData* was = i < b.constants.size() ? b.constants[i] : nullptr;
    if (!was || (static_cast<size_t>(t) < b_.weights.size() && b_.weights[t])) return true;  // a weight's never changes
    const Values* v = Value(t);
    if (!v || static_cast<int64_t>(v->size()) != was->numel() || !IsIntType(was->dtype)) return false;
    for (size_t k = 0; k < v->size(); ++k)
      if ((*v)[k].AsConstant() != was->GetInt(static_cast<int64_t>(k))) return false;
    return true;
  }
  bool Unchanged(const format::StepDesc& s, const CheckedStep& b) const {
    if (s.inputs.empty() || b.outputs.size() != s.outputs.size()) return false;
    for (size_t i = 0; i < s.inputs.size(); ++i)
      if (s.inputs[i] >= 0 && !Constant(s, b, i)) return false;
    return true;
  }

  void Set(int32_t t, std::optional<SymShape> o, std::optional<Values> v) {
    p_.shapes[t] = std::move(o);
    p_.values[t] = p_.shapes[t] ? std::move(v) : std::nullopt;
  }

  const format::ContextDesc& c_;
  const CheckedPlan& b_;
  SymbolicPlan& p_;
};

}  // namespace

SymbolicPlan InferSymbolicPlan(const format::ContextDesc& c, const CheckedPlan& bound) {
  SymbolicPlan p;
  Walker(c, bound, &p).Run();
  return p;
}

std::string SymbolicDifference(const format::ContextDesc& c, const SymbolicPlan& sym,
                               const std::vector<int64_t>& values, const ResolvedPlan& r) {
  if (sym.shapes.size() != c.tensors.size() || r.changed_tensors.size() != c.tensors.size())
    return "the plans have different numbers of tensors";
  auto eval = [&](const DimExpr& e) { return e.Evaluate(values); };
  for (const auto& [a, b] : sym.requires_equal) {
    auto x = eval(a), y = eval(b);
    if (!x.ok() || !y.ok() || x.value() != y.value())
      return "the required " + a.ToString(&sym.symbols) + " == " + b.ToString(&sym.symbols) + " does not hold";
  }
  for (size_t t = 0; t < c.tensors.size(); ++t) {
    if (!sym.shapes[t]) continue;
    const std::span<const int64_t> dims = r.dims_of(static_cast<int32_t>(t));
    const ir::Shape actual(dims.begin(), dims.end());
    const auto& s = *sym.shapes[t];
    bool same = s.size() == actual.size();
    for (size_t d = 0; same && d < s.size(); ++d) {
      auto v = eval(s[d]);
      same = v.ok() && v.value() == actual[d];
    }
    if (!same)
      return "tensor " + std::to_string(t) + " ('" + c.tensors[t].name + "') is " + ir::ShapeToString(actual) +
             " but its symbolic shape " + SymShapeText(s, sym.symbols) + " gives otherwise";
    if (sym.values[t]) {
      const auto& known = r.value(static_cast<int32_t>(t));
      if (!known) continue;  // not computed at these sizes (nothing to compare)
      const auto& ev = *sym.values[t];
      bool equal = known->numel() == static_cast<int64_t>(ev.size());
      for (size_t i = 0; equal && i < ev.size(); ++i) {
        auto v = eval(ev[i]);
        equal = v.ok() && v.value() == known->GetInt(static_cast<int64_t>(i));
      }
      if (!equal) return "tensor " + std::to_string(t) + " ('" + c.tensors[t].name + "'): its symbolic value differs";
    }
  }
  return "";
}

void CompileComputedValues(const format::ContextDesc& c, const SymbolicPlan& sym, CheckedPlan* bound) {
  CheckedPlan& b = *bound;
  b.value_program = ir::DimProgram();
  b.reach_value_at.clear();
  b.value_program_bound.clear();
  b.reach_walk.clear();
  b.unread_tensors.clear();
  for (uint8_t& f : b.reach_flags) f &= static_cast<uint8_t>(~CheckedPlan::kReachValueUnread);
  if (sym.values.size() != c.tensors.size() || sym.shapes.size() != c.tensors.size() ||
      b.computed_steps.size() != c.steps.size() || b.steps.size() != c.steps.size())
    return;
  std::vector<DimExpr> exprs;
  std::vector<int32_t> at(b.reach_steps.size(), -1);
  for (size_t k = 0; k < b.reach_steps.size(); ++k) {
    const size_t si = static_cast<size_t>(b.reach_steps[k]);
    const format::StepDesc& s = c.steps[si];
    if (!b.computed_steps[si] || b.steps[si].def->scratch || !s.guard.empty() || s.outputs.empty()) continue;
    bool known = true;
    size_t elements = 0;
    for (int32_t t : s.outputs) {
      const auto& shape = t >= 0 ? sym.shapes[t] : std::nullopt;
      const auto fixed = shape ? ir::StaticShape(*shape) : std::nullopt;
      known = known && t >= 0 && b.infos[t].dtype == ir::DType::kI64 && fixed && *fixed == b.infos[t].shape &&
              sym.values[t] && static_cast<int64_t>(sym.values[t]->size()) == ir::NumElements(*fixed);
      if (known) elements += sym.values[t]->size();
    }
    if (!known || exprs.size() + elements > ir::DimProgram::kMaxOutputs) continue;
    at[k] = static_cast<int32_t>(exprs.size());
    for (int32_t t : s.outputs) exprs.insert(exprs.end(), sym.values[t]->begin(), sym.values[t]->end());
  }
  if (exprs.empty()) return;
  auto program = ir::DimProgram::Compile(exprs, c.symbols.size());
  if (!program.ok()) return;
  // Its outputs at the bound, which must be the bound's values (else the
  // program is not used).
  std::vector<int64_t> hi, slots;
  for (const auto& symbol : c.symbols) hi.push_back(symbol.hi);
  slots.resize(program.value().num_slots());
  if (!program.value().Evaluate(hi, slots).ok()) return;
  std::vector<int64_t> at_bound(program.value().num_outputs());
  for (size_t j = 0; j < at_bound.size(); ++j) at_bound[j] = slots[program.value().output_slot(j)];
  for (size_t k = 0; k < at.size(); ++k) {
    if (at[k] < 0) continue;
    size_t from = static_cast<size_t>(at[k]);
    for (int32_t t : c.steps[static_cast<size_t>(b.reach_steps[k])].outputs) {
      const ir::TensorData* v = b.small_constants[t].get();
      const size_t n = sym.values[t]->size();
      if (!v || v->dtype != ir::DType::kI64 || v->numel() != static_cast<int64_t>(n) ||
          !std::equal(at_bound.begin() + static_cast<std::ptrdiff_t>(from),
                      at_bound.begin() + static_cast<std::ptrdiff_t>(from + n), v->data<int64_t>()))
        return;
      from += n;
    }
  }
  // The program's steps whose values nothing but other program steps read:
  // not a step run or evaluated (a reached step outside the program), nor
  // the method's outputs (needed).
  if (b.reach_flags.size() == at.size() && b.reach_offsets.size() == at.size() + 1 && b.needed.size() == c.tensors.size()) {
    std::vector<bool> read(c.tensors.size(), false);
    for (size_t k = 0; k < at.size(); ++k)
      if (at[k] < 0)
        for (int32_t j = b.reach_offsets[k]; j < b.reach_offsets[k + 1]; ++j)
          if (b.reach_inputs[j] >= 0) read[b.reach_inputs[j]] = true;
    for (size_t k = 0; k < at.size(); ++k) {
      if (at[k] < 0) continue;
      bool unread = true;
      for (int32_t t : c.steps[static_cast<size_t>(b.reach_steps[k])].outputs) unread = unread && !b.needed[t] && !read[t];
      if (unread) b.reach_flags[k] |= CheckedPlan::kReachValueUnread;
    }
    for (size_t k = 0; k < at.size(); ++k) {
      if (!(b.reach_flags[k] & CheckedPlan::kReachValueUnread)) {
        b.reach_walk.push_back(static_cast<int32_t>(k));
        continue;
      }
      for (int32_t t : c.steps[static_cast<size_t>(b.reach_steps[k])].outputs) b.unread_tensors.push_back(t);
    }
  }
  b.value_program = std::move(program).value();
  b.reach_value_at = std::move(at);
  b.value_program_bound = std::move(at_bound);
}

std::string SymShapeText(const ir::SymShape& s, const ir::SymbolTable& symbols) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (d) out += "x";
    const DimExpr& e = s[d];
    if (auto k = e.AsConstant()) {
      out += std::to_string(*k);
      continue;
    }
    const std::string text = e.ToString(&symbols);
    const auto ids = e.Symbols();
    const bool lone = ids.size() == 1 && text == ir::SymbolDisplayName(symbols[ids[0]].name);
    out += lone ? text : "(" + text + ")";
  }
  return out;
}

}  // namespace fcb::ops
