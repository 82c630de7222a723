// float16 / bfloat16 conversions against a brute-force reference: the result
// must be a nearest representable value, ties to the even bit pattern.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace fcb {
namespace {

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Checks that `h` is a correct round-to-nearest-even of v among the finite
// neighbours h-1 and h+1 (same sign), with overflow to Inf allowed only past
// the largest finite value's rounding boundary `limit`.
template <typename ToDouble>
::testing::AssertionResult Nearest(double v, uint16_t h, ToDouble to_double, double limit) {
  const double got = to_double(h);
  if (std::isinf(got)) {
    if (std::fabs(v) >= limit && std::signbit(got) == std::signbit(v)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << v << " became Inf";
  }
  if (std::fabs(v) >= limit) return ::testing::AssertionFailure() << v << " should overflow to Inf";
  const double err = std::fabs(got - v);
  for (int d : {-1, 1}) {
    const uint16_t n = static_cast<uint16_t>(h + d);
    if ((n & 0x8000) != (h & 0x8000)) continue;  // wrapped across the sign bit
    const double other = to_double(n);
    if (std::isnan(other) || std::isinf(other)) continue;
    const double oerr = std::fabs(other - v);
    if (oerr < err) return ::testing::AssertionFailure() << v << " -> " << got << ", but " << other << " is nearer";
    if (oerr == err && (h & 1)) return ::testing::AssertionFailure() << v << ": tie not rounded to even";
  }
  return ::testing::AssertionSuccess();
}

TEST(Half, EveryFloat16RoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << b;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << b;
    EXPECT_EQ(DoubleToHalf(HalfToDouble(h)), h) << b;
  }
}

TEST(Half, FloatToHalfRoundsToNearestEven) {
  const double limit = 65520.0;  // 65504 + half a step: rounds up to 65536 = Inf
  uint32_t s = 12345;
  for (int i = 0; i < 300000; ++i) {
    s = s * 1664525u + 1013904223u;
    // Exponents around float16's range (2^-26 .. 2^17), random mantissa and sign.
    const uint32_t exp = 101 + (s >> 8) % 44;
    const uint32_t bits = (s & 0x80000000u) | (exp << 23) | ((s * 2654435761u) & 0x7fffff);
    const float f = FromBits(bits);
    ASSERT_TRUE(Nearest(f, FloatToHalf(f), HalfToDouble, limit)) << std::hex << bits;
  }
  // Exact ties, both directions.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -26)), 0x0001);
  EXPECT_EQ(FloatToHalf(65520.f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-65519.f), 0xfbff);
}

TEST(Half, FloatToBFloat16RoundsToNearestEven) {
  const double limit = std::ldexp(255.0 / 128 + 1.0 / 256, 127);  // max bf16 + half a step
  uint32_t s = 999;
  for (int i = 0; i < 300000; ++i) {
    s = s * 1664525u + 1013904223u;
    const uint32_t bits = s;  // any finite float
    if (((bits >> 23) & 0xff) == 0xff) continue;
    const float f = FromBits(bits);
    ASSERT_TRUE(Nearest(f, FloatToBFloat16(f), BFloat16ToDouble, limit)) << std::hex << bits;
  }
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00000001u)), 0x0000);  // below bf16's smallest subnormal / 2
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
}

TEST(Half, NanAndInfSurvive) {
  const float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(nan))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(-nan))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(nan))));
  // A NaN whose payload lies only in the low bits must not turn into Inf.
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(FromBits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0x7f800001u)))));
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(FloatToBFloat16(INFINITY), 0x7f80);
  EXPECT_EQ(HalfToFloat(0x7c00), INFINITY);
}

// float64 -> float16 rounds once: via float32 it would first land on a tie.
TEST(Half, DoubleIsRoundedOnce) {
  const double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(FloatToHalf(static_cast<float>(d)), 0x3c00);
  EXPECT_EQ(DoubleToHalf(d), 0x3c01);
}

}  // namespace
}  // namespace fcb
