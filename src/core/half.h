// 16-bit floating-point formats: IEEE float16 (1 sign, 5 exponent, 10 mantissa
// bits) and bfloat16 (1, 8, 7: the top half of a float32). Tensors of these
// types are stored as their uint16_t bit patterns; arithmetic on them is done
// in float32 (or float64) and rounded back, as NumPy and ONNX Runtime do.
//
// Narrowing rounds to nearest, ties to even, in one step from double (so a
// float64 -> float16 cast is not rounded twice). Overflow gives +-Inf, values
// below half the smallest subnormal give +-0, NaN stays a (quiet) NaN with its
// sign and top payload bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace fcb {

namespace half_detail {

// A binary16-like format with kExp exponent and kMan mantissa bits.
template <int kExp, int kMan>
inline uint16_t FromDouble(double d) {
  uint64_t b = 0;
  std::memcpy(&b, &d, sizeof b);
  const uint16_t sign = static_cast<uint16_t>((b >> 63) << 15);
  const int exp = static_cast<int>((b >> 52) & 0x7ff);
  const uint64_t man = b & ((uint64_t{1} << 52) - 1);
  const uint16_t exp_mask = static_cast<uint16_t>(((1u << kExp) - 1) << kMan);
  if (exp == 0x7ff) {
    if (man == 0) return sign | exp_mask;  // +-Inf
    return static_cast<uint16_t>(sign | exp_mask | (1u << (kMan - 1)) | (man >> (52 - kMan)));
  }
  if (exp == 0) return sign;  // zero or a double subnormal: far below the format's range
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kEmin = 1 - kBias;
  const int e = exp - 1023;
  if (e > kBias) return sign | exp_mask;  // overflow
  // Keep kMan bits after the leading one (fewer for the format's subnormals).
  const int shift = 52 - kMan + (e < kEmin ? kEmin - e : 0);
  if (shift >= 54) return sign;  // below half the smallest subnormal
  const uint64_t sig = man | (uint64_t{1} << 52);
  uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t halfway = uint64_t{1} << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) ++q;
  // For normals q holds the leading one, which adds 1 to the exponent field;
  // a carry out of the mantissa moves on into the exponent (up to Inf).
  const uint64_t bits = e >= kEmin ? (static_cast<uint64_t>(e - kEmin) << kMan) + q : q;
  return static_cast<uint16_t>(sign | bits);
}

template <int kExp, int kMan>
inline double ToDouble(uint16_t h) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  const bool neg = (h >> 15) != 0;
  const int field = (h >> kMan) & ((1 << kExp) - 1);
  const int man = h & ((1 << kMan) - 1);
  double v;
  if (field == (1 << kExp) - 1) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (field == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - kBias - kMan);
  } else {
    v = std::ldexp(static_cast<double>(man | (1 << kMan)), field - kBias - kMan);
  }
  return neg ? -v : v;
}

}  // namespace half_detail

inline uint16_t DoubleToHalf(double d) { return half_detail::FromDouble<5, 10>(d); }
inline uint16_t FloatToHalf(float f) { return DoubleToHalf(f); }  // float -> double is exact
inline double HalfToDouble(uint16_t h) { return half_detail::ToDouble<5, 10>(h); }
inline float HalfToFloat(uint16_t h) { return static_cast<float>(HalfToDouble(h)); }  // exact

inline uint16_t DoubleToBFloat16(double d) { return half_detail::FromDouble<8, 7>(d); }
inline uint16_t FloatToBFloat16(float f) { return DoubleToBFloat16(f); }
inline float BFloat16ToFloat(uint16_t h) {  // the top half of a float32
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
inline double BFloat16ToDouble(uint16_t h) { return BFloat16ToFloat(h); }

}  // namespace fcb
