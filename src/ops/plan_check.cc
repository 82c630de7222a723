#include "ops/plan_check.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "fcb/limits.h"
#include "ops/conv_geom.h"
#include "ops/matmul_geom.h"
#include "ops/names.h"
#include "ops/op_util.h"

namespace fcb::ops {

namespace {

// A step's kernels assume that what they write does not overlap what they
// read (they copy with memcpy, keep pointers __restrict, tile in place): no
// arena output of a step may share a byte with another of its outputs or
// with any of its arena inputs. The memory planner never places them so
// (their lifetimes meet at the step); a hostile file could.
Status CheckStepOverlap(const format::ContextDesc& c, const format::StepDesc& s, const OpDef& def,
                        const std::vector<uint64_t>& bytes, const std::string& where) {
  auto range = [&](int32_t t) {
    return std::string("[offset ") + std::to_string(c.tensors[t].offset) + ", " + std::to_string(bytes[t]) + " bytes]";
  };
  auto overlaps = [&](int32_t a, int32_t b) {
    if (c.tensors[a].storage != format::Storage::kArena || c.tensors[b].storage != format::Storage::kArena)
      return false;
    if (bytes[a] == 0 || bytes[b] == 0) return false;
    const uint64_t a0 = c.tensors[a].offset, b0 = c.tensors[b].offset;  // both ends checked against the arena
    return a0 < b0 + bytes[b] && b0 < a0 + bytes[a];
  };
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    const int32_t y = s.outputs[o];
    for (size_t o2 = 0; o2 < o; ++o2)
      if (overlaps(y, s.outputs[o2]))
        return InvalidArgument(where + ": output " + std::to_string(o) + " (tensor " + std::to_string(y) + " " +
                               range(y) + ") overlaps output " + std::to_string(o2) + " (tensor " +
                               std::to_string(s.outputs[o2]) + " " + range(s.outputs[o2]) + ") in the arena");
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const int32_t x = s.inputs[i];
      // A view step (plans with symbols): a view op's output over exactly its input's bytes; its kernel
      // copies nothing then.
      if (o == 0 && i == 0 && x >= 0 && (def.traits & kTraitView) && s.outputs.size() == 1 &&
          c.tensors[x].storage == format::Storage::kArena && c.tensors[x].offset == c.tensors[y].offset &&
          bytes[x] == bytes[y])
        continue;
      if (x >= 0 && overlaps(y, x))
        return InvalidArgument(where + ": output " + std::to_string(o) + " (tensor " + std::to_string(y) + " " +
                               range(y) + ") overlaps input " + std::to_string(i) + " (tensor " + std::to_string(x) +
                               " " + range(x) + ") in the arena");
    }
  }
  return Status::Ok();
}


// --- Values computed from shapes, evaluated directly ----------------------------
//
// A resolution re-evaluates the small values a model computes from shapes (a
// Shape's dims gathered, unsqueezed, concatenated, compared, a causal mask's
// Range) at every new size. Making and running the op's generic kernel for
// each (ops::Evaluate) costs an allocation-heavy create per value; the ops
// that make up such arithmetic are evaluated here directly, with the generic
// kernels' exact semantics (integer arithmetic wrapping, bools as bytes where
// any nonzero byte is true, Gather's negative indices). Anything else, or any
// operand this does not expect, returns false and goes through ops::Evaluate
// (which also reports the errors: an index out of range). The values must
// equal the generic kernels' byte for byte: ops::CheckPlan evaluates through
// the generic kernels, and resolve_plan_test compares the two at every size of
// the test models' ranges.

// An elementwise walk of up to three operands broadcast (NumPy rules) to `out`:
// per output element, each operand's element offset.
struct BroadcastWalk {
  int rank = 0;
  int n_in = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[3][kMaxRank] = {};

  bool Make(const ir::Shape& out, std::initializer_list<const ir::Shape*> ins) {
    if (out.size() > static_cast<size_t>(kMaxRank) || ins.size() > 3) return false;
    rank = static_cast<int>(out.size());
    for (int d = 0; d < rank; ++d) dims[d] = out[d];
    n_in = 0;
    for (const ir::Shape* in : ins) {
      if (in->size() > out.size()) return false;
      const int shift = rank - static_cast<int>(in->size());
      int64_t stride = 1;
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t dim = d >= shift ? (*in)[d - shift] : 1;
        if (dim != 1 && dim != out[d]) return false;
        strides[n_in][d] = dim == 1 ? 0 : stride;
        stride *= dim;
      }
      ++n_in;
    }
    return true;
  }
  // f(output element, offsets of the operands) for every output element
  // (n of them, the product of the dims), a row of the last dim at a time.
  template <typename F>
  void ForEach(int64_t n, F&& f) const {
    int64_t off[3] = {0, 0, 0};
    if (n <= 0) return;
    if (rank == 0) {
      f(0, off);
      return;
    }
    const int64_t inner = dims[rank - 1];
    const int64_t s0 = strides[0][rank - 1], s1 = strides[1][rank - 1], s2 = strides[2][rank - 1];
    int64_t idx[kMaxRank] = {};
    int64_t base[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; i += inner) {
      for (int64_t j = 0; j < inner; ++j) {
        off[0] = base[0] + j * s0;
        off[1] = base[1] + j * s1;
        off[2] = base[2] + j * s2;
        f(i + j, off);
      }
      for (int d = rank - 2; d >= 0; --d) {
        for (int k = 0; k < n_in; ++k) base[k] += strides[k][d];
        if (++idx[d] < dims[d]) break;
        for (int k = 0; k < n_in; ++k) base[k] -= idx[d] * strides[k][d];
        idx[d] = 0;
      }
    }
  }
};

template <typename T>
T WrapOp(T a, T b, char op) {
  using U = std::make_unsigned_t<T>;
  const U x = static_cast<U>(a), y = static_cast<U>(b);
  return static_cast<T>(op == '+' ? static_cast<U>(x + y) : op == '-' ? static_cast<U>(x - y) : static_cast<U>(x * y));
}

template <typename T>
uint8_t CompareOp(T a, T b, int op) {
  switch (op) {
    case 0: return a == b;
    case 1: return a < b;
    case 2: return a <= b;
    case 3: return a > b;
    default: return a >= b;
  }
}

}  // namespace

std::shared_ptr<ir::TensorData> SpareTensor(std::vector<std::shared_ptr<ir::TensorData>>* spare, ir::DType dtype,
                                            const int64_t* dims, const int64_t* dims_end, size_t bytes) {
  std::shared_ptr<ir::TensorData> t;
  if (spare && !spare->empty()) {
    t = std::move(spare->back());
    spare->pop_back();
  } else {
    t = std::make_shared<ir::TensorData>();
  }
  t->dtype = dtype;
  t->shape.assign(dims, dims_end);
  t->bytes.assign(bytes, 0);
  return t;
}

