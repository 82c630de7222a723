// Broadcasting elementwise ops: arithmetic (Add, Sub, Mul, Div, Pow, Mod),
// variadic Max/Min/Sum/Mean, comparisons, boolean logic and Where.
//
// float32 goes through the target's binary kernel, one broadcast run at a
// time; other dtypes use plain loops. float16 and bfloat16 are computed in
// float32 per binary step and rounded back (to nearest even), as NumPy does. Integer arithmetic wraps (two's
// complement) instead of invoking C++ undefined behaviour, and integer
// division or modulo by zero yields 0 rather than trapping: inputs arrive at
// run time and must never crash the process.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "ops/broadcast.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;
using kernels::BinaryOp;

enum class Bin { kAdd, kSub, kMul, kDiv, kPow, kMod, kMax, kMin, kSum, kMean,
                 kEq, kLt, kGt, kLe, kGe, kAnd, kOr, kXor };

bool BinFromName(std::string_view op, Bin* b) {
  static const std::pair<const char*, Bin> kNames[] = {
      {"Add", Bin::kAdd},   {"Sub", Bin::kSub},   {"Mul", Bin::kMul},
      {"Div", Bin::kDiv},   {"Pow", Bin::kPow},   {"Mod", Bin::kMod},
      {"Max", Bin::kMax},   {"Min", Bin::kMin},   {"Sum", Bin::kSum},
      {"Mean", Bin::kMean}, {"Equal", Bin::kEq},  {"Less", Bin::kLt},
      {"Greater", Bin::kGt}, {"LessOrEqual", Bin::kLe}, {"GreaterOrEqual", Bin::kGe},
      {"And", Bin::kAnd},   {"Or", Bin::kOr},     {"Xor", Bin::kXor}};
  for (const auto& [n, v] : kNames)
    if (op == n) {
      *b = v;
      return true;
    }
  return false;
}

bool IsVariadic(Bin b) { return b == Bin::kMax || b == Bin::kMin || b == Bin::kSum || b == Bin::kMean; }
bool IsCompare(Bin b) { return b >= Bin::kEq && b <= Bin::kGe; }
bool IsLogic(Bin b) { return b >= Bin::kAnd; }

// --- scalar semantics -------------------------------------------------------

template <typename T>
T Wrap(T a, T b, int what) {  // 0 add, 1 sub, 2 mul, wrapping for integers
  if constexpr (std::is_floating_point_v<T>) {
    return what == 0 ? a + b : what == 1 ? a - b : a * b;
  } else {
    using U = std::make_unsigned_t<T>;
    using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U>;  // no int promotion
    const W x = static_cast<W>(static_cast<U>(a)), y = static_cast<W>(static_cast<U>(b));
    return static_cast<T>(static_cast<U>(what == 0 ? x + y : what == 1 ? x - y : x * y));
  }
}

template <typename T>
T SafeDiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a / b;
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return Wrap<T>(0, a, 1);  // -a, wrapping at the minimum
    return static_cast<T>(a / b);  // truncates toward zero, like ONNX Runtime
  }
}

template <typename T>
T SafeMod(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);  // float Mod requires fmod=1 (checked in infer)
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return 0;
    T r = static_cast<T>(a % b);
    if constexpr (std::is_signed_v<T>)
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);  // sign of divisor
    return r;
  }
}

