// CumSum (axis read at run time, exclusive / reverse) and OneHot (depth must
// be a compile-time constant: it fixes the output shape).
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

Status InferCumSum(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  const TensorInfo& axis = Input(c, 1);
  if (!x.present() || !axis.present()) return OpError(c.op, "x and axis are required");
  if (!IsNumeric(x.dtype)) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  if ((axis.dtype != DType::kI32 && axis.dtype != DType::kI64) || axis.numel() != 1 || axis.shape.size() > 1)
    return OpError(c.op, "axis must be an int32/int64 scalar");
  if (x.shape.empty()) return OpError(c.op, "x must have rank >= 1");
  outs->push_back(x);
  return Status::Ok();
}

template <typename T>
void CumSumRun(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      T acc = T(0);
      const int64_t base = o * len * inner + i;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t j = reverse ? len - 1 - k : k;
        const int64_t p = base + j * inner;
        if (exclusive) {
          const T v = x[p];
          y[p] = acc;
          acc = static_cast<T>(acc + v);
        } else {
          acc = static_cast<T>(acc + x[p]);
          y[p] = acc;
        }
      }
    }
}

Result<std::unique_ptr<Kernel>> CreateCumSum(const CreateContext& c) {
  const ir::Shape shape = c.inputs[0].shape;
  const DType t = c.inputs[0].dtype, at = c.inputs[1].dtype;
  const bool exclusive = c.attrs.GetInt("exclusive", 0) != 0;
  const bool reverse = c.attrs.GetInt("reverse", 0) != 0;
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    int64_t axis = at == DType::kI32 ? *static_cast<const int32_t*>(in[1])
                                     : *static_cast<const int64_t*>(in[1]);
    const int64_t r = static_cast<int64_t>(shape.size());
    if (axis < -r || axis >= r) return OpError("CumSum", "axis " + std::to_string(axis) + " out of range");
    if (axis < 0) axis += r;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < r; ++d) inner *= shape[d];
    DispatchNumeric(t, [&](auto tag) {
      using T = decltype(tag);
      CumSumRun(static_cast<const T*>(in[0]), static_cast<T*>(out[0]), outer, shape[axis], inner,
                exclusive, reverse);
    });
    return Status::Ok();
  });
}

Status InferOneHot(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& ind = Input(c, 0);
  const TensorInfo& vals = Input(c, 2);
  if (!ind.present() || !Input(c, 1).present() || !vals.present())
    return OpError(c.op, "indices, depth and values are required");
  if (!IsNumeric(ind.dtype)) return OpUnsupported(c.op, std::string("indices dtype ") + ir::DTypeName(ind.dtype));
  if (!IsNumeric(vals.dtype) && vals.dtype != DType::kBool)
    return OpUnsupported(c.op, std::string("values dtype ") + ir::DTypeName(vals.dtype));
  if (vals.numel() != 2) return OpError(c.op, "values must have 2 elements");
  double depth = 0;
  bool present = false;
  FCB_RETURN_IF_ERROR(ConstScalarInput(c, 1, "depth", &depth, &present));
  if (!present) return OpError(c.op, "depth is required");
  if (!(depth >= 1) || depth > static_cast<double>(kMaxElements))
    return OpError(c.op, "depth must be >= 1");
  const int64_t r = static_cast<int64_t>(ind.shape.size()) + 1;
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), r, &axis));
  ir::Shape s = ind.shape;
  s.insert(s.begin() + axis, static_cast<int64_t>(depth));
  outs->push_back(TensorInfo{vals.dtype, std::move(s)});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateOneHot(const CreateContext& c) {
  const ir::Shape& os = c.outputs[0].shape;
  const int64_t r = static_cast<int64_t>(os.size());
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), r, &axis));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= os[d];
  for (int64_t d = axis + 1; d < r; ++d) inner *= os[d];
  const int64_t depth = os[axis];
  const DType it = c.inputs[0].dtype;
  const size_t es = ir::DTypeSize(c.outputs[0].dtype);
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    const uint8_t* vals = static_cast<const uint8_t*>(in[2]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    for (int64_t i = 0; i < outer * depth * inner; ++i) std::memcpy(y + i * es, vals, es);
    DispatchNumeric(it, [&](auto tag) {
      using T = decltype(tag);
      const T* ind = static_cast<const T*>(in[0]);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const double v = static_cast<double>(ind[o * inner + i]);
          if (std::isnan(v)) continue;
          int64_t k = static_cast<int64_t>(v);
          if (k < 0) k += depth;
          if (k < 0 || k >= depth) continue;
          std::memcpy(y + ((o * depth + k) * inner + i) * es, vals + es, es);
        }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterScanOneHotOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferCumSum, CreateCumSum>("CumSum", 2, 2));
  ops->push_back(Def<InferOneHot, CreateOneHot>("OneHot", 3, 3));
}

}  // namespace fcb::ops
