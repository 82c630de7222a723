// Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) and ArgMax/ArgMin.
//
// create() drops size-1 dims and merges neighbouring dims of the same kind
// (kept / reduced). Most models then reduce one contiguous block:
//   [outer, R]        - each output is a contiguous run (tight scalar loop);
//   [outer, R, inner] - whole rows of `inner` outputs accumulate at once
//                       (vectorizable), e.g. a channel reduction of NCHW.
// Any other pattern walks each output's reduced elements with an odometer.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/strided.h"

namespace fcb::ops {
namespace {

using ir::DType;

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

bool RedFromName(std::string_view op, Red* r) {
  static const std::pair<const char*, Red> kNames[] = {
      {"ReduceSum", Red::kSum},   {"ReduceMean", Red::kMean}, {"ReduceMax", Red::kMax},
      {"ReduceMin", Red::kMin},   {"ReduceProd", Red::kProd}, {"ReduceL1", Red::kL1},
      {"ReduceL2", Red::kL2},     {"ReduceSumSquare", Red::kSumSquare},
      {"ReduceLogSum", Red::kLogSum}, {"ReduceLogSumExp", Red::kLogSumExp}};
  for (const auto& [n, v] : kNames)
    if (op == n) {
      *r = v;
      return true;
    }
  return false;
}

// Accumulation rules; integer sums and products wrap instead of overflowing.
template <Red K, typename A>
struct RedOp {
  static A Init() {
    if constexpr (K == Red::kProd) return A(1);
    if constexpr (K == Red::kMax)
      return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity()
                                         : std::numeric_limits<A>::lowest();
    if constexpr (K == Red::kMin)
      return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity()
                                         : std::numeric_limits<A>::max();
    return A(0);
  }
  static A Add(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
  static A Mul(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
  static A Step(A acc, A v) {
    switch (K) {
      case Red::kMax: return v > acc ? v : acc;
      case Red::kMin: return v < acc ? v : acc;
      case Red::kProd: return Mul(acc, v);
      case Red::kL1: return Add(acc, v < 0 ? A(0) - v : v);
      case Red::kL2: case Red::kSumSquare: return Add(acc, Mul(v, v));
      default: return Add(acc, v);
    }
  }
  static A Final(A acc, int64_t count) {
    switch (K) {
      case Red::kMean:
        if constexpr (std::is_integral_v<A>) return count ? acc / static_cast<A>(count) : A(0);
        else return acc / static_cast<A>(count);
      case Red::kL2: return static_cast<A>(std::sqrt(acc));
      case Red::kLogSum: return static_cast<A>(std::log(acc));
      default: return acc;
    }
  }
};

struct ReduceParams {
  Red kind;
  bool noop = false;            // empty axes with noop_with_empty_axes: identity
  std::vector<bool> reduced;    // per input dim
};

Status ParseReduce(const InferContext& c, ReduceParams* p, ir::Shape* out_shape) {
  if (!RedFromName(c.op, &p->kind)) return Internal("not a reduce op");
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  const bool float_only = p->kind == Red::kL2 || p->kind == Red::kLogSum || p->kind == Red::kLogSumExp;
  const bool ok = IsFloat(x.dtype) ||
                  (!float_only && (x.dtype == DType::kI32 || x.dtype == DType::kI64));
  if (!ok) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  const int64_t r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  bool present = false;
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "axes", &axes, &present));
  const bool keepdims = c.attrs.GetInt("keepdims", 1) != 0;
  p->reduced.assign(r, false);
  if (axes.empty()) {
    if (c.attrs.GetInt("noop_with_empty_axes", 0) != 0) p->noop = true;
    else p->reduced.assign(r, true);
  } else {
    FCB_RETURN_IF_ERROR(NormalizeAxes(c.op, std::move(axes), r, &axes));
    for (int64_t a : axes) p->reduced[a] = true;
  }
  out_shape->clear();
  for (int64_t d = 0; d < r; ++d) {
    if (!p->reduced[d]) out_shape->push_back(x.shape[d]);
    else if (keepdims) out_shape->push_back(1);
  }
  if (p->kind == Red::kMax || p->kind == Red::kMin) {
    // Like ONNX Runtime: no identity element worth inventing for an empty max/min.
    for (int64_t d = 0; d < r; ++d)
      if (p->reduced[d] && x.shape[d] == 0 && ir::NumElements(*out_shape) != 0)
        return OpError(c.op, "cannot reduce an empty dim");
  }
  return Status::Ok();
}

Status InferReduce(const InferContext& c, std::vector<TensorInfo>* outs) {
  ReduceParams p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ParseReduce(c, &p, &s));
  outs->push_back(TensorInfo{Input(c, 0).dtype, p.noop ? Input(c, 0).shape : s});
  return Status::Ok();
}

// Merged view of the input: alternating kept / reduced dims (size-1 dims dropped).
struct ReduceLayout {
  std::vector<int64_t> dims;
  std::vector<bool> red;
  int64_t count = 1;  // reduced elements per output
  int64_t outputs = 1;
};

ReduceLayout MakeLayout(const ir::Shape& s, const std::vector<bool>& reduced) {
  ReduceLayout l;
  for (size_t d = 0; d < s.size(); ++d) {
    if (reduced[d]) l.count *= s[d];
    else l.outputs *= s[d];
    if (s[d] == 1) continue;
    if (!l.dims.empty() && l.red.back() == reduced[d]) l.dims.back() *= s[d];
    else {
      l.dims.push_back(s[d]);
      l.red.push_back(reduced[d]);
    }
  }
  return l;
}

template <Red K, typename T>
void ReduceKernel(const RunContext& ctx, const ReduceLayout& l, const std::vector<int64_t>& kdims,
                  const std::vector<int64_t>& kstr, const std::vector<int64_t>& rdims,
                  const std::vector<int64_t>& rstr, const T* x, T* y) {
  using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  using Op = RedOp<K, A>;
  const int64_t R = l.count;
  const size_t nd = l.dims.size();
  if (l.outputs == 0) return;
  if (R == 0) {
    for (int64_t o = 0; o < l.outputs; ++o) y[o] = static_cast<T>(Op::Final(Op::Init(), 0));
    return;
  }
  // Pattern [outer, R]: contiguous runs.
  if (nd == 0 || R == 1 || (l.red.back() && (nd == 1 || (nd == 2 && !l.red[0])))) {
    ctx.pool->ParallelFor(l.outputs, GrainFor(R), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* p = x + o * R;
        A acc = Op::Init();
        for (int64_t r = 0; r < R; ++r) acc = Op::Step(acc, static_cast<A>(p[r]));
        y[o] = static_cast<T>(Op::Final(acc, R));
      }
    });
    return;
  }
  // Pattern [outer, R, inner]: rows accumulate into the output row (type T).
  if ((nd == 2 && l.red[0]) || (nd == 3 && l.red[1])) {
    const int64_t inner = l.dims.back();
    const int64_t outer = l.outputs / inner;
    using OpT = RedOp<K, T>;
    ctx.pool->ParallelFor(outer, GrainFor(R * inner), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        T* yr = y + o * inner;
        const T* xo = x + o * R * inner;
        for (int64_t i = 0; i < inner; ++i) yr[i] = OpT::Init();
        for (int64_t r = 0; r < R; ++r) {
          const T* xr = xo + r * inner;
          for (int64_t i = 0; i < inner; ++i) yr[i] = OpT::Step(yr[i], xr[i]);
        }
        for (int64_t i = 0; i < inner; ++i)
          yr[i] = static_cast<T>(Op::Final(static_cast<A>(yr[i]), R));
      }
    });
    return;
  }
  // General pattern: per output, walk the reduced dims.
  ctx.pool->ParallelFor(l.outputs, GrainFor(R), [&](int64_t b, int64_t e) {
    Odometer<1> keep(kdims, {&kstr});
    keep.Seek(b);
    for (int64_t o = b; o < e; ++o, keep.Next()) {
      Odometer<1> red(rdims, {&rstr});
      red.Seek(0);
      A acc = Op::Init();
      for (int64_t r = 0; r < R; ++r, red.Next())
        acc = Op::Step(acc, static_cast<A>(x[keep.off[0] + red.off[0]]));
      y[o] = static_cast<T>(Op::Final(acc, R));
    }
  });
}