// double -> T without undefined behaviour: NaN -> 0, saturating.
template <typename T>
T SaturateCast(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// --- broadcast loops ----------------------------------------------------------

// y[i] = f(a[i*sa], b[i*sb]); the three stride cases as separate loops so the
// compiler can vectorize each.
template <typename A, typename B, typename Y, typename F>
void Loop2(const A* a, int64_t sa, const B* b, int64_t sb, Y* y, int64_t n, const F& f) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (sa) {
    const B bv = b[0];
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  } else if (sb) {
    const A av = a[0];
    for (int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else {
    const Y v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

// One broadcast pass y = f(a, b) over a plan of two inputs.
template <typename A, typename B, typename Y, typename F>
void Pass2(const RunContext& ctx, const BroadcastPlan& plan, const A* a, const B* b, Y* y,
           const F& f) {
  ctx.pool->ParallelFor(plan.items(), GrainFor(plan.piece), [&](int64_t s, int64_t e) {
    plan.ForRuns(s, e, [&](const int64_t* off, int64_t yo, int64_t n) {
      Loop2(a + off[0], plan.run_stride[0], b + off[1], plan.run_stride[1], y + yo, n, f);
    });
  });
}

// Floats of the repeated row Pass2F32 lays out once per chunk.
constexpr int64_t kRowTileFloats = 4096;

// The same pass through the target's float kernel.
void Pass2F32(const RunContext& ctx, const BroadcastPlan& plan, BinaryOp op, const float* a,
              const float* b, float* y) {
  // A dense [rows, run] tensor against one short row repeated over the rows
  // (NHWC x a per-channel vector, e.g. the squeeze-and-excitation scale of
  // EfficientNet and MobileNetV3): one kernel call per row would cost more
  // than its few vectors of work, so the row is laid out k times in a local
  // buffer and each call covers k rows.
  const int64_t run = plan.run;
  if (plan.dims.size() == 1 && plan.pieces_per_run == 1 && run <= kRowTileFloats / 2 &&
      plan.run_stride[0] == 1 && plan.run_stride[1] == 1) {
    const int64_t sa = plan.strides[0][0], sb = plan.strides[1][0];
    const int rep = sa == 0 && sb == run ? 0 : sb == 0 && sa == run ? 1 : -1;  // the repeated input
    if (rep >= 0) {
      const int64_t k = kRowTileFloats / run;
      ctx.pool->ParallelFor(plan.rows, std::max<int64_t>(k, GrainFor(run)), [&](int64_t s, int64_t e) {
        alignas(64) float tiled[kRowTileFloats];
        const float* row = rep == 0 ? a : b;
        for (int64_t i = 0; i < k; ++i) std::memcpy(tiled + i * run, row, static_cast<size_t>(run) * sizeof(float));
        for (int64_t r = s; r < e; r += k) {
          const int64_t n = std::min(k, e - r) * run;
          const float* dense = (rep == 0 ? b : a) + r * run;
          ctx.k->f32.binary(op, rep == 0 ? tiled : dense, 1, rep == 0 ? dense : tiled, 1, y + r * run, n);
        }
      });
      return;
    }
  }
  ctx.pool->ParallelFor(plan.items(), GrainFor(plan.piece), [&](int64_t s, int64_t e) {
    plan.ForRuns(s, e, [&](const int64_t* off, int64_t yo, int64_t n) {
      ctx.k->f32.binary(op, a + off[0], plan.run_stride[0], b + off[1], plan.run_stride[1], y + yo, n);
    });
  });
}

// A function object applying Bin `k` to T operands (arithmetic results T).
template <typename T>
auto ArithFn(Bin k, bool fmod) {
  return [k, fmod](T a, T b) -> T {
    switch (k) {
      case Bin::kAdd: case Bin::kSum: case Bin::kMean: return Wrap<T>(a, b, 0);
      case Bin::kSub: return Wrap<T>(a, b, 1);
      case Bin::kMul: return Wrap<T>(a, b, 2);
      case Bin::kDiv: return SafeDiv<T>(a, b);
      case Bin::kMod: return SafeMod<T>(a, b, fmod);
      case Bin::kMax: return a < b ? b : a;
      case Bin::kMin: return b < a ? b : a;
      case Bin::kPow: return SaturateCast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
      default: return T{};
    }
  };
}

bool F32KernelOp(Bin k, BinaryOp* op) {
  switch (k) {
    case Bin::kAdd: case Bin::kSum: case Bin::kMean: *op = BinaryOp::kAdd; return true;
    case Bin::kSub: *op = BinaryOp::kSub; return true;
    case Bin::kMul: *op = BinaryOp::kMul; return true;
    case Bin::kDiv: *op = BinaryOp::kDiv; return true;
    case Bin::kMax: *op = BinaryOp::kMax; return true;
    case Bin::kMin: *op = BinaryOp::kMin; return true;
    case Bin::kPow: *op = BinaryOp::kPow; return true;
    default: return false;
  }
}

// --- inference ---------------------------------------------------------------

Status CheckDTypes(const InferContext& c, Bin k) {
  const DType t0 = Input(c, 0).dtype;
  if (k == Bin::kPow) {
    const DType t1 = Input(c, 1).dtype;
    const bool base_ok = IsFloat(t0) || t0 == DType::kI32 || t0 == DType::kI64;
    if (!base_ok || !(IsFloat(t1) || IsAnyInt(t1)))
      return OpUnsupported(c.op, std::string("dtypes ") + ir::DTypeName(t0) + " ^ " +
                                     ir::DTypeName(t1));
    return Status::Ok();
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].present()) return OpError(c.op, "input " + std::to_string(i) + " is missing");
    if (c.inputs[i].dtype != t0)
      return OpError(c.op, std::string("inputs have different dtypes (") + ir::DTypeName(t0) +
                               ", " + ir::DTypeName(c.inputs[i].dtype) + ")");
  }
  const bool any_float = IsFloat(t0) || IsHalf(t0);
  bool ok = false;
  if (IsLogic(k)) ok = t0 == DType::kBool;
  else if (k == Bin::kEq) ok = any_float || IsAnyInt(t0) || t0 == DType::kBool;
  else if (k == Bin::kSum || k == Bin::kMean) ok = any_float;
  else ok = any_float || IsAnyInt(t0);
  if (!ok) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(t0));
  if (k == Bin::kMod && any_float && c.attrs.GetInt("fmod", 0) != 1)
    return OpError(c.op, "fmod must be 1 for floating-point inputs");
  return Status::Ok();
}

Status InferBinary(const InferContext& c, std::vector<TensorInfo>* outs) {
  Bin k;
  if (!BinFromName(c.op, &k)) return Internal("not a binary op: " + std::string(c.op));
  if (c.inputs.empty() || (!IsVariadic(k) && c.inputs.size() != 2))
    return OpError(c.op, "wrong number of inputs");
  FCB_RETURN_IF_ERROR(CheckDTypes(c, k));
  ir::Shape shape = Input(c, 0).shape;
  for (size_t i = 1; i < c.inputs.size(); ++i)
    FCB_RETURN_IF_ERROR(BroadcastShapes(c.op, shape, c.inputs[i].shape, &shape));
  const DType out = (IsCompare(k) || IsLogic(k)) ? DType::kBool : Input(c, 0).dtype;
  outs->push_back(TensorInfo{out, shape});
  return Status::Ok();
}

// --- kernels -------------------------------------------------------------------

// The broadcast stages of an n-input op: stage 0 combines inputs 0 and 1 (or
// copies input 0 when alone); stage i >= 1 folds input i+1 into the output.
Status MakeStages(const CreateContext& c, std::vector<BroadcastPlan>* plans) {
  const ir::Shape& out = c.outputs[0].shape;
  if (c.inputs.size() == 1) {
    plans->resize(1);
    return BroadcastPlan::Make(c.op, {&c.inputs[0].shape}, out, &(*plans)[0]);
  }
  plans->resize(c.inputs.size() - 1);
  FCB_RETURN_IF_ERROR(
      BroadcastPlan::Make(c.op, {&c.inputs[0].shape, &c.inputs[1].shape}, out, &(*plans)[0]));
  for (size_t i = 2; i < c.inputs.size(); ++i)
    FCB_RETURN_IF_ERROR(BroadcastPlan::Make(c.op, {&out, &c.inputs[i].shape}, out, &(*plans)[i - 1]));
  return Status::Ok();
}

// Copies input 0 broadcast into the output (single-input variadic ops).
template <typename T>
void BroadcastCopy(const RunContext& ctx, const BroadcastPlan& plan, const T* a, T* y) {
  ctx.pool->ParallelFor(plan.items(), GrainFor(plan.piece), [&](int64_t s, int64_t e) {
    plan.ForRuns(s, e, [&](const int64_t* off, int64_t yo, int64_t n) {
      if (plan.run_stride[0]) CopyBytes(y + yo, a + off[0], static_cast<size_t>(n) * sizeof(T));
      else for (int64_t i = 0; i < n; ++i) y[yo + i] = a[off[0]];
    });
  });
}

template <typename T>
Result<std::unique_ptr<Kernel>> ArithKernel(const CreateContext& c, Bin k) {
  std::vector<BroadcastPlan> plans;
  FCB_RETURN_IF_ERROR(MakeStages(c, &plans));
  const bool fmod = c.attrs.GetInt("fmod", 0) != 0;
  const int64_t count = static_cast<int64_t>(c.inputs.size());
  const int64_t total = c.outputs[0].numel();
  BinaryOp kop = BinaryOp::kAdd;
  const bool use_kernel = std::is_same_v<T, float> && F32KernelOp(k, &kop);
  auto run = [plans = std::move(plans), k, fmod, count, total, kop, use_kernel](
                 const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    T* y = static_cast<T*>(out[0]);
    auto f = ArithFn<T>(k, fmod);
    // At other shapes (adapts with one or two inputs only): stage 0's plan made for them.
    BroadcastPlan at;
    const BroadcastPlan* first = nullptr;
    FCB_RETURN_IF_ERROR(BroadcastPlan::AtRun(ctx, plans[0], &at, &first));
    if (count == 1) {
      BroadcastCopy(ctx, *first, static_cast<const T*>(in[0]), y);
      return Status::Ok();
    }
    for (int64_t s = 0; s < count - 1; ++s) {
      const T* a = s == 0 ? static_cast<const T*>(in[0]) : y;
      const T* b = static_cast<const T*>(in[s + 1]);
      const BroadcastPlan& plan = s == 0 ? *first : plans[s];
      if constexpr (std::is_same_v<T, float>) {
        if (use_kernel) {
          Pass2F32(ctx, plan, kop, a, b, y);
          continue;
        }
      }
      Pass2(ctx, plan, a, b, y, f);
    }
    if (k == Bin::kMean) {
      const T scale = static_cast<T>(1.0 / static_cast<double>(count));
      const int64_t n = ctx.shapes ? ir::NumElements(ctx.shapes[count]) : total;
      ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] *= scale;
      });
    }
    return Status::Ok();
  };
  if (count <= 2) return MakeAdaptingKernel(std::move(run));
  return MakeKernel(std::move(run));
}