bool EvaluateDirect(const OpDef& def, const Attrs& attrs, const std::vector<const ir::TensorData*>& in,
                    const std::vector<TensorInfo>& outs, std::vector<std::shared_ptr<ir::TensorData>>* values,
                    std::vector<std::shared_ptr<ir::TensorData>>* spare) {
  if (outs.size() != 1) return false;
  for (const auto* t : in)
    if (!t) return false;
  const TensorInfo& o = outs[0];
  const int64_t n = o.numel();
  const size_t es = ir::DTypeSize(o.dtype);
  if (n < 0 || es == 0) return false;
  auto make = [&]() {
    return SpareTensor(spare, o.dtype, o.shape.data(), o.shape.data() + o.shape.size(), static_cast<size_t>(n) * es);
  };
  const std::string& op = def.name;
  const bool is_int = o.dtype == ir::DType::kI64 || o.dtype == ir::DType::kI32;
  // The same bytes under another shape (Reshape, Unsqueeze, Squeeze, Flatten,
  // Identity), or a Cast to the dtype it has.
  if ((def.traits & kTraitView) || (op == "Cast" && in.size() == 1)) {
    if (in.empty() || in[0]->dtype != o.dtype || in[0]->bytes.size() != static_cast<size_t>(n) * es) return false;
    auto t = make();
    if (!t->bytes.empty()) std::memcpy(t->bytes.data(), in[0]->bytes.data(), t->bytes.size());
    values->push_back(std::move(t));
    return true;
  }
  if (op == "Concat") {
    const int64_t rank = static_cast<int64_t>(o.shape.size());
    int64_t axis;
    if (!attrs.Has("axis") || !NormalizeAxis(op, attrs.GetInt("axis", 0), rank, &axis).ok()) return false;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= o.shape[d];
    size_t total = 0;
    for (const auto* t : in) {
      if (t->dtype != o.dtype || static_cast<int64_t>(t->shape.size()) != rank) return false;
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t->shape[d] != o.shape[d]) return false;
      total += t->bytes.size();
    }
    if (total != static_cast<size_t>(n) * es || (outer == 0 && n != 0)) return false;
    auto t = make();
    uint8_t* y = t->bytes.data();
    for (int64_t r = 0; r < outer; ++r)
      for (const auto* x : in) {
        const size_t chunk = x->bytes.size() / static_cast<size_t>(outer);
        if (chunk) std::memcpy(y, x->bytes.data() + r * chunk, chunk);
        y += chunk;
      }
    values->push_back(std::move(t));
    return true;
  }
  if (op == "Gather" && in.size() == 2) {
    const ir::TensorData& x = *in[0];
    const ir::TensorData& idx = *in[1];
    if (x.dtype != o.dtype || (idx.dtype != ir::DType::kI64 && idx.dtype != ir::DType::kI32)) return false;
    int64_t axis;
    if (!NormalizeAxis(op, attrs.GetInt("axis", 0), static_cast<int64_t>(x.shape.size()), &axis).ok()) return false;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
    const int64_t dim = x.shape[axis], n_idx = idx.numel();
    const size_t block = static_cast<size_t>(inner) * es;
    if (static_cast<size_t>(outer * n_idx) * block != static_cast<size_t>(n) * es) return false;
    auto index = [&](int64_t j) {
      return idx.dtype == ir::DType::kI64 ? idx.data<int64_t>()[j] : int64_t{idx.data<int32_t>()[j]};
    };
    for (int64_t j = 0; j < n_idx; ++j)
      if (index(j) < -dim || index(j) >= dim) return false;  // the generic kernel reports it
    auto t = make();
    uint8_t* y = t->bytes.data();
    for (int64_t r = 0; r < outer; ++r)
      for (int64_t j = 0; j < n_idx; ++j) {
        int64_t v = index(j);
        if (v < 0) v += dim;
        if (block) std::memcpy(y, x.bytes.data() + (r * dim + v) * block, block);
        y += block;
      }
    values->push_back(std::move(t));
    return true;
  }
  if (op == "Range" && in.size() == 3 && is_int && o.shape.size() == 1) {
    for (const auto* x : in)
      if (x->dtype != o.dtype || x->numel() != 1) return false;
    auto t = make();
    if (o.dtype == ir::DType::kI64) {
      const int64_t start = in[0]->data<int64_t>()[0], delta = in[2]->data<int64_t>()[0];
      int64_t* y = t->mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) y[i] = WrapOp<int64_t>(start, WrapOp<int64_t>(i, delta, '*'), '+');
    } else {
      const int32_t start = in[0]->data<int32_t>()[0], delta = in[2]->data<int32_t>()[0];
      int32_t* y = t->mutable_data<int32_t>();
      for (int64_t i = 0; i < n; ++i)
        y[i] = WrapOp<int32_t>(start, WrapOp<int32_t>(static_cast<int32_t>(static_cast<uint32_t>(i)), delta, '*'), '+');
    }
    values->push_back(std::move(t));
    return true;
  }
  if (op == "ConstantOfShape" && in.size() == 1) {
    ir::DType fill_dtype;
    uint64_t bits = 0;
    if (!ConstantOfShapeFill(op, attrs, &fill_dtype, &bits).ok() || fill_dtype != o.dtype || es > sizeof bits)
      return false;
    auto t = make();
    for (int64_t i = 0; i < n; ++i) std::memcpy(t->bytes.data() + i * es, &bits, es);
    values->push_back(std::move(t));
    return true;
  }
  if (op == "Not" && in.size() == 1) {
    if (in[0]->dtype != ir::DType::kBool || o.dtype != ir::DType::kBool || in[0]->numel() != n) return false;
    auto t = make();
    for (int64_t i = 0; i < n; ++i) t->bytes[i] = in[0]->bytes[i] == 0;
    values->push_back(std::move(t));
    return true;
  }
  if (op == "Expand" && in.size() == 2) {
    BroadcastWalk w;
    if (in[0]->dtype != o.dtype || !w.Make(o.shape, {&in[0]->shape})) return false;
    auto t = make();
    const uint8_t* x = in[0]->bytes.data();
    uint8_t* y = t->bytes.data();
    w.ForEach(n, [&](int64_t i, const int64_t* off) { std::memcpy(y + i * es, x + off[0] * es, es); });
    values->push_back(std::move(t));
    return true;
  }
  if (op == "Where" && in.size() == 3) {
    BroadcastWalk w;
    if (in[0]->dtype != ir::DType::kBool || in[1]->dtype != o.dtype || in[2]->dtype != o.dtype ||
        !w.Make(o.shape, {&in[0]->shape, &in[1]->shape, &in[2]->shape}))
      return false;
    auto t = make();
    const uint8_t *c = in[0]->bytes.data(), *a = in[1]->bytes.data(), *b = in[2]->bytes.data();
    uint8_t* y = t->bytes.data();
    w.ForEach(n, [&](int64_t i, const int64_t* off) {
      std::memcpy(y + i * es, c[off[0]] ? a + off[1] * es : b + off[2] * es, es);
    });
    values->push_back(std::move(t));
    return true;
  }
  if (in.size() != 2) return false;
  // Binary ops over broadcast operands.
  const ir::DType dt = in[0]->dtype;
  if (in[1]->dtype != dt) return false;
  int kind = -1;  // 0 arithmetic, 1 comparison, 2 logic
  char arith = 0;
  int cmp = 0;
  if (op == "Add") kind = 0, arith = '+';
  else if (op == "Sub") kind = 0, arith = '-';
  else if (op == "Mul") kind = 0, arith = '*';
  else if (op == "Equal") kind = 1, cmp = 0;
  else if (op == "Less") kind = 1, cmp = 1;
  else if (op == "LessOrEqual") kind = 1, cmp = 2;
  else if (op == "Greater") kind = 1, cmp = 3;
  else if (op == "GreaterOrEqual") kind = 1, cmp = 4;
  else if (op == "And") kind = 2, arith = '&';
  else if (op == "Or") kind = 2, arith = '|';
  else if (op == "Xor") kind = 2, arith = '^';
  else return false;
  BroadcastWalk w;
  if (!w.Make(o.shape, {&in[0]->shape, &in[1]->shape})) return false;
  const bool int_operands = dt == ir::DType::kI64 || dt == ir::DType::kI32;
  if (kind == 0 && !(int_operands && o.dtype == dt)) return false;
  if (kind == 1 && !((int_operands || (dt == ir::DType::kBool && cmp == 0)) && o.dtype == ir::DType::kBool)) return false;
  if (kind == 2 && !(dt == ir::DType::kBool && o.dtype == ir::DType::kBool)) return false;
  auto t = make();
  uint8_t* y = t->bytes.data();
  const uint8_t *a = in[0]->bytes.data(), *b = in[1]->bytes.data();
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    const T* x = reinterpret_cast<const T*>(a);
    const T* z = reinterpret_cast<const T*>(b);
    if (kind == 0) {
      T* yt = reinterpret_cast<T*>(y);
      w.ForEach(n, [&](int64_t i, const int64_t* off) { yt[i] = WrapOp<T>(x[off[0]], z[off[1]], arith); });
    } else {
      w.ForEach(n, [&](int64_t i, const int64_t* off) { y[i] = CompareOp<T>(x[off[0]], z[off[1]], cmp); });
    }
  };
  if (dt == ir::DType::kI64) typed(int64_t{});
  else if (dt == ir::DType::kI32) typed(int32_t{});
  else if (kind == 1)  // bool Equal: any nonzero byte is true
    w.ForEach(n, [&](int64_t i, const int64_t* off) { y[i] = (a[off[0]] != 0) == (b[off[1]] != 0); });
  else
    w.ForEach(n, [&](int64_t i, const int64_t* off) {
      const bool p = a[off[0]] != 0, q = b[off[1]] != 0;
      y[i] = arith == '&' ? (p && q) : arith == '|' ? (p || q) : (p != q);
    });
  values->push_back(std::move(t));
  return true;
}

FastShape FastShapeOf(const format::StepDesc& s, const CheckedStep& cs, const std::vector<const void*>& weights,
                      std::vector<int64_t>* params, int32_t* at) {
  // Split with sizes fixed (an attribute, a weight, or equal pieces): at a
  // run where its axis keeps the bound's size, its pieces keep theirs.
  if (s.op == "Split" && !s.inputs.empty() && s.inputs[0] >= 0 && !cs.inputs.empty() && s.outputs.size() >= 1 &&
      cs.outputs.size() == s.outputs.size() && s.outputs.size() <= 64 &&
      (s.inputs.size() == 1 || (s.inputs.size() == 2 && (s.inputs[1] < 0 || weights[s.inputs[1]])))) {
    const int64_t rank = static_cast<int64_t>(cs.inputs[0].shape.size());
    int64_t axis = cs.attrs.GetInt("axis", 0);
    if (rank < 1 || axis < -rank || axis >= rank) return FastShape::kNone;
    if (axis < 0) axis += rank;
    for (const TensorInfo& o : cs.outputs)
      if (o.shape.size() != static_cast<size_t>(rank)) return FastShape::kNone;
    *at = static_cast<int32_t>(params->size());
    params->push_back(axis);
    params->push_back(static_cast<int64_t>(cs.outputs.size()));
    for (const TensorInfo& o : cs.outputs) params->push_back(o.shape[static_cast<size_t>(axis)]);
    return FastShape::kSplit;
  }
  if (s.outputs.size() != 1 || cs.outputs.size() != 1 || s.inputs.empty() || s.inputs[0] < 0 ||
      cs.inputs.empty())
    return FastShape::kNone;
  const std::string& op = s.op;
  // A window over a 4-D input's spatial dims (NHWC convolutions and pools).
  if (WindowShape w; cs.def->window_shape && cs.inputs[0].shape.size() == 4 && cs.outputs[0].shape.size() == 4 &&
                     cs.def->window_shape(cs.attrs, cs.inputs, &w)) {
    const bool axes_ok = w.h_axis >= 1 && w.h_axis < 4 && w.w_axis >= 1 && w.w_axis < 4 && w.h_axis != w.w_axis;
    const bool residual_ok = w.residual < 0 || (static_cast<size_t>(w.residual) < s.inputs.size() &&
                                                s.inputs[static_cast<size_t>(w.residual)] >= 0);
    if (!axes_ok || !residual_ok) return FastShape::kNone;
    for (size_t i = 0; i < 2; ++i)
      if (w.pad_begin[i] < 0 || w.pad_end[i] < 0 || w.extent[i] < 1 || w.stride[i] < 1) return FastShape::kNone;
    *at = static_cast<int32_t>(params->size());
    params->insert(params->end(), {w.h_axis, w.w_axis, w.pad_begin[0], w.pad_begin[1], w.pad_end[0], w.pad_end[1],
                                   w.extent[0], w.extent[1], w.stride[0], w.stride[1], w.ceil_mode ? 1 : 0,
                                   w.global ? 1 : 0, w.residual});
    return FastShape::kWindow;
  }
  const int64_t rank = static_cast<int64_t>(cs.inputs[0].shape.size());
  static constexpr std::string_view kUnary[] = {"Abs", "Cast", "Ceil", "Erf", "Exp", "Floor", "Gelu", "IsInf",
                                                "IsNaN", "Log", "LogSoftmax", "Neg", "Not", "Reciprocal", "Relu",
                                                "Round", "Sigmoid", "Sign", "Softmax", "Sqrt", "Tanh"};
  static constexpr std::string_view kBroadcast[] = {"Add", "And", "Div", "Equal", "Greater", "GreaterOrEqual",
                                                    "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Or",
                                                    "Pow", "Sub", "Sum", "Where", "Xor"};
  if (s.inputs.size() == 1)
    for (std::string_view n : kUnary)
      if (op == n) return cs.outputs[0].shape == cs.inputs[0].shape ? FastShape::kSameAsInput0 : FastShape::kNone;
  for (std::string_view n : kBroadcast)
    if (op == n) {
      for (int32_t t : s.inputs)
        if (t < 0) return FastShape::kNone;
      return FastShape::kBroadcast;
    }
  if (op == "Transpose") {
    std::vector<int64_t> perm;
    if (!ParsePerm(InferContext{op, cs.attrs, cs.inputs, cs.constants, 1}, &perm).ok()) return FastShape::kNone;
    *at = static_cast<int32_t>(params->size());
    params->insert(params->end(), perm.begin(), perm.end());
    return FastShape::kTranspose;
  }
  if (op == "LayerNormalization") {
    int64_t axis = cs.attrs.GetInt("axis", -1);
    if (axis < -rank || axis >= rank) return FastShape::kNone;
    if (axis < 0) axis += rank;
    *at = static_cast<int32_t>(params->size());
    params->push_back(axis);
    return FastShape::kLayerNorm;
  }
  if (op == opname::GemmPacked && rank >= 1 && !cs.outputs[0].shape.empty()) return FastShape::kGemmPacked;
  if (op == "MatMul" && s.inputs.size() == 2 && s.inputs[1] >= 0) return FastShape::kMatMul;
  if (((op == "Concat" && cs.attrs.Has("axis")) || (op == "Gather" && s.inputs.size() == 2)) && rank >= 1) {
    for (int32_t t : s.inputs)
      if (t < 0) return FastShape::kNone;
    int64_t axis = cs.attrs.GetInt("axis", 0);
    if (axis < -rank || axis >= rank) return FastShape::kNone;
    if (axis < 0) axis += rank;
    *at = static_cast<int32_t>(params->size());
    params->push_back(axis);
    return op == "Concat" ? FastShape::kConcat : FastShape::kGather;
  }
  if (op == "Reshape" && s.inputs.size() == 2 && s.inputs[1] >= 0 && cs.attrs.GetInt("allowzero", 0) == 0)
    return FastShape::kReshape;
  // The ops whose output shapes follow values computed from the shapes (a
  // Slice's ends, an Expand's or ConstantOfShape's shape, a Range's limit):
  // their values are read at each run.
  if (op == "Slice" && s.inputs.size() >= 3 && s.inputs.size() <= 5 && s.inputs[1] >= 0 && s.inputs[2] >= 0)
    return FastShape::kSlice;
  if (op == "Expand" && s.inputs.size() == 2 && s.inputs[1] >= 0) return FastShape::kExpand;
  if (op == "ConstantOfShape" && s.inputs.size() == 1) return FastShape::kConstantOfShape;
  if (op == "Range" && s.inputs.size() == 3 && s.inputs[1] >= 0 && s.inputs[2] >= 0) return FastShape::kRange;
  if (op == "Unsqueeze" && (s.inputs.size() == 1 || (s.inputs.size() == 2 && s.inputs[1] >= 0 && weights[s.inputs[1]]))) {
    // The axes are an attribute or a weight: the same at every size.
    std::vector<int64_t> axes;
    bool present = false;
    const InferContext ictx{op, cs.attrs, cs.inputs, cs.constants, 1};
    if (!IntsParam(ictx, 1, "axes", &axes, &present).ok() || !present || axes.empty() || axes.size() > 64 ||
        !NormalizeAxes(op, axes, rank + static_cast<int64_t>(axes.size()), &axes).ok())
      return FastShape::kNone;
    *at = static_cast<int32_t>(params->size());
    params->push_back(static_cast<int64_t>(axes.size()));
    params->insert(params->end(), axes.begin(), axes.end());
    return FastShape::kUnsqueeze;
  }
  return FastShape::kNone;
}

