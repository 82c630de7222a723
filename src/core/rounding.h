// Round half to even, the rounding of every quantization in fcb (the ONNX
// operators' and the int8 weight quantizer's), independent of the
// floating-point environment's rounding mode.
#pragma once

#include <cmath>

namespace fcb {

// Nearest integer, ties to even. std::round rounds ties away from zero; a tie
// (v - round(v) is exactly +-1/2, computed exactly for every finite v) is
// rounded again as 2 * round(v / 2), the even neighbour. NaN stays NaN.
template <typename F>
F RoundHalfEven(F v) {
  F r = std::round(v);
  if (std::fabs(r - v) == F(0.5)) r = F(2) * std::round(v * F(0.5));
  return r;
}

}  // namespace fcb
