// The portable int8 kernels (see int8.h), compiled once per Highway target
// like kernels_hwy.cc: the dot-product tile where the target has no VNNI, the
// dequantizing/requantizing epilogue, and the depthwise convolution.
//
// The tile's products: on x86, PMADDWD multiplies 16-bit lanes and adds
// adjacent pairs into 32-bit lanes (exact: |u8 * s8| <= 32640 and a pair sum
// fits easily). Elsewhere the 16-bit products (exact for the same reason)
// are split from their 32-bit container by shifts and added, the same lane
// mapping. Either way 32-bit lane i holds two of the four reduction steps of
// column i / 2, and the tile adds lane pairs at the end.
#include "kernels/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/int8_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/common-inl.h"
#include "kernels/int8.h"
#include "kernels/int8_internal.h"
#include "kernels/kernel_table_internal.h"

HWY_BEFORE_NAMESPACE();
namespace fcb::kernels::FCB_KNS {
namespace {

#if HWY_TARGET == HWY_SCALAR

void Tile(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t pstride, int panels,
          int32_t* raw) {
  for (int r = 0; r < rows; ++r)
    for (int p = 0; p < panels; ++p) {
      int32_t acc[16] = {};
      const uint8_t* ar = a + r * lda;
      const int8_t* bp = b + p * pstride;
      for (int64_t k = 0; k < k4; k += 4, bp += 64)
        for (int j = 0; j < 16; ++j)
          for (int q = 0; q < 4; ++q) acc[j] += static_cast<int32_t>(ar[k + q]) * bp[j * 4 + q];
      std::memcpy(raw + r * kQRawStride + p * 16, acc, sizeof(acc));
    }
}

#else

using D16 = hn::ScalableTag<int16_t>;
using D32 = hn::Repartition<int32_t, D16>;
using V32 = hn::Vec<D32>;

// acc + (pairwise sums of a * b), 16-bit lanes to 32-bit lanes.
HWY_INLINE V32 MulPairs(D32 d32, hn::Vec<D16> a, hn::Vec<D16> b, V32 acc) {
#if HWY_ARCH_X86
  V32 unused = hn::Zero(d32);
  return hn::ReorderWidenMulAccumulate(d32, a, b, acc, unused);
#else
  const V32 p = hn::BitCast(d32, hn::Mul(a, b));
  return hn::Add(acc, hn::Add(hn::ShiftRight<16>(hn::ShiftLeft<16>(p)), hn::ShiftRight<16>(p)));
#endif
}

template <int MR>
void TileT(const uint8_t* a, int64_t lda, int64_t k4, const int8_t* b, int64_t pstride, int panels, int32_t* raw) {
  const D16 d16;
  const D32 d32;
  const hn::Rebind<int8_t, D16> d8;
  const hn::Repartition<uint64_t, D16> d64;
  constexpr int64_t kMax16 = HWY_MAX_BYTES / 2;
  const int64_t n16 = static_cast<int64_t>(hn::Lanes(d16));
  const int64_t chunks = 64 / n16;  // vectors of 16-bit weights per panel row
  alignas(64) int32_t buf[kMax16];
  for (int p = 0; p < panels; ++p)
    for (int64_t c = 0; c < chunks; ++c) {
      V32 acc[MR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) acc[r] = hn::Zero(d32);
      const int8_t* bp = b + p * pstride + c * n16;
      for (int64_t k = 0; k < k4; k += 4, bp += 64) {
        const auto bv = hn::PromoteTo(d16, hn::LoadU(d8, bp));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const uint32_t q = internal::Load4(a + r * lda + k);
          const uint64_t pat = (q & 0xff) | (uint64_t{(q >> 8) & 0xff} << 16) | (uint64_t{(q >> 16) & 0xff} << 32) |
                               (uint64_t{q >> 24} << 48);
          acc[r] = MulPairs(d32, hn::BitCast(d16, hn::Set(d64, pat)), bv, acc[r]);
        }
      }
      for (int r = 0; r < MR; ++r) {
        hn::Store(acc[r], d32, buf);
        int32_t* dst = raw + r * kQRawStride + p * 16 + c * (n16 / 4);
        for (int64_t i = 0; i < n16 / 4; ++i) dst[i] = buf[2 * i] + buf[2 * i + 1];
      }
    }
}

void Tile(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t pstride, int panels,
          int32_t* raw) {
  // Row blocks that keep the accumulators in registers (16 on SSE4/AVX2/NEON).
  constexpr int kRows = HWY_MAX_BYTES >= 64 ? 6 : 4;
  for (int r = 0; r < rows; r += kRows) {
    const int n = std::min(kRows, rows - r);
    const uint8_t* ar = a + r * lda;
    int32_t* rr = raw + r * kQRawStride;
    switch (n) {
      case 1: TileT<1>(ar, lda, k4, b, pstride, panels, rr); break;
      case 2: TileT<2>(ar, lda, k4, b, pstride, panels, rr); break;
      case 3: TileT<3>(ar, lda, k4, b, pstride, panels, rr); break;
      case 4: TileT<4>(ar, lda, k4, b, pstride, panels, rr); break;
      case 5: TileT<5>(ar, lda, k4, b, pstride, panels, rr); break;
      default: TileT<6>(ar, lda, k4, b, pstride, panels, rr); break;
    }
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

using DI = hn::ScalableTag<int32_t>;
using DFI = hn::Rebind<float, DI>;

// Stores the first min(n, lanes) lanes of v (of tag d) without touching
// memory past them.
template <class D, typename T>
HWY_INLINE void StoreLanes(D d, hn::Vec<D> v, T* dst, int64_t n) {
  if (n >= static_cast<int64_t>(hn::Lanes(d))) {
    hn::StoreU(v, d, dst);
  } else if (n > 0) {
    alignas(64) T buf[HWY_MAX_BYTES / sizeof(T)];
    hn::StoreU(v, d, buf);
    std::memcpy(dst, buf, static_cast<size_t>(n) * sizeof(T));
  }
}

// int32 lanes saturated to int8/uint8 and stored.
template <typename Q>
HWY_INLINE void StoreQ(DI, hn::Vec<DI> v, Q* dst, int64_t n) {
  const hn::Rebind<Q, DI> dq;
  StoreLanes(dq, hn::DemoteTo(dq, v), dst, n);
}

// QuantizeLinear of float lanes already divided by the scale:
// saturate(round_half_even(q) + zp), NaN to the zero point.
template <typename Q>
HWY_INLINE void QuantizeLanes(DFI df, hn::Vec<DFI> q, int32_t zp, Q* dst, int64_t n) {
  const DI di;
  constexpr float lo = std::is_signed_v<Q> ? -128.f : 0.f, hi = std::is_signed_v<Q> ? 127.f : 255.f;
#if HWY_TARGET == HWY_AVX3
  // NaN to +0 without a mask register (fix-up table: quiet and signaling NaN
  // -> +0, every other class -> the value itself).
  q = hn::Vec<DFI>{_mm512_fixupimm_ps(q.raw, q.raw, _mm512_set1_epi32(0x11111188), 0)};
#else
  q = hn::IfThenElseZero(hn::Eq(q, q), q);
#endif
  q = hn::Min(hn::Max(q, hn::Set(df, lo - static_cast<float>(zp))), hn::Set(df, hi - static_cast<float>(zp)));
#if HWY_TARGET == HWY_AVX3
  // The clamped value converts with rounding to nearest even given in the
  // instruction (whatever MXCSR says) and the sum fits Q, so one truncating
  // narrow-and-store replaces the generic path's overflow fix-up, two packs
  // and a permute (half the time of the whole quantize loop).
  (void)di;
  const __m512i v = _mm512_add_epi32(_mm512_cvt_roundps_epi32(q.raw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm512_set1_epi32(zp));
  if (HWY_LIKELY(n >= 16)) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(v));  // a register narrow: the
  } else {                                                                      // memory form is slower
    _mm512_mask_cvtepi32_storeu_epi8(dst, static_cast<__mmask16>((1u << n) - 1), v);
  }
#else
  StoreQ(di, hn::Add(hn::ConvertTo(di, hn::Round(q)), hn::Set(di, zp)), dst, n);
#endif
}

template <Act A, QOut O>
HWY_INLINE void EpilogueRow(const QEpilogue& ep, const int32_t* raw, int64_t count, int64_t col0, int32_t rowsum,
                            void* y_row) {
  const DI di;
  const DFI df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  const auto rs = hn::Set(di, rowsum);
  for (int64_t j = 0; j < count; j += N) {
    const int64_t n = std::min(N, count - j);
    const int64_t c = col0 + j;
    auto s = hn::Add(hn::LoadU(di, raw + j), hn::LoadU(di, ep.col_add + c));
    if (ep.b_zp) s = hn::Sub(s, hn::Mul(hn::LoadU(di, ep.b_zp + c), rs));
    if constexpr (O == QOut::kInt32) {
      StoreLanes(di, s, static_cast<int32_t*>(y_row) + c, n);
    } else {
      auto v = hn::Mul(hn::ConvertTo(df, s), hn::LoadU(df, ep.mult + c));
      if (ep.bias) v = hn::Add(v, hn::LoadU(df, ep.bias + c));
      v = ApplyActT<A>(df, v, ep.act);
      if constexpr (O == QOut::kFloat) {
        StoreN(v, df, static_cast<float*>(y_row) + c, n);
      } else {
        // QLinear requantization folds 1 / y_scale into mult (q_scale 1).
        const auto q = ep.q_scale == 1.f ? v : hn::Div(v, hn::Set(df, ep.q_scale));
        using Q = std::conditional_t<O == QOut::kUint8, uint8_t, int8_t>;
        QuantizeLanes(df, q, ep.q_zp, static_cast<Q*>(y_row) + c, n);
      }
    }
  }
}

template <Act A, QOut O>
void EpilogueT(const QEpilogue& ep, const int32_t* raw, int64_t raw_stride, int rows, int64_t count, int64_t col0,
               const int32_t* rowsum, void* y_row0, int64_t ldy) {
  // A local copy: the output stores could alias `ep` for all the compiler
  // knows, which made it reload every pointer and constant per vector.
  const QEpilogue e = ep;
  for (int r = 0; r < rows; ++r)
    EpilogueRow<A, O>(e, raw + r * raw_stride, count, col0, rowsum ? rowsum[r] : 0,
                      static_cast<char*>(y_row0) + r * ldy * QOutBytes(O));
}

void Epilogue(const QEpilogue& ep, const int32_t* raw, int64_t raw_stride, int rows, int64_t count, int64_t col0,
              const int32_t* rowsum, void* y_row0, int64_t ldy) {
  WithAct(ep.act, [&]<Act A>() {
    switch (ep.out) {
      case QOut::kInt32: return EpilogueT<A, QOut::kInt32>(ep, raw, raw_stride, rows, count, col0, rowsum, y_row0, ldy);
      case QOut::kFloat: return EpilogueT<A, QOut::kFloat>(ep, raw, raw_stride, rows, count, col0, rowsum, y_row0, ldy);
      case QOut::kUint8: return EpilogueT<A, QOut::kUint8>(ep, raw, raw_stride, rows, count, col0, rowsum, y_row0, ldy);
      case QOut::kInt8: return EpilogueT<A, QOut::kInt8>(ep, raw, raw_stride, rows, count, col0, rowsum, y_row0, ldy);
    }
  });
}

template <bool kSigned>
void DepthwiseT(const ConvGeom& g, const QConvArgs& a, const int32_t* w_zp, const uint8_t* x, int64_t begin,
                int64_t end, int32_t* acc0) {
  const DI di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  using T = std::conditional_t<kSigned, int8_t, uint8_t>;
  const hn::Rebind<T, DI> dx;
  const hn::Rebind<int8_t, DI> dw;
  const int64_t C = g.ic, cp = RoundUpToPanel(C);
  const auto za = hn::Set(di, a.x_zp);
  const int64_t esize = QOutBytes(a.ep.out);
  const T* xt = reinterpret_cast<const T*>(x);
  // Pixels per epilogue call: their sums wait in scratch (rows of cp).
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(64, kQScratchBytes / 4 / cp));
  for (int64_t pix0 = begin; pix0 < end; pix0 += block) {
    const int64_t pend = std::min(end, pix0 + block);
    for (int64_t pix = pix0; pix < pend; ++pix) {
      int32_t* acc = acc0 + (pix - pix0) * cp;
      const int64_t ox = pix % g.ow, oy = (pix / g.ow) % g.oh, b = pix / (g.ow * g.oh);
      for (int64_t c0 = 0; c0 < C; c0 += N) {
        const int64_t n = std::min(N, C - c0);
        auto sum = hn::Zero(di);
        const auto wz = hn::LoadU(di, w_zp + c0);
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t iy = oy * g.sh - g.pad_top + ky * g.dh;
          if (iy < 0 || iy >= g.ih) continue;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t ix = ox * g.sw - g.pad_left + kx * g.dw;
            if (ix < 0 || ix >= g.iw) continue;
            const T* src = xt + ((b * g.ih + iy) * g.iw + ix) * g.in_pixel_stride + c0;
            hn::Vec<DI> xv;
            if (n == N) {
              xv = hn::PromoteTo(di, hn::LoadU(dx, src));
            } else {
              alignas(64) T buf[HWY_MAX_BYTES / 4] = {};
              std::memcpy(buf, src, static_cast<size_t>(n) * sizeof(T));
              xv = hn::PromoteTo(di, hn::LoadU(dx, buf));
            }
            const auto wv = hn::Sub(hn::PromoteTo(di, hn::LoadU(dw, a.w + (ky * g.kw + kx) * cp + c0)), wz);
            sum = hn::Add(sum, hn::Mul(hn::Sub(xv, za), wv));
          }
        }
        hn::StoreU(sum, di, acc + c0);
      }
    }
    Epilogue(a.ep, acc0, cp, static_cast<int>(pend - pix0), C, 0, nullptr,
             static_cast<char*>(a.y) + pix0 * g.out_pixel_stride * esize, g.out_pixel_stride);
  }
}

