// Symmetric per-channel int8 weights: the one weight quantizer of precision
// int8, used by passes/quantize_int8.cc (the weights of quantized
// convolutions and GEMMs) and ConvNhwc's lowering (float depthwise weights
// stored as int8).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/rounding.h"

namespace fcb::ops {

// Quantizes one channel of `count` weights, get(k) -> double, symmetrically:
// scale = max|w| / 127 as float (1 when every weight is zero or the scale
// is too small for float), put(k, q) with q = RoundHalfEven(w / scale)
// clamped to [-127, 127], computed in double. Returns the scale.
template <typename Get, typename Put>
float QuantizeChannelInt8(int64_t count, Get get, Put put) {
  double m = 0;
  for (int64_t k = 0; k < count; ++k) m = std::max(m, std::fabs(static_cast<double>(get(k))));
  float s = static_cast<float>(m / 127.0);
  if (!(s > 0.f) || !std::isfinite(s)) s = 1.f;
  for (int64_t k = 0; k < count; ++k) {
    const double r = RoundHalfEven(static_cast<double>(get(k)) / static_cast<double>(s));
    put(k, static_cast<int8_t>(std::min(127.0, std::max(-127.0, r))));
  }
  return s;
}

}  // namespace fcb::ops