namespace {

// Per-thread scratch as a plan reserves it: rounded up to 64 bytes.
uint64_t ScratchSlot(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

bool GuardHolds(const std::vector<int64_t>& guard, const ir::Shape& out0) {
  if (guard.size() != 3 || out0.size() != 4) return true;
  return GuardHolds(guard.data(), out0.data());
}

bool GuardHolds(const int64_t* guard, const int64_t* out0) {
  const int64_t tile = guard[1];
  const int64_t tiles = out0[0] * ((out0[1] + tile - 1) / tile) * ((out0[2] + tile - 1) / tile);
  return guard[0] == 1 ? tiles >= guard[2] : tiles < guard[2];
}

bool ComputedFromShapes(const format::StepDesc& s, const std::vector<bool>& computed,
                        const std::vector<std::shared_ptr<ir::TensorData>>& small_constants,
                        const std::vector<uint64_t>& planned_bytes, const std::vector<bool>& shapes_read) {
  if (s.op == "Shape" || s.op == "Size") return s.inputs.size() == 1 && s.inputs[0] >= 0;
  bool any_computed = false;
  for (int32_t t : s.inputs) {
    if (t < 0) continue;
    if (!small_constants[t]) return false;
    any_computed = any_computed || computed[t];
  }
  uint64_t bytes = 0;
  bool read = false;
  for (int32_t t : s.outputs) {
    if (t < 0) continue;
    bytes += std::min<uint64_t>(planned_bytes[t], kMaxInferConstantBytes + 1);
    read = read || shapes_read[t];
  }
  return any_computed && bytes <= (read ? kMaxInferConstantBytes : kMaxShapeValueBytes);
}

Result<CheckedPlan> CheckPlan(const format::ContextDesc& c, PlanWeights& weights,
                              const std::vector<ir::Shape>* input_shapes,
                              const std::vector<std::shared_ptr<ir::TensorData>>* weight_constants) {
  if (weight_constants && weight_constants->size() != c.tensors.size()) weight_constants = nullptr;
  CheckedPlan p;
  const size_t nt = c.tensors.size();
  p.infos.resize(nt);
  p.bytes.assign(nt, 0);
  p.weights.assign(nt, nullptr);
  p.small_constants.resize(nt);
  for (size_t i = 0; i < nt; ++i) {
    const auto& t = c.tensors[i];
    auto where = [&] { return "tensor " + std::to_string(i) + " ('" + t.name + "')"; };  // for errors only
    const ir::DType dtype = t.dtype;
    const size_t es = ir::DTypeSize(dtype);
    if (es == 0) return InvalidArgument(where() + " has unknown dtype code " + std::to_string(static_cast<int32_t>(t.dtype)));
    if (t.shape.size() > static_cast<size_t>(limits::kMaxRank))
      return InvalidArgument(where() + " has " + std::to_string(t.shape.size()) + " dimensions, more than the limit of " +
                             std::to_string(limits::kMaxRank) + " (fcb/limits.h)");
    auto numel = CheckedNumel(t.shape);
    if (!numel.ok()) return InvalidArgument(where() + ": " + numel.status().message());
    if (static_cast<uint64_t>(numel.value()) > limits::kMaxTensorElements)
      return InvalidArgument(where() + " has " + std::to_string(numel.value()) + " elements, more than the limit of " +
                             std::to_string(limits::kMaxTensorElements) + " (fcb/limits.h)");
    const uint64_t bytes = static_cast<uint64_t>(numel.value()) * es;
    p.bytes[i] = bytes;
    p.infos[i] = {dtype, t.shape};
    if (t.storage == format::Storage::kArena) {
      if (t.offset > c.arena_bytes || bytes > c.arena_bytes - t.offset)
        return InvalidArgument(where() + " [offset " + std::to_string(t.offset) + ", " + std::to_string(bytes) +
                               " bytes] lies outside the arena of " + std::to_string(c.arena_bytes) + " bytes");
      if (t.offset % 64 != 0) return InvalidArgument(where() + " is not 64-byte aligned in the arena");
    } else if (t.storage == format::Storage::kWeight) {
      if (t.blob < 0 || static_cast<size_t>(t.blob) >= weights.count())
        return InvalidArgument(where() + " refers to weight blob " + std::to_string(t.blob) + " which does not exist");
      if (bytes > weights.size(t.blob))
        return InvalidArgument(where() + " needs " + std::to_string(bytes) + " bytes but blob " + std::to_string(t.blob) +
                               " holds " + std::to_string(weights.size(t.blob)));
      p.weights[i] = weights.data(t.blob);
      const bool floating = dtype == ir::DType::kF32 || dtype == ir::DType::kF16 ||
                            dtype == ir::DType::kBF16 || dtype == ir::DType::kF64;
      const bool small = bytes <= kMaxInferConstantBytes;
      if (small && weight_constants && (*weight_constants)[i]) {
        p.small_constants[i] = (*weight_constants)[i];  // read (and verified) before
        continue;
      }
      if (!floating || small) FCB_RETURN_IF_ERROR(weights.Verify(t.blob, t.name));
      if (small) {
        auto td = std::make_shared<ir::TensorData>();
        td->dtype = dtype;
        td->shape = t.shape;
        const auto* b = static_cast<const uint8_t*>(p.weights[i]);
        td->bytes.assign(b, b + bytes);
        p.small_constants[i] = std::move(td);
      }
    } else if (t.storage != format::Storage::kState) {  // a state's: the State's buffer (bound: format/metadata)
      return InvalidArgument(where() + " has unknown storage kind");
    }
  }
  // Where activations live: the arena, or a State's buffer (a bound state's input or output).
  auto is_arena = [&](int32_t t) {
    return t >= 0 && static_cast<size_t>(t) < nt &&
           (c.tensors[t].storage == format::Storage::kArena || c.tensors[t].storage == format::Storage::kState);
  };
  for (int32_t t : c.inputs)
    if (!is_arena(t)) return InvalidArgument("method '" + c.method + "' input refers to an invalid tensor");
  for (int32_t t : c.outputs)
    if (!is_arena(t)) return InvalidArgument("method '" + c.method + "' output refers to an invalid tensor");
  const bool resolving = input_shapes != nullptr;
  if (resolving) {
    if (!c.dynamic() || input_shapes->size() != c.inputs.size())
      return InvalidArgument("method '" + c.method + "': input shapes given for a plan without symbols");
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      TensorInfo& info = p.infos[c.inputs[i]];
      const TensorInfo given{info.dtype, (*input_shapes)[i]};
      if (given.shape.size() != info.shape.size() || given.numel() < 0 ||
          static_cast<uint64_t>(given.bytes()) > p.bytes[c.inputs[i]])
        return InvalidArgument("method '" + c.method + "' input " + std::to_string(i) + " cannot be " +
                               ir::ShapeToString(given.shape));
      info = given;
    }
  }
  // Per tensor: computed from shapes alone at this size (plans with symbols).
  std::vector<bool> computed(nt, false);
  // Plans with symbols, per tensor: whether some step's output shapes can
  // depend on its value, as that step's input (ValueShapedInputs) or through
  // the steps computed from it (ComputedFromShapes: such values are computed
  // up to the import's kMaxInferConstantBytes, their readers' inference needs
  // them; others only up to kMaxShapeValueBytes). Only what can be computed
  // from the shapes at all counts (`maybe`: a Shape or Size, or a step reading
  // only small weights and such values, within the import's limit), so the
  // activations an op not listed there reads, and what they are made from,
  // are not. The step loop below refuses the indices out of range skipped here.
  std::vector<bool> shapes_read(nt, false);
  std::vector<uint32_t> shape_deps;  // per step, ValueShapedInputs (plans with symbols)
  if (c.dynamic()) {
    shape_deps.reserve(c.steps.size());
    for (const auto& s : c.steps) shape_deps.push_back(ValueShapedInputs(s.op));
    std::vector<bool> maybe(nt, false);
    auto in_range = [nt](int32_t t) { return t >= 0 && static_cast<size_t>(t) < nt; };
    for (const auto& s : c.steps) {
      const bool shape_op = s.op == "Shape" || s.op == "Size";
      bool all = true, any = shape_op;
      for (int32_t t : s.inputs) {
        if (t == -1 || shape_op) continue;
        all = all && in_range(t) && (maybe[t] || p.small_constants[t]);
        any = any || (in_range(t) && maybe[t]);
      }
      uint64_t bytes = 0;
      for (int32_t t : s.outputs) bytes += in_range(t) ? std::min<uint64_t>(p.bytes[t], kMaxInferConstantBytes + 1) : 0;
      if (any && all && bytes <= kMaxInferConstantBytes)
        for (int32_t t : s.outputs)
          if (in_range(t)) maybe[t] = true;
    }
    for (size_t si = c.steps.size(); si-- > 0;) {
      const auto& s = c.steps[si];
      const uint32_t deps = shape_deps[si];
      bool feeds = false;
      for (int32_t t : s.outputs) feeds = feeds || (in_range(t) && shapes_read[t]);
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        const int32_t t = s.inputs[i];
        if (in_range(t) && maybe[t] && (feeds || i >= 31 || ((deps >> i) & 1))) shapes_read[t] = true;
      }
    }
  }
  p.computed_steps.assign(c.steps.size(), false);
  p.guarded_off.assign(c.steps.size(), false);
  p.needed.assign(nt, false);
  for (size_t si = 0; si < c.steps.size(); ++si) {
    const auto& s = c.steps[si];
    CheckedStep cs;
    cs.where = "step " + std::to_string(si) + " (" + s.op + ", node '" + s.node + "')";
    cs.def = FindOp(s.op);
    if (!cs.def) return InvalidArgument(cs.where + ": operator '" + s.op + "' is unknown to this runtime");
    for (int32_t t : s.inputs) {
      if (t == -1) {
        cs.inputs.push_back({});
        cs.constants.push_back(nullptr);
        cs.data.push_back(nullptr);
        continue;
      }
      if (t < 0 || static_cast<size_t>(t) >= nt) return InvalidArgument(cs.where + ": input tensor index out of range");
      cs.inputs.push_back(p.infos[t]);
      cs.constants.push_back(p.small_constants[t].get());
      cs.data.push_back(p.weights[t]);
    }
    std::vector<TensorInfo> declared;
    for (int32_t t : s.outputs) {
      if (!is_arena(t)) return InvalidArgument(cs.where + ": output must be an arena tensor");
      declared.push_back(p.infos[t]);
    }
    FCB_RETURN_IF_ERROR(CheckStepOverlap(c, s, *cs.def, p.bytes, cs.where));
    cs.attrs = Attrs(s.attrs);
    InferContext ictx{s.op, cs.attrs, cs.inputs, cs.constants, static_cast<int>(s.outputs.size())};
    Status st = InferOutputs(*cs.def, ictx, &cs.outputs);
    if (!st.ok()) return InvalidArgument(cs.where + ": " + st.message());
    for (size_t i = 0; i < cs.outputs.size(); ++i) {
      if (!resolving) {
        if (cs.outputs[i].dtype != declared[i].dtype || cs.outputs[i].shape != declared[i].shape)
          return InvalidArgument(cs.where + ": output " + std::to_string(i) + " is declared " +
                                 ir::DTypeName(declared[i].dtype) + " " + ir::ShapeToString(declared[i].shape) +
                                 " but its inputs give " + ir::DTypeName(cs.outputs[i].dtype) + " " +
                                 ir::ShapeToString(cs.outputs[i].shape));
        continue;
      }
      const int32_t t = s.outputs[i];
      if (cs.outputs[i].dtype != declared[i].dtype || cs.outputs[i].shape.size() != declared[i].shape.size())
        return InvalidArgument(cs.where + ": output " + std::to_string(i) + " is declared " +
                               ir::DTypeName(declared[i].dtype) + " of rank " +
                               std::to_string(declared[i].shape.size()) + " but at this size its inputs give " +
                               ir::DTypeName(cs.outputs[i].dtype) + " " + ir::ShapeToString(cs.outputs[i].shape));
      auto numel = CheckedNumel(cs.outputs[i].shape);
      if (!numel.ok() || static_cast<uint64_t>(numel.value()) * ir::DTypeSize(declared[i].dtype) > p.bytes[t])
        return InvalidArgument(cs.where + ": output " + std::to_string(i) + " ('" + c.tensors[t].name + "') is " +
                               ir::ShapeToString(cs.outputs[i].shape) + " at this size, more than the " +
                               std::to_string(p.bytes[t]) + " bytes planned for it at the bound (" +
                               ir::ShapeToString(declared[i].shape) + ")");
      p.infos[t] = cs.outputs[i];
    }
    if (!s.guard.empty()) {
      if (cs.outputs.empty() || cs.outputs[0].shape.size() != 4)
        return InvalidArgument(cs.where + ": a guarded step needs an output of rank 4 ([N, H, W, C])");
      p.guarded_off[si] = !GuardHolds(s.guard, cs.outputs[0].shape);
    }
    if (c.dynamic() && ComputedFromShapes(s, computed, p.small_constants, p.bytes, shapes_read)) {
      std::vector<std::shared_ptr<ir::TensorData>> values;
      if (s.op == "Shape" || s.op == "Size") {
        const auto v = ShapeOpValues(s.op, cs.attrs, cs.inputs[0].shape);
        values.push_back(s.op == "Size" ? ir::TensorData::FromInts({}, v)
                                        : ir::TensorData::FromInts({static_cast<int64_t>(v.size())}, v));
      } else {
        auto ev = Evaluate(s.op, cs.attrs, cs.constants, static_cast<int>(s.outputs.size()));
        if (!ev.ok()) return InvalidArgument(cs.where + ": evaluating it from the shapes: " + ev.status().message());
        values = std::move(ev).value();
      }
      p.computed_steps[si] = true;
      for (size_t i = 0; i < s.outputs.size() && i < values.size(); ++i) {
        if (values[i]->dtype != cs.outputs[i].dtype || values[i]->shape != cs.outputs[i].shape)
          return InvalidArgument(cs.where + ": its value from the shapes disagrees with its inferred output");
        p.small_constants[s.outputs[i]] = std::move(values[i]);
        computed[s.outputs[i]] = true;
      }
    }
    if (cs.def->scratch) {
      auto scratch = cs.def->scratch(cs.create_context());
      if (!scratch.ok()) return InvalidArgument(cs.where + ": " + scratch.status().message());
      cs.scratch = scratch.value();
      if (cs.scratch > (uint64_t{1} << 30)) return InvalidArgument(cs.where + ": scratch of " + std::to_string(cs.scratch) + " bytes is too large");
      p.scratch_bytes = std::max(p.scratch_bytes, ScratchSlot(cs.scratch));
    }
    p.steps.push_back(std::move(cs));
  }
  for (size_t si = 0; si < c.steps.size(); ++si)
    if (!p.computed_steps[si])
      for (int32_t t : c.steps[si].inputs)
        if (t >= 0) p.needed[t] = true;
  for (int32_t t : c.outputs) p.needed[t] = true;
  p.computed_tensors = std::move(computed);
  if (c.dynamic()) {
    // What a resolution walks (ResolvePlan): the steps a change of the
    // inputs' sizes can reach, their operands in one flat array.
    std::vector<uint8_t> reach(c.tensors.size(), 0);
    for (int32_t t : c.inputs) reach[t] = 1;
    p.reach_offsets.push_back(0);
    p.reach_out_offsets.push_back(0);
    for (size_t si = 0; si < c.steps.size(); ++si) {
      const auto& s = c.steps[si];
      bool reached = false;
      for (int32_t t : s.inputs) reached = reached || (t >= 0 && reach[t]);
      if (!reached) {
        p.unreached_scratch = std::max(p.unreached_scratch, ScratchSlot(p.steps[si].scratch));
        continue;
      }
      for (int32_t t : s.outputs) reach[t] = 1;
      p.reach_steps.push_back(static_cast<int32_t>(si));
      p.reach_inputs.insert(p.reach_inputs.end(), s.inputs.begin(), s.inputs.end());
      p.reach_offsets.push_back(static_cast<int32_t>(p.reach_inputs.size()));
      p.reach_shape_deps.push_back(s.op == "Shape" || s.op == "Size" ? CheckedPlan::kShapeOfRank : shape_deps[si]);
      p.reach_param_at.push_back(-1);
      p.reach_fast.push_back(static_cast<uint8_t>(FastShapeOf(s, p.steps[si], p.weights, &p.reach_params, &p.reach_param_at.back())));
      p.reach_outputs.insert(p.reach_outputs.end(), s.outputs.begin(), s.outputs.end());
      p.reach_out_offsets.push_back(static_cast<int32_t>(p.reach_outputs.size()));
      p.reach_defs.push_back(p.steps[si].def);
      p.reach_scratch.push_back(p.steps[si].scratch);
      const OpDef& def = *p.steps[si].def;
      const bool asks_scratch = def.scratch && !(def.traits & kTraitFixedScratch);
      p.reach_flags.push_back(static_cast<uint8_t>((asks_scratch ? CheckedPlan::kReachScratch : 0) |
                                                   (s.guard.empty() ? 0 : CheckedPlan::kReachGuard) |
                                                   (p.computed_steps[si] ? CheckedPlan::kReachComputed : 0)));
    }
    p.dim_at.reserve(c.tensors.size() + 1);
    p.dtypes.reserve(c.tensors.size());
    for (const TensorInfo& info : p.infos) {
      p.dim_at.push_back(static_cast<int32_t>(p.dims.size()));
      p.dims.insert(p.dims.end(), info.shape.begin(), info.shape.end());
      p.dtypes.push_back(info.dtype);
    }
    p.dim_at.push_back(static_cast<int32_t>(p.dims.size()));
  }
  return p;
}

