// Compress, NonZero and Unique: operators whose output shape depends on data.
//
// fcb plans every tensor's shape ahead of time, so the data that decides the
// shape must be a compile-time constant (an initializer or a folded value):
// Compress's condition, NonZero's and Unique's input. Otherwise shape
// inference refuses the node with Unsupported ("... the output shape depends
// on run-time data"), which the compiler reports naming the node. NonZero and
// Unique on a constant input are folded away at compile time; Compress keeps a
// run-time data input and selects the slices its constant condition picked
// (a condition over 64 KiB, more than the loader re-reads for shape
// inference, is turned into a Gather of constant indices by the importer:
// src/import/canonicalize.cc).
//
// The kernels take their plan from the constant at create time; at run time
// NonZero and Unique check that the input still holds those bytes (a step fed
// anything else fails instead of writing a result of the wrong size).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

Status NeedConstant(const InferContext& c, size_t i, const char* what, const ir::TensorData** t) {
  *t = Constant(c, i);
  if (!*t)
    return OpUnsupported(c.op, std::string(what) +
                                   " must be a compile-time constant (an initializer or a folded value): "
                                   "the output shape depends on run-time data");
  const TensorInfo& in = Input(c, i);
  if ((*t)->dtype != in.dtype || (*t)->shape != in.shape ||
      (*t)->bytes.size() != static_cast<size_t>(in.numel()) * ir::DTypeSize(in.dtype))
    return OpError(c.op, std::string(what) + " constant does not match its declared type");
  return Status::Ok();
}

// ---------------------------------------------------------------- Compress

struct CompressPlan {
  bool has_axis = false;
  int64_t axis = 0;
  std::vector<int64_t> picked;  // indices along the axis (or into the flat input)
  ir::Shape out;
};

