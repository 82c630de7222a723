// Helpers shared by the op families written on top of op.h: safe shape and
// axis arithmetic, reading parameters that ONNX moved from attributes to
// constant inputs, dtype dispatch, and a wrapper that makes every create
// re-run (and check) its shape inference.
//
// Everything here assumes hostile inputs: dims may be negative or huge, input
// lists short, constants of the wrong size. Nothing indexes before checking.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fcb/limits.h"
#include "ops/op.h"

namespace fcb::ops {

// Largest element count an op accepts for any tensor (keeps byte sizes and
// index arithmetic far from int64 overflow).
inline constexpr int64_t kMaxElements = int64_t{1} << 40;
// Largest rank of the strided loops (broadcast, transpose, slice, ...), whose
// index counters live on the stack so Run does not allocate.
inline constexpr int kMaxRank = limits::kMaxRank;  // fcb/limits.h

// Up to kMaxRank dims (or strides) held in place: plans that hold them
// allocate nothing, so a kernel that adapts (Kernel::adapts) can make one at
// each run at other shapes.
struct PlanDims {
  std::array<int64_t, kMaxRank> v{};
  size_t n = 0;
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  int64_t operator[](size_t i) const { return v[i]; }
  int64_t& operator[](size_t i) { return v[i]; }
  int64_t back() const { return v[n - 1]; }
  // n <= kMaxRank (callers check it).
  void assign(const int64_t* b, const int64_t* e) {
    n = static_cast<size_t>(e - b);
    std::copy(b, e, v.begin());
  }
  void assign(size_t count, int64_t value) {
    n = count;
    std::fill(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(count), value);
  }
  void push_back(int64_t x) { v[n++] = x; }  // n < kMaxRank (callers check it)
};

// "Op: msg" errors.
Status OpError(std::string_view op, const std::string& msg);
Status OpUnsupported(std::string_view op, const std::string& msg);
// "what must be float32, got <dtype>" unless t is float32; prefixed "op: "
// when op is not empty.
Status ExpectF32(std::string_view op, const TensorInfo& t, const char* what);
// The same message as Unsupported: for an operator the model may give other
// float types that fcb's kernel does not implement (the import then lists it
// with the unsupported operators).
Status SupportedF32(std::string_view op, const TensorInfo& t, const char* what);

// One dim of a multidirectional (NumPy) broadcast: false where `a` and `b`
// differ and neither is 1; else *out is the broadcast dim.
inline bool BroadcastOneDim(int64_t a, int64_t b, int64_t* out) {
  *out = a == b || b == 1 ? a : b;
  return a == b || a == 1 || b == 1;
}

// Integer Range's element count, ceil((limit - start) / delta) exactly
// (delta nonzero), 0 where that is negative.
inline __int128 IntegerRangeCount(__int128 start, __int128 limit, __int128 delta) {
  const __int128 diff = limit - start;
  __int128 q = diff / delta;
  if (q * delta != diff && ((diff < 0) == (delta < 0))) ++q;
  return q < 0 ? 0 : q;
}

// One axis of a Slice over a dim of extent `dim` (> 0), step nonzero and not
// INT64_MIN: ONNX's clamping of `start` and `end` by the step's direction (a
// negative position counts from the end; below -dim it means "before the
// first element", -1). Returns the element count; *first is the first
// element's index (0 where there is none).
inline int64_t SliceAxisCount(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t* first) {
  if (start < 0) start = start < -dim ? -1 : start + dim;
  if (end < 0) end = end < -dim ? -1 : end + dim;
  int64_t count;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    count = start > end ? (start - end - 1) / (-step) + 1 : 0;
  }
  *first = count ? start : 0;
  return count;
}

