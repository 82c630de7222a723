// Data-moving ops that copy blocks of bytes: Concat, Split, Gather, Slice.
// They never look at element values (except Gather's indices), so one kernel
// serves every dtype.
#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/strided.h"

namespace fcb::ops {
namespace {

using ir::DType;

// --- Concat -------------------------------------------------------------------------

Status InferConcat(const InferContext& c, std::vector<TensorInfo>* outs) {
  if (c.inputs.empty() || !Input(c, 0).present()) return OpError(c.op, "needs an input");
  const TensorInfo& x0 = Input(c, 0);
  const int64_t r = static_cast<int64_t>(x0.shape.size());
  if (r == 0) return OpError(c.op, "cannot concatenate scalars");
  if (!c.attrs.Has("axis")) return OpError(c.op, "attribute 'axis' is required");
  int64_t axis;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), r, &axis));
  ir::Shape s = x0.shape;
  s[axis] = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const TensorInfo& x = c.inputs[i];
    if (!x.present()) return OpError(c.op, "input " + std::to_string(i) + " is missing");
    if (x.dtype != x0.dtype) return OpError(c.op, "inputs have different dtypes");
    if (x.shape.size() != x0.shape.size()) return OpError(c.op, "inputs have different ranks");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && x.shape[d] != x0.shape[d])
        return OpError(c.op, "input " + std::to_string(i) + " shape " +
                                 ir::ShapeToString(x.shape) + " does not match " +
                                 ir::ShapeToString(x0.shape));
    s[axis] += x.shape[axis];
    if (s[axis] > kMaxElements) return OpError(c.op, "output too large");
  }
  outs->push_back(TensorInfo{x0.dtype, std::move(s)});
  return Status::Ok();
}

// Shared by Concat (many blocks in, one out) and Split (one in, many out):
// per outer index, the tensor's row is the concatenation of the pieces' blocks.
struct BlockPlan {
  int64_t outer = 0;
  size_t row_bytes = 0;
  std::vector<size_t> block, offset;  // per piece: bytes per outer index, offset in the row
};

BlockPlan MakeBlocks(const ir::Shape& whole, int64_t axis, const std::vector<int64_t>& sizes,
                     size_t es) {
  BlockPlan p;
  p.outer = SafeProduct(whole, 0, static_cast<size_t>(axis));
  const int64_t inner = SafeProduct(whole, static_cast<size_t>(axis) + 1, whole.size());
  size_t off = 0;
  for (int64_t n : sizes) {
    p.block.push_back(static_cast<size_t>(n * inner) * es);
    p.offset.push_back(off);
    off += p.block.back();
  }
  p.row_bytes = off;
  return p;
}

// Per outer index o, piece i's block[i] bytes at in[i] + o * block[i] go to
// y + o * row_bytes + offset[i].
void ConcatRows(const RunContext& ctx, const void* const* in, uint8_t* y, int64_t outer, size_t row_bytes,
                const size_t* block, const size_t* offset, size_t pieces) {
  ctx.pool->ParallelFor(outer, GrainFor(static_cast<int64_t>(row_bytes), 1 << 16), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      for (size_t i = 0; i < pieces; ++i)
        if (block[i])
          std::memcpy(y + o * row_bytes + offset[i], static_cast<const uint8_t*>(in[i]) + o * block[i], block[i]);
  });
}

// Concats of at most this many inputs, and Splits of at most this many
// outputs, adapt to other shapes (Kernel::adapts: their blocks are worked
// out on the stack at such a run).
constexpr size_t kAdaptingConcatInputs = 16;

Result<std::unique_ptr<Kernel>> CreateConcat(const CreateContext& c) {
  int64_t axis;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0),
                                    static_cast<int64_t>(c.inputs[0].shape.size()), &axis));
  std::vector<int64_t> sizes;
  for (const auto& x : c.inputs) sizes.push_back(x.shape[axis]);
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  BlockPlan p = MakeBlocks(c.outputs[0].shape, axis, sizes, es);
  auto run = [p = std::move(p), axis, es](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    const size_t pieces = p.block.size();
    if (!ctx.shapes) {
      ConcatRows(ctx, in, y, p.outer, p.row_bytes, p.block.data(), p.offset.data(), pieces);
      return Status::Ok();
    }
    const std::span<const int64_t> whole = ctx.shapes[pieces];
    const size_t a = static_cast<size_t>(axis);
    const size_t inner = static_cast<size_t>(SafeProduct(whole, a + 1, whole.size())) * es;
    size_t block[kAdaptingConcatInputs], offset[kAdaptingConcatInputs], off = 0;
    for (size_t i = 0; i < pieces; ++i) {
      block[i] = static_cast<size_t>(ctx.shapes[i][a]) * inner;
      offset[i] = off;
      off += block[i];
    }
    ConcatRows(ctx, in, y, SafeProduct(whole, 0, a), off, block, offset, pieces);
    return Status::Ok();
  };
  if (c.inputs.size() <= kAdaptingConcatInputs) return MakeAdaptingKernel(std::move(run));
  return MakeKernel(std::move(run));
}

