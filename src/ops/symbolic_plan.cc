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

// A window step's output (FastShape::kWindow, its parameters `params`) over
// input x of rank 4 with `channels` output channels: [N, OH, OW, channels],
// each spatial output floor(span / stride) + 1 where the span (written to
// spans[i]) is the input's dim plus the pads less the window's extent, or 1
// for a global window. Nothing for ceil_mode (no expression gives its last
// window's rule).
std::optional<SymShape> WindowOutputExprs(const SymShape& x, const int64_t* params, int64_t channels,
                                          DimExpr spans[2]) {
  if (x.size() != 4 || !params || (params[kWinCeil] && !params[kWinGlobal])) return std::nullopt;
  SymShape o{x[0], DimExpr(1), DimExpr(1), DimExpr(channels)};
  for (size_t i = 0; i < 2 && !params[kWinGlobal]; ++i) {
    const DimExpr& d = x[static_cast<size_t>(params[i == 0 ? kWinH : kWinW])];
    spans[i] = d + DimExpr(params[kWinPadBegin + i] + params[kWinPadEnd + i] - params[kWinExtent + i]);
    o[1 + i] = ir::FloorDiv(spans[i], DimExpr(params[kWinStride + i])) + DimExpr(1);
  }
  return o;
}

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
      case FastShape::kWindow: {
        // The residual has the output's shape at every run the plan accepts.
        DimExpr spans[2];
        if (b.outputs[0].shape.size() != 4) break;
        o = WindowOutputExprs(*x, params, b.outputs[0].shape[3], spans);
        if (!o) break;
        for (size_t d = 0; d < 4; ++d) (*o)[d] = (*o)[d].Simplify(p_.symbols);
        const SymShape* res = params[kWinResidual] >= 0 ? in(static_cast<size_t>(params[kWinResidual])) : nullptr;
        for (size_t d = 0; res && res->size() == 4 && d < 4; ++d)
          if ((*res)[d] != (*o)[d]) Require((*res)[d], (*o)[d]);
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

namespace {

// The output shapes of reached step k (checked at the bound as `b`) from its
// operands' shapes `shape_of` over the symbols, where its op's inference
// succeeds at every size at which the operands have those shapes (so the
// step needs no check at a run): the rules below hold only what they can
// show from the expressions themselves (equal canonical forms, constants,
// bounds over the symbols' ranges), and give nothing otherwise.
std::optional<std::vector<SymShape>> ProvenOutputs(const format::ContextDesc& c, const CheckedPlan& b, size_t k,
                                                   const std::vector<std::optional<SymShape>>& shape_of,
                                                   const std::vector<std::optional<Values>>& values_of,
                                                   const ir::SymbolTable& symbols) {
  const size_t si = static_cast<size_t>(b.reach_steps[k]);
  const format::StepDesc& s = c.steps[si];
  const FastShape fast = static_cast<FastShape>(b.reach_fast[k]);
  const int64_t* params =
      b.reach_param_at[k] >= 0 ? &b.reach_params[static_cast<size_t>(b.reach_param_at[k])] : nullptr;
  if (s.inputs.empty() || s.outputs.size() != 1 || s.inputs[0] < 0 || s.outputs[0] < 0 || !shape_of[s.inputs[0]])
    return std::nullopt;
  const SymShape& x = *shape_of[s.inputs[0]];
  const CheckedStep& cs = b.steps[si];
  if (cs.inputs.empty() || cs.outputs.size() != 1 || x.size() != cs.inputs[0].shape.size()) return std::nullopt;
  auto at_least = [&](const DimExpr& e, int64_t lo) {
    auto r = e.Bounds(symbols);
    return r.ok() && r.value().lo >= lo;
  };
  auto at_most = [&](const DimExpr& e, int64_t hi) {
    auto r = e.Bounds(symbols);
    return r.ok() && r.value().hi <= hi;
  };
  auto in = [&](size_t i) -> const SymShape* {
    return i < s.inputs.size() && s.inputs[i] >= 0 && shape_of[s.inputs[i]] ? &*shape_of[s.inputs[i]] : nullptr;
  };
  // Dims that broadcast (right-aligned) to one dim each: every operand's dim
  // there is the constant 1 or one expression common to all of them.
  auto broadcast = [&](const std::vector<const SymShape*>& ops, size_t skip_last, SymShape* out) {
    size_t r = 0;
    for (const SymShape* o : ops) r = std::max(r, o->size() - skip_last);
    out->assign(r, DimExpr(1));
    for (size_t d = 0; d < r; ++d) {
      std::optional<DimExpr> common;
      for (const SymShape* o : ops) {
        const size_t n = o->size() - skip_last;
        if (d < r - n) continue;
        const DimExpr& e = (*o)[d - (r - n)];
        if (e.AsConstant() == 1) continue;
        if (common && *common != e) return false;
        common = e;
      }
      if (common) (*out)[d] = *common;
    }
    return true;
  };
  SymShape o;
  switch (fast) {
    case FastShape::kSameAsInput0:
      o = x;
      break;
    case FastShape::kTranspose:
      for (size_t d = 0; d < x.size(); ++d) o.push_back(x[static_cast<size_t>(params[d])]);
      break;
    case FastShape::kLayerNorm: {
      const size_t axis = static_cast<size_t>(params[0]);
      if (axis > x.size()) return std::nullopt;
      for (size_t d = axis; d < x.size(); ++d)
        if (x[d].AsConstant() != cs.inputs[0].shape[d]) return std::nullopt;
      o = x;
      break;
    }
    case FastShape::kGemmPacked:
      if (x.empty() || x.back().AsConstant() != cs.inputs[0].shape.back() || cs.outputs[0].shape.empty())
        return std::nullopt;
      o = x;
      o.back() = DimExpr(cs.outputs[0].shape.back());
      break;
    case FastShape::kUnsqueeze: {
      const size_t n = static_cast<size_t>(params[0]), r = x.size() + n;
      size_t next_in = 0, next_axis = 0;
      for (size_t i = 0; i < r; ++i) {
        if (next_axis < n && params[1 + next_axis] == static_cast<int64_t>(i)) {
          o.push_back(DimExpr(1));
          ++next_axis;
        } else {
          if (next_in >= x.size()) return std::nullopt;
          o.push_back(x[next_in++]);
        }
      }
      if (next_in != x.size()) return std::nullopt;
      break;
    }
    case FastShape::kBroadcast: {
      std::vector<const SymShape*> ops;
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        if (!in(i)) return std::nullopt;
        ops.push_back(in(i));
      }
      if (!broadcast(ops, 0, &o)) return std::nullopt;
      break;
    }
    case FastShape::kMatMul: {
      const SymShape* y = in(1);
      if (!y || x.size() < 2 || y->size() < 2 || x.back() != (*y)[y->size() - 2]) return std::nullopt;
      if (!broadcast({&x, y}, 2, &o)) return std::nullopt;
      o.push_back(x[x.size() - 2]);
      o.push_back(y->back());
      break;
    }
    case FastShape::kConcat: {
      const size_t axis = static_cast<size_t>(params[0]);
      if (axis >= x.size()) return std::nullopt;
      o = x;
      o[axis] = DimExpr(0);
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        const SymShape* t = in(i);
        if (!t || t->size() != x.size()) return std::nullopt;
        for (size_t d = 0; d < x.size(); ++d)
          if (d != axis && (*t)[d] != x[d]) return std::nullopt;
        o[axis] += (*t)[axis];
      }
      break;
    }
    case FastShape::kGather: {
      const size_t axis = static_cast<size_t>(params[0]);
      const SymShape* idx = in(1);
      if (!idx || axis >= x.size()) return std::nullopt;
      o.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axis));
      o.insert(o.end(), idx->begin(), idx->end());
      o.insert(o.end(), x.begin() + static_cast<std::ptrdiff_t>(axis) + 1, x.end());
      break;
    }
    case FastShape::kConstantOfShape: {
      // The shape's elements, each never below 0.
      if (!values_of[s.inputs[0]]) return std::nullopt;
      for (const DimExpr& d : *values_of[s.inputs[0]]) {
        if (!at_least(d, 0)) return std::nullopt;
        o.push_back(d);
      }
      break;
    }
    case FastShape::kExpand: {
      // The input broadcast with the shape's elements: per dim one of them
      // the constant 1 or both the same expression (an element never below
      // 0 where the input's dim is 1).
      if (s.inputs.size() < 2 || s.inputs[1] < 0 || !values_of[s.inputs[1]]) return std::nullopt;
      const Values& v = *values_of[s.inputs[1]];
      const size_t r = std::max(x.size(), v.size());
      for (size_t i = 0; i < r; ++i) {
        const DimExpr a = i < r - x.size() ? DimExpr(1) : x[i - (r - x.size())];
        const DimExpr e = i < r - v.size() ? DimExpr(1) : v[i - (r - v.size())];
        if (e.AsConstant() == 1 || a == e) {
          o.push_back(a);
        } else if (a.AsConstant() == 1 && at_least(e, 0)) {
          o.push_back(e);
        } else {
          return std::nullopt;
        }
      }
      break;
    }
    case FastShape::kRange: {
      // start and delta constants, delta 1: limit - start elements, never
      // below 0.
      if (s.inputs.size() != 3) return std::nullopt;
      const Values* v[3];
      for (size_t i = 0; i < 3; ++i) {
        v[i] = s.inputs[i] >= 0 && values_of[s.inputs[i]] ? &*values_of[s.inputs[i]] : nullptr;
        if (!v[i] || v[i]->size() != 1) return std::nullopt;
      }
      const auto start = (*v[0])[0].AsConstant();
      if (!start || (*v[2])[0].AsConstant() != 1) return std::nullopt;
      const DimExpr n = ((*v[1])[0] - DimExpr(*start)).Simplify(symbols);
      if (!at_least(n, 0)) return std::nullopt;
      o.push_back(n);
      break;
    }
    case FastShape::kSlice: {
      // Constant starts, ends, axes and steps over dims that are constants:
      // each sliced dim's count as the walk works it out (SliceAxisCount),
      // the others the input's.
      std::optional<std::vector<int64_t>> in_v[5];
      for (size_t i = 1; i < 5 && i < s.inputs.size(); ++i) {
        if (s.inputs[i] < 0) continue;
        if (!values_of[s.inputs[i]]) return std::nullopt;
        std::vector<int64_t> e;
        for (const DimExpr& d : *values_of[s.inputs[i]]) {
          if (!d.AsConstant()) return std::nullopt;
          e.push_back(*d.AsConstant());
        }
        in_v[i] = std::move(e);
      }
      if (!in_v[1] || !in_v[2] || in_v[1]->size() != in_v[2]->size()) return std::nullopt;
      const size_t n = in_v[1]->size();
      if ((in_v[3] && in_v[3]->size() != n) || (in_v[4] && in_v[4]->size() != n) || (!in_v[3] && n > x.size()) ||
          x.size() > 64)
        return std::nullopt;
      o = x;
      uint64_t seen = 0;
      const int64_t rank = static_cast<int64_t>(x.size());
      for (size_t i = 0; i < n; ++i) {
        int64_t a = in_v[3] ? (*in_v[3])[i] : static_cast<int64_t>(i);
        if (a < -rank || a >= rank) return std::nullopt;
        if (a < 0) a += rank;
        if (seen & (uint64_t{1} << a)) return std::nullopt;
        seen |= uint64_t{1} << a;
        const auto dim = x[static_cast<size_t>(a)].AsConstant();
        const int64_t step = in_v[4] ? (*in_v[4])[i] : 1;
        if (!dim || step == 0 || step == INT64_MIN) return std::nullopt;
        int64_t first;
        o[static_cast<size_t>(a)] =
            DimExpr(*dim == 0 ? 0 : SliceAxisCount(*dim, (*in_v[1])[i], (*in_v[2])[i], step, &first));
      }
      break;
    }
    case FastShape::kWindow: {
      // Input 0's other dims the bound's, its batch and spatial dims never
      // below 1, each span never negative (every output at least 1); the
      // residual exactly the output.
      if (x.size() != 4 || cs.outputs[0].shape.size() != 4) return std::nullopt;
      const auto h = static_cast<size_t>(params[kWinH]), w = static_cast<size_t>(params[kWinW]);
      for (size_t d = 0; d < 4; ++d)
        if (d == 0 || d == h || d == w ? !at_least(x[d], 1) || !at_most(x[d], int64_t{1} << 31)
                                       : x[d].AsConstant() != cs.inputs[0].shape[d])
          return std::nullopt;
      DimExpr spans[2];
      auto wo = WindowOutputExprs(x, params, cs.outputs[0].shape[3], spans);
      if (!wo) return std::nullopt;
      for (size_t i = 0; i < 2 && !params[kWinGlobal]; ++i)
        if (!at_least(spans[i], 0)) return std::nullopt;
      o = std::move(*wo);
      for (DimExpr& d : o) d = d.Simplify(symbols);
      if (params[kWinResidual] >= 0) {
        const SymShape* res = in(static_cast<size_t>(params[kWinResidual]));
        if (!res || *res != o) return std::nullopt;
      }
      break;
    }
    case FastShape::kReshape: {
      // The target's elements: each a constant or never below 1 (so never
      // 0 or -1 at a run); one -1 at most, taking what the others leave,
      // exactly (the product of all equals the input's element count).
      if (s.inputs.size() < 2 || s.inputs[1] < 0 || !values_of[s.inputs[1]]) return std::nullopt;
      const Values& v = *values_of[s.inputs[1]];
      int infer_at = -1;
      DimExpr known(1);
      for (size_t i = 0; i < v.size(); ++i) {
        DimExpr d = v[i];
        if (auto k0 = v[i].AsConstant()) {
          if (*k0 == -1) {
            if (infer_at >= 0) return std::nullopt;
            infer_at = static_cast<int>(i);
            o.push_back(DimExpr(0));
            continue;
          }
          if (*k0 < -1) return std::nullopt;
          if (*k0 == 0) {
            if (i >= x.size()) return std::nullopt;
            d = x[i];
          }
        } else if (!at_least(d, 1)) {
          return std::nullopt;
        }
        known *= d;
        o.push_back(d);
      }
      const DimExpr total = ir::SymNumElements(x);
      if (infer_at >= 0) {
        if (!at_least(known, 1)) return std::nullopt;
        o[static_cast<size_t>(infer_at)] = ir::FloorDiv(total, known).Simplify(symbols);
        if (ir::SymNumElements(o) != total) return std::nullopt;
      } else if (known != total) {
        return std::nullopt;
      }
      break;
    }
    default:
      return std::nullopt;
  }
  // As declared (rank), never negative, within the bytes planned at every size.
  const int32_t t = s.outputs[0];
  if (o.size() != cs.outputs[0].shape.size()) return std::nullopt;
  for (const DimExpr& d : o)
    if (!d.valid() || !at_least(d, 0)) return std::nullopt;
  auto numel = ir::SymNumElements(o).Bounds(symbols);
  if (!numel.ok() || numel.value().hi > ops::kMaxElements ||
      static_cast<uint64_t>(numel.value().hi) * ir::DTypeSize(b.dtypes[t]) > b.bytes[t])
    return std::nullopt;
  return std::vector<SymShape>{std::move(o)};
}

}  // namespace

