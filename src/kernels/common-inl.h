// Per-target vector helpers shared by the kernel families: partial loads and
// stores that never touch memory outside the valid lanes, and the activation
// epilogue. Included once per Highway target from kernels_hwy.cc.
//
// Partial accesses: AVX2 and AVX-512 have masked loads and stores that touch
// only the valid lanes (masked-off lanes never fault), so they use those. The
// other targets go through a small stack buffer instead of Highway's
// MaskedLoad/BlendedStore, which there load the whole vector and, on SSE4,
// rewrite the masked-off lanes: a race with another thread writing the
// neighbouring channels (a conv writing a slice of a Concat), and a read past
// the end of the tensor. The stack buffer costs a failed store-to-load
// forwarding per load (tens of cycles), which is why the masked forms matter:
// a depthwise conv over 72 channels (4 whole vectors and a half) ran at a
// quarter of its speed on the buffer.

#if defined(FCB_KERNELS_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FCB_KERNELS_COMMON_INL_H_
#undef FCB_KERNELS_COMMON_INL_H_
#else
#define FCB_KERNELS_COMMON_INL_H_
#endif

#include <cstring>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/kernel_ns.h"
#include "kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
#if HWY_HAVE_SCALABLE && defined(__ARM_FEATURE_SVE_BITS) && __ARM_FEATURE_SVE_BITS > 0
// SVE compiled for one vector length (-msve-vector-bits, the variant units
// CMakeLists.txt generates from core/targets.def).
// The register tiles keep vectors in arrays, which needs a sized type: VReg,
// the fixed-length form of svfloat32_t, is one, and converts implicitly to and
// from VF, the sizeless type Highway's operations take (templates deduce VF
// only from VF: read an array element as VF(x) where one deduces). This code
// runs only where the thread's vector length is exactly this one
// (core/target.cc SveTargetHasLength).
typedef VF VReg __attribute__((arm_sve_vector_bits(__ARM_FEATURE_SVE_BITS)));
inline constexpr int kN = __ARM_FEATURE_SVE_BITS / 32;
#else
using VReg = VF;  // an element of an array of vectors
// Lanes of one vector; a packed panel of 16 floats is kPanel / kN vectors.
inline constexpr int kN = static_cast<int>(HWY_LANES(float));
#endif
static_assert(kN >= 1 && kN <= kPanel && kPanel % kN == 0, "panel must be whole vectors");

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
inline constexpr bool kMaskedAccess = true;
#else
inline constexpr bool kMaskedAccess = false;
#endif

// Loads the first `n` (< kN) floats of p, zeros elsewhere.
HWY_INLINE VF LoadPartial(DF d, const float* p, int64_t n) {
  if constexpr (kMaskedAccess) {
    return hn::MaskedLoad(hn::FirstN(d, static_cast<size_t>(n)), d, p);
  } else {
    HWY_ALIGN float buf[kN] = {};
    std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
    return hn::Load(d, buf);
  }
}
// Loads min(n, kN) floats.
HWY_INLINE VF LoadN(DF d, const float* p, int64_t n) {
  return n >= kN ? hn::LoadU(d, p) : LoadPartial(d, p, n);
}
// Stores the first min(n, kN) lanes of v; n <= 0 stores nothing.
HWY_INLINE void StoreN(VF v, DF d, float* p, int64_t n) {
  if (n >= kN) {
    hn::StoreU(v, d, p);
  } else if (n > 0) {
    if constexpr (kMaskedAccess) {
      hn::BlendedStore(v, hn::FirstN(d, static_cast<size_t>(n)), d, p);
    } else {
      HWY_ALIGN float buf[kN];
      hn::Store(v, d, buf);
      std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(float));
    }
  }
}

// The exponentials' constants: 1.5 * 2^23 + the exponent bias (ExpRound),
// and ln2 split so that q ln2_hi is exact for |q| < 2^9.
inline constexpr float kExpShift = 12582912.f + 127.f;
inline constexpr float kLn2Hi = 0.693145751953125f;
inline constexpr float kLn2Lo = 1.42860682028622680e-6f;

