// PackNBits: ONNX Runtime's MatMulNBits operands into the panel layout of
// kernels/nbits.h.
#include "kernels/nbits.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fcb::kernels {

PackedNBits PackNBits(const NBitsGeom& g, const uint8_t* b, const float* scales, const uint8_t* zero_points) {
  const int64_t blocks = NBitsBlocks(g), panels = NBitsPanels(g), panel_bytes = NBitsPanelBytes(g);
  PackedNBits out;
  out.weights.assign(static_cast<size_t>(NBitsWeightBytes(g)), 0);
  out.scales.assign(static_cast<size_t>(NBitsBlockParams(g)), 0.0f);
  out.zero_points.assign(static_cast<size_t>(NBitsBlockParams(g)), 0);
  for (int64_t p = 0; p < panels; ++p) {
    uint8_t* w = out.weights.data() + p * panel_bytes;
    for (int64_t c = 0; c < kPanel && p * kPanel + c < g.n; ++c) {
      const int64_t col = p * kPanel + c;
      for (int64_t k = 0; k < g.k; ++k) {
        const int q = QuantOf(g, b, k, col);
        if (g.bits == 8)
          w[k * kPanel + c] = static_cast<uint8_t>(q);
        else
          w[k / 2 * kPanel + c] |= static_cast<uint8_t>(q << ((k & 1) * 4));
      }
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const size_t at = static_cast<size_t>((p * blocks + blk) * kPanel + c);
        out.scales[at] = scales[col * blocks + blk];
        out.zero_points[at] = static_cast<uint8_t>(ZeroPointOf(g, zero_points, blk, col));
      }
    }
  }
  return out;
}

void QuantizeBlocksI8(const NBitsGeom& g, const float* a, int64_t m, int16_t* qa, float* scales, int32_t* sums) {
  const int64_t blocks = NBitsBlocks(g), kp = blocks * g.block_size;
  for (int64_t r = 0; r < m; ++r) {
    const float* ar = a + r * g.k;
    int16_t* q = qa + r * kp;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k0 = b * g.block_size, k1 = std::min(g.k, k0 + g.block_size);
      float amax = 0.0f, poison = 0.0f;
      for (int64_t k = k0; k < k1; ++k) {
        amax = std::max(amax, std::fabs(ar[k]));
        poison += ar[k] - ar[k];  // NaN once any value is infinite or NaN
      }
      if (poison != 0.0f || !(amax <= std::numeric_limits<float>::max())) {
        // A non-finite activation has no int8 code. The block gets zero codes
        // and a NaN scale, so every output it touches is NaN, as the float
        // product would be, and no NaN reaches the float-to-int conversion
        // below (undefined behaviour in C++).
        for (int64_t k = k0; k < k0 + g.block_size; ++k) q[k] = 0;
        scales[r * blocks + b] = std::numeric_limits<float>::quiet_NaN();
        sums[r * blocks + b] = 0;
        continue;
      }
      // ONNX Runtime multiplies by the inverse scale (not divides by the
      // scale) and converts with the current rounding mode (cvtps2dq: to
      // nearest, ties to even). Adding and subtracting 1.5 * 2^23 rounds the
      // same way in the default floating-point environment (|a * inv| <= 128
      // is far below 2^22, where the sum's unit in the last place is 1) and,
      // unlike a call of std::nearbyint, lets the compiler vectorize the loop.
      // A block whose largest magnitude is below 127 / FLT_MAX (~3.7e-37,
      // subnormal) has no finite inverse scale: its codes are 0 (where ONNX
      // Runtime's conversion of an infinite product gives INT_MIN), which is
      // what its values are against any normal one.
      const float inv = amax >= 127.0f / std::numeric_limits<float>::max() ? 127.0f / amax : 0.0f;
      constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
      int32_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const float x = ar[k] * inv;
        const int v = static_cast<int>((x + kRound) - kRound);
        q[k] = static_cast<int16_t>(v);
        sum += v;
      }
      for (int64_t k = k1; k < k0 + g.block_size; ++k) q[k] = 0;
      scales[r * blocks + b] = amax / 127.0f;
      sums[r * blocks + b] = sum;
    }
  }
}

}  // namespace fcb::kernels