// Every dim >= 0 and the element count <= kMaxElements, without overflow.
Status CheckShape(std::string_view op, const ir::Shape& s, const std::string& what);
// What CheckShape accepts, without building a message.
bool ShapeWithinLimits(const ir::Shape& s);
bool DimsWithinLimits(const int64_t* dims, size_t rank);
// Checked product of dims [begin, end); -1 if it would exceed kMaxElements.
int64_t SafeProduct(std::span<const int64_t> s, size_t begin, size_t end);
// The rows (dims before `axis`) and the row length (dims from `axis` on) of
// `s`: what a normalization over the trailing dims reads at a run's shape
// (the kernels that adapt, Kernel::adapts).
inline void RowsFromAxis(std::span<const int64_t> s, int64_t axis, int64_t* rows, int64_t* cols) {
  const size_t a = static_cast<size_t>(axis);
  *rows = SafeProduct(s, 0, a);
  *cols = SafeProduct(s, a, s.size());
}

// axis in [-rank, rank) -> [0, rank).
Status NormalizeAxis(std::string_view op, int64_t axis, int64_t rank, int64_t* out);
// ConstantOfShape's fill: the output dtype and the value's bytes (little end
// first) from its `value` attribute, as its kernel fills (ops/tensor.cc).
Status ConstantOfShapeFill(std::string_view op, const Attrs& attrs, ir::DType* dtype, uint64_t* bits);
// Each axis normalized, duplicates rejected, result sorted ascending.
Status NormalizeAxes(std::string_view op, std::vector<int64_t> axes, int64_t rank,
                     std::vector<int64_t>* out);

// Transpose's permutation (attribute perm, negative entries normalized;
// reversed dims without it) for input 0's rank; errors name c.op.
Status ParsePerm(const InferContext& c, std::vector<int64_t>* perm);

// Reshape's output shape for input `x` and the target dims [t, t_end) (0
// copies x's dim unless allowzero, one -1 takes what is left), written over
// *out; errors name `op`. Messages are built only on failure.
Status ReshapeTarget(std::string_view op, const ir::Shape& x, const int64_t* t, const int64_t* t_end, bool allowzero,
                     ir::Shape* out);
// The same into out[0 .. t_end - t) (its rank is the target's).
Status ReshapeTarget(std::string_view op, std::span<const int64_t> x, const int64_t* t, const int64_t* t_end,
                     bool allowzero, int64_t* out);

// Multidirectional (NumPy) broadcast of a and b.
Status BroadcastShapes(std::string_view op, const ir::Shape& a, const ir::Shape& b,
                       ir::Shape* out);

// Input i, or an absent TensorInfo / null constant when i is past the end.
const TensorInfo& Input(const InferContext& c, size_t i);
// Rotary embedding of one head vector x (`head` entries, the first `rot` of
// them rotating in rot/2 pairs: adjacent when `interleaved`, else the two
// halves) by the angle whose cosines and sines are cosr/sinr (rot/2 each),
// into y (which may be x; the entries past `rot` are copied). The one rotation
// of RotaryEmbedding and of GroupQueryAttention's do_rotary.
void RotateHead(const float* x, float* y, int64_t head, int64_t rot, bool interleaved, const float* cosr,
                const float* sinr);

// What Shape (attributes start, end) or Size (`op`) of a tensor of shape
// `shape` holds: known from the shape alone, so the import folds it, the
// kernel writes it and plans with symbols evaluate it per size from this.
std::vector<int64_t> ShapeOpValues(std::string_view op, const Attrs& attrs, const ir::Shape& shape);
// Shape's dims [*start, *end) of a tensor of rank `rank` (attributes start,
// end, clamped), as ShapeOpValues takes them.
void ShapeOpSpan(const Attrs& attrs, int64_t rank, int64_t* start, int64_t* end);
const ir::TensorData* Constant(const InferContext& c, size_t i);

// Reads integer input i (scalar or 1-D; int32/int64) into *out. Returns OK with
// *present = false when the input is absent; Unsupported when it is present but
// not a compile-time constant.
Status ConstIntsInput(const InferContext& c, size_t i, const char* what, std::vector<int64_t>* out,
                      bool* present);
// Same for a float scalar (any numeric dtype).
Status ConstScalarInput(const InferContext& c, size_t i, const char* what, double* out,
                        bool* present);
// The parameter from constant input `i` when present, else from attribute
// `attr` when present; *present = false when neither.
Status IntsParam(const InferContext& c, size_t i, const char* attr, std::vector<int64_t>* out,
                 bool* present);