template <typename A, typename B>
Result<std::unique_ptr<Kernel>> PowKernel(const CreateContext& c) {
  BroadcastPlan plan;
  FCB_RETURN_IF_ERROR(
      BroadcastPlan::Make(c.op, {&c.inputs[0].shape, &c.inputs[1].shape}, c.outputs[0].shape, &plan));
  return MakeAdaptingKernel([made = std::move(plan)](const RunContext& ctx, const void* const* in,
                                                     void* const* out) -> Status {
    BroadcastPlan at;
    const BroadcastPlan* p = nullptr;
    FCB_RETURN_IF_ERROR(BroadcastPlan::AtRun(ctx, made, &at, &p));
    const BroadcastPlan& plan = *p;
    const A* a = static_cast<const A*>(in[0]);
    const B* b = static_cast<const B*>(in[1]);
    A* y = static_cast<A*>(out[0]);
    if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float>) {
      Pass2F32(ctx, plan, BinaryOp::kPow, a, b, y);
    } else {
      Pass2(ctx, plan, a, b, y, [](A x, B e) {
        return SaturateCast<A>(std::pow(static_cast<double>(x), static_cast<double>(e)));
      });
    }
    return Status::Ok();
  });
}

// float16 / bfloat16 (bits in uint16_t): each step widens to float32, applies
// the float32 semantics and rounds back; comparisons write bools.
float Widen(uint16_t h, bool bf) { return bf ? BFloat16ToFloat(h) : HalfToFloat(h); }
uint16_t Narrow(float f, bool bf) { return bf ? FloatToBFloat16(f) : FloatToHalf(f); }

