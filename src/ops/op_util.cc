#include "ops/op_util.h"

#include <algorithm>

namespace fcb::ops {

Status OpError(std::string_view op, const std::string& msg) {
  return InvalidArgument(std::string(op) + ": " + msg);
}

Status OpUnsupported(std::string_view op, const std::string& msg) {
  return Unsupported(std::string(op) + ": " + msg);
}

Status ExpectF32(std::string_view op, const TensorInfo& t, const char* what) {
  if (t.dtype == ir::DType::kF32) return Status::Ok();
  const std::string msg = std::string(what) + " must be float32, got " + ir::DTypeName(t.dtype);
  return op.empty() ? InvalidArgument(msg) : OpError(op, msg);
}

Status SupportedF32(std::string_view op, const TensorInfo& t, const char* what) {
  if (t.dtype == ir::DType::kF32) return Status::Ok();
  return OpUnsupported(op, std::string(what) + " must be float32, got " + ir::DTypeName(t.dtype));
}

int64_t SafeProduct(std::span<const int64_t> s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) {
    if (s[i] < 0) return -1;
    if (s[i] == 0) n = 0;
    else if (n > kMaxElements / s[i]) return -1;
    else n *= s[i];
  }
  return n;
}

bool ShapeWithinLimits(const ir::Shape& s) { return DimsWithinLimits(s.data(), s.size()); }

bool DimsWithinLimits(const int64_t* dims, size_t rank) {
  const std::span<const int64_t> s(dims, rank);
  if (s.size() > 64) return false;
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || d > kMaxElements) return false;
    if (d == 0) continue;  // still bound the other dims: strides multiply them
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) return false;
  }
  return true;
}

Status CheckShape(std::string_view op, const ir::Shape& s, const std::string& what) {
  if (ShapeWithinLimits(s)) return Status::Ok();
  if (s.size() > 64) return OpUnsupported(op, what + " has rank " + std::to_string(s.size()));
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return OpError(op, what + " has a negative dim (" + ir::ShapeToString(s) + ")");
    if (d > kMaxElements) return OpError(op, what + " is too large");
    if (d == 0) continue;  // still bound the other dims: strides multiply them
    if (n > kMaxElements / d) return OpError(op, what + " has too many elements");
    n *= d;
  }
  return Status::Ok();
}

Status NormalizeAxis(std::string_view op, int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank)
    return OpError(op, "axis " + std::to_string(axis) + " is out of range for rank " +
                           std::to_string(rank));
  *out = axis < 0 ? axis + rank : axis;
  return Status::Ok();
}

Status NormalizeAxes(std::string_view op, std::vector<int64_t> axes, int64_t rank,
                     std::vector<int64_t>* out) {
  for (auto& a : axes) FCB_RETURN_IF_ERROR(NormalizeAxis(op, a, rank, &a));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return OpError(op, "axes contain a duplicate");
  *out = std::move(axes);
  return Status::Ok();
}

Status ParsePerm(const InferContext& c, std::vector<int64_t>* perm) {
  const int64_t r = static_cast<int64_t>(Input(c, 0).shape.size());
  if (c.attrs.Has("perm")) {
    *perm = c.attrs.GetInts("perm");
    if (static_cast<int64_t>(perm->size()) != r)
      return OpError(c.op, "perm has " + std::to_string(perm->size()) + " entries for rank " +
                               std::to_string(r));
    std::vector<bool> seen(r, false);
    for (auto& p : *perm) {
      if (p < -r || p >= r) return OpError(c.op, "perm entry out of range");
      if (p < 0) p += r;  // tolerated: some exporters write negative axes
      if (seen[p]) return OpError(c.op, "perm is not a permutation");
      seen[p] = true;
    }
  } else {
    perm->resize(r);
    for (int64_t i = 0; i < r; ++i) (*perm)[i] = r - 1 - i;
  }
  return Status::Ok();
}

Status ReshapeTarget(std::string_view op, const ir::Shape& x, const int64_t* t, const int64_t* t_end, bool allowzero,
                     ir::Shape* out) {
  out->resize(static_cast<size_t>(t_end - t));
  return ReshapeTarget(op, x, t, t_end, allowzero, out->data());
}

