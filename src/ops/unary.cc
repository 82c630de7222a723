// Unary elementwise ops, Clip, Cast/CastLike, Identity and Dropout (inference).
//
// float32 activations that the kernels know (kernels::Act) run through the
// target's unary kernel; the rest are plain loops over std:: math. Integer
// variants exist where ONNX defines them (Relu, Neg, Abs, Sign, Clip).
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;
using kernels::Act;
using kernels::Epilogue;

enum class Un { kRelu, kLeakyRelu, kSigmoid, kHardSigmoid, kHardSwish, kTanh, kElu, kSelu,
                kSoftplus, kSoftsign, kGelu, kErf, kExp, kLog, kSqrt, kNeg, kAbs, kReciprocal,
                kFloor, kCeil, kRound, kSin, kCos, kSign, kNot };

struct UnaryInfo {
  const char* name;
  Un op;
  bool ints;  // also defined for int8/int32/int64
};

constexpr UnaryInfo kUnary[] = {
    {"Relu", Un::kRelu, true},        {"LeakyRelu", Un::kLeakyRelu, false},
    {"Sigmoid", Un::kSigmoid, false}, {"HardSigmoid", Un::kHardSigmoid, false},
    {"HardSwish", Un::kHardSwish, false}, {"Tanh", Un::kTanh, false},
    {"Elu", Un::kElu, false},         {"Selu", Un::kSelu, false},
    {"Softplus", Un::kSoftplus, false}, {"Softsign", Un::kSoftsign, false},
    {"Gelu", Un::kGelu, false},       {"Erf", Un::kErf, false},
    {"Exp", Un::kExp, false},         {"Log", Un::kLog, false},
    {"Sqrt", Un::kSqrt, false},       {"Neg", Un::kNeg, true},
    {"Abs", Un::kAbs, true},          {"Reciprocal", Un::kReciprocal, false},
    {"Floor", Un::kFloor, false},     {"Ceil", Un::kCeil, false},
    {"Round", Un::kRound, false},     {"Sin", Un::kSin, false},
    {"Cos", Un::kCos, false},         {"Sign", Un::kSign, true},
    {"Not", Un::kNot, false},
};

const UnaryInfo* FindUnary(std::string_view op) {
  for (const auto& u : kUnary)
    if (op == u.name) return &u;
  return nullptr;
}

// Attribute-derived constants of one instance.
struct UnaryParams {
  Un op;
  float alpha = 0, beta = 0;
  bool gelu_tanh = false;
};

Status ParseUnary(const InferContext& c, UnaryParams* p) {
  const UnaryInfo* u = FindUnary(c.op);
  if (!u) return Internal("not a unary op: " + std::string(c.op));
  p->op = u->op;
  switch (u->op) {
    case Un::kLeakyRelu: p->alpha = c.attrs.GetFloat("alpha", 0.01f); break;
    case Un::kHardSigmoid:
      p->alpha = c.attrs.GetFloat("alpha", 0.2f);
      p->beta = c.attrs.GetFloat("beta", 0.5f);
      break;
    case Un::kElu: p->alpha = c.attrs.GetFloat("alpha", 1.0f); break;
    case Un::kSelu:
      p->alpha = c.attrs.GetFloat("alpha", 1.67326319217681884765625f);
      p->beta = c.attrs.GetFloat("gamma", 1.05070102214813232421875f);
      break;
    case Un::kGelu: {
      const std::string a = c.attrs.GetString("approximate", "none");
      if (a != "none" && a != "tanh") return OpError(c.op, "approximate must be none or tanh");
      p->gelu_tanh = a == "tanh";
      break;
    }
    default: break;
  }
  return Status::Ok();
}

Status InferUnary(const InferContext& c, std::vector<TensorInfo>* outs) {
  const UnaryInfo* u = FindUnary(c.op);
  if (!u) return Internal("not a unary op: " + std::string(c.op));
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  const bool ok = u->op == Un::kNot ? x.dtype == DType::kBool
                                    : IsFloat(x.dtype) || (u->ints && IsSignedInt(x.dtype));
  if (!ok) return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  UnaryParams p;
  FCB_RETURN_IF_ERROR(ParseUnary(c, &p));
  outs->push_back(x);
  return Status::Ok();
}