// LogSumExp needs the max first; it always takes the general walk.
template <typename T>
void LogSumExpKernel(const RunContext& ctx, const ReduceLayout& l, const std::vector<int64_t>& kdims,
                     const std::vector<int64_t>& kstr, const std::vector<int64_t>& rdims,
                     const std::vector<int64_t>& rstr, const T* x, T* y) {
  const int64_t R = l.count;
  ctx.pool->ParallelFor(l.outputs, GrainFor(R), [&](int64_t b, int64_t e) {
    Odometer<1> keep(kdims, {&kstr});
    keep.Seek(b);
    for (int64_t o = b; o < e; ++o, keep.Next()) {
      double m = -std::numeric_limits<double>::infinity();
      Odometer<1> red(rdims, {&rstr});
      red.Seek(0);
      for (int64_t r = 0; r < R; ++r, red.Next()) m = std::max<double>(m, x[keep.off[0] + red.off[0]]);
      if (!std::isfinite(m)) {
        y[o] = static_cast<T>(m);
        continue;
      }
      double s = 0;
      red.Seek(0);
      for (int64_t r = 0; r < R; ++r, red.Next()) s += std::exp(x[keep.off[0] + red.off[0]] - m);
      y[o] = static_cast<T>(m + std::log(s));
    }
  });
}

