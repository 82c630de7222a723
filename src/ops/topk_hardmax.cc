// Selection along one axis: TopK (K a compile-time constant; values and int64
// indices, ties to the lower index) and Hardmax (1 at the first maximum).
//
// TopK picks its K elements by repeated scans, each taking the best element
// ordered after the previous pick: O(K * n) per row without scratch memory,
// so Run does not allocate.
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

struct Axis {
  int64_t outer = 1, len = 1, inner = 1;
};

Axis SplitAt(const ir::Shape& s, int64_t axis) {
  Axis a;
  for (int64_t d = 0; d < axis; ++d) a.outer *= s[d];
  a.len = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) a.inner *= s[d];
  return a;
}

Status InferTopK(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(AxisInput(c, IsNumeric, -1, &axis));
  std::vector<int64_t> k;
  bool present = false;
  FCB_RETURN_IF_ERROR(ConstIntsInput(c, 1, "K", &k, &present));
  if (!present || k.size() != 1) return OpError(c.op, "K must be a 1-element tensor");
  if (k[0] < 0 || k[0] > x.shape[axis])
    return OpError(c.op, "K " + std::to_string(k[0]) + " is outside [0, " + std::to_string(x.shape[axis]) + "]");
  ir::Shape s = x.shape;
  s[axis] = k[0];
  outs->push_back(TensorInfo{x.dtype, s});
  outs->push_back(TensorInfo{DType::kI64, std::move(s)});
  return Status::Ok();
}

template <typename T>
void RunTopK(const T* x, T* vals, int64_t* idx, Axis a, int64_t k, bool largest) {
  // "p before q" in the output order.
  auto before = [&](T pv, int64_t pi, T qv, int64_t qi) {
    if (pv != qv) return largest ? pv > qv : pv < qv;
    return pi < qi;
  };
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t in = 0; in < a.inner; ++in) {
      const T* row = x + o * a.len * a.inner + in;
      T prev_v{};
      int64_t prev_i = -1;
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < a.len; ++e) {
          const T v = row[e * a.inner];
          if (prev_i >= 0 && !before(prev_v, prev_i, v, e)) continue;  // already taken
          if (best < 0 || before(v, e, row[best * a.inner], best)) best = e;
        }
        if (best < 0) best = 0;  // only when NaNs defeat the ordering
        prev_v = row[best * a.inner];
        prev_i = best;
        const int64_t out = (o * k + j) * a.inner + in;
        vals[out] = prev_v;
        idx[out] = best;
      }
    }
}

Result<std::unique_ptr<Kernel>> CreateTopK(const CreateContext& c) {
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), c.inputs[0].shape.size(), &axis));
  const Axis a = SplitAt(c.inputs[0].shape, axis);
  const int64_t k = c.outputs[0].shape[axis];
  const bool largest = c.attrs.GetInt("largest", 1) != 0;
  const DType t = c.inputs[0].dtype;
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    DispatchNumeric(t, [&](auto tag) {
      using T = decltype(tag);
      RunTopK(static_cast<const T*>(in[0]), static_cast<T*>(out[0]), static_cast<int64_t*>(out[1]), a, k,
              largest);
    });
    return Status::Ok();
  });
}

Status InferHardmax(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(AxisInput(c, IsFloat, -1, &axis));
  outs->push_back(x);
  return Status::Ok();
}

template <typename T>
void RunHardmax(const T* x, T* y, Axis a) {
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t in = 0; in < a.inner; ++in) {
      const int64_t base = o * a.len * a.inner + in;
      int64_t best = 0;
      for (int64_t e = 1; e < a.len; ++e)
        if (x[base + e * a.inner] > x[base + best * a.inner]) best = e;
      for (int64_t e = 0; e < a.len; ++e) y[base + e * a.inner] = e == best ? T(1) : T(0);
    }
}

Result<std::unique_ptr<Kernel>> CreateHardmax(const CreateContext& c) {
  int64_t axis = 0;
  FCB_RETURN_IF_ERROR(NormalizeAxis(c.op, c.attrs.GetInt("axis", -1), c.inputs[0].shape.size(), &axis));
  const Axis a = SplitAt(c.inputs[0].shape, axis);
  const bool f32 = c.inputs[0].dtype == DType::kF32;
  return MakeKernel([=](const RunContext&, const void* const* in, void* const* out) -> Status {
    if (f32) RunHardmax(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), a);
    else RunHardmax(static_cast<const double*>(in[0]), static_cast<double*>(out[0]), a);
    return Status::Ok();
  });
}

}  // namespace

void RegisterTopKHardmaxOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferTopK, CreateTopK>("TopK", 2, 2, 2, 2));
  ops->push_back(Def<InferHardmax, CreateHardmax>("Hardmax", 1, 1));
}

}  // namespace fcb::ops