// --- Split ---------------------------------------------------------------------------

Status SplitSizes(const InferContext& c, int64_t* axis, std::vector<int64_t>* sizes) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), r, axis));
  const int64_t dim = x.shape[*axis];
  const int64_t n = c.num_outputs;
  bool present = false;
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "split", sizes, &present));
  if (present) {
    if (static_cast<int64_t>(sizes->size()) != n)
      return OpError(c.op, "split has " + std::to_string(sizes->size()) + " entries for " +
                               std::to_string(n) + " outputs");
    int64_t sum = 0;
    for (int64_t s : *sizes) {
      if (s < 0 || s > dim) return OpError(c.op, "split has an invalid size");
      sum += s;
    }
    if (sum != dim) return OpError(c.op, "split sizes do not add up to " + std::to_string(dim));
    return Status::Ok();
  }
  if (n <= 0) return OpError(c.op, "no outputs");
  sizes->assign(n, 0);
  if (c.attrs.Has("num_outputs")) {
    // Opset 18: chunks of ceil(dim / n), the last one smaller.
    if (c.attrs.GetInt("num_outputs", 0) != n)
      return OpError(c.op, "num_outputs does not match the node's outputs");
    const int64_t chunk = (dim + n - 1) / n;
    int64_t left = dim;
    for (int64_t i = 0; i < n; ++i) {
      (*sizes)[i] = std::min(chunk, left);
      left -= (*sizes)[i];
    }
    if (n > 1 && (*sizes)[n - 1] == 0 && dim > 0)
      return OpError(c.op, "cannot split " + std::to_string(dim) + " into " + std::to_string(n));
    return Status::Ok();
  }
  if (dim % n != 0)
    return OpError(c.op, "dim " + std::to_string(dim) + " does not split evenly into " +
                             std::to_string(n));
  for (auto& s : *sizes) s = dim / n;
  return Status::Ok();
}

Status InferSplit(const InferContext& c, std::vector<TensorInfo>* outs) {
  int64_t axis;
  std::vector<int64_t> sizes;
  FCB_RETURN_IF_ERROR(SplitSizes(c, &axis, &sizes));
  for (int64_t s : sizes) {
    TensorInfo t = Input(c, 0);
    t.shape[axis] = s;
    outs->push_back(t);
  }
  return Status::Ok();
}

// Per outer index o, piece i's block[i] bytes at x + o * row_bytes +
// offset[i] go to out[i] + o * block[i] (Concat's rows the other way).
void SplitRows(const RunContext& ctx, const uint8_t* x, void* const* out, int64_t outer, size_t row_bytes,
               const size_t* block, const size_t* offset, size_t pieces) {
  ctx.pool->ParallelFor(outer, GrainFor(static_cast<int64_t>(row_bytes), 1 << 16), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      for (size_t i = 0; i < pieces; ++i)
        if (block[i]) std::memcpy(static_cast<uint8_t*>(out[i]) + o * block[i], x + o * row_bytes + offset[i], block[i]);
  });
}

