// Index-driven data movement: GatherElements, ScatterElements, GatherND,
// ScatterND. Indices arrive at run time (int32 or int64, negative counts from
// the end); every index is range-checked before use and a bad one fails the
// run with the op's name instead of reading or writing out of bounds.
#include <array>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

bool IsIndexType(DType t) { return t == DType::kI32 || t == DType::kI64; }

int64_t ReadIndex(const void* p, DType t, int64_t i) {
  return t == DType::kI32 ? static_cast<const int32_t*>(p)[i] : static_cast<const int64_t*>(p)[i];
}

Status IndexError(const char* op, int64_t v, int64_t dim) {
  return OpError(op, "index " + std::to_string(v) + " is out of range for a dimension of size " +
                         std::to_string(dim));
}

enum class Red { kNone, kAdd, kMul, kMax, kMin };

Status ParseReduction(const InferContext& c, Red* r) {
  const std::string s = c.attrs.GetString("reduction", "none");
  if (s == "none") *r = Red::kNone;
  else if (s == "add") *r = Red::kAdd;
  else if (s == "mul") *r = Red::kMul;
  else if (s == "max") *r = Red::kMax;
  else if (s == "min") *r = Red::kMin;
  else return OpUnsupported(c.op, "reduction '" + s + "'");
  return Status::Ok();
}

// dst = reduce(dst, src) for one element of dtype t.
void Apply(Red r, DType t, uint8_t* dst, const uint8_t* src, size_t es) {
  if (r == Red::kNone) {
    std::memcpy(dst, src, es);
    return;
  }
  if (t == DType::kBool) {  // add = or, mul = and
    const bool a = *dst != 0, b = *src != 0;
    *dst = (r == Red::kAdd || r == Red::kMax) ? (a || b) : (a && b);
    return;
  }
  DispatchNumeric(t, [&](auto tag) {
    using T = decltype(tag);
    T a, b;
    std::memcpy(&a, dst, sizeof(T));
    std::memcpy(&b, src, sizeof(T));
    T v = r == Red::kAdd ? static_cast<T>(a + b) : r == Red::kMul ? static_cast<T>(a * b)
          : r == Red::kMax ? (a < b ? b : a) : (b < a ? b : a);
    std::memcpy(dst, &v, sizeof(T));
  });
}

// The data and indices inputs every gather and scatter takes.
Status CheckDataAndIndices(const InferContext& c, const TensorInfo& data, const TensorInfo& ind) {
  if (!data.present() || !ind.present()) return OpError(c.op, "data and indices are required");
  if (!IsIndexType(ind.dtype)) return OpError(c.op, "indices must be int32 or int64");
  if (!IsKnownDType(data.dtype)) return OpUnsupported(c.op, "data dtype");
  return Status::Ok();
}

// ---------------------------------------------------------------- *Elements

Status InferElements(const InferContext& c, std::vector<TensorInfo>* outs) {
  const bool scatter = c.op == "ScatterElements";
  const TensorInfo& data = Input(c, 0);
  const TensorInfo& ind = Input(c, 1);
  FCB_RETURN_IF_ERROR(CheckDataAndIndices(c, data, ind));
  if (ind.shape.size() != data.shape.size())
    return OpError(c.op, "indices rank must equal data rank");
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), data.shape.size(), &axis));
  // Off the axis an index position addresses data directly.
  for (size_t d = 0; d < ind.shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && ind.shape[d] > data.shape[d])
      return OpError(c.op, "indices dim " + std::to_string(d) + " (" + std::to_string(ind.shape[d]) +
                               ") is larger than the data's (" + std::to_string(data.shape[d]) + ")");
  if (scatter) {
    const TensorInfo& upd = Input(c, 2);
    if (!upd.present() || upd.shape != ind.shape || upd.dtype != data.dtype)
      return OpError(c.op, "updates must have the indices' shape and the data's dtype");
    Red r;
    FCB_RETURN_IF_ERROR(ParseReduction(c, &r));
    if (r != Red::kNone && !IsNumeric(data.dtype) && data.dtype != DType::kBool)
      return OpUnsupported(c.op, "reduction on this dtype");
    outs->push_back(data);
  } else {
    outs->push_back(TensorInfo{data.dtype, ind.shape});
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateElements(const CreateContext& c) {
  const bool scatter = c.op == "ScatterElements";
  const ir::Shape ds = c.inputs[0].shape, is = c.inputs[1].shape;
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", 0), ds.size(), &axis));
  Red red = Red::kNone;
  if (scatter) FCB_RETURN_IF_ERROR(ParseReduction(AsInfer(c), &red));
  const DType dt = c.inputs[0].dtype, it = c.inputs[1].dtype;
  const size_t es = ir::DTypeSize(dt);
  const std::vector<int64_t> dstr = DenseStrides(ds);
  const int64_t data_bytes = c.inputs[0].bytes();
  const int64_t n = c.inputs[1].numel();
  const char* op = scatter ? "ScatterElements" : "GatherElements";
  if (is.size() > static_cast<size_t>(kMaxRank)) return OpUnsupported(c.op, "rank above 16");
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const uint8_t* data = static_cast<const uint8_t*>(in[0]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    if (scatter) CopyBytes(y, data, data_bytes);
    const int rank = static_cast<int>(is.size());
    std::array<int64_t, kMaxRank> idx{};  // stack: Run does not allocate
    for (int64_t j = 0; j < n; ++j) {
      int64_t v = ReadIndex(in[1], it, j);
      const int64_t dim = ds[axis];
      if (v < -dim || v >= dim) return IndexError(op, v, dim);
      if (v < 0) v += dim;
      int64_t off = 0;
      for (int d = 0; d < rank; ++d) off += (d == axis ? v : idx[d]) * dstr[d];
      if (scatter) {
        Apply(red, dt, y + off * es, static_cast<const uint8_t*>(in[2]) + j * es, es);
      } else {
        std::memcpy(y + j * es, data + off * es, es);
      }
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < is[d]) break;
        idx[d] = 0;
      }
    }
    return Status::Ok();
  });
}

