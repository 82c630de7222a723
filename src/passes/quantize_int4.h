// The block quantization behind precision "int4" (quantize_int4.cc), exposed
// for its unit test and for anything that must reproduce it bit for bit
// (scripts/quantize_int4_reference.py writes the same numbers in Python).
//
// Symmetric, `bits` = 4 or 8, blocks of kInt4Block values along the
// reduction axis, one float32 scale per block, no zero point (the stored
// unsigned value is q + 2^(bits-1), MatMulNBits' default zero point):
//
//   e     = the block's first value of largest magnitude (signed)
//   scale = e / -2^(bits-1)           (float32; exact: a power-of-two divide)
//   q     = clamp(round_half_even(w / scale), -2^(bits-1), 2^(bits-1) - 1)
//           with w / scale computed in float32
//   w'    = scale * q
//
// The signed extreme maps to -2^(bits-1) exactly, so all 2^bits levels are in
// use and the step is max|w| / 8 (4 bits) rather than the max|w| / 7 of
// scale = absmax / 7; only a value of the opposite sign and (nearly) the same
// magnitude clips, to 7 steps (error <= one step). The scale is negative when
// the extreme is positive; the products are the same. An all-zero block has
// scale 0 and q 0. The padding of a last, partial block is q 0 (stored
// 2^(bits-1)) and is never read.
#pragma once

#include <cstdint>
#include <memory>

#include "ir/ir.h"

namespace fcb::passes {

inline constexpr int64_t kInt4Block = 32;

// Quantizes `len` (<= block) values w[i * stride] into q[0, len) and returns
// the block's scale (see above).
float QuantizeBlockSymmetric(const float* w, int64_t len, int64_t stride, int bits, int8_t* q);

// ONNX Runtime MatMulNBits operands for weight W [k][n] (element (kk, nn) at
// w[kk * stride_k + nn * stride_n]), quantized along k in blocks of
// kInt4Block: b uint8 [n][blocks][kInt4Block * bits / 8] (4 bits: element 2i
// in the low nibble of byte i) and scales float32 [n * blocks].
struct NBitsOperands {
  std::shared_ptr<ir::TensorData> b, scales;
  int64_t blocks = 0;
};
NBitsOperands QuantizeNBits(const float* w, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, int bits);

}  // namespace fcb::passes