Result<std::unique_ptr<Kernel>> CreateSplit(const CreateContext& c) {
  int64_t axis;
  std::vector<int64_t> sizes;
  FCB_RETURN_IF_ERROR(SplitSizes(AsInfer(c), &axis, &sizes));
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  BlockPlan p = MakeBlocks(c.inputs[0].shape, axis, sizes, es);
  // At other shapes (Kernel::adapts) each piece's size is its output's dim
  // along the axis (operands after the inputs), whatever gave it.
  auto run = [p = std::move(p), axis, es, first_out = c.inputs.size()](const RunContext& ctx, const void* const* in,
                                                                         void* const* out) -> Status {
    const uint8_t* x = static_cast<const uint8_t*>(in[0]);
    const size_t pieces = p.block.size();
    if (!ctx.shapes) {
      SplitRows(ctx, x, out, p.outer, p.row_bytes, p.block.data(), p.offset.data(), pieces);
      return Status::Ok();
    }
    const std::span<const int64_t> whole = ctx.shapes[0];
    const size_t a = static_cast<size_t>(axis);
    const size_t inner = static_cast<size_t>(SafeProduct(whole, a + 1, whole.size())) * es;
    size_t block[kAdaptingConcatInputs], offset[kAdaptingConcatInputs], off = 0;
    for (size_t i = 0; i < pieces; ++i) {
      block[i] = static_cast<size_t>(ctx.shapes[first_out + i][a]) * inner;
      offset[i] = off;
      off += block[i];
    }
    SplitRows(ctx, x, out, SafeProduct(whole, 0, a), off, block, offset, pieces);
    return Status::Ok();
  };
  if (sizes.size() <= kAdaptingConcatInputs) return MakeAdaptingKernel(std::move(run));
  return MakeKernel(std::move(run));
}

// --- Gather --------------------------------------------------------------------------

Status InferGather(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo &x = Input(c, 0), &idx = Input(c, 1);
  if (!x.present() || !idx.present()) return OpError(c.op, "needs data and indices");
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32)
    return OpError(c.op, "indices must be int64 or int32");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  if (r == 0) return OpError(c.op, "data must have rank >= 1");
  int64_t axis;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), r, &axis));
  ir::Shape s(x.shape.begin(), x.shape.begin() + axis);
  s.insert(s.end(), idx.shape.begin(), idx.shape.end());
  s.insert(s.end(), x.shape.begin() + axis + 1, x.shape.end());
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

template <typename I>
Status RunGather(const RunContext& ctx, const uint8_t* x, const I* idx, uint8_t* y, int64_t outer,
                 int64_t dim, int64_t n_idx, size_t block) {
  // Indices come from the running model: check them all before copying.
  for (int64_t j = 0; j < n_idx; ++j) {
    const int64_t v = idx[j];
    if (v < -dim || v >= dim)
      return InvalidArgument("Gather: index " + std::to_string(v) + " is out of range for a dim of " +
                             std::to_string(dim));
  }
  ctx.pool->ParallelFor(outer * n_idx, GrainFor(static_cast<int64_t>(block), 1 << 16),
                        [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / n_idx, j = it % n_idx;
      int64_t v = idx[j];
      if (v < 0) v += dim;
      std::memcpy(y + it * block, x + (o * dim + v) * block, block);
    }
  });
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateGather(const CreateContext& c) {
  const ir::Shape& xs = c.inputs[0].shape;
  int64_t axis;
  FCB_RETURN_IF_ERROR(
      NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), static_cast<int64_t>(xs.size()), &axis));
  const int64_t outer = SafeProduct(xs, 0, static_cast<size_t>(axis));
  const int64_t dim = xs[axis];
  const size_t block = static_cast<size_t>(SafeProduct(xs, static_cast<size_t>(axis) + 1, xs.size())) *
                       ir::DTypeSize(c.inputs[0].dtype);
  const int64_t n_idx = c.inputs[1].numel();
  const bool i64 = c.inputs[1].dtype == DType::kI64;
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  const size_t a = static_cast<size_t>(axis);
  // The indices are read at run time (never kept): any values, any shapes.
  return MakeAdaptingKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const uint8_t* x = static_cast<const uint8_t*>(in[0]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    int64_t o = outer, d = dim, n = n_idx;
    size_t b = block;
    if (ctx.shapes) {
      const std::span<const int64_t> s = ctx.shapes[0];
      o = SafeProduct(s, 0, a), d = s[a], n = ir::NumElements(ctx.shapes[1]);
      b = static_cast<size_t>(SafeProduct(s, a + 1, s.size())) * es;
    }
    return i64 ? RunGather(ctx, x, static_cast<const int64_t*>(in[1]), y, o, d, n, b)
               : RunGather(ctx, x, static_cast<const int32_t*>(in[1]), y, o, d, n, b);
  });
}

// --- Slice ---------------------------------------------------------------------------

struct SliceAxis {
  int64_t start = 0, step = 1, count = 0;
};