Status ReshapeTarget(std::string_view op, std::span<const int64_t> x, const int64_t* t, const int64_t* t_end,
                     bool allowzero, int64_t* out) {
  std::copy(t, t_end, out);
  const std::span<int64_t> shape(out, static_cast<size_t>(t_end - t));
  int infer_at = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t& d = shape[i];
    if (d == -1) {
      if (infer_at >= 0) return OpError(op, "shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < -1) return OpError(op, "shape has a negative dim " + std::to_string(d));
    if (d == 0 && !allowzero) {
      if (i >= x.size()) return OpError(op, "shape copies a dim the input lacks");
      d = x[i];
    }
    if (d == 0) has_zero = true;
    if (d > kMaxElements || (d && known > kMaxElements / d)) return OpError(op, "shape too large");
    known *= d;
  }
  if (allowzero && has_zero && infer_at >= 0) return OpError(op, "shape has both 0 and -1 with allowzero=1");
  const int64_t n = ir::NumElements(x);
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      return OpError(op, "cannot infer -1 reshaping " + ir::ShapeToString(ir::Shape(x.begin(), x.end())));
    shape[static_cast<size_t>(infer_at)] = n / known;
  } else if (known != n) {
    return OpError(op, "cannot reshape " + ir::ShapeToString(ir::Shape(x.begin(), x.end())) + " to " +
                           ir::ShapeToString(ir::Shape(shape.begin(), shape.end())));
  }
  return Status::Ok();
}

Status BroadcastShapes(std::string_view op, const ir::Shape& a, const ir::Shape& b,
                       ir::Shape* out) {
  const size_t r = std::max(a.size(), b.size());
  auto dim = [&](size_t i, bool* ok) {
    int64_t d;
    *ok = BroadcastOneDim(i < r - a.size() ? 1 : a[i - (r - a.size())], i < r - b.size() ? 1 : b[i - (r - b.size())],
                          &d);
    return d;
  };
  for (size_t i = 0; i < r; ++i) {
    bool ok;
    dim(i, &ok);
    if (!ok)
      return OpError(op, "shapes " + ir::ShapeToString(a) + " and " + ir::ShapeToString(b) +
                             " cannot be broadcast");
  }
  // Written in place where `out` is not b (no temporary: shapes are inferred
  // again at each new size of a plan with ranges).
  bool ok;
  if (out == &a && &a != &b) {  // in place over a: its dims aligned right, b's folded in
    out->insert(out->begin(), r - a.size(), 1);
    const size_t lead = r - b.size();
    for (size_t i = lead; i < r; ++i)
      if ((*out)[i] == 1) (*out)[i] = b[i - lead];
  } else if (out == &b) {
    ir::Shape s(r);
    for (size_t i = 0; i < r; ++i) s[i] = dim(i, &ok);
    *out = std::move(s);
  } else {
    out->resize(r);
    for (size_t i = 0; i < r; ++i) (*out)[i] = dim(i, &ok);
  }
  return Status::Ok();
}

const TensorInfo& Input(const InferContext& c, size_t i) {
  static const TensorInfo kAbsent;
  return i < c.inputs.size() ? c.inputs[i] : kAbsent;
}

const ir::TensorData* Constant(const InferContext& c, size_t i) {
  if (i >= c.inputs.size() || i >= c.constants.size() || !c.inputs[i].present()) return nullptr;
  return c.constants[i];
}

namespace {

// A constant is usable when its bytes cover its shape and it agrees with the
// input's declared dtype and shape.
Status CheckConstant(const InferContext& c, size_t i, const char* what,
                     const ir::TensorData* t) {
  FCB_RETURN_IF_ERROR(CheckShape(c.op, t->shape, what));
  const size_t need = static_cast<size_t>(t->numel()) * ir::DTypeSize(t->dtype);
  if (!IsKnownDType(t->dtype) || t->bytes.size() != need)
    return OpError(c.op, std::string(what) + " constant has inconsistent contents");
  if (t->dtype != c.inputs[i].dtype || t->shape != c.inputs[i].shape)
    return OpError(c.op, std::string(what) + " constant does not match its declared type");
  return Status::Ok();
}

// Input i's constant value, checked against its declared type; nullptr when
// the input is absent; Unsupported when it is present but not a constant.
Result<const ir::TensorData*> ConstantInput(const InferContext& c, size_t i, const char* what) {
  if (!Input(c, i).present()) return static_cast<const ir::TensorData*>(nullptr);
  const ir::TensorData* t = Constant(c, i);
  if (!t) return OpUnsupported(c.op, std::string(what) + " must be a constant");
  FCB_RETURN_IF_ERROR(CheckConstant(c, i, what, t));
  return t;
}

}  // namespace

Status AxisInput(const InferContext& c, bool (*accepts)(ir::DType), int64_t default_axis, int64_t* axis) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!accepts(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (x.shape.empty()) return OpError(c.op, "input must have rank >= 1");
  return NormalizeAxis(c.op, c.attrs.GetInt("axis", default_axis), static_cast<int64_t>(x.shape.size()), axis);
}

Status ConstIntsInput(const InferContext& c, size_t i, const char* what, std::vector<int64_t>* out,
                      bool* present) {
  *present = false;
  FCB_ASSIGN_OR_RETURN(const ir::TensorData* t, ConstantInput(c, i, what));
  if (!t) return Status::Ok();
  if (t->dtype != ir::DType::kI64 && t->dtype != ir::DType::kI32)
    return OpError(c.op, std::string(what) + " must be int64 or int32");
  if (t->shape.size() > 1) return OpError(c.op, std::string(what) + " must be 1-D");
  *out = t->ToInts();
  *present = true;
  return Status::Ok();
}