// The two halves of ExpNonPositive and ExpNonPositiveOfSumN. ExpRound:
// q + kExpShift for q = round(x / ln2), x >= -87 (the shift rounds and leaves
// q + 127 in the low mantissa bits). ExpFromReduced: e^r 2^q from that and
// r = x - q ln2, e^r from its Taylor series to r^7.
HWY_INLINE VF ExpRound(DF d, VF x) {
  return hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), hn::Set(d, kExpShift));
}
// ExpFromReduced over U independent vectors at once, each step taken for
// every vector before the next step (see GeluN for why).
template <int U>
HWY_INLINE void ExpFromReducedN(DF d, const VReg (&t)[U], const VReg (&r)[U], VReg (&out)[U]) {
  const hn::RebindToSigned<DF> di;
  VReg r2[U], poly[U];
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) r2[u] = hn::Mul(VF(r[u]), VF(r[u]));
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    const VF p01 = hn::MulAdd(VF(r[u]), hn::Set(d, 1.f / 6), hn::Set(d, 1.f / 2));
    const VF p23 = hn::MulAdd(VF(r[u]), hn::Set(d, 1.f / 120), hn::Set(d, 1.f / 24));
    const VF p45 = hn::MulAdd(VF(r[u]), hn::Set(d, 1.f / 5040), hn::Set(d, 1.f / 720));
    poly[u] = hn::MulAdd(hn::Mul(VF(r2[u]), VF(r2[u])), p45, hn::MulAdd(VF(r2[u]), p23, p01));
  }
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    const VF em1 = hn::MulAdd(VF(r2[u]), VF(poly[u]), VF(r[u]));  // e^r - 1
    const VF scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, VF(t[u]))));  // 2^q
    out[u] = hn::Mul(hn::Add(em1, hn::Set(d, 1.f)), scale);
  }
}
HWY_INLINE VF ExpFromReduced(DF d, VF t, VF r) {
  const VReg tv[1] = {t}, rv[1] = {r};
  VReg out[1];
  ExpFromReducedN<1>(d, tv, rv, out);
  return out[0];
}

// e^x for x <= 0, in 16 vector operations (Highway's general Exp takes about
// 24: it handles both signs and the subnormal range). Inputs below -87 are
// raised to -87, so the result stays a normal float (>= 1.6e-38) and 2^q is a
// plain exponent: callers only use it where anything that small is as good
// as zero. x = q ln2 + r with q = round(x / ln2) (the 1.5 * 2^23 shift rounds
// and leaves q + 127 in the low mantissa bits), ln2 split in two so the
// reduction is exact to float precision, |r| <= ln2 / 2, and e^r from its
// Taylor series to r^7 (truncation below 5e-9, under half an ulp).
// ExpNonPositiveN takes U independent vectors at once (see GeluN).
template <int U>
HWY_INLINE void ExpNonPositiveN(DF d, const VReg (&x)[U], VReg (&out)[U]) {
  VReg t[U], r[U];
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    const VF xc = hn::Max(VF(x[u]), hn::Set(d, -87.f));
    t[u] = ExpRound(d, xc);
    const VF q = hn::Sub(VF(t[u]), hn::Set(d, kExpShift));
    r[u] = hn::MulAdd(q, hn::Set(d, -kLn2Lo), hn::MulAdd(q, hn::Set(d, -kLn2Hi), xc));  // exact
  }
  ExpFromReducedN<U>(d, t, r, out);
}
HWY_INLINE VF ExpNonPositive(DF d, VF x) {
  const VReg xv[1] = {x};
  VReg out[1];
  ExpNonPositiveN<1>(d, xv, out);
  return out[0];
}

// e^(a + b) for a + b <= 0 without rounding the sum first: a is a large
// exact term and b a small one (|b| of order 1). The reduction takes q from
// the rounded sum, then r = (a - q ln2) + b, where a - q ln2_hi is exact, so
// r keeps a's full precision even when a + b is near -87 (rounding the sum
// would cost up to 2^-17 of absolute error in the exponent, 60 ulps of the
// result). Where a + b < -87 the result is 0 (callers take anything below
// float's normal range as zero). One exponential's work, where e^a e^b
// would take two. Taken over U independent vectors at once (see GeluN):
// out[u] = e^(a[u] + b[u]).
template <int U>
HWY_INLINE void ExpNonPositiveOfSumN(DF d, const VReg (&a)[U], const VReg (&b)[U], VReg (&out)[U]) {
  VReg t[U], r[U];
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) t[u] = ExpRound(d, hn::Max(hn::Add(VF(a[u]), VF(b[u])), hn::Set(d, -87.f)));
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    const VF q = hn::Sub(VF(t[u]), hn::Set(d, kExpShift));
    const VF r0 = hn::MulAdd(q, hn::Set(d, -kLn2Hi), VF(a[u]));  // q ln2_hi is exact (22 bits), one rounding
    r[u] = hn::Add(hn::MulAdd(q, hn::Set(d, -kLn2Lo), r0), VF(b[u]));
  }
  ExpFromReducedN<U>(d, t, r, out);
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u)
    out[u] = hn::IfThenZeroElse(hn::Lt(hn::Add(VF(a[u]), VF(b[u])), hn::Set(d, -87.f)), VF(out[u]));
}