// ---------------------------------------------------------------------- *ND

Status InferND(const InferContext& c, std::vector<TensorInfo>* outs) {
  const bool scatter = c.op == "ScatterND";
  const TensorInfo& data = Input(c, 0);
  const TensorInfo& ind = Input(c, 1);
  FCB_RETURN_IF_ERROR(CheckDataAndIndices(c, data, ind));
  if (ind.shape.empty()) return OpError(c.op, "indices must have rank >= 1");
  const int64_t b = scatter ? 0 : c.attrs.GetInt("batch_dims", 0);
  const int64_t k = ind.shape.back();
  const int64_t dr = static_cast<int64_t>(data.shape.size()), ir_ = static_cast<int64_t>(ind.shape.size());
  if (b < 0 || b >= ir_ || b >= dr) return OpError(c.op, "batch_dims out of range");
  if (k < 1 || b + k > dr) return OpError(c.op, "indices' last dim must be in [1, rank(data) - batch_dims]");
  for (int64_t d = 0; d < b; ++d)
    if (data.shape[d] != ind.shape[d]) return OpError(c.op, "batch dims of data and indices differ");
  ir::Shape s(ind.shape.begin(), ind.shape.end() - 1);
  s.insert(s.end(), data.shape.begin() + b + k, data.shape.end());
  if (scatter) {
    const TensorInfo& upd = Input(c, 2);
    if (!upd.present() || upd.dtype != data.dtype || upd.shape != s)
      return OpError(c.op, "updates must have shape " + ir::ShapeToString(s) + " and the data's dtype");
    Red r;
    FCB_RETURN_IF_ERROR(ParseReduction(c, &r));
    if (r != Red::kNone && !IsNumeric(data.dtype) && data.dtype != DType::kBool)
      return OpUnsupported(c.op, "reduction on this dtype");
    outs->push_back(data);
  } else {
    outs->push_back(TensorInfo{data.dtype, s});
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateND(const CreateContext& c) {
  const bool scatter = c.op == "ScatterND";
  const ir::Shape ds = c.inputs[0].shape, is = c.inputs[1].shape;
  const int64_t b = scatter ? 0 : c.attrs.GetInt("batch_dims", 0);
  const int64_t k = is.back();
  Red red = Red::kNone;
  if (scatter) FCB_RETURN_IF_ERROR(ParseReduction(AsInfer(c), &red));
  const DType dt = c.inputs[0].dtype, it = c.inputs[1].dtype;
  const size_t es = ir::DTypeSize(dt);
  const std::vector<int64_t> dstr = DenseStrides(ds);
  int64_t batches = 1, tuples = 1, slice = 1;
  for (int64_t d = 0; d < b; ++d) batches *= ds[d];
  for (size_t d = b; d + 1 < is.size(); ++d) tuples *= is[d];
  for (size_t d = b + k; d < ds.size(); ++d) slice *= ds[d];
  const int64_t batch_stride = b > 0 ? dstr[b - 1] : 0;
  const int64_t data_bytes = c.inputs[0].bytes();
  const char* op = scatter ? "ScatterND" : "GatherND";
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const uint8_t* data = static_cast<const uint8_t*>(in[0]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    if (scatter) CopyBytes(y, data, data_bytes);
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t row = bi * tuples + t;
        int64_t off = bi * batch_stride;
        for (int64_t q = 0; q < k; ++q) {
          int64_t v = ReadIndex(in[1], it, row * k + q);
          const int64_t dim = ds[b + q];
          if (v < -dim || v >= dim) return IndexError(op, v, dim);
          if (v < 0) v += dim;
          off += v * dstr[b + q];
        }
        if (scatter) {
          const uint8_t* upd = static_cast<const uint8_t*>(in[2]) + row * slice * es;
          for (int64_t e = 0; e < slice; ++e) Apply(red, dt, y + (off + e) * es, upd + e * es, es);
        } else {
          std::memcpy(y + row * slice * es, data + off * es, slice * es);
        }
      }
    return Status::Ok();
  });
}

}  // namespace

void RegisterGatherScatterOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferElements, CreateElements>("GatherElements", 2, 2));
  ops->push_back(Def<InferElements, CreateElements>("ScatterElements", 3, 3));
  ops->push_back(Def<InferND, CreateND>("GatherND", 2, 2));
  ops->push_back(Def<InferND, CreateND>("ScatterND", 3, 3));
}

}  // namespace fcb::ops
