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
  EXPECT_FALSE(infer(ConvAttrs(oc, 0, {2, 2}), {x, wt, bias}).ok()) << "stride 2";
  EXPECT_FALSE(infer(ConvAttrs(oc, 0, {1, 1}, {5, 5}), {x, wt, bias}).ok()) << "5x5";
  EXPECT_FALSE(infer(ConvAttrs(oc, 0, {1, 1}, {3, 3}, 2), {x, wt, bias}).ok()) << "group 2";
  EXPECT_FALSE(infer(ConvAttrs(oc, 99), {x, wt, bias}).ok()) << "activation code";
  EXPECT_FALSE(infer(ConvAttrs(0, 0), {x, wt, bias}).ok()) << "out_channels 0";
  EXPECT_FALSE(infer(ConvAttrs(oc, 0), {x, Z({16}), bias}).ok()) << "weight size";
  EXPECT_FALSE(infer(ConvAttrs(oc, 0), {x, wt, Z({17})}).ok()) << "bias size";
  EXPECT_FALSE(infer(ConvAttrs(oc, 0), {x, wt, bias, Z({1, 8, 8, 15})}).ok()) << "residual";
  EXPECT_FALSE(infer(ConvAttrs(oc, 0), {Z({1, 8, 8}), wt, bias}).ok()) << "rank 3";
  const int64_t big = kernels::kWinogradMaxIc + 1;
  EXPECT_FALSE(infer(ConvAttrs(oc, 0), {Z({1, 4, 4, big}),
                                         Z({kernels::PackedWinogradFloats(oc, big)}), bias})
                   .ok())
      << "ic above the kernel's scratch";
  auto bf16 = ir::TensorData::Make(DType::kBF16, {kernels::PackedWinogradFloats(oc, ic)});
  EXPECT_FALSE(infer(ConvAttrs(oc, 0), {x, bf16, bias}).ok()) << "bf16 weights";
}

}  // namespace
}  // namespace fcb::ops