// sigmoid(x) = 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) otherwise, so that neither
// branch overflows nor loses relative accuracy for large |x|.
// SigmoidN: U independent vectors at once, in place (see GeluN).
template <int U>
HWY_INLINE void SigmoidN(DF d, VReg (&x)[U]) {
  const VF one = hn::Set(d, 1.f), two = hn::Set(d, 2.f);
  VReg e[U], na[U];
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) na[u] = hn::Neg(hn::Abs(VF(x[u])));
  ExpNonPositiveN<U>(d, na, e);
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    // 1 / (1 + e) for a denominator in (1, 2]: the hardware's reciprocal
    // estimate refined by Newton steps (relative error below 2^-23 from a
    // 2^-12 or better estimate after one) instead of a division, which on AVX-512 alone
    // took a third of SiLU's time (efficientnet_b0 applies it to ~6M values).
    const VF den = hn::Add(one, VF(e[u]));
    VF r = hn::ApproximateReciprocal(den);
    r = hn::Mul(r, hn::NegMulAdd(den, r, two));
#if HWY_ARCH_ARM
    // NEON's and SVE's estimate (FRECPE) has 8 bits, not x86's 12 or 14: one
    // step leaves 2^-16, a second one reaches float precision.
    r = hn::Mul(r, hn::NegMulAdd(den, r, two));
#endif
    x[u] = hn::IfThenElse(hn::Ge(VF(x[u]), hn::Zero(d)), r, hn::Mul(VF(e[u]), r));
  }
}
HWY_INLINE VF Sigmoid(DF d, VF x) {
  VReg v[1] = {x};
  SigmoidN<1>(d, v);
  return v[0];
}

// GELU, x/2 * (1 + erf(x/sqrt(2))), to a few ulps everywhere: with
// z = |x|/sqrt(2), 1 + erf(x/sqrt(2)) is erfc(z) for x < 0 and 2 - erfc(z)
// otherwise, and erfc(z) = t e^(-z^2 + P(t)), t = 1/(1 + z/2), with the
// Chebyshev fit P of Numerical Recipes' erfcc (fractional error below 1.2e-7
// for every z >= 0). So the tail x -> -inf keeps its relative accuracy,
// where 1 + erf(x) would cancel. z^2 = x^2/2 is split exactly (FMA) into
// hi + lo, and e^(-hi/2 + (P - lo/2)) taken by ExpNonPositiveOfSumN, which
// does not round the sum: that would cost 30 ulps of the result's tail. |x| is
// capped at 30, where erfc is far below float's range anyway. 1/(1 + z/2)
// is the reciprocal estimate refined by Newton steps, as in Sigmoid.
//
// GeluN takes U independent vectors and runs each step for all of them
// before the next step. One GELU is a chain of about 40 dependent vector
// operations (some 160 cycles of latency); GCC keeps x86 code in source
// order, and the out-of-order core's scheduler holds too few of a loop's
// following iterations to overlap that chain: one vector at a time ran at
// ~45 cycles per vector on AVX-512 where its operations need about 20. In
// steps over U vectors, U chains are in the scheduler side by side.
template <int U>
HWY_INLINE void GeluN(DF d, VReg (&x)[U]) {
  const VF one = hn::Set(d, 1.f), two = hn::Set(d, 2.f), half = hn::Set(d, 0.5f);
  VReg xa[U], t[U], a[U], b[U], e[U];
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    xa[u] = hn::Min(hn::Abs(VF(x[u])), hn::Set(d, 30.f));
    const VF den = hn::MulAdd(hn::Mul(VF(xa[u]), hn::Set(d, 0.70710678118654752f)), half, one);
    VF r = hn::ApproximateReciprocal(den);
    r = hn::Mul(r, hn::NegMulAdd(den, r, two));
    r = hn::Mul(r, hn::NegMulAdd(den, r, two));
#if HWY_ARCH_ARM
    r = hn::Mul(r, hn::NegMulAdd(den, r, two));  // FRECPE's 8-bit estimate needs a third step
#endif
    t[u] = r;
  }
  static constexpr float kP[10] = {0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f,
                                   0.27886807f,  -0.18628806f, 0.09678418f, 0.37409196f,
                                   1.00002368f, -1.26551223f};
  VReg p[U];
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) p[u] = hn::Set(d, kP[0]);
  HWY_UNROLL(9)
  for (int i = 1; i < 10; ++i) {
    HWY_UNROLL(4)
    for (int u = 0; u < U; ++u) p[u] = hn::MulAdd(VF(p[u]), VF(t[u]), hn::Set(d, kP[i]));
  }
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    const VF hi = hn::Mul(VF(xa[u]), VF(xa[u]));
    const VF lo = hn::MulSub(VF(xa[u]), VF(xa[u]), hi);  // x^2 = hi + lo exactly
    a[u] = hn::Mul(hi, hn::Set(d, -0.5f));
    b[u] = hn::NegMulAdd(lo, half, VF(p[u]));
  }
  ExpNonPositiveOfSumN<U>(d, a, b, e);
  HWY_UNROLL(4)
  for (int u = 0; u < U; ++u) {
    const VF erfc = hn::Mul(VF(t[u]), VF(e[u]));
    const VF s = hn::IfThenElse(hn::Lt(VF(x[u]), hn::Zero(d)), erfc, hn::Sub(two, erfc));
    x[u] = hn::Mul(hn::Mul(VF(x[u]), half), s);
  }
}
HWY_INLINE VF Gelu(DF d, VF x) {
  VReg v[1] = {x};
  GeluN<1>(d, v);
  return v[0];
}

