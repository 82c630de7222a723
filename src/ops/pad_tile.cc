// Ops that replicate or fill elements: Expand, Tile, Pad, Trilu. Index
// mappings are computed on the fly from O(rank) precomputed numbers, never as
// per-element tables, so create() cost does not grow with the output size.
#include <cmath>

#include "ops/broadcast.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

// --- Expand --------------------------------------------------------------------------

Status InferExpand(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  std::vector<int64_t> shape;
  bool present = false;
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, 1, "shape", &shape, &present));
  if (!present) return OpError(c.op, "shape is missing");
  for (int64_t d : shape)
    if (d < 0) return OpError(c.op, "shape has a negative dim");
  ir::Shape s;
  FCB_RETURN_IF_ERROR(BroadcastShapes(c.op, x.shape, shape, &s));
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateExpand(const CreateContext& c) {
  BroadcastPlan plan;
  FCB_RETURN_IF_ERROR(BroadcastPlan::Make(c.op, {&c.inputs[0].shape}, c.outputs[0].shape, &plan));
  Result<std::unique_ptr<Kernel>> r = OpUnsupported(c.op, "element size");
  DispatchBySize(ir::DTypeSize(c.inputs[0].dtype), [&](auto tag) {
    using T = decltype(tag);
    // At other shapes (Kernel::adapts) the input broadcast into the output
    // (operand 2: the shape input's values gave it) is planned at the run.
    r = MakeAdaptingKernel([made = plan](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      BroadcastPlan at;
      const BroadcastPlan* p = &made;
      if (ctx.shapes) {
        FCB_RETURN_IF_ERROR(BroadcastPlan::Make("Expand", ctx.shapes, 1, ctx.shapes[2], &at));
        p = &at;
      }
      const BroadcastPlan& plan = *p;
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      ctx.pool->ParallelFor(plan.items(), GrainFor(plan.piece), [&](int64_t s, int64_t e) {
        plan.ForRuns(s, e, [&](const int64_t* off, int64_t yo, int64_t n) {
          if (plan.run_stride[0]) std::memcpy(y + yo, x + off[0], static_cast<size_t>(n) * sizeof(T));
          else std::fill(y + yo, y + yo + n, x[off[0]]);
        });
      });
      return Status::Ok();
    });
  });
  return r;
}

// --- Tile --------------------------------------------------------------------------

Status InferTile(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  std::vector<int64_t> rep;
  bool present = false;
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, 1, "repeats", &rep, &present));
  if (!present) return OpError(c.op, "repeats is missing");
  if (rep.size() != x.shape.size()) return OpError(c.op, "repeats must have one entry per dim");
  ir::Shape s = x.shape;
  for (size_t d = 0; d < s.size(); ++d) {
    if (rep[d] < 0) return OpError(c.op, "repeats has a negative entry");
    if (s[d] && rep[d] > kMaxElements / s[d]) return OpError(c.op, "output too large");
    s[d] *= rep[d];
  }
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateTile(const CreateContext& c) {
  const ir::Shape in = c.inputs[0].shape, outs = c.outputs[0].shape;
  const int64_t total = c.outputs[0].numel();
  if (total == 0 || in.empty()) {
    const size_t bytes = static_cast<size_t>(total) * ir::DTypeSize(c.inputs[0].dtype);
    return MakeKernel([bytes](const RunContext&, const void* const* i, void* const* o) -> Status {
      CopyBytes(o[0], i[0], bytes);
      return Status::Ok();
    });
  }
  const std::vector<int64_t> in_st = DenseStrides(in);
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  const int64_t run = outs.back(), src_run = in.back();
  return MakeKernel([=](const RunContext& ctx, const void* const* i, void* const* o) -> Status {
    const uint8_t* x = static_cast<const uint8_t*>(i[0]);
    uint8_t* y = static_cast<uint8_t*>(o[0]);
    const int rank = static_cast<int>(in.size());
    ctx.pool->ParallelFor(total / run, GrainFor(run), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        int64_t rem = row, src = 0;
        for (int d = rank - 2; d >= 0; --d) {
          src += (rem % outs[d]) % in[d] * in_st[d];
          rem /= outs[d];
        }
        uint8_t* yr = y + row * run * es;
        const size_t chunk = static_cast<size_t>(src_run) * es;
        for (int64_t k = 0; k < run; k += src_run) std::memcpy(yr + k * es, x + src * es, chunk);
      }
    });
    return Status::Ok();
  });
}

// --- Pad -----------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

