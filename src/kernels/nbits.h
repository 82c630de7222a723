// Block-quantized weights of 4 or 8 bits (ONNX Runtime's MatMulNBits): the
// geometry, the target-neutral packed layout every target reads, and its
// packer.
//
// A weight matrix W [k][n] (y = a W) is quantized along k in blocks of
// block_size: w[k][n] = scale[n][b] * (q[k][n] - zp[n][b]), b = k / block_size.
// Packed (PackNBits), in panels of kPanel = 16 columns:
//   weights      [panel][kp / 2][16] bytes for 4 bits (low nibble: k even,
//                high nibble: k odd), [panel][kp][16] bytes for 8 bits, with
//                kp = blocks * block_size (k padded to whole blocks, padding 0)
//   scales       [panel][block][16] float32
//   zero points  [panel][block][16] uint8 (the default 2^(bits-1) where the
//                model gives none)
// Columns past n (the last panel's padding) have weights, scales and zero
// points 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/packing.h"  // kPanel

namespace fcb::kernels {

struct NBitsGeom {
  int64_t k = 0, n = 0;         // reduction length, columns
  int64_t bits = 4;             // 4 or 8
  int64_t block_size = 32;      // power of two >= 16
};

inline int64_t NBitsBlocks(const NBitsGeom& g) { return (g.k + g.block_size - 1) / g.block_size; }
inline int64_t NBitsPanels(const NBitsGeom& g) { return (g.n + kPanel - 1) / kPanel; }
// Bytes of one panel's weights.
inline int64_t NBitsPanelBytes(const NBitsGeom& g) {
  return NBitsBlocks(g) * g.block_size * kPanel * g.bits / 8;
}
// Elements of the packed weights (bytes), scales and zero points.
inline int64_t NBitsWeightBytes(const NBitsGeom& g) { return NBitsPanels(g) * NBitsPanelBytes(g); }
inline int64_t NBitsBlockParams(const NBitsGeom& g) { return NBitsPanels(g) * NBitsBlocks(g) * kPanel; }

struct PackedNBits {
  std::vector<uint8_t> weights;
  std::vector<float> scales;
  std::vector<uint8_t> zero_points;
};

// Packs ONNX Runtime's MatMulNBits operands: b [n][blocks][block_size * bits
// / 8] (4 bits: element 2i in the low nibble of byte i), scales [n][blocks],
// zero_points [n][ceil(blocks * bits / 8)] packed like b (null: the default
// 2^(bits-1)).
PackedNBits PackNBits(const NBitsGeom& g, const uint8_t* b, const float* scales, const uint8_t* zero_points);

// The quantized value of weight (k, col) and the zero point of (block, col) of
// ONNX Runtime's operands, as PackNBits reads them.
inline int QuantOf(const NBitsGeom& g, const uint8_t* b, int64_t k, int64_t col) {
  const int64_t blob = g.block_size * g.bits / 8;
  const int64_t blk = k / g.block_size, i = k % g.block_size;
  const uint8_t* p = b + (col * NBitsBlocks(g) + blk) * blob;
  return g.bits == 8 ? p[i] : (p[i / 2] >> ((i & 1) * 4)) & 15;
}
inline int ZeroPointOf(const NBitsGeom& g, const uint8_t* zp, int64_t blk, int64_t col) {
  if (!zp) return 1 << (g.bits - 1);
  if (g.bits == 8) return zp[col * NBitsBlocks(g) + blk];
  const int64_t row = (NBitsBlocks(g) + 1) / 2;
  return (zp[col * row + blk / 2] >> ((blk & 1) * 4)) & 15;
}

// ONNX Runtime's quantization of A at MatMulNBits accuracy_level 4 (MLAS'
// CompInt8 path): each row of a [m][k] in blocks of block_size values (the
// last one padded with zeros), per block scale = amax / 127 and values
// round_half_even(a * (127 / amax)) (0 where amax is 0), stored as int16 in
// qa [m][blocks * block_size]; scales [m][blocks] the scales, sums
// [m][blocks] the sums of the block's quantized values. A block holding an
// infinite or NaN value gets zero values, sum 0 and a NaN scale (its outputs
// are NaN, as the float product's would be); one whose values are all below
// 127 / FLT_MAX in magnitude (subnormal: no finite inverse scale) zero values.
void QuantizeBlocksI8(const NBitsGeom& g, const float* a, int64_t m, int16_t* qa, float* scales, int32_t* sums);

}  // namespace fcb::kernels