// Independent vectors an activation over many vectors takes at once
// (ApplyActN). gelu_1M (kernels_bench, AMD EPYC Zen 5), G elements/s, one
// vector at a time -> 4: AVX-512 1.44 -> 1.98, AVX2 0.93 with 4 against 0.80
// with 2 (4 beats 2 even with 16 registers); 8 spills on AVX-512 (0.99).
// sigmoid_1M 4.6 -> 5.3 and silu_1M 4.4 -> 4.9 on AVX-512. The register
// tiles' inline SiLU (StoreTileT) taken 4 abreast the same way measured no
// faster in the EfficientNets, so it stays one vector at a time.
inline constexpr int kActVectors = 4;

// The activation A, chosen at compile time: epilogues that store many vectors
// dispatch on ep.act once (WithAct) instead of once per vector, where the
// jump table, the branch back and reloading the constants cost as much as a
// short reduction (a 1x1 conv over 16 channels).
template <Act A>
HWY_INLINE VF ApplyActT(DF d, VF x, const Epilogue& ep) {
  if constexpr (A == Act::kNone) {
    return x;
  } else if constexpr (A == Act::kRelu) {
    return hn::Max(x, hn::Zero(d));
  } else if constexpr (A == Act::kClip) {
    return hn::Min(hn::Max(x, hn::Set(d, ep.a)), hn::Set(d, ep.b));
  } else if constexpr (A == Act::kSigmoid) {
    return Sigmoid(d, x);
  } else if constexpr (A == Act::kHardSigmoid) {
    return hn::Min(hn::Max(hn::MulAdd(hn::Set(d, ep.a), x, hn::Set(d, ep.b)), hn::Zero(d)),
                   hn::Set(d, 1.f));
  } else if constexpr (A == Act::kHardSwish) {
    const VF t = hn::MulAdd(x, hn::Set(d, 1.f / 6.f), hn::Set(d, 0.5f));
    return hn::Mul(x, hn::Min(hn::Max(t, hn::Zero(d)), hn::Set(d, 1.f)));
  } else if constexpr (A == Act::kTanh) {
    // Highway's Tanh converts an intermediate to int32, which for a NaN is
    // undefined behaviour in the generic target's C++ cast (found by
    // fuzzing): a NaN goes through as 0 and is put back.
    const auto nan = hn::Ne(x, x);
    return hn::IfThenElse(nan, x, hn::Tanh(d, hn::IfThenZeroElse(nan, x)));
  } else if constexpr (A == Act::kLeakyRelu) {
    return hn::IfThenElse(hn::Ge(x, hn::Zero(d)), x, hn::Mul(x, hn::Set(d, ep.a)));
  } else if constexpr (A == Act::kGelu) {
    return Gelu(d, x);
  } else {
    static_assert(A == Act::kSilu, "every activation is handled");
    return hn::Mul(x, Sigmoid(d, x));
  }
}

