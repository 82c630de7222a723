// com.microsoft MatMulNBits (matmul_nbits.cc) and its packed form
// MatMulNBitsPacked (internal/matmul_nbits_packed.cc): what their shape
// inference refuses, as the loader sees a hostile file (shapes only).
// tests/contrib_ops_test.cc compares whole models with ONNX Runtime on every
// target, through both kernels.
#include "ops/ops_test_util.h"

#include "kernels/nbits.h"

namespace fcb::ops::testing {
namespace {

constexpr char kOp[] = "com.microsoft.MatMulNBits";

Attrs NBits(int64_t k, int64_t n, int64_t bits, int64_t block) {
  return A().I("K", k).I("N", n).I("bits", bits).I("block_size", block);
}

TEST(MatMulNBits, InferenceRefusesWhatTheKernelCannotRun) {
  // K = 40, N = 3, 4 bits, blocks of 16: 3 blocks of 8 bytes.
  const auto a = F32({2, 40}, Rand(80, 1));
  const auto b = U8({3, 3, 8}, std::vector<uint8_t>(72, 0x88));
  const auto s = F32({9}, Rand(9, 2, 0.1f, 1.f));
  const auto zp = U8({3, 2}, std::vector<uint8_t>(6, 0x88));
  ASSERT_TRUE(InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, s}).ok());
  ASSERT_TRUE(InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, F32({3, 3}, Rand(9, 2)), zp}).ok());
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 2, 16), {a, b, s}), StatusCode::kUnsupported,
                 "bits = 2 is not supported");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 3, 16), {a, b, s}), StatusCode::kInvalidArgument,
                 "bits must be 4 or 8");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 24), {a, b, s}), StatusCode::kInvalidArgument,
                 "block_size must be a power of two");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 8), {a, b, s}), StatusCode::kInvalidArgument,
                 "block_size must be a power of two");
  EXPECT_REFUSED(InferOnly(kOp, NBits(41, 3, 4, 16), {a, b, s}), StatusCode::kInvalidArgument,
                 "must have K = 41");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 16), {a, U8({3, 3, 9}, std::vector<uint8_t>(81)), s}),
                 StatusCode::kInvalidArgument, "B must be uint8 [N, k_blocks, blob_size]");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, F32({8}, Rand(8, 2))}),
                 StatusCode::kInvalidArgument, "scales 8 must be 9");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, s, U8({3}, {1, 2, 3})}),
                 StatusCode::kInvalidArgument, "uint8 zero_points");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, s, I8({6}, std::vector<int8_t>(6))}),
                 StatusCode::kUnsupported, "zero_points of type");
  EXPECT_REFUSED(InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, s, zp, I32({40}, std::vector<int32_t>(40))}),
                 StatusCode::kUnsupported, "g_idx (act-order block indices) is not supported");
  EXPECT_REFUSED(
      InferOnly(kOp, NBits(40, 3, 4, 16), {a, b, s, zp, I32({40}, std::vector<int32_t>(40)), F32({4}, Rand(4, 3))}),
      StatusCode::kUnsupported, "g_idx");
  EXPECT_REFUSED(InferOnly(kOp, NBits(int64_t{1} << 40, 3, 4, 16), {a, b, s}), StatusCode::kInvalidArgument,
                 "must be in [1, 16777216]");
  EXPECT_REFUSED(InferOnly(kOp, A().I("K", 40).I("N", 3).I("bits", 4), {a, b, s}), StatusCode::kInvalidArgument,
                 "attribute block_size is required");
}

TEST(MatMulNBits, PackedInferenceRefusesWrongPackedSizes) {
  const std::string_view op = opname::MatMulNBitsPacked;
  kernels::NBitsGeom g;
  g.k = 40, g.n = 20, g.bits = 4, g.block_size = 16;
  const auto a = F32({1, 40}, Rand(40, 1));
  const int64_t wb = kernels::NBitsWeightBytes(g), bp = kernels::NBitsBlockParams(g);
  const auto w = U8({wb}, std::vector<uint8_t>(wb)), zp = U8({bp}, std::vector<uint8_t>(bp));
  const auto s = F32({bp}, std::vector<float>(bp, 1.f));
  const Attrs at = A().I(attr::kColumns, 20).I(attr::kBits, 4).I(attr::kBlockSize, 16);
  ASSERT_TRUE(InferOnly(op, at, {a, w, s, zp}).ok());
  EXPECT_REFUSED(InferOnly(op, at, {a, U8({wb - 1}, std::vector<uint8_t>(wb - 1)), s, zp}),
                 StatusCode::kInvalidArgument, "packed weights must be uint8");
  EXPECT_REFUSED(InferOnly(op, at, {a, w, F32({bp + 1}, std::vector<float>(bp + 1)), zp}),
                 StatusCode::kInvalidArgument, "packed scales must be float32");
  EXPECT_REFUSED(InferOnly(op, A().I(attr::kColumns, 20).I(attr::kBits, 5).I(attr::kBlockSize, 16), {a, w, s, zp}),
                 StatusCode::kInvalidArgument, "bits must be 4 or 8");
  EXPECT_REFUSED(InferOnly(op, A().I(attr::kColumns, 20).I(attr::kBits, 4).I(attr::kBlockSize, 48), {a, w, s, zp}),
                 StatusCode::kInvalidArgument, "block_size must be a power of two");
  EXPECT_REFUSED(InferOnly(op, at, {a, w, s, zp, F32({19}, Rand(19, 4))}), StatusCode::kInvalidArgument,
                 "bias must have shape [20]");
}

}  // namespace
}  // namespace fcb::ops::testing