void Depthwise(const ConvGeom& g, const QConvArgs& a, const int32_t* w_zp, const uint8_t* x, int64_t begin,
               int64_t end, int32_t* scratch) {
  if (a.x_signed) {
    DepthwiseT<true>(g, a, w_zp, x, begin, end, scratch);
  } else {
    DepthwiseT<false>(g, a, w_zp, x, begin, end, scratch);
  }
}

// QuantizeLinear's x / scale, correctly rounded as the division gives it.
// With a native fused multiply-add the quotient comes from the reciprocal and
// one correction (Markstein: for inv = RN(1/s) and q = RN(x * inv) within an
// ulp of x / s, r = x - q*s is exact and RN(q + r*inv) is RN(x / s)), at
// several times the division's throughput. The correction gives NaN where the
// quotient is not finite (x infinite or NaN, or a quotient that overflows);
// q1 - q1 accumulates that without mask registers, and such a range is done
// again with the division (rare: only non-finite values take that path).
// A scale whose reciprocal is not a normal float takes the division too.
template <typename Q>
void QuantizeT(const float* x, int64_t n, float scale, int32_t zp, Q* y) {
  const DFI df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vs = hn::Set(df, scale);
#if HWY_NATIVE_FMA
  const float inv = 1.0f / scale;
  if (std::isnormal(inv) && std::isnormal(scale)) {
    const auto vi = hn::Set(df, inv);
    auto nonfinite = hn::Zero(df);
    auto divide = [&](hn::Vec<DFI> v) {
      const auto q = hn::Mul(v, vi);
      const auto q1 = hn::MulAdd(hn::NegMulAdd(q, vs, v), vi, q);
      nonfinite = hn::Add(nonfinite, hn::Sub(q1, q1));
      return q1;
    };
    int64_t i = 0;
    for (; i + N <= n; i += N) QuantizeLanes(df, divide(hn::LoadU(df, x + i)), zp, y + i, N);
    if (i < n) QuantizeLanes(df, divide(LoadN(df, x + i, n - i)), zp, y + i, n - i);
    if (HWY_LIKELY(hn::AllTrue(df, hn::Eq(nonfinite, nonfinite)))) return;
  }
#endif
  int64_t i = 0;
  for (; i + N <= n; i += N) QuantizeLanes(df, hn::Div(hn::LoadU(df, x + i), vs), zp, y + i, N);
  if (i < n) QuantizeLanes(df, hn::Div(LoadN(df, x + i, n - i), vs), zp, y + i, n - i);
}