// The kernels::Act of a float32 op, when there is one.
bool KernelAct(const UnaryParams& p, Epilogue* ep) {
  switch (p.op) {
    case Un::kRelu: *ep = {Act::kRelu, 0, 0}; return true;
    case Un::kLeakyRelu: *ep = {Act::kLeakyRelu, p.alpha, 0}; return true;
    case Un::kSigmoid: *ep = {Act::kSigmoid, 0, 0}; return true;
    case Un::kHardSigmoid: *ep = {Act::kHardSigmoid, p.alpha, p.beta}; return true;
    case Un::kHardSwish: *ep = {Act::kHardSwish, 0, 0}; return true;
    case Un::kTanh: *ep = {Act::kTanh, 0, 0}; return true;
    case Un::kGelu:
      if (p.gelu_tanh) return false;
      *ep = {Act::kGelu, 0, 0};
      return true;
    default: return false;
  }
}

template <typename T, typename F>
void Map(const RunContext& ctx, const T* x, T* y, int64_t n, const F& f) {
  ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

template <typename T>
void RunFloat(const RunContext& ctx, const UnaryParams& p, const T* x, T* y, int64_t n) {
  const T a = static_cast<T>(p.alpha), b = static_cast<T>(p.beta);
  switch (p.op) {
    case Un::kRelu: Map(ctx, x, y, n, [](T v) { return v > 0 ? v : T(0); }); break;
    case Un::kLeakyRelu: Map(ctx, x, y, n, [a](T v) { return v >= 0 ? v : a * v; }); break;
    case Un::kSigmoid: Map(ctx, x, y, n, [](T v) { return T(1) / (T(1) + std::exp(-v)); }); break;
    case Un::kHardSigmoid:
      Map(ctx, x, y, n, [a, b](T v) { return std::max(T(0), std::min(T(1), a * v + b)); });
      break;
    case Un::kHardSwish:
      Map(ctx, x, y, n, [](T v) { return v * std::max(T(0), std::min(T(1), v / T(6) + T(0.5))); });
      break;
    case Un::kTanh: Map(ctx, x, y, n, [](T v) { return std::tanh(v); }); break;
    case Un::kElu: Map(ctx, x, y, n, [a](T v) { return v >= 0 ? v : a * (std::exp(v) - T(1)); }); break;
    case Un::kSelu:
      Map(ctx, x, y, n, [a, b](T v) { return v > 0 ? b * v : b * (a * std::exp(v) - a); });
      break;
    case Un::kSoftplus:
      // Stable form: never exponentiates a large positive number.
      Map(ctx, x, y, n, [](T v) {
        return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
      });
      break;
    case Un::kSoftsign: Map(ctx, x, y, n, [](T v) { return v / (T(1) + std::abs(v)); }); break;
    case Un::kGelu:
      if (p.gelu_tanh) {
        Map(ctx, x, y, n, [](T v) {
          const T k = T(0.7978845608028654);  // sqrt(2 / pi)
          return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
        });
      } else {
        Map(ctx, x, y, n, [](T v) { return T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476))); });
      }
      break;
    case Un::kErf: Map(ctx, x, y, n, [](T v) { return std::erf(v); }); break;
    case Un::kExp: Map(ctx, x, y, n, [](T v) { return std::exp(v); }); break;
    case Un::kLog: Map(ctx, x, y, n, [](T v) { return std::log(v); }); break;
    case Un::kSqrt: Map(ctx, x, y, n, [](T v) { return std::sqrt(v); }); break;
    case Un::kNeg: Map(ctx, x, y, n, [](T v) { return -v; }); break;
    case Un::kAbs: Map(ctx, x, y, n, [](T v) { return std::abs(v); }); break;
    case Un::kReciprocal: Map(ctx, x, y, n, [](T v) { return T(1) / v; }); break;
    case Un::kFloor: Map(ctx, x, y, n, [](T v) { return std::floor(v); }); break;
    case Un::kCeil: Map(ctx, x, y, n, [](T v) { return std::ceil(v); }); break;
    case Un::kRound: Map(ctx, x, y, n, [](T v) { return std::nearbyint(v); }); break;  // half to even
    case Un::kSin: Map(ctx, x, y, n, [](T v) { return std::sin(v); }); break;
    case Un::kCos: Map(ctx, x, y, n, [](T v) { return std::cos(v); }); break;
    case Un::kSign: Map(ctx, x, y, n, [](T v) { return v > 0 ? T(1) : v < 0 ? T(-1) : v; }); break;
    case Un::kNot: break;
  }
}