// ApplyActT over U independent vectors in place: GELU, sigmoid and SiLU
// interleaved (GeluN, SigmoidN), the others one vector after another.
template <Act A, int U>
HWY_INLINE void ApplyActN(DF d, VReg (&x)[U], const Epilogue& ep) {
  if constexpr (A == Act::kGelu) {
    GeluN<U>(d, x);
  } else if constexpr (A == Act::kSigmoid) {
    SigmoidN<U>(d, x);
  } else if constexpr (A == Act::kSilu) {
    VReg s[U];
    HWY_UNROLL(4)
    for (int u = 0; u < U; ++u) s[u] = x[u];
    SigmoidN<U>(d, s);
    HWY_UNROLL(4)
    for (int u = 0; u < U; ++u) x[u] = hn::Mul(VF(x[u]), VF(s[u]));
  } else {
    HWY_UNROLL(4)
    for (int u = 0; u < U; ++u) x[u] = ApplyActT<A>(d, VF(x[u]), ep);
  }
}

// Calls fn.template operator()<A>() with A = ep.act.
template <class Fn>
HWY_INLINE void WithAct(const Epilogue& ep, const Fn& fn) {
  switch (ep.act) {
    case Act::kNone: return fn.template operator()<Act::kNone>();
    case Act::kRelu: return fn.template operator()<Act::kRelu>();
    case Act::kClip: return fn.template operator()<Act::kClip>();
    case Act::kSigmoid: return fn.template operator()<Act::kSigmoid>();
    case Act::kHardSigmoid: return fn.template operator()<Act::kHardSigmoid>();
    case Act::kHardSwish: return fn.template operator()<Act::kHardSwish>();
    case Act::kTanh: return fn.template operator()<Act::kTanh>();
    case Act::kLeakyRelu: return fn.template operator()<Act::kLeakyRelu>();
    case Act::kSilu: return fn.template operator()<Act::kSilu>();
    case Act::kGelu: return fn.template operator()<Act::kGelu>();
  }
}

// Activations whose code is long (a polynomial or two per vector) and that
// convolutions rarely end in. The register-tiled kernels (StoreTileT,
// StoreDwPixels) do not unroll these over their accumulators: they store the
// tile without them and then apply them in place with Unary (eltwise-inl.h:
// out of line, once per target), the values still in L1.
// Inline, at every store site of every tile shape and depthwise form, the
// long activations were over a third of all kernel code and most of a
// sanitizer build's compile time. GELU ends transformers' GEMMs, and there
// the reload measured no slower (bert_encoder, swin_t): the GEMM's K steps
// outweigh it. SiLU, the EfficientNets' activation after nearly every conv,
// stays inline: applied after the store it made them 2-4 % slower.
constexpr bool IsLongAct(Act a) { return a == Act::kSigmoid || a == Act::kTanh || a == Act::kGelu; }

// WithAct for the register-tiled kernels: fn<A>() with A = ep.act, but
// A = kNone for the long activations (IsLongAct), which the kernel's store
// then applies after the fact.
// Its own switch, not WithAct's: there the four activations that come as
// kNone would inline four copies of the caller's store (0.9 MB more code).
// The cases are the activations IsLongAct is false for, kNone aside.
template <class Fn>
HWY_INLINE void WithRegAct(const Epilogue& ep, const Fn& fn) {
  static_assert(!IsLongAct(Act::kRelu) && !IsLongAct(Act::kClip) && !IsLongAct(Act::kHardSigmoid) &&
                !IsLongAct(Act::kHardSwish) && !IsLongAct(Act::kLeakyRelu) && !IsLongAct(Act::kSilu));
  switch (ep.act) {
    case Act::kRelu: return fn.template operator()<Act::kRelu>();
    case Act::kClip: return fn.template operator()<Act::kClip>();
    case Act::kHardSigmoid: return fn.template operator()<Act::kHardSigmoid>();
    case Act::kHardSwish: return fn.template operator()<Act::kHardSwish>();
    case Act::kLeakyRelu: return fn.template operator()<Act::kLeakyRelu>();
    case Act::kSilu: return fn.template operator()<Act::kSilu>();
    default: return fn.template operator()<Act::kNone>();  // kNone and the long ones
  }
}

HWY_INLINE VF ApplyAct(DF d, VF x, const Epilogue& ep) {
  VF y = x;
  WithAct(ep, [&]<Act A>() { y = ApplyActT<A>(d, x, ep); });
  return y;
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

#endif  // FCB_KERNELS_COMMON_INL_H_