struct PadPlan {
  PadMode mode = PadMode::kConstant;
  ir::Shape in, out;
  std::vector<int64_t> begin;  // per dim: output index of input element 0 (may be negative)
  double value = 0;            // constant fill when no constant_value input
  bool value_input = false;    // constant_value read at run time from input 2
};

// Input index for output index o along a dim of size d; -1 = constant fill.
inline int64_t MapIndex(PadMode m, int64_t o, int64_t begin, int64_t d) {
  const int64_t i = o - begin;
  if (i >= 0 && i < d) return i;
  switch (m) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : d - 1;
    case PadMode::kWrap: return ((i % d) + d) % d;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      const int64_t p = 2 * (d - 1);
      int64_t r = ((i % p) + p) % p;
      return r < d ? r : p - r;
    }
  }
  return -1;
}

Status ParsePad(const InferContext& c, PadPlan* p) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  const std::string mode = c.attrs.GetString("mode", "constant");
  if (mode == "constant" || mode.empty()) p->mode = PadMode::kConstant;
  else if (mode == "reflect") p->mode = PadMode::kReflect;
  else if (mode == "edge") p->mode = PadMode::kEdge;
  else if (mode == "wrap") p->mode = PadMode::kWrap;
  else return OpError(c.op, "unknown mode '" + mode + "'");
  std::vector<int64_t> pads, axes;
  bool has_pads = false, has_axes = false;
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "pads", &pads, &has_pads));
  if (!has_pads) return OpError(c.op, "pads are required");
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, 3, "axes", &axes, &has_axes));
  if (has_axes) {
    std::vector<int64_t> norm;
    for (int64_t a : axes) {
      int64_t n;
      FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, a, r, &n));
      norm.push_back(n);
    }
    axes = norm;
    std::vector<int64_t> sorted = axes;
    FCB_RETURN_IF_ERROR(NormalizeAxes(c.op, sorted, r, &sorted));  // rejects duplicates
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const size_t na = axes.size();
  if (pads.size() != 2 * na)
    return OpError(c.op, "pads must have 2 entries per padded axis, got " + std::to_string(pads.size()));
  p->in = x.shape;
  p->out = x.shape;
  p->begin.assign(r, 0);
  for (size_t k = 0; k < na; ++k) {
    const int64_t a = axes[k], pb = pads[k], pe = pads[k + na];
    const int64_t d = x.shape[a];
    if (pb < -kMaxElements || pb > kMaxElements || pe < -kMaxElements || pe > kMaxElements)
      return OpError(c.op, "pads out of range");
    const int64_t o = d + pb + pe;
    if (o < 0) return OpError(c.op, "pads remove more than the whole dim " + std::to_string(a));
    if (d == 0 && o > 0 && p->mode != PadMode::kConstant)
      return OpError(c.op, "cannot " + mode + "-pad an empty dim");
    p->out[a] = o;
    p->begin[a] = pb;
  }
  double v = 0;
  bool has_value = false;
  const TensorInfo& cv = Input(c, 2);
  if (cv.present()) {
    if (cv.dtype != x.dtype || cv.numel() != 1) return OpError(c.op, "constant_value must be a scalar of the input's dtype");
    p->value_input = true;
    has_value = true;
  }
  if (!has_value) v = c.attrs.GetFloat("value", 0.0f);
  p->value = v;
  return Status::Ok();
}

Status InferPad(const InferContext& c, std::vector<TensorInfo>* outs) {
  PadPlan p;
  FCB_RETURN_IF_ERROR(ParsePad(c, &p));
  outs->push_back(TensorInfo{Input(c, 0).dtype, p.out});
  return Status::Ok();
}

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v);
  else return std::isfinite(v) && std::fabs(v) < 9e18 ? static_cast<T>(static_cast<int64_t>(v)) : T(0);
}