Status ResolveCompress(const InferContext& c, CompressPlan* p) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& cond = Input(c, 1);
  if (!x.present() || !cond.present()) return OpError(c.op, "input and condition are required");
  if (!IsKnownDType(x.dtype)) return OpUnsupported(c.op, "input dtype");
  if (cond.dtype != DType::kBool) return OpError(c.op, "condition must be bool");
  if (cond.shape.size() != 1) return OpError(c.op, "condition must be 1-D");
  const ir::TensorData* ct = nullptr;
  FCB_RETURN_IF_ERROR(NeedConstant(c, 1, "condition", &ct));
  p->has_axis = c.attrs.Has("axis");
  int64_t len = x.numel();
  if (p->has_axis) {
    FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), static_cast<int64_t>(x.shape.size()), &p->axis));
    len = x.shape[p->axis];
  }
  const uint8_t* cv = ct->bytes.data();
  p->picked.clear();
  for (int64_t i = 0; i < cond.shape[0]; ++i) {
    if (!cv[i]) continue;
    if (i >= len)
      return OpError(c.op, "condition selects index " + std::to_string(i) + " beyond the input's " +
                               std::to_string(len));
    p->picked.push_back(i);
  }
  const int64_t k = static_cast<int64_t>(p->picked.size());
  if (p->has_axis) {
    p->out = x.shape;
    p->out[p->axis] = k;
  } else {
    p->out = {k};
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateCompress(const CreateContext& c) {
  CompressPlan p;
  FCB_RETURN_IF_ERROR(ResolveCompress(AsInfer(c), &p));
  const ir::Shape s = c.inputs[0].shape;
  const size_t es = ir::DTypeSize(c.inputs[0].dtype);
  int64_t outer = 1, len = c.inputs[0].numel(), inner = 1;
  if (p.has_axis) {
    outer = SafeProduct(s, 0, static_cast<size_t>(p.axis));
    len = s[p.axis];
    inner = SafeProduct(s, static_cast<size_t>(p.axis) + 1, s.size());
  }
  std::vector<int64_t> picked = std::move(p.picked);
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const uint8_t* x = static_cast<const uint8_t*>(in[0]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    const size_t row = static_cast<size_t>(inner) * es;
    const int64_t k = static_cast<int64_t>(picked.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(y + (o * k + j) * row, x + (o * len + picked[j]) * row, row);
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- NonZero

bool NonZeroDType(DType t) { return IsNumeric(t) || IsExtraInt(t) || IsHalf(t) || t == DType::kBool; }

// Flat positions of the non-zero elements (bitwise: -0.0 is zero, NaN is not).
std::vector<int64_t> NonZeroPositions(const ir::TensorData& t) {
  std::vector<int64_t> pos;
  const size_t es = ir::DTypeSize(t.dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint8_t* e = t.bytes.data() + static_cast<size_t>(i) * es;
    bool nz = false;
    if (t.dtype == DType::kF32 || t.dtype == DType::kF64) {
      const double v = t.GetDouble(i);
      nz = v != 0 || std::isnan(v);
    } else if (IsHalf(t.dtype)) {  // any bit but the sign
      uint16_t h;
      std::memcpy(&h, e, 2);
      nz = (h & 0x7fff) != 0;
    } else {
      for (size_t b = 0; b < es && !nz; ++b) nz = e[b] != 0;
    }
    if (nz) pos.push_back(i);
  }
  return pos;
}

Status InferNonZero(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!NonZeroDType(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  const ir::TensorData* t = nullptr;
  FCB_RETURN_IF_ERROR(NeedConstant(c, 0, "input", &t));
  const int64_t n = static_cast<int64_t>(NonZeroPositions(*t).size());
  outs->push_back(TensorInfo{DType::kI64, {static_cast<int64_t>(x.shape.size()), n}});
  return Status::Ok();
}

// A kernel that writes outputs computed at create time, after checking that
// input 0 holds the bytes they were computed from.
Result<std::unique_ptr<Kernel>> ConstantResultKernel(std::string op, std::vector<uint8_t> input,
                                                     std::vector<std::vector<uint8_t>> results) {
  return MakeKernel([op = std::move(op), input = std::move(input), results = std::move(results)](
                        const RunContext&, const void* const* in, void* const* out) -> Status {
    if (!input.empty() && std::memcmp(in[0], input.data(), input.size()) != 0)
      return OpError(op, "the input differs from the compile-time constant its output shape was planned for");
    for (size_t k = 0; k < results.size(); ++k)
      if (out[k] && !results[k].empty()) std::memcpy(out[k], results[k].data(), results[k].size());
    return Status::Ok();
  });
}

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Result<std::unique_ptr<Kernel>> CreateNonZero(const CreateContext& c) {
  const ir::TensorData* t = nullptr;
  FCB_RETURN_IF_ERROR(NeedConstant(AsInfer(c), 0, "input", &t));
  const std::vector<int64_t> pos = NonZeroPositions(*t);
  const ir::Shape& s = t->shape;
  const int64_t n = static_cast<int64_t>(pos.size()), r = static_cast<int64_t>(s.size());
  std::vector<int64_t> y(static_cast<size_t>(r * n));
  for (int64_t j = 0; j < n; ++j) {
    int64_t f = pos[j];
    for (int64_t d = r - 1; d >= 0; --d) {
      y[d * n + j] = f % s[d];
      f /= s[d];
    }
  }
  return ConstantResultKernel("NonZero", t->bytes, {Bytes(y)});
}

// ---------------------------------------------------------------- Unique

struct UniqueResult {
  int64_t axis = -1;  // -1: flattened
  ir::Shape y_shape;
  std::vector<uint8_t> y;
  std::vector<int64_t> indices, inverse, counts;
};

template <typename T>
void UniqueTyped(const ir::TensorData& t, int64_t axis, bool sorted, UniqueResult* r) {
  const ir::Shape& s = t.shape;
  const T* x = t.data<T>();
  int64_t outer = 1, len = t.numel(), inner = 1;
  if (axis >= 0) {
    outer = SafeProduct(s, 0, static_cast<size_t>(axis));
    len = s[axis];
    inner = SafeProduct(s, static_cast<size_t>(axis) + 1, s.size());
  }
  // Slice k: elements x[(o * len + k) * inner + i], compared in (o, i) order.
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T va = x[(o * len + a) * inner + i], vb = x[(o * len + b) * inner + i];
        if (va < vb) return true;
        if (vb < va) return false;
      }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), less);
  // Groups of equal slices; the first of each (stable sort) is its first occurrence.
  std::vector<int64_t> first, count, group_of(static_cast<size_t>(len));
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || less(order[k - 1], order[k])) {
      first.push_back(order[k]);
      count.push_back(0);
    }
    ++count.back();
    group_of[order[k]] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(u));  // group -> output position
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (!sorted) {  // by first occurrence
    std::vector<int64_t> g(static_cast<size_t>(u));
    std::iota(g.begin(), g.end(), int64_t{0});
    std::sort(g.begin(), g.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t p = 0; p < u; ++p) rank[g[p]] = p;
  }
  r->indices.assign(static_cast<size_t>(u), 0);
  r->counts.assign(static_cast<size_t>(u), 0);
  for (int64_t g = 0; g < u; ++g) {
    r->indices[rank[g]] = first[g];
    r->counts[rank[g]] = count[g];
  }
  r->inverse.resize(static_cast<size_t>(len));
  for (int64_t k = 0; k < len; ++k) r->inverse[k] = rank[group_of[k]];
  std::vector<T> y(static_cast<size_t>(outer * u * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < u; ++p)
      for (int64_t i = 0; i < inner; ++i) y[(o * u + p) * inner + i] = x[(o * len + r->indices[p]) * inner + i];
  r->y = Bytes(y);
  if (axis >= 0) {
    r->y_shape = s;
    r->y_shape[axis] = u;
  } else {
    r->y_shape = {u};
  }
}

Status ComputeUnique(const InferContext& c, UniqueResult* r) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsNumeric(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if (c.attrs.Has("axis")) {
    FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), static_cast<int64_t>(x.shape.size()), &r->axis));
  }
  const ir::TensorData* t = nullptr;
  FCB_RETURN_IF_ERROR(NeedConstant(c, 0, "input", &t));
  const bool sorted = c.attrs.GetInt("sorted", 1) != 0;
  DispatchNumeric(t->dtype, [&](auto tag) { UniqueTyped<decltype(tag)>(*t, r->axis, sorted, r); });
  return Status::Ok();
}