uint32_t ValueShapedInputs(std::string_view op) {
  // Output shapes from the input shapes and attributes alone (Gather's from
  // the indices' shape, whatever their values: a kernel checks them as it
  // reads them).
  static constexpr std::string_view kNone[] = {
      "Abs", "Add", "And", "BitShift", "Cast", "Ceil", "Concat", "Div", "Equal", "Erf", "Exp", "Floor", "Gather",
      "Gelu", "Greater", "GreaterOrEqual", "Identity", "IsInf", "IsNaN", "LayerNormalization", "Less", "LessOrEqual",
      "Log", "LogSoftmax", "MatMul", "Max", "Mean", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal",
      "Relu", "Round", "Shape", "Sigmoid", "Sign", "Size", "Softmax", "Sqrt", "Sub", "Sum", "Tanh", "Transpose",
      "Where", "Xor"};
  for (std::string_view n : kNone)
    if (op == n) return 0;
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Expand" || op == "Tile" ||
      op == "Split")
    return 1u << 1;
  if (op == "Slice") return 0b11110;
  if (op == "ConstantOfShape") return 1u << 0;
  return ~CheckedPlan::kShapeOfRank;
}

std::string CheckStateBinding(const format::ContextDesc& c, const format::ContextDesc::StateDesc& b,
                              int32_t* step) {
  const int32_t in = c.inputs[b.input], out = c.outputs[b.output];
  const std::string pair = "state '" + c.tensors[in].name + "' -> '" + c.tensors[out].name + "'";
  int32_t producer = -1;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const auto& s = c.steps[i];
    for (int32_t t : s.outputs)
      if (t == out) {
        if (producer >= 0)
          return pair + ": '" + c.tensors[out].name + "' is written by two steps (" + std::to_string(producer) +
                 " and " + std::to_string(i) + ")";
        producer = static_cast<int32_t>(i);
      }
  }
  if (producer < 0) return pair + ": no step writes '" + c.tensors[out].name + "'";
  const auto& s = c.steps[producer];
  // The steps that update a state in place, and which input each output
  // continues: GroupQueryAttention's present_key (1) / present_value (2)
  // over past_key (3) / past_value (4).
  const bool gqa = s.op == "com.microsoft.GroupQueryAttention";
  // A growing cache: KvAppend's present (output 0) over its past (input 0).
  const bool append = s.op == opname::KvAppend;
  bool in_place = append && s.outputs.size() == 1 && s.outputs[0] == out && !s.inputs.empty() && s.inputs[0] == in;
  // Only a growing cache's past and present differ (in their rows), and only
  // its past's rows are chosen at each run.
  if (!append) {
    bool symbolic = false;
    if (!c.input_symbols.empty()) {
      size_t k0 = 0;
      for (int32_t i = 0; i < b.input; ++i) k0 += c.tensors[c.inputs[i]].shape.size();
      for (size_t d = 0; d < c.tensors[in].shape.size() && k0 + d < c.input_symbols.size(); ++d)
        symbolic = symbolic || c.input_symbols[k0 + d] != -1;
    }
    if (c.tensors[in].shape != c.tensors[out].shape || symbolic)
      return pair + ": '" + c.tensors[in].name + "' and '" + c.tensors[out].name + "' differ in shape or have a "
             "dim chosen at each run, which only a cache appended in place (KvAppend) may";
  }
  if (gqa)
    for (int k : {1, 2})
      if (s.outputs.size() > static_cast<size_t>(k) && s.outputs[k] == out && s.inputs.size() > static_cast<size_t>(k + 2) &&
          s.inputs[k + 2] == in)
        in_place = true;
  if (!in_place)
    return pair + ": '" + c.tensors[out].name + "' is written by step " + std::to_string(producer) + " (" + s.op +
           ", node '" + s.node + "'), which does not update '" + c.tensors[in].name +
           "' in place; fcb keeps a state in place where a com.microsoft.GroupQueryAttention with a static "
           "buffer (past and present of one shape) writes it, or a KvAppend (kv_capacity with a growing "
           "cache, present = Concat(past, new))";
  auto row_capacity = [](const format::StepDesc& st) -> int64_t {
    for (const auto& a : st.attrs)
      if (a.name == attr::kRowCapacity && a.ints.size() == 1) return a.ints[0];
    return -1;
  };
  for (size_t i = 0; i < c.steps.size(); ++i) {
    if (static_cast<int32_t>(i) == producer) continue;
    const auto& st = c.steps[i];
    // A growing cache's present is a strided buffer: only attention steps of
    // its capacity read it (as K or V), and its past is read for its shape only.
    if (append) {
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        if (st.inputs[k] != out) continue;
        const bool ok = st.op == "Shape" ||
                        (st.op == opname::AttentionFused && (k == 1 || k == 2) && row_capacity(st) == row_capacity(s));
        if (!ok)
          return pair + ": step " + std::to_string(i) + " (" + st.op + ", node '" + st.node + "') reads '" +
                 c.tensors[out].name + "', a cache kept in place with " + std::to_string(row_capacity(s)) +
                 " rows per head, which only a fused attention reads (the attention pattern MatMul, scale, "
                 "mask, Softmax, MatMul over it was not recognised)";
      }
      if (st.op == "Shape") continue;
    }
    for (int32_t t : st.inputs)
      if (t == in)
        return pair + ": step " + std::to_string(i) + " (" + c.steps[i].op + ", node '" + c.steps[i].node +
               "') also reads '" + c.tensors[in].name + "', whose bytes the update overwrites";
  }
  for (int32_t t : c.outputs)
    if (t == in) return pair + ": '" + c.tensors[in].name + "' is also a method output";
  if (step) *step = producer;
  return "";
}

}  // namespace fcb::ops