void Quantize(const float* x, int64_t n, float scale, int32_t zp, bool to_signed, void* y) {
  if (to_signed) {
    QuantizeT(x, n, scale, zp, static_cast<int8_t*>(y));
  } else {
    QuantizeT(x, n, scale, zp, static_cast<uint8_t*>(y));
  }
}

template <typename T>
void DequantizeT(const T* x, int64_t n, float scale, int32_t zp, float* y) {
  const DI di;
  const DFI df;
  const hn::Rebind<T, DI> dx;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  const auto vs = hn::Set(df, scale);
  const auto vz = hn::Set(di, zp);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::Sub(hn::PromoteTo(di, hn::LoadU(dx, x + i)), vz)), vs), df, y + i);
  for (; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

void Dequantize(const void* x, bool x_signed, int64_t n, float scale, int32_t zp, float* y) {
  if (x_signed) {
    DequantizeT(static_cast<const int8_t*>(x), n, scale, zp, y);
  } else {
    DequantizeT(static_cast<const uint8_t*>(x), n, scale, zp, y);
  }
}

// NaN never counts. On x86, MINPS/MAXPS return their second operand when
// either is NaN, so Min(v, acc) keeps acc with no mask; elsewhere (NEON's
// FMIN propagates NaN) a NaN lane is masked out. Four accumulator pairs keep
// the loop throughput-bound instead of waiting on one dependency chain.
HWY_INLINE void MinMaxStep(hn::Vec<DFI> v, hn::Vec<DFI>& lo, hn::Vec<DFI>& hi) {
#if HWY_ARCH_X86
  lo = hn::Min(v, lo);
  hi = hn::Max(v, hi);
#else
  const auto ok = hn::Eq(v, v);
  lo = hn::IfThenElse(ok, hn::Min(lo, v), lo);
  hi = hn::IfThenElse(ok, hn::Max(hi, v), hi);
#endif
}

void MinMax(const float* x, int64_t n, float* mn, float* mx) {
  const DFI df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto lo0 = hn::Set(df, HUGE_VALF), hi0 = hn::Set(df, -HUGE_VALF);
  auto lo1 = lo0, lo2 = lo0, lo3 = lo0, hi1 = hi0, hi2 = hi0, hi3 = hi0;
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    MinMaxStep(hn::LoadU(df, x + i), lo0, hi0);
    MinMaxStep(hn::LoadU(df, x + i + N), lo1, hi1);
    MinMaxStep(hn::LoadU(df, x + i + 2 * N), lo2, hi2);
    MinMaxStep(hn::LoadU(df, x + i + 3 * N), lo3, hi3);
  }
  for (; i + N <= n; i += N) MinMaxStep(hn::LoadU(df, x + i), lo0, hi0);
  lo0 = hn::Min(hn::Min(lo0, lo1), hn::Min(lo2, lo3));  // accumulators hold no NaN
  hi0 = hn::Max(hn::Max(hi0, hi1), hn::Max(hi2, hi3));
  float lo = hn::GetLane(hn::MinOfLanes(df, lo0)), hi = hn::GetLane(hn::MaxOfLanes(df, hi0));
  for (; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  *mn = lo;
  *mx = hi;
}

}  // namespace

