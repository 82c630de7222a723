// The element types beyond fcb's core set: float16 / bfloat16 (bit patterns,
// computed in float32 and rounded to nearest even), int16, uint16, uint32 and
// uint64, through Cast and the elementwise ops, on every target. Expected
// values are written out by hand (bit patterns from the IEEE formats).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/ops_test_util.h"

namespace fcb::ops::testing {
namespace {

TensorPtr F16(Shape s, std::vector<uint16_t> bits) { return Typed(DType::kF16, std::move(s), bits); }
TensorPtr BF16(Shape s, std::vector<uint16_t> bits) { return Typed(DType::kBF16, std::move(s), bits); }
TensorPtr I16(Shape s, std::vector<int16_t> v) { return Typed(DType::kI16, std::move(s), v); }
TensorPtr U16(Shape s, std::vector<uint16_t> v) { return Typed(DType::kU16, std::move(s), v); }
TensorPtr U32(Shape s, std::vector<uint32_t> v) { return Typed(DType::kU32, std::move(s), v); }
TensorPtr U64(Shape s, std::vector<uint64_t> v) { return Typed(DType::kU64, std::move(s), v); }

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

A To(DType t) { return A().I("to", static_cast<int64_t>(t)); }

TEST(DTypeOps, CastFloatToFloat16RoundsToNearestEven) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest float16 subnormal
  Check("Cast", To(DType::kF16),
        {F32({12}, {1.0f, -2.5f, 65504.f, 65520.f, 65519.f, tiny, tiny / 2, tiny * 1.5f,
                    1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11),
                    -std::numeric_limits<float>::infinity(), std::ldexp(1.0f, -14) - tiny / 2})},
        {F16({12}, {0x3c00, 0xc100, 0x7bff, 0x7c00, 0x7bff, 0x0001, 0x0000, 0x0002, 0x3c00, 0x3c02,
                    0xfc00, 0x0400})});
  Check("Cast", To(DType::kF16), {F32({2}, {std::nanf(""), -1e-10f})}, {F16({2}, {0x7e00, 0x8000})});
}

TEST(DTypeOps, CastFromFloat16IsExact) {
  Check("Cast", To(DType::kF32), {F16({5}, {0x0001, 0x7bff, 0xfc00, 0x8000, 0x3555})},
        {F32({5}, {std::ldexp(1.0f, -24), 65504.f, -std::numeric_limits<float>::infinity(), -0.0f,
                   0.333251953125f})});
  Check("Cast", To(DType::kF64), {F16({2}, {0xc170, 0x7e00})}, {F64({2}, {-2.71875, std::nan("")})});
  Check("Cast", To(DType::kI32), {F16({3}, {0x4170, 0xc170, 0x7bff})}, {I32({3}, {2, -2, 65504})});
  Check("Cast", To(DType::kBool), {F16({3}, {0x0000, 0x8000, 0x0001})}, {Bool({3}, {0, 0, 1})});
}

TEST(DTypeOps, CastDoubleToFloat16RoundsOnce) {
  // Via float32 this would land exactly on a tie and round down to 1.0.
  Check("Cast", To(DType::kF16), {F64({1}, {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)})},
        {F16({1}, {0x3c01})});
}

TEST(DTypeOps, CastIntegersToFloat16) {
  Check("Cast", To(DType::kF16), {I64({3}, {70000, 2049, 2051})}, {F16({3}, {0x7c00, 0x6800, 0x6802})});
  Check("Cast", To(DType::kF16), {Bool({2}, {1, 0})}, {F16({2}, {0x3c00, 0x0000})});
}

TEST(DTypeOps, CastBFloat16) {
  Check("Cast", To(DType::kBF16),
        {F32({6}, {Bits(0x3ef5eeb0u), Bits(0x3f808000u), Bits(0x3f818000u), Bits(0x7f7fffffu),
                   Bits(0x00000001u), -0.0f})},
        {BF16({6}, {0x3ef6, 0x3f80, 0x3f82, 0x7f80, 0x0000, 0x8000})});
  Check("Cast", To(DType::kF32), {BF16({3}, {0x3f80, 0xc049, 0xff80})},
        {F32({3}, {1.0f, -3.140625f, -std::numeric_limits<float>::infinity()})});
  // float16 -> bfloat16: 1 + 2^-10 rounds to 1; 65504 rounds up to 65536.
  Check("Cast", To(DType::kBF16), {F16({2}, {0x3c01, 0x7bff})}, {BF16({2}, {0x3f80, 0x4780})});
  Check("Cast", To(DType::kF32), {BF16({1}, {0x7fc0})}, {F32({1}, {std::nanf("")})});
}

TEST(DTypeOps, CastExtraIntegers) {
  Check("Cast", To(DType::kU16), {F32({3}, {70000.f, -5.f, 3.9f})}, {U16({3}, {65535, 0, 3})});
  Check("Cast", To(DType::kI16), {I32({2}, {70000, -3})}, {I16({2}, {4464, -3})});  // wraps like C++
  Check("Cast", To(DType::kF32), {U64({1}, {~uint64_t{0}})}, {F32({1}, {18446744073709551616.f})});
  Check("Cast", To(DType::kI64), {U32({2}, {4294967295u, 7})}, {I64({2}, {4294967295, 7})});
  Check("CastLike", A(), {I16({2}, {-1, 300}), U64({0}, {})}, {U64({2}, {~uint64_t{0}, 300})});
}

