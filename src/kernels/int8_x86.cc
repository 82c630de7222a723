// The x86 VNNI dot-product tiles of the int8 kernels (see int8.h): VPDPBUSD
// multiplies four unsigned bytes of A by four signed bytes of B per 32-bit
// lane and adds the four products to the lane, exactly (no saturation: the
// VPDPBUSDS form is the saturating one). A panel row of 64 bytes is four
// reduction steps of 16 columns, one ZMM register or two YMM registers.
//
// Each function carries its own target attribute instead of the file being
// compiled with -mavx512vnni: the AVX-VNNI code must not pick up AVX-512
// encodings (Alder Lake class hosts have AVX-VNNI without AVX-512), and
// nothing here runs unless int8_conv.cc found the feature on the host.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstring>

#include "kernels/int8_internal.h"

namespace fcb::kernels::internal {
namespace {


template <int MR, int NP>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void TileZmm(const uint8_t* a, int64_t lda, int64_t k4,
                                                                   const int8_t* b, int64_t pstride, int32_t* raw) {
  // Fully unrolled so that the accumulators live in registers (GCC keeps
  // a partly indexed array of vectors on the stack).
  __m512i acc[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_si512();
  for (int64_t k = 0; k < k4; k += 4) {
    __m512i bv[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_si512(b + p * pstride + k * 16);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(static_cast<int32_t>(Load4(a + r * lda + k)));
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], av, bv[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) _mm512_storeu_si512(raw + r * kQRawStride + p * 16, acc[r][p]);
}

template <int MR, int NP>
__attribute__((target("avx2,avxvnni"))) void TileYmm(const uint8_t* a, int64_t lda, int64_t k4, const int8_t* b,
                                                   int64_t pstride, int32_t* raw) {
  __m256i acc[MR][2 * NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < 2 * NP; ++p) acc[r][p] = _mm256_setzero_si256();
  for (int64_t k = 0; k < k4; k += 4) {
    __m256i bv[2 * NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      bv[2 * p] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + p * pstride + k * 16));
      bv[2 * p + 1] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + p * pstride + k * 16 + 32));
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i av = _mm256_set1_epi32(static_cast<int32_t>(Load4(a + r * lda + k)));
#pragma GCC unroll 4
      for (int p = 0; p < 2 * NP; ++p) acc[r][p] = _mm256_dpbusd_avx_epi32(acc[r][p], av, bv[p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < 2 * NP; ++p)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(raw + r * kQRawStride + p * 8), acc[r][p]);
}

using TileT = void (*)(const uint8_t*, int64_t, int64_t, const int8_t*, int64_t, int32_t*);

// Tables of instantiations by (rows - 1, panels - 1): up to 6 x 4
// accumulators (24 of the 32 ZMM registers), four B loads and six
// broadcasts per 24 VPDPBUSD.
#define FCB_ZMM_ROW(r) {TileZmm<r, 1>, TileZmm<r, 2>, TileZmm<r, 3>, TileZmm<r, 4>}
constexpr TileT kZmm[6][4] = {FCB_ZMM_ROW(1), FCB_ZMM_ROW(2), FCB_ZMM_ROW(3),
                              FCB_ZMM_ROW(4), FCB_ZMM_ROW(5), FCB_ZMM_ROW(6)};
#undef FCB_ZMM_ROW
// YMM: 16 registers; rows x panels x 2 accumulators stay within 12 (two
// panels: at most two rows).
constexpr TileT kYmm[6][2] = {{TileYmm<1, 1>, TileYmm<1, 2>}, {TileYmm<2, 1>, TileYmm<2, 2>},
                              {TileYmm<3, 1>, nullptr}, {TileYmm<4, 1>, nullptr},
                              {TileYmm<5, 1>, nullptr},       {TileYmm<6, 1>, nullptr}};

}  // namespace

void QTileAvx512Vnni(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t panel_stride,
                     int panels, int32_t* raw) {
  kZmm[rows - 1][panels - 1](a, lda, k4, b, panel_stride, raw);
}

void QTileAvxVnni(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t panel_stride,
                  int panels, int32_t* raw) {
  for (int p = 0; p < panels; p += 2) {
    const int np = panels - p < 2 ? 1 : 2;
    const int8_t* bp = b + p * panel_stride;
    int32_t* rp = raw + p * 16;
    if (np == 2 && rows > 2) {
      // Two panels take 4 accumulators per row: run the rows in pairs.
      for (int r = 0; r < rows; r += 2) {
        const int n = rows - r < 2 ? 1 : 2;
        kYmm[n - 1][1](a + r * lda, lda, k4, bp, panel_stride, rp + r * kQRawStride);
      }
      continue;
    }
    kYmm[rows - 1][np - 1](a, lda, k4, bp, panel_stride, rp);
  }
}

// Four 64-byte quarters of the table: VPERMI2B looks up 128 entries by the
// low 7 bits of each index, once in each half, and bit 7 picks the half.
namespace {
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i Map64(__m512i idx, __m512i f, __m512i t0,
                                                                           __m512i t1, __m512i t2, __m512i t3) {
  idx = _mm512_xor_si512(idx, f);
  const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1);
  const __m512i hi = _mm512_permutex2var_epi8(t2, idx, t3);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}
}  // namespace

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void QLookupVbmi(const uint8_t* x, const uint8_t* table,
                                                                       uint8_t* y, int64_t n, uint8_t flip) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) _mm512_storeu_si512(y + i, Map64(_mm512_loadu_si512(x + i), f, t0, t1, t2, t3));
  if (i < n) {
    const __mmask64 m = _cvtu64_mask64(~uint64_t{0} >> (64 - (n - i)));
    _mm512_mask_storeu_epi8(y + i, m, Map64(_mm512_maskz_loadu_epi8(m, x + i), f, t0, t1, t2, t3));
  }
}

}  // namespace fcb::kernels::internal
#endif
