// Bernoulli, RandomUniform, RandomUniformLike, RandomNormal, RandomNormalLike.
//
// The generator is fixed and documented, so a seed gives the same values on
// every run, every thread count and every target: element i of a tensor is
// made from counter-based draws of a splitmix64 stream,
//
//   key     = Mix(bits of (double) seed  ^  0x6a09e667f3bcc909)
//   draw(j) = Mix(key + (j + 1) * 0x9e3779b97f4a7c15)          (uint64)
//   Mix(z)  = splitmix64's finalizer (xor-shift 30/27/31, multiply by
//             0xbf58476d1ce4e5b9 and 0x94d049bb133111eb)
//
// - uniform u(j) = (draw(j) >> 11) * 2^-53 in [0, 1);
// - RandomUniform*: low + u(i) * (high - low) in double, rounded to the
//   output type (a value that rounds up to `high` is moved one step down);
// - RandomNormal*: Box-Muller on draws 2i and 2i+1:
//   mean + scale * sqrt(-2 ln(1 - u(2i))) * cos(2 pi u(2i+1)), in double;
// - Bernoulli: 1 when u(i) < p[i], else 0.
// Element i depends on i alone, so the work splits over threads freely. The
// arithmetic is the same scalar C++ on every target; only libm's log/cos (the
// normal ops) could differ in the last bit between C libraries (x86-64 vs
// AArch64 hosts), never between the x86-64 targets.
//
// Seeds: the ONNX `seed` attribute (a float). A node without one gets a seed
// when the model is imported (src/import/canonicalize.cc): a hash of its name
// and output names, fixed at compile time, so a compiled file always produces
// the same values and two unseeded nodes do not share a stream. An operator
// reached without a seed attribute (a hand-built step) uses seed 0.
//
// The ONNX conformance tests of these ops compare NumPy's generator's values,
// which no other generator reproduces; they are expected failures (see
// conformance/RESULTS.md).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace fcb::ops {
namespace {

using ir::DType;

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t KeyFromSeed(double seed) {
  uint64_t b;
  std::memcpy(&b, &seed, sizeof b);
  return Mix(b ^ 0x6a09e667f3bcc909ull);
}

inline double Uniform01(uint64_t key, int64_t j) {
  const uint64_t d = Mix(key + static_cast<uint64_t>(j + 1) * 0x9e3779b97f4a7c15ull);
  return static_cast<double>(d >> 11) * (1.0 / 9007199254740992.0);
}

bool RandomFloatType(DType t) { return IsFloat(t) || IsHalf(t); }

// Writes v (already in range) as element i of a float-typed output.
inline void StoreFloat(DType t, void* y, int64_t i, double v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(y)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(y)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(y)[i] = DoubleToHalf(v); break;
    case DType::kBF16: static_cast<uint16_t*>(y)[i] = DoubleToBFloat16(v); break;
    default: break;
  }
}

inline double LoadFloat(DType t, const void* x, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(x)[i];
    case DType::kF64: return static_cast<const double*>(x)[i];
    case DType::kF16: return HalfToDouble(static_cast<const uint16_t*>(x)[i]);
    case DType::kBF16: return BFloat16ToDouble(static_cast<const uint16_t*>(x)[i]);
    default: return 0;
  }
}

// The output element type: attribute dtype, else `def`.
Status OutDType(const InferContext& c, DType def, DType* t) {
  *t = c.attrs.Has("dtype") ? static_cast<DType>(c.attrs.GetInt("dtype", 0)) : def;
  return Status::Ok();
}

bool IsLike(std::string_view op) { return op == "RandomUniformLike" || op == "RandomNormalLike"; }
bool IsNormal(std::string_view op) { return op == "RandomNormal" || op == "RandomNormalLike"; }