TEST(DTypeOps, Float16ArithmeticRoundsEachStep) {
  // 2048 + 1 = 2049 is a tie between 2048 and 2050 -> 2048; 2048 + 3 -> 2052.
  Check("Add", A(), {F16({2}, {0x6800, 0x6800}), F16({2}, {0x3c00, 0x4200})}, {F16({2}, {0x6800, 0x6802})});
  Check("Max", A(), {F16({3}, {0x3c00, 0xc000, 0x3800}), F16({}, {0x0000})},
        {F16({3}, {0x3c00, 0x0000, 0x3800})});
  Check("Min", A(), {F16({2}, {0x3c00, 0xc000}), F16({2}, {0x4000, 0x3c00}), F16({1}, {0xbc00})},
        {F16({2}, {0xbc00, 0xc000})});
  Check("Less", A(), {F16({2}, {0x3c00, 0xc000}), F16({2}, {0x3800, 0x3800})}, {Bool({2}, {0, 1})});
  // fmod: the result takes the dividend's sign (5.5 fmod -2 = 1.5).
  Check("Mod", A().I("fmod", 1), {F16({2}, {0x4580, 0xc580}), F16({2}, {0xc000, 0x4000})},
        {F16({2}, {0x3e00, 0xbe00})});
  Check("Sum", A(), {BF16({2}, {0x3f80, 0x4000}), BF16({2}, {0x4040, 0x4080}), BF16({2}, {0x3f00, 0x3f00})},
        {BF16({2}, {0x4090, 0x40d0})});
  EXPECT_REFUSED(RunWith("Mod", A(), {F16({1}, {0x3c00}), F16({1}, {0x3c00})}, 1,
                       kernels::GetKernelTable(TargetId::kGeneric), 1)
                   , StatusCode::kInvalidArgument, "fmod must be 1 for floating-point inputs");  // float Mod needs fmod=1
  EXPECT_REFUSED(RunWith("Add", A(), {F16({1}, {0x3c00}), F32({1}, {1})}, 1,
                       kernels::GetKernelTable(TargetId::kGeneric), 1)
                   , StatusCode::kInvalidArgument, "inputs have different dtypes (float16, float32)");  // mixed dtypes
}

TEST(DTypeOps, ExtraIntegerArithmetic) {
  Check("Add", A(), {U16({2}, {65535, 1}), U16({1}, {2})}, {U16({2}, {1, 3})});  // wraps
  Check("Sub", A(), {U32({1}, {0}), U32({1}, {1})}, {U32({1}, {4294967295u})});
  Check("Mul", A(), {I16({1}, {300}), I16({1}, {300})}, {I16({1}, {24464})});
  Check("Div", A(), {U64({2}, {10, 10}), U64({2}, {3, 0})}, {U64({2}, {3, 0})});  // /0 -> 0
  // Mod with fmod=0: the result takes the divisor's sign.
  Check("Mod", A(), {I16({3}, {-7, 7, -32768}), I16({3}, {3, -3, -1})}, {I16({3}, {2, -2, 0})});
  Check("Mod", A(), {U32({2}, {7, 4294967295u}), U32({2}, {3, 10})}, {U32({2}, {1, 5})});
  Check("Max", A(), {U64({2}, {~uint64_t{0}, 5}), U64({2}, {3, uint64_t{1} << 63})},
        {U64({2}, {~uint64_t{0}, uint64_t{1} << 63})});
  Check("Min", A(), {U16({2}, {65535, 0}), U16({2}, {1, 1})}, {U16({2}, {1, 0})});
  Check("Greater", A(), {I16({2}, {-1, 5}), I16({2}, {-2, 5})}, {Bool({2}, {1, 0})});
  Check("Equal", A(), {U32({2}, {4294967295u, 1}), U32({2}, {4294967295u, 2})}, {Bool({2}, {1, 0})});
  Check("Pow", A(), {F32({2}, {2, 3}), U64({2}, {10, 2})}, {F32({2}, {1024, 9})});
  Check("Pow", A(), {F32({2}, {2, -3}), U32({2}, {3, 3})}, {F32({2}, {8, -27})});
  Check("Where", A(), {Bool({2}, {1, 0}), F16({2}, {0x3c00, 0x3c00}), F16({2}, {0x4000, 0x4000})},
        {F16({2}, {0x3c00, 0x4000})});
}

// Ops that do not handle the new types refuse them instead of miscomputing.
TEST(DTypeOps, OtherOpsRefuseTheNewTypes) {
  const auto& table = kernels::GetKernelTable(TargetId::kGeneric);
  for (const auto& t : {F16({2}, {0x3c00, 0x4000}), I16({2}, {1, 2}), U64({2}, {1, 2})}) {
    auto r = RunWith("Relu", A(), {t}, 1, table, 1);
    const std::string dtype = std::string("dtype ") + ir::DTypeName(t->dtype);
    EXPECT_REFUSED(r, StatusCode::kUnsupported, "Relu: " + dtype);
    auto s = RunWith("ReduceSum", A(), {t}, 1, table, 1);
    EXPECT_REFUSED(s, StatusCode::kUnsupported, "ReduceSum: " + dtype);
  }
}

}  // namespace
}  // namespace fcb::ops::testing
