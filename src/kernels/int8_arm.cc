// The AArch64 dot-product tile of the int8 kernels (see int8.h): SDOT
// multiplies four signed bytes of A by four signed bytes of B per 32-bit lane
// and adds the four products to the lane, exactly. A is unsigned, so each
// byte is shifted to signed (a - 128, an exclusive or with 0x80) and the
// shift is given back through the column sums of B:
//   sum a*b = sum (a - 128)*b + 128 * sum b,
// with sum b formed by one more SDOT against a vector of ones per panel row.
// A panel row of 64 bytes is four reduction steps of 16 columns, four NEON
// registers. (UDOT/USDOT would take uint8 A directly, but USDOT needs the
// i8mm extension, which armv8.2-a hosts lack.)
//
// This file is compiled with -march=armv8.2-a+dotprod (CMakeLists.txt) and
// -fno-tree-vectorize, and int8_conv.cc calls it only when the host reports the
// dot-product extension (HostFeatures::asimddp), whatever the target.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>

#include "kernels/int8_internal.h"

namespace fcb::kernels::internal {
namespace {


template <int MR>
void TileDot(const uint8_t* a, int64_t lda, int64_t k4, const int8_t* b, int32_t* raw) {
  int32x4_t acc[MR][4];
  int32x4_t bsum[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    bsum[j] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) acc[r][j] = vdupq_n_s32(0);
  }
  const int8x16_t ones = vdupq_n_s8(1);
  for (int64_t k = 0; k < k4; k += 4, b += 64) {
    int8x16_t bv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      bv[j] = vld1q_s8(b + 16 * j);
      bsum[j] = vdotq_s32(bsum[j], bv[j], ones);
    }
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const int8x16_t av = vreinterpretq_s8_u32(vdupq_n_u32(Load4(a + r * lda + k) ^ 0x80808080u));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r][j] = vdotq_s32(acc[r][j], bv[j], av);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) vst1q_s32(raw + r * kQRawStride + 4 * j, vaddq_s32(acc[r][j], vshlq_n_s32(bsum[j], 7)));
}

}  // namespace

void QTileNeonDot(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t panel_stride,
                  int panels, int32_t* raw) {
  for (int p = 0; p < panels; ++p)
    for (int r = 0; r < rows; r += 4) {
      const uint8_t* ar = a + r * lda;
      const int8_t* bp = b + p * panel_stride;
      int32_t* rr = raw + r * kQRawStride + p * 16;
      switch (rows - r < 4 ? rows - r : 4) {
        case 1: TileDot<1>(ar, lda, k4, bp, rr); break;
        case 2: TileDot<2>(ar, lda, k4, bp, rr); break;
        case 3: TileDot<3>(ar, lda, k4, bp, rr); break;
        default: TileDot<4>(ar, lda, k4, bp, rr); break;
      }
    }
}

}  // namespace fcb::kernels::internal
#endif