// Per dim of an input of shape `x`: first element, step and element count,
// by ONNX's clamping rules.
// Without axes, starts apply to the first dims; without steps, every step is 1.
Status SliceAxesOf(std::string_view op, std::span<const int64_t> x, const std::vector<int64_t>& starts,
                   const std::vector<int64_t>& ends, const std::vector<int64_t>& axes, bool has_axes,
                   const std::vector<int64_t>& steps, bool has_steps, std::vector<SliceAxis>* out) {
  const int64_t r = static_cast<int64_t>(x.size());
  const size_t n = starts.size();
  if (ends.size() != n) return OpError(op, "starts and ends differ in length");
  if (!has_axes && static_cast<int64_t>(n) > r) return OpError(op, "more starts than dims");
  if ((has_axes && axes.size() != n) || (has_steps && steps.size() != n))
    return OpError(op, "axes/steps differ in length from starts");
  out->assign(r, SliceAxis{});
  std::vector<bool> seen(r, false);
  for (int64_t d = 0; d < r; ++d) (*out)[d] = SliceAxis{0, 1, x[d]};
  for (size_t i = 0; i < n; ++i) {
    int64_t a;
    FCB_RETURN_IF_ERROR(NormalizeAxis(op, has_axes ? axes[i] : static_cast<int64_t>(i), r, &a));
    if (seen[a]) return OpError(op, "axes contain a duplicate");
    seen[a] = true;
    const int64_t dim = x[a], step = has_steps ? steps[i] : 1;
    if (step == 0) return OpError(op, "step is zero");
    if (step == INT64_MIN) return OpError(op, "step out of range");
    if (dim == 0) {
      (*out)[a] = SliceAxis{0, step, 0};
      continue;
    }
    int64_t first;
    const int64_t count = SliceAxisCount(dim, starts[i], ends[i], step, &first);
    (*out)[a] = SliceAxis{first, step, count};
  }
  return Status::Ok();
}

// Slice's starts, ends, axes and steps (inputs 1 to 4, or the attributes of
// opsets before 10).
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_starts = false, has_ends = false, has_axes = false, has_steps = false;
};
Status SliceParamsOf(const InferContext& c, SliceParams* p) {
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "starts", &p->starts, &p->has_starts));
  FCB_RETURN_IF_ERROR(IntsParam(c, 2, "ends", &p->ends, &p->has_ends));
  FCB_RETURN_IF_ERROR(IntsParam(c, 3, "axes", &p->axes, &p->has_axes));
  return ConstIntsInput(c, 4, "steps", &p->steps, &p->has_steps);
}

// The axes at the input's shape; `params`, where given, receives what they were read from.
Status ParseSlice(const InferContext& c, std::vector<SliceAxis>* out, SliceParams* params = nullptr) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "data input is missing");
  SliceParams p;
  FCB_RETURN_IF_ERROR(SliceParamsOf(c, &p));
  if (!p.has_starts || !p.has_ends) return OpError(c.op, "starts and ends are required");
  FCB_RETURN_IF_ERROR(SliceAxesOf(c.op, x.shape, p.starts, p.ends, p.axes, p.has_axes, p.steps, p.has_steps, out));
  if (params) *params = std::move(p);
  return Status::Ok();
}


Status InferSlice(const InferContext& c, std::vector<TensorInfo>* outs) {
  std::vector<SliceAxis> ax;
  FCB_RETURN_IF_ERROR(ParseSlice(c, &ax));
  ir::Shape s;
  for (const auto& a : ax) s.push_back(a.count);
  outs->push_back(TensorInfo{Input(c, 0).dtype, std::move(s)});
  return Status::Ok();
}

// A slice of an input as row copies: the output's elements, the first
// source element, rows of `run` elements `run_step` apart, and the outer
// dims (all but the last) with their source strides.
struct SlicePlan {
  int64_t total = 0, base = 0, run = 0, run_step = 1;
  std::vector<int64_t> dims, src;
};
Status MakeSlicePlan(std::string_view op, const std::vector<SliceAxis>& ax, std::span<const int64_t> in, SlicePlan* p) {
  p->total = 1;
  for (const auto& a : ax) p->total *= a.count;
  p->dims.clear();
  p->src.clear();
  p->base = 0;
  if (p->total == 0 || ax.empty()) return Status::Ok();
  if (ax.size() > static_cast<size_t>(kMaxRank)) return OpUnsupported(op, "rank too high");
  const std::vector<int64_t> in_st = DenseStrides(in);
  for (size_t d = 0; d < ax.size(); ++d) {
    p->base += ax[d].start * in_st[d];
    if (d + 1 < ax.size()) {
      p->dims.push_back(ax[d].count);
      p->src.push_back(ax[d].step * in_st[d]);
    }
  }
  p->run = ax.back().count;
  p->run_step = ax.back().step;
  return Status::Ok();
}