namespace fcb::ops {
bool FastOutputShape(FastShape kind, const int64_t* params, const std::vector<TensorInfo>& in,
                     const std::vector<const ir::TensorData*>& constants, const CheckedStep& b,
                     std::vector<TensorInfo>* outs) {
  if (b.outputs.empty() || b.inputs.empty()) return false;
  const FastShapeBound fb{b.def->name,
                          b.outputs[0].dtype,
                          b.inputs[0].shape.data(),
                          b.inputs[0].shape.size(),
                          b.outputs[0].shape.data(),
                          b.outputs[0].shape.size()};
  return FastOutputShape(kind, params, in, constants, fb, outs);
}

// FastOutputDims' storage per output.
constexpr size_t kRankCap = static_cast<size_t>(kMaxRank);

bool FastOutputShape(FastShape kind, const int64_t* params, const std::vector<TensorInfo>& in,
                     const std::vector<const ir::TensorData*>& constants, const FastShapeBound& b,
                     std::vector<TensorInfo>* outs) {
  if (in.size() > kMaxFastOperands) return false;
  DimsRef refs[kMaxFastOperands];
  const ir::TensorData* values[kMaxFastOperands];
  for (size_t i = 0; i < in.size(); ++i) {
    refs[i] = DimsRef{in[i].shape.data(), in[i].shape.size(), in[i].dtype};
    values[i] = i < constants.size() ? constants[i] : nullptr;
  }
  int64_t dims[kMaxFastOutputs * kRankCap];
  size_t ranks[kMaxFastOutputs], n_out = 0;
  ir::DType dtype = ir::DType::kUndefined;
  if (!FastOutputDims(kind, params, refs, in.size(), values, b, dims, ranks, &n_out, &dtype)) return false;
  outs->resize(n_out);
  for (size_t i = 0; i < n_out; ++i) {
    (*outs)[i].dtype = dtype;
    (*outs)[i].shape.assign(dims + i * kRankCap, dims + i * kRankCap + ranks[i]);
  }
  return true;
}

bool FastOutputDims(FastShape kind, const int64_t* params, const DimsRef* in, size_t n_in,
                    const ir::TensorData* const* constants, const FastShapeBound& b, int64_t* out, size_t* ranks,
                    size_t* n_out, ir::DType* dtype) {
  if (kind == FastShape::kNone || n_in == 0) return false;
  const int64_t* x = in[0].d;
  const size_t xr = in[0].n;
  if (kind == FastShape::kSplit) {
    const size_t axis = static_cast<size_t>(params[0]), n = static_cast<size_t>(params[1]);
    if (xr != b.in0_rank || xr > kRankCap || n > kMaxFastOutputs || axis >= xr || x[axis] != b.in0[axis]) return false;
    for (size_t i = 0; i < n; ++i) {
      int64_t* o = out + i * kRankCap;
      std::copy(x, x + xr, o);
      o[axis] = params[2 + i];
      ranks[i] = xr;
    }
    *n_out = n;
    *dtype = in[0].dtype;
    return true;
  }
  // An int64 value of rank <= 1 known at these sizes, as input i: its
  // elements and count (false: absent, not known, or of another kind, which
  // the inference then reads or refuses).
  auto int64s = [&](size_t i, const int64_t** v, size_t* n) {
    const ir::TensorData* t = i < n_in ? constants[i] : nullptr;
    if (!t || t->dtype != ir::DType::kI64 || in[i].dtype != ir::DType::kI64 || t->shape.size() > 1 ||
        t->shape.size() != in[i].n || !std::equal(t->shape.begin(), t->shape.end(), in[i].d))
      return false;
    *v = t->data<int64_t>();
    *n = static_cast<size_t>(t->numel());
    return true;
  };
  *n_out = 1;
  *dtype = b.dtype;
  int64_t* o = out;
  size_t& r = ranks[0];
  if (kind == FastShape::kWindow) {
    // Input 0's other dims as at the bound; each spatial output at least 1;
    // the residual the output's shape (else the inference refuses).
    if (xr != 4 || b.in0_rank != 4 || b.out0_rank != 4) return false;
    const auto h = static_cast<size_t>(params[kWinH]), w = static_cast<size_t>(params[kWinW]);
    for (size_t d = 0; d < 4; ++d)
      if ((d != 0 && d != h && d != w && x[d] != b.in0[d]) || x[d] < 1 || x[d] > (int64_t{1} << 31)) return false;
    o[0] = x[0];
    for (size_t i = 0; i < 2; ++i) {
      o[1 + i] = params[kWinGlobal] ? 1
                                    : WindowOutputSize(x[i == 0 ? h : w], params[kWinPadBegin + i],
                                                       params[kWinPadEnd + i], params[kWinExtent + i],
                                                       params[kWinStride + i], params[kWinCeil] != 0);
      if (o[1 + i] < 1) return false;
    }
    o[3] = b.out0[3];
    r = 4;
    const int64_t res = params[kWinResidual];
    if (res >= 0) {
      const auto ri = static_cast<size_t>(res);
      if (ri >= n_in || !in[ri].present() || in[ri].n != 4 || !std::equal(o, o + 4, in[ri].d)) return false;
    }
    return true;
  }
  switch (kind) {
    case FastShape::kSameAsInput0:
      if (xr > kRankCap) return false;
      std::copy(x, x + xr, o);
      r = xr;
      return true;
    case FastShape::kBroadcast: {
      // Every input broadcast with the ones before it (BroadcastShapes).
      r = xr;
      if (r > kRankCap) return false;
      std::copy(x, x + xr, o);
      for (size_t i = 1; i < n_in; ++i) {
        const int64_t* y = in[i].d;
        const size_t yr = in[i].n, nr = std::max(r, yr);
        if (nr > kRankCap) return false;
        // Right-aligned: o's dims move up by nr - r, filled with 1 before.
        std::copy_backward(o, o + r, o + nr);
        std::fill(o, o + (nr - r), int64_t{1});
        for (size_t d = 0; d < nr; ++d)
          if (!BroadcastOneDim(o[d], d < nr - yr ? 1 : y[d - (nr - yr)], &o[d])) return false;
        r = nr;
      }
      return true;
    }
    case FastShape::kTranspose:
      if (xr != b.in0_rank || xr > kRankCap) return false;
      for (size_t d = 0; d < xr; ++d) o[d] = x[static_cast<size_t>(params[d])];
      r = xr;
      return true;
    case FastShape::kLayerNorm: {
      const size_t axis = static_cast<size_t>(params[0]);
      if (xr != b.in0_rank || xr > kRankCap || axis > xr || !std::equal(x + axis, x + xr, b.in0 + axis)) return false;
      std::copy(x, x + xr, o);
      r = xr;
      return true;
    }
    case FastShape::kGemmPacked:
      if (xr == 0 || xr != b.in0_rank || xr > kRankCap || x[xr - 1] != b.in0[b.in0_rank - 1] || b.out0_rank == 0)
        return false;
      std::copy(x, x + xr, o);
      o[xr - 1] = b.out0[b.out0_rank - 1];
      r = xr;
      return true;
    case FastShape::kMatMul: {
      // MatMulGeometry's batch dims, then M (A not 1-D) and N (B not 1-D).
      if (n_in < 2) return false;
      MatMulDims d;
      if (!MatMulGeometry(b.op, {x, xr}, {in[1].d, in[1].n}, &d).ok() || d.batch.size() + 2 > kRankCap) return false;
      r = d.batch.size();
      std::copy(d.batch.v.begin(), d.batch.v.begin() + static_cast<std::ptrdiff_t>(r), o);
      if (xr != 1) o[r++] = d.M;
      if (in[1].n != 1) o[r++] = d.N;
      return true;
    }
    case FastShape::kUnsqueeze: {
      const size_t n = static_cast<size_t>(params[0]);
      r = xr + n;
      if (r != b.out0_rank || r > kRankCap) return false;
      size_t next_in = 0, next_axis = 0;
      for (size_t i = 0; i < r; ++i) {
        if (next_axis < n && params[1 + next_axis] == static_cast<int64_t>(i)) {
          o[i] = 1;
          ++next_axis;
        } else {
          if (next_in >= xr) return false;
          o[i] = x[next_in++];
        }
      }
      return next_in == xr;
    }
    case FastShape::kConcat: {
      const size_t axis = static_cast<size_t>(params[0]);
      if (axis >= xr || xr > kRankCap) return false;
      std::copy(x, x + xr, o);
      o[axis] = 0;
      for (size_t i = 0; i < n_in; ++i) {
        const int64_t* t = in[i].d;
        if (in[i].n != xr) return false;
        for (size_t d = 0; d < xr; ++d)
          if (d != axis && t[d] != x[d]) return false;
        o[axis] += t[axis];
        if (o[axis] > kMaxElements) return false;
      }
      r = xr;
      return true;
    }
    case FastShape::kGather: {
      const size_t axis = static_cast<size_t>(params[0]);
      if (axis >= xr || n_in < 2) return false;
      const size_t ir = in[1].n;
      r = xr - 1 + ir;
      if (r > kRankCap) return false;
      std::copy(x, x + axis, o);
      std::copy(in[1].d, in[1].d + ir, o + axis);
      std::copy(x + axis + 1, x + xr, o + axis + ir);
      return true;
    }
    case FastShape::kSlice: {
      // Slice's inference (SliceAxesOf) where it succeeds: per axis sliced,
      // its count (SliceAxisCount).
      const int64_t *starts = nullptr, *ends = nullptr, *axes = nullptr, *steps = nullptr;
      size_t n = 0, n_ends = 0, n_axes = 0, n_steps = 0;
      if (xr != b.out0_rank || xr > kRankCap || !int64s(1, &starts, &n) || !int64s(2, &ends, &n_ends) || n_ends != n)
        return false;
      const bool has_axes = n_in > 3 && in[3].present(), has_steps = n_in > 4 && in[4].present();
      if ((has_axes && (!int64s(3, &axes, &n_axes) || n_axes != n)) ||
          (has_steps && (!int64s(4, &steps, &n_steps) || n_steps != n)) || (!has_axes && n > xr))
        return false;
      std::copy(x, x + xr, o);
      r = xr;
      uint64_t seen = 0;
      const int64_t rank = static_cast<int64_t>(xr);
      for (size_t i = 0; i < n; ++i) {
        int64_t a = has_axes ? axes[i] : static_cast<int64_t>(i);
        if (a < -rank || a >= rank) return false;
        if (a < 0) a += rank;
        if (seen & (uint64_t{1} << a)) return false;
        seen |= uint64_t{1} << a;
        const int64_t dim = x[static_cast<size_t>(a)], step = has_steps ? steps[i] : 1;
        if (step == 0 || step == INT64_MIN) return false;
        int64_t first;
        o[static_cast<size_t>(a)] = dim == 0 ? 0 : SliceAxisCount(dim, starts[i], ends[i], step, &first);
      }
      return true;
    }
    case FastShape::kExpand: {
      // The input broadcast with the shape (BroadcastShapes), which has no negative dim.
      const int64_t* v = nullptr;
      size_t n = 0;
      if (!int64s(1, &v, &n) || n > kRankCap || xr > kRankCap) return false;
      r = std::max(xr, n);
      for (size_t i = 0; i < r; ++i) {
        const int64_t db = i < r - n ? 1 : v[i - (r - n)];
        if (db < 0 || !BroadcastOneDim(i < r - xr ? 1 : x[i - (r - xr)], db, &o[i])) return false;
      }
      return DimsWithinLimits(o, r);
    }
    case FastShape::kConstantOfShape: {
      const int64_t* v = nullptr;
      size_t n = 0;
      if (!int64s(0, &v, &n) || n != b.out0_rank || n > kRankCap) return false;
      int64_t total = 1;
      for (size_t i = 0; i < n; ++i) {
        if (v[i] < 0 || (v[i] > 0 && total > kMaxElements / v[i])) return false;
        total *= v[i];
      }
      std::copy(v, v + n, o);
      r = n;
      return DimsWithinLimits(o, r);
    }
    case FastShape::kRange: {
      // Integer Range: ceil((limit - start) / delta) elements, exactly.
      const ir::DType t = in[0].dtype;
      if ((t != ir::DType::kI64 && t != ir::DType::kI32) || n_in != 3 || b.dtype != t) return false;
      __int128 v[3];
      for (size_t i = 0; i < 3; ++i) {
        const ir::TensorData* c = constants[i];
        if (!c || c->dtype != t || in[i].dtype != t || c->numel() != 1) return false;
        v[i] = t == ir::DType::kI64 ? __int128{c->data<int64_t>()[0]} : __int128{c->data<int32_t>()[0]};
      }
      if (v[2] == 0) return false;
      const __int128 q = IntegerRangeCount(v[0], v[1], v[2]);
      if (q > kMaxElements) return false;
      o[0] = static_cast<int64_t>(q);
      r = 1;
      return true;
    }
    case FastShape::kReshape: {
      // Reshape's inference (allowzero 0) where it succeeds; anything else
      // goes to it for its refusal.
      const ir::TensorData* target = n_in > 1 ? constants[1] : nullptr;
      if (!target || target->dtype != ir::DType::kI64) return false;
      const int64_t n = target->numel();
      if (n < 0 || static_cast<size_t>(n) != b.out0_rank || n > kRankCap) return false;
      r = static_cast<size_t>(n);
      const int64_t* v = target->data<int64_t>();
      return ReshapeTarget(b.op, {x, xr}, v, v + n, false, o).ok();
    }
    default:
      return false;
  }
}

namespace {

// ResolvePlan, `compiled`: where the program evaluates, with the proven
// shapes and without walking the steps only program steps read
// (CheckedPlan::walk_compiled); else walking every reached step.
Status Resolve(const format::ContextDesc& c, const CheckedPlan& bound, const std::vector<ir::Shape>& input_shapes,
               ResolvedPlan* out, bool compiled) {
  ResolvedPlan& r = *out;
  const size_t nt = c.tensors.size(), ns = c.steps.size(), nk = bound.reach_steps.size();
  if (!c.dynamic() || input_shapes.size() != c.inputs.size() || bound.infos.size() != nt || bound.steps.size() != ns)
    return InvalidArgument("method '" + c.method + "': input shapes given for a plan without symbols");
  // The bound's flat index of what a change of sizes reaches (CheckPlan
  // makes it for every plan with symbols).
  if (bound.reach_offsets.size() != nk + 1 || bound.reach_shape_deps.size() != nk || bound.reach_fast.size() != nk ||
      bound.reach_param_at.size() != nk || bound.reach_out_offsets.size() != nk + 1 || bound.reach_defs.size() != nk ||
      bound.reach_flags.size() != nk || bound.reach_scratch.size() != nk || bound.dim_at.size() != nt + 1 ||
      bound.dtypes.size() != nt)
    return InvalidArgument("method '" + c.method + "': its plan at the bound has no index of the steps sizes reach");
  // What is allocated here is per tensor and per step reached, never a copy
  // of the bound's per-tensor values: a resolution overlays the bound's plan
  // (changed_tensors and dims, value_slot, step_slot) with what differs at
  // these sizes.
  r.bound = &bound;
  size_t used = 0;
  // Per tensor: its shape (kShape) or its value computed from the shapes
  // (kValue) differs from the bound's.
  constexpr uint8_t kShape = ResolvedPlan::kShapeChanged, kValue = ResolvedPlan::kValueChanged;
  std::vector<uint8_t>& changed = r.changed_tensors;
  // The overlays (step_slot, value_slot, changed_tensors, dims) keep their
  // storage from one resolution into this one to the next: each starts as
  // the bound's (-1, 0, the bound's dims) with what the earlier resolution
  // set put back through its lists (the steps walked, the values worked out,
  // the shapes written, the values marked unread), but for what a compiled
  // walk sets the same at every size (the proven steps' slots and shapes,
  // the values it passes by: below), which stays where this one is compiled
  // too. A resolution runs with cold caches: this touches what changes
  // rather than every tensor's and step's entry.
  // Storage not yet sized for this plan (the first resolution into it) is
  // sized here (ReserveResolvedPlan: also one Step per step reached, reused
  // from one resolution to the next, and the in-place shaping's buffers).
  if (r.step_slot.size() != ns || r.value_slot.size() != nt || changed.size() != nt ||
      r.dims.size() != bound.dims.size() || r.steps.size() < nk || r.fast_dims.size() != kMaxFastOutputs * kRankCap)
    ReserveResolvedPlan(c, bound, &r);
  for (int32_t si : r.slotted_steps) r.step_slot[si] = -1;
  for (int32_t t : r.unread_marked) r.value_slot[t] = -1;
  for (int32_t t : r.value_tensors) r.value_slot[t] = -1, changed[t] = 0;
  r.slotted_steps.clear();
  r.unread_marked.clear();
  // The dims of the tensors whose shapes change, flat as the bound's: a
  // resolution runs with cold caches, so the steps walked read their
  // operands' shapes from these two flat arrays (dims_of below) rather than
  // from the scattered TensorInfo vectors.
  // Its places start as the bound's dims (those a resolution never writes,
  // the constant dims of the proven shapes, keep them), and every shape an
  // earlier resolution into this one wrote is put back to the bound's first
  // (dims_written; the proven ones below): so after a resolution `dims`
  // holds every tensor's shape at its sizes, and a span into it (an adapting
  // kernel's, ResolvedMethod::shapes) stays valid from one size to the next.
  // Tensor t's shape put back to the bound's.
  auto put_back_dims = [&](int32_t t) {
    std::copy(bound.dims.data() + bound.dim_at[t], bound.dims.data() + bound.dim_at[t + 1],
              r.dims.data() + bound.dim_at[t]);
    changed[t] = 0;
  };
  for (int32_t t : r.dims_written) put_back_dims(t);
  r.dims_written.clear();
  auto rank_of = [&](int32_t t) { return static_cast<size_t>(bound.dim_at[t + 1] - bound.dim_at[t]); };
  // The values of the resolution this one is made over, by tensor: their
  // storage is reused for the same tensors' values where no one else holds
  // them (asked when one is reused: each value's count is a cold read).
  r.prior.clear();
  for (size_t k = 0; k < r.values.size() && k < r.value_tensors.size(); ++k)
    if (r.values[k]) r.prior.emplace_back(r.value_tensors[k], std::move(r.values[k]));
  r.values.clear();
  r.value_tensors.clear();
  r.guarded_off = bound.guarded_off;
  // Only the steps a change of sizes can reach are walked (CheckedPlan::reach_steps, their operands
  // and outputs in flat arrays); the others keep the bound's everything, their scratch is the
  // bound's unreached_scratch.
  r.scratch_bytes = bound.unreached_scratch;
  r.shapes_kept = r.shapes_fast = r.shapes_inferred = 0;
  // Tensor t's dims at these sizes: this resolution's where its shape
  // changed, else the bound's.
  auto bound_dims = [&](int32_t t) { return bound.dims.data() + bound.dim_at[t]; };
  auto new_dims = [&](int32_t t) { return r.dims.data() + bound.dim_at[t]; };
  auto dims_of = [&](int32_t t) -> const int64_t* { return (changed[t] & kShape) ? new_dims(t) : bound_dims(t); };
  // Tensor t's shape at these sizes is `now` (its rank as at the bound).
  auto set_dims = [&](int32_t t, const int64_t* now) {
    if (std::equal(now, now + rank_of(t), bound_dims(t))) return;
    std::copy(now, now + rank_of(t), new_dims(t));
    changed[t] |= kShape;
    r.dims_written.push_back(t);
  };
  auto set_value = [&](int32_t t, std::shared_ptr<ir::TensorData> v) {
    if (r.value_slot[t] < 0) {
      r.value_slot[t] = static_cast<int32_t>(r.values.size());
      r.values.push_back(std::move(v));
      r.value_tensors.push_back(t);
    } else {
      r.values[r.value_slot[t]] = std::move(v);
    }
  };
  // The storage of tensor t's value in the resolution made over, if any,
  // handed over in r.spare (SpareTensor takes it).
  // The values come in the same order at every size (the walk's), so the
  // search starts after the last one found.
  size_t prior_next = 0;
  auto spare_of = [&](int32_t t) {
    r.spare.clear();
    const size_t n = r.prior.size();
    for (size_t j = 0; j < n; ++j) {
      auto& [pt, pv] = r.prior[(prior_next + j) % n];
      if (pt != t || !pv) continue;
      if (pv.use_count() == 1) r.spare.push_back(std::move(pv));
      prior_next = (prior_next + j + 1) % n;
      break;
    }
  };
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const int32_t t = c.inputs[i];
    const TensorInfo& info = bound.infos[t];
    const ir::Shape& given = input_shapes[i];
    const int64_t numel = ir::NumElements(given);
    if (given.size() != info.shape.size() || numel < 0 ||
        static_cast<uint64_t>(numel) * ir::DTypeSize(info.dtype) > bound.bytes[t])
      return InvalidArgument("method '" + c.method + "' input " + std::to_string(i) + " cannot be " +
                             ir::ShapeToString(given));
    set_dims(t, given.data());
  }
  // The values compiled from the symbolic plan (CheckedPlan::value_program)
  // at these sizes, where the inputs give every symbol one value within its
  // range and the program evaluates (no division by zero, no overflow);
  // else every computed step is evaluated as the step.
  bool program_ready = bound.reach_value_at.size() == nk && bound.value_program.num_outputs() > 0 &&
                       bound.value_program.num_symbols() == c.symbols.size() &&
                       bound.value_program_bound.size() <= bound.value_program.num_outputs();
  if (program_ready) {
    r.symbol_values.assign(c.symbols.size(), -1);
    size_t k = 0;
    for (size_t i = 0; program_ready && i < c.inputs.size(); ++i)
      for (size_t d = 0; program_ready && d < input_shapes[i].size(); ++d, ++k) {
        const int32_t id = k < c.input_symbols.size() ? c.input_symbols[k] : -2;
        if (id == -1) continue;
        const int64_t v = input_shapes[i][d];
        program_ready = id >= 0 && static_cast<size_t>(id) < c.symbols.size() && v >= c.symbols[id].lo &&
                        v <= c.symbols[id].hi && (r.symbol_values[id] < 0 || r.symbol_values[id] == v);
        if (program_ready) r.symbol_values[id] = v;
      }
    program_ready = program_ready && k == c.input_symbols.size() &&
                    std::find(r.symbol_values.begin(), r.symbol_values.end(), -1) == r.symbol_values.end();
    if (program_ready) {
      r.program_slots.resize(bound.value_program.num_slots());
      program_ready = bound.value_program.Evaluate(r.symbol_values, r.program_slots).ok();
    }
  }
  r.values_compiled = 0;
  // One step's operands: a set per operand count, reused from step to step
  // and from the resolution made over (their shapes' storage too); kernel
  // creation gathers them again (ResolvedPlan::create_context).
  std::vector<const ir::TensorData*> constants;
  std::vector<std::shared_ptr<ir::TensorData>> values;
  // Where the program evaluates, the steps whose values only other program
  // steps read are passed by without a visit: their outputs are marked
  // unread here, and the walk goes over the others alone.
  // The steps whose shapes are proven (CheckedPlan::proven_step_index) get them
  // from the program, every dim of their outputs, and count as walked.
  const bool compiled_walk = compiled && program_ready && bound.walk_compiled && bound.reach_walk.size() <= nk &&
                           bound.proven_dim_index.size() == bound.proven_dim_slot.size() &&
                           bound.verify_tensor.size() == bound.verify_slot.size();
  r.shapes_proven = 0;
  // What a compiled walk sets the same at every size (the proven steps'
  // slots and shapes, changed at every size, their Step slots holding
  // nothing of theirs; the values it passes by, unread): kept from an
  // earlier compiled resolution into this one, set where there was none, put
  // back to the bound's where this one walks every step (the proven dims
  // included: they are written again below where it is compiled).
  if (r.proven_written && !compiled_walk) {
    for (int32_t t : bound.proven_tensors) put_back_dims(t);
    for (int32_t si : bound.proven_step_index) r.step_slot[si] = -1;
    for (int32_t t : bound.unread_tensors) r.value_slot[t] = -1;
  } else if (!r.proven_written && compiled_walk) {
    for (int32_t t : bound.proven_tensors) changed[t] |= kShape;
    for (size_t j = 0; j < bound.proven_step_index.size(); ++j)
      r.step_slot[bound.proven_step_index[j]] = static_cast<int32_t>(j);
    for (int32_t t : bound.unread_tensors) r.value_slot[t] = ResolvedPlan::kUnread;
  }
  r.proven_written = compiled_walk;
  if (compiled_walk) {
    used = bound.proven_step_index.size();
    r.values_compiled = static_cast<uint32_t>(bound.unread_steps);
    const int64_t* slots = r.program_slots.data();
    int64_t* dims = r.dims.data();
    for (size_t j = 0; j < bound.proven_dim_index.size(); ++j)
      dims[bound.proven_dim_index[j]] = slots[bound.proven_dim_slot[j]];
    r.scratch_bytes = std::max(r.scratch_bytes, bound.proven_scratch);
    r.shapes_proven = static_cast<uint32_t>(bound.proven_step_index.size());
    const size_t n_guards = bound.proven_guards.size() / CheckedPlan::kProvenGuard;
    for (size_t j = 0; j < n_guards; ++j) {
      const int64_t* g = bound.proven_guards.data() + j * CheckedPlan::kProvenGuard;
      r.guarded_off[static_cast<size_t>(g[0])] = !GuardHolds(g + 2, dims + bound.dim_at[static_cast<size_t>(g[1])]);
    }
  }
  const size_t n_walk = compiled_walk ? bound.reach_walk.size() : nk;
  for (size_t w = 0; w < n_walk; ++w) {
    const size_t k = compiled_walk ? static_cast<size_t>(bound.reach_walk[w]) : w;
    const size_t si = static_cast<size_t>(bound.reach_steps[k]);
    const int32_t* step_in = bound.reach_inputs.data() + bound.reach_offsets[k];
    const size_t n_in = static_cast<size_t>(bound.reach_offsets[k + 1] - bound.reach_offsets[k]);
    const int32_t* step_out = bound.reach_outputs.data() + bound.reach_out_offsets[k];
    const size_t n_out = static_cast<size_t>(bound.reach_out_offsets[k + 1] - bound.reach_out_offsets[k]);
    const uint8_t flags = bound.reach_flags[k];
    if (program_ready && bound.reach_value_at[k] >= 0) {
      // A computed step whose values the program gave, whatever its operands
      // (the program works them out from the symbols): its outputs keep the
      // bound's shapes (the same at every size) and it needs no scratch. A
      // value only other such steps read is not written out; a value the
      // same as at the bound keeps the bound's.
      ++r.values_compiled;
      r.scratch_bytes = std::max(r.scratch_bytes, ScratchSlot(bound.reach_scratch[k]));
      if (flags & CheckedPlan::kReachValueUnread) {
        for (size_t i = 0; i < n_out; ++i) {
          r.value_slot[step_out[i]] = ResolvedPlan::kUnread;
          r.unread_marked.push_back(step_out[i]);
        }
        continue;
      }
      size_t at = static_cast<size_t>(bound.reach_value_at[k]);
      for (size_t i = 0; i < n_out; ++i) {
        const int32_t t = step_out[i];
        const int64_t* shape = bound_dims(t);
        const size_t rank = rank_of(t);
        size_t n = 1;
        for (size_t d = 0; d < rank; ++d) n *= static_cast<size_t>(shape[d]);
        bool same = true;
        for (size_t j = 0; j < n && same; ++j)
          same = r.program_slots[bound.value_program.output_slot(at + j)] == bound.value_program_bound[at + j];
        if (!same) {
          spare_of(t);
          auto v = SpareTensor(&r.spare, ir::DType::kI64, shape, shape + rank, n * sizeof(int64_t));
          int64_t* e = v->mutable_data<int64_t>();
          for (size_t j = 0; j < n; ++j) e[j] = r.program_slots[bound.value_program.output_slot(at + j)];
          changed[t] |= kValue;
          set_value(t, std::move(v));
        }
        at += n;
      }
      continue;
    }
    // Whether its operands differ from the bound's (touched), and whether its
    // outputs' shapes can: an input's shape differs, or the value of an input
    // its output shapes depend on.
    const uint32_t deps = bound.reach_shape_deps[k];
    bool touched = false, reshaped = false;
    for (size_t i = 0; i < n_in; ++i) {
      const int32_t t = step_in[i];
      if (t < 0 || !changed[t]) continue;
      touched = true;
      reshaped = reshaped ||
                 (!(deps & CheckedPlan::kShapeOfRank) && ((changed[t] & kShape) || i >= 31 || ((deps >> i) & 1)));
    }
    if (!touched) {  // the same operands as at the bound: the same outputs, values and scratch
      r.scratch_bytes = std::max(r.scratch_bytes, ScratchSlot(bound.reach_scratch[k]));
      continue;
    }
    const FastShape fast = static_cast<FastShape>(bound.reach_fast[k]);
    // A step with no guard, value or scratch to work out whose output shapes
    // are kept or shaped in place needs its operands' dims alone: they are
    // read where they lie (the flat dims) and its outputs written there,
    // never gathered into shapes of their own. Anything this declines (an
    // output of another dtype or rank, or past its planned bytes) goes the
    // way below, which reports it.
    if (!(flags & (CheckedPlan::kReachGuard | CheckedPlan::kReachComputed | CheckedPlan::kReachScratch)) &&
        (!reshaped || fast != FastShape::kNone) && n_in <= kMaxFastOperands && n_out <= kMaxFastOutputs) {
      bool shaped = !reshaped;
      if (reshaped) {
        // Only the kinds shaped by values read them (each a cold read).
        const bool by_values = fast == FastShape::kReshape || fast == FastShape::kSlice ||
                               fast == FastShape::kExpand || fast == FastShape::kConstantOfShape ||
                               fast == FastShape::kRange;
        DimsRef* refs = r.fast_refs.data();
        const ir::TensorData** values = r.fast_values.data();
        for (size_t i = 0; i < n_in; ++i) {
          const int32_t t = step_in[i];
          refs[i] = t < 0 ? DimsRef{} : DimsRef{dims_of(t), rank_of(t), bound.dtypes[t]};
          values[i] = t < 0 || !by_values ? nullptr : r.value(t).get();
        }
        size_t n_fast = 0;
        ir::DType dtype = ir::DType::kUndefined;
        // FastShapeBound's op names only the errors FastOutputDims drops.
        shaped = FastOutputDims(
                     fast, bound.reach_param_at[k] >= 0 ? &bound.reach_params[bound.reach_param_at[k]] : nullptr, refs,
                     n_in, values,
                     FastShapeBound{{}, bound.dtypes[step_out[0]], bound_dims(step_in[0]),
                                    rank_of(step_in[0]), bound_dims(step_out[0]), rank_of(step_out[0])},
                     r.fast_dims.data(), r.fast_ranks.data(), &n_fast, &dtype) &&
                 n_fast == n_out;
        // Each output as declared (dtype, rank) and within its planned bytes.
        for (size_t i = 0; shaped && i < n_out; ++i) {
          const int32_t t = step_out[i];
          const int64_t* now = r.fast_dims.data() + i * kRankCap;
          uint64_t numel = 1;
          shaped = dtype == bound.dtypes[t] && r.fast_ranks[i] == rank_of(t);
          for (size_t d = 0; shaped && d < r.fast_ranks[i]; ++d)
            shaped = now[d] >= 0 && !__builtin_mul_overflow(numel, static_cast<uint64_t>(now[d]), &numel) &&
                     numel <= (uint64_t{1} << 48);
          shaped = shaped && numel * ir::DTypeSize(dtype) <= bound.bytes[t];
        }
      }
      if (shaped) {
        for (size_t i = 0; reshaped && i < n_out; ++i) set_dims(step_out[i], r.fast_dims.data() + i * kRankCap);
        ++(reshaped ? r.shapes_fast : r.shapes_kept);
        r.scratch_bytes = std::max(r.scratch_bytes, ScratchSlot(bound.reach_scratch[k]));
        r.step_slot[si] = static_cast<int32_t>(used++);
        r.slotted_steps.push_back(static_cast<int32_t>(si));
        continue;
      }
    }
    // Its operands at these sizes, from the flat dims and the values.
    if (r.operand_sets.size() <= n_in) r.operand_sets.resize(n_in + 1);
    std::vector<TensorInfo>& inputs = r.operand_sets[n_in];
    inputs.resize(n_in);
    constants.resize(n_in);
    for (size_t i = 0; i < n_in; ++i) {
      const int32_t t = step_in[i];
      if (t < 0) {
        inputs[i].dtype = ir::DType::kUndefined;
        inputs[i].shape.clear();
        constants[i] = nullptr;
      } else {
        inputs[i].dtype = bound.dtypes[t];
        inputs[i].shape.assign(dims_of(t), dims_of(t) + rank_of(t));
        constants[i] = r.value(t).get();
      }
    }
    // Its outputs at these sizes, in this resolution's Step (storage reused
    // from an earlier resolution), and into the flat dims where they change.
    ResolvedPlan::Step& rs = r.steps[used];
    std::vector<TensorInfo>& outs = rs.outputs;
    uint64_t scratch = bound.reach_scratch[k];  // asked again below where the op's scratch depends on the shapes
    if (!reshaped) {  // the bound's output shapes (its check inferred them)
      ++r.shapes_kept;
      outs.resize(n_out);
      for (size_t i = 0; i < n_out; ++i) {
        outs[i].dtype = bound.dtypes[step_out[i]];
        outs[i].shape.assign(bound_dims(step_out[i]), bound_dims(step_out[i]) + rank_of(step_out[i]));
      }
    } else if (fast != FastShape::kNone &&  // FastShapeOf chose it: input 0 present, one output but for Split
               FastOutputShape(fast,
                               bound.reach_param_at[k] >= 0 ? &bound.reach_params[bound.reach_param_at[k]] : nullptr,
                               inputs, constants,
                               FastShapeBound{bound.reach_defs[k]->name, bound.dtypes[step_out[0]],
                                              bound_dims(step_in[0]), rank_of(step_in[0]), bound_dims(step_out[0]),
                                              rank_of(step_out[0])},
                               &outs)) {
      ++r.shapes_fast;
    } else {
      ++r.shapes_inferred;
      const CheckedStep& b = bound.steps[si];
      InferContext ictx{c.steps[si].op, b.attrs, inputs, constants, static_cast<int>(n_out)};
      Status st = InferOutputs(*b.def, ictx, &outs);
      if (!st.ok()) return InvalidArgument(b.where + ": " + st.message());
    }
    for (size_t i = 0; reshaped && i < outs.size() && i < n_out; ++i) {
      const int32_t t = step_out[i];
      const ir::DType declared = bound.dtypes[t];  // the bound's check made them equal to what it infers
      const size_t rank = rank_of(t);
      const ir::Shape& now = outs[i].shape;
      if (outs[i].dtype != declared || now.size() != rank)
        return InvalidArgument(bound.steps[si].where + ": output " + std::to_string(i) + " is declared " +
                               ir::DTypeName(declared) + " of rank " + std::to_string(rank) +
                               " but at this size its inputs give " + ir::DTypeName(outs[i].dtype) + " " +
                               ir::ShapeToString(now));
      auto numel = CheckedNumel(now);
      if (!numel.ok() || static_cast<uint64_t>(numel.value()) * ir::DTypeSize(declared) > bound.bytes[t])
        return InvalidArgument(bound.steps[si].where + ": output " + std::to_string(i) + " ('" + c.tensors[t].name +
                               "') is " + ir::ShapeToString(now) + " at this size, more than the " +
                               std::to_string(bound.bytes[t]) + " bytes planned for it at the bound (" +
                               ir::ShapeToString(bound.infos[t].shape) + ")");
      set_dims(t, now.data());
    }
    // A step shaped in place with no guard, value or scratch to work out
    // reads nothing below (its StepDesc and CheckedStep stay unread).
    const format::StepDesc& s = c.steps[si];
    const CheckedStep& b = bound.steps[si];
    if (flags & CheckedPlan::kReachGuard) {
      if (outs.empty() || outs[0].shape.size() != 4)
        return InvalidArgument(b.where + ": a guarded step needs an output of rank 4 ([N, H, W, C])");
      r.guarded_off[si] = !GuardHolds(s.guard, outs[0].shape);
    }
    // Which steps are computed from the shapes does not depend on the sizes
    // (ComputedFromShapes: the bytes planned at the bound).
    if (flags & CheckedPlan::kReachComputed) {
      values.clear();
      spare_of(n_out == 0 ? -1 : step_out[0]);  // the storage of its (first) value before
      if (deps & CheckedPlan::kShapeOfRank) {
        const auto v = ShapeOpValues(s.op, b.attrs, inputs[0].shape);
        const size_t n = v.size();
        const int64_t dim = static_cast<int64_t>(n);  // Shape: [n]; Size: a scalar
        values.push_back(
            SpareTensor(&r.spare, ir::DType::kI64, &dim, &dim + (s.op == "Size" ? 0 : 1), n * sizeof(int64_t)));
        if (n) std::memcpy(values.back()->bytes.data(), v.data(), n * sizeof(int64_t));
      } else if (!EvaluateDirect(*b.def, b.attrs, constants, outs, &values, &r.spare)) {
        values.clear();
        auto ev = Evaluate(*b.def, b.attrs, constants, inputs, outs);
        if (!ev.ok()) return InvalidArgument(b.where + ": evaluating it from the shapes: " + ev.status().message());
        values = std::move(ev).value();
      }
      for (size_t i = 0; i < n_out && i < values.size(); ++i) {
        if (values[i]->dtype != outs[i].dtype || values[i]->shape != outs[i].shape)
          return InvalidArgument(b.where + ": its value from the shapes disagrees with its inferred output");
        const int32_t t = step_out[i];
        const ir::TensorData* was = bound.computed_tensors[t] ? bound.small_constants[t].get() : nullptr;
        if (!was || was->bytes != values[i]->bytes) changed[t] |= kValue;
        set_value(t, std::move(values[i]));
      }
    }
    if (flags & CheckedPlan::kReachScratch) {
      auto need = b.def->scratch(CreateContext{b.def->name, b.attrs, inputs, outs, constants, &b.data, true});
      if (!need.ok()) return InvalidArgument(b.where + ": " + need.status().message());
      scratch = need.value();
      if (scratch > (uint64_t{1} << 30))
        return InvalidArgument(b.where + ": scratch of " + std::to_string(scratch) + " bytes is too large");
    }
    r.scratch_bytes = std::max(r.scratch_bytes, ScratchSlot(scratch));
    r.step_slot[si] = static_cast<int32_t>(used++);
    r.slotted_steps.push_back(static_cast<int32_t>(si));
  }
  // The walked shapes the proven ones were worked out from: as the symbolic
  // plan has them, else resolve again walking every step.
  for (size_t j = 0; compiled_walk && j < bound.verify_tensor.size(); ++j)
    if (r.dims_of(bound.verify_tensor[j])[static_cast<size_t>(bound.verify_dim[j])] !=
        r.program_slots[bound.verify_slot[j]])
      return Resolve(c, bound, input_shapes, out, false);
  return Status::Ok();
}

}  // namespace

