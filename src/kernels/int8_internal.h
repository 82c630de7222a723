// Private link between the int8 kernel compilations (int8_hwy.cc per
// Highway target, int8_x86.cc's VNNI tiles) and int8_conv.cc's tables.
#pragma once

#include <cstring>

#include "core/target.h"
#include "kernels/int8.h"
#include "kernels/kernels.h"
#include "kernels/nbits.h"

namespace fcb::kernels::internal {

// Four bytes of A (one reduction group of a row), unaligned.
inline uint32_t Load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The portable table lookup (QKernelTable::lookup).
void QLookupScalar(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n, uint8_t flip);

#if defined(__x86_64__) || defined(_M_X64)
// VNNI dot-product tiles (QTileFn); callable only where the host has the feature.
void QTileAvx512Vnni(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t panel_stride,
                     int panels, int32_t* raw);
void QTileAvxVnni(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t panel_stride,
                  int panels, int32_t* raw);
// gemm_nbits_i8 (kernels.h) on VPDPBUSD (nbits_x86.cc); callable only where
// the host has AVX512-VNNI, AVX-VNNI respectively.
void GemmNBitsI8Avx512Vnni(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                           const int32_t* a_sums, const uint8_t* qw, const float* scales, const uint8_t* zero_points,
                           const float* bias, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end);
void GemmNBitsI8Avx512VnniVbmi(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                               const int32_t* a_sums, const uint8_t* qw, const float* scales,
                               const uint8_t* zero_points, const float* bias, float* y, int64_t ldy,
                               int64_t panel_begin, int64_t panel_end);  // AVX512-VBMI too
void GemmNBitsI8AvxVnni(const NBitsGeom& g, int64_t m, const int16_t* qa, const float* a_scales,
                        const int32_t* a_sums, const uint8_t* qw, const float* scales, const uint8_t* zero_points,
                        const float* bias, float* y, int64_t ldy, int64_t panel_begin, int64_t panel_end);
// The table lookup on AVX512-VBMI byte permutes; callable only where the host has them.
void QLookupVbmi(const uint8_t* x, const uint8_t* table, uint8_t* y, int64_t n, uint8_t flip);
#endif

#if defined(__aarch64__)
// The SDOT tile (armv8.2-a dot product); callable only where the host has it.
void QTileNeonDot(const uint8_t* a, int64_t lda, int rows, int64_t k4, const int8_t* b, int64_t panel_stride,
                  int panels, int32_t* raw);
#endif

}  // namespace fcb::kernels::internal