Result<std::unique_ptr<Kernel>> CreateReduce(const CreateContext& c) {
  ReduceParams p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ParseReduce(AsInfer(c), &p, &s));
  if (p.noop) {
    const size_t bytes = static_cast<size_t>(c.inputs[0].bytes());
    return MakeKernel([bytes](const RunContext&, const void* const* in, void* const* out) -> Status {
      CopyBytes(out[0], in[0], bytes);
      return Status::Ok();
    });
  }
  ReduceLayout l = MakeLayout(c.inputs[0].shape, p.reduced);
  // Odometer views of the kept and reduced dims (general pattern).
  std::vector<int64_t> kdims, kstr, rdims, rstr;
  {
    int64_t st = 1;
    std::vector<int64_t> strides(l.dims.size());
    for (size_t d = l.dims.size(); d-- > 0;) {
      strides[d] = st;
      st *= l.dims[d];
    }
    for (size_t d = 0; d < l.dims.size(); ++d) {
      (l.red[d] ? rdims : kdims).push_back(l.dims[d]);
      (l.red[d] ? rstr : kstr).push_back(strides[d]);
    }
  }
  if (kdims.size() > static_cast<size_t>(kMaxRank) || rdims.size() > static_cast<size_t>(kMaxRank))
    return OpUnsupported(c.op, "reduction pattern too complex");
  const DType t = c.inputs[0].dtype;
  const Red k = p.kind;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      switch (k) {
        case Red::kSum: ReduceKernel<Red::kSum>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kMean: ReduceKernel<Red::kMean>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kMax: ReduceKernel<Red::kMax>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kMin: ReduceKernel<Red::kMin>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kProd: ReduceKernel<Red::kProd>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kL1: ReduceKernel<Red::kL1>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kL2: ReduceKernel<Red::kL2>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kSumSquare: ReduceKernel<Red::kSumSquare>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kLogSum: ReduceKernel<Red::kLogSum>(ctx, l, kdims, kstr, rdims, rstr, x, y); break;
        case Red::kLogSumExp:
          if constexpr (std::is_floating_point_v<T>)
            LogSumExpKernel(ctx, l, kdims, kstr, rdims, rstr, x, y);
          break;
      }
    };
    switch (t) {
      case DType::kF32: run(float{}); break;
      case DType::kF64: run(double{}); break;
      case DType::kI32: run(int32_t{}); break;
      case DType::kI64: run(int64_t{}); break;
      default: return Internal("reduce dtype");
    }
    return Status::Ok();
  });
}

// --- ArgMax, ArgMin --------------------------------------------------------------------

Status InferArg(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  int64_t axis;
  FCB_RETURN_IF_ERROR(AxisInput(c, IsNumeric, 0, &axis));
  if (x.shape[axis] == 0) return OpError(c.op, "cannot take the arg of an empty axis");
  ir::Shape s = x.shape;
  if (c.attrs.GetInt("keepdims", 1) != 0) s[axis] = 1;
  else s.erase(s.begin() + axis);
  outs->push_back(TensorInfo{DType::kI64, std::move(s)});
  return Status::Ok();
}

template <typename T>
void RunArg(const RunContext& ctx, const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
            bool is_max, bool last) {
  ctx.pool->ParallelFor(outer * inner, GrainFor(n), [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / inner, i = it % inner;
      const T* p = x + o * n * inner + i;
      T best = p[0];
      int64_t at = 0;
      for (int64_t a = 1; a < n; ++a) {
        const T v = p[a * inner];
        const bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
        if (better) {
          best = v;
          at = a;
        }
      }
      y[it] = at;
    }
  });
}

Result<std::unique_ptr<Kernel>> CreateArg(const CreateContext& c) {
  const ir::Shape& s = c.inputs[0].shape;
  int64_t axis;
  FCB_RETURN_IF_ERROR(
      NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), static_cast<int64_t>(s.size()), &axis));
  const int64_t outer = SafeProduct(s, 0, static_cast<size_t>(axis));
  const int64_t inner = SafeProduct(s, static_cast<size_t>(axis) + 1, s.size());
  const int64_t n = s[axis];
  const bool is_max = c.op == "ArgMax";
  const bool last = c.attrs.GetInt("select_last_index", 0) != 0;
  const DType t = c.inputs[0].dtype;
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const bool ok = DispatchNumeric(t, [&](auto tag) {
      using T = decltype(tag);
      RunArg(ctx, static_cast<const T*>(in[0]), static_cast<int64_t*>(out[0]), outer, n, inner,
             is_max, last);
    });
    return ok ? Status::Ok() : Internal("ArgMax dtype");
  });
}

}  // namespace

void RegisterReduceOps(std::vector<OpDef>* ops) {
  for (const char* name : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                           "ReduceLogSumExp"})
    ops->push_back(Def<InferReduce, CreateReduce>(name, 1, 2));
  ops->push_back(Def<InferArg, CreateArg>("ArgMax", 1, 1));
  ops->push_back(Def<InferArg, CreateArg>("ArgMin", 1, 1));
}

}  // namespace fcb::ops