// The table lookup has one portable version for every target (x86-64-v4's
// VBMI one is chosen beside the dot-product code, in int8_conv.cc).
constexpr auto& Lookup = internal::QLookupScalar;

// The int8 code's Highway target is the manifest's i8_hwy column, not the fp32 one: every
// AArch64 target runs NEON int8 code (SVE hosts have NEON).
void FillQTable(QKernelTable* t) {
  t->isa = hwy::TargetName(HWY_TARGET);
#if HWY_TARGET == HWY_SCALAR
  t->dot = "scalar";
#elif HWY_ARCH_X86
  t->dot = "pmaddwd";
#else
  t->dot = "neon";
#endif
#define FCB_SET_KERNEL(member, fn) t->member = &fn;
  FCB_I8_KERNELS(FCB_SET_KERNEL)
#undef FCB_SET_KERNEL
}

}  // namespace fcb::kernels::FCB_KNS
HWY_AFTER_NAMESPACE();

namespace fcb::kernels::internal {
template <>
void FillQTableOf<HWY_TARGET>(QKernelTable* table) {
  FCB_KNS::FillQTable(table);
}
}  // namespace fcb::kernels::internal

#if HWY_ONCE
namespace fcb::kernels::internal {
namespace {

#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, march, i8_hwy, ...) \
  static_assert(!ArchBuilt(TargetArch::k##arch) || (HWY_TARGETS & HWY_##i8_hwy) != 0, name " needs HWY_" #i8_hwy " int8 code");
#include "core/targets.def"
#undef FCB_TARGET

template <TargetArch kArch, int64_t kHwy>
bool FillRow(QKernelTable* table) {
  if constexpr (!ArchBuilt(kArch)) {
    return false;
  } else {
    FillQTableOf<kHwy>(table);
    return true;
  }
}

}  // namespace

bool FillQKernelTable(TargetId target, QKernelTable* table) {
  switch (target) {
#define FCB_TARGET(id, name, arch, score, hwy, variant, sve, march, i8_hwy, ...) \
  case TargetId::id: return FillRow<TargetArch::k##arch, HWY_##i8_hwy>(table);
#include "core/targets.def"
#undef FCB_TARGET
  }
  return false;
}

}  // namespace fcb::kernels::internal
#endif  // HWY_ONCE