// The InferContext view of a CreateContext (same fields).
inline InferContext AsInfer(const CreateContext& c) {
  return InferContext{c.op, c.attrs, c.inputs, c.constants, static_cast<int>(c.outputs.size())};
}

// Checks present inputs' shapes, runs `infer`, checks the outputs it made.
Status CheckedInfer(InferFn infer, const InferContext& c, std::vector<TensorInfo>* outs);
// Re-runs infer on the create context and requires the outputs to match
// c.outputs exactly, so a kernel is never created for shapes it did not check.
Status RecheckOutputs(InferFn infer, const CreateContext& c);

template <InferFn I>
Status Infer(const InferContext& c, std::vector<TensorInfo>* outs) {
  return CheckedInfer(I, c, outs);
}
template <InferFn I, CreateFn C>
Result<std::unique_ptr<Kernel>> Create(const CreateContext& c) {
  if (!c.outputs_inferred) FCB_RETURN_IF_ERROR(RecheckOutputs(I, c));
  return C(c);
}
// The inference of an operator whose Resolve checks what Create needs and
// computes its one output's shape, into plan->out (InferFromPlan) or into
// *out (InferFromShape); the output has input 0's dtype.
template <typename Plan, Status (*Resolve)(const InferContext&, Plan*)>
Status InferFromPlan(const InferContext& c, std::vector<TensorInfo>* outs) {
  Plan p;
  FCB_RETURN_IF_ERROR(Resolve(c, &p));
  outs->push_back(TensorInfo{Input(c, 0).dtype, p.out});
  return Status::Ok();
}
template <typename Plan, Status (*Resolve)(const InferContext&, Plan*, ir::Shape*)>
Status InferFromShape(const InferContext& c, std::vector<TensorInfo>* outs) {
  Plan p;
  ir::Shape s;
  FCB_RETURN_IF_ERROR(Resolve(c, &p, &s));
  outs->push_back(TensorInfo{Input(c, 0).dtype, std::move(s)});
  return Status::Ok();
}

// An OpDef whose infer and create are wrapped by the checks above.
template <InferFn I, CreateFn C>
OpDef Def(std::string name, int min_in, int max_in, int min_out = 1, int max_out = 1,
          uint32_t traits = kTraitNone) {
  OpDef d;
  d.traits = traits;
  d.name = std::move(name);
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.min_outputs = min_out;
  d.max_outputs = max_out;
  d.infer = &Infer<I>;
  d.create = &Create<I, C>;
  return d;
}

// A Kernel whose Run is a lambda holding the precomputed plan by value.
// kAdapts: the lambda reads every shape it depends on through
// RunContext::ShapeOf (Kernel::adapts).
template <typename F, bool kAdapts = false>
class FnKernel final : public Kernel {
 public:
  explicit FnKernel(F f, bool specialize = true) : f_(std::move(f)), specialize_(specialize) {}
  Status Run(const RunContext& ctx, const void* const* in, void* const* out) const override {
    return f_(ctx, in, out);
  }
  bool adapts() const override { return kAdapts; }
  bool worth_specializing() const override { return specialize_; }

 private:
  F f_;
  bool specialize_;
};
template <typename F>
Result<std::unique_ptr<Kernel>> MakeKernel(F f) {
  return std::unique_ptr<Kernel>(new FnKernel<F>(std::move(f)));
}
// The same for a lambda that computes at any shapes (Kernel::adapts);
// `specialize`: Kernel::worth_specializing.
template <typename F>
Result<std::unique_ptr<Kernel>> MakeAdaptingKernel(F f, bool specialize = true) {
  return std::unique_ptr<Kernel>(new FnKernel<F, true>(std::move(f), specialize));
}

// dtype predicates.
inline bool IsFloat(ir::DType t) { return t == ir::DType::kF32 || t == ir::DType::kF64; }
inline bool IsSignedInt(ir::DType t) {
  return t == ir::DType::kI32 || t == ir::DType::kI64 || t == ir::DType::kI8;
}
inline bool IsNumeric(ir::DType t) {
  return IsFloat(t) || IsSignedInt(t) || t == ir::DType::kU8;
}