Status ConstScalarInput(const InferContext& c, size_t i, const char* what, double* out,
                        bool* present) {
  *present = false;
  FCB_ASSIGN_OR_RETURN(const ir::TensorData* t, ConstantInput(c, i, what));
  if (!t) return Status::Ok();
  if (t->numel() != 1) return OpError(c.op, std::string(what) + " must hold one value");
  *out = t->GetDouble(0);
  *present = true;
  return Status::Ok();
}

Status IntsParam(const InferContext& c, size_t i, const char* attr, std::vector<int64_t>* out,
                 bool* present) {
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, i, attr, out, present));
  if (*present) return Status::Ok();
  if (c.attrs.Has(attr)) {
    *out = c.attrs.GetInts(attr);
    *present = true;
  }
  return Status::Ok();
}

Status CheckedInfer(InferFn infer, const InferContext& c, std::vector<TensorInfo>* outs) {
  if (c.constants.size() != c.inputs.size()) return Internal("constants/inputs size mismatch");
  // The messages are built only for a shape that fails (shapes are inferred
  // again at each new size of a plan with ranges).
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].present()) continue;
    if (!IsKnownDType(c.inputs[i].dtype))
      return OpUnsupported(c.op, "input " + std::to_string(i) + " has an unknown dtype");
    if (!ShapeWithinLimits(c.inputs[i].shape))
      return CheckShape(c.op, c.inputs[i].shape, "input " + std::to_string(i));
  }
  outs->clear();
  FCB_RETURN_IF_ERROR(infer(c, outs));
  for (size_t i = 0; i < outs->size(); ++i)
    if (!ShapeWithinLimits((*outs)[i].shape)) return CheckShape(c.op, (*outs)[i].shape, "output " + std::to_string(i));
  return Status::Ok();
}

Status RecheckOutputs(InferFn infer, const CreateContext& c) {
  std::vector<TensorInfo> outs;
  FCB_RETURN_IF_ERROR(CheckedInfer(infer, AsInfer(c), &outs));
  if (outs.size() != c.outputs.size())
    return OpError(c.op, "wrong number of outputs");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].dtype != c.outputs[i].dtype || outs[i].shape != c.outputs[i].shape)
      return OpError(c.op, "output " + std::to_string(i) + " is " +
                               ir::DTypeName(c.outputs[i].dtype) + " " +
                               ir::ShapeToString(c.outputs[i].shape) + ", expected " +
                               ir::DTypeName(outs[i].dtype) + " " +
                               ir::ShapeToString(outs[i].shape));
  }
  return Status::Ok();
}

std::vector<int64_t> DenseStrides(std::span<const int64_t> s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// RowSum: 16 float lanes over blocks of 64 elements (4 terms per lane, which
// the compiler vectorizes), each block folded into a double, so a long row
// keeps double accuracy at a fraction of a double add per element.
namespace {

// The block loop with `kSquares` fixed at compile time, so it vectorizes.
template <bool kSquares>
double RowSumT(const float* x, int64_t n, double center) {
  constexpr int kLanes = 16, kBlock = 64;
  const float c = static_cast<float>(center);
  double total = 0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    float acc[kLanes] = {};
    for (int j = 0; j < kBlock; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float v = x[i + j + l] - c;
        acc[l] += kSquares ? v * v : v;
      }
    float s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    total += s;
  }
  for (; i < n; ++i) {
    const double v = x[i] - center;
    total += kSquares ? v * v : v;
  }
  return total;
}

}  // namespace

double RowSum(const float* x, int64_t n, bool squares, double center) {
  return squares ? RowSumT<true>(x, n, center) : RowSumT<false>(x, n, center);
}

void ShapeOpSpan(const Attrs& attrs, int64_t r, int64_t* start, int64_t* end) {
  *start = attrs.GetInt("start", 0);
  *end = attrs.GetInt("end", r);
  if (*start < 0) *start += r;
  if (*end < 0) *end += r;
  *start = std::clamp<int64_t>(*start, 0, r);
  *end = std::clamp<int64_t>(*end, 0, r);
}

std::vector<int64_t> ShapeOpValues(std::string_view op, const Attrs& attrs, const ir::Shape& s) {
  if (op == "Size") return {ir::NumElements(s)};
  int64_t start, end;
  ShapeOpSpan(attrs, static_cast<int64_t>(s.size()), &start, &end);
  return end > start ? std::vector<int64_t>(s.begin() + start, s.begin() + end) : std::vector<int64_t>{};
}

}  // namespace fcb::ops
