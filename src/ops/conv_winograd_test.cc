// ConvWinogradNhwc (internal/conv_winograd.cc): on every runnable target and with 1 and 3
// threads it must match ConvNhwc, the direct conv over the other packing (an
// independent path), and its shape inference must refuse every geometry the
// Winograd kernel cannot run, since it also checks untrusted files at load.

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "kernels/packing.h"
#include "ops/ops_test_util.h"

namespace fcb::ops {
namespace {

using namespace fcb::ops::testing;  // NOLINT

// The typed parameters, except that `act` may be any code (the encoding is
// what a hostile file could hold).
Attrs ConvAttrs(int64_t oc, int64_t act, std::array<int64_t, 2> strides = {1, 1},
                std::array<int64_t, 2> kernel = {3, 3}, int64_t group = 1) {
  internal::ConvParams p;
  p.kernel = kernel, p.strides = strides, p.pads = {1, 1, 1, 1};
  p.group = group, p.out_channels = oc;
  std::vector<format::AttrDesc> a = EncodeParams(p);
  for (auto& d : a)
    if (d.name == attr::kActivation) d.ints = {act};
  return Attrs(std::move(a));
}

// A float32 tensor of that shape whose contents shape inference never reads.
TensorPtr Z(Shape s) { return ir::TensorData::Make(DType::kF32, std::move(s)); }

class ConvWinogradOnTarget : public fcb::testing::PerTarget {};
FCB_INSTANTIATE_PER_TARGET(ConvWinogradOnTarget, fcb::testing::LayerTargets());

TEST_P(ConvWinogradOnTarget, MatchesDirectConv) {
  const int64_t n = 2, h = 9, w = 11, ic = 20, oc = 24;
  auto x = F32({n, h, w, ic}, Rand(n * h * w * ic, 1));
  const auto wt = Rand(oc * ic * 9, 2, -0.5f, 0.5f);
  const auto b = Rand(oc, 3);
  auto res = F32({n, h, w, oc}, Rand(n * h * w * oc, 4));
  const auto wino_w = kernels::PackWinograd(wt.data(), oc, ic);
  const auto direct_w = kernels::PackConv(wt.data(), oc, ic, 3, 3, 1);
  const auto pb = kernels::PackConvBias(b.data(), oc, 1);
  auto wino_wt = F32({static_cast<int64_t>(wino_w.size())}, wino_w);
  auto direct_wt = F32({static_cast<int64_t>(direct_w.size())}, direct_w);
  auto bias = F32({static_cast<int64_t>(pb.size())}, pb);
  const Attrs attrs = ConvAttrs(oc, static_cast<int64_t>(kernels::Act::kRelu));
  const auto& table = kernels::GetKernelTable(target_id());
  auto want = RunWith(opname::ConvNhwc, attrs, {x, direct_wt, bias, res}, 1, table, 1);
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int threads : {1, 3}) {
    auto got = RunWith(opname::ConvWinogradNhwc, attrs, {x, wino_wt, bias, res}, 1, table, threads);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(Same(*got.value()[0], *want.value()[0], 1e-4)) << "threads " << threads;
  }
}

TEST(ConvWinogradNhwc, InferenceRefusesWhatTheKernelCannotRun) {
  const int64_t ic = 16, oc = 16;
  auto x = Z({1, 8, 8, ic});
  auto wt = Z({kernels::PackedWinogradFloats(oc, ic)});
  auto bias = Z({16});
  auto infer = [](const Attrs& a, std::vector<TensorPtr> in) {
    return InferOnly(opname::ConvWinogradNhwc, a, in);
  };
  EXPECT_TRUE(infer(ConvAttrs(oc, 0), {x, wt, bias}).ok());
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0, {2, 2}), {x, wt, bias}), StatusCode::kInvalidArgument, "needs a 3x3 kernel with unit strides and dilations") << "stride 2";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0, {1, 1}, {5, 5}), {x, wt, bias}), StatusCode::kInvalidArgument, "needs a 3x3 kernel with unit strides and dilations") << "5x5";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0, {1, 1}, {3, 3}, 2), {x, wt, bias}), StatusCode::kInvalidArgument, "group must be 1") << "group 2";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 99), {x, wt, bias}), StatusCode::kInvalidArgument, "attribute 'activation' is 99, outside [0, 9]") << "activation code";
  EXPECT_REFUSED(infer(ConvAttrs(0, 0), {x, wt, bias}), StatusCode::kInvalidArgument, "attribute 'out_channels' is 0, outside [1, 16777216]") << "out_channels 0";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0), {x, Z({16}), bias}), StatusCode::kInvalidArgument, "packed weights have shape 16, expected") << "weight size";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0), {x, wt, Z({17})}), StatusCode::kInvalidArgument, "packed bias have shape 17, expected") << "bias size";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0), {x, wt, bias, Z({1, 8, 8, 15})}), StatusCode::kInvalidArgument, "residual shape 1x8x8x15 does not match the output 1x8x8x16") << "residual";
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0), {Z({1, 8, 8}), wt, bias}), StatusCode::kInvalidArgument, "input must have rank 4, got shape 1x8x8") << "rank 3";
  const int64_t big = kernels::kWinogradMaxIc + 1;
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0), {Z({1, 4, 4, big}),
                                         Z({kernels::PackedWinogradFloats(oc, big)}), bias})
                   , StatusCode::kInvalidArgument, "input channels 257 exceed 256")
      << "ic above the kernel's scratch";
  auto bf16 = ir::TensorData::Make(DType::kBF16, {kernels::PackedWinogradFloats(oc, ic)});
  EXPECT_REFUSED(infer(ConvAttrs(oc, 0), {x, bf16, bias}), StatusCode::kInvalidArgument, "packed weights must be float32, got bfloat16") << "bf16 weights";
}

}  // namespace
}  // namespace fcb::ops
