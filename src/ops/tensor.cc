// Shape-only and generator ops: Reshape, Flatten, Squeeze, Unsqueeze (data
// moves unchanged), Shape, Size, ConstantOfShape, Range. The data-moving
// tensor ops live in transpose.cc, copy_ops.cc and pad_tile.cc.
#include <cmath>
#include <limits>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

// Output = input bytes, unchanged (Reshape, Flatten, Squeeze, Unsqueeze).
Result<std::unique_ptr<Kernel>> CreateCopy(const CreateContext& c) {
  const int64_t numel = c.inputs[0].numel();
  const size_t elem = ir::DTypeSize(c.inputs[0].dtype);
  return MakeAdaptingKernel([numel, elem](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    if (out[0] == in[0]) return Status::Ok();  // a view step: the same bytes (plan_check.h)
    const int64_t n = ctx.shapes ? ir::NumElements(ctx.shapes[0]) : numel;
    CopyBytes(out[0], in[0], static_cast<size_t>(n) * elem);
    return Status::Ok();
  });
}

Status InferReshape(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "data input is missing");
  std::vector<int64_t> shape;
  bool present = false;
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "shape", &shape, &present));
  if (!present) return OpError(c.op, "shape is missing");
  ir::Shape s;
  FCB_RETURN_IF_ERROR(ReshapeTarget(c.op, x.shape, shape.data(), shape.data() + shape.size(),
                                    c.attrs.GetInt("allowzero", 0) != 0, &s));
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

Status InferFlatten(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  int64_t axis = c.attrs.GetInt("axis", 1);
  if (axis < -r || axis > r) return OpError(c.op, "axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  const int64_t outer = SafeProduct(x.shape, 0, static_cast<size_t>(axis));
  const int64_t inner = SafeProduct(x.shape, static_cast<size_t>(axis), x.shape.size());
  outs->push_back(TensorInfo{x.dtype, {outer, inner}});
  return Status::Ok();
}

Status InferSqueeze(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  const int64_t r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  bool present = false;
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "axes", &axes, &present));
  std::vector<bool> drop(x.shape.size(), false);
  if (!present) {
    for (int64_t i = 0; i < r; ++i) drop[i] = x.shape[i] == 1;
  } else {
    FCB_RETURN_IF_ERROR(NormalizeAxes(c.op, std::move(axes), r, &axes));
    for (int64_t a : axes) {
      if (x.shape[a] != 1) return OpError(c.op, "cannot squeeze dim " + std::to_string(a) +
                                                    " of size " + std::to_string(x.shape[a]));
      drop[a] = true;
    }
  }
  ir::Shape s;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[i]) s.push_back(x.shape[i]);
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

Status InferUnsqueeze(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  std::vector<int64_t> axes;
  bool present = false;
  FCB_RETURN_IF_ERROR(IntsParam(c, 1, "axes", &axes, &present));
  if (!present || axes.empty()) return OpError(c.op, "axes are required");
  if (axes.size() > 64) return OpError(c.op, "too many axes");
  const int64_t r = static_cast<int64_t>(x.shape.size() + axes.size());
  FCB_RETURN_IF_ERROR(NormalizeAxes(c.op, std::move(axes), r, &axes));
  ir::Shape s;
  s.reserve(static_cast<size_t>(r));
  size_t next_in = 0, next_axis = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (next_axis < axes.size() && axes[next_axis] == i) {
      s.push_back(1);
      ++next_axis;
    } else {
      s.push_back(x.shape[next_in++]);
    }
  }
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

// --- Shape, Size ------------------------------------------------------------------

// The values Shape / Size write; known at create time.
std::vector<int64_t> ShapeValues(const InferContext& c) { return ShapeOpValues(c.op, c.attrs, Input(c, 0).shape); }