Result<std::unique_ptr<Kernel>> HalfKernel(const CreateContext& c, Bin k) {
  std::vector<BroadcastPlan> plans;
  FCB_RETURN_IF_ERROR(MakeStages(c, &plans));
  const bool bf = c.inputs[0].dtype == DType::kBF16;
  const bool fmod = c.attrs.GetInt("fmod", 0) != 0;
  const int64_t count = static_cast<int64_t>(c.inputs.size());
  const int64_t total = c.outputs[0].numel();
  auto run = [plans = std::move(plans), k, bf, fmod, count, total](
                 const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    // At other shapes (adapts with one or two inputs only): stage 0's plan made for them.
    BroadcastPlan at;
    const BroadcastPlan* first = nullptr;
    FCB_RETURN_IF_ERROR(BroadcastPlan::AtRun(ctx, plans[0], &at, &first));
    if (IsCompare(k)) {
      const auto* a = static_cast<const uint16_t*>(in[0]);
      const auto* b = static_cast<const uint16_t*>(in[1]);
      uint8_t* y = static_cast<uint8_t*>(out[0]);
      Pass2(ctx, *first, a, b, y, [k, bf](uint16_t x, uint16_t z) -> uint8_t {
        const float p = Widen(x, bf), q = Widen(z, bf);
        switch (k) {
          case Bin::kEq: return p == q;
          case Bin::kLt: return p < q;
          case Bin::kGt: return p > q;
          case Bin::kLe: return p <= q;
          default: return p >= q;
        }
      });
      return Status::Ok();
    }
    uint16_t* y = static_cast<uint16_t*>(out[0]);
    if (count == 1) {
      BroadcastCopy(ctx, *first, static_cast<const uint16_t*>(in[0]), y);
      return Status::Ok();
    }
    const auto f = ArithFn<float>(k, fmod);
    for (int64_t s = 0; s < count - 1; ++s) {
      const uint16_t* a = s == 0 ? static_cast<const uint16_t*>(in[0]) : y;
      const uint16_t* b = static_cast<const uint16_t*>(in[s + 1]);
      Pass2(ctx, s == 0 ? *first : plans[s], a, b, y, [&f, bf](uint16_t x, uint16_t z) -> uint16_t {
        return Narrow(f(Widen(x, bf), Widen(z, bf)), bf);
      });
    }
    if (k == Bin::kMean) {
      const float scale = static_cast<float>(1.0 / static_cast<double>(count));
      const int64_t n = ctx.shapes ? ir::NumElements(ctx.shapes[count]) : total;
      ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = Narrow(Widen(y[i], bf) * scale, bf);
      });
    }
    return Status::Ok();
  };
  if (count <= 2) return MakeAdaptingKernel(std::move(run));
  return MakeKernel(std::move(run));
}