template <typename T>
void RunInt(const RunContext& ctx, Un op, const T* x, T* y, int64_t n) {
  using U = std::make_unsigned_t<T>;
  // Negation wraps at the minimum (as two's complement hardware does) instead of overflowing.
  auto neg = [](T v) { return static_cast<T>(U(0) - static_cast<U>(v)); };
  switch (op) {
    case Un::kRelu: Map(ctx, x, y, n, [](T v) { return v > 0 ? v : T(0); }); break;
    case Un::kNeg: Map(ctx, x, y, n, neg); break;
    case Un::kAbs: Map(ctx, x, y, n, [neg](T v) { return v < 0 ? neg(v) : v; }); break;
    case Un::kSign: Map(ctx, x, y, n, [](T v) { return static_cast<T>((v > 0) - (v < 0)); }); break;
    default: break;
  }
}

Result<std::unique_ptr<Kernel>> CreateUnary(const CreateContext& c) {
  UnaryParams p;
  FCB_RETURN_IF_ERROR(ParseUnary(AsInfer(c), &p));
  const DType t = c.inputs[0].dtype;
  const int64_t n = c.inputs[0].numel();
  Epilogue ep;
  if (t == DType::kF32 && KernelAct(p, &ep)) {
    return MakeAdaptingKernel([ep, made_n = n](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      const int64_t n = ctx.shapes ? ir::NumElements(ctx.shapes[0]) : made_n;
      const float* x = static_cast<const float*>(in[0]);
      float* y = static_cast<float*>(out[0]);
      ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) { ctx.k->f32.unary(ep, x, y, b, e); });
      return Status::Ok();
    });
  }
  return MakeAdaptingKernel([p, made_n = n, t](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const int64_t n = ctx.shapes ? ir::NumElements(ctx.shapes[0]) : made_n;
    switch (t) {
      case DType::kF32:
        RunFloat(ctx, p, static_cast<const float*>(in[0]), static_cast<float*>(out[0]), n);
        break;
      case DType::kF64:
        RunFloat(ctx, p, static_cast<const double*>(in[0]), static_cast<double*>(out[0]), n);
        break;
      case DType::kI8:
        RunInt(ctx, p.op, static_cast<const int8_t*>(in[0]), static_cast<int8_t*>(out[0]), n);
        break;
      case DType::kI32:
        RunInt(ctx, p.op, static_cast<const int32_t*>(in[0]), static_cast<int32_t*>(out[0]), n);
        break;
      case DType::kI64:
        RunInt(ctx, p.op, static_cast<const int64_t*>(in[0]), static_cast<int64_t*>(out[0]), n);
        break;
      case DType::kBool: {  // Not
        const uint8_t* x = static_cast<const uint8_t*>(in[0]);
        uint8_t* y = static_cast<uint8_t*>(out[0]);
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] == 0;
        break;
      }
      default: return Internal("unary dtype");
    }
    return Status::Ok();
  });
}

// --- Clip ------------------------------------------------------------------------

// min/max come from inputs 1 and 2 (opset >= 11, read at run time, so they
// need not be constants) or from attributes (older opsets).
Status InferClip(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!IsFloat(x.dtype) && !IsSignedInt(x.dtype) && x.dtype != DType::kU8)
    return OpUnsupported(c.op, std::string("dtype ") + ir::DTypeName(x.dtype));
  for (size_t i = 1; i < 3; ++i) {
    const TensorInfo& b = Input(c, i);
    if (!b.present()) continue;
    if (b.dtype != x.dtype) return OpError(c.op, "min/max must have the input's dtype");
    if (b.numel() != 1 || b.shape.size() > 1) return OpError(c.op, "min/max must be scalars");
  }
  outs->push_back(x);
  return Status::Ok();
}