Status InferShape(const InferContext& c, std::vector<TensorInfo>* outs) {
  if (!Input(c, 0).present()) return OpError(c.op, "input is missing");
  const auto v = ShapeValues(c);
  outs->push_back(TensorInfo{DType::kI64, c.op == "Size" ? ir::Shape{}
                                                         : ir::Shape{static_cast<int64_t>(v.size())}});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateShape(const CreateContext& c) {
  auto v = ShapeValues(AsInfer(c));
  return MakeKernel([v = std::move(v)](const RunContext&, const void* const*,
                                       void* const* out) -> Status {
    if (!v.empty()) std::memcpy(out[0], v.data(), v.size() * sizeof(int64_t));
    return Status::Ok();
  });
}

// --- ConstantOfShape --------------------------------------------------------------

// The fill value as raw bytes of the output dtype.
Status ParseFill(const InferContext& c, DType* dtype, uint64_t* bits) {
  *dtype = DType::kF32;
  *bits = 0;
  const format::AttrDesc* v = c.attrs.Find("value");
  if (!v) return Status::Ok();  // float32 zeros
  if (v->floats.size() + v->ints.size() != 1)
    return OpError(c.op, "value must hold exactly one element");
  const bool is_float = !v->floats.empty();
  const double d = is_float ? v->floats[0] : static_cast<double>(v->ints[0]);
  const int64_t i = is_float ? static_cast<int64_t>(0) : v->ints[0];
  *dtype = static_cast<DType>(c.attrs.GetInt("value.dtype", static_cast<int64_t>(
                                                                 is_float ? DType::kF32 : DType::kI64)));
  switch (*dtype) {
    case DType::kF32: { const float f = static_cast<float>(d); std::memcpy(bits, &f, 4); break; }
    case DType::kF64: std::memcpy(bits, &d, 8); break;
    case DType::kI64: { const int64_t x = is_float ? static_cast<int64_t>(d) : i; std::memcpy(bits, &x, 8); break; }
    case DType::kI32: { const int32_t x = static_cast<int32_t>(is_float ? static_cast<int64_t>(d) : i); std::memcpy(bits, &x, 4); break; }
    case DType::kI8: case DType::kU8: { const uint8_t x = static_cast<uint8_t>(is_float ? static_cast<int64_t>(d) : i); std::memcpy(bits, &x, 1); break; }
    case DType::kBool: { const uint8_t x = d != 0; std::memcpy(bits, &x, 1); break; }
    default: return OpUnsupported(c.op, "value dtype");
  }
  return Status::Ok();
}

Status InferConstantOfShape(const InferContext& c, std::vector<TensorInfo>* outs) {
  std::vector<int64_t> shape;
  bool present = false;
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, 0, "shape", &shape, &present));
  if (!present) return OpError(c.op, "shape input is missing");
  DType dtype;
  uint64_t bits;
  FCB_RETURN_IF_ERROR(ParseFill(c, &dtype, &bits));
  outs->push_back(TensorInfo{dtype, shape});
  return Status::Ok();  // CheckedInfer validates the dims
}

Result<std::unique_ptr<Kernel>> CreateConstantOfShape(const CreateContext& c) {
  DType dtype;
  uint64_t bits;
  FCB_RETURN_IF_ERROR(ParseFill(AsInfer(c), &dtype, &bits));
  // Adapts: the count is the output's (operand 1) at each run.
  const ir::Shape made = c.outputs[0].shape;
  Result<std::unique_ptr<Kernel>> r = Internal("fill size");
  DispatchBySize(ir::DTypeSize(dtype), [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    r = MakeAdaptingKernel([v, made](const RunContext& ctx, const void* const*, void* const* out) -> Status {
      const int64_t n = ir::NumElements(ctx.ShapeOf(1, made));
      T* y = static_cast<T*>(out[0]);
      ctx.pool->ParallelFor(n, 65536, [&](int64_t b, int64_t e) { std::fill(y + b, y + e, v); });
      return Status::Ok();
    });
  });
  return r;
}

// --- Range ------------------------------------------------------------------------