void ReserveResolvedPlan(const format::ContextDesc& c, const CheckedPlan& bound, ResolvedPlan* out) {
  ResolvedPlan& r = *out;
  const size_t nt = c.tensors.size(), ns = c.steps.size(), nk = bound.reach_steps.size();
  r.bound = &bound;
  r.step_slot.assign(ns, -1);
  r.value_slot.assign(nt, -1);
  r.changed_tensors.assign(nt, 0);
  r.dims = bound.dims;
  r.dims_written.clear();
  r.slotted_steps.clear();
  r.unread_marked.clear();
  r.values.clear();
  r.value_tensors.clear();
  r.proven_written = false;
  r.guarded_off = bound.guarded_off;
  // What a resolution appends to, at most once per tensor or step.
  r.dims_written.reserve(nt);
  r.slotted_steps.reserve(nk);
  r.unread_marked.reserve(nt);
  if (r.steps.size() < nk) r.steps.resize(nk);
  r.fast_dims.resize(kMaxFastOutputs * kRankCap);
  r.fast_ranks.resize(kMaxFastOutputs);
  r.fast_refs.resize(kMaxFastOperands);
  r.fast_values.resize(kMaxFastOperands);
  r.symbol_values.reserve(c.symbols.size());
  r.program_slots.reserve(bound.value_program.num_slots());
}