template <typename T>
Status RunClip(const RunContext& ctx, const void* const* in, void* out, int64_t n, bool has_lo,
               bool has_hi, float attr_lo, float attr_hi) {
  T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
  if constexpr (std::is_floating_point_v<T>) {
    lo = -std::numeric_limits<T>::infinity();
    hi = std::numeric_limits<T>::infinity();
    lo = std::max<T>(lo, attr_lo);
    hi = std::min<T>(hi, attr_hi);
  }
  if (has_lo) lo = *static_cast<const T*>(in[1]);
  if (has_hi) hi = *static_cast<const T*>(in[2]);
  const T* x = static_cast<const T*>(in[0]);
  T* y = static_cast<T*>(out);
  if constexpr (std::is_same_v<T, float>) {
    const Epilogue ep{Act::kClip, lo, hi};
    ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) { ctx.k->f32.unary(ep, x, y, b, e); });
  } else {
    Map(ctx, x, y, n, [lo, hi](T v) { return v < lo ? lo : (hi < v ? hi : v); });
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateClip(const CreateContext& c) {
  const bool has_lo = c.inputs.size() > 1 && c.inputs[1].present();
  const bool has_hi = c.inputs.size() > 2 && c.inputs[2].present();
  const float attr_lo = c.attrs.GetFloat("min", -std::numeric_limits<float>::infinity());
  const float attr_hi = c.attrs.GetFloat("max", std::numeric_limits<float>::infinity());
  const int64_t n = c.inputs[0].numel();
  const DType t = c.inputs[0].dtype;
  return MakeAdaptingKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    const int64_t count = ctx.shapes ? ir::NumElements(ctx.shapes[0]) : n;
    Status s = Internal("Clip dtype");
    DispatchNumeric(t, [&](auto tag) {
      s = RunClip<decltype(tag)>(ctx, in, out[0], count, has_lo, has_hi, attr_lo, attr_hi);
    });
    return s;
  });
}

// --- Cast, CastLike ------------------------------------------------------------