template <typename T>
Result<std::unique_ptr<Kernel>> CompareKernel(const CreateContext& c, Bin k) {
  BroadcastPlan plan;
  FCB_RETURN_IF_ERROR(
      BroadcastPlan::Make(c.op, {&c.inputs[0].shape, &c.inputs[1].shape}, c.outputs[0].shape, &plan));
  return MakeAdaptingKernel([made = std::move(plan), k](const RunContext& ctx, const void* const* in,
                                                        void* const* out) -> Status {
    BroadcastPlan at;
    const BroadcastPlan* plan = nullptr;
    FCB_RETURN_IF_ERROR(BroadcastPlan::AtRun(ctx, made, &at, &plan));
    const T* a = static_cast<const T*>(in[0]);
    const T* b = static_cast<const T*>(in[1]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    auto run = [&](auto f) { Pass2(ctx, *plan, a, b, y, f); };
    switch (k) {
      case Bin::kEq: run([](T x, T z) -> uint8_t { return x == z; }); break;
      case Bin::kLt: run([](T x, T z) -> uint8_t { return x < z; }); break;
      case Bin::kGt: run([](T x, T z) -> uint8_t { return x > z; }); break;
      case Bin::kLe: run([](T x, T z) -> uint8_t { return x <= z; }); break;
      case Bin::kGe: run([](T x, T z) -> uint8_t { return x >= z; }); break;
      default: return Internal("bad compare");
    }
    return Status::Ok();
  });
}

Result<std::unique_ptr<Kernel>> LogicKernel(const CreateContext& c, Bin k) {
  BroadcastPlan plan;
  FCB_RETURN_IF_ERROR(
      BroadcastPlan::Make(c.op, {&c.inputs[0].shape, &c.inputs[1].shape}, c.outputs[0].shape, &plan));
  return MakeAdaptingKernel([made = std::move(plan), k](const RunContext& ctx, const void* const* in,
                                                        void* const* out) -> Status {
    BroadcastPlan at;
    const BroadcastPlan* plan = nullptr;
    FCB_RETURN_IF_ERROR(BroadcastPlan::AtRun(ctx, made, &at, &plan));
    // Bools are bytes; any nonzero byte is true.
    const uint8_t* a = static_cast<const uint8_t*>(in[0]);
    const uint8_t* b = static_cast<const uint8_t*>(in[1]);
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    auto run = [&](auto f) { Pass2(ctx, *plan, a, b, y, f); };
    switch (k) {
      case Bin::kEq: run([](uint8_t x, uint8_t z) -> uint8_t { return (x != 0) == (z != 0); }); break;
      case Bin::kAnd: run([](uint8_t x, uint8_t z) -> uint8_t { return x && z; }); break;
      case Bin::kOr: run([](uint8_t x, uint8_t z) -> uint8_t { return x || z; }); break;
      case Bin::kXor: run([](uint8_t x, uint8_t z) -> uint8_t { return (x != 0) != (z != 0); }); break;
      default: return Internal("bad logic op");
    }
    return Status::Ok();
  });
}

Result<std::unique_ptr<Kernel>> CreateBinary(const CreateContext& c) {
  Bin k;
  if (!BinFromName(c.op, &k)) return Internal("not a binary op: " + std::string(c.op));
  const DType t = c.inputs[0].dtype;
  if (IsLogic(k) || (k == Bin::kEq && t == DType::kBool)) return LogicKernel(c, k);
  // Made below; an error only if nothing was (not built up front: kernels are remade at each new size).
  Result<std::unique_ptr<Kernel>> r = std::unique_ptr<Kernel>();
  if (IsHalf(t) && k != Bin::kPow) return HalfKernel(c, k);
  if (k == Bin::kPow) {
    auto with_exp = [&](auto base) {
      using A = decltype(base);
      DispatchNumericOrExtraInt(c.inputs[1].dtype, [&](auto e) { r = PowKernel<A, decltype(e)>(c); });
    };
    switch (t) {
      case DType::kF32: with_exp(float{}); break;
      case DType::kF64: with_exp(double{}); break;
      case DType::kI32: with_exp(int32_t{}); break;
      case DType::kI64: with_exp(int64_t{}); break;
      default: break;
    }
    return MadeOr(std::move(r), c.op, "dtype");
  }
  DispatchNumericOrExtraInt(t, [&](auto tag) {
    using T = decltype(tag);
    r = IsCompare(k) ? CompareKernel<T>(c, k) : ArithKernel<T>(c, k);
  });
  return MadeOr(std::move(r), c.op, "dtype");
}

// --- Where ---------------------------------------------------------------------

Status InferWhere(const InferContext& c, std::vector<TensorInfo>* outs) {
  const auto &cond = Input(c, 0), &x = Input(c, 1), &y = Input(c, 2);
  if (!cond.present() || !x.present() || !y.present()) return OpError(c.op, "needs 3 inputs");
  if (cond.dtype != DType::kBool) return OpError(c.op, "condition must be bool");
  if (x.dtype != y.dtype) return OpError(c.op, "X and Y have different dtypes");
  ir::Shape s;
  FCB_RETURN_IF_ERROR(BroadcastShapes(c.op, cond.shape, x.shape, &s));
  FCB_RETURN_IF_ERROR(BroadcastShapes(c.op, s, y.shape, &s));
  outs->push_back(TensorInfo{x.dtype, std::move(s)});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateWhere(const CreateContext& c) {
  BroadcastPlan plan;
  FCB_RETURN_IF_ERROR(BroadcastPlan::Make(
      c.op, {&c.inputs[0].shape, &c.inputs[1].shape, &c.inputs[2].shape}, c.outputs[0].shape, &plan));
  // Made below; an error only if nothing was (not built up front: kernels are remade at each new size).
  Result<std::unique_ptr<Kernel>> r = std::unique_ptr<Kernel>();
  DispatchBySize(ir::DTypeSize(c.inputs[1].dtype), [&](auto tag) {
    using T = decltype(tag);
    r = MakeAdaptingKernel([made = std::move(plan)](const RunContext& ctx, const void* const* in,
                                                    void* const* out) -> Status {
      BroadcastPlan at;
      const BroadcastPlan* p = nullptr;
      FCB_RETURN_IF_ERROR(BroadcastPlan::AtRun(ctx, made, &at, &p));
      const BroadcastPlan& plan = *p;
      const uint8_t* cond = static_cast<const uint8_t*>(in[0]);
      const T* x = static_cast<const T*>(in[1]);
      const T* y = static_cast<const T*>(in[2]);
      T* o = static_cast<T*>(out[0]);
      ctx.pool->ParallelFor(plan.items(), GrainFor(plan.piece), [&](int64_t s, int64_t e) {
        plan.ForRuns(s, e, [&](const int64_t* off, int64_t yo, int64_t n) {
          const int64_t sc = plan.run_stride[0], sx = plan.run_stride[1], sy = plan.run_stride[2];
          const uint8_t* cp = cond + off[0];
          const T* xp = x + off[1];
          const T* yp = y + off[2];
          for (int64_t i = 0; i < n; ++i) o[yo + i] = cp[i * sc] ? xp[i * sx] : yp[i * sy];
        });
      });
      return Status::Ok();
    });
  });
  return MadeOr(std::move(r), c.op, "element size");
}

}  // namespace

void RegisterElementwiseOps(std::vector<OpDef>* ops) {
  constexpr int kMany = 1 << 16;
  for (const char* name : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater",
                           "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"})
    ops->push_back(Def<InferBinary, CreateBinary>(name, 2, 2, 1, 1, kTraitBroadcast));
  for (const char* name : {"Max", "Min", "Sum", "Mean"})
    ops->push_back(Def<InferBinary, CreateBinary>(name, 1, kMany, 1, 1, kTraitBroadcast));
  ops->push_back(Def<InferWhere, CreateWhere>("Where", 3, 3));
}

}  // namespace fcb::ops
