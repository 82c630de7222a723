// PackNBits: ONNX Runtime's MatMulNBits operands into the panel layout of
// kernels/nbits.h.
#include "kernels/nbits.h"

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

}  // namespace fcb::kernels