template <typename T>
void RunSlicePlan(const RunContext& ctx, const SlicePlan& p, bool empty_rank, const void* in, void* out) {
  if (p.total == 0 || empty_rank) {
    CopyBytes(out, in, static_cast<size_t>(p.total) * sizeof(T));
    return;
  }
  const T* x = static_cast<const T*>(in) + p.base;
  T* y = static_cast<T*>(out);
  ctx.pool->ParallelFor(p.total / p.run, GrainFor(p.run), [&](int64_t b, int64_t e) {
    Odometer<1> od(p.dims, {&p.src});
    od.Seek(b);
    for (int64_t row = b; row < e; ++row, od.Next()) {
      const T* xs = x + od.off[0];
      T* ys = y + row * p.run;
      if (p.run_step == 1) std::memcpy(ys, xs, static_cast<size_t>(p.run) * sizeof(T));
      else for (int64_t i = 0; i < p.run; ++i) ys[i] = xs[i * p.run_step];
    }
  });
}

// Operand i (1 to 4) of a Slice at a run: its int64 or int32 elements.
std::vector<int64_t> SliceOperandAt(const RunContext& ctx, const void* const* in, size_t i, DType dtype) {
  const int64_t n = ir::NumElements(ctx.shapes[i]);
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = dtype == DType::kI64 ? static_cast<const int64_t*>(in[i])[k] : static_cast<const int32_t*>(in[i])[k];
  return v;
}

Result<std::unique_ptr<Kernel>> CreateSlice(const CreateContext& c) {
  SliceParams params;
  std::vector<SliceAxis> ax;
  FCB_RETURN_IF_ERROR(ParseSlice(AsInfer(c), &ax, &params));
  SlicePlan plan;
  FCB_RETURN_IF_ERROR(MakeSlicePlan(c.op, ax, c.inputs[0].shape, &plan));
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  // At other shapes (Kernel::adapts) the slice is worked out again from the
  // input's shape at the run and starts, ends, axes and steps read from the
  // operands (what the inference read as constants) or the attributes.
  std::array<DType, 5> from;  // per operand 1 to 4: its dtype, kUndefined for an attribute or absent
  from.fill(DType::kUndefined);
  for (size_t i = 1; i < 5 && i < c.inputs.size(); ++i)
    if (c.inputs[i].present()) from[i] = c.inputs[i].dtype;
  for (size_t i = 1; i < 5; ++i)
    if (from[i] != DType::kUndefined && from[i] != DType::kI64 && from[i] != DType::kI32)
      return OpError(c.op, "starts, ends, axes and steps must be int64 or int32");
  const bool empty_rank = c.inputs[0].shape.empty();
  Result<std::unique_ptr<Kernel>> r = std::unique_ptr<Kernel>();
  DispatchBySize(es, [&](auto tag) {
    using T = decltype(tag);
    r = MakeAdaptingKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      if (!ctx.shapes) {
        RunSlicePlan<T>(ctx, plan, empty_rank, in[0], out[0]);
        return Status::Ok();
      }
      SliceParams at = params;
      std::vector<int64_t>* lists[5] = {nullptr, &at.starts, &at.ends, &at.axes, &at.steps};
      for (size_t i = 1; i < 5; ++i)
        if (from[i] != DType::kUndefined) *lists[i] = SliceOperandAt(ctx, in, i, from[i]);
      std::vector<SliceAxis> axes_at;
      SlicePlan p;
      FCB_RETURN_IF_ERROR(SliceAxesOf("Slice", ctx.shapes[0], at.starts, at.ends, at.axes, at.has_axes, at.steps,
                                      at.has_steps, &axes_at));
      FCB_RETURN_IF_ERROR(MakeSlicePlan("Slice", axes_at, ctx.shapes[0], &p));
      RunSlicePlan<T>(ctx, p, empty_rank, in[0], out[0]);
      return Status::Ok();
    });
  });
  return MadeOr(std::move(r), c.op, "element size");
}

}  // namespace

void RegisterCopyOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferConcat, CreateConcat>("Concat", 1, 1 << 16, 1, 1, kTraitConcat));
  ops->push_back(Def<InferSplit, CreateSplit>("Split", 1, 2, 1, 1 << 16));
  ops->push_back(Def<InferGather, CreateGather>("Gather", 2, 2));
  ops->push_back(Def<InferSlice, CreateSlice>("Slice", 1, 5));
}

}  // namespace fcb::ops
