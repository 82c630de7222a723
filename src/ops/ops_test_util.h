// Test helpers for the op registry: build tensors and attributes, run an op
// through ops::Evaluate and through every runnable target's kernel table with
// thread pools of 1 and 3 threads, and compare each result with a reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/target.h"
#include "core/thread_pool.h"
#include "ops/internal/internal.h"
#include "ops/op.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb::ops::testing {

using ir::DType;
using ir::Shape;
using TensorPtr = std::shared_ptr<ir::TensorData>;

inline TensorPtr F32(Shape s, std::vector<float> v) {
  auto t = ir::TensorData::Make(DType::kF32, std::move(s));
  EXPECT_EQ(static_cast<size_t>(t->numel()), v.size());
  if (!v.empty()) std::memcpy(t->bytes.data(), v.data(), t->bytes.size());
  return t;
}
template <typename T>
TensorPtr Typed(DType dt, Shape s, const std::vector<T>& v) {
  auto t = ir::TensorData::Make(dt, std::move(s));
  EXPECT_EQ(static_cast<size_t>(t->numel()), v.size());
  if (!v.empty()) std::memcpy(t->bytes.data(), v.data(), t->bytes.size());
  return t;
}
inline TensorPtr I64(Shape s, std::vector<int64_t> v) { return Typed(DType::kI64, std::move(s), v); }
inline TensorPtr I32(Shape s, std::vector<int32_t> v) { return Typed(DType::kI32, std::move(s), v); }
inline TensorPtr F64(Shape s, std::vector<double> v) { return Typed(DType::kF64, std::move(s), v); }
inline TensorPtr Bool(Shape s, std::vector<uint8_t> v) { return Typed(DType::kBool, std::move(s), v); }
inline TensorPtr U8(Shape s, std::vector<uint8_t> v) { return Typed(DType::kU8, std::move(s), v); }
inline TensorPtr I8(Shape s, std::vector<int8_t> v) { return Typed(DType::kI8, std::move(s), v); }

// Deterministic pseudo-random floats in [lo, hi).
inline std::vector<float> Rand(int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f;
  }
  return v;
}

template <typename T>
std::vector<T> Values(const ir::TensorData& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// Attribute builder: A().I("axis", 1).F("alpha", .5f).Is("perm", {1, 0}).S("mode", "edge").
class A {
 public:
  A() = default;
  explicit A(std::vector<format::AttrDesc> a) : a_(std::move(a)) {}  // e.g. from EncodeParams
  A& I(std::string_view n, int64_t v) { return Add(n, {v}, {}, ""); }
  A& Is(std::string_view n, std::vector<int64_t> v) { return Add(n, std::move(v), {}, ""); }
  A& F(std::string_view n, float v) { return Add(n, {}, {v}, ""); }
  A& S(std::string_view n, const std::string& v) { return Add(n, {}, {}, v); }
  operator Attrs() const { return Attrs(a_); }  // NOLINT: builder

 private:
  A& Add(std::string_view n, std::vector<int64_t> i, std::vector<float> f, std::string s) {
    format::AttrDesc d;
    d.name = std::string(n);
    d.ints = std::move(i);
    d.floats = std::move(f);
    d.str = std::move(s);
    a_.push_back(std::move(d));
    return *this;
  }
  std::vector<format::AttrDesc> a_;
};

// infer + create + Run with one kernel table and thread count. `constant`
// says which inputs are known to infer/create (all when empty).
inline Result<std::vector<TensorPtr>> RunWith(std::string_view op, const Attrs& attrs,
                                              const std::vector<TensorPtr>& inputs, int num_outputs,
                                              const kernels::KernelTable& table, int threads,
                                              const std::vector<bool>& constant = {}) {
  const OpDef* def = FindOp(op);
  if (!def) return NotFound(std::string(op));
  std::vector<TensorInfo> in_info(inputs.size());
  std::vector<const ir::TensorData*> consts(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    in_info[i] = TensorInfo{inputs[i]->dtype, inputs[i]->shape};
    if (constant.empty() || (i < constant.size() && constant[i])) consts[i] = inputs[i].get();
  }
  std::vector<TensorInfo> out_info;
  InferContext ictx{op, attrs, in_info, consts, num_outputs};
  FCB_RETURN_IF_ERROR(InferOutputs(*def, ictx, &out_info));
  CreateContext cctx{op, attrs, in_info, out_info, consts};
  FCB_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, def->create(cctx));
  std::vector<TensorPtr> outs;
  std::vector<void*> out_ptrs;
  for (const auto& o : out_info) {
    outs.push_back(ir::TensorData::Make(o.dtype, o.shape));
    if (!outs.back()->bytes.empty())  // 0xA5 fill catches elements a kernel forgets to write
      std::memset(outs.back()->bytes.data(), 0xA5, outs.back()->bytes.size());
    out_ptrs.push_back(outs.back()->bytes.data());
  }
  std::vector<const void*> in_ptrs;
  for (const auto& t : inputs) in_ptrs.push_back(t ? t->bytes.data() : nullptr);
  ThreadPool pool(threads);
  // The bundle whose fp32 table `table` is (int8 ops take the same target's int8 table).
  RunContext rctx{nullptr, &pool};
  for (const TargetInfo& t : KnownTargets())
    if (&kernels::GetKernelBundle(t.id).f32 == &table) rctx.k = &kernels::GetKernelBundle(t.id);
  if (rctx.k == nullptr) return InvalidArgument("RunWith: the kernel table is not a target's");
  // Per-thread scratch as the runtime lays it out: 64-byte aligned slices.
  std::vector<uint64_t> scratch;
  if (def->scratch) {
    FCB_ASSIGN_OR_RETURN(uint64_t bytes, def->scratch(cctx));
    const uint64_t stride = (bytes + 63) / 64 * 64;
    scratch.resize(stride * threads / 8 + 8);
    rctx.scratch = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) / 64 * 64);
    rctx.scratch_stride = stride;
  }
  FCB_RETURN_IF_ERROR(kernel->Run(rctx, in_ptrs.data(), out_ptrs.data()));
  return outs;
}