Status ResolvePlan(const format::ContextDesc& c, const CheckedPlan& bound, const std::vector<ir::Shape>& input_shapes,
                   ResolvedPlan* out) {
  return Resolve(c, bound, input_shapes, out, true);
}

}  // namespace fcb::ops

namespace fcb::ops {

std::string ResolutionDifference(const format::ContextDesc& c, const CheckedPlan& full, const ResolvedPlan& r) {
  const size_t nt = c.tensors.size(), ns = c.steps.size();
  if (full.infos.size() != nt || r.changed_tensors.size() != nt || full.steps.size() != ns ||
      r.step_slot.size() != ns)
    return "the plans have different numbers of tensors or steps";
  auto shape_of = [&](int32_t t) {
    const std::span<const int64_t> d = r.dims_of(t);
    return ir::Shape(d.begin(), d.end());
  };
  for (size_t t = 0; t < nt; ++t) {
    const std::string where = "tensor " + std::to_string(t) + " ('" + c.tensors[t].name + "')";
    const TensorInfo& a = full.infos[t];
    const ir::DType b_dtype = r.dtype_of(static_cast<int32_t>(t));
    const ir::Shape b_shape = shape_of(static_cast<int32_t>(t));
    if (a.dtype != b_dtype || a.shape != b_shape)
      return where + " is " + ir::DTypeName(a.dtype) + " " + ir::ShapeToString(a.shape) + " when checked, " +
             ir::DTypeName(b_dtype) + " " + ir::ShapeToString(b_shape) + " when resolved";
    if (full.computed_tensors[t] != r.bound->computed_tensors[t] || full.needed[t] != r.bound->needed[t])
      return where + ": computed from the shapes or needed differs";
    if (r.value_slot[t] == ResolvedPlan::kUnread) continue;  // a value nothing reads
    const ir::TensorData* va = full.small_constants[t].get();
    const ir::TensorData* vb = r.value(static_cast<int32_t>(t)).get();
    if ((va == nullptr) != (vb == nullptr) || (va && (va->dtype != vb->dtype || va->shape != vb->shape ||
                                                     va->bytes != vb->bytes)))
      return where + ": its value differs";
  }
  for (size_t si = 0; si < ns; ++si) {
    if (full.computed_steps[si] != r.bound->computed_steps[si] || full.guarded_off[si] != r.guarded_off[si])
      return full.steps[si].where + ": computed from the shapes or guarded off differs";
    const auto& a = full.steps[si].outputs;
    const auto& b = c.steps[si].outputs;
    if (a.size() != b.size()) return full.steps[si].where + ": a different number of outputs";
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].dtype != r.dtype_of(b[i]) || a[i].shape != shape_of(b[i]))
        return full.steps[si].where + ": output " + std::to_string(i) + " differs";
    // A step not marked changed runs the bound's kernel: its operands'
    // shapes and the values it reads are the bound's.
    if (r.changed(si) || full.computed_steps[si] || full.guarded_off[si]) continue;
    const auto& in = c.steps[si].inputs;
    for (size_t i = 0; i < in.size() + b.size(); ++i) {
      const int32_t t = i < in.size() ? in[i] : b[i - in.size()];
      if (t < 0) continue;
      const ir::TensorData* va = full.small_constants[t].get();
      const ir::TensorData* vb = r.bound->small_constants[t].get();
      if (full.infos[t].shape != r.bound->infos[t].shape ||
          (i < in.size() && (va == nullptr) != (vb == nullptr)) || (i < in.size() && va && va->bytes != vb->bytes))
        return full.steps[si].where + ": not marked changed, but operand '" + c.tensors[t].name +
               "' differs from the bound's";
    }
  }
  if (full.scratch_bytes != r.scratch_bytes)
    return "scratch " + std::to_string(full.scratch_bytes) + " when checked, " + std::to_string(r.scratch_bytes) +
           " when resolved";
  return "";
}

}  // namespace fcb::ops