template <typename D, typename S>
D ConvertOne(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    // Float -> int without undefined behaviour: NaN -> 0, out of range saturates.
    if (std::isnan(v)) return 0;
    if (v <= static_cast<S>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (v >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

// Tags for the 16-bit float types, whose elements are uint16_t bit patterns.
struct F16Tag {};
struct BF16Tag {};

// Calls f(T{}) for every castable dtype (bool, numeric, the extra integer
// types, F16Tag / BF16Tag).
template <typename F>
bool DispatchCast(DType t, F&& f) {
  switch (t) {
    case DType::kBool: f(bool{}); return true;
    case DType::kF16: f(F16Tag{}); return true;
    case DType::kBF16: f(BF16Tag{}); return true;
    default: return DispatchNumericOrExtraInt(t, f);
  }
}

// How an element of cast type T is stored.
template <typename T> struct Storage { using type = T; };
template <> struct Storage<bool> { using type = uint8_t; };  // any nonzero byte is true
template <> struct Storage<F16Tag> { using type = uint16_t; };
template <> struct Storage<BF16Tag> { using type = uint16_t; };

// An element's value: 16-bit floats widen exactly to double.
template <typename S>
auto Load(typename Storage<S>::type v) {
  if constexpr (std::is_same_v<S, bool>) return v != 0;
  else if constexpr (std::is_same_v<S, F16Tag>) return HalfToDouble(v);
  else if constexpr (std::is_same_v<S, BF16Tag>) return BFloat16ToDouble(v);
  else return v;
}

// A value stored as type D: 16-bit floats round to nearest even in one step
// from double (NaN stays NaN, overflow gives Inf); see ConvertOne for the rest.
template <typename D, typename V>
typename Storage<D>::type Store(V v) {
  if constexpr (std::is_same_v<D, F16Tag>) return DoubleToHalf(static_cast<double>(v));
  else if constexpr (std::is_same_v<D, BF16Tag>) return DoubleToBFloat16(static_cast<double>(v));
  else if constexpr (std::is_same_v<D, bool>) return static_cast<uint8_t>(v != V(0));
  else return ConvertOne<D>(v);
}

template <typename D, typename S>
void CastLoop(const RunContext& ctx, const void* in, void* out, int64_t n) {
  using SS = typename Storage<S>::type;
  using DS = typename Storage<D>::type;
  ctx.pool->ParallelFor(n, 16384, [&](int64_t b, int64_t e) {
    const SS* x = static_cast<const SS*>(in);
    DS* y = static_cast<DS*>(out);
    for (int64_t i = b; i < e; ++i) y[i] = Store<D>(Load<S>(x[i]));
  });
}

Status InferCast(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  DType to;
  if (c.op == "CastLike") {
    if (!Input(c, 1).present()) return OpError(c.op, "target_type input is missing");
    to = Input(c, 1).dtype;
  } else {
    if (!c.attrs.Has("to")) return OpError(c.op, "attribute 'to' is required");
    to = static_cast<DType>(c.attrs.GetInt("to", 0));
  }
  auto castable = [](DType t) {
    return t == DType::kBool || IsNumeric(t) || IsExtraInt(t) || IsHalf(t);
  };
  // Types fcb has no dtype for are named by their ONNX names.
  auto name = [](DType t) -> std::string {
    static const char* kOnnx[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32",
                                  "int64", "string", "bool", "float16", "float64", "uint32", "uint64",
                                  "complex64", "complex128", "bfloat16"};
    const int code = static_cast<int>(t);
    return code >= 0 && code < 17 ? kOnnx[code] : "ONNX type " + std::to_string(code);
  };
  if (!castable(x.dtype) || !castable(to))
    return OpUnsupported(c.op, "cast from " + name(x.dtype) + " to " + name(to));
  outs->push_back(TensorInfo{to, x.shape});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateCast(const CreateContext& c) {
  const DType from = c.inputs[0].dtype, to = c.outputs[0].dtype;
  const int64_t n = c.inputs[0].numel();
  if (from == to) {
    const size_t elem = ir::DTypeSize(from);
    return MakeAdaptingKernel([n, elem](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
      CopyBytes(out[0], in[0], static_cast<size_t>(ctx.shapes ? ir::NumElements(ctx.shapes[0]) : n) * elem);
      return Status::Ok();
    });
  }
  using Fn = void (*)(const RunContext&, const void*, void*, int64_t);
  Fn fn = nullptr;
  DispatchCast(to, [&](auto dtag) {
    DispatchCast(from, [&](auto stag) { fn = &CastLoop<decltype(dtag), decltype(stag)>; });
  });
  if (!fn) return OpUnsupported(c.op, "cast");
  return MakeAdaptingKernel([fn, n](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    fn(ctx, in[0], out[0], ctx.shapes ? ir::NumElements(ctx.shapes[0]) : n);
    return Status::Ok();
  });
}

// --- Identity, Dropout -------------------------------------------------------------

Status InferIdentity(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  outs->push_back(x);
  if (c.op == "Dropout") {
    // Inference only: a training_mode that is true (or unknown) would need randomness.
    double training = 0;
    bool present = false;
    FCB_RETURN_IF_ERROR(ConstScalarInput(c, 2, "training_mode", &training, &present));
    if (present && training != 0) {  // only ratio 0 (no dropping) is deterministic
      double ratio = 0.5;
      bool has_ratio = false;
      FCB_RETURN_IF_ERROR(ConstScalarInput(c, 1, "ratio", &ratio, &has_ratio));
      if (ratio != 0) return OpUnsupported(c.op, "training_mode=true (random dropout)");
    }
    const TensorInfo& ratio = Input(c, 1);
    if (ratio.present() && (!IsFloat(ratio.dtype) || ratio.numel() != 1))
      return OpError(c.op, "ratio must be a float scalar");
    if (c.num_outputs > 1) outs->push_back(TensorInfo{DType::kBool, x.shape});
  }
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateIdentity(const CreateContext& c) {
  const size_t bytes = static_cast<size_t>(c.inputs[0].bytes());
  const size_t mask_bytes = c.outputs.size() > 1 ? static_cast<size_t>(c.outputs[1].numel()) : 0;
  return MakeKernel([bytes, mask_bytes](const RunContext&, const void* const* in,
                                        void* const* out) -> Status {
    if (out[0] != in[0]) CopyBytes(out[0], in[0], bytes);  // a view step: the same bytes (plan_check.h)
    if (mask_bytes) std::memset(out[1], 1, mask_bytes);
    return Status::Ok();
  });
}

}  // namespace

void RegisterUnaryOps(std::vector<OpDef>* ops) {
  for (const auto& u : kUnary) ops->push_back(Def<InferUnary, CreateUnary>(u.name, 1, 1, 1, 1, kTraitElementwise));
  ops->push_back(Def<InferClip, CreateClip>("Clip", 1, 3, 1, 1, kTraitElementwise));
  ops->push_back(Def<InferCast, CreateCast>("Cast", 1, 1, 1, 1, kTraitElementwise));
  ops->push_back(Def<InferCast, CreateCast>("CastLike", 2, 2));
  ops->push_back(Def<InferIdentity, CreateIdentity>("Identity", 1, 1, 1, 1, kTraitElementwise | kTraitView));
  ops->push_back(Def<InferIdentity, CreateIdentity>("Dropout", 1, 3, 1, 2, kTraitElementwise));
}

}  // namespace fcb::ops