inline bool IsFloatDType(DType t) { return t == DType::kF32 || t == DType::kF64; }

// Element-wise comparison with tolerance for floats, exact otherwise.
inline ::testing::AssertionResult Same(const ir::TensorData& got, const ir::TensorData& want,
                                       double tol) {
  if (got.dtype != want.dtype)
    return ::testing::AssertionFailure() << "dtype " << ir::DTypeName(got.dtype) << " vs "
                                         << ir::DTypeName(want.dtype);
  if (got.shape != want.shape)
    return ::testing::AssertionFailure() << "shape " << ir::ShapeToString(got.shape) << " vs "
                                         << ir::ShapeToString(want.shape);
  const bool half = got.dtype == DType::kF16 || got.dtype == DType::kBF16;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.GetDouble(i), w = want.GetDouble(i);
    if (half) {  // 16-bit floats must round exactly: compare bits (any NaN matches NaN)
      const uint16_t gb = got.data<uint16_t>()[i], wb = want.data<uint16_t>()[i];
      if (gb != wb && !(std::isnan(g) && std::isnan(w)))
        return ::testing::AssertionFailure() << "element " << i << ": got bits 0x" << std::hex << gb
                                             << " (" << g << "), want 0x" << wb << " (" << w << ")";
      continue;
    }
    const bool ok = IsFloatDType(got.dtype)
                        ? ((std::isnan(g) && std::isnan(w)) || g == w ||
                           std::fabs(g - w) <= tol * (1 + std::fabs(w)))
                        : got.GetInt(i) == want.GetInt(i);
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

// Runs `op` through Evaluate and every runnable target (per_target.h) x {1, 3} threads;
// every run must succeed and match `want` (one tensor per output).
inline void Check(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& inputs,
                  const std::vector<TensorPtr>& want, double tol = 1e-5) {
  SCOPED_TRACE(op);
  std::vector<const ir::TensorData*> raw;
  for (const auto& t : inputs) raw.push_back(t.get());
  auto ev = Evaluate(op, attrs, raw, static_cast<int>(want.size()));
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_EQ(ev->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(Same(*(*ev)[i], *want[i], tol)) << "Evaluate output " << i;
  for (TargetId t : fcb::testing::RunnableTargetIds()) {
    for (int threads : {1, 3}) {
      auto r = RunWith(op, attrs, inputs, static_cast<int>(want.size()), kernels::GetKernelTable(t),
                       threads);
      ASSERT_TRUE(r.ok()) << TargetName(t) << ": " << r.status().ToString();
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(Same(*(*r)[i], *want[i], tol))
            << TargetName(t) << " threads=" << threads << " output " << i;
    }
  }
}

// Shape inference alone, as the loader runs it on untrusted files: every input
// is a shape (its contents are never read, nor given as constants).
inline Status InferOnly(std::string_view op, const Attrs& attrs,
                        const std::vector<TensorPtr>& inputs, int num_outputs = 1) {
  const OpDef* def = FindOp(op);
  if (!def) return NotFound(std::string(op));
  std::vector<TensorInfo> info;
  for (const auto& t : inputs) info.push_back({t->dtype, t->shape});
  std::vector<const ir::TensorData*> consts(inputs.size(), nullptr);
  std::vector<TensorInfo> out;
  InferContext c{op, attrs, info, consts, num_outputs};
  return InferOutputs(*def, c, &out);
}

// The op must fail (infer or create or run) with a non-OK status.
inline Status Fails(const std::string& op, const Attrs& attrs, const std::vector<TensorPtr>& inputs,
                    int num_outputs = 1, const std::vector<bool>& constant = {}) {
  auto r = RunWith(op, attrs, inputs, num_outputs, kernels::GetKernelTable(TargetId::kGeneric), 1,
                   constant);
  return r.ok() ? Status::Ok() : r.status();
}

// Row-major multi-index helpers for references.
inline std::vector<int64_t> Unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
// Offset of a broadcast-aligned index into a tensor of shape s (right-aligned, size-1 dims broadcast).
inline int64_t BroadcastOffset(const std::vector<int64_t>& out_idx, const Shape& s) {
  int64_t off = 0;
  const size_t lead = out_idx.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : out_idx[lead + d]);
  return off;
}

}  // namespace fcb::ops::testing