template <typename T>
Status RunPad(const RunContext& ctx, const PadPlan& p, const std::vector<int64_t>& in_st,
              const void* const* in, void* out) {
  const T* x = static_cast<const T*>(in[0]);
  T* y = static_cast<T*>(out);
  T fill = FromDouble<T>(p.value);
  if (p.value_input) fill = *static_cast<const T*>(in[2]);
  const int rank = static_cast<int>(p.out.size());
  const int64_t total = ir::NumElements(p.out);
  if (total == 0) return Status::Ok();
  if (rank == 0) {
    y[0] = x[0];
    return Status::Ok();
  }
  const int64_t run = p.out.back(), d_last = p.in.back(), b_last = p.begin.back();
  // Output positions [lo, hi) of the last dim copy input elements contiguously.
  const int64_t lo = std::clamp<int64_t>(b_last, 0, run);
  const int64_t hi = std::clamp<int64_t>(b_last + d_last, lo, run);
  ctx.pool->ParallelFor(total / run, GrainFor(run), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      T* yr = y + row * run;
      int64_t rem = row, src = 0;
      bool constant_row = false;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t i = MapIndex(p.mode, rem % p.out[d], p.begin[d], p.in[d]);
        rem /= p.out[d];
        if (i < 0) constant_row = true;
        else src += i * in_st[d];
      }
      if (constant_row) {
        std::fill(yr, yr + run, fill);
        continue;
      }
      const T* xr = x + src;
      for (int64_t o = 0; o < lo; ++o) {
        const int64_t i = MapIndex(p.mode, o, b_last, d_last);
        yr[o] = i < 0 ? fill : xr[i];
      }
      if (hi > lo) std::memcpy(yr + lo, xr + (lo - b_last), static_cast<size_t>(hi - lo) * sizeof(T));
      for (int64_t o = hi; o < run; ++o) {
        const int64_t i = MapIndex(p.mode, o, b_last, d_last);
        yr[o] = i < 0 ? fill : xr[i];
      }
    }
  });
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreatePad(const CreateContext& c) {
  PadPlan p;
  FCB_RETURN_IF_ERROR(ParsePad(AsInfer(c), &p));
  if (p.out.size() > static_cast<size_t>(kMaxRank)) return OpUnsupported(c.op, "rank too high");
  const std::vector<int64_t> in_st = DenseStrides(p.in);
  const DType t = c.inputs[0].dtype;
  Result<std::unique_ptr<Kernel>> r = OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(t));
  auto make = [&](auto tag) {
    using T = decltype(tag);
    r = MakeKernel([p, in_st](const RunContext& ctx, const void* const* in, void* const* out) {
      return RunPad<T>(ctx, p, in_st, in, out[0]);
    });
  };
  if (t == DType::kBool) make(uint8_t{});
  else DispatchNumeric(t, make);
  return r;
}

// --- Trilu ---------------------------------------------------------------------------

Status InferTrilu(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (x.shape.size() < 2) return OpError(c.op, "input must have rank >= 2");
  const TensorInfo& k = Input(c, 1);
  if (k.present() && (k.dtype != DType::kI64 || k.numel() != 1))
    return OpError(c.op, "k must be an int64 scalar");
  outs->push_back(x);
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateTrilu(const CreateContext& c) {
  const ir::Shape& s = c.inputs[0].shape;
  const int64_t rows = s[s.size() - 2], cols = s.back();
  const int64_t mats = rows * cols == 0 ? 0 : c.inputs[0].numel() / (rows * cols);
  const bool upper = c.attrs.GetInt("upper", 1) != 0;
  const bool has_k = c.inputs.size() > 1 && c.inputs[1].present();
  Result<std::unique_ptr<Kernel>> r = OpUnsupported(c.op, "element size");
  DispatchBySize(ir::DTypeSize(c.inputs[0].dtype), [&](auto tag) {
    using T = decltype(tag);
    r = MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      // k is read at run time; clamp keeps j - i comparisons overflow-free.
      const int64_t k = has_k ? std::clamp<int64_t>(*static_cast<const int64_t*>(in[1]),
                                                    -kMaxElements, kMaxElements)
                              : 0;
      const T* x = static_cast<const T*>(in[0]);
      T* y = static_cast<T*>(out[0]);
      ctx.pool->ParallelFor(mats * rows, GrainFor(cols), [&](int64_t b, int64_t e) {
        for (int64_t mr = b; mr < e; ++mr) {
          const int64_t i = mr % rows;
          const T* xr = x + mr * cols;
          T* yr = y + mr * cols;
          for (int64_t j = 0; j < cols; ++j) {
            const bool keep = upper ? j - i >= k : j - i <= k;
            yr[j] = keep ? xr[j] : T(0);
          }
        }
      });
      return Status::Ok();
    });
  });
  return r;
}

}  // namespace

void RegisterPadTileOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferExpand, CreateExpand>("Expand", 2, 2));
  ops->push_back(Def<InferTile, CreateTile>("Tile", 2, 2));
  ops->push_back(Def<InferPad, CreatePad>("Pad", 1, 4));
  ops->push_back(Def<InferTrilu, CreateTrilu>("Trilu", 1, 2));
}

}  // namespace fcb::ops