// Input 0 of an operator along one axis (ArgMax, Softmax, TopK, Hardmax):
// present, of a dtype `accepts` takes, rank >= 1; *axis is the "axis"
// attribute (default `default_axis`) normalized to [0, rank).
Status AxisInput(const InferContext& c, bool (*accepts)(ir::DType), int64_t default_axis, int64_t* axis);
inline bool IsKnownDType(ir::DType t) { return ir::DTypeSize(t) != 0; }

// Calls f(T{}) with the C++ type of a numeric dtype; false if not numeric.
template <typename F>
bool DispatchNumeric(ir::DType t, F&& f) {
  switch (t) {
    case ir::DType::kF32: f(float{}); return true;
    case ir::DType::kF64: f(double{}); return true;
    case ir::DType::kI32: f(int32_t{}); return true;
    case ir::DType::kI64: f(int64_t{}); return true;
    case ir::DType::kI8: f(int8_t{}); return true;
    case ir::DType::kU8: f(uint8_t{}); return true;
    default: return false;
  }
}

// The integer types only a few ops handle (elementwise arithmetic and
// comparisons, Cast, Clip, the byte-moving ops); IsNumeric leaves them out so
// the other ops refuse them with Unsupported instead of miscomputing.
inline bool IsExtraInt(ir::DType t) {
  return t == ir::DType::kI16 || t == ir::DType::kU16 || t == ir::DType::kU32 ||
         t == ir::DType::kU64;
}
inline bool IsAnyInt(ir::DType t) {
  return IsSignedInt(t) || t == ir::DType::kU8 || IsExtraInt(t);
}
// float16 / bfloat16: stored as uint16_t bits, computed in float32 (core/half.h).
// Element `i` of a uint8 / int8 / int32 tensor (a zero point) as int32; 0 when absent.
inline int32_t IntAt(DType t, const void* p, int64_t i) {
  if (!p) return 0;
  switch (t) {
    case DType::kU8: return static_cast<const uint8_t*>(p)[i];
    case DType::kI8: return static_cast<const int8_t*>(p)[i];
    default: return static_cast<const int32_t*>(p)[i];
  }
}

inline bool IsHalf(ir::DType t) { return t == ir::DType::kF16 || t == ir::DType::kBF16; }

// DispatchNumeric plus the extra integer types.
template <typename F>
bool DispatchNumericOrExtraInt(ir::DType t, F&& f) {
  switch (t) {
    case ir::DType::kI16: f(int16_t{}); return true;
    case ir::DType::kU16: f(uint16_t{}); return true;
    case ir::DType::kU32: f(uint32_t{}); return true;
    case ir::DType::kU64: f(uint64_t{}); return true;
    default: return DispatchNumeric(t, f);
  }
}

// Unsigned integer of the same size as an element: byte-moving ops (Transpose,
// Gather, Pad, ...) copy elements by size, not by dtype.
template <typename F>
bool DispatchBySize(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1: f(uint8_t{}); return true;
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    default: return false;
  }
}

// `r` from a dispatch that may have made nothing (a null kernel): that is
// OpUnsupported(op, what).
inline Result<std::unique_ptr<Kernel>> MadeOr(Result<std::unique_ptr<Kernel>> r, std::string_view op, const char* what) {
  if (r.ok() && !r.value()) return OpUnsupported(op, what);
  return r;
}

// Dense row-major strides (elements).
std::vector<int64_t> DenseStrides(std::span<const int64_t> s);

// Work items per thread chunk so one chunk holds about `target` elements.
inline int64_t GrainFor(int64_t elems_per_item, int64_t target = 16384) {
  return elems_per_item <= 0 ? 1 : std::max<int64_t>(1, target / elems_per_item);
}

// Copies n bytes unless source and destination are the same buffer.
inline void CopyBytes(void* dst, const void* src, size_t n) {
  if (dst != src && n) std::memmove(dst, src, n);
}

// Sum of x[i] (squares false) or of (x[i] - center)^2 (squares true) over a
// row, with double accuracy at float speed (normalization statistics).
double RowSum(const float* x, int64_t n, bool squares, double center);

}  // namespace fcb::ops