void CompileComputedValues(const format::ContextDesc& c, const SymbolicPlan& sym, CheckedPlan* bound) {
  CheckedPlan& b = *bound;
  b.value_program = ir::DimProgram();
  b.reach_value_at.clear();
  b.value_program_bound.clear();
  b.reach_walk.clear();
  b.unread_tensors.clear();
  b.walk_compiled = false;
  b.unread_steps = 0;
  b.proven_step_index.clear();
  b.proven_tensors.clear();
  b.proven_dim_index.clear();
  b.proven_dim_slot.clear();
  b.proven_scratch = 0;
  b.proven_guards.clear();
  b.verify_tensor.clear();
  b.verify_dim.clear();
  b.verify_slot.clear();
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
  const size_t value_outputs = exprs.size();
  // The steps whose output shapes follow from their operands' at every size
  // (ProvenOutputs): their dims become outputs of the same program, and a
  // resolution neither walks nor checks them. Their operands' shapes are
  // the inputs' (the symbols), the bound's for what no change of sizes
  // reaches, the proven ones', and the symbolic plan's for a step walked,
  // which a resolution checks against the walk's (verify_*) before it
  // takes the proven shapes that read them. A Reshape's target must be a
  // value the program gives or a weight.
  const size_t nt = c.tensors.size();
  std::vector<std::optional<SymShape>> shape_of(nt);
  std::vector<std::optional<Values>> values_of(nt);
  std::vector<bool> walked(nt, false);  // an output of a step the resolution walks
  for (size_t t = 0; t < nt; ++t) {
    shape_of[t] = ir::ToSymShape(b.infos[t].shape);
    if (b.small_constants[t] && !b.computed_tensors[t] && sym.values[t]) values_of[t] = sym.values[t];
  }
  for (int32_t t : c.inputs)
    if (t >= 0 && static_cast<size_t>(t) < nt) shape_of[t] = sym.shapes[t];
  std::vector<int32_t> proven_k;
  std::vector<std::pair<int32_t, SymShape>> proven_shapes;
  std::vector<int32_t> verify;  // walked outputs a proven step reads
  for (size_t k = 0; k < b.reach_steps.size(); ++k) {
    const format::StepDesc& s = c.steps[static_cast<size_t>(b.reach_steps[k])];
    if (at[k] >= 0) {  // the program's values: the same shapes at every size
      for (int32_t t : s.outputs) {
        shape_of[t] = ir::ToSymShape(b.infos[t].shape);
        values_of[t] = sym.values[t];
      }
      continue;
    }
    // A guarded step too: its guard is evaluated from its proven output
    // (CheckedPlan::proven_guards).
    std::optional<std::vector<SymShape>> o;
    if (!(b.reach_flags[k] & (CheckedPlan::kReachScratch | CheckedPlan::kReachComputed)))
      o = ProvenOutputs(c, b, k, shape_of, values_of, sym.symbols);
    if (o && (b.reach_flags[k] & CheckedPlan::kReachGuard) && (o->empty() || (*o)[0].size() != 4)) o.reset();
    // Its other operands (a normalization's scale, a GEMM's packed weights,
    // a Reshape's target) as at the bound at every size: what the bound's
    // check accepted for them holds.
    if (o) {
      const FastShape kind = static_cast<FastShape>(b.reach_fast[k]);
      const CheckedStep& cs = b.steps[static_cast<size_t>(b.reach_steps[k])];
      for (size_t i = 0; o && i < s.inputs.size(); ++i) {
        const int32_t t = s.inputs[i];
        if (t < 0) continue;
        const bool ruled =
            kind == FastShape::kBroadcast || kind == FastShape::kConcat ||
            ((kind == FastShape::kMatMul || kind == FastShape::kGather) && i < 2) || i == 0 ||
            (kind == FastShape::kWindow && static_cast<int64_t>(i) == b.reach_params[static_cast<size_t>(
                                                                       b.reach_param_at[k]) + kWinResidual]);
        const auto fixed = shape_of[t] ? ir::StaticShape(*shape_of[t]) : std::nullopt;
        if (!shape_of[t] || (!ruled && (!fixed || i >= cs.inputs.size() || *fixed != cs.inputs[i].shape))) o.reset();
      }
    }
    // A step whose operands' and outputs' shapes are the same at every size
    // is left to the walk, which passes it by where no value it reads
    // changed (a proven step counts as changed at every size).
    if (o) {
      bool varies = false;
      for (int32_t t : s.inputs)
        varies = varies || (t >= 0 && (!shape_of[t] || !ir::StaticShape(*shape_of[t])));
      for (const SymShape& shape : *o) varies = varies || !ir::StaticShape(shape);
      if (!varies) o.reset();
    }
    if (!o) {
      for (int32_t t : s.outputs)
        if (t >= 0) {
          shape_of[t] = sym.shapes[t];
          values_of[t] = std::nullopt;
          walked[t] = true;
        }
      continue;
    }
    for (int32_t t : s.inputs)
      if (t >= 0 && walked[t] && std::find(verify.begin(), verify.end(), t) == verify.end()) verify.push_back(t);
    proven_k.push_back(static_cast<int32_t>(k));
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      shape_of[s.outputs[i]] = (*o)[i];
      values_of[s.outputs[i]] = std::nullopt;
      proven_shapes.emplace_back(s.outputs[i], (*o)[i]);
    }
  }
  // Only the dims that are not constants: the others keep the bound's
  // (a resolution's dims start as a copy of the bound's).
  std::vector<int32_t> proven_dim_index, verify_tensor, verify_dim;
  for (const auto& [t, shape] : proven_shapes)
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d].IsConstant()) continue;
      proven_dim_index.push_back(b.dim_at[t] + static_cast<int32_t>(d));
      exprs.push_back(shape[d]);
    }
  for (int32_t t : verify)
    for (size_t d = 0; d < shape_of[t]->size(); ++d) {
      verify_tensor.push_back(t);
      verify_dim.push_back(static_cast<int32_t>(d));
      exprs.push_back((*shape_of[t])[d]);
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
  std::vector<int64_t> at_bound(value_outputs);
  for (size_t j = 0; j < at_bound.size(); ++j) at_bound[j] = slots[program.value().output_slot(j)];
  // The proven shapes and those checked at the bound: the bound's.
  for (const auto& [t, shape] : proven_shapes)
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d].IsConstant() && shape[d].constant_value() != b.infos[t].shape[d]) return;
  for (size_t j = 0; j < proven_dim_index.size(); ++j)
    if (slots[program.value().output_slot(value_outputs + j)] != b.dims[static_cast<size_t>(proven_dim_index[j])])
      return;
  for (size_t j = 0; j < verify_tensor.size(); ++j)
    if (slots[program.value().output_slot(value_outputs + proven_dim_index.size() + j)] !=
        b.infos[verify_tensor[j]].shape[static_cast<size_t>(verify_dim[j])])
      return;
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
    std::vector<bool> proven(at.size(), false);
    for (int32_t k : proven_k) proven[static_cast<size_t>(k)] = true;
    // Where the walk is compiled, also the program's steps whose values are
    // read only by steps it does not walk (the proven ones) at inputs whose
    // contents no kernel reads (a Reshape's target shape, a ConstantOfShape's
    // shape: ReadsInputContents), and are not the method's outputs: the
    // proven shapes are all such a reader takes from them. (Walking every
    // step, the resolution works them out: kReachValueUnread is not set.)
    std::vector<bool> contents_read(c.tensors.size(), false), walked_read(c.tensors.size(), false);
    for (size_t si = 0; si < c.steps.size(); ++si) {
      if (b.computed_steps[si]) continue;
      const auto& in = c.steps[si].inputs;
      for (size_t j = 0; j < in.size(); ++j)
        if (in[j] >= 0 && ReadsInputContents(*b.steps[si].def, j)) contents_read[static_cast<size_t>(in[j])] = true;
    }
    for (int32_t t : c.outputs) contents_read[static_cast<size_t>(t)] = true;
    for (size_t k = 0; k < at.size(); ++k)
      if (at[k] < 0 && !proven[k])
        for (int32_t j = b.reach_offsets[k]; j < b.reach_offsets[k + 1]; ++j)
          if (b.reach_inputs[j] >= 0) walked_read[static_cast<size_t>(b.reach_inputs[j])] = true;
    for (size_t k = 0; k < at.size(); ++k) {
      const auto& outs = c.steps[static_cast<size_t>(b.reach_steps[k])].outputs;
      bool passed_by = (b.reach_flags[k] & CheckedPlan::kReachValueUnread) != 0;
      if (!passed_by && at[k] >= 0 && !proven[k]) {
        passed_by = true;
        for (int32_t t : outs)
          passed_by = passed_by && !contents_read[static_cast<size_t>(t)] && !walked_read[static_cast<size_t>(t)];
      }
      // A step of the program whose every element is a constant (a Slice's
      // offset worked out from dims no change of sizes reaches) holds the
      // bound's values at every size: it is neither walked nor passed by.
      bool constant = !passed_by && at[k] >= 0 && !proven[k];
      for (size_t e = 0, n = 0; constant && e < outs.size(); ++e) {
        const size_t from = static_cast<size_t>(at[k]) + n;
        n += sym.values[outs[e]]->size();
        for (size_t j = from; constant && j < static_cast<size_t>(at[k]) + n; ++j) constant = exprs[j].IsConstant();
      }
      if (passed_by) {
        for (int32_t t : outs) b.unread_tensors.push_back(t);
        ++b.unread_steps;
      } else if (!proven[k] && !constant) {
        b.reach_walk.push_back(static_cast<int32_t>(k));
      }
    }
    const ir::DimProgram& pr = program.value();
    for (int32_t k : proven_k) {
      const int32_t si = b.reach_steps[static_cast<size_t>(k)];
      b.proven_step_index.push_back(si);
      b.proven_scratch = std::max(b.proven_scratch, (b.reach_scratch[static_cast<size_t>(k)] + 63) / 64 * 64);
      const format::StepDesc& s = c.steps[static_cast<size_t>(si)];
      if (s.guard.size() == 3)
        b.proven_guards.insert(b.proven_guards.end(), {si, s.outputs[0], s.guard[0], s.guard[1], s.guard[2]});
    }
    for (const auto& ps : proven_shapes) b.proven_tensors.push_back(ps.first);
    b.proven_dim_index = std::move(proven_dim_index);
    for (size_t j = 0; j < b.proven_dim_index.size(); ++j)
      b.proven_dim_slot.push_back(static_cast<int32_t>(pr.output_slot(value_outputs + j)));
    b.verify_tensor = std::move(verify_tensor);
    b.verify_dim = std::move(verify_dim);
    for (size_t j = 0; j < b.verify_tensor.size(); ++j)
      b.verify_slot.push_back(static_cast<int32_t>(pr.output_slot(value_outputs + b.proven_dim_index.size() + j)));
    b.walk_compiled = true;
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