Status InferRange(const InferContext& c, std::vector<TensorInfo>* outs) {
  const DType t = Input(c, 0).dtype;
  if (t != DType::kF32 && t != DType::kF64 && t != DType::kI32 && t != DType::kI64)
    return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(t));
  double v[3];
  const char* names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    if (Input(c, i).dtype != t) return OpError(c.op, "inputs must share one dtype");
    bool present = false;
    FCB_RETURN_IF_ERROR(ConstScalarInput(c, i, names[i], &v[i], &present));
    if (!present) return OpError(c.op, std::string(names[i]) + " is missing");
    if (!std::isfinite(v[i])) return OpError(c.op, std::string(names[i]) + " is not finite");
  }
  if (v[2] == 0) return OpError(c.op, "delta is zero");
  double n = 0;
  if (t == DType::kI32 || t == DType::kI64) {
    // Exact integer count: ceil((limit - start) / delta) in 128-bit arithmetic.
    const __int128 q = IntegerRangeCount(Constant(c, 0)->GetInt(0), Constant(c, 1)->GetInt(0), Constant(c, 2)->GetInt(0));
    n = q > kMaxElements ? static_cast<double>(kMaxElements) + 1 : static_cast<double>(q);
  } else {
    n = std::ceil((v[1] - v[0]) / v[2]);
    if (!(n >= 0)) n = 0;
  }
  if (n > static_cast<double>(kMaxElements)) return OpError(c.op, "output too large");
  outs->push_back(TensorInfo{t, {static_cast<int64_t>(n)}});
  return Status::Ok();
}

template <typename T>
Status RunRange(const void* const* in, void* out, int64_t n) {
  const T start = *static_cast<const T*>(in[0]);
  const T delta = *static_cast<const T*>(in[2]);
  T* y = static_cast<T*>(out);
  if constexpr (std::is_integral_v<T>) {
    // Wrapping arithmetic: the count was bounded by the inference.
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = start + static_cast<T>(i) * delta;
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateRange(const CreateContext& c) {
  // Adapts: the count is the output's (operand 3) at each run, which the
  // inference bounded; start and delta are read from the inputs.
  const ir::Shape made = c.outputs[0].shape;
  const DType t = c.outputs[0].dtype;
  return MakeAdaptingKernel([made, t](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const int64_t n = ir::NumElements(ctx.ShapeOf(3, made));
    switch (t) {
      case DType::kF32: return RunRange<float>(in, out[0], n);
      case DType::kF64: return RunRange<double>(in, out[0], n);
      case DType::kI32: return RunRange<int32_t>(in, out[0], n);
      case DType::kI64: return RunRange<int64_t>(in, out[0], n);
      default: return Internal("Range dtype");
    }
  });
}

}  // namespace

Status ConstantOfShapeFill(std::string_view op, const Attrs& attrs, DType* dtype, uint64_t* bits) {
  static const std::vector<TensorInfo> kNoInputs;
  static const std::vector<const ir::TensorData*> kNoConstants;
  return ParseFill(InferContext{op, attrs, kNoInputs, kNoConstants, 1}, dtype, bits);
}

void RegisterTensorOps(std::vector<OpDef>* ops) {
  // Which inputs only shape the output (OpDef::shape_only_inputs): CreateCopy
  // reads input 0 alone, ConstantOfShape fills its output's count, Range
  // reads start and delta (its count is the output's).
  auto shaped_by = [](OpDef d, uint32_t inputs) {
    d.shape_only_inputs = inputs;
    return d;
  };
  ops->push_back(shaped_by(Def<InferReshape, CreateCopy>("Reshape", 1, 2, 1, 1, kTraitView), 2));
  ops->push_back(Def<InferFlatten, CreateCopy>("Flatten", 1, 1, 1, 1, kTraitView));
  ops->push_back(shaped_by(Def<InferSqueeze, CreateCopy>("Squeeze", 1, 2, 1, 1, kTraitView), 2));
  ops->push_back(shaped_by(Def<InferUnsqueeze, CreateCopy>("Unsqueeze", 1, 2, 1, 1, kTraitView), 2));
  for (const char* name : {"Shape", "Size"}) ops->push_back(Def<InferShape, CreateShape>(name, 1, 1));
  ops->push_back(shaped_by(Def<InferConstantOfShape, CreateConstantOfShape>("ConstantOfShape", 1, 1), 1));
  ops->push_back(shaped_by(Def<InferRange, CreateRange>("Range", 3, 3), 2));
}

}  // namespace fcb::ops