Status InferRandom(const InferContext& c, std::vector<TensorInfo>* outs) {
  ir::Shape shape;
  DType def = DType::kF32;
  if (IsLike(c.op)) {
    const TensorInfo& x = Input(c, 0);
    if (!x.present()) return OpError(c.op, "input is missing");
    shape = x.shape;
    def = x.dtype;
  } else {
    if (!c.attrs.Has("shape")) return OpError(c.op, "attribute 'shape' is required");
    shape = c.attrs.GetInts("shape");
    FCB_RETURN_IF_ERROR(CheckShape(c.op, shape, "shape"));
  }
  DType t;
  FCB_RETURN_IF_ERROR(OutDType(c, def, &t));
  if (!RandomFloatType(t))
    return OpUnsupported(c.op, "output dtype code " + std::to_string(static_cast<int>(t)) +
                                   " (float16, bfloat16, float32 and float64 are supported)");
  if (IsNormal(c.op)) {
    if (!std::isfinite(c.attrs.GetFloat("mean", 0.f)) || !std::isfinite(c.attrs.GetFloat("scale", 1.f)))
      return OpError(c.op, "mean and scale must be finite");
  } else {
    const float lo = c.attrs.GetFloat("low", 0.f), hi = c.attrs.GetFloat("high", 1.f);
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi)) return OpError(c.op, "low must be <= high, both finite");
  }
  outs->push_back(TensorInfo{t, shape});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateRandom(const CreateContext& c) {
  const DType t = c.outputs[0].dtype;
  const int64_t n = c.outputs[0].numel();
  const uint64_t key = KeyFromSeed(c.attrs.GetFloat("seed", 0.f));
  const bool normal = IsNormal(c.op);
  const double a = normal ? c.attrs.GetFloat("mean", 0.f) : c.attrs.GetFloat("low", 0.f);
  const double b = normal ? c.attrs.GetFloat("scale", 1.f) : c.attrs.GetFloat("high", 1.f);
  return MakeKernel([=](const RunContext& ctx, const void* const*, void* const* out) -> Status {
    void* y = out[0];
    ctx.pool->ParallelFor(n, 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        if (normal) {
          const double u1 = 1.0 - Uniform01(key, 2 * i), u2 = Uniform01(key, 2 * i + 1);
          const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
          StoreFloat(t, y, i, a + b * z);
        } else {
          StoreFloat(t, y, i, a + Uniform01(key, i) * (b - a));
          // Rounding to the output type may reach `high`: step back below it.
          if (b > a && LoadFloat(t, y, i) >= b) {
            double v = LoadFloat(t, y, i);
            for (int k = 0; k < 64 && v >= b; ++k) {
              v = std::nextafter(v, a);
              StoreFloat(t, y, i, v);
              v = LoadFloat(t, y, i);
            }
          }
        }
      }
    });
    return Status::Ok();
  });
}

bool BernoulliOutType(DType t) {
  return IsNumeric(t) || IsExtraInt(t) || IsHalf(t) || t == DType::kBool;
}

Status InferBernoulli(const InferContext& c, std::vector<TensorInfo>* outs) {
  const TensorInfo& x = Input(c, 0);
  if (!x.present()) return OpError(c.op, "input is missing");
  if (!RandomFloatType(x.dtype)) return OpUnsupported(c.op, std::string("input dtype ") + ir::DTypeName(x.dtype));
  DType t;
  FCB_RETURN_IF_ERROR(OutDType(c, x.dtype, &t));
  if (!BernoulliOutType(t)) return OpUnsupported(c.op, "output dtype code " + std::to_string(static_cast<int>(t)));
  outs->push_back(TensorInfo{t, x.shape});
  return Status::Ok();
}

Result<std::unique_ptr<Kernel>> CreateBernoulli(const CreateContext& c) {
  const DType it = c.inputs[0].dtype, ot = c.outputs[0].dtype;
  const int64_t n = c.outputs[0].numel();
  const uint64_t key = KeyFromSeed(c.attrs.GetFloat("seed", 0.f));
  const size_t es = ir::DTypeSize(ot);
  // The bytes of 1 in the output type (0 is all zero bits in every type).
  uint64_t one = 1;
  switch (ot) {
    case DType::kF32: { const float v = 1.f; std::memcpy(&one, &v, 4); break; }
    case DType::kF64: { const double v = 1.0; std::memcpy(&one, &v, 8); break; }
    case DType::kF16: one = 0x3C00; break;
    case DType::kBF16: one = 0x3F80; break;
    default: break;
  }
  return MakeKernel([=](const RunContext& ctx, const void* const* in, void* const* out) -> Status {
    uint8_t* y = static_cast<uint8_t*>(out[0]);
    ctx.pool->ParallelFor(n, 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const bool hit = Uniform01(key, i) < LoadFloat(it, in[0], i);
        if (hit) std::memcpy(y + i * es, &one, es);
        else std::memset(y + i * es, 0, es);
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterRandomOps(std::vector<OpDef>* ops) {
  ops->push_back(Def<InferBernoulli, CreateBernoulli>("Bernoulli", 1, 1));
  for (const char* name : {"RandomUniform", "RandomNormal"}) ops->push_back(Def<InferRandom, CreateRandom>(name, 0, 0));
  for (const char* name : {"RandomUniformLike", "RandomNormalLike"})
    ops->push_back(Def<InferRandom, CreateRandom>(name, 1, 1));
}

}  // namespace fcb::ops