Status InferUnique(const InferContext& c, std::vector<TensorInfo>* outs) {
  UniqueResult r;
  FCB_RETURN_IF_ERROR(ComputeUnique(c, &r));
  const int64_t u = static_cast<int64_t>(r.indices.size());
  const std::vector<TensorInfo> all = {TensorInfo{Input(c, 0).dtype, r.y_shape}, TensorInfo{DType::kI64, {u}},
                                       TensorInfo{DType::kI64, {static_cast<int64_t>(r.inverse.size())}},
                                       TensorInfo{DType::kI64, {u}}};
  for (int k = 0; k < c.num_outputs; ++k) outs->push_back(all[k]);
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateUnique(const CreateContext& c) {
  UniqueResult r;
  FCB_RETURN_IF_ERROR(ComputeUnique(AsInfer(c), &r));
  std::vector<std::vector<uint8_t>> res = {r.y, Bytes(r.indices), Bytes(r.inverse), Bytes(r.counts)};
  res.resize(c.outputs.size());
  return ConstantResultKernel("Unique", c.constants[0]->bytes, std::move(res));
}

}  // namespace

void RegisterDataShapeOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferFromPlan<CompressPlan, ResolveCompress>, CreateCompress>("Compress", 2, 2));
  ops->push_back(Def<InferNonZero, CreateNonZero>("NonZero", 1, 1));
  ops->push_back(Def<InferUnique, CreateUnique>("Unique", 1, 1, 1, 4));
}

}  // namespace fcb::ops
